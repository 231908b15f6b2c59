"""Exact conversions between component tensors and high-precision values (mpmath).

Kernels on component tensors ``(*shape, nc)`` like the rest of :mod:`hypermc.mcf`, but
computed on the host with mpmath, one element at a time: they are the bridge to the
oracle of the accuracy tests and the path of :func:`hypermc.mc` for strings,
``fractions.Fraction`` and ``mpmath.mpf`` values, not for bulk arithmetic.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
import torch

from .eft import float_format, pack, unpack

__all__ = ["to_mpmath", "from_mpmath"]


def to_mpmath(c: torch.Tensor) -> np.ndarray:
    """Exact values of component tensor ``c`` (``(*shape, nc)``) as a numpy object array of
    ``mpmath.mpf`` of shape ``shape`` (the sum of the components, added without rounding).

    Example:
        >>> to_mpmath(torch.tensor([[1.0, 2.0**-60]], dtype=torch.float64))[0] - 1 == mpmath.mpf(2)**-60
        True
    """
    nc = c.shape[-1]
    comps = c.detach().to("cpu", torch.float64 if c.dtype != torch.float64 else None)
    flat = comps.reshape(-1, nc).tolist()
    out = np.empty(len(flat), dtype=object)
    for i, row in enumerate(flat):
        total = mpmath.mpf(0)
        for x in row:
            total = mpmath.fadd(total, mpmath.mpf(x), exact=True)
        out[i] = total
    return out.reshape(tuple(c.shape[:-1]))


def from_mpmath(values: Any, nc: int, dtype: torch.dtype, device: torch.device | str | None = None) -> torch.Tensor:
    """Nearest ``nc``-component expansion (component tensor on ``device``) of high-precision
    values: each component is the value's remainder rounded to nearest in ``dtype``,
    computed exactly in mpmath (so the result is the nearest expansion, up to ties).

    Args:
        values: an ``mpmath.mpf``, str, ``Fraction``, int or float, or a (nested)
            sequence / numpy object array of them.
        nc: number of components (validated by the caller).
        dtype: component dtype.
        device: where the result goes (default: the CPU, where it is computed).

    Example:
        >>> c = from_mpmath(["0.1"], nc=2, dtype=torch.float64)
        >>> c[0, 0].item() == 0.1, c[0, 1].item() != 0.0  # 0.1 to about 106 bits
        (True, True)
    """
    fmt = float_format(dtype)
    arr = np.asarray(values, dtype=object)
    flat = arr.reshape(-1)
    info = torch.finfo(dtype)
    out = np.zeros((flat.size, nc), dtype=np.float64)
    for i, v in enumerate(flat):
        rest = _to_mpf(v, nc * fmt.p + 64)
        for k in range(nc):
            c = _round_to_format(rest, fmt.p, info)
            out[i, k] = c
            if not math.isfinite(c):
                break
            rest = mpmath.fsub(rest, mpmath.mpf(c), exact=True)
    comps = torch.from_numpy(out).to(dtype).reshape(*arr.shape, nc)
    if device is not None:
        comps = comps.to(device)
    return pack(unpack(comps))


def _to_mpf(v: Any, prec: int) -> mpmath.mpf:
    """Exact mpf for numbers/mpf; strings and Fractions rounded at ``prec`` bits."""
    if isinstance(v, int):  # mpf(int) rounds to the working precision: make it exact
        with mpmath.workprec(max(v.bit_length(), 1) + 1):
            return mpmath.mpf(v)
    if isinstance(v, (mpmath.mpf, float)):
        return mpmath.mpf(v) if not isinstance(v, mpmath.mpf) else v
    with mpmath.workprec(prec):
        if isinstance(v, Fraction):
            return mpmath.mpf(v.numerator) / v.denominator
        return mpmath.mpf(v)


def _round_to_format(v: mpmath.mpf, p: int, info: torch.finfo) -> float:
    """Round an mpf to nearest in a format with ``p`` significand bits (incl. subnormals)."""
    if not mpmath.isfinite(v):
        return float(v)
    if v == 0:
        return 0.0
    emin = math.frexp(info.tiny)[1]  # exponent of the smallest normal (frexp convention)
    e = int(mpmath.floor(mpmath.log(abs(v), 2))) + 1 if v != 0 else 0
    bits = p - max(0, emin - e)  # fewer bits in the subnormal range
    with mpmath.workprec(max(bits, 1)):
        r = +v if bits > 0 else mpmath.mpf(0)
    if abs(r) > info.max:
        return math.copysign(math.inf, float(v))
    return float(r)
