"""Autotuning the FP16 matmul: let the shape pick the tile.

The fp16-matmul lesson fixed one configuration: 128x256x64 tiles, 8 warps,
3 pipeline stages. That is a good choice for a large square matmul on an
H200, but it is one point in a space, and the best point moves with the
shape. `@triton.autotune` takes a list of `triton.Config`s and a `key`: the
first time the kernel is called with a new value of the key arguments, it
compiles and times every config on that call's real arguments, keeps the
fastest, and reuses it for every later call with the same key.

Run it:
    TRITON_INTERPRET=1 python autotune.py   # any machine: every config checked
    python autotune.py                      # a CUDA GPU: tuned, checked, timed

Beside it: exercises.py (check your own answers) and lesson.py (the run the
course records: which config won at five shapes, against cuBLAS).
"""

import os

import torch
import triton
import triton.language as tl


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



# snippet: self-check
def self_check() -> None:
    """Every config against torch, on a shape that is a multiple of none of the
    tiles; on a GPU, the tuned call too, and one timing."""
    on_gpu = torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1"
    device = "cuda" if on_gpu else "cpu"
    torch.manual_seed(0)
    M, N, K = 200, 136, 72
    a = torch.randn((M, K), device=device).half()
    b = torch.randn((K, N), device=device).half()
    want = (a.float() @ b.float()).half()  # FP32 sums, one FP16 rounding
    for cfg in CONFIGS:
        torch.testing.assert_close(matmul(a, b, cfg), want, rtol=2**-9, atol=1e-2)
    # The group size only reorders the tiles: each is the same program.
    row_major = triton.Config({**CONFIGS[0].kwargs, "GROUP_SIZE_M": 1},
                              num_warps=8, num_stages=3)
    assert torch.equal(matmul(a, b, row_major), matmul(a, b, CONFIGS[0]))
    print(f"all {len(CONFIGS)} configs match torch on {M}x{N}x{K}; GROUP_SIZE_M 1 "
          "and 8 give the same C bit for bit")
    if not on_gpu:
        print("the autotuner times its configs on a GPU: there, run this again")
        return
    a = torch.randn((4096, 4096), device=device).half()
    b = torch.randn((4096, 4096), device=device).half()
    c = matmul(a, b)  # tunes at 4096^3, then runs the winner
    best = matmul_kernel_tuned.best_config
    assert torch.equal(c, matmul(a, b, best)), "the tuned call runs its winner"
    ms = triton.testing.do_bench(lambda: matmul(a, b))
    print(f"4096^3: {describe(best)} won; {ms:.3f} ms, "
          f"{2 * 4096**3 / ms * 1e-9:.0f} TFLOP/s")
# end snippet


if __name__ == "__main__":
    self_check()
