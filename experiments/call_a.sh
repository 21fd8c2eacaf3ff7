#!/usr/bin/env bash
# This round's first device call (one H200, ~6 min): issue 38's attention race, then compute-sanitizer's
# first look at the Gluon kernels and the planted out-of-bounds control (issue 35), then the sanitize mode
# and its control (experiments/sanitize_probe.sh). Everything lands under $OUT (at most 8 files).
#     bash experiments/call_a.sh
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" /tmp/san
CS=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)}
{
    date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv
    python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
    echo "compute-sanitizer: $CS"; "$CS" --version
} > "$OUT/machine.txt" 2>&1

t0=$(date +%s)
timeout 240 python3 experiments/gluon_variants.py --part attention --rounds 5 > "$OUT/race.log" 2>&1
echo "race: rc=$? $(( $(date +%s) - t0 )) s" >> "$OUT/machine.txt"

t0=$(date +%s)
run_tool() {  # tool part [extra options]
    local tool=$1 part=$2; shift 2
    PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout 200 "$CS" --tool "$tool" --strip-paths no --print-limit 100 \
        --launch-timeout 120 "$@" python3 experiments/gluon_sanitize.py "$part" > "/tmp/san/$tool-$part.log" 2>&1
    echo "$tool $part rc=$?" >> /tmp/san/rc.txt
}
# The sanitize mode's own probe (its control and two lessons), beside the raw runs: nothing here is timed.
( OUT=/tmp/probe bash experiments/sanitize_probe.sh > /tmp/san/sanitize-probe.log 2>&1 ) &
for part in attention matmul copy; do
    run_tool memcheck "$part" &
    run_tool racecheck "$part" --racecheck-report all &
    run_tool initcheck "$part" &
    run_tool synccheck "$part" &
done
run_tool memcheck oob &
( timeout 120 "$CS" --tool memcheck --strip-paths no --print-limit 100 python3 experiments/gluon_sanitize.py oob \
    > /tmp/san/memcheck-oob-caching-on.log 2>&1; echo "memcheck oob caching-on rc=$?" >> /tmp/san/rc.txt ) &
wait
echo "sanitizer probes: $(( $(date +%s) - t0 )) s" >> "$OUT/machine.txt"

cp /tmp/probe/control.tar.gz /tmp/probe/san.tar.gz "$OUT/" 2>/dev/null
tar -czf "$OUT/sanitizer-logs.tar.gz" -C /tmp san probe
ls -la "$OUT" >> "$OUT/machine.txt"
cat "$OUT/machine.txt" /tmp/san/rc.txt
