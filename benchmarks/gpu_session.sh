#!/bin/bash
# The device checks of a session with a lent GPU, as one command of at most 8 minutes:
#
#   bash benchmarks/gpu_session.sh             # logs under $OUT (the device tool's), else ./gpu_out
#   bash benchmarks/gpu_session.sh --dry-run   # the same steps with CUDA hidden: the cuda
#                                              # tests skip, bench_ops runs small on the CPU
#
# Steps, in order of what is still unknown (each bounded by `timeout`, its limit cut to the
# budget left; a step with under 20 s left is not started and says so):
#   facts        benchmarks/device_facts.py: torch, device, NaN bits of 0/0 on each device,
#                the status of every fused CUDA configuration (builds them in parallel
#                processes, so the tests below find the kernels in torch's kernel cache)
#   native_cuda  the cuda tests of tests/mcf/test_native_cuda.py (pytest-xdist where present)
#   bench_ops    bench_ops --device cuda --sizes 4096x4096: the ops of the GPU table (cut by
#                its limit, it still writes the cases it measured, and says so)
#   cuda_rest    every other cuda test
# Each pytest step fails a test that runs past 60 s (per_test; tests/session_log.py) and
# goes on; the step's own limit is well above that.
#
# What comes back under $OUT (6 or 7 files, no folders; the device tool returns at most 8):
#   machine.txt    GPU, driver, commit, date, and the facts step's lines
#   steps.log      one line per step: name, exit status (124: cut by its limit), seconds
#   session.log    everything the steps print, in order, as they print it
#   results.jsonl  one JSON line per test as it ends: on record even when a step is cut
#   junit.xml      the junit reports of the steps that finished, merged after each step
#   bench_ops.txt  bench_ops' table
#   gpu_ops.md     bench_ops' results fragment: docs/results/gpu_ops.md
# Exit status 0 when every step ran and passed, else 1 (2: bad arguments).
# Environment: GPU_SESSION_BUDGET (seconds of steps, default 470), GPU_SESSION_REST (the
# paths of the cuda_rest step, default tests), GPU_SESSION_WORKERS (pytest-xdist workers
# per pytest step where it is installed; default 4, 0 in a dry run), PYTHON (default python3).
set -u
dry=0
if [ "${1:-}" = "--dry-run" ]; then
    dry=1
elif [ $# -gt 0 ]; then
    echo "usage: bash benchmarks/gpu_session.sh [--dry-run]; got: $*" >&2
    exit 2
fi
out=${OUT:-gpu_out}
budget=${GPU_SESSION_BUDGET:-470}
rest=${GPU_SESSION_REST:-tests}
per_test=60
py=${PYTHON:-python3}
mkdir -p "$out"
: > "$out/steps.log"
: > "$out/session.log"
: > "$out/results.jsonl"
: > "$out/bench_ops.txt"
failed=0  # the exit status: 1 when a step failed, was cut or was not started
junit_dir=$(mktemp -d)
trap 'rm -rf "$junit_dir"' EXIT
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HYPOTHESIS_PROFILE=${HYPOTHESIS_PROFILE:-ci}
if [ $dry = 1 ]; then
    export CUDA_VISIBLE_DEVICES=""
    bench=(--device cpu --sizes 64x64 --ops add --dtypes float64 --nc 2 --repeats 3 --warmup 1 --budget 1)
else
    bench=(--device cuda --sizes 4096x4096 --ops add mul div sqrt exp log atanh acosh tanh sin --dtypes float64 float32 --nc 2 3 4
        --no-ref --repeats 3 --warmup 1 --budget 0.5)
fi
workers=${GPU_SESSION_WORKERS:-$([ $dry = 1 ] && echo 0 || echo 4)}
xdist=()
if [ "$workers" -gt 0 ] && "$py" -c "import xdist" 2>/dev/null; then xdist=(-n "$workers"); fi

{
    echo "gpu_session.sh$([ $dry = 1 ] && echo ' --dry-run (CUDA hidden)')"
    if command -v nvidia-smi >/dev/null; then nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; fi
    git log --oneline -1
    date -u
} > "$out/machine.txt" 2>&1

merge_junit() {  # all finished steps' reports as one junit.xml
    "$py" - "$junit_dir" "$out/junit.xml" <<'EOF'
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

root = ET.Element("testsuites")
for f in sorted(Path(sys.argv[1]).glob("*.xml")):
    tree = ET.parse(f).getroot()
    for suite in tree.iter("testsuite"):
        suite.set("name", f.stem)
        root.append(suite)
ET.ElementTree(root).write(sys.argv[2], encoding="utf-8", xml_declaration=True)
EOF
}

step() {  # step NAME LIMIT_S LOG CMD...: CMD under `timeout`, its output appended to LOG
    local name=$1 limit=$2 log=$3
    shift 3
    local left=$((budget - SECONDS))
    if [ "$left" -lt "$limit" ]; then limit=$left; fi
    if [ "$limit" -lt 20 ]; then
        echo "$name not started: ${left}s of the ${budget}s budget left" >> "$out/steps.log"
        failed=1
        return
    fi
    echo "=== $name (limit ${limit}s) $(date -u +%T)" >> "$out/session.log"
    local t0=$SECONDS
    timeout -k 10 "$limit" "$@" >> "$log" 2>&1
    local rc=$?
    if [ $rc -ne 0 ]; then failed=1; fi
    echo "$name rc=$rc $((SECONDS - t0))s (limit ${limit}s)" >> "$out/steps.log"
    merge_junit >> "$out/session.log" 2>&1
}

pytest_step() {  # pytest_step NAME LIMIT_S PYTEST_ARGS...
    local name=$1 limit=$2
    shift 2
    step "$name" "$limit" "$out/session.log" "$py" -m pytest -m cuda -v -rA --tb=short -p no:cacheprovider -p no:benchmark \
        -p tests.session_log --results-log "$out/results.jsonl" --per-test-timeout "$per_test" --durations=15 \
        --junitxml "$junit_dir/$name.xml" "$@"
}

step facts 120 "$out/machine.txt" "$py" benchmarks/device_facts.py
pytest_step native_cuda 180 "${xdist[@]}" tests/mcf/test_native_cuda.py
step bench_ops 200 "$out/bench_ops.txt" "$py" benchmarks/bench_ops.py "${bench[@]}" --markdown --pivot nc --write-results "$out/gpu_ops.md"
# shellcheck disable=SC2086  # GPU_SESSION_REST is a list of paths
pytest_step cuda_rest 150 "${xdist[@]}" --ignore=tests/mcf/test_native_cuda.py $rest

echo "wall ${SECONDS}s" >> "$out/steps.log"
cat "$out/steps.log"
grep -hE "^(FAILED|ERROR)|[0-9]+ (passed|failed)" "$out/session.log" | tail -12
tail -20 "$out/bench_ops.txt"
exit $failed
