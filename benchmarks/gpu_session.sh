#!/bin/bash
# The device checks a session with a lent GPU should run, in order of what is still unknown,
# as one command of at most ~9 minutes (the device tool's per-command limit is 10):
#
#   bash benchmarks/gpu_session.sh            # logs under $OUT (the device tool's), else ./gpu_out
#
# 1. the five slowest `cuda` tests (the CUDA same-bits checks and the device round trip),
#    alone and verbose;
# 2. bench_ops on CUDA, float64/float32 nc 2-4 (docs/numerics.md's CUDA table was measured
#    before the narrower division and square-root remainders);
# 3. the other `cuda` tests, verbose, with pytest's own per-test timeout below the outer one.
# Every step writes its log as it goes, so a step cut off by its timeout still reports.
set -u
out=${OUT:-gpu_out}
mkdir -p "$out"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; git log --oneline -1; date; } > "$out/machine.txt" 2>&1
python3 -c "import torch; print(torch.__version__, torch.cuda.get_device_name())" >> "$out/machine.txt" 2>&1
# pytest's own per-test timeout where pytest-timeout is installed (the device image has it)
t1=() t2=()
if python3 -c "import pytest_timeout" 2>/dev/null; then t1=(--timeout 180) t2=(--timeout 160); fi
first=(
    "tests/mcf/test_native_cuda.py::test_cuda_same_bits_as_the_torch_networks"
    "tests/mcf/test_native_cuda.py::test_cuda_exp_log_same_bits"
    "tests/mcf/test_tensor.py::test_to_cuda_and_back_is_exact_and_ops_run_there"
)
timeout 200 python3 -m pytest -m cuda -v -rA --tb=short -p no:benchmark -p no:cacheprovider -n 6 "${t1[@]}" \
    "${first[@]}" > "$out/cuda_first.log" 2>&1
timeout 150 python3 benchmarks/bench_ops.py --device cuda --sizes 4096x4096 --repeats 5 --warmup 1 --budget 2 \
    --dtypes float64 float32 --nc 2 3 4 --markdown > "$out/bench_ops_cuda.txt" 2>&1
timeout 180 python3 -m pytest -m cuda -v -rA --tb=short -p no:benchmark -p no:cacheprovider -n 10 "${t2[@]}" \
    --deselect "${first[0]}" --deselect "${first[1]}" --deselect "${first[2]}" > "$out/cuda_rest.log" 2>&1
echo "wall $SECONDS s" >> "$out/machine.txt"
grep -hE "passed|failed|error" "$out"/cuda_*.log | tail -4
tail -14 "$out/bench_ops_cuda.txt"
