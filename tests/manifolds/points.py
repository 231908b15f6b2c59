"""Points and reference geometry for the manifold tests, built in mpmath.

Points are constructed at a prescribed hyperbolic radius in exact (high precision)
arithmetic, then rounded to MC values; references (distances, derivatives) are computed
in mpmath from the *exact stored* coordinates with the textbook ``acosh`` formulas, which
share no code (and no formula) with the library. Working precision: ``PREC`` bits, far
above ``nc p + 60`` for every case here.
"""

from __future__ import annotations

import mpmath
import torch

import hypermc as hm

#: mpmath precision (bits) of every reference here (>= nc p + 60 for float64 nc <= 4
#: plus the cancellation of acosh(1 + tiny) at 1e-60).
PREC = 1200

F64 = torch.float64


def unit(n: int, seed: int) -> list[mpmath.mpf]:
    """A random unit vector of R^n, normalised in mpmath (exactly unit to PREC bits)."""
    g = torch.Generator().manual_seed(seed)
    v = torch.randn(n, dtype=F64, generator=g).tolist()
    with mpmath.workprec(PREC):
        v = [mpmath.mpf(a) for a in v]
        s = mpmath.sqrt(sum(a * a for a in v))
        return [a / s for a in v]


def ball_point(r, v, c=1) -> list[mpmath.mpf]:
    """Ball point at hyperbolic radius r (curvature -c) in direction v."""
    with mpmath.workprec(PREC):
        s = mpmath.tanh(mpmath.sqrt(c) * mpmath.mpf(r) / 2) / mpmath.sqrt(c)
        return [s * a for a in v]


def lorentz_point(r, v) -> list[mpmath.mpf]:
    """Hyperboloid point (curvature -1) at radius r in direction v."""
    with mpmath.workprec(PREC):
        r = mpmath.mpf(r)
        return [mpmath.cosh(r)] + [mpmath.sinh(r) * a for a in v]


def ball_to_halfspace(b) -> list[mpmath.mpf]:
    """x = (2 b_bar, 1 - |b|^2) / |b - e|^2 (curvature -1), in mpmath."""
    with mpmath.workprec(PREC):
        den = sum(a * a for a in b[:-1]) + (1 - b[-1]) ** 2
        return [2 * a / den for a in b[:-1]] + [(1 - sum(a * a for a in b)) / den]


def halfspace_point(r, v) -> list[mpmath.mpf]:
    """Halfspace point at radius r from (0, ..., 0, 1) in direction v."""
    return ball_to_halfspace(ball_point(r, v))


def point(model: str, r, v):
    return {"ball": ball_point, "lorentz": lorentz_point, "halfspace": halfspace_point}[model](r, v)


def to_mc(rows, nc: int | None, dtype=F64):
    """MCTensor (nc) or plain tensor (nc None) nearest to mpmath rows."""
    t = hm.from_mpmath(rows, nc=nc or 1, dtype=dtype)
    return t.approx() if nc is None else t


def exact(t) -> list:
    """Exact values of a Tensor / MCTensor as nested lists of mpf."""
    if isinstance(t, hm.MCTensor):
        return t.to_mpmath().tolist()
    with mpmath.workprec(PREC):
        return (
            [[mpmath.mpf(a) for a in row] for row in t.detach().double().tolist()]
            if t.dim() == 2
            else [mpmath.mpf(a) for a in t.detach().double().tolist()]
        )


# ------------------------------------------------------------------- reference distances


def _prec():
    """PREC, or more when a caller (mpmath.diff) has raised the precision."""
    return mpmath.workprec(max(PREC, mpmath.mp.prec))


def dist_ball(x, y, c=1):
    with _prec():
        c = mpmath.mpf(c)
        dx = 1 - c * sum(a * a for a in x)
        dy = 1 - c * sum(a * a for a in y)
        d2 = sum((a - b) ** 2 for a, b in zip(x, y))
        return mpmath.acosh(1 + 2 * c * d2 / (dx * dy)) / mpmath.sqrt(c)


def dist_halfspace(x, y, c=1):
    with _prec():
        d2 = sum((a - b) ** 2 for a, b in zip(x, y))
        return mpmath.acosh(1 + d2 / (2 * x[-1] * y[-1])) / mpmath.sqrt(c)


def dist_lorentz(x, y, c=1):
    with _prec():
        c = mpmath.mpf(c)
        inner = -x[0] * y[0] + sum(a * b for a, b in zip(x[1:], y[1:]))
        return mpmath.acosh(-c * inner) / mpmath.sqrt(c)


REF = {"ball": dist_ball, "halfspace": dist_halfspace, "lorentz": dist_lorentz}


def rel(got, ref) -> float:
    """|got - ref| / |ref| in mpmath (0 when both are 0)."""
    with mpmath.workprec(PREC):
        got, ref = mpmath.mpf(got), mpmath.mpf(ref)
        if ref == 0:
            return float(abs(got))
        return float(abs(got - ref) / abs(ref))


def grad_ref(f, x):
    """Gradient of the mpmath function f(list) at x (list of mpf), by mpmath.diff."""
    out = []
    with mpmath.workprec(PREC):
        for i in range(len(x)):

            def fi(t, i=i):
                z = list(x)
                z[i] = t
                return f(z)

            scale = abs(x[i]) if x[i] != 0 else mpmath.mpf(1)
            out.append(mpmath.diff(fi, x[i], h=scale * mpmath.mpf(2) ** -300))
    return out
