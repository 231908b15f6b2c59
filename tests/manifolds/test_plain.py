"""The compensated deficit of plain points (hypermc.manifolds.math._plain) and the
one-pass membership check of the ball: exact rational arithmetic as the oracle; the C++
loop and the torch network give the same bits."""

from __future__ import annotations

from fractions import Fraction

import pytest
import torch

from hypermc.manifolds import Lorentz, PoincareBall
from hypermc.manifolds.math import _plain, common
from hypermc.mcf.eft import float_format


def _points(n: int, dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    """Random ball points, half of them within ``2^-k`` (k up to 44) of the unit sphere."""
    x = torch.randn(200, n, generator=gen, dtype=torch.float64)
    x = x / torch.linalg.vector_norm(x, dim=-1, keepdim=True)
    k = torch.randint(1, 45, (200, 1), generator=gen).to(torch.float64)
    r = torch.where(torch.arange(200).unsqueeze(-1) % 2 == 0, 1 - torch.exp2(-k), torch.rand(200, 1, generator=gen, dtype=torch.float64))
    out = (x * r).to(dtype)
    out[0] = 0.0
    return out


def _exact(x: torch.Tensor, c: float) -> list[Fraction]:
    return [1 - Fraction(c) * sum(Fraction(v) ** 2 for v in row) for row in x.to(torch.float64).tolist()]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("n", [1, 2, 5, 16])
@pytest.mark.parametrize("c", [1.0, 0.3, 4.0])
def test_deficit_against_exact_rationals(dtype: torch.dtype, n: int, c: float, rng: torch.Generator) -> None:
    """Dot2's bound: |D - exact| <= u |exact| + gamma_n^2 c|x|^2 (float64 arithmetic, so
    gamma_n of float64 for both dtypes), plus half an ulp of the final rounding to float32."""
    x = _points(n, dtype, rng)
    if c != 1.0:
        x = (x.to(torch.float64) / c**0.5).to(dtype)
    d = _plain.deficit(x, c)
    assert d.dtype == dtype and d.shape == x.shape[:-1]
    u64 = Fraction(1, 2**53)
    gamma2 = (n * u64 / (1 - n * u64)) ** 2
    u = Fraction(1, 2 ** float_format(dtype).p)
    for got, exact, row in zip(d.tolist(), _exact(x, c), x.to(torch.float64).tolist()):
        s = Fraction(c) * sum(Fraction(v) ** 2 for v in row)
        bound = u64 * abs(exact) + gamma2 * s + (u * abs(exact) if dtype == torch.float32 else 0)
        assert abs(Fraction(got) - exact) <= bound, (row, got, float(exact))


def test_deficit_resolves_what_the_rounded_square_loses() -> None:
    x = torch.tensor([[1 - 2.0**-40, 0.0], [0.6, 0.8]], dtype=torch.float64)
    d = _plain.deficit(x, 1.0)
    assert d[0].item() == 2.0**-39 - 2.0**-80  # 1 - fl(|x|^2) = 2^-39
    exact = 1 - (Fraction(0.6) ** 2 + Fraction(0.8) ** 2)  # -2^-54 -ish: 0.6, 0.8 are not exact
    assert exact != 0 and abs(Fraction(d[1].item()) - exact) <= abs(exact) * Fraction(1, 2**52)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("c", [1.0, 0.3])
def test_native_loop_equals_torch_network_bitwise(dtype: torch.dtype, c: float, rng: torch.Generator) -> None:
    if _plain.status() != "in use":
        pytest.skip(f"no C++ loop here: {_plain.status()}")
    for n in (1, 3, 16):
        x = _points(n, dtype, rng)
        ints = torch.int64 if dtype == torch.float64 else torch.int32
        assert torch.equal(_plain.deficit(x, c).view(ints), _plain.deficit_torch(x, c).view(ints))
        xt = x.t().contiguous().t()  # non-contiguous input
        assert torch.equal(_plain.deficit(xt, c).view(ints), _plain.deficit_torch(x, c).view(ints))
    assert _plain.deficit(torch.zeros(0, 4, dtype=dtype), c).shape == (0,)
    assert _plain.deficit(torch.zeros(2, 0, 3, dtype=dtype), c).shape == (2, 0)


def test_torch_network_without_the_native_loop(monkeypatch: pytest.MonkeyPatch, rng: torch.Generator) -> None:
    x = _points(5, torch.float64, rng)
    want = _plain.deficit_torch(x, 1.0)
    monkeypatch.setattr(_plain, "_library", lambda: None)
    assert torch.equal(_plain.deficit(x, 1.0), want)
    x16 = x.to(torch.float16)  # computed in float64, rounded once
    assert torch.equal(_plain.deficit(x16, 1.0), _plain.deficit_torch(x16.to(torch.float64), 1.0).to(torch.float16))


def test_non_finite_points_give_a_non_positive_or_nan_deficit() -> None:
    x = torch.tensor([[float("inf"), 0.0], [float("nan"), 0.0], [1e200, 0.0], [0.5, 0.0]], dtype=torch.float64)
    d = _plain.deficit(x, 1.0)
    assert not (d[:3] > 0).any() and d[3].item() == 0.75


def test_common_deficit_gradient_and_value_paths_agree(rng: torch.Generator) -> None:
    """With and without autograd the same numbers; the gradient is -2 c x."""
    x = _points(5, torch.float64, rng).requires_grad_()
    d = common.deficit(x, c=2.0)
    with torch.no_grad():
        assert torch.equal(d.detach(), common.deficit(x, c=2.0))
    d.sum().backward()
    assert torch.equal(x.grad, x.detach() * -4.0)


def test_ball_check_one_pass_and_its_messages() -> None:
    M = PoincareBall()
    x = torch.tensor([[0.5, 0.0], [0.0, 0.3]], dtype=torch.float64)
    assert M._points_ok(x, x) and not M._points_ok(x, torch.tensor([[1.0, 0.0]], dtype=torch.float64))
    M.dist(x, x)  # passes
    with pytest.raises(ValueError, match=r"PoincareBall.dist: y is not a point .*outside the ball.*first at index \(1,\)"):
        M.dist(x, torch.tensor([[0.5, 0.0], [0.6, 0.8]], dtype=torch.float64))
    with pytest.raises(ValueError, match=r"PoincareBall.logmap: x is not a point .*contains inf or NaN"):
        M.logmap(torch.tensor([float("nan"), 0.0], dtype=torch.float64), x)
    assert M.dist(torch.tensor([1.0, 0.0], dtype=torch.float64), x[0], check=False).isinf()  # on the boundary


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_lorentz_one_pass_check_accepts_exactly_what_check_point_accepts(dtype) -> None:
    """The one-pass membership test of plain hyperboloid points never accepts a point
    that check_point rejects (and here agrees on every case): points on the sheet at
    radii up to 30, points nudged off it by relative 1e-18..1e-6, the lower sheet,
    inf and NaN coordinates; the errors still name the argument and the reason."""
    M = Lorentz()
    gen = torch.Generator().manual_seed(3)
    for trial in range(60):
        v = torch.randn(40, 4, dtype=torch.float64, generator=gen) * float(torch.rand((), generator=gen) * 30)
        v[:, 0] = 0
        x = M.expmap0(v.to(dtype))
        y = x.clone()
        i, j = int(torch.randint(0, 40, (), generator=gen)), int(torch.randint(0, 4, (), generator=gen))
        y[i, j] = y[i, j] * (1 + 10.0 ** float(torch.randint(-18, -6, (), generator=gen)))
        for z in (x, y):
            assert M._points_ok(z) == M.check_point(z)[0], trial
    inf, nan = float("inf"), float("nan")
    edges = [[-2.0, 0.0, 0.0, 3.0**0.5], [inf, 1.0, 0.0, 0.0], [1.0, nan, 0.0, 0.0], [inf, inf, 0.0, 0.0]]
    for row in edges:
        z = torch.tensor([row], dtype=dtype)
        assert not M._points_ok(z) and not M.check_point(z)[0]
    o = M.origin(2, 4, dtype=dtype)
    with pytest.raises(ValueError, match=r"Lorentz.dist: y is not a point .*time coordinate x_0 <= 0"):
        M.dist(o, torch.tensor([[1.0, 0.0, 0.0, 0.0], [-1.0, 0.0, 0.0, 0.0]], dtype=dtype))
    with pytest.raises(ValueError, match=r"Lorentz.dist: x is not a point .*inf or NaN"):
        M.dist(torch.tensor([[1.0, float("nan"), 0.0, 0.0]], dtype=dtype), o[:1])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_lorentz_unscaled_difference_norm_has_the_scaled_bits(dtype) -> None:
    """The Lorentz distance's |x - y|_L of plain tensors skips the per-row scaling where
    no square over- or underflows: the same bits as the scaled form on random points,
    and the scaled form itself as soon as one row needs it (equal points, differences of
    1e-30 (float32) / 1e-300 (float64), coordinates whose squares overflow), gradient too."""
    from hypermc.manifolds.math import lorentz as L

    gen = torch.Generator().manual_seed(7)
    u = torch.randn(500, 9, generator=gen, dtype=dtype) * 3
    v = torch.randn(500, 9, generator=gen, dtype=dtype) * 3
    u[:, 0] = v[:, 0] = 0
    delta = L.expmap0(u) - L.expmap0(v)
    fast = L._sqdist_l_unscaled(delta)
    assert fast is not None and torch.equal(fast, L._sqdist_l_scaled(delta))
    assert torch.equal(L.sqdist_l(delta), fast[..., 0])
    tiny = 1e-30 if dtype == torch.float32 else 1e-300
    huge = 1e25 if dtype == torch.float32 else 1e200
    for row in (torch.zeros(9, dtype=dtype), torch.full((9,), tiny, dtype=dtype), torch.full((9,), huge, dtype=dtype)):
        mixed = torch.cat([delta, row.unsqueeze(0)]).requires_grad_()
        assert L._sqdist_l_unscaled(mixed.detach()) is None
        got = L.sqdist_l(mixed)
        want = L._sqdist_l_scaled(mixed.detach())[..., 0]
        assert torch.equal(got.detach(), want)
        assert got[-1] > 0 or not bool(row.any())  # 1e-300 is not lost to the squares' underflow
        got.sum().backward()
        assert torch.isfinite(mixed.grad[:-1]).all()


@pytest.fixture
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Row blocks of 64 rows (:data:`common.ROW_BLOCK_ALIGN`) of 17 float64 values, from 64
    elements on: the blocked path on small tensors, with a short last block."""
    monkeypatch.setattr(common, "ROW_BLOCK_MIN", 64)
    monkeypatch.setattr(common, "ROW_BLOCK_BYTES", 64 * 17 * 8)


def _lorentz_pairs(rows: int, dtype: torch.dtype, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    from hypermc.manifolds.math import lorentz as L

    u = torch.randn(rows, 17, generator=gen, dtype=dtype) * 3
    v = torch.randn(rows, 17, generator=gen, dtype=dtype) * 3
    u[:, 0] = v[:, 0] = 0
    x, y = L.expmap0(u), L.expmap0(v)
    y[5] = x[5]  # equal points and a tiny difference: rows of the scaled form in some blocks
    y[40, 3] = x[40, 3] + (1e-30 if dtype == torch.float32 else 1e-300)
    y[40] = L.projx(y[40])
    return x, y


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_row_blocked_lorentz_dist_has_the_one_pass_bits(small_blocks: None, dtype: torch.dtype) -> None:
    """Large plain Lorentz points without an autograd graph are measured block by block
    (with the membership check in the same pass): the same bits as one pass over all
    rows, which runs where a gradient is recorded; leading dims are kept."""
    gen = torch.Generator().manual_seed(11)
    x, y = _lorentz_pairs(197, dtype, gen)
    M = Lorentz()
    assert common.row_blocks_apply(x, y)
    blocked, blocked_nocheck = M.dist(x, y), M.dist(x, y, check=False)
    xg = x.clone().requires_grad_()
    assert not common.row_blocks_apply(xg, y)
    one_pass = M.dist(xg, y)
    assert torch.equal(blocked, one_pass.detach()) and torch.equal(blocked_nocheck, blocked)
    assert blocked[5] == 0 and torch.isfinite(blocked).all()
    assert torch.equal(M.dist(x, y, keepdim=True)[..., 0], blocked)
    batched = M.dist(x[:100].reshape(4, 25, 17), y[:100].reshape(4, 25, 17))
    assert batched.shape == (4, 25) and torch.equal(batched.reshape(-1), M.dist(x[:100], y[:100]))


@pytest.mark.parametrize("model", ["ball", "lorentz"])
def test_row_blocked_dist_check_names_the_bad_argument(small_blocks: None, model: str) -> None:
    """The check inside the blocked pass refuses a point off the manifold, in any block,
    with check_point's reason; check=False computes; the other methods' pre-check too."""
    gen = torch.Generator().manual_seed(12)
    M: PoincareBall | Lorentz
    if model == "ball":
        M, reason = PoincareBall(), "outside the ball"
        x, y = _points(17, torch.float64, gen)[:150], _points(17, torch.float64, gen)[:150]
        y[148] = y[148] / torch.linalg.vector_norm(y[148]) * 1.5  # in the last block
    else:
        M, reason = Lorentz(), "off the hyperboloid"
        x, y = _lorentz_pairs(150, torch.float64, gen)
        y[148, 0] *= 1.5  # in the last block
    name = type(M).__name__
    with pytest.raises(ValueError, match=rf"{name}\.dist: y is not a point of .*{reason}"):
        M.dist(x, y)
    assert M.dist(x, y, check=False).shape == (150,)
    x[3, 0] = float("nan")
    with pytest.raises(ValueError, match=rf"{name}\.dist: x is not a point"):
        M.dist(x, y)
    with pytest.raises(ValueError, match=rf"{name}\.expmap: x is not a point"):
        M.expmap(x, y)
    with pytest.raises(TypeError, match=rf"{name}\.dist: check must be True or False; got str"):
        M.dist(x, y, check="yes")


def test_row_blocks_apply_only_to_large_plain_cpu_tensors_without_a_graph(small_blocks: None) -> None:
    import hypermc as hm

    a = torch.zeros(10, 17, dtype=torch.float64)
    assert common.row_blocks_apply(a, a)
    assert not common.row_blocks_apply(a[:3], a[:3])  # below ROW_BLOCK_MIN
    assert not common.row_blocks_apply(a, a[:1])  # broadcasting: one call
    assert not common.row_blocks_apply(a[0], a[0])  # one point
    assert not common.row_blocks_apply(hm.mc(a, nc=2), hm.mc(a, nc=2))
    assert not common.row_blocks_apply(a.clone().requires_grad_(), a)
    with torch.no_grad():
        assert common.row_blocks_apply(a.clone().requires_grad_(), a)
    pair = common.row_blocked(lambda p, q: (p.sum(-1), q[..., :2]), a + 1, a)
    assert pair[0].shape == (10,) and pair[1].shape == (10, 2) and bool((pair[0] == 17).all())


@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")
def test_lorentz_dist_compiles_in_one_graph_without_blocks(small_blocks: None) -> None:
    """Under torch.compile the distance is one traced pass (no row blocks, no guards on
    the row count), fullgraph, and agrees with the eager blocked result."""
    x, y = _lorentz_pairs(45, torch.float64, torch.Generator().manual_seed(13))
    M = Lorentz()
    torch._dynamo.reset()
    compiled = torch.compile(lambda a, b: M.dist(a, b, check=False), fullgraph=True)
    got, want = compiled(x, y), M.dist(x, y)
    assert common.row_blocks_apply(x, y)
    torch.testing.assert_close(got, want, rtol=1e-13, atol=1e-300)
    torch._dynamo.reset()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_row_blocked_ball_methods_have_the_one_pass_bits(small_blocks: None, dtype: torch.dtype, rng: torch.Generator) -> None:
    """dist, expmap, logmap and mobius_add of large plain ball points without an autograd
    graph run block by block (dist with the membership check in its pass): the same bits
    as one pass, which runs where a gradient is recorded; leading dims kept."""
    from hypermc.manifolds.math import ball as B

    M = PoincareBall()
    x = M.projx(_points(17, torch.float64, rng)[:197].to(dtype))  # 197 rows of 17: blocks of 64 rows (float64)
    y = M.projx(_points(17, torch.float64, rng)[:197].flip(0).to(dtype))
    y[3] = x[3]
    u = (torch.randn(197, 17, generator=rng, dtype=torch.float64) * 0.3).to(dtype)
    assert common.row_blocks_apply(x, y)
    xg = x.clone().requires_grad_()
    pairs = [
        (lambda a: M.dist(a, y), "dist"),
        (lambda a: M.dist(a, y, check=False), "dist check=False"),
        (lambda a: B.expmap(a, u), "expmap"),
        (lambda a: B.logmap(a, y), "logmap"),
        (lambda a: B.mobius_add(a, y), "mobius_add"),
    ]
    for fn, name in pairs:
        blocked, one_pass = fn(x), fn(xg).detach()
        assert torch.equal(blocked, one_pass), name
    assert M.dist(x, y)[3] == 0
    batched = M.dist(x[:196].reshape(2, 98, 17), y[:196].reshape(2, 98, 17))
    assert batched.shape == (2, 98) and torch.equal(batched.reshape(-1), M.dist(x[:196], y[:196]))
