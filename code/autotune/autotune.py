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
    TRITON_INTERPRET=1 python code/autotune/autotune.py   # CPU: every config checked, nothing timed
    python code/autotune/autotune.py                      # GPU: tuning, winners, TFLOP/s
"""

import sys
import time
from functools import partial
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # code/, where lessonkit.py lives
from lessonkit import Lesson, bench_interleaved, scaled_rtol, tflops  # noqa: E402


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
    tl.store(c_ptrs, acc.to(tl.float16), mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))
# end snippet


# snippet: configs
def config(bm, bn, bk, warps, stages, group=8):
    return triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_SIZE_M": group},
                         num_warps=warps, num_stages=stages)


CONFIGS = [
    config(128, 256, 64, warps=8, stages=3),  # the fp16-matmul lesson's choice: big tiles, 2 warpgroups
    config(256, 128, 64, warps=8, stages=3),  # the same tile area, transposed
    config(128, 128, 64, warps=4, stages=4),  # a quarter fewer FLOPs per tile, one warpgroup, deeper pipeline
    config(64, 256, 32, warps=4, stages=4),   # short and wide, half-depth K steps
    config(128, 64, 64, warps=4, stages=4),   # more, smaller tiles: more programs for small grids
    config(64, 128, 64, warps=4, stages=4),
    config(64, 64, 32, warps=4, stages=5),    # many tiny tiles: fills the SMs on small problems
]
# end snippet

# snippet: autotune
# `key` names the arguments whose values select a cached winner: a new
# (M, N, K) triggers a new tuning run; a repeated one is a dictionary lookup.
# Every config of the list is compiled and timed with do_bench on the real
# arguments, so the first call at each new shape is slow (seconds), and every
# later call is as fast as the winner. The kernel writes only C, so running
# it several times during tuning is harmless.
matmul_kernel_tuned = triton.autotune(configs=CONFIGS, key=["M", "N", "K"])(matmul_kernel)


def matmul(a, b, cfg=None, out=None):
    """C = A @ B in FP16. cfg=None: the autotuned kernel; else that one config."""
    assert a.dtype == b.dtype == torch.float16 and a.shape[1] == b.shape[0]
    M, K = a.shape
    _, N = b.shape
    c = torch.empty((M, N), device=a.device, dtype=torch.float16) if out is None else out
    args = (a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
    if cfg is None:
        # The grid depends on the tile size, which is not known until the
        # autotuner has picked a config: pass a function of the meta-parameters.
        def grid(meta):
            return (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)
        matmul_kernel_tuned[grid](*args)
    else:
        grid = (triton.cdiv(M, cfg.kwargs["BLOCK_M"]) * triton.cdiv(N, cfg.kwargs["BLOCK_N"]),)
        # all_kwargs(): the block sizes plus num_warps/num_stages, exactly what
        # the autotuner passes, so this launch reuses the binary it times.
        matmul_kernel[grid](*args, **cfg.all_kwargs())
    return c
# end snippet


def describe(cfg):
    kw = cfg.kwargs
    return f"{kw['BLOCK_M']}x{kw['BLOCK_N']}x{kw['BLOCK_K']}-g{kw['GROUP_SIZE_M']}-w{cfg.num_warps}-s{cfg.num_stages}"


def tolerance(K, want):
    """FP16 output rounding (2^-11 per element) plus FP32 accumulation (kit rule, x max|want|)."""
    acc_rtol, acc_why = scaled_rtol(0.0, 2.0 ** -23, K)
    return 2.0 ** -11, acc_rtol * float(want.abs().max()), f"fp16 output rounding 2^-11; fp32 accumulation {acc_why}"


def random_pair(M, N, K, device, seed):
    torch.manual_seed(seed)
    return torch.randn((M, K), device=device).half(), torch.randn((K, N), device=device).half()


def check(lesson, name, a, b, cfg=None):
    M, K = a.shape
    N = b.shape[1]
    c = torch.full((M, N), float("nan"), device=a.device, dtype=torch.float16)  # poison
    matmul(a, b, cfg, out=c)
    want = a.double() @ b.double()
    rtol, atol, why = tolerance(K, want)
    return lesson.close(name, c, want, rtol, atol, why)


def main() -> int:
    lesson = Lesson("autotune")
    device = lesson.device()

    # snippet: every-config
    # Before any timing: every config in the list must compute the right
    # answer, on a shape that is a multiple of none of the tiles. A config
    # that is fast but wrong would otherwise win silently. Under the
    # interpreter this is all the lesson can do (it cannot time anything,
    # and it ignores num_warps and num_stages, so there it checks the tiling
    # of each config, with its real block sizes). On the GPU, M, N and K are
    # multiples of 16, like the tuned shapes, so this runs the very binaries
    # the autotuner times.
    shapes = [(200, 136, 72), (330, 520, 130)] if lesson.interpret else [(784, 656, 400)]
    for seed, (M, N, K) in enumerate(shapes):
        a, b = random_pair(M, N, K, device, seed)
        for cfg in CONFIGS:
            check(lesson, f"config-{describe(cfg)}-{M}x{N}x{K}", a, b, cfg)
    # end snippet

    if lesson.interpret:
        print("\nNo tuning and no timings under the interpreter: the autotuner needs a GPU clock.")
        return lesson.finish()

    # snippet: tune
    shapes = [
        (512, 512, 512),      # small: few tiles, far from filling 132 SMs
        (1024, 1024, 4096),   # tall K: few output tiles, each a long K loop
        (4096, 4096, 4096),   # large square
        (8192, 8192, 1024),   # short K: many tiles, short loops, epilogue matters more
        (16384, 256, 4096),   # skinny: N is one or two tiles wide
    ]
    rows, spread, results = [], {}, {}
    for i, (M, N, K) in enumerate(shapes):
        a, b = random_pair(M, N, K, device, seed=10 + i)
        torch.cuda.synchronize()
        start = time.perf_counter()
        matmul(a, b)  # first call at this key: times every config, then runs the winner
        torch.cuda.synchronize()
        tuning_s = time.perf_counter() - start
        best = matmul_kernel_tuned.best_config  # the winner cached for this key (M, N, K, dtypes)
        flop = 2 * M * N * K
        # later calls: a cache lookup, then the winner; it and cuBLAS take turns
        ms = bench_interleaved({"tuned": partial(matmul, a, b), "cublas": partial(torch.matmul, a, b)})
        tf, tf_cublas = tflops(flop, ms["tuned"]), tflops(flop, ms["cublas"])
        results[M, N, K] = (tf, tf_cublas)
        kw = best.kwargs
        programs = triton.cdiv(M, kw["BLOCK_M"]) * triton.cdiv(N, kw["BLOCK_N"])
        rows.append([f"{M}x{N}x{K}", f"{kw['BLOCK_M']}x{kw['BLOCK_N']}x{kw['BLOCK_K']}", kw["GROUP_SIZE_M"],
                     best.num_warps, best.num_stages, programs, tf, tf_cublas, tf / tf_cublas, tuning_s])
        # What the autotuner measured for every config (median ms), when this
        # Triton version keeps it.
        timings = getattr(matmul_kernel_tuned, "configs_timings", None) or {}
        spread[M, N, K] = {describe(c): tflops(flop, t[0] if isinstance(t, (list, tuple)) else t)
                           for c, t in timings.items()}
        check(lesson, f"tuned-{M}x{N}x{K}", a, b)  # the tuned kernel's answer at this shape
    # end snippet
    lesson.table("winners", ["shape MxNxK", "BLOCK_M,N,K", "GROUP_M", "warps", "stages", "programs",
                             "TFLOP/s", "cuBLAS TFLOP/s", "ratio", "tuning s"], rows,
                 "The config the autotuner picked at each shape (best_config), its grid size, its speed against "
                 "cuBLAS (torch.matmul) in the same run, and the wall time of the first call, which tuned")
    if all(spread.values()):
        names = [describe(c) for c in CONFIGS]
        lesson.table("all-configs", ["config", *[f"{M}x{N}x{K}" for M, N, K in shapes]],
                     [[name, *[spread[shape].get(name, float("nan")) for shape in shapes]] for name in names],
                     "TFLOP/s of every config at every shape, from the autotuner's own timings (do_bench medians)")
    else:
        print("  (this Triton version does not expose the autotuner's per-config timings; no all-configs table)")

    tf, tf_cublas = results[4096, 4096, 4096]
    lesson.benchmark("autotuned-vs-cublas-4096", tf, tf_cublas, "TFLOP/s", threshold=0.70, stretch=0.85,
                     baseline_name="cuBLAS (torch.matmul)")
    return lesson.finish()


if __name__ == "__main__":
    sys.exit(main())
