"""Issue 38: the Gluon backward's variants against the lesson's kernels and SDPA's backward (H200).

An experiment, not a lesson. The variants are options of experiments/attention_bwd_exp.py (the lesson's
kernels with options; its docstring has the predictions):

    python3 experiments/bwd_variants.py [--rounds 7] [--only REGEX]    # default: fence|atomic

1. Each variant is checked in a child process (a wrong mbarrier phase hangs a kernel: the child is
   killed after --check-timeout seconds and the variant is recorded as a hang) on the lesson's own
   12 cases against float64 autograd (`kernel_cases`: S 128, 384, 1024, D 64 and 128, causal and
   full, NaN-poisoned outputs), with the lesson's tolerance.
2. The ones that pass are timed with the lesson's contenders at its benchmark shape (B4 H32 S4096)
   in the same interleaved rounds: `bench_interleaved`, CUDA-graph replays, the forwards run once
   on a side stream (the lesson's `backward_fns`). Ratios are per round: cuDNN's time over ours,
   and the lesson's time over the variant's; medians with the kit's 95 % interval.

Writes $OUT/bwd_variants.json and prints a table per case.
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
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CODE = ROOT / "code"
sys.path[:0] = [str(ROOT / "experiments"), str(CODE), str(CODE / "gluon-attention-backward"),
                str(CODE / "attention-backward")]

VARIANTS = {
    # 2026-12-06: the full-mask kernels' wait for dP after the exponentials (a re-wait on a completed
    # barrier, a block boundary ptxas does not hoist the wait across; the causal kernels have one in
    # their mask's branch already), alone and with the variants still untimed or within noise.
    "fence": {"fence": True},
    "fence+dq-bn128": {"fence": True, "dq_block_n": 128},
    # Written after call G, compiled, not yet run on a GPU: FlashAttention-2's dQ inside the dK/dV
    # kernel (atomic adds), its product in 64-column slices (no spill at D = 128) or whole.
    "atomic-dq": {"atomic_dq": True, "dq_cols": 64},
    "atomic-dq-whole": {"atomic_dq": True},
    "fence+atomic-dq": {"fence": True, "atomic_dq": True, "dq_cols": 64},
    # Call G's, kept for reference (not run by default: --only).
    "defer": {"defer": True},
    "pingpong": {"pingpong": True},
    "dq-bn128": {"dq_block_n": 128},
}
DEFAULT = "fence|atomic"


def lesson_module():
    """The lesson's verified run (code/gluon-attention-backward/lesson.py), for its checks and contenders."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("gluon_attention_backward_lesson",
                                                  CODE / "gluon-attention-backward" / "lesson.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def variant_module(cfg: dict):
    """The experiment's kernels with `cfg` applied, shaped like the lesson's module for its helpers (the
    lesson's own: the experiment imports them)."""
    import gluon_attention_backward as lesson_kernels

    import attention_bwd_exp as kx

    def bwd(*args, **kwargs):
        return kx.attention_bwd_gluon(*args, **{**cfg, **kwargs})

    return types.SimpleNamespace(forward_lse=lesson_kernels.forward_lse, CONFIGS=lesson_kernels.CONFIGS,
                                 attention_bwd_gluon=bwd)


def check(name: str) -> None:
    """Child process: the lesson's 12 cases; one JSON line."""
    lesson = lesson_module()
    import torch
    t0 = time.time()
    info = {"name": name, "ok": True, "worst": 0.0}
    kb = variant_module(VARIANTS[name])
    for case, grad, got, want in lesson.kernel_cases(kb):
        err = float((got.double() - want.double()).abs().max() / want.abs().max())
        if not math.isfinite(err) or err > lesson.TOL:
            info["ok"] = False
            info.setdefault("failed", []).append(f"{grad}-{case}: {err:.3g}")
        info["worst"] = max(info["worst"], err) if math.isfinite(err) else float("inf")
    torch.cuda.synchronize()
    info["s"] = round(time.time() - t0, 1)
    print("CHECK " + json.dumps(info), flush=True)


def check_all(names: list[str], timeout: float, jobs: int) -> dict:
    def one(name):
        cmd = [sys.executable, __file__, "--check", name]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return name, {"name": name, "ok": False, "error": f"hang: killed after {timeout} s"}
        line = next((x for x in p.stdout.splitlines() if x.startswith("CHECK ")), None)
        if line:
            return name, json.loads(line[6:])
        tail = (p.stderr or p.stdout).strip().splitlines()[-6:]
        return name, {"name": name, "ok": False, "error": " | ".join(tail)[-1500:], "rc": p.returncode}

    with ThreadPoolExecutor(jobs) as pool:
        results = dict(pool.map(one, names))
    for name in names:
        print(f"  check {name}: {'ok' if results[name].get('ok') else 'FAILED'} "
              f"{json.dumps({k: v for k, v in results[name].items() if k not in ('name', 'ok')})[:1200]}",
              flush=True)
    return results


def race(passed: list[str], rounds: int) -> dict:
    import gluon_attention_backward as kb
    lesson = lesson_module()
    import torch

    from lessonkit import bench_interleaved, median_interval
    shape = (lesson.B, lesson.H, lesson.S)
    res = {}
    for kind, D, causal in lesson.CASES:
        base = lesson.backward_fns(kb, shape, D, causal)
        fns = {"SDPA": base["SDPA"], "lesson": base["gluon"], "lesson:dkdv": base["dkdv"],
               "lesson:dq": base["dq"]}
        for name in passed:
            theirs = lesson.backward_fns(variant_module(VARIANTS[name]), shape, D, causal)
            fns.update({name: theirs["gluon"], f"{name}:dkdv": theirs["dkdv"], f"{name}:dq": theirs["dq"]})
        t = bench_interleaved(fns, rounds=rounds)
        case = f"{kind}-d{D}"
        flop = lesson.flops(shape, D, causal)
        for name in fns:
            per_round = [s / m for s, m in zip(t["SDPA"], t[name], strict=True)]
            key = name.split(":")[0]
            vs_lesson = [a / b for a, b in zip(t["lesson" + name[len(key):]], t[name], strict=True)]
            res[f"{name}@{case}"] = {"ms": t.median(name), "TFLOP/s": flop / t.median(name) / 1e9,
                                     "vs_sdpa": median_interval(per_round),
                                     "vs_lesson": median_interval(vs_lesson), "rounds": t[name]}
        print(f"\n  {case} (B{shape[0]} H{shape[1]} S{shape[2]}, {t.method}, {rounds} rounds): "
              "ms, vs SDPA [95 %], vs the lesson's same part [95 %]", flush=True)
        for name in fns:
            r = res[f"{name}@{case}"]
            print(f"    {name:24s} {r['ms']:.4f} ms  {r['vs_sdpa'][0]:.3f} [{r['vs_sdpa'][1]:.3f}, "
                  f"{r['vs_sdpa'][2]:.3f}]  {r['vs_lesson'][0]:.3f} [{r['vs_lesson'][1]:.3f}, "
                  f"{r['vs_lesson'][2]:.3f}]", flush=True)
        del base, fns
        torch.cuda.empty_cache()
    return res


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--check")
    ap.add_argument("--only", default=DEFAULT)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--check-timeout", type=float, default=150)
    ap.add_argument("--jobs", type=int, default=5)
    args = ap.parse_args()
    if args.check:
        check(args.check)
        return 0
    out = Path(os.environ.get("OUT", "."))
    t0 = time.time()
    names = [n for n in VARIANTS if re.search(args.only, n)]
    print(f"== backward: {len(names)} variants", flush=True)
    checked = check_all(names, args.check_timeout, args.jobs)
    passed = [n for n in names if checked[n].get("ok")]
    print(f"  {len(passed)} of {len(names)} passed ({time.time() - t0:.0f} s)", flush=True)
    res = {"checks": checked}
    try:
        res["timing"] = race(passed, args.rounds)
    except Exception as exc:  # keep the checks
        import traceback
        traceback.print_exc()
        res["timing_error"] = f"{type(exc).__name__}: {exc}"[:3000]
    res["wall_s"] = round(time.time() - t0, 1)
    (out / "bwd_variants.json").write_text(json.dumps(res, indent=1, default=str))
    print(f"== backward done in {res['wall_s']} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
