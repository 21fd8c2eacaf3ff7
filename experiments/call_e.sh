#!/usr/bin/env bash
# Issue 38, call E (one H200, <= 590 s): the new gluon-attention-backward lesson's first GPU recording, then
# the memory checks of it and of gluon-attention (memcheck, then the other three tools at the same time).
#     bash experiments/call_e.sh
set -uo pipefail
cd "$(dirname "$0")/.."
GPU="gluon-attention-backward" SANITIZE="gluon-attention-backward gluon-attention" JOBS=2 SAN_TIMEOUT=330 \
    LIMIT=585 bash experiments/record_round.sh
