"""Public API of hypermc.manifolds: argument checks, check_point, ManifoldParameter,
nc = 1 versus plain tensors, curvature, the Möbius operations, no NaN for valid input."""

from __future__ import annotations

import copy
import io
import math

import pytest
import torch

import hypermc as hm
from hypermc.manifolds import Euclidean, Lorentz, ManifoldParameter, PoincareBall, PoincareHalfspace
from hypermc.manifolds import convert as C
from tests.manifolds import points as P

F64 = torch.float64
ALL = [PoincareHalfspace(), PoincareBall(), Lorentz(), Euclidean()]


# --------------------------------------------------------------------- check_point


def test_check_point_reasons():
    H, B, L = PoincareHalfspace(), PoincareBall(), Lorentz()
    ok, why = H.check_point(torch.tensor([[0.0, 1.0], [1.0, 0.0], [2.0, -1.0]], dtype=F64))
    assert not ok and "x_n <= 0" in why and "2 of 3 points" in why and "(1,)" in why
    ok, why = B.check_point(hm.mc([[0.6, 0.8], [0.1, 0.1]], nc=2, dtype=F64))
    assert not ok and "norm >= 1/sqrt(c)" in why and "first at index (0,)" in why
    off = hm.mc([[2.0, 1.0, 1.0]], nc=2, dtype=F64)  # <x,x>_L = -2
    ok, why = L.check_point(off)
    assert not ok and "off the hyperboloid" in why
    ok, why = L.check_point(-L.origin(3, nc=2, dtype=F64))
    assert not ok and "x_0 <= 0" in why
    ok, why = B.check_point(torch.tensor([math.nan, 0.0], dtype=F64))
    assert not ok and "inf or NaN" in why
    for M in ALL:
        n = 3 if isinstance(M, Lorentz) else 2
        assert M.check_point(M.random(4, n, nc=2, dtype=F64)) == (True, None)
    # the far points of the acceptance tests are valid
    assert L.check_point(P.to_mc([P.lorentz_point(25, P.unit(3, 0))], 2)) == (True, None)
    assert B.check_point(P.to_mc([P.ball_point(100, P.unit(3, 0))], 3)) == (True, None)


# ------------------------------------------------------------------ argument checks


@pytest.mark.parametrize("M", ALL, ids=lambda m: type(m).__name__)
def test_argument_errors(M):
    x = M.origin(2, 3, nc=2, dtype=F64)
    with pytest.raises(ValueError, match=r"dist: the point dimensions \(last\) differ"):
        M.dist(x, M.origin(2, 4, nc=2, dtype=F64))
    with pytest.raises(ValueError, match="leading .batch. dimensions do not broadcast"):
        M.dist(x, M.origin(3, 3, nc=2, dtype=F64))
    with pytest.raises(TypeError, match="x has dtype torch.float64 but y has torch.float32"):
        M.dist(x, M.origin(2, 3, nc=2, dtype=torch.float32))
    with pytest.raises(TypeError, match="u must be a Tensor or MCTensor; got list"):
        M.expmap(x, [[0.0, 0.0, 0.0]])
    with pytest.raises(TypeError, match="floating dtype"):
        M.norm(x, torch.zeros(2, 3, dtype=torch.int64))


def test_lorentz_needs_two_coordinates():
    with pytest.raises(ValueError, match="size >= 2"):
        Lorentz().dist(torch.ones(1, dtype=F64), torch.ones(1, dtype=F64))
    with pytest.raises(ValueError, match="size must end with the point dimension"):
        Lorentz().random(3, 1, nc=2)


def test_curvature_validation():
    with pytest.raises(ValueError, match=r"PoincareBall: curvature must be a finite number < 0.0; got 1.0\. Use Euclidean"):
        PoincareBall(curvature=1.0)
    with pytest.raises(ValueError, match="Lorentz: curvature must be a finite number < 0.0; got 0.0"):
        Lorentz(curvature=0)
    with pytest.raises(ValueError, match="curvature must be a finite number < 0.0; got nan"):
        Lorentz(curvature=math.nan)
    with pytest.raises(TypeError, match="PoincareHalfspace: curvature must be a finite number < 0.0; got str '-1'"):
        PoincareHalfspace(curvature="-1")
    with pytest.raises(TypeError, match="curvature must be a float or a 0-d plain tensor"):
        PoincareBall(curvature=torch.tensor([-1.0, -2.0]))
    with pytest.raises(
        TypeError, match=r"curvature must not require grad: here the curvature is fixed .*PoincareBall\(\.\.\., learnable=True\)"
    ):
        PoincareBall(curvature=torch.tensor(-1.0, requires_grad=True))
    assert PoincareBall(curvature=torch.tensor(-2.0)).c == 2.0


def test_curvature_scales_distances():
    """d_K = d_{-1} / sqrt(c) for the same halfspace points, and through the converters."""
    c = 2.5
    x = P.to_mc([P.halfspace_point(3.0, P.unit(2, 0)), P.halfspace_point(7.0, P.unit(2, 1))], 2)
    d1 = PoincareHalfspace().dist(x[:1], x[1:])
    dk = PoincareHalfspace(curvature=-c).dist(x[:1], x[1:])
    assert ((dk * dk * c - d1 * d1).abs() <= 1e-28 * d1 * d1).all()  # c = 2.5 is exact
    b = C.halfspace_to_ball(x, curvature=-c)
    assert ((PoincareBall(curvature=-c).dist(b[:1], b[1:]) - dk).abs() <= 1e-28 * dk).all()


# ------------------------------------------------------------- plain tensors, nc = 1


@pytest.mark.parametrize("M", ALL[:3], ids=lambda m: type(m).__name__)
def test_plain_equals_nc1(M):
    """Plain float64 tensors behave as nc = 1 MCTensors (to a few ulps: MC sums with
    nc = 1 are compensated, torch.sum is not; measured: bitwise except 1.8 ulps in logmap)."""
    n = 3 if isinstance(M, Lorentz) else 2
    x = M.random(3, n, nc=None, dtype=F64, generator=torch.Generator().manual_seed(0))
    y = M.random(3, n, nc=None, dtype=F64, generator=torch.Generator().manual_seed(1))
    xm, ym = hm.mc(x, nc=1), hm.mc(y, nc=1)
    tol = dict(rtol=4 * torch.finfo(F64).eps, atol=0.0)
    torch.testing.assert_close(M.dist(x, y), M.dist(xm, ym).approx(), **tol)
    u = M.logmap(x, y)
    assert isinstance(u, torch.Tensor) and not isinstance(u, hm.MCTensor)
    torch.testing.assert_close(u, M.logmap(xm, ym).approx(), **tol)
    torch.testing.assert_close(M.expmap(x, u), M.expmap(xm, hm.mc(u, nc=1)).approx(), **tol)


# ------------------------------------------------------------------ no NaN, ever


@pytest.mark.parametrize("name", ["halfspace", "ball", "lorentz"])
def test_no_nan_for_valid_input(name):
    """Every public method on valid MC points (incl. x = y, u = 0, the origin, points at
    the MC range) returns finite values."""
    M = {"halfspace": PoincareHalfspace(), "ball": PoincareBall(), "lorentz": Lorentz()}[name]
    top = 25.0 if name == "lorentz" else 60.0
    x = P.to_mc([P.point(name, r, P.unit(2, i)) for i, r in enumerate([0.0, 1e-8, 2.0, top])], 2)
    y = torch.cat([x[:1], x[:1], x[3:], x[2:3]])  # includes y = x
    u = M.logmap(x, y)
    z = torch.zeros_like(u)
    outs = [
        M.dist(x, y),
        M.dist0(x),
        u,
        M.expmap(x, u),
        M.expmap(x, z),
        M.expmap0(z),
        M.logmap0(x),
        M.retr(x, z),
        M.transp(x, y, u),
        M.inner(x, u),
        M.norm(x, u),
        M.projx(x),
        M.proju(x, u),
        M.egrad2rgrad(x, u),
        M.logmap(x, x),
    ]
    for i, t in enumerate(outs):
        assert torch.isfinite(t.components).all(), i


def test_huge_steps_do_not_give_nan():
    """Tangent vectors of length 1e4 land at the edge of the MC range, not at NaN."""
    for M in (PoincareBall(), PoincareHalfspace()):
        x = M.random(2, 2, nc=2, dtype=F64, generator=torch.Generator().manual_seed(3))
        e = hm.mc(torch.tensor([[1.0, 0.0], [0.0, -1.0]], dtype=F64), nc=2)
        u = e * (1e4 / M.norm(x, e, keepdim=True))
        y = M.expmap(x, u)
        assert M.check_point(y) == (True, None)
        assert torch.isfinite(M.dist(x, y).components).all()


# -------------------------------------------------------------------- Möbius laws


def test_mobius_laws():
    B = PoincareBall(curvature=-1.5)
    g = torch.Generator().manual_seed(4)
    x, y = B.random(3, 3, nc=2, dtype=F64, generator=g), B.random(3, 3, nc=2, dtype=F64, generator=g)
    tol = 1e-28
    assert ((B.mobius_add(-x, B.mobius_add(x, y)) - y).abs() <= tol).all()
    assert ((B.mobius_add(x, torch.zeros_like(x)) - x).abs() <= tol).all()
    assert ((B.mobius_scalar_mul(1.0, x) - x).abs() <= tol).all()
    two = B.mobius_scalar_mul(2.0, x)
    assert ((two - B.mobius_add(x, x)).abs() <= tol).all()
    assert ((B.mobius_scalar_mul(0.5, two) - x).abs() <= tol).all()
    eye = hm.mc(torch.eye(3, dtype=F64) * 2, nc=2)
    assert ((B.mobius_matvec(eye, x) - two).abs() <= tol).all()
    assert (B.mobius_matvec(torch.zeros(2, 3, dtype=F64), x).components == 0).all()
    with pytest.raises(ValueError, match="m must be a matrix"):
        B.mobius_matvec(torch.zeros(3, dtype=F64), x)
    # expmap(x, u) = x ⊕ expmap0(P_{0->x}-free form): geoopt's definition
    u = B.logmap(x, y)
    assert B.dist(B.expmap(x, u), y).approx().max() < 1e-25


# ------------------------------------------------------------- ManifoldParameter


def test_manifold_parameter():
    M = PoincareBall()
    for nc in (2, None):
        p = hm.ManifoldParameter(M.random(4, 2, nc=nc, dtype=F64), manifold=M)
        assert isinstance(p, ManifoldParameter) and isinstance(p, torch.nn.Parameter)
        assert p.manifold is M and p.requires_grad
        q = copy.deepcopy(p)
        assert isinstance(q, ManifoldParameter) and q.manifold == M
        module = torch.nn.Module()
        module.emb = p
        assert list(module.parameters())[0] is p
    buf = io.BytesIO()
    torch.save(hm.ManifoldParameter(torch.zeros(2, 2, dtype=F64), manifold=M), buf)
    buf.seek(0)
    assert torch.load(buf, weights_only=False).manifold == M
    assert not isinstance(torch.nn.Parameter(torch.zeros(2)), ManifoldParameter)
    with pytest.raises(TypeError, match="manifold must be a hypermc manifold"):
        hm.ManifoldParameter(torch.zeros(2, 2), manifold="ball")
    with pytest.raises(ValueError, match="point dimension of size >= 2"):
        hm.ManifoldParameter(torch.zeros(3, 1), manifold=Lorentz())


def test_random_and_origin():
    g = torch.Generator().manual_seed(7)
    for M in ALL:
        n = 4 if isinstance(M, Lorentz) else 3
        x = M.random(5, n, nc=3, dtype=torch.float32, generator=g)
        assert isinstance(x, hm.MCTensor) and x.nc == 3 and x.dtype == torch.float32 and x.shape == (5, n)
        o = M.origin(n, nc=None, dtype=F64)
        assert o.dtype == F64 and not isinstance(o, hm.MCTensor)
    with pytest.raises(ValueError, match="PoincareBall.random: std must be a finite number >= 0.0; got -1.0"):
        PoincareBall().random(2, 2, std=-1.0, nc=2)
    with pytest.raises(TypeError, match="PoincareBall.random: std must be a finite number >= 0.0; got str"):
        PoincareBall().random(2, 2, std="1", nc=2)
    with pytest.raises(ValueError, match="Lorentz.origin: nc must be an int >= 1 or None"):
        Lorentz().origin(2, 3, nc=0)
    with pytest.raises(TypeError, match="PoincareHalfspace.random: dtype must be one of"):
        PoincareHalfspace().random(2, 3, nc=2, dtype=torch.int64)
    with pytest.raises(TypeError, match="PoincareHalfspace.random: generator must be a torch.Generator"):
        PoincareHalfspace().random(2, 3, generator=0, nc=2)
    with pytest.raises(TypeError, match="Euclidean.origin: size must be an int"):
        Euclidean().origin(2.5, 3, nc=2)
