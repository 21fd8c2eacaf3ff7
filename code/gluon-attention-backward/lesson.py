"""Gluon attention backward, as the course records it: the models' checks, the GPU's.

The kernels are in gluon_attention_backward.py (a Hopper GPU runs them
alone); what a CPU can check of them is in backward_model.py. The
attention-backward lesson computes dQ, dK and dV in `tl`; on the H200 it
stays behind the backward of SDPA's cuDNN kernel. This lesson writes the same
algorithm with the gluon-attention lesson's schedule: a producer warp streams
tiles through TMA into a ring of mbarrier-guarded stages, and two consumer
warpgroups share every stage.

The interpreter cannot run Gluon. Its run checks the kernels' arithmetic, in
their order of blocks and roundings, in float64 against autograd, which
(query block, key block) tiles each kernel visits, and each kernel's ring
against the mbarrier model under random timings, and draws the page's
pictures from those models; then it stops by design. The GPU run checks the
kernels against float64 autograd, reads their compiled code and times them
against SDPA's backward (cuDNN) and the tl lesson's in one run, through the
course's kit (lessonkit.py), which keeps the record.

Run it:
    TRITON_INTERPRET=1 python lesson.py   # any machine: the models
    python lesson.py                      # Hopper, Triton 3.6
"""

import math
import sys
from pathlib import Path

import torch

# lessonkit.py, the attention-backward lesson's kernels module (lesson.toml's
# `uses`: its forward writes L, its preprocess computes Delta, its tl backward is
# the baseline) and gluon-basics' models, partition_state.py and sass_facts.py
# sit beside this file in a download; in the repository, one folder up and in
# their lessons' folders.
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent), str(HERE.parent / "attention-backward"),
                str(HERE.parent / "gluon-basics")]
import attention_backward as tlb  # noqa: E402
import gluon_figures  # noqa: E402
import partition_state  # noqa: E402
import sass_facts  # noqa: E402
from backward_model import (  # noqa: E402
    BLOCK_ROWS,
    backward_model,
    key_blocks,
    misread,
    query_blocks,
    reads_expected,
    ring_run,
    traced_ring,
    visited,
)

from lessonkit import Lesson, bench_interleaved, median_interval  # noqa: E402

DECLINE = (
    "Gluon kernels do not run under TRITON_INTERPRET (Gluon compiles straight to "
    "GPU code and has no interpreter); the float64 model of the kernels' "
    "arithmetic, the tiles they visit and their mbarrier rings ran above, the "
    "kernels run on the GPU only"
)
# The streamed block per head dimension, (dK/dV's query block, dQ's key block):
# the kernels' CONFIGS, which the GPU run checks these against.
STREAMED = {64: (128, 128), 128: (64, 64)}
B, H, S = 4, 32, 4096  # the benchmark shape: gluon-attention's forward
CASES = [("full", 128, False), ("causal", 128, True), ("full", 64, False),
         ("causal", 64, True)]
TOL = tlb.TOL  # of max|ref| per gradient: the tl lesson's bound and reasoning


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
    # On one CPU thread: torch's CPU builds (oneMKL 2024.2) pick a vector math
    # function's kernel on its first call, and threads racing to that call can
    # run one thread's share through a low-accuracy kernel once (pytorch/pytorch
    # #188792). Seen beside another process: half of the first logsumexp's
    # exps off by up to 3e-9, dq, dk, dv by 1e-10 where 1e-15 is due.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model_checks(lesson)
    finally:
        torch.set_num_threads(threads)


def model_checks(lesson: Lesson) -> None:
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
            "Pᵀ, dSᵀ rounded to fp16 as the kernels feed them: max error / "
            f"max|ref| = {', '.join(f'{e:.1e}' for e in fp16)} (GPU bound {TOL:g})",
        )


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


# -- The rings ----------------------------------------------------------------


# snippet: ring-checks
def rings_hold(kernel: str, stages: int, n_blocks: int, seeds: int) -> int:
    """Of `seeds` random schedules of one program of `kernel` ("dkdv" or "dq"):
    how many fed every product and every load of L or Delta the block it was
    meant to, and ran to the end."""
    held = 0
    for seed in range(seeds):
        ring = ring_run(kernel, stages, n_blocks, seed)
        held += misread(ring) is None and len(ring.reads) == reads_expected(
            kernel, n_blocks)
    return held


# end snippet


def check_rings(lesson: Lesson, seeds: int) -> None:
    for kernel in ("dkdv", "dq"):
        for stages in (2, 3):
            held = rings_hold(kernel, stages, 7, seeds)
            lesson.check(
                f"ring-{kernel}-s{stages}",
                held == seeds,
                f"{held} of {seeds} random schedules of a {kernel} program, 7 blocks "
                f"through {stages} stages: every read found its own block",
            )


def draw_schedule(lesson: Lesson, kernel: str, stages: int = 2, n_blocks: int = 4):
    """One program of a kernel in the ring model, in rounds: the producer warp and
    the two consumer warpgroups, and what the copies and products completed."""
    trace = traced_ring(kernel, stages, n_blocks)
    streamed = {"dkdv": "Q and dO", "dq": "K and V"}[kernel]
    what = {"dkdv": "the dK/dV kernel: per query block Sᵀ and dPᵀ, then dV and dK",
            "dq": "the dQ kernel: per key block S and dP, V released, then dQ"}[kernel]

    def landed(c):  # the block whose tile landed
        return c.who[5:] if c.who.startswith("land ") else ""

    def product(c):  # the block whose product a warpgroup's tensor cores completed
        return c.who[5:] if c.who.startswith("read ") else ""

    lesson.plot(
        f"{kernel}-schedule",
        f"One program of {what}, in the lesson's ring model ({n_blocks} blocks of "
        f"{streamed} through {stages} stages), one schedule in rounds ({trace.t}): "
        "what each role did and when it was blocked; below, the block whose tile "
        "landed and whose products the tensor cores completed, round by round (the "
        "model's order of events, not their durations)",
        lambda fig: gluon_figures.role_timeline(
            fig.subplots(), trace,
            [("producer", "producer warp"), ("wg0", "consumer\nwarpgroup 0"),
             ("wg1", "consumer\nwarpgroup 1")],
            [("TMA landed\n(block)", landed), ("wgmma done\n(block)", product)],
        ),
        size=(gluon_figures.WIDTH, 4.5),
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
        "Sᵀ) and before the wait for dP (dPᵀ), of the step's exponentials",
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


def main() -> int:
    lesson = Lesson("gluon-attention-backward")
    device = lesson.device()  # declines below compute capability 9.0 (lesson.toml)
    # racecheck's report on warp-specialized kernels, explained (partition_state.py)
    for kernel in ("dkdv_kernel", "dq_kernel"):
        partition_state.declare(lesson, HERE / "gluon_attention_backward.py", kernel)
    with lesson.step("visits"):
        check_visits(lesson)
        draw_visits(lesson)
    with lesson.step("model"):
        check_model(lesson)
    with lesson.step("rings"):
        check_rings(lesson, 30 if lesson.interpret else 8)
        draw_schedule(lesson, "dkdv")
        draw_schedule(lesson, "dq")
    # Gluon has no interpreter, nor a smoke run on the CPU (lessonkit.py).
    if lesson.step("gpu-checks", needs_gpu="Gluon has no interpreter", smoke=False):
        import gluon_attention_backward as kb  # Gluon: only here, on a Hopper GPU

        check_kernels(lesson, kb)
        show_compiled(lesson, kb)
    if lesson.step("benchmark", needs_gpu="Gluon has no interpreter", smoke=False):
        predict_dq_share(lesson)
        report(lesson, race_and_benchmark(lesson, kb))
    if device == "cpu":  # the models ran; the kernels cannot: not a verification
        lesson.decline(DECLINE)
    return lesson.finish()


if __name__ == "__main__":
    sys.exit(main())

