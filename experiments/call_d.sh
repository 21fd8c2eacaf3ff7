#!/usr/bin/env bash
# Issue 38, call D (one H200, <= 590 s): gluon-attention recorded for its current source (the benchmark's
# inputs now small under compute-sanitizer), the Gluon backward timed in CUDA graphs and split by kernel
# (experiments/bwd_graph.py), then gluon-attention's memory check with the time left. Nothing overlaps a timing.
#     bash experiments/call_d.sh
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; export OUT
mkdir -p "$OUT"
start=$(date +%s)
GPU="gluon-attention" SANITIZE="" LIMIT=170 bash experiments/record_round.sh > "$OUT/machine.txt" 2>&1
timeout 170 python3 experiments/bwd_graph.py > "$OUT/bwd_graph.log" 2>&1
echo "bwd_graph: rc=$? at $(( $(date +%s) - start )) s" >> "$OUT/machine.txt"
GPU="" SANITIZE="gluon-attention" JOBS=1 SAN_TIMEOUT=300 LIMIT=$(( 575 - ($(date +%s) - start) )) \
    bash experiments/record_round.sh >> "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"; tail -60 "$OUT/bwd_graph.log"
