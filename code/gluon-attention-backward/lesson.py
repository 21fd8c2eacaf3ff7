"""Gluon: a warp-specialized attention backward on Hopper.

The attention-backward lesson computes dQ, dK and dV in `tl`; on the H200
it stays behind the backward of SDPA's cuDNN kernel. This lesson
writes the same algorithm with the gluon-attention lesson's schedule: a
producer warp streams tiles through TMA into a ring of mbarrier-guarded
stages, and two consumer warpgroups share every stage.

* dK/dV: one program per 128 keys holds K, V and both accumulators on chip
  and walks the query blocks. Each consumer warpgroup owns 64 keys, so the
  tiles are transposed (keys along rows): S^T = K Q^T, P^T = exp2(S^T - L),
  dS^T = P^T * (dP^T - Delta), dV += P^T dO, dK += dS^T Q, with P^T and dS^T
  fed to the tensor cores from registers.
* dQ: one program per 128 queries, the forward's shape, recomputes S and dP
  and accumulates dQ += dS K. Every gradient is written once, in a fixed
  order: no atomics, the same bits on every run.

The interpreter cannot run Gluon. Its run checks the kernels' arithmetic, in
their order of blocks and roundings, in float64 against autograd, and which
(query block, key block) tiles each kernel visits; then it stops by design.
The GPU run checks the kernels against float64 autograd and times them
against SDPA's backward (cuDNN) and the tl lesson's in one run.

Run it:
    TRITON_INTERPRET=1 python gluon_attention_backward.py   # any machine: models
    python gluon_attention_backward.py                      # Hopper, Triton 3.6
"""

import math
import sys
from pathlib import Path

import torch

# lessonkit.py, the attention-backward lesson's module (lesson.toml's `uses`:
# its forward writes L, its preprocess computes Delta, its tl backward is the
# baseline) and gluon-basics' partition_state.py and sass_facts.py sit beside
# this file in a download; in the repository, one folder up and in their
# lessons' folders.
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent), str(HERE.parent / "attention-backward"),
                str(HERE.parent / "gluon-basics")]
import attention_backward as tlb  # noqa: E402
import partition_state  # noqa: E402
import sass_facts  # noqa: E402

from lessonkit import Lesson, bench_interleaved, median_interval  # noqa: E402

DECLINE = (
    "Gluon kernels do not run under TRITON_INTERPRET (Gluon compiles straight to "
    "GPU code and has no interpreter); the float64 model of the kernels' "
    "arithmetic and the tiles they visit ran above, the kernels run on the GPU only"
)
LOG2E = 1.4426950408889634
WG_ROWS, BLOCK_ROWS = 64, 128  # rows a consumer warpgroup owns, a program owns
# The streamed block per head dimension, (dK/dV's query block, dQ's key block):
# the kernels' CONFIGS, which the GPU run checks these against.
STREAMED = {64: (128, 128), 128: (64, 64)}
B, H, S = 4, 32, 4096  # the benchmark shape: gluon-attention's forward
CASES = [("full", 128, False), ("causal", 128, True), ("full", 64, False),
         ("causal", 64, True)]
TOL = tlb.TOL  # of max|ref| per gradient: the tl lesson's bound and reasoning


# -- The kernels' arithmetic, in float64 ------------------------------------


# snippet: visits
def query_blocks(n0: int, seq_len: int, block_m: int, causal: bool) -> range:
    """The dK/dV kernel's _query_blocks: the query blocks that key block n0
    meets (causal: those at or after its first key)."""
    return range(n0 if causal else 0, seq_len, block_m)


def key_blocks(m0: int, seq_len: int, block_n: int, causal: bool) -> range:
    """The dQ kernel's _key_blocks: the key blocks that query block m0 meets
    (causal: up to the one holding its last row)."""
    end = -(-(m0 + BLOCK_ROWS) // block_n) * block_n if causal else seq_len
    return range(0, end, block_n)


# end snippet


# snippet: backward-model
def backward_model(q, k, v, do, causal, block_m, block_n, rounded=torch.float64,
                   use_delta=True):
    """dQ, dK, dV of one head, block by block in the kernels' order.

    L and Delta are the forward's statistics per query row. The dK/dV
    program of keys [n0, n0 + 128) runs two warpgroups of 64 keys; each
    walks the query blocks, with P^T and dS^T rounded to `rounded` before
    their products, as the kernel feeds them to wgmma in fp16. The dQ
    program of queries [m0, m0 + 128) walks the key blocks; its dS is
    rounded too. A mask is applied only where a block reaches past the
    diagonal, as in the kernels.
    """
    n, d = q.shape
    sm_scale = 1.0 / math.sqrt(d)
    qk_scale = sm_scale * LOG2E
    idx = torch.arange(n)
    future = idx[None, :] > idx[:, None]  # future[i, j]: key j after query i
    s_all = (q @ k.T) * qk_scale
    if causal:
        s_all = s_all.masked_fill(future, -math.inf)
    lse = torch.logsumexp(s_all / LOG2E, dim=1) * LOG2E  # base 2, as the kernels
    delta = (do * (torch.exp2(s_all - lse[:, None]) @ v)).sum(1)
    if not use_delta:
        delta = torch.zeros_like(delta)

    def r(t):
        return t.to(rounded).to(torch.float64)

    dq, dk, dv = (torch.zeros_like(q) for _ in range(3))
    for n0 in range(0, n, BLOCK_ROWS):  # one dK/dV program per 128 keys
        for key0 in (n0, n0 + WG_ROWS):  # its two consumer warpgroups
            ks, vs = k[key0 : key0 + WG_ROWS], v[key0 : key0 + WG_ROWS]
            for m0 in query_blocks(n0, n, block_m, causal):
                rows = slice(m0, m0 + block_m)
                pT = torch.exp2(ks @ q[rows].T * qk_scale - lse[None, rows])
                if causal and m0 < key0 + WG_ROWS:
                    pT = pT.masked_fill(future[rows, key0 : key0 + WG_ROWS].T, 0.0)
                pT = r(pT)
                dsT = pT * (vs @ do[rows].T - delta[None, rows])
                dv[key0 : key0 + WG_ROWS] += pT @ do[rows]
                dk[key0 : key0 + WG_ROWS] += r(dsT) @ q[rows]
    for m0 in range(0, n, BLOCK_ROWS):  # one dQ program per 128 queries
        for q0 in (m0, m0 + WG_ROWS):
            rows = slice(q0, q0 + WG_ROWS)
            for n0 in key_blocks(m0, n, block_n, causal):
                keys = slice(n0, n0 + block_n)
                p = torch.exp2(q[rows] @ k[keys].T * qk_scale - lse[rows, None])
                if causal and n0 + block_n > q0 + 1:
                    p = p.masked_fill(future[rows, keys], 0.0)
                ds = p * (do[rows] @ v[keys].T - delta[rows, None])
                dq[rows] += r(ds) @ k[keys]
    return dq * sm_scale, dk * sm_scale, dv


# end snippet


# snippet: model-checks
def model_errors(D: int, causal: bool, rounded) -> list[float]:
    """The model against float64 autograd of the definition, on one head of
    384 rows (three 128-row programs) with both streamed block sizes: per
    gradient, max |difference| / max|ref|."""
    q, k, v, do = (t[0, 0].double() for t in tlb.make_inputs(1, 1, 384, D, "cpu", 7))
    _, *want = tlb.reference_grads(q, k, v, do, causal, 1.0 / math.sqrt(D))
    worst = [0.0, 0.0, 0.0]
    for block in (64, 128):
        got = backward_model(q, k, v, do, causal, block, block, rounded)
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            worst[i] = max(worst[i], float((g - w).abs().max() / w.abs().max()))
    return worst


# end snippet


def check_model(lesson: Lesson) -> None:
    for D, causal in ((D, c) for D in (64, 128) for c in (False, True)):
        mask = f"{'causal' if causal else 'full'}-d{D}"
        exact = model_errors(D, causal, torch.float64)
        lesson.check(
            f"model-float64-{mask}",
            max(exact) < 1e-12,
            "dq, dk, dv vs float64 autograd: max error / max|ref| = "
            + ", ".join(f"{e:.1e}" for e in exact),
        )
        fp16 = model_errors(D, causal, torch.float16)
        lesson.check(
            f"model-fp16-operands-{mask}",
            max(fp16) < 1e-3,
            "P^T, dS^T rounded to fp16 as the kernels feed them: max error / "
            f"max|ref| = {', '.join(f'{e:.1e}' for e in fp16)} (GPU bound {TOL:g})",
        )


# -- Which tiles each kernel visits -----------------------------------------


def visited(seq_len: int, block_m: int, block_n: int, causal: bool):
    """(query row, key) 64 x 64 cells each kernel computes, with counts."""
    cells = 64
    dkdv, dq = {}, {}
    for n0 in range(0, seq_len, BLOCK_ROWS):
        for m0 in query_blocks(n0, seq_len, block_m, causal):
            for i in range(m0, m0 + block_m, cells):
                for j in range(n0, n0 + BLOCK_ROWS, cells):
                    dkdv[i, j] = dkdv.get((i, j), 0) + 1
    for m0 in range(0, seq_len, BLOCK_ROWS):
        for n0 in key_blocks(m0, seq_len, block_n, causal):
            for i in range(m0, m0 + BLOCK_ROWS, cells):
                for j in range(n0, n0 + block_n, cells):
                    dq[i, j] = dq.get((i, j), 0) + 1
    return dkdv, dq


def check_visits(lesson: Lesson) -> None:
    """Every 64 x 64 cell holding an unmasked score is computed exactly once by
    each kernel, and a causal walk computes no cell that lies wholly in the
    future, apart from the half-blocks of the diagonal."""
    n = 1024
    for D, (block_m, block_n) in STREAMED.items():
        for causal in (False, True):
            dkdv, dq = visited(n, block_m, block_n, causal)
            needed = {(i, j) for i in range(0, n, 64) for j in range(0, n, 64)
                      if not causal or j <= i + 63}
            once = all(c.get(cell) == 1 for c in (dkdv, dq) for cell in needed)
            wasted = max(len(set(dkdv) - needed), len(set(dq) - needed))
            lesson.check(
                f"visits-d{D}-{'causal' if causal else 'full'}",
                once and wasted <= n // BLOCK_ROWS * 2,
                f"S = {n}: every needed 64 x 64 cell once in both kernels"
                + (f"; {wasted} cells wholly in the future computed (halves of "
                   "diagonal blocks)" if causal else ""),
            )


def draw_visits(lesson: Lesson) -> None:
    """The two walks of a causal S = 1024 head at D = 64, from the model."""
    n, block = 1024, 128
    blocks = n // block
    import numpy as np
    from matplotlib.patches import Rectangle

    def grid(walks):
        g = np.full((blocks, blocks), np.nan)
        for tiles in walks.values():
            for step, (qb, kb) in enumerate(tiles):
                g[qb, kb] = step
        return g

    dkdv = {kb: [(m0 // block, kb) for m0 in query_blocks(kb * block, n, block, True)]
            for kb in range(blocks)}
    dq = {qb: [(qb, n0 // block) for n0 in key_blocks(qb * block, n, block, True)]
          for qb in range(blocks)}

    def draw(fig):
        axes = fig.subplots(1, 2)
        titles = ("dK/dV: down each column", "dQ: along each row")
        for ax, walks, title in zip(axes, (dkdv, dq), titles, strict=True):
            g = grid(walks)
            ax.imshow(g, cmap="viridis", vmin=0, vmax=blocks - 1)
            for qb in range(blocks):
                for kb in range(blocks):
                    if not np.isnan(g[qb, kb]):
                        ax.text(kb, qb, int(g[qb, kb]), ha="center", va="center",
                                color="white" if g[qb, kb] < 4 else "black")
            for d in range(blocks):  # the diagonal: the only masked blocks
                ax.add_patch(Rectangle((d - 0.5, d - 0.5), 1, 1, fill=False,
                                       hatch="//", edgecolor="#d62728", linewidth=0))
            ax.set_title(title)
            ax.grid(False)
            ax.set_xlabel("key block")
            ax.set_ylabel("query block")
            ax.set_xticks(range(blocks))
            ax.set_yticks(range(blocks))

    lesson.plot(
        "visits",
        "Causal attention, S = 1024 in blocks of 128 (D = 64): the tiles each "
        "kernel computes, numbered in the order its program visits them (from "
        "the lesson's model of the kernels' loops). Left, one program per key "
        "block (a column); right, one per query block (a row). Hatched: the "
        "diagonal, the only tiles a mask touches; empty tiles lie wholly in the "
        "future",
        draw,
        size=(7.0, 4.2),
    )


# -- On the GPU ----------------------------------------------------------------


# snippet: gpu-checks
def kernel_cases(kb, lengths=(128, 384, 1024)):
    """12 cases against float64 autograd: S = 128, 384 (three blocks, not a
    power of two) and 1024, D = 64 and 128, causal and full, a few batch and
    head counts. The outputs start as NaN, so a tile no kernel writes fails.
    Yields (case, gradient name, the kernels' gradient, the reference)."""
    shapes = [(1, 2), (2, 3), (1, 4), (2, 2)]
    case = 0
    for S_ in lengths:
        for _, D, causal in CASES:
            B_, H_ = shapes[case % len(shapes)]
            case += 1
            q, k, v, do = tlb.make_inputs(B_, H_, S_, D, "cuda", case)
            sm_scale = 1.0 / math.sqrt(D)
            o, lse = kb.forward_lse(q, k, v, causal, sm_scale)
            out = tuple(torch.full_like(q, float("nan")) for _ in range(3))
            got = kb.attention_bwd_gluon(q, k, v, o, do, lse, causal, out=out)
            _, *want = tlb.reference_grads(q, k, v, do, causal, sm_scale)
            name = f"{'causal' if causal else 'full'}-d{D}-s{S_}-b{B_}h{H_}"
            for grad, g, w in zip(("dq", "dk", "dv"), got, want, strict=True):
                yield name, grad, g, w


# end snippet


def check_kernels(lesson: Lesson, kb) -> None:
    lesson.check(
        "model-blocks-are-the-kernels",
        all((kb.CONFIGS[D]["block_m"], kb.CONFIGS[D]["block_n"]) == STREAMED[D]
            for D in STREAMED),
        f"the model's streamed blocks {STREAMED} are the kernels' CONFIGS",
    )
    # Under compute-sanitizer (lesson.size's smoke), the two smaller lengths.
    sizes = lesson.size(gpu=(128, 384, 1024), smoke=(128, 384))
    for name, grad, got, want in kernel_cases(kb, sizes):
        bound = TOL * float(want.abs().max())
        lesson.close(f"{grad}-{name}", got, want, 0.0, bound,
                     f"float64 autograd, atol = {TOL:g} * max|ref|")


def show_compiled(lesson: Lesson, kb) -> None:
    rows = []
    for D in (128, 64):
        for causal in (True, False):
            q, k, v, do = tlb.make_inputs(1, 2, 512, D, "cuda", 3)
            o, lse = kb.forward_lse(q, k, v, causal)
            _, kernels = kb.attention_bwd_gluon(q, k, v, o, do, lse, causal,
                                                with_kernels=True)
            for part, kern in kernels.items():
                cfg = kb.CONFIGS[D]
                streamed = cfg["block_m"] if part == "dkdv" else cfg["block_n"]
                sass = sass_facts.sass_of(kern)
                step = sass_facts.exps_under_product(sass)
                rows.append([
                    part, D, "causal" if causal else "full", streamed,
                    getattr(kern, "n_regs", None),
                    getattr(kern, "n_spills", None),
                    round(kern.metadata.shared / 1024, 1),
                    kern.asm["ptx"].count("wgmma.mma_async"),
                    "-" if step is None else f"{step[0]} of {step[1]}",
                ])
    lesson.check(
        "compiled-no-spills",
        all(row[5] == 0 for row in rows),
        "no kernel spills registers: " + ", ".join(
            f"{row[0]} D{row[1]} {row[2]} {row[5]}" for row in rows),
    )
    lesson.table(
        "compiled",
        ["kernel", "D", "mask", "streamed block (rows)",
         "registers / thread at launch", "spilled", "shared memory KiB",
         "wgmma instructions", "exponentials while dP runs (SASS)"],
        rows,
        "What Triton 3.6 compiled. Registers are the launch's cap for 12 warps; "
        "setmaxnreg then gives each consumer thread 240. The last column counts, in "
        "one step of the SASS, the exponentials issued after the wait for S (or "
        "S^T) and before the wait for dP (dP^T), of the step's exponentials",
    )


def bench_shape(lesson: Lesson) -> tuple[int, int, int]:
    """(B, H, S): the benchmark's; under compute-sanitizer, which times
    nothing, a small one."""
    return lesson.size(gpu=(B, H, S), smoke=(1, 2, 512))


def backward_fns(kb, shape, D, causal, sdpa_backend="cuDNN"):
    """A backward closure per contender, on the same inputs: ours (and its two
    parts), SDPA's (cuDNN, forced; or "FlashAttention-2") and the tl lesson's
    (atomic dQ, its faster method at this shape). Our gradients go into
    buffers that start as NaN."""
    b, h, s = shape
    q, k, v, do = tlb.make_inputs(b, h, s, D, "cuda", 1234 + D)
    sm_scale = 1.0 / math.sqrt(D)
    o, lse = kb.forward_lse(q, k, v, causal, sm_scale)
    qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))
    # Autograd runs a backward op on its forward's stream, and a CUDA graph
    # cannot capture the legacy default stream: the forward runs on its own.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    backends = torch.nn.attention.SDPBackend
    backend = {"cuDNN": backends.CUDNN_ATTENTION,
               "FlashAttention-2": backends.FLASH_ATTENTION}[sdpa_backend]
    with torch.cuda.stream(side), torch.nn.attention.sdpa_kernel(backend):
        out = torch.nn.functional.scaled_dot_product_attention(
            qg, kg, vg, is_causal=causal)
    torch.cuda.current_stream().wait_stream(side)
    grads = tuple(torch.full_like(q, float("nan")) for _ in range(3))
    cfg = tlb.GPU[(D, causal)]
    delta = torch.empty_like(lse)  # for the parts timed alone: the real Delta
    tlb.attn_bwd_preprocess_kernel[(s // 128, b * h)](o, do, delta, s, HEAD_DIM=D,
                                                      BLOCK_M=128)

    def ours(**parts):
        return kb.attention_bwd_gluon(q, k, v, o, do, lse, causal, sm_scale,
                                      out=grads, **parts)

    return {
        "gluon": ours,  # the whole backward: Delta, dK/dV, dQ
        "SDPA": lambda: torch.autograd.grad(out, (qg, kg, vg), do, retain_graph=True),
        "tl": lambda: tlb.attention_backward(do, q, k, v, o, lse, causal, sm_scale,
                                             cfg, "atomic"),
        "dkdv": lambda: ours(delta=delta, kernels=("dkdv",)),
        "dq": lambda: ours(delta=delta, kernels=("dq",)),
    }


def flops(shape, D, causal):
    return tlb.backward_flops(*shape, D, causal)


def predict_dq_share(lesson: Lesson) -> None:
    """Before the benchmark: what the dQ kernel's recomputation costs."""
    lesson.predict(
        "dq-share-full-d128",
        3 / 7,
        "the dQ kernel runs 3 of the 7 products of the two kernels (S and dP "
        "again, then dS K); if every product costs the same, it takes 3/7 of "
        "the two kernels' time",
        0.15,
        quantity="value",
    )


def race_and_benchmark(lesson: Lesson, kb) -> dict:
    results = {}
    shape = bench_shape(lesson)
    # Under compute-sanitizer, which times nothing, SDPA runs its FlashAttention-2
    # kernels: cuDNN's backward reads its own forward's output, which TMA wrote,
    # and initcheck (2025.3) does not see TMA's writes, so it reports every read.
    backend = "FlashAttention-2" if lesson.sanitize else "cuDNN"
    for kind, D, causal in CASES:
        fns = backward_fns(kb, shape, D, causal, backend)
        # snippet: measure
        # Ours, its two parts, SDPA's backward (cuDNN) and the tl lesson's
        # take turns, 15 rounds, each a CUDA-graph replay; only the backward
        # is timed (the forwards ran once, above). FLOPs: 2.5 forwards.
        ms = bench_interleaved(fns, rounds=15)
        # end snippet
        got, want = fns["gluon"](), fns["SDPA"]()
        for grad, g, w in zip(("dq", "dk", "dv"), got, want, strict=True):
            lesson.close(
                f"{grad}-{kind}-d{D}-bench-shape-vs-sdpa", g, w, 0.0,
                2 * TOL * float(w.abs().max()),
                "both fp16, so the bound doubles the reference tolerance",
            )
        del got, want
        b, h, s = shape
        label = f"{kind}, B{b} H{h} S{s} D{D} fp16"
        lesson.benchmark(
            f"{kind}-d{D}-vs-sdpa", f"Gluon backward vs SDPA's, {label}", ms,
            "gluon", "SDPA", unit="TFLOP/s", work=flops(shape, D, causal),
            baseline_name=f"torch SDPA backward ({backend})", threshold=0.8,
            stretch=0.95, note="dQ, dK, dV and the Delta preprocess",
        )
        lesson.benchmark(
            f"{kind}-d{D}-vs-tl", f"Gluon backward vs the tl lesson's, {label}", ms,
            "gluon", "tl", unit="TFLOP/s", work=flops(shape, D, causal),
            baseline_name="attention-backward's tl kernels (atomic dQ)",
            threshold=1.0, gate=False, note="reported, not gating",
        )
        results[(kind, D)] = {"ms": ms, "shape": shape}
        del fns
        torch.cuda.empty_cache()
    return results


def report(lesson: Lesson, results: dict) -> None:
    rows = []
    for (kind, D), r in results.items():
        ms = r["ms"]
        parts = ms.median("dkdv") + ms.median("dq")
        share = ms.median("dq") / parts
        if (kind, D) == ("full", 128):
            lesson.measured("dq-share-full-d128", share)
        rows.append([
            kind, D,
            *(round(ms.median(n), 3) for n in ("gluon", "dkdv", "dq")),
            round(share, 3),
            round(ms.median("SDPA"), 3),
            round(ms.median("tl"), 3),
        ])
    b, h, s = next(iter(results.values()))["shape"]
    lesson.table(
        "split",
        ["mask", "D", "Gluon ms", "dK/dV kernel ms", "dQ kernel ms", "dQ share",
         "SDPA (cuDNN) ms", "tl ms"],
        rows,
        f"B={b}, H={h}, S={s} fp16, medians of 15 rounds; each kernel was also "
        "timed alone in the same rounds (the whole adds the Delta preprocess); "
        "the dQ share is of the two kernels' times",
    )
    plot_ratios(lesson, results)


def plot_ratios(lesson: Lesson, results: dict) -> None:
    def draw(fig):
        ax = fig.subplots()
        labels = [f"{kind}\nD={D}" for kind, D in results]
        for i, base in enumerate(("SDPA", "tl")):
            mids, lows, highs = [], [], []
            for r in results.values():
                ms = r["ms"]
                m, lo, hi = median_interval(
                    [b / g for g, b in zip(ms["gluon"], ms[base], strict=True)])
                mids.append(m)
                lows.append(m - lo)
                highs.append(hi - m)
            xs = [j + 0.15 * (2 * i - 1) for j in range(len(labels))]
            name = "SDPA (cuDNN)" if base == "SDPA" else "the tl backward"
            ax.errorbar(xs, mids, yerr=[lows, highs], fmt="o", capsize=4,
                        label=f"Gluon / {name}")
        ax.axhline(1.0, color="grey", linewidth=1, linestyle="--")
        ax.axhline(0.8, color="#d62728", linewidth=1.2, linestyle=":")
        ax.set_xticks(range(len(labels)), labels)
        ax.set_ylim(0, None)
        ax.set_ylabel("speed ratio, per-round median")
        ax.legend(loc="lower center", ncol=2)

    lesson.plot(
        "ratios",
        "The Gluon backward's speed relative to SDPA's (cuDNN) and to the tl "
        "lesson's: the median of the per-round ratios with its 95 % interval, "
        "from zero; dashed: parity; dotted: the gate against SDPA, 0.8",
        draw,
        size=(4.8, 3.4),
    )


# -- Try this ------------------------------------------------------------------


def exercise_no_delta(lesson: Lesson) -> None:
    # snippet: solution-no-delta
    # Without Delta, dS = P * dP: the Jacobian of the softmax loses its row
    # term. dV = P^T dO never reads dS, so only dQ and dK go wrong.
    q, k, v, do = (t[0, 0].double() for t in tlb.make_inputs(1, 1, 256, 64, "cpu", 9))
    _, *want = tlb.reference_grads(q, k, v, do, False, 1 / 8)
    got = backward_model(q, k, v, do, False, 128, 128, use_delta=False)
    errs = [float((g - w).abs().max() / w.abs().max())
            for g, w in zip(got, want, strict=True)]
    # end snippet
    lesson.check(
        "exercise-no-delta",
        errs[2] < 1e-12 and min(errs[:2]) > 0.1,  # the page: "more than a tenth"
        "without Delta: max error / max|ref| of dq, dk, dv = "
        + ", ".join(f"{e:.1e}" for e in errs),
    )


def main() -> int:
    lesson = Lesson("gluon-attention-backward")
    device = lesson.device()  # declines below compute capability 9.0 (lesson.toml)
    # racecheck's report on warp-specialized kernels, explained (partition_state.py)
    for kernel in ("dkdv_kernel", "dq_kernel"):
        partition_state.declare(lesson, HERE / "attention_bwd_kernels.py", kernel)
    with lesson.step("visits"):
        check_visits(lesson)
        draw_visits(lesson)
    with lesson.step("model"):
        check_model(lesson)
    # Gluon has no interpreter, nor a smoke run on the CPU (lessonkit.py).
    if lesson.step("gpu-checks", needs_gpu="Gluon has no interpreter", smoke=False):
        import attention_bwd_kernels as kb  # Gluon: only here, on a Hopper GPU

        check_kernels(lesson, kb)
        show_compiled(lesson, kb)
    if lesson.step("benchmark", needs_gpu="Gluon has no interpreter", smoke=False):
        predict_dq_share(lesson)
        report(lesson, race_and_benchmark(lesson, kb))
    with lesson.step("exercises"):
        exercise_no_delta(lesson)
    if device == "cpu":  # the models ran; the kernels cannot: not a verification
        lesson.decline(DECLINE)
    return lesson.finish()


if __name__ == "__main__":
    sys.exit(main())
