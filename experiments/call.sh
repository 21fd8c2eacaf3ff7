#!/usr/bin/env bash
# One device call: its steps in order, each within its own time, logs and JSON into $OUT (default /tmp/out).
# Every GPU call NOTES.md cites is this runner with its steps (experiments/README.md: calls A to M):
#     bash experiments/call.sh STEP...
# Steps (SECONDS: the step's own limit; LESSONS: names joined by '+'):
#   machine                          the GPU and its clocks, torch, Triton, compute-sanitizer's version
#   race:SECONDS:ROUNDS[:SMOKE]      the attention forward's variants: gluon_variants.py --part attention
#                                    --rounds ROUNDS [--smoke-timeout SMOKE] (fwd.log)
#   bwd:SECONDS:ROUNDS               the attention backward's variants: bwd_variants.py --rounds ROUNDS (bwd.log)
#   script:SECONDS:NAME[:ARGS]       python3 experiments/NAME.py ARGS (NAME.log)
#   ncu:SECONDS:matmul|overlap       Nsight Compute's tensor-pipe share: of the Gluon matmul and cuBLAS at 8192^3,
#                                    or of the attention forward with and without the overlap (gluon_ncu.py;
#                                    ncu_matmul.csv, ncu_overlap.csv)
#   record:KEY=VALUE,...             experiments/record_round.sh with gpu=LESSONS, sanitize=LESSONS, jobs=,
#                                    san_timeout=, sanitize_first=1, out=SUBFOLDER and limit=SECONDS (until-N: what
#                                    is left of N seconds since the call began)
#   initcheck:SECONDS:LESSONS[:OPTS] each lesson under initcheck alone, as the sanitize mode runs it, three at once,
#                                    every line it prints stamped with the seconds since its start; OPTS go to
#                                    compute-sanitizer (LESSON.stamped.log, LESSON.initcheck.log)
#   sanitizer-probes                 compute-sanitizer's four tools on the Gluon kernels and the planted
#                                    out-of-bounds control (gluon_sanitize.py), beside the sanitize mode's own
#                                    probe (sanitize_probe.sh) (sanitizer-logs.tar.gz)
# For example, call K:
#     bash experiments/call.sh machine race:230:5 bwd:200:7 ncu:90:overlap
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; export OUT
mkdir -p "$OUT"
t0=$(date +%s)
stamp() { echo "== $1: $(( $(date +%s) - t0 )) s"; }
lessons() { echo "${1//+/ }"; }
sanitizer() { echo "${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)}"; }

machine() {
    date -u
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv
    python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
    local cs; cs=$(sanitizer)
    if [ -n "$cs" ]; then echo "compute-sanitizer: $cs"; "$cs" --version | tail -n 2; fi
}

race() {  # SECONDS ROUNDS [SMOKE]
    timeout "$1" python3 experiments/gluon_variants.py --part attention --rounds "$2" ${3:+--smoke-timeout "$3"} \
        > "$OUT/fwd.log" 2>&1
    stamp "race rc=$?"; grep -v "^\s*$" "$OUT/fwd.log" | tail -n 75
}

bwd() {  # SECONDS ROUNDS
    timeout "$1" python3 experiments/bwd_variants.py --rounds "$2" > "$OUT/bwd.log" 2>&1
    stamp "bwd rc=$?"; grep -v "^\s*$" "$OUT/bwd.log" | tail -n 110
}

script() {  # SECONDS NAME [ARGS]
    local seconds=$1 name=$2; shift 2
    timeout "$seconds" python3 "experiments/$name.py" $* > "$OUT/$name.log" 2>&1
    stamp "$name rc=$?"; tail -n 60 "$OUT/$name.log"
}

ncu_step() {  # SECONDS matmul|overlap
    local metrics=sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum
    metrics+=,sm__cycles_elapsed.avg.per_second
    case $2 in
        matmul) timeout "$1" ncu --clock-control none -k regex:'matmul_ws|nvjet|gemm|xmma' --launch-skip 6 \
                    --metrics "$metrics,launch__grid_size" --csv python3 experiments/gluon_ncu.py matmul \
                    > "$OUT/ncu_matmul.csv" 2> "$OUT/ncu_matmul.err" ;;
        overlap) timeout "$1" ncu --clock-control none -k regex:'attn_fwd_ws' --launch-skip 18 --launch-count 6 \
                    --metrics "$metrics" --csv python3 experiments/gluon_ncu.py overlap \
                    > "$OUT/ncu_overlap.csv" 2> "$OUT/ncu_overlap.err" ;;
        *) echo "ncu: matmul or overlap, not '$2'"; return 2 ;;
    esac
    stamp "ncu $2 rc=$?"; tail -n 20 "$OUT/ncu_$2.csv"; tail -n 5 "$OUT/ncu_$2.err"
}

record() {  # KEY=VALUE,...: record_round.sh's variables, each call with only those it names
    local -a env=(GPU= SANITIZE=) pairs
    local pair key value out=$OUT
    IFS=, read -r -a pairs <<< "$1"
    for pair in "${pairs[@]}"; do
        key=${pair%%=*}; value=${pair#*=}
        case $key in
            gpu|sanitize) env+=("${key^^}=$(lessons "$value")") ;;
            jobs|san_timeout|sanitize_first) env+=("${key^^}=$value") ;;
            limit) [[ $value == until-* ]] && value=$(( ${value#until-} - ($(date +%s) - t0) )); env+=("LIMIT=$value") ;;
            out) out="$OUT/$value" ;;
            *) echo "record: unknown key '$key'"; return 2 ;;
        esac
    done
    env "${env[@]}" OUT="$out" bash experiments/record_round.sh
    stamp "record rc=$?"
}

initcheck() {  # SECONDS LESSONS [OPTS]
    local seconds=$1 opts=${3:-} name
    compute-sanitizer --help 2>&1 | grep -i -A3 "initcheck\|check-api-memory\|track-unused" | head -60
    one() {  # LESSON: the lesson under initcheck, its output stamped
        local name=$1 main="code/$1/${1//-/_}.py" start; start=$(date +%s)
        env PYTORCH_NO_CUDA_MEMORY_CACHING=1 VT_SANITIZE=initcheck VT_RESULTS="$OUT/$name.json" \
            VT_FIGURES="/tmp/fig-$name" TRITON_CACHE_DIR="/tmp/cache-$name" PYTHONUNBUFFERED=1 \
            timeout "$seconds" compute-sanitizer --tool initcheck --print-limit 200 \
            --log-file "$OUT/$name.initcheck.log" --require-cuda-init no $opts python3 "$main" 2>&1 |
            while IFS= read -r line; do echo "$(( $(date +%s) - start )) $line"; done > "$OUT/$name.stamped.log"
        echo "== $name: done after $(( $(date +%s) - start )) s"
    }
    for name in $(lessons "$2"); do one "$name" & done
    wait
    for f in "$OUT"/*.stamped.log; do echo "== $f"; grep -v "^\S* *$" "$f" | tail -n 40; done
    for f in "$OUT"/*.initcheck.log; do echo "== $f"; tail -n 6 "$f"; done
    stamp initcheck
}

sanitizer_probes() {
    local cs part; cs=$(sanitizer)
    mkdir -p /tmp/san
    run_tool() {  # TOOL PART [OPTIONS]
        local tool=$1 part=$2; shift 2
        PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout 200 "$cs" --tool "$tool" --strip-paths no --print-limit 100 \
            --launch-timeout 120 "$@" python3 experiments/gluon_sanitize.py "$part" > "/tmp/san/$tool-$part.log" 2>&1
        echo "$tool $part rc=$?" >> /tmp/san/rc.txt
    }
    ( OUT=/tmp/probe bash experiments/sanitize_probe.sh > /tmp/san/sanitize-probe.log 2>&1 ) &
    for part in attention matmul copy; do
        run_tool memcheck "$part" &
        run_tool racecheck "$part" --racecheck-report all &
        run_tool initcheck "$part" &
        run_tool synccheck "$part" &
    done
    run_tool memcheck oob &
    ( timeout 120 "$cs" --tool memcheck --strip-paths no --print-limit 100 python3 experiments/gluon_sanitize.py oob \
        > /tmp/san/memcheck-oob-caching-on.log 2>&1; echo "memcheck oob caching-on rc=$?" >> /tmp/san/rc.txt ) &
    wait
    cp /tmp/probe/control.tar.gz /tmp/probe/san.tar.gz "$OUT/" 2>/dev/null
    tar -czf "$OUT/sanitizer-logs.tar.gz" -C /tmp san probe
    stamp "sanitizer probes"; cat /tmp/san/rc.txt
}

stamp start
for step in "$@"; do
    IFS=: read -r kind a b rest <<< "$step"
    echo "== $step"
    case $kind in
        machine) machine ;;
        race) race "$a" "$b" "$rest" ;;
        bwd) bwd "$a" "$b" ;;
        script) script "$a" "$b" $rest ;;
        ncu) ncu_step "$a" "$b" ;;
        record) record "${step#record:}" ;;
        initcheck) initcheck "$a" "$b" "$rest" ;;
        sanitizer-probes) sanitizer_probes ;;
        *) echo "unknown step '$step' (see the top of experiments/call.sh)"; exit 2 ;;
    esac
done
cp gluon_*.json bwd_variants.json "$OUT/" 2>/dev/null
ls -la "$OUT"
