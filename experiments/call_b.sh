#!/usr/bin/env bash
# Issue 38, call B (one H200, ~7 min): the forward variants of experiments/attention_nwg.py raced against
# the lesson's kernel and SDPA (experiments/gluon_variants.py --part attention), then the first GPU run of
# the Gluon backward (experiments/attention_bwd_gluon.py: its float64 check, then a first timing against
# cuDNN's backward). Everything lands under $OUT.
#     bash experiments/call_b.sh
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
{
    date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.sm,temperature.gpu --format=csv
    python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
} > "$OUT/machine.txt" 2>&1

t0=$(date +%s)
timeout 300 python3 experiments/gluon_variants.py --part attention --rounds 5 --smoke-timeout 90 > "$OUT/race.log" 2>&1
echo "race: rc=$? $(( $(date +%s) - t0 )) s" >> "$OUT/machine.txt"

t0=$(date +%s)
timeout 150 python3 experiments/attention_bwd_gluon.py --bench > "$OUT/bwd.log" 2>&1
echo "backward: rc=$? $(( $(date +%s) - t0 )) s" >> "$OUT/machine.txt"
nvidia-smi --query-gpu=clocks.sm,temperature.gpu --format=csv >> "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"; grep -E "smoke|passed the check|^    |BWD|B4 H32" "$OUT/race.log" "$OUT/bwd.log" | tail -80
