"""The fused CPU kernels of :mod:`hypermc.manifolds.math.fused` against the torch path.

Distances: values within ``VALUE_ULPS`` of :func:`batch.halfspace` and gradients within
``GRAD_ULPS`` of the sum of their terms' magnitudes, on random tables, tables spanning the
exponent range, MC pairs that are equal in the leading components, coincident points and
the trainer's ``(B, 1) x (B, K)`` shape; the backward pass is independent of the thread
count. The retraction gives the reference's bits (and takes the fused path where it
should). Everything that is not fused (nc = 1, float16, CUDA-less fallbacks, disabled)
is the torch path bit for bit.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

import hypermc as hm
from hypermc.manifolds.math import batch, fused
from hypermc.mcf import portable, registry

DTYPES = [torch.float32, torch.float64]
INTS = {torch.float32: torch.int32, torch.float64: torch.int64}

needs_fused = pytest.mark.skipif(not fused.available(torch.float64, 2), reason=f"fused kernels not in use: {fused.status()}")


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(INTS[t.dtype])


def _table(gen: torch.Generator, u: int, n: int, nc: int, dtype: torch.dtype, spread: int) -> torch.Tensor:
    """MC rows: coordinates of magnitude 10^(+-spread), heights 10^(+-spread), real tails."""
    lead = torch.randn(u, n, generator=gen, dtype=torch.float64) * 10.0 ** torch.randint(-spread, spread + 1, (u, 1), generator=gen)
    lead[:, -1] = 10.0 ** ((torch.rand(u, generator=gen, dtype=torch.float64) * 2 - 1) * spread)
    x = hm.mc(lead, nc=nc, dtype=dtype)
    eps = torch.finfo(dtype).eps
    tail = hm.mc(lead * eps * (torch.rand(u, n, generator=gen, dtype=torch.float64) - 0.5), nc=nc, dtype=dtype)
    return (x + tail).components


@needs_fused
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("nc", fused.NCS)
@pytest.mark.parametrize("c", [1.0, 0.3])
def test_distance_and_gradient_agree_with_torch(dtype, nc, c):
    assert fused.status(dtype, nc) == "in use"
    gen = torch.Generator().manual_seed(nc)
    for spread in (0, 3, 30 if dtype == torch.float64 else 8):  # float32: |q|^2 below its overflow
        rows = _table(gen, 50, 6, nc, dtype, spread)
        ia = torch.randint(50, (40, 1), generator=gen)
        ib = torch.randint(50, (40, 9), generator=gen)
        value, grad = fused.agreement(rows, ia, ib, c=c)
        assert value <= fused.VALUE_ULPS and grad <= fused.GRAD_ULPS, (spread, value, grad)
        assert fused.halfspace(rows, ia, ib, c=c).dtype == dtype


@needs_fused
def test_mc_pairs_equal_in_float64_and_coincident_points():
    """The docstring example of :func:`batch.halfspace` (distance from the tails alone), and
    ``d(x, x) = 0`` with a zero gradient, as the torch path gives."""
    x = hm.mc([[1.0, 1e-20], [1.0, 1e-20]], nc=2, dtype=torch.float64)
    rows = batch.components_of(x + hm.mc([[0.0, 0.0], [1e-22, 0.0]], nc=2, dtype=torch.float64))
    ia, ib = torch.tensor([[0], [0]]), torch.tensor([[1, 0], [0, 1]])
    leaf = rows[..., 0].clone().requires_grad_(True)
    d = fused.halfspace(rows, ia, ib, c=1.0, leaf=leaf)
    want = 2 * math.asinh(0.005)
    assert abs(d[0, 0].item() - want) <= 4 * want * 2.0**-52 and d[0, 1].item() == 0.0
    (g,) = torch.autograd.grad(d[0, 1] + d[1, 0], leaf)  # d(x, x) only
    assert torch.equal(g, torch.zeros_like(g))
    value, grad = fused.agreement(rows, ia, ib, c=1.0)
    assert value <= fused.VALUE_ULPS and grad <= fused.GRAD_ULPS


@needs_fused
@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(-300, 300), st.sampled_from([2, 3]))
@example(0, -300, 2)  # heights ~1e-300: h * h would underflow
@example(1, 300, 3)
def test_agreement_at_every_scale(seed, exponent, nc):
    gen = torch.Generator().manual_seed(seed)
    rows = _table(gen, 12, 3, nc, torch.float64, 2)
    rows = rows * 10.0**exponent  # a power of ten is not exact, but the rows stay MC numbers
    rows = hm.MCTensor.from_components(rows).components
    ia, ib = torch.randint(12, (6, 1), generator=gen), torch.randint(12, (6, 5), generator=gen)
    value, grad = fused.agreement(rows, ia, ib, c=1.0)
    assert value <= fused.VALUE_ULPS and grad <= fused.GRAD_ULPS


@needs_fused
@pytest.mark.parametrize("model", ["halfspace", "ball", "lorentz"])
def test_backward_is_independent_of_the_thread_count(model):
    gen = torch.Generator().manual_seed(3)
    if model == "halfspace":
        rows, fn = _table(gen, 3000, 10, 2, torch.float64, 2), fused.halfspace
    elif model == "ball":
        rows, fn = _ball_table(gen, 3000, 10, 2, torch.float64, 8.0), fused.ball
    else:
        assert fused.available(torch.float64, 2, "lorentz"), fused.status(model="lorentz")
        rows, fn = _lorentz_table(gen, 3000, 10, 2, torch.float64, 8.0), fused.lorentz
    ia, ib = torch.randint(3000, (600, 1), generator=gen), torch.randint(3000, (600, 51), generator=gen)
    w = torch.rand(600, 51, generator=gen, dtype=torch.float64)
    before = torch.get_num_threads()
    out = []
    try:
        for threads in (1, 2, 3):
            torch.set_num_threads(threads)
            leaf = rows[..., 0].clone().requires_grad_(True)
            d = fn(rows, ia, ib, c=1.0, leaf=leaf)
            (g,) = torch.autograd.grad((d * w).sum(), leaf)
            out.append((d, g))
    finally:
        torch.set_num_threads(before)
    for d, g in out[1:]:
        assert torch.equal(d, out[0][0]) and torch.equal(g, out[0][1])


def test_unfused_cases_are_the_torch_path():
    """float16 rows run batch.halfspace; the hyperboloid at nc = 4 has no fused kernel."""
    gen = torch.Generator().manual_seed(0)
    ia, ib = torch.tensor([[0], [2]]), torch.tensor([[1, 2, 3]])
    for rows in (_table(gen, 4, 3, 2, torch.float32, 1).to(torch.float16),):
        leaf = rows[..., 0].clone().requires_grad_(True)
        d = fused.halfspace(rows, ia, ib, c=1.0, leaf=leaf)
        ref_leaf = rows[..., 0].clone().requires_grad_(True)
        ref = batch.halfspace(rows, ia, ib, c=1.0, leaf=ref_leaf)
        assert torch.equal(d, ref)
        d.sum().backward()
        ref.sum().backward()
        assert torch.equal(leaf.grad, ref_leaf.grad)
    assert fused.available(torch.float64, 1) == fused.available(torch.float64, 2) and not fused.available(torch.float16, 2)
    assert fused.status(torch.float16, 1) == "no fused kernels for torch.float16 nc=1 (float32/float64, nc in (1, 2, 3, 4))"
    assert fused.available(torch.float64, 1, "lorentz") == fused.available(torch.float64, 2, "lorentz")  # plain tables too
    assert fused.status(torch.float64, 4, "lorentz") == "no fused kernels for torch.float64 nc=4 (float32/float64, nc in (1, 2, 3))"


def test_disabled_runs_the_torch_path(monkeypatch):
    monkeypatch.setenv("HYPERMC_NATIVE", "0")
    monkeypatch.setattr(registry, "_states", {})
    assert not fused.available(torch.float64, 2)
    assert fused.status(torch.float64, 2) == "disabled by HYPERMC_NATIVE=0"
    gen = torch.Generator().manual_seed(1)
    rows = _table(gen, 5, 3, 2, torch.float64, 1)
    ia, ib = torch.tensor([[0]]), torch.tensor([[1, 2, 3, 4]])
    assert torch.equal(fused.halfspace(rows, ia, ib, c=1.0), batch.halfspace(rows, ia, ib, c=1.0))
    comps, u = fused._retr_inputs(torch.float64, 2)
    assert torch.equal(_bits(fused.halfspace_retr(comps, u)), _bits(fused.halfspace_retr_reference(comps, u)))


@needs_fused
def test_a_failed_check_warns_and_falls_back(monkeypatch):
    monkeypatch.setattr(registry, "_states", {})
    monkeypatch.setattr(fused, "_check", lambda lib, dtype, nc, model: "halfspace f64 nc=2 (values 99.0 ulps, gradients 0.0 ulps)")
    with pytest.warns(RuntimeWarning, match=r"fused halfspace kernels disabled for torch.float64 nc=2: halfspace f64 nc=2 \(values 99"):
        assert not fused.available(torch.float64, 2)
    assert fused.status(torch.float64, 2).startswith("self-check failed: halfspace f64 nc=2")


# ------------------------------------------------------------------ the ball


def _ball_table(gen: torch.Generator, u: int, n: int, nc: int, dtype: torch.dtype, depth: float) -> torch.Tensor:
    """MC ball points at Euclidean radii ``1 - 10^-k``, ``k`` uniform in ``[0, depth]``
    (MC arithmetic: the points stay inside where float64 would round them onto the
    sphere), with real tails."""
    direction = torch.randn(u, n, generator=gen, dtype=torch.float64)
    direction = direction / torch.linalg.vector_norm(direction, dim=-1, keepdim=True)
    gap = 10.0 ** -(torch.rand(u, 1, generator=gen, dtype=torch.float64) * depth)
    x = hm.mc(direction, nc=nc + 1, dtype=torch.float64) * (1 - hm.mc(gap, nc=nc + 1, dtype=torch.float64))
    comps = x.components[..., :nc].to(dtype)
    return hm.MCTensor.from_components(comps).components


@needs_fused
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("nc", fused.NCS)
@pytest.mark.parametrize("c", [1.0, 0.3])
def test_ball_distance_and_gradient_agree_with_torch(dtype, nc, c):
    assert fused.status(dtype, nc, "ball") == "in use"
    gen = torch.Generator().manual_seed(10 + nc)
    for depth in (0.5, 6.0, 14.0 if dtype == torch.float64 else 6.0):
        rows = _ball_table(gen, 50, 6, nc, dtype, depth) * math.sqrt(1 / c)
        rows = hm.MCTensor.from_components(rows).components
        ia = torch.randint(50, (40, 1), generator=gen)
        ib = torch.randint(50, (40, 9), generator=gen)
        value, grad = fused.agreement(rows, ia, ib, c=c, model="ball")
        assert value <= fused.VALUE_ULPS and grad <= fused.GRAD_ULPS, (depth, value, grad)
        assert fused.ball(rows, ia, ib, c=c).dtype == dtype


@needs_fused
@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1), st.floats(0.0, 15.0), st.sampled_from([2, 3, 4]))
@example(0, 15.0, 2)  # 1 - |x| ~ 1e-15: float64 alone puts such points on the sphere
@example(1, 0.0, 3)
def test_ball_agreement_near_the_boundary(seed, depth, nc):
    gen = torch.Generator().manual_seed(seed)
    rows = _ball_table(gen, 12, 4, nc, torch.float64, depth)
    ia, ib = torch.randint(12, (6, 1), generator=gen), torch.randint(12, (6, 5), generator=gen)
    value, grad = fused.agreement(rows, ia, ib, c=1.0, model="ball")
    assert value <= fused.VALUE_ULPS and grad <= fused.GRAD_ULPS


@needs_fused
def test_ball_coincident_points_the_origin_and_the_cache():
    """``d(x, x) = 0`` with a zero gradient, ``d(0, x) = 2 atanh|x|``, and the per-row
    deficits are cached without a leaf (as batch.ball)."""
    table = hm.mc([[0.0, 0.0], [0.5, 0.0], [0.0, -0.5]], nc=2, dtype=torch.float64)
    rows = batch.components_of(table)
    leaf = rows[..., 0].clone().requires_grad_(True)
    d = fused.ball(rows, torch.tensor([[1], [0]]), torch.tensor([[1, 2], [1, 2]]), c=1.0, leaf=leaf)
    assert d[0, 0].item() == 0.0 and abs(d[1, 0].item() - 2 * math.atanh(0.5)) <= 4e-16
    (g,) = torch.autograd.grad(d[0, 0], leaf)
    assert torch.equal(g, torch.zeros_like(g))
    cache: dict = {}
    first = fused.ball(rows, torch.tensor([0]), torch.tensor([1]), c=1.0, cache=cache)
    assert sorted(cache) == ["deficit"] and torch.equal(cache["deficit"], batch._ball_deficit(rows, None, 1.0))
    assert torch.equal(fused.ball(rows, torch.tensor([0]), torch.tensor([1]), c=1.0, cache=cache), first)


def test_ball_unfused_cases_are_the_torch_path():
    gen = torch.Generator().manual_seed(0)
    ia, ib = torch.tensor([[0], [2]]), torch.tensor([[1, 2, 3]])
    for rows in (_ball_table(gen, 4, 3, 2, torch.float32, 2.0).to(torch.float16),):
        leaf = rows[..., 0].clone().requires_grad_(True)
        d = fused.ball(rows, ia, ib, c=1.0, leaf=leaf)
        ref_leaf = rows[..., 0].clone().requires_grad_(True)
        ref = batch.ball(rows, ia, ib, c=1.0, leaf=ref_leaf)
        assert torch.equal(d, ref)
        d.sum().backward()
        ref.sum().backward()
        assert torch.equal(leaf.grad, ref_leaf.grad)
    assert fused.available(torch.float64, 1, "ball") == fused.available(torch.float64, 2, "ball")  # plain tables are fused


def test_model_names_are_checked():
    assert fused.model_of(fused.ball) == "ball" and fused.model_of(fused.halfspace) == "halfspace"
    assert fused.model_of(fused.lorentz) == "lorentz"
    with pytest.raises(ValueError, match=r"status: model must be one of 'halfspace', 'ball', 'lorentz'; got 'hyperboloid'"):
        fused.status(torch.float64, 2, "hyperboloid")
    with pytest.raises(ValueError, match=r"applies: model must be one of 'halfspace', 'ball', 'lorentz'; got 'Ball'"):
        fused.applies(torch.zeros(3, 2, 2, dtype=torch.float64), "Ball")
    with pytest.raises(ValueError, match=r"model_of: kernel must be one of this module's fused distances \(halfspace, ball, lorentz\)"):
        fused.model_of(batch.ball)


@needs_fused
@pytest.mark.parametrize(("model", "kernel"), [("ball", "_ball_forward"), ("lorentz", "_lorentz_q")])
def test_the_ball_and_the_hyperboloid_train_and_evaluate_through_their_kernels(model, kernel, monkeypatch):
    """``train(fast=True)`` and ``evaluate(fast=True)`` on the ball and the hyperboloid call
    their fused kernels (each batch, each evaluation tile) and no torch-path batch distance."""
    from hypermc.embed import evaluate, train
    from hypermc.manifolds import Lorentz, PoincareBall
    from tests.embed.helpers import tree_closure

    assert fused.available(torch.float64, 2, model), fused.status(torch.float64, 2, model)
    manifold = {"ball": PoincareBall, "lorentz": Lorentz}[model]()
    calls = {"fused": 0, "torch": 0}
    real_fused, real_torch = getattr(fused, kernel), getattr(batch, model)

    def spy_fused(*a, **k):
        calls["fused"] += 1
        return real_fused(*a, **k)

    def spy_torch(*a, **k):
        calls["torch"] += 1
        return real_torch(*a, **k)

    monkeypatch.setattr(fused, kernel, spy_fused)
    monkeypatch.setattr(batch, model, spy_torch)
    g = tree_closure(3, 3)
    r = train(g, manifold, dim=5, nc=2, epochs=3, batch_size=32, negatives=5, fast=True, progress=False)
    assert calls["fused"] >= 3 * 3 and calls["torch"] == 0
    before = calls["fused"]
    m = evaluate(manifold, r.embeddings, g.edges, fast=True, progress=False)
    assert calls["fused"] > before and calls["torch"] == 0 and 0 < m["map"] <= 1


# ------------------------------------------------------------------ Lorentz


needs_lorentz = pytest.mark.skipif(
    not fused.available(torch.float64, 2, "lorentz"), reason=f"fused Lorentz kernels not in use: {fused.status(model='lorentz')}"
)


def _lorentz_table(gen: torch.Generator, u: int, n: int, nc: int, dtype: torch.dtype, top: float) -> torch.Tensor:
    """MC hyperboloid points (time first, ``n`` coordinates) at radii uniform in ``[0, top]``
    (``expmap0`` in MC arithmetic of MC tangent vectors with real tails)."""
    from hypermc.manifolds.math import lorentz as lorentz_math

    direction = torch.randn(u, n - 1, generator=gen, dtype=torch.float64)
    direction = direction / torch.linalg.vector_norm(direction, dim=-1, keepdim=True)
    lead = direction * torch.rand(u, 1, generator=gen, dtype=torch.float64) * top
    eps = torch.finfo(dtype).eps
    tail = lead * eps * (torch.rand(u, n - 1, generator=gen, dtype=torch.float64) - 0.5)
    tangent = hm.mc(lead, nc=nc, dtype=dtype) + hm.mc(tail, nc=nc, dtype=dtype)
    return lorentz_math.expmap0(torch.cat([torch.zeros_like(tangent[..., :1]), tangent], dim=-1)).components.contiguous()


@needs_lorentz
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("nc", fused.LORENTZ_NCS)
@pytest.mark.parametrize("c", [1.0, 0.3])
def test_lorentz_values_are_the_torch_bits_and_gradients_agree(dtype, nc, c):
    """MC tables: the torch path's bits. Plain tables (nc = 1): q = <delta, delta>_L summed
    in another order, within a few ulps of the squares' magnitudes at every radius, and
    values and gradients within the bounds where q does not cancel."""
    assert fused.status(dtype, nc, "lorentz") == "in use"
    gen = torch.Generator().manual_seed(20 + nc)
    if nc == 1:
        value, grad = fused.agreement(*fused._lorentz_plain_check_inputs(dtype), c=c, model="lorentz")
        assert value <= fused.VALUE_ULPS and grad <= fused.GRAD_ULPS, (value, grad)
    for top in (0.5, 5.0, 30.0 if dtype == torch.float64 else 8.0):
        rows = _lorentz_table(gen, 50, 6, nc, dtype, top)
        ia = torch.randint(50, (40, 1), generator=gen)
        ib = torch.randint(50, (40, 9), generator=gen)
        if nc == 1:
            rows = rows[..., :1].contiguous()
            assert fused.lorentz_plain_q_agreement(rows, ia, ib) <= fused.VALUE_ULPS
            continue
        value, grad = fused.agreement(rows, ia, ib, c=c, model="lorentz")
        assert value == 0 and grad <= fused.GRAD_ULPS, (top, value, grad)
        d = fused.lorentz(rows, ia, ib, c=c)
        assert d.dtype == dtype and torch.equal(_bits(d), _bits(batch.lorentz(rows, ia, ib, c=c)))


@needs_lorentz
@settings(max_examples=30, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.floats(0.0, 40.0),
    st.sampled_from([2, 3]),
    st.integers(2, 12),
    st.sampled_from([torch.float64, torch.float32]),
    st.sampled_from([1.0, 0.3]),
)
@example(0, 40.0, 2, 11, torch.float64, 1.0)  # coordinates ~1e17: <delta, delta>_L cancels ~34 digits
@example(1, 0.0, 3, 2, torch.float64, 0.3)  # the origin and a 1-D hyperboloid
@example(2, 12.0, 2, 5, torch.float32, 1.0)  # float32 at its range's edge
def test_lorentz_bits_at_every_radius_and_dimension(seed, top, nc, n, dtype, c):
    assert fused.available(dtype, nc, "lorentz"), fused.status(dtype, nc, "lorentz")
    gen = torch.Generator().manual_seed(seed)
    if dtype == torch.float32:
        top = min(top, 12.0)  # cosh(r)^2 below float32's overflow
    rows = _lorentz_table(gen, 12, n, nc, dtype, top)
    ia, ib = torch.randint(12, (6, 1), generator=gen), torch.randint(12, (6, 5), generator=gen)
    value, grad = fused.agreement(rows, ia, ib, c=c, model="lorentz")
    assert value == 0 and grad <= fused.GRAD_ULPS


@needs_lorentz
def test_the_gradient_check_sees_an_error_on_clamped_pairs():
    """Where ``q`` rounds below the smallest normal number the clamp cuts the gradient, so
    the tolerance there is zero: a fused gradient that is not zero on such a pair fails."""
    rows, ia, ib = fused._lorentz_check_inputs(torch.float64, 2)
    shape = torch.broadcast_shapes(ia.shape, ib.shape)
    a, b = ia.expand(shape).reshape(-1), ib.expand(shape).reshape(-1)
    q, _ = batch.minkowski_sq(rows[a], rows[b])
    clamped = (q < torch.finfo(torch.float64).tiny).nonzero().flatten()
    assert clamped.numel() > 0  # the check inputs have such pairs (coincident points)
    w = torch.zeros(shape, dtype=torch.float64)
    w.view(-1)[clamped] = 1.0  # only the clamped pairs count
    scale = fused._lorentz_term_magnitude(rows, ia, ib, 1.0, w)
    assert torch.equal(scale, torch.zeros_like(scale))
    value, grad = fused.agreement(rows, ia, ib, c=1.0, model="lorentz")  # and the fused gradient is zero there too
    assert value == 0 and grad <= fused.GRAD_ULPS


def test_indices_out_of_range_are_refused_and_negative_ones_wrap():
    """The kernels read rows without bounds checks: an index outside ``[-U, U)`` raises
    IndexError naming it (as the torch path's indexing does), a negative one counts from
    the end; boolean or CUDA index tensors take the torch path."""
    gen = torch.Generator().manual_seed(0)
    tables = {
        "halfspace": (fused.halfspace, batch.halfspace, _table(gen, 6, 3, 2, torch.float64, 1)),
        "ball": (fused.ball, batch.ball, _ball_table(gen, 6, 3, 2, torch.float64, 3.0)),
        "lorentz": (fused.lorentz, batch.lorentz, _lorentz_table(gen, 6, 3, 2, torch.float64, 3.0)),
    }
    for model, (fn, ref, rows) in tables.items():
        with pytest.raises(IndexError, match=r"ib: index 6 is out of range for 6 rows \(expected -6 <= index < 6\)"):
            fn(rows, torch.tensor([[0]]), torch.tensor([[1, 6]]), c=1.0)
        with pytest.raises(IndexError, match=r"ia: index -7 is out of range for 6 rows"):
            fn(rows, torch.tensor([[-7]]), torch.tensor([[1, 2]]), c=1.0)
        ia, ib = torch.tensor([[0], [-2]]), torch.tensor([[-1, 2], [1, -6]])
        assert torch.equal(fn(rows, ia, ib, c=1.0), fn(rows, ia % 6, ib % 6, c=1.0)), model
        mask = torch.tensor([True, False, True, False, False, False])
        assert torch.equal(fn(rows, mask, mask, c=1.0), ref(rows, mask, mask, c=1.0)), model


def test_rows_without_coordinates_take_the_torch_path():
    """Rows of zero coordinates never reach a kernel (which would read before the row):
    the torch path's answer, or its error (the hyperboloid has no time coordinate)."""
    rows = torch.zeros(4, 0, 2, dtype=torch.float64)
    ia, ib = torch.tensor([[0]]), torch.tensor([[1]])
    for fn, ref in ((fused.halfspace, batch.halfspace), (fused.ball, batch.ball)):
        assert torch.equal(fn(rows, ia, ib, c=1.0), ref(rows, ia, ib, c=1.0))
    with pytest.raises(IndexError, match="out of bounds for dimension 1 with size 0"):
        fused.lorentz(rows, ia, ib, c=1.0)


@needs_lorentz
def test_lorentz_pairs_the_kernel_rejects_take_the_torch_path(monkeypatch):
    """A zero coordinate difference (equal coordinates, coincident points) fails the traced
    fast path's check: those pairs, and only those, are recomputed by
    :func:`batch.minkowski_sq`, and the values are still the torch path's bits."""
    gen = torch.Generator().manual_seed(5)
    rows = _lorentz_table(gen, 20, 5, 2, torch.float64, 4.0)
    rows[3] = rows[2]  # coincident
    rows[5, 1] = rows[4, 1]  # one equal coordinate
    ia, ib = torch.tensor([[2], [4], [0]]), torch.tensor([[3, 1], [5, 6], [7, 8]])
    seen = []
    real = batch.minkowski_sq

    def spy(a, b):
        seen.append(a.shape[0])
        return real(a, b)

    monkeypatch.setattr(batch, "minkowski_sq", spy)
    d = fused.lorentz(rows, ia, ib, c=1.0)
    assert seen == [2]  # the pairs (2, 3) and (4, 5)
    monkeypatch.setattr(batch, "minkowski_sq", real)
    assert torch.equal(_bits(d), _bits(batch.lorentz(rows, ia, ib, c=1.0)))
    assert d[0, 0].item() < 1e-150  # q clamped at the smallest normal number, as the torch path


def test_lorentz_unfused_cases_are_the_torch_path():
    """nc = 4 (its sum of squares needs nc + 1 = 5 components) and float16 run batch.lorentz."""
    gen = torch.Generator().manual_seed(0)
    ia, ib = torch.tensor([[0], [2]]), torch.tensor([[1, 2, 3]])
    cases = (
        _lorentz_table(gen, 4, 3, 4, torch.float64, 2.0),
        _lorentz_table(gen, 4, 3, 2, torch.float32, 2.0).to(torch.float16),
    )
    for rows in cases:
        leaf = rows[..., 0].clone().requires_grad_(True)
        d = fused.lorentz(rows, ia, ib, c=1.0, leaf=leaf)
        ref_leaf = rows[..., 0].clone().requires_grad_(True)
        ref = batch.lorentz(rows, ia, ib, c=1.0, leaf=ref_leaf)
        assert torch.equal(d, ref)
        d.sum().backward()
        ref.sum().backward()
        assert torch.equal(leaf.grad, ref_leaf.grad)
    assert not fused.available(torch.float64, 4, "lorentz") and not fused.applies(cases[0], "lorentz")
    assert fused.status(torch.float64, 4, "lorentz") == "no fused kernels for torch.float64 nc=4 (float32/float64, nc in (1, 2, 3))"


def test_lorentz_status_says_why(monkeypatch):
    monkeypatch.setattr(registry, "_states", {})  # a process in which nothing was loaded yet
    monkeypatch.setenv("HYPERMC_NATIVE", "0")
    assert fused.status(torch.float64, 2, "lorentz") == "disabled by HYPERMC_NATIVE=0"
    monkeypatch.delenv("HYPERMC_NATIVE")
    monkeypatch.setattr(fused, "has_fused_addcmul", lambda device, dtype: False)
    assert fused.status(torch.float64, 2, "lorentz").startswith("no measured fused multiply-add for torch.float64 on cpu")
    assert not fused.available(torch.float64, 2, "lorentz")


# ------------------------------------------------------------------ retraction


@needs_fused
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("nc", fused.RETR_NCS)
def test_retraction_has_the_reference_bits_and_runs_fused(dtype, nc, monkeypatch):
    gen = torch.Generator().manual_seed(nc)
    comps = _table(gen, 300, 5, nc, dtype, 20)
    u = (torch.randn(300, 5, generator=gen, dtype=torch.float64) * 10.0 ** torch.randint(-8, 1, (300, 1), generator=gen)).to(dtype)
    u[:, -1] *= comps[:, -1, 0]
    if nc == 2:  # at nc >= 3 a zero product fails the fixed network's check: the reference runs
        u[::7, -1] = -1e4 * comps[::7, -1, 0]  # underflowing heights: clamped to the smallest normal number
    reference = fused.halfspace_retr_reference
    ref = reference(comps, u)
    assert fused._retr_eligible(comps, u) is not None  # loaded (and self-checked, which runs the reference) first
    calls = []
    monkeypatch.setattr(fused, "halfspace_retr_reference", lambda *a: calls.append(a) or reference(*a))
    out = fused.halfspace_retr(comps, u)
    assert not calls  # no fallback: the fused kernel made these bits
    assert torch.equal(_bits(out), _bits(ref))
    u[::7, -1] = -1e4 * comps[::7, -1, 0]
    out = fused.halfspace_retr(comps, u)
    assert len(calls) == (nc > 2) and torch.equal(_bits(out), _bits(reference(comps, u)))
    assert bool((out[::7, -1, 0] == torch.finfo(dtype).tiny).all())


@needs_fused
@pytest.mark.parametrize("nc", fused.RETR_NCS)
def test_retraction_special_values_fall_back_to_the_reference(nc):
    """Cancelling sums (a failed fixed-network check at nc >= 3), inf and NaN: the
    reference's bits, NaN and inf included."""
    comps, u = fused._retr_inputs(torch.float64, nc)
    comps = comps.clone()
    comps[3, 1, 0] = float("nan")
    u[4, 0] = float("inf")
    out = fused.halfspace_retr(comps, u)
    assert torch.equal(_bits(out), _bits(fused.halfspace_retr_reference(comps, u)))
    assert bool(out[3, 1, 0].isnan()) and out[4, 0, 0].item() == math.inf


def test_retraction_reference_is_the_mctensor_expression():
    """The component-level reference equals the MCTensor expression of `PoincareHalfspace.fast_retr`, bit for bit."""
    from hypermc.manifolds import PoincareHalfspace

    M = PoincareHalfspace()
    gen = torch.Generator().manual_seed(0)
    for nc in (1, 2, 3):
        x = M.random(200, 4, std=3.0, nc=nc, dtype=torch.float64, generator=gen)
        u = torch.randn(200, 4, dtype=torch.float64, generator=gen) * 10.0 ** torch.randint(-12, 2, (200, 1), generator=gen)
        u[::5, -1] = -800.0
        factor = portable.exp(u[..., -1:] / x.components[..., -1:, 0])
        expr = M.projx(torch.cat([x[..., :-1] + u[..., :-1], x[..., -1:] * factor], dim=-1))
        assert torch.equal(_bits(fused.halfspace_retr_reference(x.components, u)), _bits(expr.components))


@pytest.mark.cuda
def test_cuda_tensors_run_the_torch_path():
    """CUDA rows never reach the CPU kernels: distances, gradients and the retraction are
    the torch path's, on the device."""
    gen = torch.Generator().manual_seed(0)
    rows = _table(gen, 40, 5, 2, torch.float64, 3).cuda()
    ia, ib = torch.randint(40, (16, 1), generator=gen).cuda(), torch.randint(40, (16, 9), generator=gen).cuda()
    out = []
    for fn in (fused.halfspace, batch.halfspace):
        leaf = rows[..., 0].clone().requires_grad_(True)
        d = fn(rows, ia, ib, c=1.0, leaf=leaf)
        (g,) = torch.autograd.grad(d.sum(), leaf)
        out.append((d, g))
    assert out[0][0].device.type == "cuda" and torch.equal(out[0][0], out[1][0]) and torch.equal(out[0][1], out[1][1])
    comps, u = fused._retr_inputs(torch.float64, 2)
    comps, u = comps.cuda(), u.cuda()
    assert torch.equal(_bits(fused.halfspace_retr(comps, u)), _bits(fused.halfspace_retr_reference(comps, u)))
