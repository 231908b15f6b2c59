"""What the device run of ``benchmarks/gpu_session.sh`` needs to know about its machine:
torch and the device, whether each fused CUDA kernel configuration is in use, and the
bits of the NaN that 0/0 gives on each device (x86's default NaN has its sign bit set;
the float32 canonical NaN that NVIDIA documents, 0x7FFFFFFF, has not), also through
``arith.div`` at float32 nc = 3, whose division by zero reaches the torch path on both
devices. Prints plain lines; --part limits the CUDA configurations to one part; --cpu
builds the CPU elementary libraries too (no device test needs them: they compare with
the CPU's torch networks, and the float64 nc = 3 library alone took 145 s to build on a
16-core GPU machine); --jobs sets how many configurations build at once.

    python benchmarks/device_facts.py
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import platform
import time
from concurrent.futures import ProcessPoolExecutor

import torch

from hypermc.mcf import arith, native
from hypermc.mcf.native import cuda as native_cuda

INTS = {torch.float32: torch.int32, torch.float64: torch.int64}


def _bits(t: torch.Tensor) -> str:
    mask = (1 << (8 * t.element_size())) - 1
    return " ".join(f"0x{int(v) & mask:x}" for v in t.detach().cpu().reshape(-1).view(INTS[t.dtype]).tolist())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=["arith", "elementary"], help="only this part's CUDA configurations (default: all)")
    parser.add_argument("--cpu", action="store_true", help="build and check the CPU elementary libraries too")
    parser.add_argument(
        "--jobs",
        type=int,
        default=8,
        help="configurations built at once with CUDA, each in a process (default 8; 1: here)",
    )
    args = parser.parse_args()
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
    # the CUDA configurations (and with --cpu the CPU elementary libraries after them):
    # each built and self-checked in a process of its own, in parallel (NVRTC and the C++
    # compiler each use one core); the later processes find the kernels in the caches on
    # disk (torch's ~/.cache/torch/kernels, hypermc's native cache)
    configs = [("cuda", name, nc, part) for name, nc, part in native_cuda.KERNELS if not args.part or part == args.part]
    configs += [("cpu", "f64", nc, "elementary") for nc in native.ELEMENTARY_NCS] if args.cpu else []
    with contextlib.ExitStack() as stack:
        if cuda and args.jobs > 1:
            context = multiprocessing.get_context("spawn")  # CUDA does not survive a fork
            pool = stack.enter_context(ProcessPoolExecutor(max_workers=min(args.jobs, len(configs)), mp_context=context))
            states = pool.map(_status, configs)  # in order, each as soon as it and those before it are done
        else:  # without CUDA (a dry run) the CUDA configurations answer at once
            states = map(_status, configs)
        for (device, name, nc, part), (state, seconds) in zip(configs, states):
            print(f"native {device} {name} nc={nc} {part}: {state} ({seconds:.1f} s to build and check)", flush=True)


def _status(config: tuple[str, str, int, str]) -> tuple[str, float]:
    """``native.status`` of one configuration (builds it and runs its self-check) and the seconds it took."""
    device, name, nc, part = config
    t0 = time.perf_counter()
    state = native.status(torch.float32 if name == "f32" else torch.float64, nc, part, device=device)
    return state, time.perf_counter() - t0


if __name__ == "__main__":
    main()
