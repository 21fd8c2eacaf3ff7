#!/usr/bin/env bash
# Call F (one H200, <= 275 s): gluon-attention-backward recorded again for its final source (call E ran the
# source before a figure's hand-set text size came out), then its memory check, 150 s a tool.
#     bash experiments/call_f.sh
set -uo pipefail
cd "$(dirname "$0")/.."
GPU="gluon-attention-backward" SANITIZE="gluon-attention-backward" JOBS=1 SAN_TIMEOUT=150 \
    LIMIT=275 bash experiments/record_round.sh
