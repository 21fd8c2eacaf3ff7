#!/usr/bin/env bash
# The course's recording round on one GPU machine, resumable across device calls while the machine stays warm:
# every lesson's GPU run (largest first), then every lesson's memory check, each lesson once. What earlier calls on
# this machine recorded is listed in /tmp/vt-round (outside the working tree, which each call replaces), so the
# same command, repeated, goes on where the last one stopped; each call brings back what it recorded in
# $OUT/gpu.tar.gz and $OUT/sanitize.tar.gz (record_round.sh packs as it goes). verify.py --import them here.
#     LIMIT=585 [ALONE=1] [JOBS=8] [SAN_TIMEOUT=S] [GPU_LEFT="..."] [SANITIZE_LEFT="..."] bash experiments/round.sh
# ALONE=1 first runs every kernels module and `exercises.py --solutions` as a learner would (experiments/alone.py),
# which also fills Triton's cache for the runs that follow.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}; LIMIT=${LIMIT:-585}; STATE=/tmp/vt-round
mkdir -p "$OUT" "$STATE"; touch "$STATE/gpu" "$STATE/sanitize"
start=$(date +%s)
# Largest GPU runs first (their wall times in the last records), so a call cut short leaves the short ones.
GPU_ORDER="gluon-attention profiling-debugging gluon-attention-backward softmax-fp32-matmul gelu-libdevice
layer-norm fused-attention attention-backward rmsnorm-rope cross-entropy batched-matmul fp16-matmul autotune
grouped-gemm split-k persistent-tma-matmul reductions-scans dropout gluon-matmul fp8-matmul gluon-basics
vector-add block-scaled-matmul"
# The memory checks in the order that completes the most lessons in the time there is: racecheck runs one at a
# time on the GPU, so by its last measured time, shortest first; Gluon's (partial by design) after the rest.
SANITIZE_ORDER="vector-add block-scaled-matmul fused-attention autotune profiling-debugging rmsnorm-rope layer-norm
cross-entropy softmax-fp32-matmul grouped-gemm fp8-matmul batched-matmul attention-backward reductions-scans
gelu-libdevice dropout gluon-basics gluon-matmul gluon-attention gluon-attention-backward fp16-matmul
persistent-tma-matmul split-k"

remaining() {  # ORDER FILE: the lessons of ORDER not listed in $STATE/FILE
    local name out=()
    for name in $1; do grep -qx "$name" "$STATE/$2" || out+=("$name"); done
    echo "${out[*]:-}"
}

seed() {  # ORDER LEFT FILE: all of ORDER but LEFT counts as done
    local name
    for name in $1; do
        case " $2 " in *" $name "*) ;; *) grep -qx "$name" "$STATE/$3" || echo "$name" >> "$STATE/$3" ;; esac
    done
}
# GPU_LEFT / SANITIZE_LEFT, where set, name what is left (a fresh machine has no $STATE: the last call's line says)
if [ -n "${GPU_LEFT+set}" ]; then seed "$GPU_ORDER" "$GPU_LEFT" gpu; fi
if [ -n "${SANITIZE_LEFT+set}" ]; then seed "$SANITIZE_ORDER" "$SANITIZE_LEFT" sanitize; fi

echo "== $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); done before this call:" \
     "$(wc -l < "$STATE/gpu") GPU runs, $(wc -l < "$STATE/sanitize") memory checks"
if [ "${ALONE:-0}" = 1 ]; then
    timeout 200 python3 experiments/alone.py --jobs 8 --timeout 150 > "$OUT/alone.log" 2>&1
    echo "== alone rc=$? after $(( $(date +%s) - start )) s"; grep -E "rc=|exited 0" "$OUT/alone.log" | grep -v "rc=0 " | tail -n 30
    grep -c "rc=0 " "$OUT/alone.log"
fi
marker=$(mktemp); sleep 1
GPU=$(remaining "$GPU_ORDER" gpu) SANITIZE=$(remaining "$SANITIZE_ORDER" sanitize) \
    LIMIT=$(( LIMIT - ($(date +%s) - start) )) JOBS=${JOBS:-8} OUT="$OUT" bash experiments/record_round.sh
for mode in gpu sanitize; do  # what this call recorded, so the next one goes on from there
    find evidence -name "$mode-*.json" -newer "$marker" | cut -d/ -f2 | sort -u >> "$STATE/$mode"
done
echo "== done after this call: $(wc -l < "$STATE/gpu") GPU runs, $(wc -l < "$STATE/sanitize") memory checks;" \
     "left: GPU [$(remaining "$GPU_ORDER" gpu)] sanitize [$(remaining "$SANITIZE_ORDER" sanitize)]"
