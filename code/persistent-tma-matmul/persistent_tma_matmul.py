"""Persistent TMA matmul: the last ten percent on Hopper.

The tiled FP16 matmul of the previous lesson launches one program per
128x256 output tile and lets each program compute its addresses, load its
operands through pointers, run its K loop, write its tile and exit. On an
H100 or H200 that already lands within reach of cuBLAS, but not on it. Two
Hopper habits close the gap, and this module adds them one at a time:

1. TMA, the Tensor Memory Accelerator. A *tensor descriptor* tells the
   hardware the shape, strides and tile size of a matrix once; after that
   one thread issues a bulk copy of a whole tile between global and shared
   memory.
   The threads no longer compute 128x64 addresses, no longer carry masks,
   and out-of-bounds reads come back as zeros by themselves.
2. A persistent grid. Instead of one program per tile, launch exactly one
   program per streaming multiprocessor (132 on an H200) and let each one
   loop over tiles. The per-tile launch and prologue disappear, and since
   the compiler flattens the tile loop and the K loop into one pipelined
   loop, the loads of the next tile are already in flight while the last
   tile's epilogue is still writing.

Last, the epilogue is stored in two halves, which halves the shared memory
it needs and lets the pipeline keep four stages.

Run it:
    TRITON_INTERPRET=1 python persistent_tma_matmul.py   # any machine: checks
    python persistent_tma_matmul.py                      # Hopper: checks, one timing

Beside it: exercises.py (check your own answers) and lesson.py (the run the
course records: every check and benchmark on the lesson's page).
"""

import os

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor


# snippet: tile-coords
@triton.jit
def tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_SIZE_M: tl.constexpr):
    # Grouped order, as in the tiled lesson: walk the output tiles in bands of
    # GROUP_SIZE_M tile rows, column by column inside a band, so that the
    # tiles computed at about the same time share A rows and B columns in L2.
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = tile_id // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + (tile_id % group_size_m)
    pid_n = (tile_id % num_pid_in_group) // group_size_m
    return pid_m, pid_n
# end snippet


# -- Step 0: the tiled kernel of the previous lesson ---------------------------
#
# One program per output tile; pointer loads; `% M` wraps the row offsets of
# the last tile back into the matrix so the A and B loads need no row mask,
# and the multiple_of/max_contiguous hints let the compiler vectorise them.

# snippet: tiled-kernel
@triton.jit
def matmul_tiled_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                        stride_am, stride_ak, stride_bk, stride_bn,
                        stride_cm, stride_cn,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                        BLOCK_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr):
    pid_m, pid_n = tile_coords(tl.program_id(axis=0), tl.cdiv(M, BLOCK_M),
                               tl.cdiv(N, BLOCK_N), GROUP_SIZE_M)
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_am = tl.max_contiguous(tl.multiple_of(offs_am, BLOCK_M), BLOCK_M)
    offs_bn = tl.max_contiguous(tl.multiple_of(offs_bn, BLOCK_N), BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn
    mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, acc.to(tl.float16), mask=mask)
# end snippet


# -- Step 1: the same tile, moved by TMA ---------------------------------------
#
# Each program still owns one tile, but its operands arrive through tensor
# descriptors. `a_desc.load([row, col])` is a bulk copy of a BLOCK_M x
# BLOCK_K tile starting at that element; the block shape lives in the
# descriptor, not in the call. Rows or columns past the end of the matrix
# read as zero (the K tail and the M/N edges need no masks), and a store
# drops whatever falls outside the matrix.

# snippet: tma-kernel
@triton.jit
def matmul_tma_kernel(a_desc, b_desc, c_desc, M, N, K,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                      BLOCK_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr):
    pid_m, pid_n = tile_coords(tl.program_id(axis=0), tl.cdiv(M, BLOCK_M),
                               tl.cdiv(N, BLOCK_N), GROUP_SIZE_M)
    off_m = pid_m * BLOCK_M
    off_n = pid_n * BLOCK_N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(tl.cdiv(K, BLOCK_K)):
        a = a_desc.load([off_m, k * BLOCK_K])  # a BLOCK_M x BLOCK_K tile of A
        b = b_desc.load([k * BLOCK_K, off_n])  # a BLOCK_K x BLOCK_N tile of B
        acc = tl.dot(a, b, acc)
    c_desc.store([off_m, off_n], acc.to(tl.float16))
# end snippet


# -- Step 2: persistent, with a split epilogue ---------------------------------
#
# The grid is min(NUM_SMS, number of tiles) programs. Program p takes tiles
# p, p + NUM_SMS, p + 2*NUM_SMS, ... in the grouped order, so at any moment
# the machine works on NUM_SMS neighbouring tiles, as a full wave of the
# one-tile-per-program grid would. `flatten=True` asks the compiler to fuse
# the tile loop and the K loop into one software-pipelined loop: the TMA
# loads for the first K steps of the next tile are issued before the
# epilogue of the current one, so the tensor cores wait less between tiles.

# snippet: persistent-kernel
@triton.jit
def matmul_persistent_tma_kernel(a_desc, b_desc, c_desc, M, N, K,
                                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                                 BLOCK_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr,
                                 NUM_SMS: tl.constexpr):
    start_pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n
    k_tiles = tl.cdiv(K, BLOCK_K)
    for tile_id in tl.range(start_pid, num_tiles, NUM_SMS, flatten=True):
        pid_m, pid_n = tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_SIZE_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            a = a_desc.load([off_m, ki * BLOCK_K])
            b = b_desc.load([ki * BLOCK_K, off_n])
            acc = tl.dot(a, b, acc)
        # Split epilogue: view the BLOCK_M x BLOCK_N accumulator as
        # BLOCK_M x 2 x BLOCK_N/2, move the "2" last and split it off. acc0 is
        # the left half of the tile, acc1 the right half. Each half is staged
        # in shared memory and written by its own TMA store, so the staging
        # buffer is half a tile, and the second half's conversion overlaps
        # the first half's store.
        acc = tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1))
        acc0, acc1 = tl.split(acc)
        c_desc.store([off_m, off_n], acc0.to(tl.float16))
        c_desc.store([off_m, off_n + BLOCK_N // 2], acc1.to(tl.float16))
# end snippet


# -- launchers -------------------------------------------------------------------

# One configuration for all three kernels, so the steps differ only in what
# the lesson changes. 128x256x64 with 8 warps is the tiled lesson's winner.
BLOCK_M, BLOCK_N, BLOCK_K, GROUP_SIZE_M, NUM_WARPS = 128, 256, 64, 8, 8
BLOCKS = (BLOCK_M, BLOCK_N, BLOCK_K)


def _out(a, b, out):
    M, K = a.shape
    K2, N = b.shape
    assert K == K2, f"inner dimensions differ: {K} != {K2}"
    assert a.dtype == b.dtype == torch.float16
    if out is None:
        out = torch.empty((M, N), device=a.device, dtype=torch.float16)
    assert out.shape == (M, N) and out.dtype == torch.float16
    return M, N, K, out


def matmul_tiled(a, b, out=None, blocks=BLOCKS, num_stages=3, with_kernel=False):
    M, N, K, c = _out(a, b, out)
    bm, bn, bk = blocks
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
    compiled = matmul_tiled_kernel[grid](
        a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
        c.stride(0), c.stride(1), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
        GROUP_SIZE_M=GROUP_SIZE_M, num_warps=NUM_WARPS, num_stages=num_stages)
    return (c, compiled) if with_kernel else c


# snippet: descriptors
def tma_descriptors(a, b, c, bm, bn, bk, c_block_n):
    # A host-side descriptor records the base pointer, shape and strides of
    # a matrix plus the tile it moves. TMA wants the base 16-byte aligned,
    # the last dimension contiguous and every other stride a multiple of 16
    # bytes: for fp16 row-major storage, rows of a multiple of 8 values.
    # TensorDescriptor checks this and fails loudly otherwise.
    for t in (a, b, c):
        assert t.stride(-1) == 1, "TMA needs a unit stride in the last dimension"
    return (TensorDescriptor.from_tensor(a, [bm, bk]),
            TensorDescriptor.from_tensor(b, [bk, bn]),
            TensorDescriptor.from_tensor(c, [bm, c_block_n]))
# end snippet


def matmul_tma(a, b, out=None, blocks=BLOCKS, num_stages=3, with_kernel=False):
    M, N, K, c = _out(a, b, out)
    bm, bn, bk = blocks
    a_desc, b_desc, c_desc = tma_descriptors(a, b, c, bm, bn, bk, c_block_n=bn)
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
    compiled = matmul_tma_kernel[grid](
        a_desc, b_desc, c_desc, M, N, K, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
        GROUP_SIZE_M=GROUP_SIZE_M, num_warps=NUM_WARPS, num_stages=num_stages)
    return (c, compiled) if with_kernel else c


# snippet: persistent-launch
def matmul_persistent_tma(a, b, num_sms, out=None, blocks=BLOCKS, num_stages=4,
                          programs=None, with_kernel=False):
    M, N, K, c = _out(a, b, out)
    bm, bn, bk = blocks
    # The output descriptor moves half a tile: the epilogue stores in two halves.
    a_desc, b_desc, c_desc = tma_descriptors(a, b, c, bm, bn, bk, c_block_n=bn // 2)
    num_tiles = triton.cdiv(M, bm) * triton.cdiv(N, bn)
    # One program per SM, never more programs than tiles.
    grid = (programs or min(num_sms, num_tiles),)
    compiled = matmul_persistent_tma_kernel[grid](
        a_desc, b_desc, c_desc, M, N, K, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
        GROUP_SIZE_M=GROUP_SIZE_M, NUM_SMS=num_sms, num_warps=NUM_WARPS,
        num_stages=num_stages)
    return (c, compiled) if with_kernel else c
# end snippet


# snippet: self-check
def self_check() -> None:
    """The three steps against a float64 product, on shapes no tile divides."""
    on_gpu = torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1"
    device = "cuda" if on_gpu else "cpu"
    # On the CPU: small tiles and a pretend machine of 4 SMs, so that the
    # persistent loop loops. M, N and K are no multiple of the tiles; N and K
    # stay multiples of 8, the 16 bytes a TMA row stride needs.
    blocks, num_sms = (32, 32, 16), 4
    if on_gpu:
        blocks = BLOCKS
        num_sms = torch.cuda.get_device_properties(0).multi_processor_count
    shapes = ((1000, 1032, 776), (777, 520, 4104)) if on_gpu else ((90, 72, 88),)
    torch.manual_seed(0)
    for M, N, K in shapes:
        a = torch.randn((M, K), device=device, dtype=torch.float16)
        b = torch.randn((K, N), device=device, dtype=torch.float16)
        want = a.double() @ b.double()
        # fp32 sums of K products, rounded to fp16: a tolerance, not bit for bit.
        rtol = max(1e-3, 4 * 2.0**-23 * K**0.5)
        for run in (matmul_tiled, matmul_tma, matmul_persistent_tma):
            kw = {"num_sms": num_sms} if run is matmul_persistent_tma else {}
            got = run(a, b, blocks=blocks, **kw).double()
            torch.testing.assert_close(got, want, rtol=rtol,
                                       atol=rtol * float(want.abs().max()))
        print(f"tiled, TMA and persistent TMA match float64 on {M}x{N}x{K} "
              f"(rtol {rtol:.2g})")
    if on_gpu:
        a = torch.randn((4096, 4096), device=device, dtype=torch.float16)
        ms = triton.testing.do_bench(lambda: matmul_persistent_tma(a, a, num_sms))
        print(f"persistent TMA, 4096^3 fp16: {ms:.3f} ms, "
              f"{2 * 4096**3 / ms * 1e-9:.0f} TFLOP/s")


# end snippet


if __name__ == "__main__":
    self_check()
