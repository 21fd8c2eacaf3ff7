"""FP16 matmul, as the course records it: the checks, benchmarks and figures.

The kernels, their launcher and the grouped tile order are in fp16_matmul.py,
which runs alone. This file checks them the way every lesson is checked
(outputs filled with NaN, shapes that are not multiples of the tiles, a
float64 reference and a tolerance from the error analysis), counts what the
compiler made of each, and times them against cuBLAS, through the course's kit
(lessonkit.py), which keeps the record.

Run it:
    TRITON_INTERPRET=1 python lesson.py   # any machine: the checks on the CPU
    python lesson.py                      # a CUDA GPU: checks, TFLOP/s, sweep
"""

import math
import statistics
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

# lessonkit.py sits beside this file in a download, one folder up in the repository.
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]
from fp16_matmul import (  # noqa: E402
    H200_RIDGE,
    INTERPRETER,
    RECOMMENDED,
    SEED,
    arithmetic_intensity,
    matmul,
    matmul_kernel,
    matmul_kernel_seed,
    tile_coordinates,
)

from lessonkit import (  # noqa: E402
    Lesson,
    bench_interleaved,
    median_interval,
    scaled_rtol,
)


@triton.jit
def tile_order_kernel(pid_m_ptr, pid_n_ptr, M, N, BLOCK_M: tl.constexpr,
                      BLOCK_N: tl.constexpr, GROUP_SIZE_M: tl.constexpr):
    """Each program stores the tile tile_coordinates gives it: the order, as data."""
    pid = tl.program_id(0)
    pid_m, pid_n = tile_coordinates(pid, M, N, BLOCK_M, BLOCK_N, GROUP_SIZE_M)
    tl.store(pid_m_ptr + pid, pid_m)
    tl.store(pid_n_ptr + pid, pid_n)


def tile_order(tiles_m, tiles_n, group_size_m, device):
    """[(pid_m, pid_n) of program 0, of program 1, ...] on a tiles_m x tiles_n
    grid of 128 x 128 tiles, from the kernels' own tile_coordinates."""
    pid_m = torch.empty(tiles_m * tiles_n, dtype=torch.int32, device=device)
    pid_n = torch.empty_like(pid_m)
    tile_order_kernel[(tiles_m * tiles_n,)](pid_m, pid_n, tiles_m * 128,
                                            tiles_n * 128, BLOCK_M=128, BLOCK_N=128,
                                            GROUP_SIZE_M=group_size_m)
    return list(zip(pid_m.tolist(), pid_n.tolist(), strict=True))


# snippet: tolerance
def tolerance(K, want):
    """(rtol, atol, why) for an FP16 matmul with an FP32 accumulator.

    Two errors reach the output. The final cast to FP16 rounds each element
    once, by at most half an ulp: 2^-11 relative to the element. The FP32
    sum over K drifts like sqrt(K) roundings of size 2^-24 relative to the
    partial sums; the kit's rule bounds it by 4 * 2^-23 * sqrt(K), taken
    relative to max|want| so that elements which cancel to near zero are
    judged on the scale of the result, not on their own tiny size.
    """
    rtol = 2.0 ** -11
    acc_rtol, acc_why = scaled_rtol(0.0, 2.0 ** -23, K)
    scale = float(want.abs().max())
    return rtol, acc_rtol * scale, (f"fp16 output rounding 2⁻¹¹; fp32 accumulation "
                                    f"{acc_why} (x max|want|)")
# end snippet


def random_fp16(rows, cols, device):
    return torch.randn((rows, cols), device=device).half()


def reference(lesson: Lesson, a, b):
    """The exact products of the FP16 inputs, summed in float64. Under
    compute-sanitizer on the CPU, so the tool instruments no library kernel."""
    if lesson.sanitize:
        a, b = a.cpu(), b.cpu()
    return a.double() @ b.double()


def check_shape(lesson, name, kernel, config, M, N, K, device, rng_seed):
    torch.manual_seed(rng_seed)
    a = random_fp16(M, K, device)
    b = random_fp16(K, N, device)
    c = torch.full((M, N), float("nan"), device=device, dtype=torch.float16)  # poison
    matmul(a, b, kernel, config, out=c)
    want = reference(lesson, a, b)
    rtol, atol, why = tolerance(K, want)
    lesson.close(f"{name}-{M}x{N}x{K}", c, want, rtol, atol, why)


def check_roofline(lesson: Lesson) -> None:
    # snippet: roofline-check
    # Is 70 % of cuBLAS a reasonable goal at all? Only if the work is
    # compute-bound: then both kernels chase the same tensor-core ceiling
    # and the ratio measures the kernel, not the memory system.
    ai = arithmetic_intensity(4096, 4096, 4096)
    compute_bound = ai > H200_RIDGE
    # end snippet
    lesson.check("workload-is-compute-bound", compute_bound,
                 f"4096³ fp16: {ai:.0f} FLOP/byte vs H200 ridge "
                 f"{H200_RIDGE:.0f} FLOP/byte")


def show_tile_order(lesson: Lesson, device: str) -> None:
    """The order tile_coordinates gives the programs, row-major (GROUP_SIZE_M = 1)
    and grouped (8), on a grid small enough to draw; and what the first programs
    to run together read between them."""
    tiles_m, tiles_n, together = 12, 16, 32
    orders = {group: tile_order(tiles_m, tiles_n, group, device) for group in (1, 8)}
    every_tile = sorted((m, n) for m in range(tiles_m) for n in range(tiles_n))
    reads = {}
    for group, order in orders.items():
        lesson.check(f"tile-order-group-{group}-covers-every-tile-once",
                     sorted(order) == every_tile,
                     f"{tiles_m} x {tiles_n} tiles, GROUP_SIZE_M = {group}")
        first = order[:together]
        rows, cols = len({m for m, _ in first}), len({n for _, n in first})
        reads[group] = (rows, cols)
        print(f"  GROUP_SIZE_M = {group}: programs 0-{together - 1} compute tiles in "
              f"{rows} rows and {cols} columns of C, so they read {rows} row blocks "
              f"of A and {cols} column blocks of B: {rows + cols} blocks")
    lesson.check("grouped-order-reads-fewer-blocks",
                 sum(reads[8]) < sum(reads[1]),
                 f"the first {together} programs read {sum(reads[8])} blocks grouped, "
                 f"{sum(reads[1])} row-major")
    plot_tile_order(lesson, orders, tiles_m, tiles_n, together, reads)


def plot_tile_order(lesson: Lesson, orders, tiles_m, tiles_n, together, reads):
    def draw(fig):
        axes = fig.subplots(1, 2, sharey=True)  # side by side: half the height
        for ax, (group, order) in zip(axes, orders.items(), strict=True):
            launch = [[0] * tiles_n for _ in range(tiles_m)]
            for pid, (m, n) in enumerate(order):
                launch[m][n] = pid
            ax.imshow(launch, cmap="viridis")
            first = order[:together]  # the path of the first programs, in order
            ax.plot([n for _, n in first], [m for m, _ in first], color="white",
                    linewidth=1.5, marker="o", markersize=4)
            rows, cols = reads[group]
            ax.set_title(f"GROUP_SIZE_M = {group}:\n{rows} + {cols} = {rows + cols} "
                         "blocks")
            ax.set_xticks([0, tiles_n - 1])
            ax.set_yticks([0, tiles_m - 1])
            ax.set_xlabel("pid_n")
            ax.grid(False)
            # Thin borders between the tiles, in the page's background colour.
            ax.set_xticks([x - 0.5 for x in range(1, tiles_n)], minor=True)
            ax.set_yticks([y - 0.5 for y in range(1, tiles_m)], minor=True)
            ax.grid(which="minor", color=ax.get_facecolor(), linewidth=1)
            ax.tick_params(which="minor", length=0)
        axes[0].set_ylabel("pid_m")

    lesson.plot("tile-order",
                f"Which program computes which tile of a {tiles_m} x {tiles_n} grid, "
                "as tile_coordinates orders them: colour is the program id, dark "
                f"first; the white path joins programs 0 to {together - 1}, which "
                "start together. Row-major order on the left, grouped on the right; "
                "each title counts the blocks of A and B those programs read.",
                draw, size=(7.0, 3.4))


def check_correctness(lesson: Lesson, device: str) -> None:
    # Shapes that are not multiples of any tile, so the wrapping, the K-tail
    # masks and the store masks all have work to do; plus one that is.
    if lesson.interpret:
        shapes = [(200, 136, 72), (64, 64, 64), (33, 100, 17)]
        configs = {"seed": (matmul_kernel_seed, INTERPRETER),
                   "recommended": (matmul_kernel, INTERPRETER)}
    else:
        # Under compute-sanitizer, two small shapes with the real configurations.
        shapes = lesson.size(gpu=[(200, 136, 72), (256, 256, 256), (1000, 1000, 1000),
                                  (1000, 1016, 984)],
                             smoke=[(200, 136, 72), (256, 256, 256)])
        configs = {"seed": (matmul_kernel_seed, SEED),
                   "recommended": (matmul_kernel, RECOMMENDED)}
    for rng_seed, (M, N, K) in enumerate(shapes):
        for name, (kernel, config) in configs.items():
            check_shape(lesson, name, kernel, config, M, N, K, device, rng_seed)
    if lesson.interpret:
        # The GPU's own tile sizes too (warps and stages mean nothing here):
        # every 256-wide tile on a 136-wide matrix wraps along N, and the
        # second row of 128-row tiles wraps along M as well.
        for name, kernel, config in (
                ("seed-gpu-tiles", matmul_kernel_seed, SEED),
                ("recommended-gpu-tiles", matmul_kernel, RECOMMENDED)):
            check_shape(lesson, name, kernel, config, 200, 136, 72, device, 7)
    else:
        # The benchmarked shape is checked too: what is timed must be right
        # (not under compute-sanitizer, where the benchmark runs at 256^3).
        for size in lesson.size(gpu=[4096], smoke=[]):
            for name, (kernel, config) in configs.items():
                check_shape(lesson, name, kernel, config, size, size, size, device,
                            100)


# PTX global loads look like `ld.global[.cache hints].v4.b32` (16 bytes) or
# `ld.global[.cache hints].b16` (one FP16 value); asynchronous copies into
# shared memory are `cp.async.cg/ca.shared.global`; Hopper's tensor-core
# instructions are `wgmma.mma_async`. Counts are static (instructions in the
# code, not executions).
PTX = {
    "16-byte ld.global": r"ld\.global(?:\.(?!v\d)[\w:]+)*\.v4\.b32",
    "2-byte ld.global": r"ld\.global(?:\.(?!v\d)[\w:]+)*\.b16\b",
    "cp.async": r"cp\.async\.c[ag]\.shared\.global",
    "wgmma": r"wgmma\.mma_async",
}


def show_compiled_code(lesson: Lesson, device: str) -> None:
    # One program of each kernel at the benchmarked shape (any size that is a
    # multiple of 16 compiles the same code; 256 under compute-sanitizer).
    size = lesson.size(gpu=4096, smoke=256)
    a = random_fp16(size, size, device)
    compiled = {label: kernel[(1,)](a, a, torch.empty_like(a), size, size, size,
                                    size, 1, size, 1, size, 1, **config)
                for label, kernel, config in (("seed", matmul_kernel_seed, SEED),
                                              ("recommended", matmul_kernel,
                                               RECOMMENDED))}
    lesson.compiled_table("ptx", compiled, PTX,
                          "Instructions in the PTX of each kernel (as compiled for "
                          "4096³): how A and B reach the tensor cores")


def benchmark(lesson: Lesson, device: str) -> tuple:
    torch.manual_seed(0)
    size = lesson.size(gpu=4096, smoke=256)
    # snippet: benchmark
    # Random FP16 inputs; cuBLAS (torch.matmul) is timed in the same run.
    # TFLOP/s = 2*M*N*K / time: each of the M*N outputs is K multiply-adds.
    a = random_fp16(size, size, device)
    b = random_fp16(size, size, device)
    flop = 2 * size**3
    # The prediction, from the roofline and the tile count: compute-bound like
    # cuBLAS, on the same tensor cores, the kernel loses the pipeline's fill
    # and the epilogue of each tile (about 3 of 64 + 3 K steps) and the idle
    # part of its last wave (512 tiles of 128 x 256 are 3.9 waves of 132 SMs).
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    tiles = (size // RECOMMENDED["BLOCK_M"]) * (size // RECOMMENDED["BLOCK_N"])
    steps = size // RECOMMENDED["BLOCK_K"]
    waves = tiles / sms
    predicted = steps / (steps + 3) * waves / math.ceil(waves)
    # Five contenders. The last two swap the kernels' configurations: is the
    # difference the code or the tile?
    contenders = {
        "cublas": lambda: torch.matmul(a, b),
        "recommended": lambda: matmul(a, b, matmul_kernel, RECOMMENDED),
        "seed": lambda: matmul(a, b, matmul_kernel_seed, SEED),
        "recommended, seed config": lambda: matmul(a, b, matmul_kernel, SEED),
        "seed, recommended config": lambda: matmul(a, b, matmul_kernel_seed,
                                                   RECOMMENDED),
    }
    # end snippet
    # snippet: measure
    lesson.predict(
        "recommended-vs-cublas-4096", predicted,
        f"cuBLAS's rate, less 3 of {steps + 3} K steps per tile (fill, epilogue) "
        f"and the idle part of {waves:.2f} waves of {sms} SMs",
        0.10,
    )
    # All five take turns in each of ten rounds.
    ms = bench_interleaved(contenders, rounds=10)
    lesson.benchmark("recommended-vs-cublas-4096",
                     "recommended kernel vs cuBLAS, 4096³ fp16", ms, "recommended",
                     "cublas", unit="TFLOP/s", work=flop,
                     baseline_name="cuBLAS (torch.matmul)", threshold=0.70,
                     stretch=0.85)
    lesson.benchmark("seed-vs-cublas-4096", "seed kernel vs cuBLAS, 4096³ fp16", ms,
                     "seed", "cublas", unit="TFLOP/s", work=flop,
                     baseline_name="cuBLAS (torch.matmul)",
                     note="informational: the notebook's kernel")
    # end snippet
    code_or_config(lesson, ms, flop)
    return size, ms


def shape_of(config: dict) -> str:
    return (f"{config['BLOCK_M']}x{config['BLOCK_N']}x{config['BLOCK_K']}, "
            f"{config['num_warps']} warps")


def code_or_config(lesson: Lesson, ms, flop: float) -> None:
    """Code or configuration? Each kernel with each configuration, and cuBLAS,
    from the benchmark's own rounds."""
    labels = {"cublas": "cuBLAS (torch.matmul)"}
    for kernel in ("seed", "recommended"):
        for cfg_name, config in (("seed", SEED), ("recommended", RECOMMENDED)):
            name = kernel if cfg_name == kernel else f"{kernel}, {cfg_name} config"
            labels[name] = f"{kernel}, {shape_of(config)}"
    lesson.rates("code-or-config",
                 "4096³ FP16: each kernel with each configuration (3 stages), and "
                 f"cuBLAS, in TFLOP/s: the median of the benchmark's "
                 f"{len(ms['cublas'])} interleaved rounds (a bar, with its confidence "
                 "interval) and every round (dots)",
                 ms, flop, unit="TFLOP/s", labels=labels, size=(6.0, 3.2))


SWEEP_STYLES = {"cublas": ("o", "cuBLAS (torch.matmul)"),
                "recommended": ("s", "recommended kernel"),
                "seed": ("^", "seed kernel")}


def sweep_and_plot(lesson: Lesson, device: str, benchmarked: tuple) -> None:
    sizes = lesson.size(gpu=[512, 1024, 2048, 4096, 8192], smoke=[64, 128])
    # snippet: sweep
    # A figure, not a target, timed as the benchmark is: at each size the
    # three take turns for ten rounds, and each point is the median of its
    # rounds with a 95 % interval. At the benchmarked size the points are
    # the benchmark's own rounds, so the figure and the headline agree.
    rounds = {}
    for size in sizes:
        if size == benchmarked[0]:
            rounds[size] = benchmarked[1]
            continue
        a = random_fp16(size, size, device)
        b = random_fp16(size, size, device)
        rounds[size] = bench_interleaved({
            "cublas": lambda a=a, b=b: torch.matmul(a, b),
            "recommended": lambda a=a, b=b: matmul(a, b, matmul_kernel, RECOMMENDED),
            "seed": lambda a=a, b=b: matmul(a, b, matmul_kernel_seed, SEED),
        }, rounds=10)
    # end snippet
    # Per size and contender: the rate of the median time (as a benchmark
    # reports it) with the 95 % interval of the rates of the rounds, and each
    # kernel's ratio to cuBLAS in the same round: median and interval.
    rates, ratios = {}, {}
    for size, ms in rounds.items():
        flop = 2 * size**3
        for name in SWEEP_STYLES:
            _, low, high = median_interval([flop / t * 1e-9 for t in ms[name]])
            rates[size, name] = (flop / statistics.median(ms[name]) * 1e-9, low, high)
            if name != "cublas":
                ratios[size, name] = median_interval(
                    [c / k for k, c in zip(ms[name], ms["cublas"], strict=True)])
    rows = [[s, rates[s, "seed"][0], rates[s, "recommended"][0], rates[s, "cublas"][0],
             ratios[s, "recommended"][0],
             f"[{ratios[s, 'recommended'][1]:.3f}, {ratios[s, 'recommended'][2]:.3f}]",
             len(rounds[s]["cublas"])] for s in sizes]
    lesson.table("sweep", ["M=N=K", "seed TFLOP/s", "recommended TFLOP/s",
                           "cuBLAS TFLOP/s", "recommended / cuBLAS",
                           "95 % interval", "rounds"], rows,
                 "Square FP16 matmuls: medians of interleaved rounds (at 4096³ the "
                 "benchmark's), and the ratio's 95 % interval")
    plot_sweep(lesson, sizes, rates, ratios)


def plot_sweep(lesson: Lesson, sizes: list, rates: dict, ratios: dict) -> None:
    def bars(ax, values, marker, label, colour):
        mid = [v[0] for v in values]
        err = [[m - v[1] for m, v in zip(mid, values, strict=True)],
               [v[2] - m for m, v in zip(mid, values, strict=True)]]
        ax.errorbar(sizes, mid, yerr=err, marker=marker, label=label, capsize=3,
                    color=colour)

    def draw(fig):
        top, bottom = fig.subplots(2, 1, sharex=True)  # stacked: a phone's column
        for i, (name, (marker, label)) in enumerate(SWEEP_STYLES.items()):
            bars(top, [rates[s, name] for s in sizes], marker, label, f"C{i}")
            if name != "cublas":
                bars(bottom, [ratios[s, name] for s in sizes], marker, label, f"C{i}")
        for ax in (top, bottom):
            ax.set_xscale("log", base=2)
            ax.set_xticks(sizes, [str(s) for s in sizes])
        bottom.set_xlabel("M = N = K")
        top.set_ylabel("TFLOP/s")
        fig.legend(*top.get_legend_handles_labels(), loc="outside lower center",
                   ncols=2)
        top.set_ylim(bottom=0)
        bottom.axhline(1.0, color="grey", linewidth=1, linestyle="--")
        bottom.set_ylabel("ratio to cuBLAS")
        bottom.set_ylim(bottom=0, top=max(1.2, 1.1 * bottom.get_ylim()[1]))

    lesson.plot("tflops-vs-size",
                "TFLOP/s (fp16 in, fp32 accumulate) of the seed and recommended "
                "kernels and cuBLAS at square sizes (top), and each kernel's ratio "
                "to cuBLAS in the same rounds (bottom): medians of interleaved "
                "rounds with their confidence intervals; at 4096³ the benchmark's "
                "rounds", draw, size=(7.0, 6.0))


def main() -> int:
    lesson = Lesson("fp16-matmul")
    device = lesson.device()
    with lesson.step("roofline"):
        check_roofline(lesson)
    with lesson.step("tile-order"):
        show_tile_order(lesson, device)
    if lesson.step("compiled-code", needs_gpu="the interpreter compiles no PTX",
                   smoke=False):
        show_compiled_code(lesson, device)
    with lesson.step("correctness"):
        check_correctness(lesson, device)
    if lesson.step("benchmark", needs_gpu="timings need a GPU"):
        benchmarked = benchmark(lesson, device)
    if lesson.step("sweep", needs_gpu="timings need a GPU"):
        sweep_and_plot(lesson, device, benchmarked)
    return lesson.finish()


if __name__ == "__main__":
    sys.exit(main())
