"""``exp``, ``log``, ``sqrt`` and ``tanh`` of plain CPU tensors that give the same bits on every x86-64 CPU.

On the CPU, torch computes float32/float64 ``exp``, ``log``, ``sqrt`` and ``tanh`` of a
tensor with MKL's vector math library, which picks its code path by CPU model, and the
paths round differently: the same torch build gives other bits on an AMD EPYC than on
an Intel Xeon, whatever ``MKL_CBWR`` says (on the AMD EPYC every ``MKL_CBWR`` value gives
the same bits, and none of them the bits of the Intel path; ``torch.sqrt`` is not correctly
rounded on either: 263 of 20,000 random float64 values differ from IEEE ``sqrt`` on the
AMD path). A training run that uses them prints other digits on another machine.

These functions are built only from operations whose results do not depend on the CPU
model: IEEE ``+ - * /`` and ``sqrt`` (the hardware instruction, through
:func:`hypermc.mcf.eft.sqrt_rn`), exact bit manipulations (``frexp``, powers of two), and
``expm1`` / ``log1p``, which torch computes with its own vectorised kernels (SLEEF), not
MKL. Their bits then depend only on torch's kernel width (``ATEN_CPU_CAPABILITY``), which
``examples/mammals.py`` fixes. Who uses them: the ``nc = 1`` ``exp``, ``log`` and ``tanh``
of :mod:`hypermc.mcf.elementary` (so ``nc = 1`` stays plain arithmetic), and, on plain
tensors, the trainer's loss (:func:`hypermc.embed.train.fixed_order_logsumexp`), the
batched distances of the three models (:mod:`hypermc.manifolds.math.batch`), the
half-space retractions, the hyperboloid's ``projx`` and the plain paths of
:func:`hypermc.manifolds.math.common.clamped_sqrt` and ``tanhc``. So a training run
prints the same digits on Intel and AMD CPUs (``tests/mcf/test_portable.py`` checks that
training on each model calls none of MKL's functions on plain tensors).

Algorithms (float64; float16 / bfloat16 / float32 inputs are computed in float64 and
rounded once to their dtype):

* ``exp(x) = 2^k (expm1(r) + 1)`` with ``k = round(x / ln 2)`` and ``r = x - k ln 2``
  (Cody and Waite's reduction with ``ln 2`` in two parts, the high part with 21 trailing
  zero bits so that ``k ln2_hi`` is exact), ``|r| <= ln(2) / 2``; ``2^k`` is applied as
  two exact powers of two so that the result overflows and underflows (gradually) where
  ``exp`` does. Bound: about 1 ulp.
* ``log(x) = e ln 2 + log1p(m - 1)`` with ``x = m 2^e``, ``m`` in ``[sqrt(1/2), sqrt(2))``
  (``m - 1`` is exact). Bound: about 1.5 ulps (measured 1.11 where ``e = 1`` and ``m`` is
  just above ``sqrt(1/2)``, so that the two terms partly cancel).
* ``sqrt(x)``: the correctly rounded square root (:func:`hypermc.mcf.eft.sqrt_rn`).
* ``tanh(x) = sign(x) (-e) / (2 + e)`` with ``e = expm1(-2|x|)`` below ``|x| = 0.55``,
  ``sign(x) (1 - 2 / (expm1(2|x|) + 2))`` above (fdlibm's split: neither cancels nor
  overflows). Bound: about 2.5 ulps (measured 2.17; torch's MKL ``tanh`` about 0.5).

Special values are those of IEEE ``exp``/``log``/``sqrt``/``tanh``: ``exp(-inf) = 0``,
``exp(inf) = inf``, ``log(0) = -inf``, ``log(x < 0) = NaN``, ``sqrt(-0) = -0``,
``tanh(+-inf) = +-1``, ``tanh(-0) = -0``, NaN stays NaN (``tests/mcf/test_portable.py``
checks them and the bounds above, against mpmath). Gradients are torch's formulas on these values
(``g exp(x)``, ``g / x``, ``g / (2 sqrt(x))``, ``g (1 - tanh(x)^2)``).

Other devices (CUDA computes the same bits on every GPU of one architecture), tensor
subclasses with ops of their own (MCTensors: their own MC functions), non-floating
tensors, ``torch.compile`` traces (the compiled kernels do not call MKL) and
``torch.func`` transforms (``vmap``, ``jvp``: torch's rules) go to torch's functions
unchanged.
"""

from __future__ import annotations

from typing import Any

import torch

from .eft import pow2, sqrt_rn, tracing

__all__ = ["exp", "log", "sqrt", "tanh"]

#: ``ln 2`` in two parts (fdlibm's ``ln2_hi`` / ``ln2_lo``): ``ln2_hi`` has 21 trailing
#: zero bits, so ``k * LN2_HI`` is exact for ``|k| < 2^21``.
LN2_HI = 6.93147180369123816490e-01
LN2_LO = 1.90821492927058770002e-10
INV_LN2 = 1.44269504088896338700e00
SQRT_HALF = 0.7071067811865476
#: ``exp`` overflows above ``log(DBL_MAX) ~ 709.78`` and is 0 below ``~ -745.13``: arguments
#: are first limited to ``[-EXP_LIMIT, EXP_LIMIT]``, which changes no result (inf and 0
#: stay inf and 0) and keeps ``k`` in the range where the two powers of two are normal.
EXP_LIMIT = 800.0
_PLAIN_DISPATCH = torch.Tensor.__torch_dispatch__
#: Where :func:`tanh` changes formula (fdlibm's split is near ``ln(3) / 2 ~ 0.55``).
TANH_SPLIT = 0.55


def _portable(x: Any) -> bool:
    return (
        isinstance(x, torch.Tensor)
        and type(x).__torch_dispatch__ is _PLAIN_DISPATCH  # not an MCTensor (or another subclass with ops of its own)
        and x.device.type == "cpu"
        and x.is_floating_point()
        and not tracing()  # compiled code: the compiler's own kernels
        and not torch._C._functorch.is_functorch_wrapped_tensor(x)  # torch.func: torch's rules (vmap, jvp)
    )


def _exp64(x: torch.Tensor) -> torch.Tensor:
    x = x.clamp(-EXP_LIMIT, EXP_LIMIT)  # NaN stays NaN; see EXP_LIMIT
    k = torch.round(x * INV_LN2)
    r = (x - k * LN2_HI) - k * LN2_LO
    m = torch.expm1(r) + 1.0
    k = torch.nan_to_num(k)  # NaN x: m is NaN already
    half = torch.floor(k * 0.5)
    return m * pow2(half) * pow2(k - half)


def _log64(x: torch.Tensor) -> torch.Tensor:
    m, e = torch.frexp(x)  # x = m 2^e, |m| in [0.5, 1) (0, inf, NaN: m = x, e = 0)
    low = m < SQRT_HALF
    m = torch.where(low, m * 2.0, m)
    k = (e - low.to(e.dtype)).to(torch.float64)
    return k * LN2_HI + (torch.log1p(m - 1.0) + k * LN2_LO)


def _sqrt64(x: torch.Tensor) -> torch.Tensor:
    # IEEE (the hardware instruction, through numpy); detached, since sqrt_rn keeps
    # torch.sqrt for tensors that require grad
    return sqrt_rn(x.detach())


def _tanh64(x: torch.Tensor) -> torch.Tensor:
    a = x.abs()
    e = torch.expm1(-2.0 * a)  # small |x|: tanh|x| = -e / (2 + e), no cancellation
    big = 1.0 - 2.0 / (torch.expm1(2.0 * a) + 2.0)  # |x| >= TANH_SPLIT: expm1's error is not doubled as e -> -1
    return torch.copysign(torch.where(a < TANH_SPLIT, -e / (2.0 + e), big), x)


def _in64(fn: Any, x: torch.Tensor) -> torch.Tensor:
    if x.dtype == torch.float64:
        return fn(x)
    return fn(x.to(torch.float64)).to(x.dtype)


def _function(name: str, fn64: Any, grad: Any, *, save_input: bool = False) -> Any:
    """An autograd function: the value ``fn64`` (in float64), the gradient ``grad(g, t)`` of
    the saved input (``save_input``) or value ``t`` -- torch's formula for the function."""

    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        y = _in64(fn64, x)
        ctx.save_for_backward(x if save_input else y)
        return y

    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        (t,) = ctx.saved_tensors
        return grad(g, t)

    return type(name, (torch.autograd.Function,), {"forward": staticmethod(forward), "backward": staticmethod(backward)})


_Exp = _function("_Exp", _exp64, lambda g, y: g * y)
_Log = _function("_Log", _log64, lambda g, x: g / x, save_input=True)
_Sqrt = _function("_Sqrt", _sqrt64, lambda g, y: g / (2 * y))
_Tanh = _function("_Tanh", _tanh64, lambda g, y: g * (1 - y * y))


def exp(x: torch.Tensor) -> torch.Tensor:
    """``exp(x)``, the same bits on every x86-64 CPU (see the module docstring).

    Example:
        >>> exp(torch.tensor([0.0, 1.0, -1000.0, 710.0], dtype=torch.float64))
        tensor([1.0000, 2.7183, 0.0000,    inf], dtype=torch.float64)
    """
    return _Exp.apply(x) if _portable(x) else torch.exp(x)


def log(x: torch.Tensor) -> torch.Tensor:
    """``log(x)``, the same bits on every x86-64 CPU (see the module docstring).

    Example:
        >>> log(torch.tensor([1.0, 4.0, 0.0, -1.0], dtype=torch.float64))
        tensor([0.0000, 1.3863,   -inf,    nan], dtype=torch.float64)
    """
    return _Log.apply(x) if _portable(x) else torch.log(x)


def sqrt(x: torch.Tensor) -> torch.Tensor:
    """``sqrt(x)``, the same bits on every x86-64 CPU (see the module docstring).

    Example:
        >>> sqrt(torch.tensor([4.0, 2.0, 0.0, float("inf")], dtype=torch.float64))
        tensor([2.0000, 1.4142, 0.0000,    inf], dtype=torch.float64)
    """
    return _Sqrt.apply(x) if _portable(x) else torch.sqrt(x)


def tanh(x: torch.Tensor) -> torch.Tensor:
    """``tanh(x)``, the same bits on every x86-64 CPU (see the module docstring).

    Example:
        >>> tanh(torch.tensor([0.0, 1.0, -1000.0, float("inf")], dtype=torch.float64))
        tensor([ 0.0000,  0.7616, -1.0000,  1.0000], dtype=torch.float64)
    """
    return _Tanh.apply(x) if _portable(x) else torch.tanh(x)
