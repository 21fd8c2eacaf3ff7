"""Split-K: a skinny matmul that gives every SM something to do.

C = A @ B with A of 16 x 16384 and B of 16384 x 4096 in FP16, an FP32
accumulator and an FP16 result: the shape of a decoding step, where 16
tokens meet a weight matrix. The tiled kernel of the fp16-matmul lesson owns
one BLOCK_M x BLOCK_N tile of C per program and walks all of K. Here C has
only 16 rows, so there is one row of tiles: with BLOCK_N = 64 that is 64
programs, with 128 only 32, for an H200's 132 SMs. Half the chip or more sits
idle, and every busy SM walks all 16384 steps of K alone.

Split-K cuts K as well. Program (n, s) computes the partial product of
tile n over the s-th slice of K, so the grid grows by the split count S, and
the S partial tiles are added afterwards: with atomic adds into an FP32
buffer (fast, but the order of the additions changes from run to run), or
by writing each partial tile and summing them in a second small kernel in a
fixed order (deterministic). Stream-K, the last variant, gives every program
an equal share of all tiles' K steps, so the number of programs can be the
number of SMs whatever the shape.

The product is memory-bound: 2 * 16 * 4096 * 16384 = 2.1 GFLOP on 134 MB of
B (A and C are under 1 MB), 16 FLOP per byte, far below the ~200 FLOP/byte
where an H200 stops waiting for memory. What decides the speed is how many
SMs stream B at once, and how many bytes each keeps in flight.

Run it:
    TRITON_INTERPRET=1 python split_k.py   # any machine: checks on the CPU
    python split_k.py                      # a CUDA GPU: checks and a timing

Beside it: exercises.py (check your own kernels) and lesson.py (the run the
course records: every check, the sweep and the benchmark against cuBLAS).
"""

import os

import torch
import triton
import triton.language as tl

SHAPE = (16, 4096, 16384)  # M, N, K of the benchmark


# snippet: tiled-kernel
@triton.jit
def matmul_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    # One program per BLOCK_M x BLOCK_N tile of C; it walks all of K.
    pid_n = tl.program_id(0)
    pid_m = tl.program_id(1)
    # Offsets wrapped with % and marked contiguous, as in the fp16-matmul
    # lesson: loads need no mask along M or N, only the store does.
    offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_n = tl.max_contiguous(tl.multiple_of(offs_n, BLOCK_N), BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn
    mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask)


# end snippet


# snippet: split-k-kernel
@triton.jit
def matmul_split_k_kernel(
    a_ptr, b_ptr, ws_ptr, M, N, K, k_per_split,
    stride_am, stride_ak, stride_bk, stride_bn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    ATOMIC: tl.constexpr,
):
    # Program (n, m, s) computes tile (m, n) over the s-th slice of K:
    # k in [s * k_per_split, (s + 1) * k_per_split), cut short at K.
    pid_n = tl.program_id(0)
    pid_m = tl.program_id(1)
    pid_s = tl.program_id(2)
    k_start = pid_s * k_per_split
    k_end = tl.minimum(k_start + k_per_split, K)
    offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_n = tl.max_contiguous(tl.multiple_of(offs_n, BLOCK_N), BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    ks = k_start + offs_k  # this slice's first BLOCK_K step
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + ks[None, :] * stride_ak
    b_ptrs = b_ptr + ks[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(k_start, k_end, BLOCK_K):
        # The mask ends the slice at k_end: at K for the last slice, and at
        # the next slice's start for the others (k_per_split is a multiple
        # of BLOCK_K, so there it is all ones).
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_end - k, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_end - k, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tile = offs_cm[:, None] * N + offs_cn[None, :]  # the workspace is M x N, dense
    if ATOMIC:
        # Every slice adds into one FP32 M x N buffer. "relaxed": only the
        # sum matters, not its order relative to other memory operations.
        tl.atomic_add(ws_ptr + tile, acc, mask=mask, sem="relaxed")
    else:
        # Every slice writes its own M x N partial; sum_splits_kernel adds.
        tl.store(ws_ptr + pid_s * M * N + tile, acc, mask=mask)


# end snippet


# snippet: sum-splits-kernel
@triton.jit
def sum_splits_kernel(ws_ptr, c_ptr, MN, SPLITS, BLOCK: tl.constexpr):
    # C = sum over s of ws[s], in the order s = 0, 1, 2, ...: the same
    # additions in the same order on every run, so the same bits.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < MN
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    s = 0
    while s < SPLITS:
        acc += tl.load(ws_ptr + s * MN + offs, mask=mask, other=0.0)
        s += 1
    tl.store(c_ptr + offs, acc.to(c_ptr.dtype.element_ty), mask=mask)


# end snippet


# snippet: stream-k-kernel
@triton.jit
def matmul_stream_k_kernel(
    a_ptr, b_ptr, ws_ptr, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    # Number every (tile, K step) pair of the whole product in one line,
    # tile by tile, and give each program an equal run of that line. A run
    # may end inside a tile and the next program's run start there: both
    # add their partial sums into the same FP32 tile of the workspace.
    pid = tl.program_id(0)
    tiles_n = tl.cdiv(N, BLOCK_N)
    k_steps = tl.cdiv(K, BLOCK_K)
    total = tl.cdiv(M, BLOCK_M) * tiles_n * k_steps
    it = pid * total // tl.num_programs(0)
    end = (pid + 1) * total // tl.num_programs(0)
    offs_k = tl.arange(0, BLOCK_K)
    while it < end:
        tile = it // k_steps
        step = it % k_steps
        stop = tl.minimum(end, (tile + 1) * k_steps)  # this tile's part of the run
        pid_m = tile // tiles_n
        pid_n = tile % tiles_n
        offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
        offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
        offs_n = tl.max_contiguous(tl.multiple_of(offs_n, BLOCK_N), BLOCK_N)
        k0 = step * BLOCK_K
        ks = k0 + offs_k
        a_ptrs = a_ptr + offs_m[:, None] * stride_am + ks[None, :] * stride_ak
        b_ptrs = b_ptr + ks[:, None] * stride_bk + offs_n[None, :] * stride_bn
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(k0, k0 + (stop - it) * BLOCK_K, BLOCK_K):
            a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k, other=0.0)
            b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k, other=0.0)
            acc = tl.dot(a, b, acc)
            a_ptrs += BLOCK_K * stride_ak
            b_ptrs += BLOCK_K * stride_bk
        offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
        ws = ws_ptr + offs_cm[:, None] * N + offs_cn[None, :]
        tl.atomic_add(ws, acc, mask=mask, sem="relaxed")
        it = stop


# end snippet


# snippet: configs
# BLOCK_M = 16 is the smallest tile tl.dot accepts, and C has 16 rows: one
# row of tiles. BLOCK_K = 128 steps: 128 x 64 x 2 bytes = 16 KiB of B per
# step and tile (32 KiB at BLOCK_N = 128), 4 of them in flight in a
# 4-stage pipeline. The interpreter ignores warps and stages and runs the
# same kernels on small shapes with smaller tiles.
GPU_TILES = {
    64: dict(BLOCK_M=16, BLOCK_N=64, BLOCK_K=128, num_warps=4, num_stages=4),
    128: dict(BLOCK_M=16, BLOCK_N=128, BLOCK_K=128, num_warps=4, num_stages=4),
}
INTERPRETER_TILES = {64: dict(BLOCK_M=16, BLOCK_N=64, BLOCK_K=64)}


# end snippet


def matmul_tiled(a, b, tile):
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=torch.float16)
    grid = (triton.cdiv(N, tile["BLOCK_N"]), triton.cdiv(M, tile["BLOCK_M"]))
    matmul_kernel[grid](
        a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
        c.stride(0), c.stride(1), **tile,
    )
    return c


# snippet: launch
def split_plan(K: int, splits: int, block_k: int) -> tuple[int, int]:
    """(k_per_split, splits actually used): slices are whole BLOCK_K steps,
    so 7 splits of 16 steps become 6 slices of 3 steps and one empty one;
    the empty one is dropped rather than launched."""
    steps = triton.cdiv(K, block_k)
    k_per_split = triton.cdiv(steps, splits) * block_k
    return k_per_split, triton.cdiv(K, k_per_split)


def matmul_split_k(a, b, tile, splits, combine="reduce"):
    M, K = a.shape
    N = b.shape[1]
    k_per_split, splits = split_plan(K, splits, tile["BLOCK_K"])
    grid = (triton.cdiv(N, tile["BLOCK_N"]), triton.cdiv(M, tile["BLOCK_M"]), splits)
    args = (M, N, K, k_per_split, a.stride(0), a.stride(1), b.stride(0), b.stride(1))
    if combine == "atomic":
        ws = torch.zeros((M, N), device=a.device, dtype=torch.float32)  # a memset
        matmul_split_k_kernel[grid](a, b, ws, *args, ATOMIC=True, **tile)
        return ws.to(torch.float16)  # and a third kernel, the cast
    ws = torch.empty((splits, M, N), device=a.device, dtype=torch.float32)
    matmul_split_k_kernel[grid](a, b, ws, *args, ATOMIC=False, **tile)
    c = torch.empty((M, N), device=a.device, dtype=torch.float16)
    sum_splits_kernel[(triton.cdiv(M * N, 1024),)](ws, c, M * N, splits, BLOCK=1024)
    return c
# end snippet


def matmul_stream_k(a, b, tile, programs):
    M, K = a.shape
    N = b.shape[1]
    ws = torch.zeros((M, N), device=a.device, dtype=torch.float32)
    matmul_stream_k_kernel[(programs,)](
        a, b, ws, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), **tile
    )
    return ws.to(torch.float16)


# snippet: self-check
def self_check() -> None:
    """Every variant against torch, on a shape that is a multiple of no tile and
    split counts that do not divide K."""
    on_gpu = torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1"
    device = "cuda" if on_gpu else "cpu"
    tile = (GPU_TILES if on_gpu else INTERPRETER_TILES)[64]
    torch.manual_seed(0)
    M, N, K = 5, 200, 1000
    a = torch.randn((M, K), device=device).half()
    b = torch.randn((K, N), device=device).half()
    want = (a.float() @ b.float()).half()  # FP32 sums, one FP16 rounding
    results = [matmul_tiled(a, b, tile), matmul_stream_k(a, b, tile, programs=5)]
    results += [matmul_split_k(a, b, tile, splits, combine)
                for splits in (1, 3, 7) for combine in ("reduce", "atomic")]
    for got in results:
        torch.testing.assert_close(got, want, rtol=2**-9, atol=1e-2)
    # The fixed-order reduction adds the same partials in the same order.
    again = [matmul_split_k(a, b, tile, 7, "reduce") for _ in range(3)]
    assert all(torch.equal(c, again[0]) for c in again)
    print(f"tiled, split-K (1, 3 and 7 slices, both ways of combining) and stream-K "
          f"match torch on {M}x{N}x{K}; the fixed-order reduction repeats bit for bit")
    if on_gpu:
        M, N, K = SHAPE
        a = torch.randn((M, K), device=device).half()
        b = torch.randn((K, N), device=device).half()
        ms = triton.testing.do_bench(lambda: matmul_split_k(a, b, GPU_TILES[128], 4))
        print(f"split-K, 4 slices, {M}x{N}x{K} fp16: {ms * 1e3:.1f} us, "
              f"{2 * M * N * K / ms * 1e-9:.1f} TFLOP/s")
# end snippet


if __name__ == "__main__":
    self_check()
