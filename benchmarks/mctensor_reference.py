"""Reference for benchmarks only: the original MCTensor algorithms, re-implemented.

This is a re-implementation, written for this project from the algorithm descriptions
of the MCTensor paper (Yu et al., "MCTensor: A High-Precision Deep Learning Library
with Multi-Component Floating-Point", 2022), of its elementwise operators, to serve as
the *reference column* of ``benchmarks/bench_ops.py``. It is not library code, it is not
tested for accuracy, and nothing in ``hypermc`` imports it. It follows the original's
structure, not ours:

* components stored along the last dimension, ``(*shape, nc)`` (strided slices);
* ``Renormalize``: a bottom-up FastTwoSum pass, then a top-down FastTwoSum pass that
  emits a component where the error is non-zero (branches as ``torch.where``);
* ``Grow-ExpN`` (MC + float): a TwoSum chain from the last component up, renormalised
  from ``nc + 1`` terms;
* ``Add-MCN`` (MC + MC): Grow-ExpN of ``x`` by each component of ``y`` in turn;
* ``ScalingN`` (MC × float): TwoProd (Dekker's split) of every component, products and
  errors accumulated by a TwoSum chain, renormalised. The original splits float64 with
  ``2^26 + 1``, which makes TwoProd inexact (products then off by about ``u``, measured);
  here the correct ``2^27 + 1`` is used: same cost, so the timing is the original's;
* ``Mul-MCN`` (MC × MC): ScalingN of ``x`` by each ``y_i``, summed with Add-MCN;
* ``Div-MCN`` (MC / MC): long division, ``q_k = r_0 / y_0``, ``r -= ScalingN(y, q_k)``.

The original has no multi-component sqrt, exp or log; the table shows ``-`` there.

Accuracy as measured against ``hypermc.mcf.arith`` on the benchmark's inputs (exact
Fractions, 2000 values): within 2 ``u^nc`` for add at nc = 2-4 and mul/div at nc = 2, 3;
at nc = 4 mul and div are off by about ``u^3`` (float64 and float32) because ScalingN
sums the product errors into one plainly rounded carry. It is a timing reference only.
"""

from __future__ import annotations

import torch

# Veltkamp split constants 2^ceil(p/2) + 1 (the original used 2^26 + 1 for float64).
_SPLIT = {torch.float16: 2.0**6 + 1, torch.bfloat16: 2.0**4 + 1, torch.float32: 2.0**12 + 1, torch.float64: 2.0**27 + 1}


def _two_sum(a, b):
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _fast_two_sum(a, b):
    s = a + b
    return s, b - (s - a)


def _two_prod(a, b):
    p = a * b
    c = _SPLIT[a.dtype]
    t = c * a
    ah = t - (t - a)
    al = a - ah
    t = c * b
    bh = t - (t - b)
    bl = b - bh
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def renormalize(terms: list[torch.Tensor], nc: int) -> torch.Tensor:
    """Renormalize: bottom-up FastTwoSum pass, top-down pass with zero elimination."""
    m = len(terms)
    s = terms[-1]
    t = [s] * m
    for i in range(m - 2, -1, -1):
        s, t[i + 1] = _fast_two_sum(terms[i], s)
    t[0] = s
    zero = torch.zeros_like(s)
    out = [zero] * nc
    k = torch.zeros(s.shape, dtype=torch.long, device=s.device)
    s = t[0]
    for i in range(1, m):
        s_new, e = _fast_two_sum(s, t[i])
        emit = e != 0
        for j in range(nc):
            out[j] = torch.where(emit & (k == j), s_new, out[j])
        k = k + emit.long()
        s = torch.where(emit, e, s_new)
    for j in range(nc):
        out[j] = torch.where(k == j, s, out[j])
    return torch.stack(out, -1)


def grow_exp(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Grow-ExpN: ``x + b`` for an MC tensor ``x`` and a float tensor ``b``."""
    nc = x.shape[-1]
    q = b
    h = [None] * (nc + 1)
    for i in range(nc - 1, -1, -1):
        q, h[i + 1] = _two_sum(x[..., i], q)
    h[0] = q
    return renormalize(h, nc)


def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Add-MCN: Grow-ExpN of ``x`` by each component of ``y``."""
    z = x
    for i in range(y.shape[-1]):
        z = grow_exp(z, y[..., i])
    return z


def scaling(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """ScalingN: ``x * b`` for an MC tensor ``x`` and a float tensor ``b``."""
    nc = x.shape[-1]
    p, e = _two_prod(x[..., 0], b)
    terms = [p]
    carry = e
    for i in range(1, nc):
        pi, ei = _two_prod(x[..., i], b)
        s, err = _two_sum(pi, carry)
        terms.append(s)
        carry = ei + err
    terms.append(carry)
    return renormalize(terms, nc)


def mul(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mul-MCN: ScalingN of ``x`` by each ``y_i``, summed with Add-MCN."""
    z = scaling(x, y[..., 0])
    for i in range(1, y.shape[-1]):
        z = add(z, scaling(x, y[..., i]))
    return z


def div(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Div-MCN: long division with ``nc`` quotient digits."""
    nc = x.shape[-1]
    r = x
    digits = []
    for _ in range(nc):
        q = r[..., 0] / y[..., 0]
        digits.append(q)
        r = add(r, -scaling(y, q))
    return renormalize(digits, nc)
