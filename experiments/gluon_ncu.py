"""One launch of each kernel worth profiling, for Nsight Compute (H200).

    ncu --clock-control none -k regex:'attn_fwd_ws|matmul_ws|flash|fmha|sm90' \
        --section ComputeWorkloadAnalysis --section WarpStateStats --csv --page details \
        python3 experiments/gluon_ncu.py > $OUT/ncu.csv

The Gluon attention kernel (full D=128, causal D=64: the best and the worst
case against SDPA), SDPA itself at the same shapes, and the Gluon matmul at
8192^3. Each runs once; the lessons' evidence has the timings.

`python3 experiments/gluon_ncu.py matmul` (issue 38, item 3): the Gluon matmul
(the lesson's 3-stage configuration) and cuBLAS (torch.matmul) at 8192^3, one
launch each after a warm-up, for the tensor pipe's busy share of each: how far
past cuBLAS the hardware leaves room for.

`python3 experiments/gluon_ncu.py overlap` (2026-12-06): the lesson's attention
kernel and experiments/attention_tree.py's PV 1 and PV 2 (the P V product in
flight under the softmax), full D64 and D128, one launch each after a warm-up:
the tensor pipe's busy share with and without the overlap.
"""

import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "code" / "gluon-attention"), str(ROOT / "code" / "gluon-matmul")]
import gluon_attention as ak  # noqa: E402
import gluon_matmul as mk  # noqa: E402

PART = sys.argv[1] if len(sys.argv) > 1 else "attention"
if PART == "matmul":
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for _ in range(3):  # warm: compile, and cuBLAS's heuristic picks its kernel
        mk.matmul_ws(a, b, sms, stages=3, epi_split=1)
        torch.matmul(a, b)
    torch.cuda.synchronize()
    mk.matmul_ws(a, b, sms, stages=3, epi_split=1)
    torch.matmul(a, b)
    torch.cuda.synchronize()
    sys.exit(0)

if PART == "overlap":  # 18 warm-up launches, then 6 to profile: --launch-skip 18
    sys.path.insert(0, str(ROOT / "experiments"))
    import attention_tree as at
    runs = []
    for D in (64, 128):
        q, k, v = (torch.randn(4, 32, 4096, D, device="cuda", dtype=torch.float16) for _ in range(3))
        runs += [lambda q=q, k=k, v=v: ak.attention_ws(q, k, v, False),
                 lambda q=q, k=k, v=v: at.attention_ws(q, k, v, False, pv=1),
                 lambda q=q, k=k, v=v: at.attention_ws(q, k, v, False, pv=2)]
    for fn in runs * 3:
        fn()
    torch.cuda.synchronize()
    for fn in runs:
        fn()
    torch.cuda.synchronize()
    sys.exit(0)

sdpa = torch.nn.functional.scaled_dot_product_attention
for D, causal in ((128, False), (64, True)):
    q, k, v = (torch.randn(4, 32, 4096, D, device="cuda", dtype=torch.float16) for _ in range(3))
    ak.attention_ws(q, k, v, causal, pingpong=False)
    sdpa(q, k, v, is_causal=causal)
a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
mk.matmul_ws(a, a, torch.cuda.get_device_properties(0).multi_processor_count, stages=3,
             epi_split=1)
torch.cuda.synchronize()
