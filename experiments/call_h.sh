#!/usr/bin/env bash
# Issue 38, call H (one H200, <= 590 s): the memory checks of both Gluon attention lessons and attention-backward again, for their
# current sources, synccheck now skipping cuDNN's kernels as racecheck does (record/sanitizer.py), each tool
# given 480 s (initcheck was killed at 150-330 s before): memcheck first, then the other three at once.
#     bash experiments/call_h.sh
set -uo pipefail
cd "$(dirname "$0")/.."
SANITIZE="gluon-attention gluon-attention-backward attention-backward" JOBS=3 SAN_TIMEOUT=480 LIMIT=585 \
    bash experiments/record_round.sh
