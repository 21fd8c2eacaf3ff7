#!/usr/bin/env bash
# Issue 38, call K (one H200, <= 560 s): the forward with its P V in flight under the softmax
# (experiments/attention_tree.py), the backward's wait for dP kept below the exponentials and the
# atomic dQ (experiments/attention_bwd_exp.py), and Nsight Compute's tensor-pipe share of the forward
# with and without the overlap. Logs and JSON into $OUT.
#     bash experiments/call_k.sh
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
t0=$(date +%s)
stamp() { echo "== $1: $(( $(date +%s) - t0 )) s"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
stamp start
timeout 230 python3 experiments/gluon_variants.py --part attention --rounds 5 > "$OUT/fwd.log" 2>&1
stamp "forward rc=$?"; grep -v "^\s*$" "$OUT/fwd.log" | tail -n 75
timeout 200 python3 experiments/bwd_variants.py --rounds 7 > "$OUT/bwd.log" 2>&1
stamp "backward rc=$?"; grep -v "^\s*$" "$OUT/bwd.log" | tail -n 70
timeout 90 ncu --clock-control none -k regex:'attn_fwd_ws' --launch-skip 18 --launch-count 6 \
    --metrics sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second \
    --csv python3 experiments/gluon_ncu.py overlap > "$OUT/ncu_overlap.csv" 2> "$OUT/ncu_overlap.err"
stamp "ncu rc=$?"; tail -n 20 "$OUT/ncu_overlap.csv"; tail -n 5 "$OUT/ncu_overlap.err"
cp gluon_*.json bwd_variants.json "$OUT/" 2>/dev/null
ls -la "$OUT"
