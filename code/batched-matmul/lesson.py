"""Batched matmul, as the course records it: the checks, the races, the benchmarks.

Both steps' kernels and launchers (the tiled kernel with the batch on a grid
axis, the persistent kernel with rank-3 TMA descriptors) are in
batched_matmul.py, which runs alone. This file checks them the way every
lesson is checked (outputs filled with NaN, shapes ragged against every tile,
strided views, a float64 reference), races each step's configurations, counts
what the compiler made of each, and times both against torch.bmm and a loop of
launches, through the course's kit (lessonkit.py), which keeps the record.

Run it:
    TRITON_INTERPRET=1 python lesson.py   # any machine: checks on the CPU
    python lesson.py                      # a Hopper GPU: checks and TFLOP/s
"""

import math
import statistics
import sys
from pathlib import Path

import torch
import triton

# lessonkit.py sits beside this file in a download, one folder up in the repository.
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]
from batched_matmul import (  # noqa: E402
    GPU_CONFIGS,
    PERSISTENT_GPU_CONFIGS,
    bmm,
    bmm_kernel,
    bmm_persistent,
    bmm_persistent_tma_kernel,
    descriptors,
    tma_compatible,
)

from lessonkit import (  # noqa: E402
    Lesson,
    bench_interleaved,
    median_interval,
    scaled_rtol,
    tflops,
)

FP16_RTOL = 1e-3  # fp16 output rounding is 2**-11 relative, under this table value
F32_EPS = 2.0**-23  # the accumulator is fp32
LAYOUTS = ("contiguous", "transposed-b", "broadcast-a")


# snippet: checks
def operands(batch, M, N, K, device, layout):
    """Random fp16 A (batch, M, K) and B (batch, K, N), laid out as `layout` says."""
    torch.manual_seed(batch + M + N + K)
    a = torch.randn((batch, M, K), device=device, dtype=torch.float16)
    b = torch.randn((batch, K, N), device=device, dtype=torch.float16)
    if layout == "transposed-b":
        # B stored as (batch, N, K) and viewed transposed: strides (N*K, 1, K).
        b = torch.randn((batch, N, K), device=device, dtype=torch.float16)
        b = b.transpose(1, 2)
    elif layout == "broadcast-a":
        # One A shared by the whole batch: expand() gives batch stride 0.
        a = torch.randn((1, M, K), device=device, dtype=torch.float16)
        a = a.expand(batch, M, K)
    return a, b


def result_and_bound(run, a, b, on_cpu=False, **kwargs):
    """run(a, b) into an output poisoned with NaN, float64 torch.bmm of the same
    fp16 inputs (on the CPU if asked), and the bound: (got, want, rtol, atol,
    why)."""
    x, y = (a.cpu(), b.cpu()) if on_cpu else (a, b)
    want = torch.bmm(x.to(torch.float64), y.to(torch.float64))
    K = a.shape[2]
    rtol, why = scaled_rtol(FP16_RTOL, F32_EPS, K)
    atol = rtol * float(want.abs().max())
    # Poison: an output tile of any batch entry that no program writes stays
    # NaN, and close() fails on non-finite elements.
    out = torch.full(tuple(want.shape), float("nan"), device=a.device,
                     dtype=torch.float16)
    if run is bmm_persistent:  # say which path the launcher took
        tma = tma_compatible(a, b, out)
        why += "; " + ("TMA path" if tma else "not TMA-compatible: step 1 kernel")
    run(a, b, out=out, **kwargs)
    return out, want, rtol, atol, why


# end snippet


def check(lesson, name, run, a, b, **kwargs):
    # Under compute-sanitizer the reference is the CPU's, so that the tool
    # instruments no library kernel.
    return lesson.close(name, *result_and_bound(run, a, b, on_cpu=bool(lesson.sanitize),
                                                **kwargs))


def checks(lesson, device, shapes, run=bmm, prefix="", layouts=LAYOUTS, **kwargs):
    for batch, M, N, K in shapes:
        for layout in layouts:
            a, b = operands(batch, M, N, K, device, layout)
            name = f"{prefix}{layout}-{batch}x{M}x{N}x{K}"
            check(lesson, name, run, a, b, **kwargs)


def check_tiled(lesson: Lesson, device: str) -> None:
    """Step 1 on ragged shapes, strided views and every GPU configuration."""
    if lesson.interpret:
        # Batch 3, and sizes that are mostly not multiples of the 32x32x16
        # blocks: ragged last tiles in M and N, a K tail.
        checks(lesson, device, [(3, 50, 40, 72), (3, 64, 96, 24)])
        return
    # The default configuration on a ragged shape whose row strides are not
    # multiples of 16 bytes and on a mid-size batch, in all three layouts
    # (under compute-sanitizer the ragged one only).
    checks(lesson, device, lesson.size(gpu=[(3, 333, 250, 77), (8, 1000, 1032, 776)],
                                       smoke=[(3, 333, 250, 77)]),
           config=GPU_CONFIGS["128x256x64, 8 warps, 3 stages"], prefix="config1-")
    # Every configuration on a shape ragged against every tile (M = 2*128 + 80,
    # N = 256 + 16, K = 64 + 16) whose sizes and strides are multiples of 16,
    # so Triton compiles the same specialisation as at the benchmark shape:
    # the kernel checked here is the kernel raced below.
    for i, cfg in enumerate(GPU_CONFIGS.values(), start=1):
        checks(lesson, device, [(3, 336, 272, 80)], config=cfg,
               prefix=f"config{i}-", layouts=("contiguous",))


def check_persistent(lesson: Lesson, device: str) -> None:
    """Step 2: the TMA path across batch boundaries, and its fallback."""
    if lesson.interpret:
        # The same shapes (N and K are multiples of 8, so the contiguous case
        # takes the TMA path: 12 and 18 (batch, tile) pairs over 4 programs),
        # the two views through its fallback, and a contiguous batch whose N
        # and K are not multiples of 8.
        shapes = [(3, 50, 40, 72), (3, 64, 96, 24)]
        checks(lesson, device, shapes, run=bmm_persistent, prefix="persistent-")
        checks(lesson, device, [(2, 40, 36, 20)], run=bmm_persistent,
               prefix="persistent-", layouts=("contiguous",))
        return
    # Both configurations on the TMA path, ragged in M, N and K (in 128x256
    # tiles: 18 (batch, tile) pairs, fewer than the SMs; then 320, an uneven
    # 2 or 3 per program); then the fallback for the views and for rows that
    # are not multiples of 16 bytes.
    # Under compute-sanitizer, the small batch in every case.
    large = lesson.size(gpu=(8, 1000, 1032, 776), smoke=(3, 333, 264, 136))
    for i, cfg in enumerate(PERSISTENT_GPU_CONFIGS.values(), start=1):
        checks(lesson, device, sorted({(3, 333, 264, 136), large}),
               run=bmm_persistent, prefix=f"persistent{i}-",
               layouts=("contiguous",), config=cfg)
    checks(lesson, device, [(3, 333, 250, 77)], run=bmm_persistent,
           prefix="persistent-")
    checks(lesson, device, [large], run=bmm_persistent,
           prefix="persistent-", layouts=("transposed-b", "broadcast-a"))


def target_operands(batch, device, size=1024):
    # Random inputs, never zeros: tensor cores draw less power on zeros and
    # clock higher.
    a = torch.randn((batch, size, size), device=device, dtype=torch.float16)
    b = torch.randn((batch, size, size), device=device, dtype=torch.float16)
    return a, b


RACES = {"configs": ("Step 1, bmm_kernel", "tiled", "tiled-bmm-vs-torch-64x1024"),
         "persistent-configs": ("Step 2, persistent TMA", "persistent",
                                "bmm-vs-torch-64x1024")}


def race_configs(lesson: Lesson, device: str) -> tuple[dict, dict, dict]:
    """Each step's configurations race at the target shape; the fastest wins."""
    batch, size = lesson.size(gpu=(64, 1024), smoke=(2, 64))
    a, b = target_operands(batch, device, size)
    flop = 2.0 * batch * size**3
    picked, races = [], {}
    for table, kernel, configs in (
        ("configs", bmm, GPU_CONFIGS),
        ("persistent-configs", bmm_persistent, PERSISTENT_GPU_CONFIGS),
    ):
        # The configurations and torch.bmm take turns; 3 rounds pick a winner.
        fns = {name: (lambda c=c, f=kernel: f(a, b, config=c))
               for name, c in configs.items()}
        ms = bench_interleaved({**fns, "torch.bmm": lambda: torch.bmm(a, b)}, rounds=3)
        best = max(configs, key=lambda name: tflops(flop, ms.median(name)))
        print(f"  {RACES[table][0]}: {best} wins the race")
        races[table] = (configs, ms, best, flop)
        picked.append(configs[best])
    tiled, persistent = picked
    # The configuration that is benchmarked, checked at the benchmark shape.
    checks(lesson, device, [(batch, size, size, size)], run=bmm_persistent,
           prefix="persistent-best-", layouts=("contiguous",), config=persistent)
    return tiled, persistent, races


def race_tables(lesson: Lesson, races: dict, bench_ms) -> None:
    """Each race's table: every configuration's median over the race's rounds,
    taking turns with torch.bmm; the winner's from the benchmark's own rounds
    (the benchmark named in the last column)."""
    for table, (configs, race_ms, best, flop) in races.items():
        step, key, name = RACES[table]
        rows = []
        for config in configs:
            ms, k, said = race_ms, config, ""
            if config == best:
                ms, k, said = bench_ms, key, name
            ratio = statistics.median(
                t / m for m, t in zip(ms[k], ms["torch.bmm"], strict=True))
            rows.append([config, tflops(flop, ms.median(k)),
                         tflops(flop, ms.median("torch.bmm")), ratio, len(ms[k]), said])
        lesson.table(
            table,
            ["configuration", "Triton TFLOP/s", "torch.bmm TFLOP/s",
             "Triton / torch.bmm", "rounds", "benchmark"],
            rows,
            f"{step}: batch 64 of 1024x1024x1024, FP16; medians of rounds taking "
            f"turns with torch.bmm, the race's 3 for the others, the benchmark's for "
            f"the fastest, {best}, which is used below.",
        )


def show_compiled_code(lesson: Lesson, device: str, tiled: dict, persistent: dict):
    """What the compiler made of each step: registers, shared memory, and how
    the tiles reach the tensor cores (cp.async by the threads, or TMA)."""
    # Any size that is a multiple of 16 compiles the same code: 256 under
    # compute-sanitizer.
    M = N = K = lesson.size(gpu=1024, smoke=256)
    a, b = target_operands(1, device, M)
    c = torch.empty_like(a)
    num_sms = torch.cuda.get_device_properties(0).multi_processor_count
    # One launch of each (a single program is enough): the launch returns the
    # compiled kernel, with its PTX and the resources it was given.
    step1 = bmm_kernel[(1, 1)](a, b, c, M, N, K, *a.stride(), *b.stride(),
                               *c.stride(), **tiled)
    step2 = bmm_persistent_tma_kernel[(1,)](*descriptors(a, b, c, persistent),
                                            1, M, N, K, NUM_SMS=num_sms, **persistent)
    lesson.compiled_table(
        "compiled", {"1: bmm_kernel": step1, "2: persistent TMA": step2},
        {"cp.async": r"cp\.async\.c[ag]\.shared\.global",
         "TMA copies": r"cp\.async\.bulk\.tensor",
         "wgmma": r"wgmma\.mma_async"},
        "What Triton compiled for the two configurations benchmarked below; "
        "instruction counts are static (in the PTX), not executions.",
    )


def benchmark(lesson: Lesson, device: str, tiled: dict, persistent: dict):
    """The target: batch 64 of 1024³ in FP16, both steps against torch.bmm,
    and one launch against a loop of 64 launches."""
    batch, size = lesson.size(gpu=(64, 1024), smoke=(2, 64))
    # snippet: host-loop
    # The same 64 products as 64 launches of the single-matrix case (batch
    # 1 views of the same tensors): each launch has only the tiles of one
    # 1024x1024 C, too few to fill the GPU, and pays its own launch.
    a, b = target_operands(batch, device, size)
    c = torch.empty_like(a)

    def host_loop():
        for i in range(batch):
            bmm(a[i : i + 1], b[i : i + 1], out=c[i : i + 1], config=tiled)

    # end snippet

    # snippet: benchmark
    # Both steps, torch.bmm (cuBLAS's batched GEMM) and the host loop race.
    # Each product is 2 * 1024^3 FLOP (a multiply and an add per term).
    flop = 2.0 * batch * size**3
    contenders = {
        "persistent": lambda: bmm_persistent(a, b, config=persistent),
        "tiled": lambda: bmm(a, b, out=c, config=tiled),
        "torch.bmm": lambda: torch.bmm(a, b),
        "host loop": host_loop,
    }
    # The model of the predictions. Step 2 is the previous lesson's
    # persistent kernel, which matched cuBLAS on one matrix, with the batch as
    # one more index of its tile loop. Step 1 pays, per tile, the pipeline's
    # fill and epilogue (about 3 K steps) and idles in a part-empty last wave.
    # The host loop: 64 launches of one matrix's waves against one launch.
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    per_matrix = (triton.cdiv(size, tiled["BLOCK_M"])
                  * triton.cdiv(size, tiled["BLOCK_N"]))
    steps, waves = size // tiled["BLOCK_K"], batch * per_matrix / sms
    loop_waves = batch * math.ceil(per_matrix / sms)
    # end snippet
    # snippet: measure
    lesson.predict("bmm-vs-torch-64x1024", 1.0, "the persistent kernel that matched "
                   "cuBLAS on one matrix; the batch is one more tile index", 0.05)
    lesson.predict("tiled-bmm-vs-torch-64x1024",
                   steps / (steps + 3) * waves / math.ceil(waves),
                   f"cuBLAS's rate less 3 of {steps + 3} K steps per tile and the "
                   f"idle part of {waves:.1f} waves of {sms} SMs", 0.10)
    lesson.predict("one-launch-vs-host-loop-64x1024", loop_waves / math.ceil(waves),
                   f"GPU time in waves: {loop_waves} for 64 launches of one matrix, "
                   f"{math.ceil(waves)} for one launch", 0.25)
    # Each call timed on its own, launches included: the host loop's cost.
    ms = bench_interleaved(contenders, method="events")
    # end snippet
    step1 = config_name(GPU_CONFIGS, tiled)
    step2 = config_name(PERSISTENT_GPU_CONFIGS, persistent)
    lesson.benchmark(
        "bmm-vs-torch-64x1024",
        "step 2 (persistent TMA) vs torch.bmm, 64 x 1024³ fp16",
        ms, "persistent", "torch.bmm", unit="TFLOP/s", work=flop,
        baseline_name="torch.bmm", threshold=0.80, stretch=0.95,
        note=f"FP16 in, FP32 accumulate, FP16 out; {step2}",
    )
    lesson.benchmark(
        "tiled-bmm-vs-torch-64x1024",
        "step 1 (one program per tile) vs torch.bmm, 64 x 1024³ fp16",
        ms, "tiled", "torch.bmm", unit="TFLOP/s", work=flop,
        baseline_name="torch.bmm", note=f"for reference; {step1}",
    )
    lesson.benchmark(
        "one-launch-vs-host-loop-64x1024",
        "one launch vs 64 launches of one matrix each (step 1)",
        ms, "tiled", "host loop", unit="TFLOP/s", work=flop,
        baseline_name="64 launches, one matrix each",
        note=f"why the batch belongs in the grid; {step1}",
    )
    return ms


def config_name(configs: dict, chosen: dict) -> str:
    return next(name for name, cfg in configs.items() if cfg is chosen)


def sweep_and_plot(lesson: Lesson, device: str, tiled: dict, persistent: dict,
                   at_64) -> None:
    """Both steps and torch.bmm from batch 1 to 64: where does each fill the GPU?
    Each point the median of interleaved rounds with a 95 % interval; at batch
    64, the benchmark's rounds."""
    def contenders(a, b):
        return {
            "tiled": lambda: bmm(a, b, config=tiled),
            "persistent": lambda: bmm_persistent(a, b, config=persistent),
            "torch.bmm": lambda: torch.bmm(a, b),
        }

    size = lesson.size(gpu=1024, smoke=64)
    flop1 = 2.0 * size**3
    rounds = {batch: bench_interleaved(contenders(*target_operands(batch, device,
                                                                   size)), rounds=7)
              for batch in (1, 4, 16)}
    rounds[64] = at_64
    sweep = {}
    for batch, ms in rounds.items():
        sweep[batch] = {k: tflops(batch * flop1, ms.median(k))
                        for k in ("tiled", "persistent", "torch.bmm")}
        sweep[batch]["intervals"] = {k: median_interval(
            [tflops(batch * flop1, t) for t in ms[k]]) for k in ("tiled", "persistent",
                                                                 "torch.bmm")}
        for k in ("tiled", "persistent"):
            sweep[batch][f"{k} ratio"] = statistics.median(
                t / m for m, t in zip(ms[k], ms["torch.bmm"], strict=True))
    tiles = triton.cdiv(size, tiled["BLOCK_M"]) * triton.cdiv(size, tiled["BLOCK_N"])
    lesson.table(
        "batch-sweep",
        ["batch", "step 1 programs", "step 1 TFLOP/s", "step 2 TFLOP/s",
         "torch.bmm TFLOP/s", "step 1 / torch.bmm", "step 2 / torch.bmm", "rounds"],
        [[batch, batch * tiles, r["tiled"], r["persistent"], r["torch.bmm"],
          r["tiled ratio"], r["persistent ratio"], len(rounds[batch]["tiled"])]
         for batch, r in sweep.items()],
        f"FP16 batches of 1024x1024x1024 products; step 1 "
        f"{config_name(GPU_CONFIGS, tiled)}, step 2 "
        f"{config_name(PERSISTENT_GPU_CONFIGS, persistent)}; medians of rounds "
        "taking turns (batch 64: the benchmark's), each ratio the median of the "
        "rounds' ratios.",
    )
    batches = list(sweep)

    def draw(fig):
        ax = fig.subplots()
        for key, style, name in (("tiled", "o-", "step 1: bmm_kernel (tiled)"),
                                 ("persistent", "^-", "step 2: persistent TMA"),
                                 ("torch.bmm", "s--", "torch.bmm (cuBLAS)")):
            mid = [sweep[x][key] for x in batches]
            ends = [sweep[x]["intervals"][key] for x in batches]
            err = [[m - e[1] for m, e in zip(mid, ends, strict=True)],
                   [e[2] - m for m, e in zip(mid, ends, strict=True)]]
            ax.errorbar(batches, mid, yerr=err, fmt=style, capsize=3, label=name)
        ax.set_xscale("log", base=2)
        ax.set_xticks(batches, [str(x) for x in batches])
        ax.set_xlabel(f"batch (products of {size} x {size} x {size})")
        ax.set_ylabel("TFLOP/s")
        ax.set_ylim(bottom=0)
        fig.legend(loc="outside lower center", ncols=2)

    lesson.plot("batch-sweep", f"TFLOP/s against batch size, each product {size}³ "
                "(FP16 in, FP32 accumulate): how many products it takes to fill the "
                "GPU. Medians of interleaved rounds with their confidence "
                "intervals; at batch 64 the benchmark's rounds.", draw,
                size=(7.0, 4.2))


def main() -> int:
    lesson = Lesson("batched-matmul")
    device = lesson.device()
    with lesson.step("correctness"):
        check_tiled(lesson, device)
        check_persistent(lesson, device)
    if lesson.step("race", needs_gpu="the configurations race on GPU time"):
        tiled, persistent, races = race_configs(lesson, device)
    if lesson.step("compiled-code", needs_gpu="the interpreter compiles nothing",
                   smoke=False):
        show_compiled_code(lesson, device, tiled, persistent)
    if lesson.step("benchmark", needs_gpu="timings need a GPU"):
        at_64 = benchmark(lesson, device, tiled, persistent)
        race_tables(lesson, races, at_64)
    if lesson.step("sweep", needs_gpu="timings need a GPU"):
        sweep_and_plot(lesson, device, tiled, persistent, at_64)
    return lesson.finish()


if __name__ == "__main__":
    sys.exit(main())
