"""Gluon: a warp-specialized persistent FP16 matmul on Hopper.

The course's persistent TMA lesson reached cuBLAS with `tl`: the compiler
pipelined its loads and its wgmma for it, in one stream of instructions that
every warp executes. Gluon lets the kernel split the work by role, the way
cuBLAS and CUTLASS do on Hopper:

* a *producer*: one warp that only issues TMA loads of A and B tiles into a
  ring of shared-memory stages, and needs almost no registers;
* *consumers*: two warpgroups (8 warps) that only wait for a stage, issue
  wgmma on it, hand the stage back, and write each finished tile;
* an *mbarrier ring* between them: per stage, `ready` (the loads landed,
  counted in bytes) and `empty` (the consumers are done reading);
* a *persistent tile scheduler*: one program per SM walking the output
  tiles in grouped order, so the producer loads the next tile's operands
  while the consumers still write the last one.

The interpreter cannot run Gluon. The interpreter run checks the tile
scheduler's arithmetic and runs the producer/consumer ring against a model
of mbarriers and asynchronous wgmma under random timings; then it stops by
design. The GPU run checks the kernel against float64 and times it against
cuBLAS and against the `tl` persistent kernel, in the same run.

Run it:
    TRITON_INTERPRET=1 python gluon_matmul.py   # any machine: the CPU models
    python gluon_matmul.py                      # Hopper, Triton 3.6: checks, TFLOP/s
"""

import random
import re
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
from ring_model import AsyncGroups, MBarrier, Trace, run, run_in_rounds  # noqa: E402

from lessonkit import Lesson, bench_interleaved, median_interval, scaled_rtol  # noqa: E402

DECLINE = (
    "Gluon kernels do not run under TRITON_INTERPRET (Gluon compiles straight to "
    "GPU code and has no interpreter); the CPU models of the tile scheduler and of "
    "the producer/consumer ring ran above, the kernel runs on the GPU only"
)
SMEM_LIMIT = 227 * 1024  # bytes of shared memory one Hopper thread block may have


# -- The tile scheduler, in plain Python -----------------------------------------------


# snippet: scheduler-model
def tile_coords(
    tile_id: int, num_pid_m: int, num_pid_n: int, group_m: int
) -> tuple[int, int]:
    """The kernel's grouped order, the same integer arithmetic in Python."""
    num_pid_in_group = group_m * num_pid_n
    group_id = tile_id // num_pid_in_group
    first_pid_m = group_id * group_m
    group_size_m = min(num_pid_m - first_pid_m, group_m)
    return first_pid_m + tile_id % group_size_m, (
        tile_id % num_pid_in_group
    ) // group_size_m


def schedule(M, N, bm, bn, group_m, programs) -> list[list[tuple[int, int]]]:
    """The tiles each persistent program computes, in its order."""
    num_pid_m, num_pid_n = -(-M // bm), -(-N // bn)
    return [
        [
            tile_coords(t, num_pid_m, num_pid_n, group_m)
            for t in range(p, num_pid_m * num_pid_n, programs)
        ]
        for p in range(programs)
    ]


# end snippet


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


# -- The ring, as a model --------------------------------------------------------------


# The mbarrier, the wgmma groups and the random scheduler are the gluon-basics
# lesson's (ring_model.py); the roles are this kernel's.


# snippet: ring-model
def producer(work, slots, ready, empty, events):
    """_producer: wait for an empty slot, arm `ready`, start the TMA copy."""
    stages = len(slots)
    for it, item in enumerate(work):
        s, lap = it % stages, (it // stages) & 1
        yield empty[s].wait(lap ^ 1)
        ready[s].expect(1)

        def land(s=s, item=item):
            slots[s] = item
            ready[s].landed(1)

        events.append(land)


def consumer(work, slots, ready, empty, events, used, mma, release_early=False):
    """_mainloop: wgmma on slot s, wait until one is in flight, free slot s - 1."""
    stages = len(slots)
    for it in range(len(work)):
        s, lap = it % stages, (it // stages) & 1
        yield ready[s].wait(lap)
        group = mma.issue()

        def mma_reads(s=s, it=it, group=group):  # the tensor cores read the slot later
            used[it] = slots[s]
            mma.finish(group)

        events.append(mma_reads)
        if release_early:  # the exercise's bug: free the slot before wgmma read it
            empty[s].arrive()
            continue
        yield mma.wait(1)  # warpgroup_mma_wait(1)
        if it > 0:
            empty[(it - 1) % stages].arrive()
    yield mma.wait(0)  # warpgroup_mma_wait(0)
    if not release_early and work:
        empty[(len(work) - 1) % stages].arrive()


# end snippet


class Ring:
    """One program's ring in the model: slots, barriers, the products' groups."""

    def __init__(self, stages: int, work: list):
        self.work, self.slots, self.events = work, [None] * stages, []
        self.used = [None] * len(work)  # what each product read
        self.ready = [MBarrier(1) for _ in range(stages)]
        self.empty = [MBarrier(1) for _ in range(stages)]
        self.mma = AsyncGroups()

    def roles(self, release_early: bool = False) -> dict:
        args = (self.work, self.slots, self.ready, self.empty, self.events)
        return {
            "producer": producer(*args),
            "consumer": consumer(*args, self.used, self.mma, release_early),
        }


# snippet: ring-checks
def ring_feeds_every_product(stages, tiles, k_tiles, seed, release_early=False):
    """One program's (tile, k) products through the ring, in one random
    schedule: did every wgmma read the A and B tiles of its own (tile, k)?"""
    ring = Ring(stages, [(t, k) for t in tiles for k in range(k_tiles)])
    run(ring.roles(release_early), ring.events, random.Random(seed))
    return ring.used == ring.work


# end snippet


def check_ring(lesson: Lesson, seeds: int) -> None:
    # Three tiles of five K steps each, for one program: with 3 and 4 stages
    # the laps and tile boundaries fall at different steps.
    for stages in (2, 3, 4):
        ok = sum(
            ring_feeds_every_product(stages, [0, 132, 264], 5, seed)
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
    ring = Ring(stages, [(t, k) for t in range(tiles) for k in range(k_tiles)])
    trace = Trace(
        {f"ready[{s}]": ring.ready[s] for s in range(stages)}
        | {f"empty[{s}]": ring.empty[s] for s in range(stages)}
        | {"mma": ring.mma}
    )
    run_in_rounds(ring.roles(), ring.events, trace)
    assert ring.used == ring.work, "the pictured schedule feeds every product"
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


def smem_bytes(bm, bn, bk, stages, epi_split, elem=2) -> int:
    """Shared memory of matmul_ws_kernel: the ring, the epilogue tile, the barriers."""
    return (
        stages * (bm * bk + bk * bn) * elem
        + bm * (bn // epi_split) * elem
        + 2 * stages * 8
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


# -- try this (CPU half) ---------------------------------------------------------------


def exercise_release_early(lesson: Lesson, seeds: int) -> None:
    # snippet: solution-release-early
    # Exercise: hand a slot back as soon as its wgmma is issued, without
    # warpgroup_mma_wait(1). The producer may then overwrite the stage while
    # the tensor cores have not read it yet: some product reads the wrong K step.
    wrong = sum(
        not ring_feeds_every_product(3, [0, 132, 264], 5, seed, release_early=True)
        for seed in range(seeds)
    )
    # end snippet
    lesson.check(
        "exercise-release-early",
        wrong > 0,
        f"releasing before the wgmma wait: {wrong} of {seeds} schedules fed a "
        "product the wrong operands",
    )


def exercise_producer_regs() -> None:
    # snippet: solution-producer-regs
    # Exercise: 40 registers for the producer instead of 24. Its warpgroup
    # then takes 128 x 40 of the SM's registers, and the two consumer
    # warpgroups share the rest: per thread, a multiple of 8, at most 256.
    now = register_split(CONSUMER_WARPS, [(1, PRODUCER_REGS)])
    more = register_split(CONSUMER_WARPS, [(1, 40)])
    # end snippet
    print(
        f"  producer {PRODUCER_REGS} registers: consumers {now['default']}; producer "
        f"40: consumers {more['default']} (launch limit {more['launch']} either way)"
    )


# -- The GPU part ----------------------------------------------------------------------

BLOCK = (128, 256, 64)  # BM, BN, BK
CONSUMER_WARPS = 8  # the default partition: two warpgroups of 64 rows each
PRODUCER_REGS = 24  # registers per thread the producer warp asks for
CONFIGS = {  # name -> matmul_ws keyword arguments
    name: dict(block=BLOCK, stages=stages, epi_split=epi, num_warps=CONSUMER_WARPS,
               producer_regs=PRODUCER_REGS)
    for name, stages, epi in (("ws-3stage", 3, 1), ("ws-4stage", 4, 2))
}
GATE, STRETCH = 0.95, 1.05  # against cuBLAS, at 4096^3 and 8192^3
SHORT = {"ws-3stage": "Gluon, 3 stages", "ws-4stage": "Gluon, 4 stages",
         "tl": "tl persistent"}
LABELS = {
    "ws-3stage": "Gluon WS, 128x256x64, 3 stages, whole-tile epilogue",
    "ws-4stage": "Gluon WS, 128x256x64, 4 stages, epilogue in halves",
    "tl": "tl persistent TMA (persistent-tma-matmul lesson)",
    "cublas": "cuBLAS (torch.matmul)",
}


def reference(a, b):
    import torch

    want = a.to(torch.float64) @ b.to(torch.float64)
    rtol, why = scaled_rtol(1e-3, 2.0**-23, a.shape[1])
    return want, rtol, rtol * float(want.abs().max()), why


def check_kernel(lesson: Lesson, mk, num_sms: int) -> None:
    for name, shape, c, (want, rtol, atol, why) in kernel_cases(mk, num_sms):
        lesson.close(f"{name}-{shape}", c, want, rtol, atol, why)


# snippet: gpu-checks
def kernel_cases(mk, num_sms: int):
    """Ragged shapes (M, N, K not multiples of the tile; fewer tiles than SMs;
    a K tail the copy engine zero-fills) and the benchmark shape, for both
    configurations. The output starts as NaN: a tile no program writes
    fails. Yields (configuration, shape, C, the float64 reference)."""
    import torch

    for M, N, K in ((1000, 1032, 776), (777, 520, 4104), (4096, 4096, 4096)):
        torch.manual_seed(M + N + K)
        a = torch.randn(M, K, device="cuda", dtype=torch.float16)
        b = torch.randn(K, N, device="cuda", dtype=torch.float16)
        ref = reference(a, b)
        for name, cfg in CONFIGS.items():
            c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
            mk.matmul_ws(a, b, num_sms, out=c, **cfg)
            yield name, f"{M}x{N}x{K}", c, ref


# end snippet


def show_compiled(lesson: Lesson, mk, num_sms: int) -> None:
    import torch

    a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
    rows = []
    for name, cfg in CONFIGS.items():
        _, k = mk.matmul_ws(a, a, num_sms, with_kernel=True, **cfg)
        ptx = k.asm["ptx"]
        regs = sorted(
            {
                int(r)
                for r in re.findall(r"setmaxnreg\.\w+\.sync\.aligned\.u32\s+(\d+)", ptx)
            }
        )
        rows.append(
            [
                LABELS[name],
                getattr(k, "n_regs", None),
                getattr(k, "n_spills", None),
                round(k.metadata.shared / 1024, 1),
                " ".join(map(str, regs)),
                len(re.findall(r"wgmma\.mma_async", ptx)),
                " ".join(
                    sorted(
                        set(
                            re.findall(r"wgmma\.wait_group\.sync\.aligned\s+(\d+)", ptx)
                        )
                    )
                ),
                len(re.findall(r"cp\.async\.bulk\.tensor\.2d\.shared\S*\.global", ptx)),
            ]
        )
    lesson.table(
        "compiled",
        [
            "kernel",
            "registers / thread at launch",
            "spilled",
            "shared memory KiB",
            "setmaxnreg targets",
            "wgmma",
            "wgmma.wait_group depths",
            "TMA loads",
        ],
        rows,
        "What Triton 3.6 compiled at 4096^3 (counts are static, in the PTX); "
        "setmaxnreg moves registers between the producer and the consumers",
    )


# snippet: measure
def measure(n, mk, pt, num_sms, rounds):
    """Both Gluon configurations, the tl persistent kernel and cuBLAS, in turns."""
    import torch

    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    fns = {
        name: (lambda cfg=cfg: mk.matmul_ws(a, b, num_sms, **cfg))
        for name, cfg in CONFIGS.items()
    }
    fns["tl"] = lambda: pt.matmul_persistent_tma(a, b, num_sms)
    fns["cublas"] = lambda: torch.matmul(a, b)
    return bench_interleaved(fns, rounds=rounds, warm_s=0.5)


# end snippet


def benchmark(lesson: Lesson, mk, pt, num_sms: int) -> None:
    sizes = {2048: 3, 4096: 15, 8192: 10}
    rates, ratios = {}, {}
    for n, rounds in sizes.items():
        ms = measure(n, mk, pt, num_sms, rounds)
        flop = 2.0 * n**3
        rates[n] = {name: flop / ms.median(name) * 1e-9 for name in ms}
        ratios[n] = {
            name: median_interval(
                [c / k for k, c in zip(ms[name], ms["cublas"], strict=True)]
            )
            for name in ms
        }
        if n < 4096:
            continue
        for name in CONFIGS:
            lesson.benchmark(
                f"{name}-vs-cublas-{n}",
                f"{LABELS[name]} vs cuBLAS, {n}^3 fp16",
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
                f"{LABELS[name]} vs the tl persistent kernel, {n}^3 fp16",
                ms,
                name,
                "tl",
                unit="TFLOP/s",
                work=flop,
                baseline_name="tl persistent TMA kernel",
                gate=False,
                note="informational: the same tiles, scheduled by the compiler",
            )
    rows = [
        [
            f"{n}^3",
            *(round(r[k], 1) for k in ("ws-3stage", "ws-4stage", "tl", "cublas")),
            round(ratios[n]["ws-4stage"][0], 3),
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
        "per-round ratios with its 95 % interval, from zero; dashed: parity, dotted: "
        f"the {GATE:.2f} gate",
        draw,
        size=(4.8, 3.4),
    )


def exercise_fewer_programs(lesson: Lesson, mk, num_sms: int) -> None:
    import torch

    # snippet: solution-fewer-programs
    # Exercise: launch 33 programs instead of one per SM. The scheduler steps
    # by gl.num_programs(0), so every tile is still computed, by fewer
    # programs (predicted: 512 tiles / 33 = 15 or 16 each); only the speed changes.
    a = torch.randn(4096, 2048, device="cuda", dtype=torch.float16)
    b = torch.randn(2048, 4096, device="cuda", dtype=torch.float16)
    c = torch.full((4096, 4096), float("nan"), device="cuda", dtype=torch.float16)
    mk.matmul_ws(a, b, num_sms, out=c, programs=33, **CONFIGS["ws-4stage"])
    per_program = sorted({len(p) for p in schedule(4096, 4096, 128, 256, 8, 33)})
    # end snippet
    want, rtol, atol, why = reference(a, b)
    lesson.close(
        "exercise-fewer-programs",
        c,
        want,
        rtol,
        atol,
        f"33 programs, {per_program} tiles each; {why}",
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
    partition_state.declare(lesson, HERE / "matmul_kernels.py", "matmul_ws_kernel")
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
    # Gluon has no interpreter, nor a smoke run on the CPU (lessonkit.py).
    if lesson.step("gpu-checks", needs_gpu="Gluon has no interpreter", smoke=False):
        import matmul_kernels as mk  # Gluon: only here, on a Hopper GPU
        import torch

        num_sms = torch.cuda.get_device_properties(0).multi_processor_count
        check_kernel(lesson, mk, num_sms)
        show_compiled(lesson, mk, num_sms)
    if lesson.step("benchmark", needs_gpu="Gluon has no interpreter", smoke=False):
        benchmark(lesson, mk, tl_lesson(), num_sms)
    with lesson.step("exercises"):
        exercise_release_early(lesson, seeds)
        exercise_producer_regs()
    if lesson.step("gpu-exercise", needs_gpu="Gluon has no interpreter", smoke=False):
        exercise_fewer_programs(lesson, mk, num_sms)
    if device == "cpu":  # the models ran; the kernel cannot: not a verification
        lesson.decline(DECLINE)
    return lesson.finish()


if __name__ == "__main__":
    sys.exit(main())
