"""Gluon on Hopper: which variants compile, run correctly and how fast (H200).

An experiment, not a lesson: it imports the kernels of the three Gluon lessons
(code/gluon-*/..._kernels.py) with the configurations below, checks each one
once in a child process (a wrong mbarrier phase hangs a kernel; the child is
killed after --smoke-timeout seconds and the variant is recorded as `hang`),
then times the ones that passed against their baselines with the kit's
`bench_interleaved` (CUDA-graph replays, interleaved rounds, per-round ratios
and their 95 % interval).

    python3 experiments/gluon_variants.py --part copy|matmul|attention|all [--only REGEX]

Writes $OUT/gluon_<part>.json (every number) and prints a table per part.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CODE = ROOT / "code"
sys.path[:0] = [str(ROOT / "experiments"), str(CODE), str(CODE / "gluon-basics"), str(CODE / "gluon-matmul"),
                str(CODE / "gluon-attention"), str(CODE / "persistent-tma-matmul"),
                str(CODE / "fused-attention")]


# -- the variants ------------------------------------------------------------------

def copy_variants():
    """Call 2: the lesson's four steps and the ring's depth (the second call's grid)."""
    v = {"blocked-4096-v8-w4": ("blocked", dict(block=4096, vec=8, num_warps=4)),
         "tile-128x256": ("tile", dict(block=(128, 256)))}
    for block, stages, ahead, per_sm in (((64, 256), 4, 3, 1), ((64, 256), 4, 2, 1),
                                         ((64, 256), 6, 4, 1), ((64, 256), 6, 5, 1),
                                         ((128, 256), 3, 2, 1), ((64, 256), 3, 2, 2),
                                         ((32, 256), 8, 6, 1), ((64, 128), 8, 6, 1)):
        tag = f"{block[0]}x{block[1]}-s{stages}-a{ahead}-x{per_sm}"
        v[f"pipe-{tag}"] = ("pipe", dict(block=block, stages=stages, ahead=ahead, per_sm=per_sm))
    for block, stages, per_sm in (((64, 256), 4, 1), ((64, 256), 6, 1), ((128, 256), 3, 1),
                                  ((64, 256), 3, 2)):
        tag = f"{block[0]}x{block[1]}-s{stages}-x{per_sm}"
        v[f"ws-{tag}"] = ("ws", dict(block=block, stages=stages, per_sm=per_sm))
    return v


def matmul_variants():
    """The cooperative kernel's configurations (the ping-pong kernel of the first call,
    which failed at launch, is not kept: NOTES.md has its record)."""
    v = {}
    for stages, epi in ((4, 2), (3, 1)):
        for group in (8,):
            v[f"coop-128x256x64-s{stages}-e{epi}-g{group}"] = (
                "coop", dict(block=(128, 256, 64), stages=stages, epi_split=epi, group_m=group))
    v["coop-128x256x64-s4-e2-g8-p40"] = ("coop", dict(block=(128, 256, 64), stages=4, epi_split=2,
                                                      group_m=8, producer_regs=40))
    v["coop-128x128x64-s6-e1-g8-w4"] = ("coop", dict(block=(128, 128, 64), stages=6, epi_split=1,
                                                     group_m=8, num_warps=4))
    v["tl-persistent-tma"] = ("tl", {})
    return v


def attention_variants():
    """Issue 38, 2026-12-06: the P V product in flight under the softmax (experiments/attention_tree.py:
    PV 1, P through shared memory and P V retired at the next step's top; PV 2, the lesson's P in
    registers with a block boundary before the wait) and the softmax's row reductions as trees (TREE 2).
    The variants of the earlier calls are in git history and NOTES.md."""
    v = {"lesson": dict(block_n=128, stages=2, pingpong=True, group_heads=8)}
    tr = dict(kernel="tree", block_n=128, stages=2, pingpong=True, group_heads=8)
    v["tree-same"] = dict(tr)  # the copy unchanged: must tie the lesson
    v["pv2"] = dict(tr, pv=2)
    v["pv2-tree2"] = dict(tr, pv=2, tree=2)
    v["pv2-free"] = dict(tr, pv=2, pingpong=False)
    v["pv1"] = dict(tr, pv=1)
    v["pv1-tree2"] = dict(tr, pv=1, tree=2)
    v["pv1-free"] = dict(tr, pv=1, pingpong=False)
    v["tree2"] = dict(tr, tree=2)
    return v


def attention_fn(kw):
    """The variant's launcher: the lesson's kernel, or the persistent experiment."""
    kw = dict(kw)
    kernel = kw.pop("kernel", "ws")
    if kernel == "tree":
        import attention_tree as at
        return lambda q, k, v, c: at.attention_ws(q, k, v, c, **kw)
    if kernel == "exp":
        import attention_exp as ae
        return lambda q, k, v, c: ae.attention_ws(q, k, v, c, **kw)
    if kernel == "nwg":
        import attention_nwg as an
        return lambda q, k, v, c: an.attention_ws(q, k, v, c, **kw)
    if kernel == "persistent":
        import attention_persistent as ap
        return lambda q, k, v, c: ap.attention_persistent(q, k, v, c, **kw)
    import gluon_attention as ak
    return lambda q, k, v, c: ak.attention_ws(q, k, v, c, **kw)


ATTN_CASES = [("full", 128, False), ("causal", 128, True), ("full", 64, False), ("causal", 64, True)]
B, H, S = 4, 32, 4096


# -- one variant, run once and checked (in a child process) --------------------------------

def run_copy(name, spec, src, dst, num_sms):
    import gluon_basics as ck
    kind, kw = spec
    if kind == "blocked":
        return lambda: ck.copy_blocked(src.view(-1), dst.view(-1), **kw)
    if kind == "tile":
        return lambda: ck.copy_tma_tile(src, dst, **kw)
    fn = ck.copy_tma_pipelined if kind == "pipe" else ck.copy_ws
    return lambda: fn(src, dst, num_sms, **kw)


def run_matmul(name, spec, a, b, c, num_sms):
    kind, kw = spec
    if kind == "tl":
        import persistent_tma_matmul as pt
        return lambda: pt.matmul_persistent_tma(a, b, num_sms, out=c)
    import gluon_matmul as mk
    return lambda: mk.matmul_ws(a, b, num_sms, out=c, **kw)


def smoke(part, name):
    """Child process: compile, run once, check; print one JSON line."""
    import torch
    torch.manual_seed(0)
    num_sms = torch.cuda.get_device_properties(0).multi_processor_count
    t0 = time.time()
    info = {"name": name}
    if part == "copy":
        src = torch.randn(4096 + 64, 8192, device="cuda", dtype=torch.float16)
        dst = torch.full_like(src, float("nan"))
        run_copy(name, copy_variants()[name], src, dst, num_sms)()
        torch.cuda.synchronize()
        info["ok"] = bool(torch.equal(src, dst))
    elif part == "matmul":
        for M, N, K in ((4096, 4096, 4096), (1000, 1032, 776), (777, 520, 4104)):
            a = torch.randn(M, K, device="cuda", dtype=torch.float16)
            b = torch.randn(K, N, device="cuda", dtype=torch.float16)
            c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
            run_matmul(name, matmul_variants()[name], a, b, c, num_sms)()
            want = a.double() @ b.double()
            err = float((c.double() - want).abs().max() / want.abs().max())
            info[f"err_{M}x{N}x{K}"] = err
            info["ok"] = info.get("ok", True) and math.isfinite(err) and err < 2e-3
    else:
        sdpa = torch.nn.functional.scaled_dot_product_attention
        fn = attention_fn(attention_variants()[name])
        info["ok"] = True
        # 512 and 640 rows: a 192-row tile's last one has one or two warpgroups past the sequence.
        smalls = [("causal-small", 128, True), ("full-small", 64, False), ("causal-512", 64, True),
                  ("full-640", 64, False), ("causal-640", 128, True)]
        for kind, D, causal in ATTN_CASES + smalls:
            if "d64only" in name and D != 64:
                continue
            if kind.endswith("small"):
                shape = (1, 3, 384, D)
            elif kind[-3:].isdigit():
                shape = (2, 3, int(kind[-3:]), D)
            else:
                shape = (1, 4, S, D)
            q, k, v = (torch.randn(shape, device="cuda", dtype=torch.float16) for _ in range(3))
            got = fn(q, k, v, causal)
            want = sdpa(q.double(), k.double(), v.double(), is_causal=causal)
            err = float((got.double() - want).abs().max() / want.abs().max())
            info[f"err_{kind}_d{D}"] = err
            info["ok"] = info["ok"] and math.isfinite(err) and err < 8e-3
    torch.cuda.synchronize()
    info["s"] = round(time.time() - t0, 1)
    print("SMOKE " + json.dumps(info), flush=True)


def smoke_all(part, names, timeout, jobs):
    def one(name):
        cmd = [sys.executable, __file__, "--smoke", part, name]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return name, {"name": name, "ok": False, "error": f"hang: killed after {timeout} s"}
        line = next((x for x in p.stdout.splitlines() if x.startswith("SMOKE ")), None)
        if line:
            return name, json.loads(line[6:])
        err = (p.stderr or p.stdout).strip().splitlines()
        tail = [x for x in err if "Error" in x or "error" in x][-3:] or err[-3:]
        return name, {"name": name, "ok": False, "error": " | ".join(tail)[-1500:], "rc": p.returncode}

    with ThreadPoolExecutor(jobs) as pool:
        results = dict(pool.map(one, names))
    for name in names:
        r = results[name]
        print(f"  smoke {name}: {'ok' if r.get('ok') else 'FAILED'} "
              + json.dumps({k: v for k, v in r.items() if k not in ('name', 'ok')})[:1600], flush=True)
    return results


# -- timing -------------------------------------------------------------------------------

def ratios(times, kernel, base, unit_work=None):
    from lessonkit import median_interval
    rs = [b / k for k, b in zip(times[kernel], times[base], strict=True)]
    return median_interval(rs)


def time_part(part, passed, rounds, out):
    import torch

    from lessonkit import bench_interleaved
    num_sms = torch.cuda.get_device_properties(0).multi_processor_count
    res = {}
    torch.manual_seed(1)
    if part == "copy":
        src = torch.randn(16384, 16384, device="cuda", dtype=torch.float16)
        dst = torch.empty_like(src)
        nbytes = 2 * src.numel() * 2
        fns = {"torch-copy": lambda: dst.copy_(src)}
        for name in passed:
            fns[name] = run_copy(name, copy_variants()[name], src, dst, num_sms)
        t = bench_interleaved(fns, rounds=rounds, method="events")
        g = bench_interleaved({"torch-copy": fns["torch-copy"]}, rounds=rounds)
        res["_torch_copy_graph_ms"] = g.median("torch-copy")
        print(f"  torch copy_: events {t.median('torch-copy'):.4f} ms, "
              f"graph {g.median('torch-copy'):.4f} ms", flush=True)
        for name in fns:
            r = ratios(t, name, "torch-copy")
            res[name] = {"ms": t.median(name), "TB/s": nbytes / t.median(name) / 1e9,
                         "vs_copy": r, "rounds": t[name]}
        res["_method"] = t.method
    elif part == "matmul":
        for n in (4096, 8192):
            a = torch.randn(n, n, device="cuda", dtype=torch.float16)
            b = torch.randn(n, n, device="cuda", dtype=torch.float16)
            c = torch.empty(n, n, device="cuda", dtype=torch.float16)
            fns = {"cublas": lambda a=a, b=b: torch.matmul(a, b)}
            for name in passed:
                fns[name] = run_matmul(name, matmul_variants()[name], a, b, c, num_sms)
            t = bench_interleaved(fns, rounds=rounds, warm_s=0.5)
            for name in fns:
                res[f"{name}@{n}"] = {"ms": t.median(name),
                                      "TFLOP/s": 2 * n**3 / t.median(name) / 1e9,
                                      "vs_cublas": ratios(t, name, "cublas")}
            res["_method"] = t.method
            print_table(part, {k: v for k, v in res.items() if k.endswith(f"@{n}")}, "vs_cublas")
    else:
        import fused_attention as fa
        sdpa = torch.nn.functional.scaled_dot_product_attention
        for kind, D, causal in ATTN_CASES:
            q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.float16) for _ in range(3))
            flop = 4.0 * B * H * S * S * D * (0.5 if causal else 1.0)
            fns = {"sdpa": lambda q=q, k=k, v=v, c=causal: sdpa(q, k, v, is_causal=c),
                   "tl-fused-attention": lambda q=q, k=k, v=v, c=causal: fa.attention_tma(
                       q, k, v, c, block_m=128, block_n=64, num_warps=4, num_stages=2)}
            for name in passed:
                if "d64only" in name and D != 64:
                    continue
                fn = attention_fn(attention_variants()[name])
                fns[name] = lambda q=q, k=k, v=v, c=causal, fn=fn: fn(q, k, v, c)
            try:
                t = bench_interleaved(fns, rounds=rounds)
            except Exception as exc:
                print(f"  {kind} d{D}: timing failed: {type(exc).__name__}: {exc}"[:2000])
                continue
            case = f"{kind}-d{D}"
            for name in fns:
                res[f"{name}@{case}"] = {"ms": t.median(name), "TFLOP/s": flop / t.median(name) / 1e9,
                                         "vs_sdpa": ratios(t, name, "sdpa"),
                                         "vs_tl": ratios(t, name, "tl-fused-attention")}
            res["_method"] = t.method
            print_table(part, {k: v for k, v in res.items() if k.endswith(f"@{case}")}, "vs_sdpa")
    if part == "copy":
        print_table(part, res, "vs_copy")
    return res


def print_table(part, res, key):
    print(f"\n  {part}: {key} (median [95 % interval])")
    for name, r in sorted(((n, r) for n, r in res.items() if not n.startswith("_")),
                          key=lambda x: -x[1][key][0]):
        rate = r.get("TB/s") or r.get("TFLOP/s")
        extra = f", vs tl {r['vs_tl'][0]:.3f} [{r['vs_tl'][1]:.3f}, {r['vs_tl'][2]:.3f}]" if "vs_tl" in r else ""
        print(f"    {name:48s} {r['ms']:.4f} ms {rate:8.1f}  {r[key][0]:.3f} "
              f"[{r[key][1]:.3f}, {r[key][2]:.3f}]{extra}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", default="all")
    ap.add_argument("--only", default="")
    ap.add_argument("--smoke", nargs=2)
    ap.add_argument("--smoke-timeout", type=float, default=75)
    ap.add_argument("--jobs", type=int, default=12)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    if args.smoke:
        return smoke(*args.smoke)
    out = Path(os.environ.get("OUT", "."))
    parts = ["attention", "copy"] if args.part == "all" else [args.part]
    for part in parts:
        t0 = time.time()
        names = list({"copy": copy_variants, "matmul": matmul_variants,
                      "attention": attention_variants}[part]())
        names = [n for n in names if re.search(args.only, n)]
        print(f"\n== {part}: {len(names)} variants", flush=True)
        sm = smoke_all(part, names, args.smoke_timeout, args.jobs)
        passed = [n for n in names if sm[n].get("ok")]
        print(f"  {len(passed)} of {len(names)} passed the check ({time.time() - t0:.0f} s)", flush=True)
        res = {"smoke": sm}
        try:
            res["timing"] = time_part(part, passed, args.rounds, out)
        except Exception as exc:
            import traceback
            traceback.print_exc()
            res["timing_error"] = f"{type(exc).__name__}: {exc}"[:3000]
        res["wall_s"] = round(time.time() - t0, 1)
        (out / f"gluon_{part}.json").write_text(json.dumps(res, indent=1, default=str))
        print(f"== {part} done in {res['wall_s']} s", flush=True)


if __name__ == "__main__":
    main()
