"""FP16 matmul: tiles, grouped order, and why two lines decide the speed.

C = A @ B with A (M x K) and B (K x N) in FP16. Each Triton program owns one
BLOCK_M x BLOCK_N tile of C. It walks K in steps of BLOCK_K, loads a
BLOCK_M x BLOCK_K tile of A and a BLOCK_K x BLOCK_N tile of B, multiplies
them on the tensor cores with `tl.dot`, and accumulates in FP32. Only at the
end is the tile rounded to FP16 and stored.

Two kernels here compute the same thing:

* the *seed* kernel, as the notebook this lesson grew from wrote it: it keeps
  out-of-range rows and columns in bounds with `tl.where(offs < M, offs, 0)`
  and accumulates with `acc += tl.dot(a, b)`;
* the *recommended* kernel: it wraps offsets with `% M`, states their
  contiguity with `tl.multiple_of` / `tl.max_contiguous`, masks only the K
  tail, and accumulates with `acc = tl.dot(a, b, acc)`.

Everything else (the grid, the grouped order, the K loop) is shared, and on a
GPU the two are an order of magnitude apart. The lesson's page explains why.

Run it:
    TRITON_INTERPRET=1 python fp16_matmul.py   # any machine: checks on the CPU
    python fp16_matmul.py                      # a CUDA GPU: checks and a timing

Beside it: exercises.py (check your own kernels) and lesson.py (the run the
course records: every check, benchmark and figure on the lesson's page).
"""

import os

import torch
import triton
import triton.language as tl


# snippet: grouped-order
@triton.jit
def tile_coordinates(pid, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                     GROUP_SIZE_M: tl.constexpr):
    """Map the 1-D program id to the (pid_m, pid_n) tile it computes.

    Row-major order (pid_m = pid // num_pid_n) would sweep one row of C
    tiles at a time: every program of that row reads the same A rows but a
    different B column block, so all of B streams through L2 for every row
    of tiles. Grouped order walks GROUP_SIZE_M rows of tiles column by
    column instead. Programs that run at the same time then share both A
    row blocks and B column blocks, and far fewer tiles are fetched from
    DRAM more than once.
    """
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    # The last group may have fewer than GROUP_SIZE_M rows of tiles.
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    return pid_m, pid_n
# end snippet


@triton.jit
def matmul_kernel_seed(
    a_ptr, b_ptr, c_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
):
    pid_m, pid_n = tile_coordinates(tl.program_id(0), M, N, BLOCK_M, BLOCK_N,
                                    GROUP_SIZE_M)
    # snippet: seed-kernel
    offs_am = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_bn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    # Rows and columns past the edge are sent to index 0 so that every
    # pointer stays inside the tensors; the masks below drop those lanes.
    # Correct, but the offsets are now a select, not an arange.
    offs_am_safe = tl.where(offs_am < M, offs_am, 0)
    offs_bn_safe = tl.where(offs_bn < N, offs_bn, 0)
    a_ptrs = a_ptr + offs_am_safe[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn_safe[None, :] * stride_bn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_mask = offs_k + k * BLOCK_K < K
        a = tl.load(a_ptrs, mask=(offs_am[:, None] < M) & k_mask[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=k_mask[:, None] & (offs_bn[None, :] < N), other=0.0)
        acc += tl.dot(a, b)  # a product, then a separate add
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    # end snippet

    c = acc.to(tl.float16)
    c_ptrs = c_ptr + offs_am[:, None] * stride_cm + offs_bn[None, :] * stride_cn
    tl.store(c_ptrs, c, mask=(offs_am[:, None] < M) & (offs_bn[None, :] < N))


# snippet: kernel
@triton.jit
def matmul_kernel(
    a_ptr, b_ptr, c_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
):
    pid_m, pid_n = tile_coordinates(tl.program_id(0), M, N, BLOCK_M, BLOCK_N,
                                    GROUP_SIZE_M)
    # Wrap instead of clamp: each tile's offsets stay one run of consecutive
    # indices (only the last tile wraps around to row/column 0), and every
    # address is in bounds, so A and B need no mask along M or N at all.
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    # Tell the compiler what it may assume: each run of BLOCK offsets is
    # contiguous and starts at a multiple of BLOCK. This is what lets it
    # issue 16-byte vector loads and asynchronous copies into shared memory.
    offs_am = tl.max_contiguous(tl.multiple_of(offs_am, BLOCK_M), BLOCK_M)
    offs_bn = tl.max_contiguous(tl.multiple_of(offs_bn, BLOCK_N), BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        # Only the K tail needs a mask: zeros past K add nothing to the dot.
        k_remaining = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_remaining, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_remaining, other=0.0)
        # Accumulate inside the MMA: the tensor cores add into acc in place.
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    c = acc.to(tl.float16)  # FP32 accumulator, FP16 output
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn
    # The store is where the wrapped rows and columns are dropped.
    tl.store(c_ptrs, c, mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))
# end snippet


# snippet: launch
# Tile shapes and launch settings. On the GPU the recommended kernel uses
# 128x256x64 tiles with 8 warps and a 3-stage pipeline; the seed kernel keeps
# the notebook's 128x128x64 (Triton's defaults: 4 warps, 3 stages). The
# interpreter runs one numpy program per tile and ignores warps and stages,
# so there the same kernels run with small 32x32x32 tiles.
RECOMMENDED = dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_SIZE_M=8,
                   num_warps=8, num_stages=3)
SEED = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_SIZE_M=8,
            num_warps=4, num_stages=3)
INTERPRETER = dict(BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, GROUP_SIZE_M=4)


def matmul(a, b, kernel=matmul_kernel, config=RECOMMENDED, out=None):
    """C = A @ B in FP16 through `kernel` with launch `config`."""
    assert a.dtype == b.dtype == torch.float16 and a.shape[1] == b.shape[0]
    M, K = a.shape
    _, N = b.shape
    if out is None:
        out = torch.empty((M, N), device=a.device, dtype=torch.float16)
    # A 1-D grid: one program per output tile; tile_coordinates decides
    # which tile each program id gets.
    grid = (triton.cdiv(M, config["BLOCK_M"]) * triton.cdiv(N, config["BLOCK_N"]),)
    kernel[grid](a, b, out, M, N, K,
                 a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                 out.stride(0), out.stride(1), **config)
    return out
# end snippet


# snippet: intensity
def arithmetic_intensity(M, N, K, bytes_per_element=2):
    """FLOP per byte of DRAM traffic if A and B are read once and C written once."""
    return 2 * M * N * K / (bytes_per_element * (M * K + K * N + M * N))


# H200 SXM datasheet: ~990 TFLOP/s dense FP16/BF16 tensor-core rate over
# 4.8 TB/s of HBM3e. Below this many FLOP per byte a kernel is memory-bound.
H200_RIDGE = 990e12 / 4.8e12  # ~206 FLOP/byte
# end snippet


# snippet: self-check
def self_check() -> None:
    """Both kernels against torch, on shapes that are not multiples of the tiles."""
    on_gpu = torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1"
    device = "cuda" if on_gpu else "cpu"
    configs = {"seed": SEED, "recommended": RECOMMENDED} if on_gpu else \
        {"seed": INTERPRETER, "recommended": INTERPRETER}
    kernels = {"seed": matmul_kernel_seed, "recommended": matmul_kernel}
    torch.manual_seed(0)
    for M, N, K in ((200, 136, 72), (33, 100, 17)):
        a = torch.randn((M, K), device=device).half()
        b = torch.randn((K, N), device=device).half()
        want = (a.float() @ b.float()).half()  # FP32 sums, one FP16 rounding
        for name, kernel in kernels.items():
            # One FP16 rounding on both sides, sums in a different order:
            # a few units in the last place apart at most.
            got = matmul(a, b, kernel, configs[name])
            torch.testing.assert_close(got, want, rtol=2**-9, atol=1e-2)
        # Grouped or row-major, each tile is the same program: the same bits.
        row_major = {**configs["recommended"], "GROUP_SIZE_M": 1}
        assert torch.equal(matmul(a, b, config=row_major),
                           matmul(a, b, config=configs["recommended"]))
    print("both kernels match torch on 200x136x72 and 33x100x17; grouped and "
          "row-major order give the same C bit for bit")
    if on_gpu:
        a = torch.randn((4096, 4096), device=device).half()
        b = torch.randn((4096, 4096), device=device).half()
        ms = triton.testing.do_bench(lambda: matmul(a, b))
        print(f"recommended kernel, 4096^3 fp16: {ms:.3f} ms, "
              f"{2 * 4096**3 / ms * 1e-9:.0f} TFLOP/s")
# end snippet


if __name__ == "__main__":
    self_check()
