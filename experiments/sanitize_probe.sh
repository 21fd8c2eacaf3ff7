#!/usr/bin/env bash
# The first device call of the memory check (issue 35), on an H200 with the CUDA toolkit's
# compute-sanitizer, from the repository's root, in at most 4 minutes:
#
#     OUT=/some/folder bash experiments/sanitize_probe.sh
#
# 1. compute-sanitizer --version (the record keeps it; docs/verification.md names 2025.3.1).
# 2. The control (tests/fixtures/sanitize/code/oob-store: a mask that stores past the end of a
#    1,000-element tensor) under memcheck by hand, with PyTorch's caching allocator on and then off:
#    the issue measured 0 errors with it on, 26 with it off.
# 3. The same control through verify.py --mode sanitize (its launcher, its options): the record the
#    tests keep, to import with
#        python tools/verify.py --import control.tar.gz --code-dir tests/fixtures/sanitize/code \
#            --evidence-dir tests/fixtures/sanitize/evidence --accept-changes
#    If step 2 finds errors with the allocator off and this step finds none, compute-sanitizer did not
#    follow the launcher's execv (record/capture.py): say so, and run the tool on python directly.
# 4. verify.py --mode sanitize --lesson vector-add --lesson gluon-basics, its bundle in $OUT.
# Each step is timed; the logs and bundles are left in $OUT.
set -u
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
DEADLINE=$((SECONDS + 235))
left() { local s=$((DEADLINE - SECONDS)); [ "$s" -gt "$1" ] && echo "$1" || echo $((s > 5 ? s : 5)); }
step() {  # step NAME LIMIT OUTPUT command...: run it with a time limit (its output to OUTPUT, or - for
          # here), print its time and exit code
  local name=$1 limit out=$3; limit=$(left "$2"); shift 3
  local t0=$SECONDS rc
  echo "== $name (limit ${limit} s)"
  if [ "$out" = - ]; then timeout --kill-after=5 "$limit" "$@"; rc=$?
  else timeout --kill-after=5 "$limit" "$@" > "$out" 2>&1; rc=$?; fi
  echo "== $name: exit $rc in $((SECONDS - t0)) s"
}

CS=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || ls -1 /usr/local/cuda/bin/compute-sanitizer \
  /usr/local/cuda-*/bin/compute-sanitizer 2>/dev/null | head -1)}
if [ -z "$CS" ] || [ ! -x "$CS" ]; then
  echo "compute-sanitizer not found (COMPUTE_SANITIZER, PATH, /usr/local/cuda*/bin)"; exit 2
fi
export COMPUTE_SANITIZER=$CS
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
step "compute-sanitizer --version" 15 - "$CS" --version

CONTROL=tests/fixtures/sanitize/code/oob-store/oob_store.py
OPTIONS=(--tool memcheck --padding 512 --print-limit 200 --strip-paths no --error-exitcode 86
         --destroy-on-device-error kernel --show-backtrace no)
for allocator in on off; do
  if [ $allocator = off ]; then export PYTORCH_NO_CUDA_MEMORY_CACHING=1; else unset PYTORCH_NO_CUDA_MEMORY_CACHING; fi
  step "control under memcheck by hand, caching allocator $allocator" 45 "$OUT/control-allocator-$allocator.out" \
    env VT_SANITIZE=memcheck "$CS" "${OPTIONS[@]}" --log-file "$OUT/control-allocator-$allocator.log" \
    python3 "$CONTROL"
  grep -h "ERROR SUMMARY" "$OUT/control-allocator-$allocator.log" || echo "(no ERROR SUMMARY line)"
  grep -c "Invalid __global__" "$OUT/control-allocator-$allocator.log" | sed 's/^/Invalid __global__ records: /'
done
unset PYTORCH_NO_CUDA_MEMORY_CACHING

step "the control through verify.py --mode sanitize" 60 - \
  python3 tools/verify.py --mode sanitize --force --code-dir tests/fixtures/sanitize/code \
  --evidence-dir "$OUT/control-evidence" --bundle "$OUT/control.tar.gz"

step "verify.py --mode sanitize --lesson vector-add --lesson gluon-basics" 200 - \
  python3 tools/verify.py --mode sanitize --force --lesson vector-add --lesson gluon-basics --timeout 150 \
  --bundle "$OUT/san.tar.gz"
echo "total: $SECONDS s; files in $OUT:"
ls -la "$OUT"
