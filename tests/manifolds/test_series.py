"""The removable-singularity helpers on their series branch, against mpmath.

Below their thresholds the helpers of :mod:`hypermc.manifolds.math.common` (``tanh(z)/z``,
...) and :mod:`hypermc.manifolds.math.stereographic` (``tan_k(z)/z`` in ``s = k z^2``,
...) are Taylor polynomials. Their coefficients (``-1/3``, ``2/15``, ...) must be rounded
to the operand's precision, not to float64's: with float64 coefficients the error is
``u |z|^2`` (nc = 2 just below the threshold: ``~1e-28``, far above ``u^2 ~ 1e-32``).
Checked at nc = 2, 3 just below, well below and far below each threshold, both signs,
within the ``"transcendental"`` bound (64 u^nc, relative).
"""

from __future__ import annotations

from fractions import Fraction

import mpmath
import pytest
import torch

import hypermc as hm
from hypermc.manifolds.math import common
from hypermc.manifolds.math import stereographic as S
from hypermc.mcf.eft import float_pieces, piece_count
from tests.conftest import BOUNDS

F64 = torch.float64
PREC = 400


def _ref_common(name: str, z: mpmath.mpf) -> mpmath.mpf:
    return {
        "tanhc": lambda: mpmath.tanh(z) / z,
        "sinhc": lambda: mpmath.sinh(z) / z,
        "x_over_sinh": lambda: z / mpmath.sinh(z),
        "x_over_tanh": lambda: z / mpmath.tanh(z),
        "asinhc": lambda: mpmath.asinh(z) / z,
        "expm1c": lambda: -mpmath.expm1(-z) / z,
    }[name]()


def _ref_even(name: str, s: mpmath.mpf) -> mpmath.mpf:
    w = mpmath.sqrt(abs(s))
    pos = s > 0
    return {
        "tan": lambda: (mpmath.tan(w) if pos else mpmath.tanh(w)) / w,
        "artan": lambda: (mpmath.atan(w) if pos else mpmath.atanh(w)) / w,
        "arsin": lambda: (mpmath.asin(w) if pos else mpmath.asinh(w)) / w,
        "cos": lambda: mpmath.cos(w) if pos else mpmath.cosh(w),
        "sin": lambda: (mpmath.sin(w) if pos else mpmath.sinh(w)) / w,
    }[name]()


def _max_rel(got: hm.MCTensor, args: list[float], ref) -> float:
    with mpmath.workprec(PREC):
        vals = got.to_mpmath().tolist()
        return max(float(abs((mpmath.mpf(v) - r) / r)) for v, r in zip(vals, (ref(mpmath.mpf(a)) for a in args)))


@pytest.mark.parametrize("nc", [2, 3])
@pytest.mark.parametrize("name", sorted(common._SERIES))
def test_common_series_branch(nc, name):
    x = hm.mc([1.0], nc=nc, dtype=F64)
    t = common.series_threshold(x)
    args = [s * f * t for f in (0.999, 0.5, 1e-3) for s in (1.0, -1.0)]
    z = hm.mc(torch.tensor(args, dtype=F64), nc=nc)
    got = getattr(common, name)(z)
    err = _max_rel(got, args, lambda a: _ref_common(name, a))
    assert err <= BOUNDS["transcendental"] * 2.0 ** (-53 * nc), err / 2.0 ** (-53 * nc)


@pytest.mark.parametrize("nc", [2, 3])
@pytest.mark.parametrize("name", sorted(S._SERIES))
def test_stereographic_series_branch(nc, name):
    x = hm.mc([1.0], nc=nc, dtype=F64)
    t = common.unit_roundoff(x) ** 0.2  # the series branch of stereographic._even
    args = [s * f * t for f in (0.999, 0.5, 1e-3) for s in (1.0, -1.0)]
    s = hm.mc(torch.tensor(args, dtype=F64), nc=nc)
    got = getattr(S, f"{name}_ratio")(s)
    err = _max_rel(got, args, lambda a: _ref_even(name, a))
    assert err <= BOUNDS["transcendental"] * 2.0 ** (-53 * nc), err / 2.0 ** (-53 * nc)


def test_coefficients_are_exact_pieces():
    """A coefficient is the sum of its float64 pieces (exactly, for these rationals at
    the precisions used); an MC operand takes as many as its components hold."""
    for coeffs in list(common._SERIES.values()) + list(S._SERIES.values()):
        for c in coeffs:
            pieces = float_pieces(c)
            assert abs(sum(Fraction(p) for p in pieces) - c) <= abs(c) * Fraction(2) ** -400
            assert all(abs(b) <= abs(a) * 2.0**-52 for a, b in zip(pieces, pieces[1:]))  # non-overlapping
    assert float_pieces(Fraction(3, 4)) == (0.75,)  # exact in one: no zero pieces
    assert [piece_count(torch.float64, 1), piece_count(torch.float64, 3), piece_count(torch.float32, 3)] == [1, 3, 2]


@pytest.mark.parametrize("nc", [None, 2])
@pytest.mark.parametrize("name", sorted(common._SERIES))
def test_exact_zeros_among_large_arguments_take_the_series_value(nc, name, monkeypatch):
    """Zero arguments beside large ones (the rows an optimizer step does not move): the
    even helpers answer 1 and derivative 0 there without evaluating the series on every
    element; the values and gradients are those of the series branch (computed with a
    tiny nonzero element that forces it), elsewhere those of the closed form."""
    f = getattr(common, name)
    base = torch.tensor([0.0, 0.7, -0.0, -2.5, 0.0, 1.3], dtype=F64)
    forced = base.clone()
    forced[-1] = 1e-12  # a small nonzero argument: the series branch runs on every small element
    outs, series_calls = [], []
    horner = common._horner
    monkeypatch.setattr(common, "_horner", lambda *a: series_calls.append(1) or horner(*a))
    for v in (base, forced):
        leaf = (hm.mc(v, nc=nc) if nc else v.clone()).requires_grad_(True)
        y = f(leaf)
        series_calls.append(str(v[-1].item()))
        (g,) = torch.autograd.grad(y.sum(), leaf)
        as_comps = (lambda t: t.components) if nc else (lambda t: t.unsqueeze(-1))
        outs.append((as_comps(y.detach()), as_comps(g)))
    (y0, g0), (y1, g1) = outs
    keep = torch.arange(5)
    assert torch.equal(y0[keep], y1[keep]) and torch.equal(g0[keep].abs(), g1[keep].abs())
    # the series ran for the forced arguments; for the zeros only where the function is not even
    assert series_calls == ([1] if name == "expm1c" else []) + ["1.3", 1, "1e-12"]
    if name == "expm1c":  # not even: its derivative at 0 is -1/2, the series runs
        assert float(g0[0, 0]) == -0.5
    else:
        assert float(g0[0, 0]) == 0.0 and bool((y0[[0, 2, 4], 0] == 1.0).all())
