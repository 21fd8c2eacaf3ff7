"""Autotuning the FP16 matmul, as the course records it: the checks, the winners.

The kernel, its configs and the autotuned launcher are in autotune.py, which
runs alone. This file checks every config before anything is timed (outputs
filled with NaN, shapes that are multiples of none of the tiles, a float64
reference), tunes at five shapes (square, small, tall-K, short-K and skinny),
records which config won at each and how it compares with cuBLAS, through the
course's kit (lessonkit.py), which keeps the record.

Run it:
    TRITON_INTERPRET=1 python lesson.py   # any machine: every config checked
    python lesson.py                      # a CUDA GPU: tuning, winners, TFLOP/s
"""

import math
import statistics
import sys
import time
from functools import partial
from pathlib import Path

import torch
import triton

# lessonkit.py sits beside this file in a download, one folder up in the repository.
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]
from autotune import CONFIGS, describe, matmul, matmul_kernel_tuned  # noqa: E402
from lessonkit import Lesson, bench_interleaved, scaled_rtol  # noqa: E402


def tolerance(K, want):
    """FP16 output rounding (2^-11 per element) plus FP32 accumulation.

    The accumulation bound is the kit's rule, times max|want|.
    """
    acc_rtol, acc_why = scaled_rtol(0.0, 2.0 ** -23, K)
    return (2.0 ** -11, acc_rtol * float(want.abs().max()),
            f"fp16 output rounding 2⁻¹¹; fp32 accumulation {acc_why}")


def random_pair(M, N, K, device, seed):
    torch.manual_seed(seed)
    return (torch.randn((M, K), device=device).half(),
            torch.randn((K, N), device=device).half())


def reference(lesson: Lesson, a, b):
    """The exact products of the FP16 inputs, summed in float64. Under
    compute-sanitizer on the CPU, so the tool instruments no library kernel."""
    if lesson.sanitize:
        a, b = a.cpu(), b.cpu()
    return a.double() @ b.double()


def check(lesson, name, a, b, cfg=None, **launch):
    M, K = a.shape
    N = b.shape[1]
    c = torch.full((M, N), float("nan"), device=a.device, dtype=torch.float16)
    matmul(a, b, cfg, out=c, **launch)  # c starts as NaN: unwritten tiles fail
    want = reference(lesson, a, b)
    rtol, atol, why = tolerance(K, want)
    return lesson.close(name, c, want, rtol, atol, why)


# snippet: every-config
# Before any timing: every config in the list must compute the right
# answer, on a shape that is a multiple of none of the tiles. A config
# that is fast but wrong would otherwise win silently. Under the
# interpreter this is all the lesson can do (it cannot time anything,
# and it ignores num_warps and num_stages, so there it checks the tiling
# of each config, with its real block sizes). On the GPU, M, N and K are
# multiples of 16, like the tuned shapes, so this runs the very binaries
# the autotuner times.
EVERY_CONFIG_SHAPES = {
    "interpreter": [(200, 136, 72), (330, 520, 130)],
    "gpu": [(784, 656, 400)],
}
# end snippet


def check_every_config(lesson: Lesson, device: str) -> None:
    shapes = EVERY_CONFIG_SHAPES["interpreter" if lesson.interpret else "gpu"]
    # Under compute-sanitizer, a smaller shape that is still ragged against
    # every tile.
    shapes = lesson.size(gpu=shapes, smoke=[(208, 144, 80)])
    for seed, (M, N, K) in enumerate(shapes):
        a, b = random_pair(M, N, K, device, seed)
        for cfg in CONFIGS:
            check(lesson, f"config-{describe(cfg)}-{M}x{N}x{K}", a, b, cfg)


# The five shapes, and the one the benchmark gates on.
SHAPES = [
    (512, 512, 512),      # small: few tiles, far from filling 132 SMs
    (1024, 1024, 4096),   # tall K: few output tiles, each a long K loop
    (4096, 4096, 4096),   # large square
    (8192, 8192, 1024),   # short K: many tiles, short loops, epilogue matters more
    (16384, 256, 4096),   # skinny: N is one or two tiles wide
]
TARGET_SHAPE = (4096, 4096, 4096)


def tune_and_benchmark(lesson: Lesson, device: str) -> None:
    rows, spread = [], {}
    shapes = lesson.size(gpu=SHAPES, smoke=[(128, 256, 64), (40, 72, 96)])
    target_shape = lesson.size(gpu=TARGET_SHAPE, smoke=(128, 256, 64))
    # snippet: tune
    for i, (M, N, K) in enumerate(shapes):
        a, b = random_pair(M, N, K, device, seed=10 + i)
        torch.cuda.synchronize()
        start = time.perf_counter()
        matmul(a, b)  # first call at this key: times every config, runs the winner
        torch.cuda.synchronize()
        tuning_s = time.perf_counter() - start
        best = matmul_kernel_tuned.best_config  # the winner cached for this key
        # What the autotuner measured for every config: do_bench medians, ms.
        timings = getattr(matmul_kernel_tuned, "configs_timings", None) or {}
        spread[M, N, K] = {describe(c): t[0] if isinstance(t, (list, tuple)) else t
                           for c, t in timings.items()}
        # end snippet
        check(lesson, f"tuned-{M}x{N}x{K}", a, b)  # the tuned kernel's answer
        # Later calls: a cache lookup, then the winner. It and cuBLAS take
        # turns: fifteen rounds at the target shape, three (a table) elsewhere.
        target = (M, N, K) == target_shape
        if target:  # predicted before it is timed: the previous lesson's model
            sms = torch.cuda.get_device_properties(0).multi_processor_count
            steps, waves = K // 64 + 3, M // 128 * (N // 256) / sms
            kept = (steps - 3) / steps * waves / math.ceil(waves)
            lesson.predict(
                "autotuned-vs-cublas-4096", kept,
                "at least the previous lesson's 128x256x64 tile, one of the configs: "
                f"cuBLAS's rate less 3 of {steps} K steps per tile and the idle part "
                f"of {waves:.2f} waves of {sms} SMs", 0.10)
        ms = bench_interleaved({"tuned": partial(matmul, a, b),
                                "cublas": partial(torch.matmul, a, b)},
                               rounds=15 if target else 3,
                               warm_s=0.5 if target else 0.1)
        flop = 2 * M * N * K
        if target:
            lesson.benchmark("autotuned-vs-cublas-4096",
                             "autotuned matmul vs cuBLAS, 4096³ fp16", ms, "tuned",
                             "cublas", unit="TFLOP/s", work=flop,
                             baseline_name="cuBLAS (torch.matmul)", threshold=0.70,
                             stretch=0.85, note=f"winner {describe(best)}")
        kw = best.kwargs
        programs = triton.cdiv(M, kw["BLOCK_M"]) * triton.cdiv(N, kw["BLOCK_N"])
        tf, tf_cublas = (flop / ms.median(name) * 1e-9 for name in ("tuned", "cublas"))
        # The ratio as a benchmark takes it: the median of the rounds' ratios.
        ratio = statistics.median(
            c / t for t, c in zip(ms["tuned"], ms["cublas"], strict=True))
        rows.append([f"{M}x{N}x{K}", f"{kw['BLOCK_M']}x{kw['BLOCK_N']}x{kw['BLOCK_K']}",
                     kw["GROUP_SIZE_M"], best.num_warps, best.num_stages, programs, tf,
                     tf_cublas, ratio, tuning_s])
    lesson.table("winners", ["shape MxNxK", "BLOCK_M,N,K", "GROUP_M", "warps",
                             "stages", "programs", "TFLOP/s", "cuBLAS TFLOP/s",
                             "ratio", "tuning s"], rows,
                 "The config the autotuner picked at each shape (best_config), its "
                 "grid size, its speed against cuBLAS (torch.matmul) in the same run "
                 "(medians of 15 interleaved rounds at 4096³, 3 elsewhere), and the "
                 "wall time of the first call, which tuned")
    if not all(spread.values()):
        print("  (this Triton version does not expose the autotuner's per-config "
              "timings; no all-configs table)")
        return
    names = [describe(c) for c in CONFIGS]
    tflops = {shape: {name: 2 * math.prod(shape) / ms * 1e-9
                      for name, ms in spread[shape].items()} for shape in shapes}
    lesson.table("all-configs", ["config", *[f"{M}x{N}x{K}" for M, N, K in shapes]],
                 [[name, *[tflops[shape].get(name, float("nan")) for shape in shapes]]
                  for name in names],
                 "TFLOP/s of every config at every shape, from the autotuner's own "
                 "timings (do_bench medians)")
    plot_heatmap(lesson, names, tflops)


def plot_heatmap(lesson: Lesson, names: list, tflops: dict) -> None:
    shapes = list(tflops)
    # Each column divided by its best config: 1.00 is the winner at that shape.
    ratio = []
    for name in names:
        row = []
        for shape in shapes:
            value, best = tflops[shape].get(name), max(tflops[shape].values())
            ok = value is not None and math.isfinite(value) and best > 0
            row.append(value / best if ok else float("nan"))
        ratio.append(row)

    # The colour scale starts at the lowest tenth below the worst cell.
    finite = [v for row in ratio for v in row if math.isfinite(v)]
    low = min(0.9, math.floor(10 * min(finite, default=0.0)) / 10)

    def draw(fig):
        ax = fig.subplots()
        # Every cell carries its number, so the colour needs no colour bar.
        ax.imshow(ratio, cmap="viridis", vmin=low, vmax=1.0, aspect="auto")
        ax.set_xticks(range(len(shapes)),
                      [f"{m}\nx{n}\nK={k}" for m, n, k in shapes])
        ax.set_yticks(range(len(names)), names)
        ax.set_xlabel("shape: M x N, and K")
        ax.grid(False)
        for i, row in enumerate(ratio):
            for j, value in enumerate(row):
                text = "n/a" if math.isnan(value) else f"{value:.2f}"
                ax.text(j, i, text, ha="center", va="center",
                        color="black" if value > (low + 1.0) / 2 else "white")

    lesson.plot("config-heatmap",
                "Every config at every shape, as a fraction of the best config at that "
                "shape (1.00: the autotuner's pick), from the autotuner's own timings",
                draw, size=(7.0, 6.4))


def main() -> int:
    lesson = Lesson("autotune")
    device = lesson.device()
    with lesson.step("every-config"):
        check_every_config(lesson, device)
    if lesson.step("tune", needs_gpu="the autotuner needs a GPU clock"):
        tune_and_benchmark(lesson, device)  # winners, every config's speed, heatmap
    return lesson.finish()


if __name__ == "__main__":
    sys.exit(main())
