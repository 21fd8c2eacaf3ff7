"""Gluon attention, as the course records it: the CPU models' checks, the GPU's.

The kernel is in gluon_attention.py (a Hopper GPU runs it alone); what a CPU
can check of it is in attention_model.py. The course's `tl` attention
(fused-attention) reaches about 0.8x of SDPA's cuDNN kernel on the H200. Its
compiled code waits for every wgmma before the softmax that reads it, so the
exponentials and the tensor cores take turns inside each warpgroup.
FlashAttention-3 (and cuDNN) overlap them, and Gluon lets a kernel say how.

The interpreter cannot run Gluon. Its run checks the kernel's online softmax
(the pipelined order of rescale and accumulate) in float64 against the
definition, the program schedule, and the producer/consumer/ping-pong
protocol against a model of mbarriers and asynchronous wgmma under random
timings, and draws the page's pictures from those models; then it stops by
design. The GPU run checks the kernel against float64 and SDPA, reads its
compiled code and times it against SDPA and the tl kernel in one run, through
the course's kit (lessonkit.py), which keeps the record.

Run it:
    TRITON_INTERPRET=1 python lesson.py   # any machine: the CPU models
    python lesson.py                      # Hopper, Triton 3.6: checks, TFLOP/s
"""

import re
import sys
from pathlib import Path

import torch

# lessonkit.py and the gluon-basics lesson's models (ring_model.py, layout_model.py,
# lesson.toml's `uses`) sit beside this file in a download; in the repository,
# one folder up and in gluon-basics/.
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent), str(HERE.parent / "gluon-basics")]
import gluon_figures  # noqa: E402
import partition_state  # noqa: E402
import sass_facts  # noqa: E402
from attention_model import (  # noqa: E402
    WG_ROWS,
    causal_balance,
    operands_right,
    pipelined_rows,
    protocol_run,
    reference,
    tile,
    traced_protocol,
    walk,
)
from layout_model import blocked_owner, dot_a_owner, row_owners, wgmma_acc_owner  # noqa: E402

from lessonkit import Lesson, bench_interleaved, median_interval  # noqa: E402

DECLINE = (
    "Gluon kernels do not run under TRITON_INTERPRET (Gluon compiles straight to "
    "GPU code and has no interpreter); the float64 model of the pipelined online "
    "softmax, the program schedule and the mbarrier protocol ran above, the kernel "
    "runs on the GPU only"
)
B, H, S = 4, 32, 4096  # the benchmark shape, the fused-attention lesson's


# snippet: softmax-checks
def softmax_errors(causal: bool) -> tuple[float, float]:
    """The pipelined recurrence against the definition, on inputs scaled so that
    the running max changes often: the worst |difference| in float64 over
    several query blocks (the first, whose causal rows see one block; a middle
    one; the last), and with P rounded to FP16 as the kernel feeds it to
    wgmma, the error relative to max|ref|, which the GPU check's bound must
    allow for."""
    torch.manual_seed(0)
    n, d = 512, 64
    q, k, v = (torch.randn(n, d, dtype=torch.float64) * 3 for _ in range(3))
    want = reference(q[None], k[None], v[None], causal)[0]
    worst = 0.0
    for m0 in (0, 64, 256, 448):
        got = pipelined_rows(q, k, v, causal, m0, block_n=128)
        worst = max(worst, float((got - want[m0 : m0 + WG_ROWS]).abs().max()))
    got16 = pipelined_rows(q, k, v, causal, 256, block_n=128, p_dtype=torch.float16)
    return worst, float((got16 - want[256:320]).abs().max() / want.abs().max())


# end snippet


def check_online_softmax(lesson: Lesson) -> None:
    for causal in (False, True):
        worst, err = softmax_errors(causal)
        lesson.check(
            f"online-softmax-float64-{'causal' if causal else 'full'}",
            worst < 1e-12,
            f"pipelined recurrence vs softmax(QKᵀ)V: max |difference| = {worst:.1e}",
        )
        lesson.check(
            f"online-softmax-fp16-p-{'causal' if causal else 'full'}",
            err < 2e-3,
            f"P rounded to fp16: max error / max|ref| = {err:.1e} (GPU bound 4e-3)",
        )


def check_schedule(lesson: Lesson) -> None:
    for n_q, heads, group in ((32, 128, 8), (32, 128, 128), (3, 10, 4), (5, 7, 8)):
        for causal in (False, True):
            got = [tile(t, n_q, heads, group, causal) for t in range(n_q * heads)]
            every = {(qb, bh) for qb in range(n_q) for bh in range(heads)}
            # Causal: inside a group, tile order never goes to a longer block.
            work = [qb + 1 for qb, _ in got]
            per_group = group * n_q
            longest_first = all(
                work[i] >= work[i + 1]
                for i in range(len(work) - 1)
                if (i + 1) % per_group and (i + 1) < n_q * heads
            )
            lesson.check(
                f"schedule-q{n_q}-h{heads}-g{group}-{'causal' if causal else 'full'}",
                set(got) == every
                and len(got) == len(every)
                and (longest_first or not causal),
                f"{len(every)} (query block, head) pairs, each once"
                + ("; longest causal blocks first in each group" if causal else ""),
            )
    # The persistent walk: 132 programs (the H200's SMs) over the benchmark's
    # 4,096 tiles take every tile once, and the causal work evens out.
    n_q, heads, programs = S // 128, B * H, 132
    walks = [t for p in range(programs) for t in walk(p, programs, n_q * heads)]
    balance = causal_balance(n_q, heads, 8, programs)
    lesson.check(
        "schedule-persistent-walk",
        sorted(walks) == list(range(n_q * heads)) and balance <= 1.05,
        f"{programs} walks take each of {n_q * heads} tiles once; the longest "
        f"causal walk is {balance:.3f} x the mean (at most 1.05)",
    )


# snippet: protocol-checks
def protocol_holds(stages: int, pingpong: bool, seeds: int) -> tuple[int, bool]:
    """Over random schedules of the producer and both consumers walking three
    tiles of 7, 2 and 5 key blocks: how many fed every wgmma of both warpgroups
    the K or V block (and the Q) it was meant to, and whether the S products
    always came in turns, wg0, wg1, wg0, ..."""
    tiles = [7, 2, 5]
    runs = [protocol_run(stages, tiles, seed, pingpong) for seed in range(seeds)]
    right = sum(operands_right(pr) for pr in runs)
    return right, all(pr.issues == [0, 1] * sum(tiles) for pr in runs)


# end snippet


def check_protocol(lesson: Lesson, seeds: int) -> None:
    for stages in (2, 3):
        for pingpong in (True, False):
            right, turns = protocol_holds(stages, pingpong, seeds)
            lesson.check(
                f"protocol-s{stages}-{'pingpong' if pingpong else 'free'}",
                right == seeds and (turns or not pingpong),
                f"{right} of {seeds} random schedules over three tiles fed every "
                "product its own block and Q"
                + ("; the S products alternate wg0, wg1" if pingpong else ""),
            )


# -- The layouts: P stays in registers -------------------------------------------------


def draw_pingpong(lesson: Lesson, stages: int = 2, n_kv: int = 4) -> None:
    """The producer and both consumers with ping-pong, one schedule in rounds."""
    trace, _ = traced_protocol(stages, n_kv)

    def landed(c):
        return c.name[0].upper() if c.who == "land" else ""  # K or V

    def product(c):
        return c.name[2] if c.who == "read" else ""  # the warpgroup's index

    lesson.plot(
        "pingpong",
        f"Ping-pong in the lesson's protocol model ({n_kv} key blocks, {stages} "
        f"stages), one schedule in rounds ({trace.t}): the warpgroups take turns at "
        "issuing their two products, and each computes its softmax while the other "
        "issues; below, which K or V block landed and whose products the tensor cores "
        "completed, round by round (the model's order of events, not their durations)",
        lambda fig: gluon_figures.role_timeline(
            fig.subplots(), trace,
            [("producer", "producer warp"), ("wg0", "consumer\nwarpgroup 0"),
             ("wg1", "consumer\nwarpgroup 1")],
            [("TMA landed", landed), ("wgmma done\n(warpgroup)", product)],
        ),
        size=(gluon_figures.WIDTH, 4.6),
    )


def draw_ws_timeline(lesson: Lesson, stages: int = 2, n_kv: int = 4) -> None:
    """The same schedule by barrier: each phase's parity, and every wait a role
    was blocked in with the parity it asked for (the turn exercise's picture)."""
    trace, _ = traced_protocol(stages, n_kv, watched=("k", "turn"))
    rows = [(f"turn[{w}]", f"turn[{w}]") for w in (0, 1)]
    rows += [(f"slot {s} K {kind}", f"k_{kind}[{s}]") for s in range(stages)
             for kind in ("ready", "empty")]
    lesson.plot(
        "ws-timeline",
        f"The warp-specialized kernel in the lesson's protocol model ({n_kv} key "
        f"blocks, {stages} stages, ping-pong), one schedule in rounds ({trace.t}): the "
        "phases of each warpgroup's turn barrier and of the K ring's barriers (their "
        "parity as the colour), and every wait a role was blocked in, with the parity "
        "it waited on. Warpgroup w waits on turn[w]; the other warpgroup arrives on it "
        "once it has issued its products",
        lambda fig: gluon_figures.ring_timeline(
            fig.subplots(), trace, rows,
            {"producer": "#1f77b4", "wg0": "#d62728", "wg1": "#2ca02c"}),
        size=(gluon_figures.WIDTH, 4.6),
    )


def check_layouts(lesson: Lesson) -> None:
    """S's layout (the first product's accumulator) and P's (the second's A
    operand, in registers) in the lesson's layout model: the same thread and
    register for every element, so the conversion between them moves nothing."""
    shape = (WG_ROWS, CONFIGS["pingpong"]["block_n"])  # one warpgroup's S block

    def s_owner(r, c):
        return wgmma_acc_owner(r, c, shape, 4, shape[1])

    def p_owner(r, c):
        return dot_a_owner(r, c, shape, 4, k_width=2)

    def blocked(r, c):  # a common layout for loads and stores, for contrast
        return blocked_owner((r, c), [1, 8], [4, 8], [4, 1], [1, 0], shape)

    cells = [(r, c) for r in range(shape[0]) for c in range(shape[1])]
    moved = sum(s_owner(*e)[:2] != p_owner(*e)[:2] for e in cells)
    renamed = sum(s_owner(*e) != p_owner(*e) for e in cells)
    lesson.check(
        "p-stays-in-registers",
        moved == 0 and renamed == 0,
        f"S ({shape[0]}x{shape[1]} accumulator) and P (wgmma A operand, k_width 2): "
        f"{moved} of {len(cells)} elements change thread, {renamed} change register",
    )
    away = sum(s_owner(*e)[:2] != blocked(*e)[:2] for e in cells)
    print(f"  for contrast, a BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0]): {away} of "
          f"{len(cells)} elements would change thread")
    lesson.plot(
        "p-in-registers",
        f"One warp's corner of a {shape[0]} x {shape[1]} S block, from the lesson's "
        "layout model: each cell the thread (lane) holding the element, its register "
        "as the colour. P as wgmma's A operand (DotOperandLayout, k_width 2) is held "
        "by the same thread and register in every cell, so convert_layout is free; in "
        "a BlockedLayout the grey elements would change thread. Beside S, the row "
        "statistic's layout (SliceLayout(1, S)): the threads that hold each row's max "
        "and sum, the four that hold the row",
        lambda fig: gluon_figures.conversions(
            fig,
            [("S, the\naccumulator", s_owner), ("a Blocked-\nLayout", blocked)],
            strip=lambda r: row_owners(r, shape[0], 4),
            alike=("P, the A operand", p_owner),
        ),
        size=(gluon_figures.WIDTH, 5.5),
    )


# -- The GPU part ----------------------------------------------------------------------

CASES = [
    ("full", 128, False),
    ("causal", 128, True),
    ("full", 64, False),
    ("causal", 64, True),
]
CONFIGS = {  # name -> attention_ws keyword arguments; the race picks one per case
    "pingpong": dict(block_n=128, stages=2, pingpong=True),
    "free": dict(block_n=128, stages=2, pingpong=False),
}
PER_TILE = dict(block_n=128, stages=2, pingpong=True, programs="tiles")
LABELS = {
    "pingpong": "Gluon FA3-style, ping-pong",
    "free": "Gluon FA3-style, no ping-pong",
    "per-tile": "the same, one program per tile",
}
TOL = 4e-3  # of max|ref|: the fused-attention lesson's bound (fp16 P and O)


def check_kernel(lesson: Lesson, ak) -> None:
    for name, case, got, want in kernel_cases(ak):
        lesson.close(
            f"{name}-{case}",
            got,
            want,
            TOL,
            TOL * float(want.abs().max()),
            f"fp64 reference, atol = {TOL:g} * max|ref|",
        )


# snippet: gpu-checks
def kernel_cases(ak):
    """Small shapes against the float64 definition: both masks, both head dims,
    both schedules, persistent or not; S = 384 (three query blocks, not a
    power of two) and 1024; 10 heads, so the last group of 8 heads holds only
    2; outputs that start as NaN. Yields (schedule, case, the kernel's output,
    the reference)."""
    for S_, heads in ((384, 10), (1024, 3)):
        for kind, D, causal in CASES:
            torch.manual_seed(S_ + D + causal)
            shape = (1, heads, S_, D)
            q, k, v = (
                torch.randn(shape, device="cuda", dtype=torch.float16) for _ in range(3)
            )
            want = reference(q, k, v, causal)
            # Both schedules, one program per SM (at most 30 tiles here: one
            # each), one per tile, and 7 programs, each walking 4 to 5 tiles.
            walks = dict(CONFIGS["pingpong"], programs=7)
            for name, cfg in {**CONFIGS, "per-tile": PER_TILE, "walks": walks}.items():
                # The output starts as NaN: a tile no program writes fails.
                out = torch.full_like(q, float("nan"))
                got = ak.attention_ws(q, k, v, causal, out=out, **cfg)
                yield name, f"{kind}-d{D}-s{S_}-h{heads}", got, want


# end snippet


def show_compiled(lesson: Lesson, ak) -> None:
    q, k, v = (
        torch.randn(1, 8, 1024, 128, device="cuda", dtype=torch.float16)
        for _ in range(3)
    )
    rows = []
    for name, cfg in CONFIGS.items():
        for causal in (False, True):
            _, kern = ak.attention_ws(q, k, v, causal, with_kernel=True, **cfg)
            ptx = kern.asm["ptx"]
            regs = sorted(
                {
                    int(r)
                    for r in re.findall(
                        r"setmaxnreg\.\w+\.sync\.aligned\.u32\s+(\d+)", ptx
                    )
                }
            )
            sass = sass_facts.sass_of(kern)
            step = sass_facts.exps_under_product(sass)
            rows.append(
                [
                    LABELS[name],
                    "causal" if causal else "full",
                    getattr(kern, "n_regs", None),
                    sass_facts.registers_named(sass),
                    getattr(kern, "n_spills", None),
                    round(kern.metadata.shared / 1024, 1),
                    " ".join(map(str, regs)),
                    " ".join(
                        sorted(
                            set(
                                re.findall(
                                    r"wgmma\.wait_group\.sync\.aligned\s+(\d+)", ptx
                                )
                            )
                        )
                    ),
                    "-" if step is None else f"{step[0]} of {step[1]}",
                ]
            )
    lesson.table(
        "compiled",
        [
            "kernel",
            "mask",
            "registers / thread at launch",
            "registers named in the SASS",
            "spilled",
            "shared memory KiB",
            "setmaxnreg targets",
            "wgmma.wait_group depths (PTX)",
            "exponentials while P V runs (SASS)",
        ],
        rows,
        "What Triton 3.6 compiled (D = 128). The PTX waits with depth 1 (the "
        "softmax after S_j only); the last column counts, in one step of the SASS, "
        "the exponentials issued after the wait for S_j and before the wait for "
        "P_{j-1} V_{j-1}, of the step's exponentials. Registers: the launch's cap "
        "for 12 warps, and the registers the code names after setmaxnreg",
    )


def bench_shape(lesson: Lesson) -> tuple[int, int, int]:
    """(B, H, S): the benchmark's; under compute-sanitizer, which times nothing,
    a small one (every kernel still runs once, in minutes rather than hours)."""
    return lesson.size(gpu=(B, H, S), smoke=(1, 4, 512))


def bench_inputs(shape, D):
    torch.manual_seed(1234)
    return [
        torch.randn(*shape, D, device="cuda", dtype=torch.float16) for _ in range(3)
    ]


def flops(shape, D, causal):
    b, h, s = shape
    return 4.0 * b * h * s * s * D / (2 if causal else 1)


def race_and_benchmark(lesson: Lesson, ak, fa) -> dict:
    import torch.nn.attention  # sdpa_kernel: the bench-shape check's reference

    sdpa = torch.nn.functional.scaled_dot_product_attention
    results = {}
    b, h, s = bench_shape(lesson)
    for kind, D, causal in CASES:
        q, k, v = bench_inputs((b, h, s), D)
        # snippet: measure
        # SDPA (cuDNN on the H200), the course's tl kernel (fused-attention,
        # its fastest configuration) and both Gluon schedules take turns:
        # 3 rounds pick the faster schedule, 15 more measure it against the
        # two baselines. FLOPs count the two matmuls (causal: half).
        args = (q, k, v, causal)
        fns = {
            "SDPA": lambda a=args: sdpa(*a[:3], is_causal=a[3]),
            "tl": lambda a=args: fa.attention_tma(
                *a, block_m=128, block_n=64, num_warps=4, num_stages=2
            ),
        }
        for name, cfg in CONFIGS.items():
            fns[name] = lambda cfg=cfg, a=args: ak.attention_ws(*a, **cfg)
        race = bench_interleaved(fns, rounds=3)
        best = min(CONFIGS, key=race.median)
        per_tile = lambda a=args: ak.attention_ws(*a, **PER_TILE)  # noqa: E731
        ms = bench_interleaved(
            {"gluon": fns[best], "per-tile": per_tile, "SDPA": fns["SDPA"],
             "tl": fns["tl"]},
            rounds=15,
        )
        # end snippet
        # The output starts as NaN; the reference is SDPA's FlashAttention-2 or
        # memory-efficient kernel, which store with plain instructions (cuDNN's
        # stores are TMA's, which compute-sanitizer's initcheck does not see, so
        # reading them back there is reported as reading uninitialized memory).
        got = ak.attention_ws(*args, out=torch.full_like(q, float("nan")),
                              **CONFIGS[best])
        backends = torch.nn.attention.SDPBackend
        plain = [backends.FLASH_ATTENTION, backends.EFFICIENT_ATTENTION]
        with torch.nn.attention.sdpa_kernel(plain):
            want = sdpa(q, k, v, is_causal=causal)
        lesson.close(
            f"{kind}-d{D}-bench-shape-vs-sdpa",
            got,
            want,
            2 * TOL,
            2 * TOL * float(want.abs().max()),
            f"{LABELS[best]} vs SDPA (FlashAttention-2 or memory-efficient); both "
            "fp16, so the bound doubles the reference tolerance",
        )
        del got, want
        shape = f"B{b} H{h} S{s} D{D}"
        lesson.benchmark(
            f"{kind}-d{D}-vs-sdpa",
            f"Gluon FA3-style vs SDPA, {kind}, {shape} fp16",
            ms,
            "gluon",
            "SDPA",
            unit="TFLOP/s",
            work=flops((b, h, s), D, causal),
            baseline_name="torch SDPA (cuDNN)",
            threshold=GATES[(kind, D)],
            stretch=STRETCH.get((kind, D), 1.0),
            note=f"{LABELS[best]} (won the race of {len(CONFIGS)} schedules)",
        )
        lesson.benchmark(
            f"{kind}-d{D}-vs-tl",
            f"Gluon FA3-style vs the tl kernel, {kind}, {shape}",
            ms,
            "gluon",
            "tl",
            unit="TFLOP/s",
            work=flops((b, h, s), D, causal),
            baseline_name="fused-attention's tl TMA kernel (128x64, 4 warps, 2 stages)",
            threshold=1.2,
            gate=False,
            note="the issue's expectation, reported, not gating",
        )
        lesson.benchmark(
            f"{kind}-d{D}-persistent",
            f"one program per SM vs one per tile, {kind}, {shape}",
            ms,
            "gluon",
            "per-tile",
            unit="TFLOP/s",
            work=flops((b, h, s), D, causal),
            baseline_name="the same kernel launched with one program per tile",
            note=f"{LABELS[best]}, persistent, against ping-pong one program per tile",
        )
        results[(kind, D)] = {"race": race, "ms": ms, "best": best}
    return results


def predict_persistence(lesson: Lesson) -> None:
    """Before the benchmark: what one program per SM should buy (issue 38)."""
    lesson.predict(
        "persistent-causal-d64",
        1.04,
        "each tile pays about one key block's time of fill and drain (Q's load "
        "and a first Q Kᵀ with nothing to overlap, a last P V alone, the output "
        "store); a causal D = 64 tile has 16.5 key blocks on average, so that is "
        "about 6 %, and a persistent walk overlaps most of it with the next tile",
        0.03,
        of="causal-d64-persistent",
    )


# The gate is 0.9 of SDPA everywhere but causal D = 64, which did not reach it
# on the H200 before the persistent walk and the folded scale (0.84 one program
# per tile, in development runs): 0.8 there. The stretch goals are
# issue 38's: at least cuDNN's speed in every case, 1.05x at D = 128 full.
GATES = {
    ("full", 128): 0.9,
    ("causal", 128): 0.9,
    ("full", 64): 0.9,
    ("causal", 64): 0.8,
}
STRETCH = {("full", 128): 1.05}


def report(lesson: Lesson, results: dict) -> None:
    """The race and the benchmark, one row per case. The race only picks the
    schedule: it shows as the ratio of the two schedules' median times, and
    every TFLOP/s is the benchmark's, from its own rounds."""
    rows = []
    b, h, s = bench_shape(lesson)
    for (kind, D), r in results.items():
        ms, race = r["ms"], r["race"]
        flop = flops((b, h, s), D, kind == "causal")
        rows.append(
            [
                kind,
                D,
                race.median("free") / race.median("pingpong"),
                LABELS[r["best"]],
                round(flop / ms.median("gluon") * 1e-9, 1),
                round(flop / ms.median("SDPA") * 1e-9, 1),
                round(flop / ms.median("tl") * 1e-9, 1),
            ]
        )
    lesson.table(
        "race",
        [
            "mask",
            "D",
            "ping-pong vs no ping-pong (race)",
            "chosen",
            "chosen TFLOP/s",
            "SDPA TFLOP/s",
            "tl TFLOP/s",
        ],
        rows,
        f"B={b}, H={h}, S={s} fp16: the race (3 rounds) picks the faster schedule "
        "(its ratio: no ping-pong's median time over ping-pong's, above 1 when "
        "ping-pong is faster); the TFLOP/s are the benchmark's (15 rounds, medians), "
        "in which SDPA and the tl kernel took their turns with the chosen schedule",
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
                    [b / g for g, b in zip(ms["gluon"], ms[base], strict=True)]
                )
                mids.append(m)
                lows.append(m - lo)
                highs.append(hi - m)
            xs = [j + 0.15 * (2 * i - 1) for j in range(len(labels))]
            name = "SDPA (cuDNN)" if base == "SDPA" else "the tl kernel"
            ax.errorbar(xs, mids, yerr=[lows, highs], fmt="o", capsize=4,
                        label=f"Gluon / {name}")
        for j, case in enumerate(results):  # each case's gate against SDPA
            ax.plot([j - 0.3, j], [GATES[case]] * 2, color="#d62728",
                    linewidth=1.2, linestyle=":")
        ax.axhline(1.0, color="grey", linewidth=1, linestyle="--")
        ax.set_xticks(range(len(labels)), labels)
        ax.set_ylim(0, None)
        ax.set_ylabel("speed ratio, per-round median")
        ax.legend(loc="lower center", ncol=2)

    gates = ", ".join(f"{g:g} ({kind}, D={D})" for (kind, D), g in GATES.items())
    lesson.plot(
        "ratios",
        "The Gluon kernel's speed relative to SDPA and to the tl kernel: the median "
        "of the per-round ratios with its 95 % interval, from zero; dashed: parity; "
        f"dotted, each case's gate against SDPA: {gates}",
        draw,
        size=(4.8, 3.4),
    )


def fused_attention_lesson():
    """The fused-attention lesson's module (its TMA kernel is the tl baseline):
    in its own folder beside this one in the repository, beside this file in a
    download (lesson.toml's `uses`)."""
    sys.path.insert(0, str(HERE.parent / "fused-attention"))
    try:
        import fused_attention
    except ImportError as exc:
        sys.exit(
            f"gluon-attention compares with the fused-attention lesson's kernel; put "
            f"that lesson's folder beside this one ({exc})"
        )
    return fused_attention


def main() -> int:
    lesson = Lesson("gluon-attention")
    device = lesson.device()  # declines below compute capability 9.0 (lesson.toml)
    # racecheck's report on the warp-specialized kernel, explained (partition_state.py)
    partition_state.declare(lesson, HERE / "gluon_attention.py", "attn_fwd_ws_kernel")
    seeds = 30 if lesson.interpret else 8
    with lesson.step("layouts"):
        check_layouts(lesson)
    with lesson.step("online-softmax"):
        check_online_softmax(lesson)
    with lesson.step("schedule"):
        check_schedule(lesson)
    with lesson.step("protocol"):
        check_protocol(lesson, seeds)
        draw_pingpong(lesson)
        draw_ws_timeline(lesson)
    # Gluon has no interpreter, nor a smoke run on the CPU (lessonkit.py).
    if lesson.step("gpu-checks", needs_gpu="Gluon has no interpreter", smoke=False):
        import gluon_attention as ak  # Gluon: only here, on a Hopper GPU

        check_kernel(lesson, ak)
        show_compiled(lesson, ak)
    if lesson.step("benchmark", needs_gpu="Gluon has no interpreter", smoke=False):
        predict_persistence(lesson)
        report(lesson, race_and_benchmark(lesson, ak, fused_attention_lesson()))
    if device == "cpu":  # the models ran; the kernel cannot: not a verification
        lesson.decline(DECLINE)
    return lesson.finish()


if __name__ == "__main__":
    sys.exit(main())
