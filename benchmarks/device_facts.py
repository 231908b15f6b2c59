"""What the device run of ``benchmarks/gpu_session.sh`` needs to know about its machine:
torch and the device, whether each fused CUDA kernel configuration is in use, and the
bits of the NaN that 0/0 gives on each device (x86's default NaN has its sign bit set;
the float32 canonical NaN that NVIDIA documents, 0x7FFFFFFF, has not), also through
``arith.div`` at float32 nc = 3, whose division by zero reaches the torch path on both
devices. Prints plain lines; takes no arguments but --help.

    python benchmarks/device_facts.py
"""

from __future__ import annotations

import argparse
import platform

import torch

from hypermc.mcf import arith, native
from hypermc.mcf.native import cuda as native_cuda

INTS = {torch.float32: torch.int32, torch.float64: torch.int64}


def _bits(t: torch.Tensor) -> str:
    mask = (1 << (8 * t.element_size())) - 1
    return " ".join(f"0x{int(v) & mask:x}" for v in t.detach().cpu().reshape(-1).view(INTS[t.dtype]).tolist())


def main() -> None:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    print(f"torch {torch.__version__}, python {platform.python_version()}, {platform.machine()}")
    cuda = torch.cuda.is_available()
    print("cuda:", torch.cuda.get_device_name() if cuda else "not available (CPU only: a dry run or no GPU)")
    devices = ["cpu", "cuda"] if cuda else ["cpu"]
    for device in devices:
        for dtype in (torch.float32, torch.float64):
            z = torch.zeros(4, dtype=dtype, device=device)
            print(f"{device} {dtype}: 0/0 bits {_bits((z / z)[:1])}, 0*inf bits {_bits((z * torch.inf)[:1])}")
        x = torch.zeros(2, 3, dtype=torch.float32, device=device)
        print(f"{device} arith.div float32 nc=3 of 0/0: {_bits(arith.div(x, x)[0])}")
    for name, nc, part in native_cuda.KERNELS:
        dtype = torch.float32 if name == "f32" else torch.float64
        print(f"native cuda {name} nc={nc} {part}: {native.status(dtype, nc, part, device='cuda')}")


if __name__ == "__main__":
    main()
