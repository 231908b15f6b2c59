"""``torch.compile`` support for MC arithmetic: what is exact, and what is refused.

Mechanism (issue 16). An :class:`~hypermc.MCTensor` is a traceable wrapper subclass
(``__tensor_flatten__``/``__tensor_unflatten__``), so Dynamo puts MC ops in the graph
and AOTAutograd traces the MC kernels down to plain aten ops on the components. Two
things had to change for that trace to be right and free of graph breaks:

* Probes and data-dependent branches. :func:`hypermc.mcf.eft.has_fused_addcmul`
  measures on real tensors once per (device, dtype), CPU at import, never inside a trace
  (all dispatch modes are suspended for it); while tracing it answers ``False``. The
  eager fast paths guarded by ``bool(t.isfinite().all())`` use
  :func:`hypermc.mcf.eft.all_finite`, which is ``False`` while tracing, so the trace
  holds the general ``where``-based path (the one eager takes for inf/NaN data) and has
  no ``.item()``.
* Fused multiply-add. In eager mode on CPU ``addcmul`` is a true FMA and the kernels use
  it for the exact error of a product. Compilers lower ``addcmul`` to a multiply and a
  separate add, which rounds the error term: that was the 2.6e6 ulp^2 (fp32 nc=2) and
  1.3e31 ulp^3 (fp64 nc=3) loss of issue 16. While tracing the kernels therefore use
  Dekker's product (fp64) or the exact wider-dtype product (fp32), in which every
  product is exact, so contraction by a backend cannot change them either.

Measured with these changes (``x * y + x``, fp64 nc=3, 64 elements): the
``aot_eager`` backend reproduces eager bit for bit, but the default Inductor backend on
CPU (C++ codegen) is still off by about 1e31 u^3. The cause is inside Inductor's CPU
lowering or code generation (its C++ flags are ``-ffp-contract=off`` and
``-fno-unsafe-math-optimizations``, so it is not flag-driven contraction or
reassociation); it was not pinned down in the time available. Because the backend is not
visible while the MC kernels are traced, **every trace of an MC op on CPU tensors is
refused** with :class:`MCCompileError`, naming the op: a loud error, never a rounded
result. CUDA traces are allowed (Triton kept the EFTs exact in the issue's
measurement; the ``cuda``-marked tests in ``tests/mcf/test_compile.py`` check it
against mpmath). Float16/bfloat16 traces are refused on every device: Inductor computes
low-precision elementwise ops in float32 without rounding each intermediate (unless
``torch._inductor.config.emulate_precision_casts`` is set), which breaks every EFT.

No global Inductor configuration is changed by hypermc.
"""

from __future__ import annotations

import torch

from .eft import is_traced

__all__ = ["MCCompileError", "check_traceable"]


class MCCompileError(RuntimeError):
    """An MC op was traced by ``torch.compile`` on a path that is not exact when compiled."""


def check_traceable(func, components: torch.Tensor) -> None:
    """Refuse to trace MC op ``func`` where compiled code would not be exact.

    Cheap in eager mode (one type check). Called by ``MCTensor.__torch_dispatch__``
    with the components of the first MC operand.

    Raises:
        MCCompileError: ``components`` is being traced and lives on the CPU, or has a
            16-bit dtype.
    """
    if type(components) is torch.Tensor or not is_traced(components):
        return
    if components.dtype in (torch.float16, torch.bfloat16):
        raise MCCompileError(
            f"MCTensor op {func} cannot be compiled exactly for dtype {components.dtype}: "
            "Inductor keeps 16-bit intermediates in float32, which breaks the error-free "
            "transformations; run it eagerly (torch.compiler.disable) or use float32/float64"
        )
    if components.device.type == "cpu":
        raise MCCompileError(
            f"MCTensor op {func} cannot be compiled exactly on the CPU: Inductor's CPU "
            "code loses the multi-component precision (see hypermc.mcf.compile); run MC "
            "code eagerly on CPU (torch.compiler.disable) or compile it on CUDA"
        )
