#!/usr/bin/env bash
# Issue 38, call G (one H200, <= 420 s): the forward's MUFU variants (experiments/attention_exp.py), the
# backward's variants (experiments/attention_bwd_exp.py), and Nsight Compute's tensor-pipe share of the Gluon
# matmul and cuBLAS at 8192^3. Logs and JSON into $OUT.
#     bash experiments/call_g.sh
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
t0=$(date +%s)
stamp() { echo "== $1: $(( $(date +%s) - t0 )) s"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
compute-sanitizer --help 2>&1 | grep -i -A2 "kernel-name-exclude\|num-cuda-barriers" | head -20
stamp start
timeout 170 python3 experiments/gluon_variants.py --part attention --rounds 5 > "$OUT/fwd.log" 2>&1
stamp "forward rc=$?"; tail -n 45 "$OUT/fwd.log"
timeout 190 python3 experiments/bwd_variants.py --rounds 7 > "$OUT/bwd.log" 2>&1
stamp "backward rc=$?"; grep -v "^\s*$" "$OUT/bwd.log" | tail -n 110
timeout 60 ncu --clock-control none -k regex:'matmul_ws|nvjet|gemm|xmma' --launch-skip 6 \
    --metrics sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,launch__grid_size \
    --csv python3 experiments/gluon_ncu.py matmul > "$OUT/ncu_matmul.csv" 2> "$OUT/ncu_matmul.err"
stamp "ncu rc=$?"; cat "$OUT/ncu_matmul.csv" | tail -n 12; tail -n 5 "$OUT/ncu_matmul.err"
cp gluon_*.json "$OUT/" 2>/dev/null
