"""Split-K, as the course records it: the checks, the sweep and the benchmark.

The kernels (tiled, split-K with either way of combining the slices, stream-K)
and their launchers are in split_k.py, which runs alone. This file checks them
the way every lesson is checked (outputs against a float64 reference, shapes
and split counts that divide nothing), shows that the fixed-order reduction
repeats bit for bit, counts programs against SMs, sweeps the split count and
races the best against cuBLAS, through the course's kit (lessonkit.py), which
keeps the record.

Run it:
    TRITON_INTERPRET=1 python lesson.py   # any machine: checks on the CPU
    python lesson.py                      # a CUDA GPU: checks, TFLOP/s, sweep
"""

import re
import statistics
import sys
from functools import partial
from pathlib import Path

import torch
import triton

# lessonkit.py sits beside this file in a download, one folder up in the repository.
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]
from split_k import (  # noqa: E402
    GPU_TILES,
    INTERPRETER_TILES,
    SHAPE,
    matmul_kernel,
    matmul_split_k,
    matmul_split_k_kernel,
    matmul_stream_k,
    matmul_stream_k_kernel,
    matmul_tiled,
    split_plan,
)

from lessonkit import (  # noqa: E402
    Lesson,
    bench_interleaved,
    median_interval,
    scaled_rtol,
)


# snippet: tolerance
def tolerance(K, want):
    """(rtol, atol, why): FP16 output rounding, plus the FP32 sum over K.

    Split-K adds the same K products in a different order (S sums of K/S,
    then a sum of S), which the length-scaled bound covers: it is taken
    relative to max|want|, so outputs that cancel to near zero are judged
    on the scale of the result.
    """
    acc_rtol, acc_why = scaled_rtol(0.0, 2.0**-23, K)
    atol = acc_rtol * float(want.abs().max())
    return 2.0**-11, atol, f"fp16 output 2⁻¹¹; fp32 sum {acc_why} (x max|want|)"


# end snippet


def make_inputs(M, N, K, device, seed=0):
    g = torch.Generator(device).manual_seed(seed)
    a = torch.randn((M, K), generator=g, device=device, dtype=torch.float16)
    b = torch.randn((K, N), generator=g, device=device, dtype=torch.float16)
    return a, b


# snippet: checks
# K = 1000 is not a multiple of BLOCK_K, and 3 and 7 splits do not divide its
# steps (7 leaves empty slices, which are dropped); N = 200 ends in a partial
# tile, M = 5 is less than BLOCK_M. The GPU adds the benchmark's shape, with
# both tiles it times. Stream-K runs with program counts that do not divide
# the work, so runs end inside tiles. Each case: ((M, N, K), BLOCK_Ns).
CHECK_PLAN = {
    "interpreter": {"cases": [((5, 200, 1000), (64,)), ((16, 256, 640), (64,))],
                    "splits": (1, 3, 7), "stream_programs": (5,)},
    "gpu": {"cases": [((5, 200, 1000), (64,)), ((16, 4096, 16384), (64, 128))],
            "splits": (1, 3, 7, 16, 32), "stream_programs": (5, 396)},
}
# end snippet
# Under compute-sanitizer every launch is instrumented: the same kinds of case
# on a smaller shape (B of 2048 x 512, a tenth of a second per launch).
SANITIZE_PLAN = {"cases": [((5, 200, 1000), (64,)), ((16, 512, 2048), (64, 128))],
                 "splits": (1, 3, 7, 16), "stream_programs": (5, 24)}


def reference(lesson: Lesson, a, b):
    """The exact products of the FP16 inputs, summed in float64. Under
    compute-sanitizer on the CPU, so the tool instruments no library kernel."""
    if lesson.sanitize:
        a, b = a.cpu(), b.cpu()
    return a.double() @ b.double()


def check_correctness(lesson: Lesson, device: str) -> dict:
    tiles = INTERPRETER_TILES if lesson.interpret else GPU_TILES
    plan = CHECK_PLAN["interpreter"] if lesson.interpret else lesson.size(
        gpu=CHECK_PLAN["gpu"], smoke=SANITIZE_PLAN)
    for seed, ((M, N, K), block_ns) in enumerate(plan["cases"]):
        a, b = make_inputs(M, N, K, device, seed)
        want = reference(lesson, a, b)  # exact products, float64 sums
        rtol, atol, why = tolerance(K, want)
        for bn in block_ns:
            tile, name = tiles[bn], f"{M}x{N}x{K}-bn{bn}"
            c = matmul_tiled(a, b, tile)
            lesson.close(f"tiled-{name}", c, want, rtol, atol, why)
            for splits in plan["splits"]:
                for combine in ("reduce", "atomic"):
                    c = matmul_split_k(a, b, tile, splits, combine)
                    lesson.close(f"split{splits}-{combine}-{name}", c, want, rtol, atol,
                                 why)
            for programs in plan["stream_programs"]:
                c = matmul_stream_k(a, b, tile, programs)
                lesson.close(f"stream-k-{programs}-{name}", c, want, rtol, atol, why)
    return tiles


def check_determinism(lesson: Lesson, device: str, tile: dict) -> None:
    M, N, K, splits, repeats = lesson.size(gpu=(*SHAPE, 16, 8),
                                           smoke=(16, 512, 2048, 4, 3))
    if lesson.interpret:
        M, N, K, splits, repeats = 16, 64, 512, 4, 3
    # snippet: determinism
    # The same product several times: the fixed-order reduction must give
    # the same bits every time. The atomic version adds the partial tiles
    # in whatever order the programs finish; on a GPU that order changes.
    a, b = make_inputs(M, N, K, device, seed=11)
    runs = {c: [matmul_split_k(a, b, tile, splits, c) for _ in range(repeats)]
            for c in ("reduce", "atomic")}
    same = {c: sum(torch.equal(r, rs[0]) for r in rs[1:]) for c, rs in runs.items()}
    # end snippet
    lesson.check(
        "reduce-is-deterministic", same["reduce"] == repeats - 1,
        f"{splits} slices, fixed-order sum: {same['reduce']} of {repeats - 1} "
        "repeats bit-identical to the first",
    )
    differ = [int((r != runs["atomic"][0]).sum()) for r in runs["atomic"][1:]]
    if not lesson.not_on_interpreter(
        "atomic run-to-run variation",
        "the interpreter runs programs one after another, so atomics add in one order",
    ):
        lesson.table(
            "atomic-repeats", ["combine", "repeats bit-identical to the first",
                               "elements that differ, per repeat"],
            [["reduce (fixed order)", f"{same['reduce']} of {repeats - 1}", "0"],
             ["atomic", f"{same['atomic']} of {repeats - 1}",
              ", ".join(map(str, differ))]],
            f"Split-K with {splits} slices, {M}x{N}x{K}, the same inputs "
            f"{repeats} times",
        )


def occupancy_table(lesson: Lesson, sms: int) -> None:
    """Programs against SMs: why the tiled kernel starves."""
    M, N, K = SHAPE
    rows = []
    for bn in (64, 128):
        tiles = triton.cdiv(N, bn) * triton.cdiv(M, 16)
        rows.append(["tiled", bn, 1, tiles, sms, tiles / sms, K])
        for splits in (2, 4, 8, 16):
            kps, used = split_plan(K, splits, 128)
            rows.append(["split-K", bn, used, tiles * used, sms, tiles * used / sms,
                         kps])
    lesson.table(
        "programs-vs-sms",
        ["kernel", "BLOCK_N", "splits", "programs", "SMs", "programs per SM",
         "K per program"],
        rows,
        f"M={M}, N={N}, K={K}, BLOCK_M=16, BLOCK_K=128: one row of tiles",
    )


def resident_per_sm(kernel_obj, num_warps: int) -> int:
    """Programs of this compiled kernel that fit on one H100/H200 SM at once."""
    by_smem = (228 * 1024) // (kernel_obj.metadata.shared + 1024)  # 1 KiB reserved
    by_regs = 65536 // max(1, kernel_obj.n_regs * 32 * num_warps)
    return max(1, min(by_smem, by_regs, 64 // num_warps, 32))


def show_compiled_code(lesson: Lesson, a, b, sms: int) -> dict:
    """What the compiler made of each kernel: MMA kind, shared memory, residency."""

    if lesson.not_on_interpreter("compiled code", "the interpreter compiles nothing"):
        # A smoke run goes on to the sweep with one program per SM.
        kernels = ("tiled", "split-K", "stream-K")
        return {(k, bn): 1 for k in kernels for bn in GPU_TILES}
    M, K = a.shape
    N = b.shape[1]
    ws = torch.zeros((16, M, N), device=a.device, dtype=torch.float32)
    c = torch.empty((M, N), device=a.device, dtype=torch.float16)
    rows, resident = [], {}
    for bn, tile in GPU_TILES.items():
        kernels = {
            "tiled": matmul_kernel[(1, 1)](
                a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                c.stride(0), c.stride(1), **tile),
            "split-K": matmul_split_k_kernel[(1, 1, 1)](
                a, b, ws, M, N, K, K, a.stride(0), a.stride(1), b.stride(0),
                b.stride(1), ATOMIC=False, **tile),
            "stream-K": matmul_stream_k_kernel[(sms,)](
                a, b, ws, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                **tile),
        }
        for name, k in kernels.items():
            ptx = k.asm["ptx"]
            per_sm = resident_per_sm(k, tile["num_warps"])
            resident[name, bn] = per_sm
            rows.append([
                name, bn, len(re.findall(r"wgmma\.mma_async", ptx)),
                len(re.findall(r"mma\.sync", ptx)),
                len(re.findall(r"cp\.async\.c[ag]\.shared\.global", ptx)),
                k.metadata.shared, k.n_regs, per_sm,
            ])
    lesson.table(
        "compiled",
        ["kernel", "BLOCK_N", "wgmma", "mma.sync", "cp.async", "shared bytes",
         "registers", "programs per SM"],
        rows,
        "Static PTX counts; programs per SM from shared memory and registers",
    )
    return resident


SPLITS = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32]
COMBINES = ("reduce", "atomic")


def sweep(lesson: Lesson, a, b) -> tuple[dict, dict]:
    """Every split count with both tiles and both ways of combining, and cuBLAS
    in the same rounds. Returns the rounds of each split count, and the best
    (BLOCK_N, splits) of each way of combining by the median rate."""
    flop = 2 * a.shape[0] * b.shape[1] * a.shape[1]
    # snippet: sweep
    # At each split count the four variants and cuBLAS take turns for seven
    # rounds: a median and a 95 % interval per point, and a ratio to cuBLAS
    # from the same rounds.
    rounds = {}
    for splits in SPLITS:
        fns = {(bn, combine): partial(matmul_split_k, a, b, tile, splits, combine)
               for bn, tile in GPU_TILES.items() for combine in COMBINES}
        fns["cublas"] = partial(torch.matmul, a, b)
        rounds[splits] = bench_interleaved(fns, rounds=7)
    # end snippet
    # The best (BLOCK_N, splits, TFLOP/s) of each way of combining.
    best = {}
    for combine in COMBINES:
        best[combine] = max(((bn, splits, flop / rounds[splits].median((bn, combine)))
                             for bn in GPU_TILES for splits in SPLITS),
                            key=lambda p: p[2])
    return rounds, best


def benchmark(lesson: Lesson, a, b, best: dict, sms: int, resident: dict):
    M, K = a.shape
    N = b.shape[1]
    # snippet: benchmark
    # The sweep's best split-K is timed against cuBLAS, with the best of the
    # other way of combining, stream-K (one program per resident slot on
    # every SM) and the tiled kernel's 64 programs. 2*M*N*K FLOP per call.
    first = max(best, key=lambda c: best[c][2])
    second = "atomic" if first == "reduce" else "reduce"
    (bn, splits, _), (bn2, splits2, _) = best[first], best[second]
    flop = 2 * M * N * K
    # The prediction, from the bytes: B is read once at a copy's rate (4.3
    # TB/s on an H200), which caps the rate at FLOPs / that time.
    floor_ms = K * N * b.element_size() / 4.3e9
    contenders = {
        "cublas": partial(torch.matmul, a, b),
        "split-k": partial(matmul_split_k, a, b, GPU_TILES[bn], splits, first),
        "split-k-2": partial(matmul_split_k, a, b, GPU_TILES[bn2], splits2, second),
        "stream-k": partial(matmul_stream_k, a, b, GPU_TILES[bn],
                            sms * resident["stream-K", bn]),
        "tiled": partial(matmul_tiled, a, b, GPU_TILES[64]),
    }
    # end snippet
    lesson.predict("split-k-tflops-16x4096x16384", flop / floor_ms * 1e-9,
                   "the bandwidth roof: B's 134 MB read once at 4.3 TB/s, an "
                   "H200's copy rate", 0.15, of="split-k-vs-cublas-16x4096x16384",
                   quantity="kernel")
    ms = bench_interleaved(contenders)
    common = dict(unit="TFLOP/s", work=flop, baseline_name="cuBLAS (torch.matmul)")
    lesson.benchmark(
        "split-k-vs-cublas-16x4096x16384",
        f"split-K ({splits} slices, BLOCK_N {bn}, {first}) vs cuBLAS, "
        "16x4096x16384 fp16",
        ms, "split-k", "cublas", threshold=0.9, stretch=1.1, **common,
    )
    lesson.benchmark(
        "split-k-other-combine-vs-cublas",
        f"split-K ({splits2} slices, BLOCK_N {bn2}, {second}) vs cuBLAS",
        ms, "split-k-2", "cublas", note="informational", **common,
    )
    lesson.benchmark(
        "stream-k-vs-cublas", f"stream-K (BLOCK_N {bn}, atomic adds) vs cuBLAS",
        ms, "stream-k", "cublas", note="informational", **common,
    )
    lesson.benchmark(
        "tiled-vs-cublas-16x4096x16384", "tiled, no split (64 programs) vs cuBLAS",
        ms, "tiled", "cublas", note="informational: the starving grid", **common,
    )
    # The benchmarked points, as the sweep's table and figure will show them,
    # and the tiled kernel: one split's grid without the workspace and the
    # reduction kernel that split-K's one slice still pays.
    chosen = {(bn, splits, first): ("split-k", "split-k-vs-cublas-16x4096x16384"),
              (bn2, splits2, second): ("split-k-2", "split-k-other-combine-vs-cublas")}
    return ms, chosen, ("tiled", "tiled-vs-cublas-16x4096x16384")


def sweep_table_and_figure(lesson: Lesson, a, b, sms: int, resident: dict,
                           rounds: dict, benchmarked) -> None:
    """The sweep's table and figure, each point a median of its rounds with a
    95 % interval; at the benchmarked points, and for the tiled kernel beside
    one split, the benchmark's own rounds."""
    M, K = a.shape
    N = b.shape[1]
    flop = 2 * M * N * K
    bench_ms, chosen, (tiled, tiled_said) = benchmarked

    def point(ms, name) -> tuple:
        """(TFLOP/s, low, high, ratio to cuBLAS) from one set of rounds."""
        _, low, high = median_interval([flop / t * 1e-9 for t in ms[name]])
        rate = flop / statistics.median(ms[name]) * 1e-9
        ratio = statistics.median(
            c / k for k, c in zip(ms[name], ms["cublas"], strict=True))
        return rate, low, high, ratio

    rate, low, high, ratio = point(bench_ms, tiled)
    programs = triton.cdiv(N, 64)  # M = 16: one row of tiles
    rows = [[64, 1, "none (tiled)", programs, programs / (sms * resident["tiled", 64]),
             rate, f"[{low:.4g}, {high:.4g}]", ratio, len(bench_ms[tiled]), tiled_said]]
    points = {"tiled": (rate, low, high)}
    for bn in GPU_TILES:
        slots = sms * resident["split-K", bn]
        for combine in COMBINES:
            for splits in SPLITS:
                ms, name, said = rounds[splits], (bn, combine), ""
                if (bn, splits, combine) in chosen:
                    name, said = chosen[bn, splits, combine]
                    ms = bench_ms
                rate, low, high, ratio = point(ms, name)
                points[bn, combine, splits] = (rate, low, high)
                programs = triton.cdiv(N, bn) * split_plan(K, splits, 128)[1]
                rows.append([bn, splits, combine, programs, programs / slots, rate,
                             f"[{low:.4g}, {high:.4g}]", ratio, len(ms[name]), said])
    cublas = flop / statistics.median(bench_ms["cublas"]) * 1e-9
    lesson.table(
        "split-sweep",
        ["BLOCK_N", "splits", "combine", "programs", "waves", "TFLOP/s",
         "95 % interval", "vs cuBLAS", "rounds", "benchmark"],
        rows,
        f"{M}x{N}x{K} fp16: each point the median of its interleaved rounds with "
        "cuBLAS, the benchmark's at the points it times and for the tiled kernel "
        f"(named in the last column); cuBLAS {cublas:.1f} TFLOP/s in the benchmark; "
        "waves = programs / (SMs x programs per SM)",
    )
    plot_sweep(lesson, (M, N, K), points, cublas)


def plot_sweep(lesson: Lesson, shape: tuple, points: dict, cublas: float) -> None:
    M, N, K = shape
    # The H200's datasheet bandwidth over the bytes of A, B and C: no kernel
    # that reads B once can beat this.
    bandwidth = 4.8e12
    floor_s = 2 * (M * K + K * N + M * N) / bandwidth
    roof = 2 * M * N * K / floor_s / 1e12

    def draw(fig):
        ax = fig.subplots()
        for bn in GPU_TILES:
            for combine in COMBINES:
                values = [points[bn, combine, s] for s in SPLITS]
                mid = [v[0] for v in values]
                err = [[m - v[1] for m, v in zip(mid, values, strict=True)],
                       [v[2] - m for m, v in zip(mid, values, strict=True)]]
                ax.errorbar(SPLITS, mid, yerr=err, capsize=2,
                            fmt="o-" if combine == "reduce" else "s--",
                            label=f"BLOCK_N = {bn}, {combine}")
        rate, low, high = points["tiled"]
        ax.errorbar([1], [rate], yerr=[[rate - low], [high - rate]], fmt="k*",
                    markersize=10, capsize=2,
                    label="tiled, BLOCK_N = 64 (no reduction)")
        ax.axhline(cublas, color="gray", linestyle="--", label="cuBLAS (torch.matmul)")
        ax.axhline(roof, color="gray", linestyle=":",
                   label=f"{bandwidth / 1e12:g} TB/s roof (datasheet)")
        ax.set_xscale("log", base=2)
        ax.set_xticks(SPLITS)
        ax.set_xticklabels([str(s) for s in SPLITS])
        ax.set_ylim(bottom=0)
        ax.set_xlabel("splits of K (1 = the tiled kernel's grid)")
        ax.set_ylabel("TFLOP/s (fp16 in, fp32 accumulate)")
        fig.legend(loc="outside lower center", ncols=2)

    lesson.plot("split-sweep", f"Split-K at {M}x{N}x{K}: TFLOP/s against the split "
                "count, medians of interleaved rounds with their confidence intervals "
                "(at the two benchmarked points and for the tiled kernel, the star, "
                "the benchmark's rounds)", draw,
                size=(7.0, 5.8))


def main() -> int:
    lesson = Lesson("split-k")
    device = lesson.device()
    tile = (INTERPRETER_TILES if lesson.interpret else GPU_TILES)[64]
    if lesson.step("occupancy", needs_gpu="it counts the GPU's SMs"):
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        occupancy_table(lesson, sms)
    with lesson.step("determinism"):
        check_determinism(lesson, device, tile)
    if lesson.step("compiled-code", needs_gpu="the interpreter compiles nothing"):
        a, b = make_inputs(*lesson.size(gpu=SHAPE, smoke=(16, 128, 512)), device, 100)
        resident = show_compiled_code(lesson, a, b, sms)
    with lesson.step("correctness"):
        check_correctness(lesson, device)
    if lesson.step("sweep", needs_gpu="timings need a GPU"):
        rounds, best = sweep(lesson, a, b)
    if lesson.step("benchmark", needs_gpu="timings need a GPU"):
        benchmarked = benchmark(lesson, a, b, best, sms, resident)
        sweep_table_and_figure(lesson, a, b, sms, resident, rounds, benchmarked)
    return lesson.finish()


if __name__ == "__main__":
    sys.exit(main())
