"""Fixed-size, branch-free kernels for triple-word (``nc = 3``) and quad-word (``nc = 4``)
expansions, with a checked fast path and a per-element fallback.

Design. The generic kernels of :mod:`hypermc.mcf.arith` sort or merge
their terms and renormalise them with :func:`hypermc.mcf.eft.renormalize`, whose
per-element branches are masks: ~3 elementwise kernels per (term, slot) pair. Here every
op is a *fixed network* of TwoSums (no masks, no ``where``) in three stages:

1. **Levels.** The exact result is collected into ``nc + 1`` *levels*: level ``k``
   holds the terms of order ``u^k`` relative to the leading term (for ``x + y`` the sums
   ``x_k + y_k``; for ``x * y`` the products ``x_i y_j`` with ``i + j = k``, split exactly
   by an FMA). Each level ``k < nc`` is summed by a TwoSum chain whose errors move to
   level ``k + 1``; level ``nc`` is summed plainly (its rounding is of order
   ``u^(nc+1)``). This is the order-by-order accumulation of the triple-word algorithms of
   Fabiano, Muller and Picot ("Algorithms for triple-word arithmetic", IEEE TC 2019) and of
   the quad-double "accurate" add of Hida, Li and Bailey (QD library, 2001), written
   without their data-dependent branches.
2. **Renormalisation** (:func:`renorm_levels`): a bottom-up TwoSum sweep (VecSum, exact)
   whose top is the leading component, then one top-down TwoSum sweep over the errors
   giving the other components; the last component takes the rounded rest. Exact except
   for that last rounding.
3. **Check** (:func:`normalised`): one cheap boolean mask per element, true where the
   output is a normalised expansion (``fl(c_k + c_(k+1)) == c_k`` for every ``k``, which
   implies ``|c_(k+1)| <= ulp(c_k) / 2`` and no zero followed by a non-zero), the leading
   component is non-zero and (for sums) the value has not cancelled by more than a
   factor ``64 u`` against the operands (``|c_0| > 64 u max(|x_0|, |y_0|)``). Inf/NaN
   operands and overflow make the TwoSum errors NaN, so they fail the check too. Elements
   that fail (ties that leave a component at exactly half an ulp, heavy cancellation,
   zero results and their signs, inf/NaN, overflow) are recomputed by the caller's
   general (sorting, order-independent) kernel, gathered and scattered back in eager mode
   (:func:`patch`), by one ``where`` while ``torch.compile`` traces (the helpers of
   :mod:`hypermc.mcf.eft` answer "not all true" there, so the trace has no
   data-dependent branch).

Bounds (``u`` = unit roundoff of the component dtype, relative to the exact result of the
op on the exact inputs, for results that pass the check; the others have the general
kernels' bounds): add/sub ``< 1.4 u^nc`` (derivation in :func:`add_levels`), mul
``u^nc + O(nc^2 u^(nc+1))`` (:func:`hypermc.mcf.arith._product_levels`); both are
tested against the table bound ``8 u^nc`` in ``tests/mcf/test_arith.py`` and
``tests/mcf/test_fixed.py``.

Preconditions: float32/float64 components (the callers dispatch float16/bfloat16 to the
general kernels: their exponent range is too short for the tails of a product of
``nc >= 3`` words to be normal numbers), normalised inputs, no underflow of error terms
below the subnormal range (the same as for the general kernels).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

import torch

from .eft import all_true, is_traced

__all__ = ["FIXED_NCS", "applies", "two_sum", "add_levels", "renorm_levels", "normalised", "patch", "checks_only_where"]

#: Numbers of components that have fixed networks.
FIXED_NCS = (3, 4)

# |c_0| must exceed CANCEL_FACTOR * u * max(|x_0|, |y_0|) for a sum to take the fast path.
CANCEL_FACTOR = 64.0


def applies(dtype: torch.dtype, nc: int) -> bool:
    """Whether the fixed networks serve ``nc`` components of ``dtype``.

    Example:
        >>> applies(torch.float64, 3), applies(torch.float64, 2), applies(torch.float16, 4)
        (True, False, False)
    """
    return nc in FIXED_NCS and dtype in (torch.float32, torch.float64)


def two_sum(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Knuth's TwoSum (``s + e == a + b`` exactly, no precondition) in six kernels and
    three fresh buffers (the last three roundings run in place).

    Example:
        >>> s, e = two_sum(torch.tensor([0.1], dtype=torch.float64), torch.tensor([0.2], dtype=torch.float64))
        >>> s.item(), e.item()
        (0.30000000000000004, -2.7755575615628914e-17)
    """
    s = a + b
    bb = s - a
    e = s - bb
    torch.sub(a, e, out=e)  # a - (s - bb)
    torch.sub(b, bb, out=bb)  # b - bb
    return s, e.add_(bb)


def _sum_level(level: list[torch.Tensor], nxt: list[torch.Tensor] | None) -> torch.Tensor:
    """Sum one level: a TwoSum chain whose errors go to ``nxt``, or plainly if ``nxt`` is None."""
    s = level[0]
    for t in level[1:]:
        if nxt is None:
            s = s + t if s is level[0] else s.add_(t)
        else:
            s, e = two_sum(s, t)
            nxt.append(e)
    return s


def add_levels(xs: list[torch.Tensor], ys: list[torch.Tensor], nc: int, *, exact_first: bool = False) -> list[torch.Tensor]:
    """``x + y`` as ``nc + 1`` levels (``len(xs) == nc``, ``len(ys) <= nc + 1``; missing
    ``y_k`` are 0, a ``y_nc`` joins the plain last level).

    ``exact_first``: the caller guarantees that ``x_0 + y_0`` is exact (a division or
    square-root remainder, where ``y_0 = -fl(q y_0')`` is within a factor ``1 +- 3u`` of
    ``-x_0``: Sterbenz's lemma, or a result in the subnormal range); level 0 is then the
    plain sum and its TwoSum error (zero) is not carried.

    ``(s_k, e_k) = TwoSum(x_k, y_k)``; level 0 is ``s_0``, level ``k`` collects ``s_k``,
    ``e_(k-1)`` and the chain errors of level ``k - 1`` (TwoSum chain, exact), level ``nc``
    the errors ``e_(nc-1)`` and the chain errors of level ``nc - 1``, summed plainly.

    Bound. Let ``M = max(|x_0|, |y_0|)``; normalised inputs give ``|x_k|, |y_k| <= u^k M``,
    so level ``k`` is at most ``~(2k + 2) u^k M`` in magnitude and level ``nc`` (3 resp. 5
    terms for nc = 3, 4) at most ``~10 u^nc M`` resp. ``~22 u^nc M``; its plain sum is
    off by at most ``20 u^(nc+1) M`` resp. ``66 u^(nc+1) M``. Everything else is exact,
    so ``sum(levels)`` differs from ``x + y`` by ``<= 66 u^(nc+1) M``: with the check
    ``|x + y| >= 64 u M`` of the fast path this is ``<= 66/64 u^nc |x + y|`` before the
    final truncation of :func:`renorm_levels`; as an absolute error it is
    ``O(u^(nc+1) M)`` whatever the cancellation (what a division remainder needs).

    Example:
        Two sums of 3-component numbers, the second one cancelling to ``2^-60``:

        >>> x = torch.tensor([[1.0, 2**-60, 2**-120], [1.0, 2**-60, 0.0]], dtype=torch.float64)
        >>> y = torch.tensor([[0.5, 2**-61, 2**-121], [-1.0, 0.0, 0.0]], dtype=torch.float64)
        >>> levels = add_levels(list(x.unbind(-1)), list(y.unbind(-1)), 3)
        >>> [level.tolist() for level in levels]
        [[1.5, 0.0], [1.3010426069826053e-18, 8.673617379884035e-19], [1.128474576789396e-36, 0.0], [0.0, 0.0]]
    """
    levels: list[list[torch.Tensor]] = [[] for _ in range(nc + 1)]
    for k in range(nc):
        if k == 0 and exact_first:
            levels[0].append(xs[0] + ys[0])
        elif k < len(ys):
            s, e = two_sum(xs[k], ys[k])
            levels[k].append(s)
            levels[k + 1].append(e)
        else:
            levels[k].append(xs[k])
    levels[nc].extend(ys[nc:])
    out = []
    for k in range(nc + 1):
        out.append(_sum_level(levels[k], levels[k + 1] if k < nc else None))
    return out


def renorm_levels(t: list[torch.Tensor], nc: int) -> torch.Tensor:
    """Renormalise ``nc + 1`` ordered levels into ``nc`` components (planar buffer view).

    Bottom-up VecSum ``(v_k, w_(k+1)) = TwoSum(t_k, v_(k+1))`` (exact), leading component
    ``c_0 = v_0``; top-down ``(c_k, r) = TwoSum(r, w_(k+1))`` from ``r = w_1``; the last
    component ``c_(nc-1) = fl(r + w_nc)`` is the only rounding. Where :func:`normalised`
    holds, ``|c_(nc-1)| <= u^(nc-1) |c_0|``, so the truncation error is
    ``<= u^nc |c_0|`` (1 + 2u). Levels of a product or a sum ordered by order of
    ``u`` only, adjacent levels may overlap; no other precondition (all TwoSums).

    Returns:
        tensor of shape ``(*shape, nc)``, a view of a planar ``(nc, *shape)`` buffer.

    Example:
        >>> x = torch.tensor([[1.0, 2**-60, 2**-120], [1.0, 2**-60, 0.0]], dtype=torch.float64)
        >>> y = torch.tensor([[0.5, 2**-61, 2**-121], [-1.0, 0.0, 0.0]], dtype=torch.float64)
        >>> levels = add_levels(list(x.unbind(-1)), list(y.unbind(-1)), 3)
        >>> renorm_levels(levels, 3).tolist()  # 1.5 (1 + 2^-60 + 2^-120) and 2^-60
        [[1.5, 1.3010426069826053e-18, 1.128474576789396e-36], [8.673617379884035e-19, 0.0, 0.0]]
    """
    n = len(t) - 1
    v = t[n]
    w: list[torch.Tensor] = [None] * (n + 1)  # type: ignore[list-item]
    for k in range(n - 1, -1, -1):
        v, w[k + 1] = two_sum(t[k], v)
    shape = torch.broadcast_shapes(*(x.shape for x in t))
    buf = torch.empty((nc, *shape), dtype=v.dtype, device=v.device)
    buf[0].copy_(v)
    r = w[1]
    for k in range(1, nc - 1):
        c, r = two_sum(r, w[k + 1])
        buf[k].copy_(c)
    rest = r
    for j in range(nc, n + 1):
        rest = rest + w[j]
    buf[nc - 1].copy_(rest)
    return buf.movedim(0, -1)


def normalised(c: torch.Tensor, bound: torch.Tensor | None = None) -> torch.Tensor:
    """Boolean mask: ``c`` is a normalised expansion with a non-zero, finite value.

    ``fl(c_k + c_(k+1)) == c_k`` for every ``k`` (so ``|c_(k+1)| <= ulp(c_k) / 2`` and no
    zero is followed by a non-zero; NaN anywhere fails) and ``0 < |c_0| <= max``. With ``bound``
    (the operand magnitude ``M`` of a sum), also ``|c_0| > 64 u M`` (no heavy cancellation).

    Example:
        >>> c = torch.tensor([[1.0, 2**-60, 0.0], [1.0, 0.5, 0.0], [0.0, 0.0, 0.0]], dtype=torch.float64)
        >>> normalised(c)  # 0.5 overlaps 1.0; a zero value fails
        tensor([ True, False, False])
        >>> normalised(c[:1] * 2**-60, bound=torch.tensor([1.0], dtype=torch.float64))  # cancelled
        tensor([False])
    """
    comps = c.unbind(-1)
    lead = comps[0].abs()
    ok = lead <= torch.finfo(c.dtype).max  # finite (NaN compares false)
    ok &= lead != 0
    for k in range(len(comps) - 1):
        ok &= (comps[k] + comps[k + 1]) == comps[k]
    if bound is not None:
        u = torch.finfo(c.dtype).eps / 2
        ok &= lead.mul_(1.0 / (CANCEL_FACTOR * u)) > bound
    return ok


@contextlib.contextmanager
def checks_only_where(keep: torch.Tensor) -> Iterator[None]:
    """The fast-path checks of the networks computed in this block matter only where
    ``keep`` is true: the caller discards the other elements' results (by a ``where``),
    so a check that fails there (a fixed network rejects a zero product, say) must not
    send those elements to a slower path.

    On tensors this changes nothing (:func:`patch` still recomputes every rejected
    element; the values it gives where ``keep`` is false are discarded). A kernel
    generator tracing the network (:mod:`hypermc.mcf.native.trace`) flags the block's
    checks only where ``keep`` holds.

    Example:
        >>> from hypermc.mcf import arith
        >>> from hypermc.mcf.eft import unpack
        >>> a = torch.tensor([1.5, 2**-60, 2**-120], dtype=torch.float64)
        >>> b = torch.tensor([0.0, 3.0], dtype=torch.float64)
        >>> nonzero = b != 0
        >>> with checks_only_where(nonzero):  # the zero product is rejected, then discarded
        ...     prod = unpack(arith.mul_float(a, b))
        >>> [torch.where(nonzero, c, 0.0).tolist() for c in prod][0]
        [0.0, 4.5]
    """
    gate = getattr(keep, "gate", None) if getattr(keep, "symbolic", False) else None
    if gate is None:
        yield
        return
    with gate():
        yield


_INLINE = threading.local()


@contextlib.contextmanager
def _setting(name: str) -> Iterator[None]:
    before = getattr(_INLINE, name, False)
    setattr(_INLINE, name, True)
    try:
        yield
    finally:
        setattr(_INLINE, name, before)


def generals_inline() -> contextlib.AbstractContextManager[None]:
    """While a kernel generator traces a network inside this block, the checked fast paths
    (:func:`patch`) that the network marks with :func:`short_operand_steps` compute their
    general kernels inline, a select on the check, instead of flagging the element for the
    caller: for a kernel that runs on MC numbers made from plain floats, whose zero tails
    fail those checks, so such elements need no second pass. On tensors it changes
    nothing.

    Example:
        >>> with generals_inline(), short_operand_steps():
        ...     inline_generals()
        True
        >>> inline_generals()
        False
    """
    return _setting("asked")


def short_operand_steps() -> contextlib.AbstractContextManager[None]:
    """Marks the steps of a network whose fast-path checks reject short expansions (zero
    tails: a product of them has zero components): see :func:`generals_inline`."""
    return _setting("marked")


def inline_generals() -> bool:
    """Whether :func:`patch` computes a traced general kernel inline here (both
    :func:`generals_inline` and :func:`short_operand_steps` in effect)."""
    return bool(getattr(_INLINE, "asked", False) and getattr(_INLINE, "marked", False))


def patch(
    out: torch.Tensor, ok: torch.Tensor, general: Callable[..., torch.Tensor], *operands: torch.Tensor, inline: bool | None = None
) -> torch.Tensor:
    """Replace the elements of ``out`` where ``ok`` is false by ``general(*operands)``.

    ``inline`` concerns a kernel generator tracing the network: True computes ``general``
    inline (a select), which it must be able to trace, False flags the element for the
    caller, None (default) flags it unless :func:`inline_generals` says otherwise.

    ``out`` is a view ``(*shape, nc)`` of a planar buffer (as :func:`renorm_levels`
    returns); ``operands`` are component tensors broadcastable to ``shape``. Eager: if any
    element fails, only those are gathered (rows of the broadcast operands), recomputed and
    scattered back. Traced: one ``where`` over ``general`` on all elements.

    Example:
        The cancelling second sum fails the check and is recomputed by a general kernel:

        >>> from hypermc.mcf.eft import renormalize
        >>> x = torch.tensor([[1.0, 2**-60, 2**-120], [1.0, 2**-60, 0.0]], dtype=torch.float64)
        >>> y = torch.tensor([[0.5, 2**-61, 2**-121], [-1.0, 0.0, 0.0]], dtype=torch.float64)
        >>> levels = add_levels(list(x.unbind(-1)), list(y.unbind(-1)), 3)
        >>> out = renorm_levels(levels, 3)
        >>> ok = normalised(out, torch.maximum(x[:, 0].abs(), y[:, 0].abs()))
        >>> ok
        tensor([ True, False])
        >>> def general(a, b):
        ...     return renormalize(torch.cat([a, b], -1), 3)
        >>> torch.equal(patch(out, ok, general, x, y), general(x, y))
        True
    """
    if getattr(ok, "symbolic", False):
        if inline or (inline is None and inline_generals()):
            return torch.where(ok, out, general(*operands))
        # a kernel generator traces this network: the generated kernel reports the elements
        # that fail the check, and its caller recomputes them with ``general``
        ok.flag()  # type: ignore[attr-defined]
        return out
    if all_true(ok):
        return out
    nc = out.shape[-1]
    if is_traced(ok):
        return torch.where(ok.unsqueeze(-1), out, general(*operands))
    shape = ok.shape
    idx = torch.nonzero(~ok.reshape(-1)).squeeze(1)
    rows = [torch.broadcast_to(o, (*shape, o.shape[-1])).reshape(-1, o.shape[-1])[idx] for o in operands]
    fixed = general(*rows)
    buf = out.movedim(-1, 0).reshape(nc, -1)  # the planar buffer itself (a view)
    buf[:, idx] = fixed.movedim(-1, 0)
    return out
