"""Reductions and scans, as the course records them: the checks and benchmarks.

The kernels and their launchers are in reductions_scans.py, which runs alone.
This file checks them the way the course checks every lesson (outputs filled
with NaN, ragged rows and rows longer than a block, float64 references with
tolerances from the error analysis), reads what the compiler made of them,
and times them against torch and a copy, through the course's kit
(lessonkit.py), which keeps the record.

Run it:
    TRITON_INTERPRET=1 python lesson.py   # any machine: checks on the CPU
    python lesson.py                      # a CUDA GPU: checks, GB/s, figure
"""

import statistics
import sys
from pathlib import Path

import torch
import triton

# lessonkit.py sits beside this file in a download, one folder up in the repository.
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]
from reductions_scans import (  # noqa: E402
    row_cumsum,
    row_cumsum_kernel,
    row_reduce,
    row_reduce_kernel,
    tile_config,
)

from lessonkit import (  # noqa: E402
    Lesson,
    bench_interleaved,
    gbps,
    median_interval,
    scaled_rtol,
)

# The spacing of float32 numbers at 1.0: the eps of scaled_rtol's length rule.
F32_EPS = 2.0**-23


def make_rows(M: int, N: int, device: str, seed: int) -> torch.Tensor:
    """Random rows, uniform in [-0.5, 1): signed, but drifting upwards.

    Running totals start near zero and then grow like N/4, so the relative
    error of a prefix sum measures the kernel, not cancellation.
    """
    g = torch.Generator(device=device).manual_seed(seed)
    return torch.rand(M, N, generator=g, device=device) * 1.5 - 0.5


# snippet: checks
def reduction_results(x):
    """The row sum into poison, with the float64 sum and its bound; and
    whether the max of rows of negative numbers is exact."""
    M, N = x.shape
    # The reference in float64, on the CPU: no library kernel on the GPU.
    want = x.cpu().double().sum(dim=1)
    out = torch.full((M,), float("nan"), device=x.device)  # poison
    row_reduce(x, "sum", out=out)
    # N rounded float32 additions: rtol grows like sqrt(N). atol = rtol:
    # the values are O(1), so a sum near zero is judged on that scale.
    rtol, why = scaled_rtol(1e-5, F32_EPS, N)
    # Rows of negative numbers: a 0 in the padding would be their max.
    neg = -(x.abs() + 0.25)
    top = torch.full((M,), float("nan"), device=x.device)
    row_reduce(neg, "max", out=top)
    # A maximum picks one of its inputs: no rounding, bit-exact.
    return (out, want, rtol, why), torch.equal(top.cpu(), neg.cpu().amax(dim=1))


def scan_results(x, config=None):
    """The row cumsum into poison, with the float64 cumsum and its bound; and
    whether tl.cumsum gives the same bits."""
    N = x.shape[1]
    want = x.cpu().double().cumsum(dim=1)
    y = torch.full_like(x, float("nan"))  # poison
    row_cumsum(x, out=y, config=config)
    # The last prefix sum adds all N terms: the same length rule.
    rtol, why = scaled_rtol(1e-5, F32_EPS, N)
    # tl.cumsum is associative_scan with an add: the same bits.
    y2 = row_cumsum(x, config=config, use_cumsum=True)
    return (y, want, rtol, why), torch.equal(y, y2)


# end snippet


def check_reductions(lesson: Lesson, device: str) -> None:
    shapes = [(37, 1000), (5, 3000), (64, 256), (3, 1)]  # ragged, long, exact
    if device == "cuda":  # not under compute-sanitizer (lesson.size's smoke value)
        shapes += lesson.size(gpu=[(4099, 4096), (300, 70_000)], smoke=[])
    for seed, (M, N) in enumerate(shapes):
        (out, want, rtol, why), exact_max = reduction_results(
            make_rows(M, N, device, seed))
        lesson.close(f"sum-{M}x{N}", out, want, rtol, rtol, why)
        lesson.check(f"max-negative-rows-{M}x{N}", exact_max, "bit-exact vs torch.amax")


def check_scans(lesson: Lesson, device: str) -> None:
    # BLOCK_N is at most 4096 (tile_config): N = 5000 and 70 000 take 2
    # and 18 steps of the loop, so the carry has work to do; the small
    # tiles of the last shape make 1000 columns take 8 steps of 128.
    # Small under the interpreter: it scans element by element in Python.
    shapes = [(9, 1000, None), (2, 5000, None), (16, 256, None),
              (13, 1000, (2, 128, 4))]
    if device == "cuda":
        shapes += lesson.size(gpu=[(4099, 4096, None), (300, 70_000, None)], smoke=[])
    for seed, (M, N, config) in enumerate(shapes):
        x = make_rows(M, N, device, 100 + seed)
        (y, want, rtol, why), same_bits = scan_results(x, config)
        tag = f"{M}x{N}" + ("" if config is None else f"-block{config[1]}")
        lesson.close(f"cumsum-{tag}", y, want, rtol, rtol, why)
        lesson.check(f"tl-cumsum-same-bits-{tag}", same_bits,
                     "tl.cumsum == associative_scan(x, 1, add), bit for bit")


def show_compiled_code(lesson: Lesson, device: str) -> None:
    N = 4096  # the benchmark's rows; 8 of them are enough to compile
    x = make_rows(8, N, device, 1)
    ROWS, BLOCK_N, warps = tile_config(N)
    compiled = {
        f"row {op}": row_reduce_kernel[(1,)](
            x, torch.empty(8, device=device), 8, N, N, IS_MAX=op == "max",
            ROWS=ROWS, BLOCK_N=BLOCK_N, num_warps=warps)
        for op in ("sum", "max")
    }
    compiled["row cumsum"] = row_cumsum_kernel[(1,)](
        x, torch.empty_like(x), 8, N, N, N, ROWS=ROWS, BLOCK_N=BLOCK_N,
        USE_CUMSUM=False, num_warps=warps)
    # Counts of instructions in the code, not executions: 16-byte global
    # loads and stores, warp shuffles and block barriers.
    lesson.compiled_table(
        "ptx", compiled,
        {"16-byte ld.global": r"ld\.global(?:\.(?!v\d)[\w:]+)*\.v4\.b32",
         "16-byte st.global": r"st\.global(?:\.(?!v\d)[\w:]+)*\.v4\.b32",
         "shfl.sync": r"shfl\.sync", "bar.sync": r"bar\.sync"},
        f"What the compiler made of each kernel for rows of {N} float32 values: "
        f"tile {ROWS} x {BLOCK_N}, {warps} warps; static counts in the PTX",
    )


def benchmark(lesson: Lesson, device: str) -> tuple:
    """The gated comparisons; their rounds and shape, for the width sweep."""
    M, N = lesson.size(gpu=(32768, 4096), smoke=(8, 256))
    # snippet: benchmark
    # 32768 rows of 4096 float32 values: 512 MiB, ten times a 50 MB L2
    # cache, so every call streams from DRAM. Bytes that must move: the
    # cumsum reads x once and writes y once (8 bytes per element); the sum
    # reads x once and writes one float per row. A device-to-device copy of
    # x moves the cumsum's bytes.
    x = make_rows(M, N, device, 2)
    y, dst = torch.empty_like(x), torch.empty_like(x)
    contenders = {
        "cumsum": lambda: row_cumsum(x, out=y),
        "torch_cumsum": lambda: torch.cumsum(x, dim=1),
        "sum": lambda: row_reduce(x, "sum"),
        "torch_sum": lambda: torch.sum(x, dim=1),
        "copy": lambda: dst.copy_(x),
    }
    bytes_scan = 2 * M * N * 4
    bytes_sum = M * N * 4 + M * 4
    # end snippet
    # snippet: measure
    # Predictions: both kernels are memory-bound, so each moves its bytes at
    # the rate its yardstick moves the same bytes: a copy for the cumsum,
    # torch.sum's one read of the matrix for the sum.
    shape = f"{M}x{N}-fp32"
    lesson.predict(f"cumsum-vs-copy-{shape}", 1.0,
                   "memory-bound, moving a copy's bytes at a copy's rate", 0.10)
    lesson.predict(f"sum-vs-torch-{shape}", 1.0,
                   "memory-bound like torch.sum: one read of the matrix at the "
                   "same rate", 0.10)
    # Per call: in a CUDA graph, a 512 MiB copy runs on the copy engine.
    ms = bench_interleaved(contenders, method="events")
    lesson.benchmark(f"cumsum-vs-torch-{shape}", f"row cumsum vs torch, {M} x {N}",
                     ms, "cumsum", "torch_cumsum", unit="GB/s", work=bytes_scan,
                     baseline_name="torch.cumsum(x, dim=1)", threshold=1.0,
                     stretch=1.5)
    lesson.benchmark(f"cumsum-vs-copy-{shape}", f"row cumsum vs a copy, {M} x {N}",
                     ms, "cumsum", "copy", unit="GB/s", work=bytes_scan,
                     baseline_name="device-to-device copy of x",
                     note="the ceiling: a copy moves the same bytes and does "
                     "no arithmetic")
    lesson.benchmark(f"sum-vs-torch-{shape}", f"row sum vs torch, {M} x {N}",
                     ms, "sum", "torch_sum", unit="GB/s", work=bytes_sum,
                     baseline_name="torch.sum(x, dim=1)", threshold=0.8,
                     stretch=1.0)
    # end snippet
    return ms, (M, N)


def race_tiles(lesson: Lesson, device: str) -> None:
    # snippet: race
    # The tile is the one free choice. Race a few at the benchmark's shape:
    # rows per program x columns per step, and warps, each against the
    # rule's pick in the same rounds (the pick's GB/s is the benchmark's).
    M, N = lesson.size(gpu=(32768, 4096), smoke=(1, 4096))
    x = make_rows(M, N, device, 3)
    y = torch.empty_like(x)
    pick = tile_config(N)
    configs = [(1, 1024, 4), (1, 2048, 8), (1, 4096, 8), (1, 4096, 16),
               (4, 1024, 8), pick]
    configs = list(dict.fromkeys(configs))  # the rule's pick is one of them
    ms = bench_interleaved(
        {c: (lambda c=c: row_cumsum(x, out=y, config=c)) for c in configs},
        rounds=5, rep_ms=10, warm_s=0.2)
    # end snippet
    rows = []
    for c in configs:
        # Its rate over the pick's, round by round: the pick's time over its.
        mid, low, high = median_interval(
            [p / t for t, p in zip(ms[c], ms[pick], strict=True)])
        rows.append([*c, triton.cdiv(N, c[1]), mid, f"[{low:.4g}, {high:.4g}]",
                     "yes" if c == pick else ""])
    lesson.table(
        "scan-tiles",
        ["rows/program", "BLOCK_N", "warps", "steps per row", "vs the rule's pick",
         "range of the rounds", "the rule's pick"],
        rows,
        f"Row cumsum at {M} x {N} float32 with different tiles: each tile's rate "
        "over the rule's pick's in the same round, the median of 5 interleaved "
        "rounds and their range (the pick's GB/s is the benchmark's)",
    )


def measure_width(x: torch.Tensor) -> dict:
    """Our cumsum and torch's on one 2-D x, taking turns for five rounds,
    each call timed alone as the benchmark times them."""
    y = torch.empty_like(x)
    return bench_interleaved({"cumsum": lambda: row_cumsum(x, out=y),
                              "torch_cumsum": lambda: torch.cumsum(x, dim=1)},
                             rounds=5, rep_ms=10, warm_s=0.1, method="events")


def rate(ms, name: str, nbytes: int) -> tuple[float, float, float]:
    """GB/s as a benchmark reports it: the rate at the median time, and the
    95 % interval of the rates of its rounds."""
    _, low, high = median_interval([gbps(nbytes, t) for t in ms[name]])
    return gbps(nbytes, statistics.median(ms[name])), low, high


def sweep_and_plot(lesson: Lesson, device: str, measured: tuple) -> None:
    bench_rounds, bench_shape = measured
    # snippet: sweep
    # Same 2^27 elements (512 MiB) at every width: from many short rows,
    # where several rows share a program, to a few long ones, where each
    # program walks its row in 16 KB steps. At the benchmark's shape, the
    # benchmark's own rounds; the other widths are timed the same way.
    widths = lesson.size(gpu=[256, 1024, 4096, 16384, 65536], smoke=[256, 2048])
    x0 = make_rows(1, lesson.size(gpu=1 << 27, smoke=1 << 11), device, 4)
    timed = {}
    for N in widths:
        if (x0.numel() // N, N) == bench_shape:
            timed[N] = bench_rounds
        else:
            timed[N] = measure_width(x0.view(-1, N))
    # end snippet
    nbytes = 2 * x0.numel() * 4  # read x, write y: a copy's bytes
    copy_gbps = gbps(nbytes, statistics.median(bench_rounds["copy"]))
    points = {N: (rate(ms, "cumsum", nbytes), rate(ms, "torch_cumsum", nbytes))
              for N, ms in timed.items()}
    name = "cumsum-vs-torch-{}x{}-fp32".format(*bench_shape)
    lesson.table(
        "widths",
        ["N", "rows", "Triton GB/s", "Triton 95 % interval", "torch GB/s",
         "torch 95 % interval", "rounds", "benchmark"],
        [[N, x0.numel() // N, ours[0], f"[{ours[1]:.4g}, {ours[2]:.4g}]", theirs[0],
          f"[{theirs[1]:.4g}, {theirs[2]:.4g}]", len(timed[N]["cumsum"]),
          name if timed[N] is bench_rounds else ""]
         for N, (ours, theirs) in points.items()],
        "Row cumsum over 2²⁷ float32 values at five row widths, each call timed "
        "alone (L2 flushed): medians; at the benchmark's shape its own rounds, "
        f"elsewhere 5 rounds of their own (copy of the same bytes in the benchmark: "
        f"{copy_gbps:.0f} GB/s)",
    )

    def draw(fig):
        ax = fig.subplots()
        ns = list(points)
        for i, (style, label) in enumerate((("o-", "Triton row cumsum"),
                                            ("s-", "torch.cumsum(x, dim=1)"))):
            mid = [points[n][i][0] for n in ns]
            err = [[points[n][i][0] - points[n][i][1] for n in ns],
                   [points[n][i][2] - points[n][i][0] for n in ns]]
            ax.errorbar(ns, mid, yerr=err, fmt=style, capsize=2, label=label)
        ax.axhline(copy_gbps, color="gray", ls="--", lw=1,
                   label="copy of the same bytes")
        ax.set_xscale("log", base=2)
        ax.set_xticks(ns, [str(n) for n in ns])
        ax.set_xlabel(f"row width N (float32; rows x N = {x0.numel():,})")
        ax.set_ylabel("GB/s (read x + write y)")
        ax.set_ylim(bottom=0)
        fig.legend(loc="outside lower center", ncols=2)

    lesson.plot("cumsum-by-width",
                "Row cumsum bandwidth by row width, Triton vs torch, same bytes: "
                "medians with their confidence intervals, the benchmark's rounds at "
                "its shape", draw, size=(7.0, 5.0))


def main() -> int:
    lesson = Lesson("reductions-scans")
    device = lesson.device()
    if lesson.step("compiled-code", needs_gpu="the interpreter compiles no PTX",
                   smoke=False):
        show_compiled_code(lesson, device)
    with lesson.step("correctness"):
        check_reductions(lesson, device)
        check_scans(lesson, device)
    if lesson.step("benchmark", needs_gpu="timings need a GPU"):
        measured = benchmark(lesson, device)
    if lesson.step("race", needs_gpu="the tiles race on GPU time"):
        race_tiles(lesson, device)
    if lesson.step("sweep", needs_gpu="timings need a GPU"):
        sweep_and_plot(lesson, device, measured)
    return lesson.finish()


if __name__ == "__main__":
    sys.exit(main())
