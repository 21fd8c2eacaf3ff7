#!/usr/bin/env bash
# Call M (one GPU, <= 560 s). On an H200: gluon-attention and gluon-attention-backward recorded there too (call L
# recorded them on an H100), GPU runs and memory checks, then what time is left for the memory checks below. On
# any GPU: the memory checks whose racecheck ran out of time at 150 s (fp16-matmul, split-k,
# persistent-tma-matmul) or stopped on the tool's internal error (gluon-matmul), with up to 400 s a tool. The
# matmul lessons' sources did not change: only their sanitize records are new.
#     bash experiments/call_m.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
MATMULS="fp16-matmul split-k persistent-tma-matmul gluon-matmul"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "== $gpu"
if [[ "$gpu" == *H200* ]]; then
    OUT="$OUT/h200" GPU="gluon-attention gluon-attention-backward" SANITIZE="gluon-attention gluon-attention-backward" \
        JOBS=2 SAN_TIMEOUT=200 LIMIT=300 bash experiments/record_round.sh
    SANITIZE="$MATMULS" JOBS=4 SAN_TIMEOUT=230 LIMIT=250 bash experiments/record_round.sh
else
    SANITIZE="$MATMULS" JOBS=4 SAN_TIMEOUT=400 LIMIT=530 bash experiments/record_round.sh
fi
