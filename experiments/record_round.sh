#!/usr/bin/env bash
# One of this round's recording calls on one H200: the GPU runs of a set of lessons, then their memory
# check under compute-sanitizer, each into its own bundle under $OUT (verify.py --import them here).
#     bash experiments/record_round.sh LESSON...
# Liger-Kernel, the optional baseline, comes as the hashed wheel in .whl/ (requirements/baselines.txt).
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
start=$(date +%s)  # the device call's own limit is 10 minutes: the sanitizer gets what the GPU runs leave
lessons=()
for name in "$@"; do lessons+=(--lesson "$name"); done

python3 -m pip install --quiet --require-hashes --no-deps --no-index --find-links .whl \
    --target /tmp/baselines -r requirements/baselines.txt || echo "no baselines: the Liger comparisons skip"
export PYTHONPATH=/tmp/baselines

t0=$(date +%s)
timeout 400 python3 tools/verify.py --mode gpu --force --timeout 180 "${lessons[@]}" \
    --bundle "$OUT/gpu.tar.gz" > "$OUT/gpu.log" 2>&1
echo "gpu: rc=$? $(( $(date +%s) - t0 )) s"
t0=$(date +%s)
timeout $(( 555 - (t0 - start) )) python3 tools/verify.py --mode sanitize --force --jobs 6 --timeout 120 \
    "${lessons[@]}" --bundle "$OUT/sanitize.tar.gz" > "$OUT/sanitize.log" 2>&1
echo "sanitize: rc=$? $(( $(date +%s) - t0 )) s"
tail -30 "$OUT/gpu.log"; tail -40 "$OUT/sanitize.log"
