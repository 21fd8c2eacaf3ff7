"""Gluon matmul, as the course records it: the checks, pictures and benchmarks.

The kernel is in gluon_matmul.py (a Hopper GPU runs it alone), its tile
scheduler and its producer/consumer ring as CPU models in matmul_model.py.
This file checks what a CPU can (the accumulator's layout, the shared-memory
budget, the scheduler's arithmetic, the ring under many random schedules),
draws the page's pictures from those models, and on the GPU checks the
kernel against float64 and times it against cuBLAS and the `tl` persistent
kernel in the same rounds, through the course's kit (lessonkit.py), which
keeps the record. Gluon has no interpreter: under TRITON_INTERPRET=1 the run
stops by design after the CPU half.

Run it:
    TRITON_INTERPRET=1 python lesson.py   # any machine: the CPU models
    python lesson.py                      # Hopper, Triton 3.6: checks, TFLOP/s
"""

import sys
from pathlib import Path

# lessonkit.py and the gluon-basics lesson's mbarrier model (ring_model.py,
# lesson.toml's `uses`) sit beside this file in a download; in the repository,
# one folder up and in gluon-basics/.
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent), str(HERE.parent / "gluon-basics")]
import gluon_figures  # noqa: E402
import partition_state  # noqa: E402
from layout_model import REGISTERS_PER_SM, register_split, wgmma_acc_owner  # noqa: E402
from matmul_model import (  # noqa: E402
    SMEM_LIMIT,
    ring_feeds_every_product,
    schedule,
    smem_bytes,
    traced_ring,
)

from lessonkit import Lesson, bench_interleaved, median_interval, scaled_rtol  # noqa: E402

DECLINE = (
    "Gluon kernels do not run under TRITON_INTERPRET (Gluon compiles straight to "
    "GPU code and has no interpreter); the CPU models of the tile scheduler and of "
    "the producer/consumer ring ran above, the kernel runs on the GPU only"
)
# The kernel's configuration, as gluon_matmul.py launches it (plain constants
# there, read here without importing Gluon, which the CPU half never does).
BLOCK = (128, 256, 64)  # BM, BN, BK
CONSUMER_WARPS = 8  # the default partition: two warpgroups of 64 rows each
PRODUCER_REGS = 24  # registers per thread the producer warp asks for


def check_scheduler(lesson: Lesson) -> list[list]:
    rows = []
    for M, N, programs, group_m in (
        (4096, 4096, 132, 8),
        (8192, 8192, 132, 8),
        (1000, 1032, 132, 8),
        (777, 520, 7, 8),
        (4096, 2048, 66, 16),
    ):
        sched = schedule(M, N, 128, 256, group_m, programs)
        tiles = [t for prog in sched for t in prog]
        everyone = {(i, j) for i in range(-(-M // 128)) for j in range(-(-N // 256))}
        lesson.check(
            f"scheduler-{M}x{N}-p{programs}-g{group_m}",
            len(tiles) == len(everyone) and set(tiles) == everyone,
            f"{len(everyone)} tiles, each computed once by {programs} programs "
            f"({min(map(len, sched))}-{max(map(len, sched))} per program)",
        )
        # The first wave (each program's first tile): how many distinct tile
        # rows of A and tile columns of B it reads, grouped vs row-major.
        first = [prog[0] for prog in sched if prog]
        row_major = [(t // -(-N // 256), t % -(-N // 256)) for t in range(len(first))]
        rows.append(
            [
                f"{M}x{N}",
                programs,
                len(everyone),
                len({i for i, _ in first}) + len({j for _, j in first}),
                len({i for i, _ in row_major}) + len({j for _, j in row_major}),
            ]
        )
    return rows


def check_ring(lesson: Lesson, seeds: int) -> None:
    # Three tiles of five K steps each, for one program: with 3 and 4 stages
    # the laps and tile boundaries fall at different steps.
    for stages in (2, 3, 4):
        ok = sum(
            (ring := ring_feeds_every_product(stages, [0, 132, 264], 5, seed)).used
            == ring.work
            for seed in range(seeds)
        )
        lesson.check(
            f"ring-model-s{stages}",
            ok == seeds,
            f"{ok} of {seeds} random schedules: each of 15 products read its own "
            "operands",
        )


def check_accumulator(lesson: Lesson) -> None:
    """The consumers' accumulator (wgmma's NVMMADistributedLayout) in the
    lesson's layout model, checked for one owner per element, and drawn."""
    bm, bn, _ = BLOCK
    warps = CONSUMER_WARPS

    def owner(r, c):
        return wgmma_acc_owner(r, c, (bm, bn), warps, bn)

    slots = [owner(r, c) for r in range(bm) for c in range(bn)]
    threads = {(w, lane) for w, lane, _ in slots}
    per_thread = len(slots) // len(threads)
    lesson.check(
        "accumulator-layout",
        len(set(slots)) == bm * bn and len(threads) == 32 * warps
        and {reg for _, _, reg in slots} == set(range(per_thread)),
        f"{bm}x{bn} FP32 accumulator over {warps} warps: each element in one register "
        f"of one thread, {per_thread} registers per thread",
    )
    lesson.plot(
        "accumulator",
        f"The {bm} x {bn} accumulator in NVMMADistributedLayout(version=[3, 0], "
        f"warps_per_cta=[{warps}, 1], instr_shape=[16, {bn}, 16]), from the lesson's "
        "layout model: 16 rows per warp; in warp 0's corner, the thread holding each "
        "element (its lane, 0-31) and the register (colour). Columns 8-15 repeat the "
        "pattern in registers 4-7, and so on along the row",
        lambda fig: gluon_figures.accumulator(fig, owner, (bm, bn), warps),
        size=(gluon_figures.WIDTH, 6.4),
    )


def draw_roles(lesson: Lesson, stages: int = 3, tiles: int = 2, k_tiles: int = 4):
    """The producer and the consumers over one schedule of the model, in rounds,
    with the registers setmaxnreg gives each (the lesson's budget model)."""
    _, trace = traced_ring(stages, list(range(tiles)), k_tiles)
    warps, producer_regs = CONSUMER_WARPS, PRODUCER_REGS
    split = register_split(warps, [(1, producer_regs)])
    groups = warps // 4
    used = 128 * (groups * split["default"] + producer_regs)

    def draw(fig):
        top, bottom = fig.subplots(2, 1, gridspec_kw={"height_ratios": [3.2, 1]})
        gluon_figures.role_timeline(
            top,
            trace,
            [
                ("producer", f"producer: 1 warp\n{producer_regs} registers"),
                ("consumer", f"consumers: {warps} warps\n{split['default']} registers"),
            ],
            [
                ("TMA landed\n(slot)", lambda c: c.name[6] if c.who == "land" else ""),
                ("wgmma read\nits slot", lambda c: "✓" if c.who == "mma_reads" else ""),
            ],
        )
        gluon_figures.register_budget(
            bottom,
            [(f"consumers,\nwarpgroup {g}", split["default"]) for g in range(groups)]
            + [("producer", producer_regs)],
            REGISTERS_PER_SM,
        )

    lesson.plot(
        "roles",
        f"The producer and the consumers in the lesson's ring model ({stages} stages, "
        f"{tiles} tiles of {k_tiles} K steps), one schedule in rounds ({trace.t}): "
        "the producer fills the ring, then waits for each slot the consumers free. "
        "Below, the SM's registers as setmaxnreg divides them: "
        f"{groups + 1} warpgroups of 128 threads, {used:,} of "
        f"{REGISTERS_PER_SM:,} (the lesson's budget model; the GPU run's compiled "
        "table shows the targets)",
        draw,
        size=(gluon_figures.WIDTH, 7.4),
    )


def draw_ring(lesson: Lesson, stages: int = 3, tiles: int = 2, k_tiles: int = 4):
    """The ring's barriers over one schedule of the model: each slot's phases and
    the waits the producer and the consumer were blocked in."""
    _, trace = traced_ring(stages, list(range(tiles)), k_tiles)
    rows = [(f"slot {s} {kind}", f"{kind}[{s}]") for s in range(stages)
            for kind in ("ready", "empty")]
    lesson.plot(
        "ring-timeline",
        f"The ring in the lesson's model ({stages} stages, {tiles} tiles of {k_tiles} "
        f"K steps), the same schedule in rounds ({trace.t}): each barrier's phases "
        "(their parity as the colour) and every wait a role was blocked in, with the "
        "parity it asked for. The consumer hands slot s back on empty[s] once the "
        "product after it has been issued and waited down to one in flight",
        lambda fig: gluon_figures.ring_timeline(
            fig.subplots(), trace, rows, {"producer": "#1f77b4", "consumer": "#d62728"}
        ),
        size=(gluon_figures.WIDTH, 6.4),
    )


def check_smem_budget(lesson: Lesson) -> list:
    rows = []
    for stages, epi in ((3, 1), (4, 1), (4, 2)):
        need = smem_bytes(128, 256, 64, stages, epi)
        rows.append(
            [stages, "whole tile" if epi == 1 else "halves", need, need <= SMEM_LIMIT]
        )
    fits = [r[3] for r in rows]
    lesson.check(
        "smem-budget",
        fits == [True, False, True],
        "128x256x64 tiles: 3 stages + whole-tile epilogue fit, 4 stages only with the "
        f"epilogue in halves ({', '.join(str(r[2]) for r in rows)} bytes "
        f"vs {SMEM_LIMIT})",
    )
    return rows


# -- The GPU part ----------------------------------------------------------------------

GATE, STRETCH = 0.95, 1.05  # against cuBLAS, at 4096^3 and 8192^3
SHORT = {"ws-3stage": "Gluon, 3 stages", "ws-4stage": "Gluon, 4 stages",
         "tl": "tl persistent"}
LABELS = {
    "ws-3stage": "Gluon WS, 128x256x64, 3 stages, whole-tile epilogue",
    "ws-4stage": "Gluon WS, 128x256x64, 4 stages, epilogue in halves",
    "tl": "tl persistent TMA (persistent-tma-matmul lesson)",
    "cublas": "cuBLAS (torch.matmul)",
}


def reference(a, b, on_cpu=False):
    """The float64 product and the course's tolerance; on_cpu: multiplied on the
    CPU (under compute-sanitizer, so that no library kernel runs under the tool)."""
    import torch

    if on_cpu:
        want = (a.cpu().double() @ b.cpu().double()).to(a.device)
    else:
        want = a.to(torch.float64) @ b.to(torch.float64)
    rtol, why = scaled_rtol(1e-3, 2.0**-23, a.shape[1])
    return want, rtol, rtol * float(want.abs().max()), why


def check_kernel(lesson: Lesson, mk, num_sms: int) -> None:
    # The pictures of the CPU half are drawn for the configuration launched here.
    lesson.check(
        "pictured-configuration-launched",
        (BLOCK, CONSUMER_WARPS, PRODUCER_REGS)
        == (mk.BLOCK, mk.CONSUMER_WARPS, mk.PRODUCER_REGS),
        f"lesson.py draws {BLOCK} tiles, {CONSUMER_WARPS} consumer warps, "
        f"{PRODUCER_REGS} producer registers; gluon_matmul.py launches {mk.BLOCK}, "
        f"{mk.CONSUMER_WARPS}, {mk.PRODUCER_REGS}",
    )
    # Under compute-sanitizer: shapes small enough for every tool, still ragged.
    shapes = lesson.size(
        gpu=[(1000, 1032, 776), (777, 520, 4104), (4096, 4096, 4096)],
        smoke=[(300, 776, 200), (129, 520, 328)],
    )
    cases = kernel_cases(mk, num_sms, shapes, bool(lesson.sanitize))
    for name, shape, c, (want, rtol, atol, why) in cases:
        lesson.close(f"{name}-{shape}", c, want, rtol, atol, why)


# snippet: gpu-checks
def kernel_cases(mk, num_sms: int, shapes, ref_on_cpu=False):
    """Ragged shapes (M, N, K not multiples of the tile; fewer tiles than SMs;
    a K tail the copy engine zero-fills) and the benchmark shape, for both
    configurations. The output starts as NaN: a tile no program writes
    fails. Yields (configuration, shape, C, the float64 reference)."""
    import torch

    for M, N, K in shapes:
        torch.manual_seed(M + N + K)
        a = torch.randn(M, K, device="cuda", dtype=torch.float16)
        b = torch.randn(K, N, device="cuda", dtype=torch.float16)
        ref = reference(a, b, ref_on_cpu)
        for name, cfg in mk.CONFIGS.items():
            c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
            mk.matmul_ws(a, b, num_sms, out=c, **cfg)
            yield name, f"{M}x{N}x{K}", c, ref


# end snippet


def show_compiled(lesson: Lesson, mk, num_sms: int) -> None:
    import torch

    n = lesson.size(gpu=4096, smoke=256)  # the same kernels at any size
    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    compiled = {LABELS[name]: mk.matmul_ws(a, a, num_sms, with_kernel=True, **cfg)[1]
                for name, cfg in mk.CONFIGS.items()}
    lesson.compiled_table("compiled", compiled, {
        "setmaxnreg targets": r"setmaxnreg\.\w+\.sync\.aligned\.u32\s+(\d+)",
        "wgmma": r"wgmma\.mma_async",
        "wgmma.wait_group depths": r"wgmma\.wait_group\.sync\.aligned\s+(\d+)",
        "TMA loads": r"cp\.async\.bulk\.tensor\.2d\.shared\S*\.global",
    }, f"What Triton compiled at {n}³ (counts are static, in the PTX); setmaxnreg "
       "moves registers between the producer and the consumers")


# snippet: measure
def measure(n, mk, pt, num_sms, rounds):
    """Both Gluon configurations, the tl persistent kernel and cuBLAS, in turns."""
    import torch

    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    fns = {
        name: (lambda cfg=cfg: mk.matmul_ws(a, b, num_sms, **cfg))
        for name, cfg in mk.CONFIGS.items()
    }
    fns["tl"] = lambda: pt.matmul_persistent_tma(a, b, num_sms)
    fns["cublas"] = lambda: torch.matmul(a, b)
    return bench_interleaved(fns, rounds=rounds, warm_s=0.5)


# end snippet


def benchmark(lesson: Lesson, mk, pt, num_sms: int) -> None:
    sizes = {2048: 3, 4096: 15, 8192: 10}  # M = N = K: rounds
    # Under compute-sanitizer each size runs as a smaller one, untimed.
    run_as = lesson.size(gpu={n: n for n in sizes}, smoke={2048: 256, 4096: 384,
                                                            8192: 512})
    rates, ratios = {}, {}
    for n, rounds in sizes.items():
        ms = measure(run_as[n], mk, pt, num_sms, rounds)
        flop = 2.0 * run_as[n] ** 3
        rates[n] = {name: flop / ms.median(name) * 1e-9 for name in ms}
        ratios[n] = {
            name: median_interval(
                [c / k for k, c in zip(ms[name], ms["cublas"], strict=True)]
            )
            for name in ms
        }
        if n < 4096:
            continue
        for name in mk.CONFIGS:
            lesson.benchmark(
                f"{name}-vs-cublas-{n}",
                f"{LABELS[name]} vs cuBLAS, {n}³ fp16",
                ms,
                name,
                "cublas",
                unit="TFLOP/s",
                work=flop,
                baseline_name="torch.matmul (cuBLAS)",
                threshold=GATE,
                stretch=STRETCH,
                note=LABELS[name],
            )
            lesson.benchmark(
                f"{name}-vs-tl-{n}",
                f"{LABELS[name]} vs the tl persistent kernel, {n}³ fp16",
                ms,
                name,
                "tl",
                unit="TFLOP/s",
                work=flop,
                baseline_name="tl persistent TMA kernel",
                gate=False,
                note="informational: the same tiles, scheduled by the compiler",
            )
    # Unrounded: the table keeps four significant digits, so at 4096³ and
    # 8192³ its cells are the benchmarks' own medians.
    rows = [
        [
            f"{n}³",
            *(r[k] for k in ("ws-3stage", "ws-4stage", "tl", "cublas")),
            ratios[n]["ws-4stage"][0],
            sizes[n],
        ]
        for n, r in rates.items()
    ]
    lesson.table(
        "sweep",
        [
            "size",
            "Gluon WS 3 stages TFLOP/s",
            "Gluon WS 4 stages TFLOP/s",
            "tl persistent TFLOP/s",
            "cuBLAS TFLOP/s",
            "WS 4 stages / cuBLAS",
            "rounds",
        ],
        rows,
        "Square FP16 matmuls, medians of interleaved rounds (CUDA-graph replays); the "
        "ratio is the median of the per-round ratios",
    )
    plot(lesson, ratios)


def plot(lesson: Lesson, ratios) -> None:
    sizes = [n for n in ratios if n >= 4096]
    names = ["ws-3stage", "ws-4stage", "tl"]

    def draw(fig):
        ax = fig.subplots()
        for i, name in enumerate(names):
            xs = [j + 0.2 * (i - 1) for j in range(len(sizes))]
            mid = [ratios[n][name][0] for n in sizes]
            err = [
                [m - ratios[n][name][1] for n, m in zip(sizes, mid, strict=True)],
                [ratios[n][name][2] - m for n, m in zip(sizes, mid, strict=True)],
            ]
            ax.errorbar(xs, mid, yerr=err, fmt="o", capsize=4, label=SHORT[name])
        ax.axhline(1.0, color="grey", linewidth=1, linestyle="--")
        ax.axhline(GATE, color="#d62728", linewidth=1, linestyle=":")
        ax.set_xticks(range(len(sizes)), [f"{n}³" for n in sizes])
        ax.set_ylim(0, max(1.2, max(r[n][2] for r in ratios.values() for n in names)))
        ax.set_ylabel("TFLOP/s over cuBLAS's")
        ax.legend(loc="lower center", ncol=2)

    lesson.plot(
        "ratios",
        "Each kernel's speed relative to cuBLAS in the same rounds: the median of the "
        "per-round ratios and its confidence interval, from zero; dashed: parity, "
        f"dotted: the {GATE:.2f} gate",
        draw,
        size=(4.8, 3.4),
    )


def tl_lesson():
    """The persistent-tma-matmul lesson's module (its kernel is the tl baseline):
    in its own folder beside this one in the repository, beside this file in a
    download (lesson.toml's `uses`)."""
    sys.path.insert(0, str(HERE.parent / "persistent-tma-matmul"))
    try:
        import persistent_tma_matmul
    except ImportError as exc:
        sys.exit(
            "gluon-matmul compares with the persistent-tma-matmul lesson's kernel; put "
            f"that lesson's folder beside this one ({exc})"
        )
    return persistent_tma_matmul


def main() -> int:
    lesson = Lesson("gluon-matmul")
    device = lesson.device()  # declines below compute capability 9.0 (lesson.toml)
    # racecheck's report on the warp-specialized kernel, explained (partition_state.py)
    partition_state.declare(lesson, HERE / "gluon_matmul.py", "matmul_ws_kernel")
    seeds = 30 if lesson.interpret else 8
    with lesson.step("accumulator"):
        check_accumulator(lesson)
    with lesson.step("smem"):
        lesson.table(
            "smem",
            ["stages", "epilogue", "bytes", "fits in 227 KiB"],
            check_smem_budget(lesson),
            "Shared memory of the 128x256x64 kernel",
        )
    with lesson.step("scheduler"):
        locality = check_scheduler(lesson)
        lesson.table(
            "scheduler",
            [
                "output",
                "programs",
                "tiles",
                "A rows + B columns, first wave (grouped)",
                "the same, row-major order",
            ],
            locality,
            "The persistent scheduler in plain Python: the first wave's distinct "
            "operand tiles (fewer = more reuse in L2)",
        )
    with lesson.step("ring"):
        check_ring(lesson, seeds)
        draw_roles(lesson)
        draw_ring(lesson)
    # Gluon has no interpreter, nor a smoke run on the CPU (lessonkit.py).
    if lesson.step("gpu-checks", needs_gpu="Gluon has no interpreter", smoke=False):
        import gluon_matmul as mk  # Gluon: only here, on a Hopper GPU
        import torch

        # Under compute-sanitizer a pretend machine of 4 SMs: on the small shapes
        # there, the persistent loop still walks several tiles per program.
        num_sms = lesson.size(
            gpu=torch.cuda.get_device_properties(0).multi_processor_count, smoke=4)
        check_kernel(lesson, mk, num_sms)
        show_compiled(lesson, mk, num_sms)
    if lesson.step("benchmark", needs_gpu="Gluon has no interpreter", smoke=False):
        benchmark(lesson, mk, tl_lesson(), num_sms)
    if device == "cpu":  # the models ran; the kernel cannot: not a verification
        lesson.decline(DECLINE)
    return lesson.finish()


if __name__ == "__main__":
    sys.exit(main())
