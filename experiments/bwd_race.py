"""Issue 38: the Gluon backward (code/gluon-attention-backward/gluon_attention_backward.py) against cuDNN's and tl's.

An experiment, not a lesson. B4 H32 S4096 fp16, D in (128, 64), full and causal; the backward only
(O and the log-sum-exp come from the tl forward, once). Timed with the kit's `bench_interleaved`
(interleaved rounds, per-round ratios, median and 95 % interval; events, as autograd does not
capture). Every Gluon variant is first checked against cuDNN's gradients on the timed inputs.

    python3 experiments/bwd_race.py
"""

import math
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "code" / "gluon-attention-backward"), str(ROOT / "code"),
                str(ROOT / "code" / "attention-backward")]
import attention_backward as tlb  # noqa: E402
import gluon_attention_backward as gb  # noqa: E402

from lessonkit import bench_interleaved, median_interval  # noqa: E402

B, H, S = 4, 32, 4096
VARIANTS = {"gluon": {}, "gluon-s3": {"stages": 3}}


def case(D, causal):
    torch.manual_seed(D + causal)
    q, k, v, do = (torch.randn(B, H, S, D, device="cuda", dtype=torch.float16) for _ in range(4))
    sm_scale = 1.0 / math.sqrt(D)
    o, lse = gb.forward_lse(q, k, v, causal, sm_scale)
    qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.CUDNN_ATTENTION):
        out = torch.nn.functional.scaled_dot_product_attention(qg, kg, vg, is_causal=causal)
    want = torch.autograd.grad(out, (qg, kg, vg), do, retain_graph=True)
    fns = {"cudnn": lambda: torch.autograd.grad(out, (qg, kg, vg), do, retain_graph=True)}
    cfg = tlb.GPU[(D, causal)]
    fns["tl-atomic"] = lambda: tlb.attention_backward(do, q, k, v, o, lse, causal, sm_scale, cfg, "atomic")
    extra = {"gluon-dq128": {"block_n": 128}} if D == 128 else {"gluon-m64": {"block_m": 64}}
    for name, kw in {**VARIANTS, **extra}.items():
        try:
            got = gb.attention_bwd_gluon(q, k, v, o, do, lse, causal, sm_scale, **kw)
            torch.cuda.synchronize()
        except Exception as exc:  # a config that does not compile or launch: say so, time the rest
            print(f"  {name}: {type(exc).__name__}: {str(exc)[:300]}", flush=True)
            continue
        errs = [float((g.float() - w.float()).abs().max() / w.float().abs().max())
                for g, w in zip(got, want, strict=True)]
        ok = all(e < 2e-2 for e in errs)
        print(f"  {name} D{D} {'causal' if causal else 'full'}: vs cuDNN dq/dk/dv "
              + " ".join(f"{e:.1e}" for e in errs) + ("" if ok else "  FAILED, not timed"), flush=True)
        if ok:
            fns[name] = lambda kw=kw: gb.attention_bwd_gluon(q, k, v, o, do, lse, causal, sm_scale, **kw)
    t = bench_interleaved(fns, rounds=7, method="events")
    flop = 2.5 * 4.0 * B * H * S * S * D / (2 if causal else 1)
    print(f"D{D} {'causal' if causal else 'full'} ({t.method}):", flush=True)
    for name in fns:
        r = median_interval([b / a for a, b in zip(t[name], t["cudnn"], strict=True)])
        r_tl = median_interval([b / a for a, b in zip(t[name], t["tl-atomic"], strict=True)])
        print(f"    {name:14s} {t.median(name):.3f} ms {flop / t.median(name) * 1e-9:6.0f} TFLOP/s  vs cuDNN "
              f"{r[0]:.3f} [{r[1]:.3f}, {r[2]:.3f}]  vs tl {r_tl[0]:.3f} [{r_tl[1]:.3f}, {r_tl[2]:.3f}]", flush=True)
    torch.cuda.empty_cache()


if __name__ == "__main__":
    for D in (128, 64):
        for causal in (False, True):
            case(D, causal)
