#!/usr/bin/env bash
# One recording call on one H200: the GPU runs of the lessons named in $GPU (one after another, so no
# timing overlaps another), then the memory check under compute-sanitizer of those in $SANITIZE
# ($JOBS at a time), all within $LIMIT seconds. Every few seconds the records written so far are packed
# into $OUT/gpu.tar.gz and $OUT/sanitize.tar.gz (experiments/pack_new.py), so a call stopped at its
# limit keeps every lesson that finished; verify.py --import them here.
#     GPU="vector-add softmax-fp32-matmul" SANITIZE="vector-add" LIMIT=560 [SAN_TIMEOUT=S] bash experiments/record_round.sh
# Liger-Kernel, the optional baseline, comes as the hashed wheel in .whl/ (requirements/baselines.txt).
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; LIMIT=${LIMIT:-560}; JOBS=${JOBS:-6}
mkdir -p "$OUT"
start=$(date +%s)
left() { echo $(( LIMIT - ($(date +%s) - start) )); }

python3 -m pip install --quiet --require-hashes --no-deps --no-index --find-links .whl \
    --target /tmp/baselines -r requirements/baselines.txt || echo "no baselines: the Liger comparisons skip"
export PYTHONPATH=/tmp/baselines

# stage MODE LOG VERIFY-ARGS...: run verify.py within the time left, packing what it wrote as it goes
stage() {
    local mode=$1 log=$2; shift 2
    local marker; marker=$(mktemp); local t0; t0=$(date +%s)
    timeout --signal=TERM --kill-after=5 "$(left)" python3 tools/verify.py --mode "$mode" --force "$@" \
        > "$OUT/$log" 2>&1 &
    local pid=$!
    while kill -0 "$pid" 2>/dev/null; do
        sleep 5; python3 experiments/pack_new.py "$marker" "$OUT/$mode.tar.gz" "$mode" > /dev/null
    done
    wait "$pid"; local rc=$?
    python3 experiments/pack_new.py "$marker" "$OUT/$mode.tar.gz" "$mode"
    echo "$mode: rc=$rc $(( $(date +%s) - t0 )) s, $(left) s left"
}

args() { for name in "$@"; do printf -- '--lesson\n%s\n' "$name"; done; }
gpu_stage() { mapfile -t a < <(args $GPU); stage gpu gpu.log "${a[@]}"; }
# Each tool's time limit is the lesson's own ([sanitize.timeouts], from measured times) unless SAN_TIMEOUT sets one.
sanitize_stage() {
    mapfile -t a < <(args $SANITIZE)
    stage sanitize sanitize.log --jobs "$JOBS" ${SAN_TIMEOUT:+--timeout "$SAN_TIMEOUT"} "${a[@]}"
}
# SANITIZE_FIRST=1: the memory checks before the GPU runs (a call whose GPU run may use all the time left)
if [ "${SANITIZE_FIRST:-0}" = 1 ] && [ -n "${SANITIZE:-}" ]; then sanitize_stage; fi
if [ -n "${GPU:-}" ] && [ "$(left)" -gt 30 ]; then gpu_stage; fi
if [ "${SANITIZE_FIRST:-0}" != 1 ] && [ -n "${SANITIZE:-}" ] && [ "$(left)" -gt 30 ]; then sanitize_stage; fi
grep -E "^(verify|  )" "$OUT/gpu.log" 2>/dev/null | tail -40; tail -30 "$OUT/sanitize.log" 2>/dev/null
