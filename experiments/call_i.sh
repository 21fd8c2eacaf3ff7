#!/usr/bin/env bash
# Issue 38 follow-up, call I (one H200, <= 330 s): where initcheck spends its time. initcheck never finished on
# the attention lessons (killed at 150-480 s). Each lesson runs under initcheck alone, as the sanitize mode runs
# it (allocator off, VT_SANITIZE=initcheck), three at once, every line the lesson prints stamped with the seconds
# since its start, so the slow step shows; the tool's initcheck options are printed first.
#     bash experiments/call_i.sh
# Call J, the same with the host backtraces off, two lessons, 150 s (are the backtraces the minutes?):
#     OPTS="--show-backtrace no" LESSONS="gluon-attention-backward attention-backward" TIMEOUT=150 bash experiments/call_i.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
compute-sanitizer --help 2>&1 | grep -i -A3 "initcheck\|check-api-memory\|track-unused" | head -60
one() {  # LESSON MAIN: the lesson under initcheck, its output stamped
    local name=$1 main=$2 t0; t0=$(date +%s)
    env PYTORCH_NO_CUDA_MEMORY_CACHING=1 VT_SANITIZE=initcheck VT_RESULTS="$OUT/$name.json" \
        VT_FIGURES="/tmp/fig-$name" TRITON_CACHE_DIR="/tmp/cache-$name" PYTHONUNBUFFERED=1 \
        timeout "${TIMEOUT:-300}" compute-sanitizer --tool initcheck --print-limit 200 \
        --log-file "$OUT/$name.initcheck.log" --require-cuda-init no ${OPTS:-} python3 "$main" 2>&1 |
        while IFS= read -r line; do echo "$(( $(date +%s) - t0 )) $line"; done > "$OUT/$name.stamped.log"
    echo "== $name: done after $(( $(date +%s) - t0 )) s"
}
for name in ${LESSONS:-gluon-attention-backward attention-backward gluon-attention}; do
    one "$name" "code/$name/${name//-/_}.py" &
done
wait
for f in "$OUT"/*.stamped.log; do echo "== $f"; grep -v "^\S* *$" "$f" | awk '{print}' | tail -n 40; done
for f in "$OUT"/*.initcheck.log; do echo "== $f"; tail -n 6 "$f"; done
