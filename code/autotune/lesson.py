"""Autotuning the FP16 matmul: let the shape pick the tile.

The fp16-matmul lesson fixed one configuration: 128x256x64 tiles, 8 warps,
3 pipeline stages. That is a good choice for a large square matmul on an
H200, but it is one point in a space, and the best point moves with the
shape. `@triton.autotune` takes a list of `triton.Config`s and a `key`: the
first time the kernel is called with a new value of the key arguments, it
compiles and times every config on that call's real arguments, keeps the
fastest, and reuses it for every later call with the same key.

This lesson tunes the same kernel over a handful of configs at five shapes
(square, small, tall-K, short-K and skinny) and records which config won at
each and how it compares with cuBLAS.

Run it:
    TRITON_INTERPRET=1 python autotune.py   # any machine: every config checked
    python autotune.py                      # a CUDA GPU: tuning, winners, TFLOP/s
"""

import math
import sys
import time
from functools import partial
from pathlib import Path

import torch
import triton
import triton.language as tl

# lessonkit.py sits beside this file in a download, one folder up in the repository.
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]
from lessonkit import Lesson, bench_interleaved, scaled_rtol  # noqa: E402


# The kernel is the fp16-matmul lesson's recommended kernel, unchanged: a
# 1-D grid in grouped order, offsets wrapped with % and marked contiguous,
# masks on the K tail only, and the accumulator passed into tl.dot.
# snippet: kernel
@triton.jit
def matmul_kernel(
    a_ptr, b_ptr, c_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    first_pid_m = (pid // num_pid_in_group) * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_am = tl.max_contiguous(tl.multiple_of(offs_am, BLOCK_M), BLOCK_M)
    offs_bn = tl.max_contiguous(tl.multiple_of(offs_bn, BLOCK_N), BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(tl.cdiv(K, BLOCK_K)):
        k_remaining = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_remaining, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_remaining, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn
    mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, acc.to(tl.float16), mask=mask)
# end snippet


# snippet: configs
def config(bm, bn, bk, warps, stages, group=8):
    return triton.Config(
        {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_SIZE_M": group},
        num_warps=warps, num_stages=stages)


CONFIGS = [
    # the fp16-matmul lesson's choice: big tiles, 2 warpgroups
    config(128, 256, 64, warps=8, stages=3),
    # the same tile area, transposed
    config(256, 128, 64, warps=8, stages=3),
    # half the FLOPs per tile, one warpgroup, a deeper pipeline
    config(128, 128, 64, warps=4, stages=4),
    # short and wide, half-depth K steps
    config(64, 256, 32, warps=4, stages=4),
    # more, smaller tiles: more programs for small grids
    config(128, 64, 64, warps=4, stages=4),
    config(64, 128, 64, warps=4, stages=4),
    # many tiny tiles: fills the SMs on small problems
    config(64, 64, 32, warps=4, stages=5),
]
# end snippet

# snippet: autotune
# `key` names the arguments whose values select a cached winner: a new
# (M, N, K) triggers a new tuning run; a repeated one is a dictionary lookup.
# Every config of the list is compiled and timed with do_bench on the real
# arguments, so the first call at each new shape is slow (seconds), and every
# later call is as fast as the winner. The kernel writes only C, so running
# it several times during tuning is harmless.
matmul_kernel_tuned = triton.autotune(configs=CONFIGS, key=["M", "N", "K"])(
    matmul_kernel)


def matmul(a, b, cfg=None, out=None, tuned=matmul_kernel_tuned):
    """C = A @ B in FP16. cfg=None: the autotuned kernel; else that one config."""
    assert a.dtype == b.dtype == torch.float16 and a.shape[1] == b.shape[0]
    M, K = a.shape
    _, N = b.shape
    if out is None:
        out = torch.empty((M, N), device=a.device, dtype=torch.float16)
    args = (a, b, out, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
            out.stride(0), out.stride(1))
    if cfg is None:
        # The grid depends on the tile size, which is not known until the
        # autotuner has picked a config: pass a function of the meta-parameters.
        def grid(meta):
            return (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)
        tuned[grid](*args)
    else:
        kw = cfg.kwargs
        grid = (triton.cdiv(M, kw["BLOCK_M"]) * triton.cdiv(N, kw["BLOCK_N"]),)
        # all_kwargs(): the block sizes plus num_warps/num_stages, exactly what
        # the autotuner passes, so this launch reuses the binary it times.
        matmul_kernel[grid](*args, **cfg.all_kwargs())
    return out
# end snippet


def describe(cfg):
    kw = cfg.kwargs
    return (f"{kw['BLOCK_M']}x{kw['BLOCK_N']}x{kw['BLOCK_K']}-g{kw['GROUP_SIZE_M']}"
            f"-w{cfg.num_warps}-s{cfg.num_stages}")


def tolerance(K, want):
    """FP16 output rounding (2^-11 per element) plus FP32 accumulation.

    The accumulation bound is the kit's rule, times max|want|.
    """
    acc_rtol, acc_why = scaled_rtol(0.0, 2.0 ** -23, K)
    return (2.0 ** -11, acc_rtol * float(want.abs().max()),
            f"fp16 output rounding 2^-11; fp32 accumulation {acc_why}")


def random_pair(M, N, K, device, seed):
    torch.manual_seed(seed)
    return (torch.randn((M, K), device=device).half(),
            torch.randn((K, N), device=device).half())


def check(lesson, name, a, b, cfg=None, **launch):
    M, K = a.shape
    N = b.shape[1]
    c = torch.full((M, N), float("nan"), device=a.device, dtype=torch.float16)
    matmul(a, b, cfg, out=c, **launch)  # c starts as NaN: unwritten tiles fail
    want = a.double() @ b.double()
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
                             "autotuned matmul vs cuBLAS, 4096^3 fp16", ms, "tuned",
                             "cublas", unit="TFLOP/s", work=flop,
                             baseline_name="cuBLAS (torch.matmul)", threshold=0.70,
                             stretch=0.85, note=f"winner {describe(best)}")
        kw = best.kwargs
        programs = triton.cdiv(M, kw["BLOCK_M"]) * triton.cdiv(N, kw["BLOCK_N"])
        tf, tf_cublas = (flop / ms.median(name) * 1e-9 for name in ("tuned", "cublas"))
        rows.append([f"{M}x{N}x{K}", f"{kw['BLOCK_M']}x{kw['BLOCK_N']}x{kw['BLOCK_K']}",
                     kw["GROUP_SIZE_M"], best.num_warps, best.num_stages, programs, tf,
                     tf_cublas, tf / tf_cublas, tuning_s])
    lesson.table("winners", ["shape MxNxK", "BLOCK_M,N,K", "GROUP_M", "warps",
                             "stages", "programs", "TFLOP/s", "cuBLAS TFLOP/s",
                             "ratio", "tuning s"], rows,
                 "The config the autotuner picked at each shape (best_config), its "
                 "grid size, its speed against cuBLAS (torch.matmul) in the same run "
                 "(medians of 15 interleaved rounds at 4096^3, 3 elsewhere), and the "
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


# == Try this ==================================================================

# snippet: solution-prune-shared-memory
# Exercise: prune before timing. The autotuner calls early_config_prune with
# the config list and the call's arguments, and times only what it returns.
# This one keeps the configs whose pipeline buffers fit a shared-memory
# budget: num_stages copies of an A tile and a B tile, 2 bytes per value.
def pipeline_bytes(cfg) -> int:
    kw = cfg.kwargs
    return cfg.num_stages * (kw["BLOCK_M"] + kw["BLOCK_N"]) * kw["BLOCK_K"] * 2


def fits_shared_memory(configs, named_args, budget=99 * 1024, **kwargs):
    kept = [cfg for cfg in configs if pipeline_bytes(cfg) <= budget]
    return kept or [min(configs, key=pipeline_bytes)]  # never prune to nothing


# 99 KiB is what a program may use on an L4 or an RTX 4090.
matmul_kernel_pruned = triton.autotune(
    configs=CONFIGS, key=["M", "N", "K"],
    prune_configs_by={"early_config_prune": fits_shared_memory})(matmul_kernel)
# end snippet

# snippet: solution-small-tiles
# Exercise: a config for small problems. At 512^3 even 64 x 64 tiles make
# only 64 programs for 132 SMs; 32 x 64 tiles make 128. Like every config,
# it must compute the right answer before it may be timed.
SMALL = config(32, 64, 64, warps=4, stages=4)
# end snippet


def try_this(lesson: Lesson, device: str) -> None:
    # Pipeline bytes: 144, 144, 128, 80, 96, 96 and 40 KiB for the seven configs.
    expected = {"64x256x32-g8-w4-s4", "128x64x64-g8-w4-s4", "64x128x64-g8-w4-s4",
                "64x64x32-g8-w4-s5"}
    kept = {describe(c) for c in fits_shared_memory(CONFIGS, {})}
    ok, message = kept == expected, f"kept {sorted(kept)}"
    if not lesson.interpret:
        # On a GPU the autotuner itself must time exactly those.
        a, b = random_pair(784, 656, 400, device, seed=20)
        ok &= check(lesson, "exercise-prune-shared-memory-result", a, b,
                    tuned=matmul_kernel_pruned)
        timed = {describe(c) for c in matmul_kernel_pruned.configs_timings}
        ok &= timed == expected
        message += f"; the autotuner timed {len(timed)} configs: {sorted(timed)}"
    else:
        message += "; the interpreter cannot run the autotuner, so only the function"
    lesson.check("exercise-prune-shared-memory", ok, message)

    M, N, K = (200, 136, 72) if lesson.interpret else (784, 656, 400)
    a, b = random_pair(M, N, K, device, seed=21)
    check(lesson, "exercise-small-tiles", a, b, SMALL)


def main() -> int:
    lesson = Lesson("autotune")
    device = lesson.device()
    with lesson.step("every-config"):
        check_every_config(lesson, device)
    if lesson.step("tune", needs_gpu="the autotuner needs a GPU clock"):
        tune_and_benchmark(lesson, device)  # winners, every config's speed, heatmap
    with lesson.step("exercises"):
        try_this(lesson, device)
    return lesson.finish()


if __name__ == "__main__":
    sys.exit(main())
