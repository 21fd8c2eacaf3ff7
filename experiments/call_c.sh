#!/usr/bin/env bash
# Issue 38, call C (one H200, <= 590 s): the gluon-attention lesson re-recorded with the folded scale (the
# winner of call B), the Gluon backward raced against cuDNN's and the tl one (experiments/bwd_race.py),
# then the memory checks of gluon-attention and attention-backward. Nothing overlaps a timing.
#     bash experiments/call_c.sh
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; export OUT
mkdir -p "$OUT"
start=$(date +%s)
GPU="gluon-attention" SANITIZE="" LIMIT=160 bash experiments/record_round.sh > "$OUT/machine.txt" 2>&1
timeout 110 python3 experiments/bwd_race.py > "$OUT/bwd_race.log" 2>&1
echo "bwd_race: rc=$? at $(( $(date +%s) - start )) s" >> "$OUT/machine.txt"
GPU="" SANITIZE="gluon-attention attention-backward" JOBS=2 SAN_TIMEOUT=160 LIMIT=$(( 550 - ($(date +%s) - start) )) \
    bash experiments/record_round.sh >> "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"; tail -40 "$OUT/bwd_race.log"
