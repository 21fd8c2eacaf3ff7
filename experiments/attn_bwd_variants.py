"""Attention backward against SDPA's: which kernel shape and which dQ path reach 0.7x?

An experiment, not a lesson (README.md beside this file). On a GPU host, from the
repository root:

    python3 experiments/attn_bwd_variants.py [--grid 1|2] [--gpus 0,1] [--budget-s 480]

Variants (ids: family|D|mask|config):
  ptr       the lesson's dK/dV kernel before TMA (commit f0e19b7, copied below),
            pointer loads, dQ^T by pointer atomics
  tma-ptr   the lesson's TMA dK/dV kernel with DQ_BY="threads" (its interpreter
            path): TMA loads, dQ^T by pointer atomics
  tma-tma   TMA loads, and each dQ tile added into the FP32 buffer by one TMA
            reduce (cp.reduce.async.bulk.tensor.add), FlashAttention-3's choice
  two       the pointer two-kernel method (dK/dV, then dQ), each kernel's config
            swept with the other held at (32,128,8,3) / (128,64,8,3)
  tma-two   the TMA dK/dV kernel without dQ, then the pointer dQ kernel

Phases: compile and check every variant at the benchmark shape in parallel worker
processes (a compiler crash loses one variant only); race them against SDPA's
backward, one process per GPU (do_bench medians, ours and SDPA's back to back,
order alternating); confirm the best three per family and case, and the lesson's
old config, with lessonkit.bench_interleaved, the lesson's timing.
Writes $OUT/attn_bwd_variants.json (rewritten after each phase) and prints tables.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import triton
import triton.language as tl

ROOT = Path(__file__).resolve().parents[1]
LESSON_FILE = ROOT / "code" / "attention-backward" / "attention_backward.py"
B, H, S = 4, 16, 4096
DEVICE = "cuda"
if os.environ.get("TRITON_INTERPRET") == "1":  # a smoke test on the CPU: tiny shapes
    B, H, S, DEVICE = 1, 2, 256, "cpu"
PTR_DKDV = (32, 128, 8, 3)  # the pre-TMA lesson's two-kernel dK/dV config at D = 128
DQ_CFG = (128, 64, 8, 3)    # the lesson's dQ kernel config (both head dims)
OUT = Path(os.environ.get("OUT", "/tmp/attn_bwd_out"))


def load_lesson():
    sys.path[:0] = [str(LESSON_FILE.parent), str(ROOT / "code")]
    spec = importlib.util.spec_from_file_location("attention_backward", LESSON_FILE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# -- The kernel the lesson no longer has ----------------------------------------------

# The lesson's dK/dV kernel before TMA (commit f0e19b7), for the ptr and two
# families: pointer loads, dQ^T by pointer atomics when ATOMIC_DQ.
@triton.jit
def _ptr_loop(dk, dv, k, v, Q, DO, L, Delta, DQ, offs_n, lo, hi, seq_len, sm_scale,
               qk_scale, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
               MASKED: tl.constexpr, CAUSAL: tl.constexpr, ATOMIC_DQ: tl.constexpr):
    # Query blocks [lo, hi) against this program's keys. Tiles are
    # transposed: keys along rows, queries along columns, so that dK and dV
    # (one row per key) accumulate in place.
    offs_d = tl.arange(0, HEAD_DIM)
    for start_m in range(lo, hi, BLOCK_M):
        start_m = tl.multiple_of(start_m, BLOCK_M)
        offs_m = start_m + tl.arange(0, BLOCK_M)
        qo = offs_m[:, None] * HEAD_DIM + offs_d[None, :]
        if MASKED:
            rows = offs_m < seq_len
            q = tl.load(Q + qo, mask=rows[:, None], other=0.0)
            do = tl.load(DO + qo, mask=rows[:, None], other=0.0)
            lse = tl.load(L + offs_m, mask=rows, other=0.0)
            delta = tl.load(Delta + offs_m, mask=rows, other=0.0)
        else:
            q = tl.load(Q + qo)
            do = tl.load(DO + qo)
            lse = tl.load(L + offs_m)
            delta = tl.load(Delta + offs_m)
        # P^T, recomputed: one fused multiply-add and one exp2 per element;
        # L is the final normaliser, so no max and no rescale.
        pT = tl.math.exp2(tl.dot(k, tl.trans(q)) * qk_scale - lse[None, :])
        if MASKED:
            keep = rows[None, :]
            if CAUSAL:
                keep = keep & (offs_m[None, :] >= offs_n[:, None])
            pT = tl.where(keep, pT, 0.0)
        dv = tl.dot(pT.to(tl.float16), do, dv)               # dV += P^T dO
        dpT = tl.dot(v, tl.trans(do))                        # dP^T = V dO^T
        dsT = (pT * (dpT - delta[None, :])).to(tl.float16)   # dS^T
        dk = tl.dot(dsT, q, dk)                              # dK += dS^T Q
        if ATOMIC_DQ:
            # This block's share of dQ = scale * dS K, computed transposed
            # (K^T dS^T: D rows, a full tensor-core tile for any BLOCK_M)
            # and added into an FP32 buffer that every key block adds to.
            dqT = tl.dot(tl.trans(k), dsT) * sm_scale
            dq_ptrs = DQ + offs_m[None, :] * HEAD_DIM + offs_d[:, None]
            if MASKED:
                tl.atomic_add(dq_ptrs, dqT, mask=rows[None, :], sem="relaxed")
            else:
                tl.atomic_add(dq_ptrs, dqT, sem="relaxed")
    return dk, dv


@triton.jit(do_not_specialize=["seq_len"])
def dkdv_ptr_kernel(Q, K, V, DO, DK, DV, L, Delta, DQ, seq_len, sm_scale,
                         qk_scale, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                         BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr,
                         ATOMIC_DQ: tl.constexpr):
    # The causal diagonal below starts at start_n and steps by BLOCK_M.
    tl.static_assert(BLOCK_N % BLOCK_M == 0)
    start_n = tl.program_id(0) * BLOCK_N
    bh = tl.program_id(1).to(tl.int64)
    head = bh * seq_len * HEAD_DIM
    Q, K, V, DO, DQ = Q + head, K + head, V + head, DO + head, DQ + head
    DK, DV, L, Delta = DK + head, DV + head, L + bh * seq_len, Delta + bh * seq_len
    offs_n = start_n + tl.arange(0, BLOCK_N)
    kv = offs_n[:, None] * HEAD_DIM + tl.arange(0, HEAD_DIM)[None, :]
    # Key rows past seq_len load as zeros. They produce rows of dK and dV
    # that are never stored, and a row of dK or dV depends on its own key
    # only, so they leak into nothing (and add exactly 0 to dQ: K is 0).
    k = tl.load(K + kv, mask=offs_n[:, None] < seq_len, other=0.0)
    v = tl.load(V + kv, mask=offs_n[:, None] < seq_len, other=0.0)
    dk = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    full = (seq_len // BLOCK_M) * BLOCK_M  # query blocks with no tail
    if CAUSAL:
        # Queries before start_n see none of these keys: skipped. The
        # BLOCK_N // BLOCK_M query blocks on the diagonal are masked...
        hi = tl.minimum(start_n + BLOCK_N, seq_len)
        dk, dv = _ptr_loop(dk, dv, k, v, Q, DO, L, Delta, DQ, offs_n, start_n, hi,
                            seq_len, sm_scale, qk_scale, HEAD_DIM, BLOCK_M,
                            True, True, ATOMIC_DQ)
        lo = start_n + BLOCK_N  # ...and every later query sees every key.
    else:
        lo = 0
    dk, dv = _ptr_loop(dk, dv, k, v, Q, DO, L, Delta, DQ, offs_n, lo, full,
                        seq_len, sm_scale, qk_scale, HEAD_DIM, BLOCK_M,
                        False, CAUSAL, ATOMIC_DQ)
    dk, dv = _ptr_loop(dk, dv, k, v, Q, DO, L, Delta, DQ, offs_n,
                        tl.maximum(lo, full), seq_len,  # the tail: at most a block
                        seq_len, sm_scale, qk_scale, HEAD_DIM, BLOCK_M,
                        True, CAUSAL, ATOMIC_DQ)
    keys = offs_n[:, None] < seq_len
    tl.store(DV + kv, dv.to(tl.float16), mask=keys)
    # The softmax saw s = scale * q.k, so dK carries the scale once.
    tl.store(DK + kv, (dk * sm_scale).to(tl.float16), mask=keys)


# -- Variants --------------------------------------------------------------------------

def grid_1() -> list[str]:
    """Run 1: every family, all four cases, tiles from 16 to 128 rows."""
    ids = []
    c128 = [(bm, bn, w, s) for bm in (16, 32, 64) for bn in (64, 128) for w in (4, 8)
            for s in (2, 3, 4) if bn % bm == 0]
    c64 = [(bm, bn, w, s) for bm in (32, 64, 128) for bn in (64, 128) for w in (4, 8)
           for s in (2, 3) if bn % bm == 0]
    for mask in ("full", "causal"):
        for fam in ("ptr", "tma-ptr", "tma-tma"):
            ids += [f"{fam}|128|{mask}|{','.join(map(str, c))}" for c in c128]
        for fam in ("ptr", "tma-tma"):
            ids += [f"{fam}|64|{mask}|{','.join(map(str, c))}" for c in c64]
        ids += [f"two|128|{mask}|dkdv={','.join(map(str, c))}" for c in c128]
        ids += [f"two|128|{mask}|dq={bm},{bn},{w},{s}" for bm in (64, 128)
                for bn in (32, 64, 128) for w in (4, 8) for s in (2, 3, 4) if bm % bn == 0]
    return ids


def grid_2() -> list[str]:
    """Run 2: the full-mask cases again (run 1 lost its full-mask races to a
    CUDA-graph capture error, hence do_bench in the race since), and tma-two,
    around the one-warpgroup 64-key tiles run 1 found best."""
    ids = []
    c128 = [(bm, bn, w, s) for bm in (32, 64) for bn in (64, 128) for w in (4, 8)
            for s in (2, 3, 4, 5) if bn % bm == 0]
    c64 = [(bm, bn, w, s) for bm in (32, 64, 128) for bn in (64, 128) for w in (4, 8)
           for s in (2, 3, 4) if bn % bm == 0]

    def add(fam, D, mask, cfgs):
        ids.extend(f"{fam}|{D}|{mask}|{','.join(map(str, c))}" for c in cfgs)

    for fam in ("ptr", "tma-ptr", "tma-tma", "tma-two"):
        add(fam, 128, "full", c128)
    add("tma-two", 128, "causal", c128)
    for fam in ("ptr", "tma-tma"):
        add(fam, 64, "full", c64)
    for mask in ("full", "causal"):
        add("tma-two", 64, mask, [c for c in c64 if c[0] < 128])
    ids += [f"two|128|full|dkdv={','.join(map(str, c))}" for c in c128]
    ids += [f"two|128|full|dq={bm},{bn},{w},{s}" for bm in (64, 128) for bn in (32, 64)
            for w in (4, 8) for s in (2, 3, 4)]
    return ids


GRIDS = {"1": grid_1, "2": grid_2}


def parse(vid: str):
    fam, d, mask, cfg = vid.split("|")
    return fam, int(d), mask == "causal", cfg


class Ctx:
    """The lesson, the TMA kernel, and lazily built inputs per (D, causal)."""

    def __init__(self):
        import torch
        from triton.tools.tensor_descriptor import TensorDescriptor
        self.torch, self.TD = torch, TensorDescriptor
        self.m = load_lesson()
        self.inputs = {}

    def case(self, D, causal):
        key = (D, causal)
        if key not in self.inputs:
            torch, m = self.torch, self.m
            q, k, v, do = m.make_inputs(B, H, S, D, DEVICE, 1234 + D)
            scale = 1.0 / math.sqrt(D)
            o, lse = m.attention_forward(q, k, v, causal, scale, m.GPU[(D, False)])
            qs, ks, vs = (t.detach().clone().requires_grad_() for t in (q, k, v))
            out = torch.nn.functional.scaled_dot_product_attention(qs, ks, vs, is_causal=causal)
            ref = torch.autograd.grad(out, (qs, ks, vs), do, retain_graph=True)
            self.inputs[key] = dict(q=q, k=k, v=v, do=do, o=o, lse=lse, scale=scale, ref=ref,
                                    sdpa=(lambda: torch.autograd.grad(out, (qs, ks, vs), do,
                                                                      retain_graph=True)))
        return self.inputs[key]

    def backward_fn(self, vid):
        """A closure computing (dq, dk, dv) for this variant on its case's inputs.

        tma-two and tma-tma are the lesson's own two methods with this variant's
        config; ptr, two and tma-ptr are kernels or paths the lesson no longer
        runs on a GPU, launched by `other_backward`."""
        fam, D, causal, cfg = parse(vid)
        c = self.case(D, causal)
        args = (c["do"], c["q"], c["k"], c["v"], c["o"], c["lse"], causal, c["scale"])
        if fam == "two":
            which, vals = cfg.split("=")
            cfgs = {"dkdv": PTR_DKDV, "dq": DQ_CFG, which: tuple(map(int, vals.split(",")))}
            return lambda: self.other_backward(*args, "ptr", cfgs["dkdv"], cfgs["dq"])
        tile = tuple(map(int, cfg.split(",")))
        if fam in ("ptr", "tma-ptr"):
            return lambda: self.other_backward(*args, fam, tile, None)
        method = {"tma-two": "two-kernel", "tma-tma": "atomic"}[fam]
        cfgs = {"dkdv": tile, "atomic": tile, "dq": DQ_CFG}
        return lambda: self.m.attention_backward(*args, cfgs, method)

    def other_backward(self, do, q, k, v, o, lse, causal, sm_scale, kernel, dkdv_cfg, dq_cfg):
        """The pre-TMA kernel ("ptr") or the lesson's TMA kernel with the threads'
        atomic adds ("tma-ptr"); dQ by atomics when dq_cfg is None, else by the
        lesson's dQ kernel."""
        torch, m = self.torch, self.m
        Bq, Hq, Sq, D = q.shape
        dq, dk, dv = (torch.empty_like(q) for _ in range(3))
        delta = torch.empty_like(lse)
        m.attn_bwd_preprocess_kernel[(triton.cdiv(Sq, 128), Bq * Hq)](
            o, do, delta, Sq, HEAD_DIM=D, BLOCK_M=128)
        qk_scale = sm_scale * m.LOG2E
        atomic = dq_cfg is None
        dq32 = torch.zeros(q.shape, device=q.device, dtype=torch.float32) if atomic else lse
        grid = (triton.cdiv(Sq, dkdv_cfg[1]), Bq * Hq)
        if kernel == "ptr":
            m._launch(dkdv_ptr_kernel, grid, q, k, v, do, dk, dv, lse, delta, dq32, Sq,
                      sm_scale, qk_scale, cfg=dkdv_cfg, HEAD_DIM=D, CAUSAL=causal,
                      ATOMIC_DQ=atomic)
        else:  # the lesson's kernel; only its interpreter path adds with the threads
            bm, bn = dkdv_cfg[:2]

            def tiles(t, rows):
                return self.TD.from_tensor(t.view(Bq * Hq, Sq, D), [1, rows, D])

            m._launch(m.attn_bwd_dkdv_kernel, grid, tiles(q, bm), tiles(k, bn), tiles(v, bn),
                      tiles(do, bm), tiles(dk, bn), tiles(dv, bn), None, dq32, lse, delta,
                      Sq, sm_scale, qk_scale, cfg=dkdv_cfg, HEAD_DIM=D, CAUSAL=causal,
                      DQ_BY="threads")
        if atomic:
            dq.copy_(dq32)
        else:
            m._launch(m.attn_bwd_dq_kernel, (triton.cdiv(Sq, dq_cfg[0]), Bq * Hq),
                      q, k, v, do, dq, lse, delta, Sq, sm_scale, qk_scale,
                      cfg=dq_cfg, HEAD_DIM=D, CAUSAL=causal)
        return dq, dk, dv

    def check(self, vid) -> float:
        """Worst error / bound over dq, dk, dv against SDPA's (2 * lesson TOL)."""
        fam, D, causal, cfg = parse(vid)
        c = self.case(D, causal)
        got = self.backward_fn(vid)()
        if DEVICE == "cuda":
            self.torch.cuda.synchronize()
        worst = 0.0
        for g, r in zip(got, c["ref"], strict=True):
            err = float((g.float() - r.float()).abs().max())
            bound = 2 * self.m.TOL * float(r.abs().max())
            worst = max(worst, err / bound if math.isfinite(err) else math.inf)
        return worst


def compile_child(ids: list[str]) -> None:
    """Compile, run and check each id; one JSON line per id, flushed."""
    ctx = Ctx()
    for vid in ids:
        t0 = time.monotonic()
        try:
            worst = ctx.check(vid)
            rec = {"id": vid, "ok": worst <= 1.0, "worst": worst}
        except Exception as exc:  # noqa: BLE001
            rec = {"id": vid, "ok": False, "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
        rec["compile_s"] = round(time.monotonic() - t0, 2)
        print("RESULT " + json.dumps(rec), flush=True)


def run_compiles(ids, gpus, jobs, deadline) -> dict:
    chunks = [ids[i:i + 6] for i in range(0, len(ids), 6)]
    results: dict = {}

    def work(chunk_and_gpu):
        chunk, gpu = chunk_and_gpu
        todo = list(chunk)
        while todo and time.monotonic() < deadline:
            env = dict(os.environ, CUDA_VISIBLE_DEVICES=str(gpu))
            proc = subprocess.run([sys.executable, __file__, "--compile", *todo], env=env,
                                  capture_output=True, text=True, timeout=max(5, deadline - time.monotonic()))
            done = {}
            for line in proc.stdout.splitlines():
                if line.startswith("RESULT "):
                    rec = json.loads(line[7:])
                    done[rec["id"]] = rec
            results.update(done)
            rest = [i for i in todo if i not in done]
            if rest and proc.returncode != 0:
                results[rest[0]] = {"id": rest[0], "ok": False, "error":
                                    f"crashed (exit {proc.returncode}): {proc.stderr[-300:]}"}
                rest = rest[1:]
            todo = rest

    with ThreadPoolExecutor(jobs) as pool:
        list(pool.map(work, [(c, gpus[i % len(gpus)]) for i, c in enumerate(chunks)]))
    return results


def race_child(ids: list[str], rounds: int) -> None:
    """Per variant: rounds of (ours, SDPA) graph-timed pairs, order alternating;
    prints its ratios. Variants are timed one after another and released (each
    graph holds its own buffers), each against the SDPA timer of its case."""
    sys.path.insert(0, str(ROOT / "code"))
    from lessonkit import bench_ms
    ctx = Ctx()
    sdpa = {}
    for vid in ids:
        _, D, causal, _ = parse(vid)
        try:
            if (D, causal) not in sdpa:
                fn = ctx.case(D, causal)["sdpa"]
                sdpa[(D, causal)] = lambda fn=fn: bench_ms(fn, warmup_ms=5, rep_ms=25)
            fn = ctx.backward_fn(vid)
            ours = (lambda fn=fn: bench_ms(fn, warmup_ms=5, rep_ms=25))
            base = sdpa[(D, causal)]
            ours(), base()
            ratios = []
            for r in range(rounds):
                pair = (ours(), base()) if r % 2 == 0 else tuple(reversed((base(), ours())))
                ratios.append(pair[1] / pair[0])
            del ours
            rec = {"id": vid, "ratios": ratios, "median": sorted(ratios)[len(ratios) // 2]}
        except Exception as exc:  # noqa: BLE001
            import traceback
            traceback.print_exc()
            rec = {"id": vid, "error": str(exc)[:200]}
        print("RESULT " + json.dumps(rec), flush=True)


def confirm_child(ids: list[str]) -> None:
    """The lesson's measurement: autograd backward of ours and SDPA's, bench_interleaved."""
    sys.path.insert(0, str(ROOT / "code"))
    import lessonkit
    ctx = Ctx()
    torch = ctx.torch
    by_case = {}
    for vid in ids:
        fam, D, causal, _ = parse(vid)
        by_case.setdefault((D, causal), []).append(vid)
    for (D, causal), vids in by_case.items():
        c = ctx.case(D, causal)
        fns = {"sdpa": c["sdpa"]}
        for vid in vids:
            bwd = ctx.backward_fn(vid)
            fns[vid] = (lambda bwd=bwd: bwd())
        ms = lessonkit.bench_interleaved(fns, rounds=10)
        for vid in vids:
            rs = [a / b for a, b in zip(ms["sdpa"], ms[vid], strict=True)]
            med, lo, hi = lessonkit.median_interval(rs)
            print("RESULT " + json.dumps({"id": vid, "median": med, "low": lo, "high": hi,
                                          "ms": sorted(ms[vid])[len(ms[vid]) // 2],
                                          "sdpa_ms": sorted(ms["sdpa"])[5]}), flush=True)
        del fns
        torch.cuda.empty_cache()


def run_children(flag, ids, gpus, timeout, extra=()) -> dict:
    by_case = {}
    for vid in ids:
        _, D, causal, _ = parse(vid)
        by_case.setdefault((D, causal), []).append(vid)
    shares = [[] for _ in gpus]
    for i, vids in enumerate(by_case.values()):
        shares[i % len(gpus)] += vids
    procs = []
    for gpu, share in zip(gpus, shares, strict=True):
        if share:
            env = dict(os.environ, CUDA_VISIBLE_DEVICES=str(gpu))
            procs.append(subprocess.Popen([sys.executable, __file__, flag, *extra, *share],
                                          env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          text=True))
    results = {}
    for p in procs:
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
        for line in out.splitlines():
            if line.startswith("RESULT "):
                rec = json.loads(line[7:])
                results[rec["id"]] = rec
        if p.returncode or err.strip():
            print(f"{flag} child (exit {p.returncode}) stderr:", err[-3000:])
    return results


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--compile", nargs="*")
    ap.add_argument("--race", nargs="*")
    ap.add_argument("--confirm", nargs="*")
    ap.add_argument("--gpus", default="0")
    ap.add_argument("--jobs", type=int, default=24)
    ap.add_argument("--budget-s", type=float, default=480)
    ap.add_argument("--only", default="")
    ap.add_argument("--grid", choices=sorted(GRIDS), default="2")
    args = ap.parse_args()
    if args.compile is not None:
        compile_child(args.compile)
        return 0
    if args.race is not None:
        race_child(args.race[1:], int(args.race[0]))
        return 0
    if args.confirm is not None:
        confirm_child(args.confirm)
        return 0

    start = time.monotonic()
    deadline = start + args.budget_s
    gpus = [int(g) for g in args.gpus.split(",")]
    OUT.mkdir(parents=True, exist_ok=True)
    report = {"shape": [B, H, S]}

    def save():
        (OUT / "attn_bwd_variants.json").write_text(json.dumps(report, indent=1))

    import re
    ids = [i for i in GRIDS[args.grid]() if re.search(args.only, i)]
    print(f"{len(ids)} variants, gpus {gpus}", flush=True)
    compiled = run_compiles(ids, gpus, args.jobs, start + 0.45 * args.budget_s)
    report["compile"] = compiled
    save()
    ok = [i for i in ids if compiled.get(i, {}).get("ok")]
    print(f"compile+check: {len(ok)} ok of {len(ids)} in {time.monotonic() - start:.0f} s",
          flush=True)
    for i in ids:
        rec = compiled.get(i)
        if rec and not rec.get("ok"):
            print("  failed", i, rec.get("error", f"worst {rec.get('worst')}")[:160])

    race1 = run_children("--race", ok, gpus, max(30, 0.6 * (deadline - time.monotonic())),
                         extra=("3",))
    report["race1"] = race1
    save()
    finalists = []
    cases = {}
    for vid, rec in race1.items():
        if "median" in rec:
            fam, D, causal, _ = parse(vid)
            cases.setdefault((fam if fam != "two" else "two", D, causal), []).append(vid)
    for key, vids in cases.items():
        vids.sort(key=lambda v: -race1[v]["median"])
        finalists += vids[:3 if key[0] != "two" else 2]
    for D, cfg in ((128, "32,128,8,3"), (64, "64,128,8,3")):  # the lesson's, for reference
        for mask in ("full",):
            vid = f"ptr|{D}|{mask}|{cfg}"
            if vid in race1 and vid not in finalists:
                finalists.append(vid)
    print(f"race 1 done at {time.monotonic() - start:.0f} s; {len(finalists)} finalists",
          flush=True)
    confirm = run_children("--confirm", finalists, gpus, max(30, deadline - time.monotonic()))
    report["confirm"] = confirm
    save()

    print("\n== race 1 (3 rounds, do_bench medians of 25 ms), best 5 per family/case")
    for _key, vids in sorted(cases.items()):
        for vid in vids[:5]:
            r = race1[vid]
            print(f"  {vid:42s} {r['median']:.3f}  ({min(r['ratios']):.3f}-{max(r['ratios']):.3f})"
                  f"  compile {compiled[vid]['compile_s']} s")
    print("\n== confirm (bench_interleaved, 10 rounds, autograd-free backward)")
    for vid, r in sorted(confirm.items(), key=lambda kv: (parse(kv[0])[1:3], -kv[1].get("median", 0))):
        if "median" in r:
            print(f"  {vid:42s} {r['median']:.3f} ({r['low']:.3f}-{r['high']:.3f})  "
                  f"{r['ms']:.3f} ms vs sdpa {r['sdpa_ms']:.3f} ms")
    print(f"total {time.monotonic() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
