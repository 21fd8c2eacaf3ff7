#!/usr/bin/env bash
# Call L (one GPU, <= 560 s): gluon-attention and gluon-attention-backward recorded for their new source (the SASS
# facts in their compiled tables, outputs that start as NaN, plain-store references under initcheck), then their
# memory checks, two lessons at a time, 300 s a tool.
#     bash experiments/call_l.sh
set -uo pipefail
cd "$(dirname "$0")/.."
GPU="gluon-attention gluon-attention-backward" SANITIZE="gluon-attention gluon-attention-backward" JOBS=2 \
    SAN_TIMEOUT=300 LIMIT=560 bash experiments/record_round.sh
