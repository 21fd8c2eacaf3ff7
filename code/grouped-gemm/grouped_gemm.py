"""Grouped GEMM: many matmuls of different shapes in one launch.

A mixture-of-experts layer sends each token to a few experts, so every step
it multiplies a different number of rows by each expert's weights: G
independent products C_g = A_g @ B_g, each with its own M, N and K. A
Python loop over `torch.matmul` launches G kernels, and when the products
are small each launch leaves most of the GPU idle while the CPU prepares
the next one. `torch.bmm` cannot help: its matrices must share one shape.

The grouped kernel takes the whole list at once. The host writes one row
per group into a small device table (three addresses, M, N, K and three row
strides) and launches a fixed number of programs, one or two per SM. The
output tiles of all groups are numbered one after another, group 0's first,
and program p computes tiles p, p + P, p + 2P, ... (P programs in all),
walking the table to find which group each tile belongs to and reading that
group's pointers and strides from it. Every tile is an ordinary FP16 tile
of the matmul lesson: FP32 accumulator, K loop with a tail mask, rows and
columns wrapped with % M and % N, FP16 store.

What is new is what the compiler cannot see. Pointers and strides loaded
from memory carry no alignment, so without help Triton moves A and B two
bytes at a time and cannot pipeline the loads. The host checks what it can
promise (16-byte aligned bases, row strides and N and K multiples of 8) and
the kernel states it with tl.multiple_of; a group that breaks the promise
sends the whole launch down the slow, general path.

Run it:
    TRITON_INTERPRET=1 python grouped_gemm.py   # any machine: checks on the CPU
    python grouped_gemm.py                      # a GPU: checks and a timing

Beside it: exercises.py (check your own kernels) and lesson.py (the run the
course records: every check, the race of configurations, the benchmarks).
"""

import os

import torch
import triton
import triton.language as tl

# snippet: table
# One row of int64 per group. Columns:
A_PTR, B_PTR, C_PTR, M_, N_, K_, LDA, LDB, LDC = range(9)
ROW = 9


def problem_row(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> list[int]:
    """C = A @ B for one group: A (M, K), B (K, N), C (M, N), unit column stride."""
    (M, K), (K2, N) = a.shape, b.shape
    assert K == K2 and c.shape == (M, N) and a.dtype == b.dtype == c.dtype
    assert a.stride(1) == b.stride(1) == c.stride(1) == 1, "rows must be contiguous"
    row = [0] * ROW
    row[A_PTR], row[B_PTR], row[C_PTR] = a.data_ptr(), b.data_ptr(), c.data_ptr()
    row[M_], row[N_], row[K_] = M, N, K
    row[LDA], row[LDB], row[LDC] = a.stride(0), b.stride(0), c.stride(0)
    return row


def problem_table(groups) -> torch.Tensor:
    """The table for a list of (A, B, C), on the host."""
    return torch.tensor([problem_row(a, b, c) for a, b, c in groups],
                        dtype=torch.int64)


def aligned(table: torch.Tensor) -> bool:
    """What the fast path assumes: 16-byte aligned bases, and row strides, N
    and K that are multiples of 8 elements (16 bytes of fp16 or bf16)."""
    t = table.cpu()
    return bool((t[:, [A_PTR, B_PTR, C_PTR]] % 16 == 0).all()
                and (t[:, [N_, K_, LDA, LDB, LDC]] % 8 == 0).all())
# end snippet


# snippet: kernel
@triton.jit(do_not_specialize=["n_groups"])
def grouped_matmul_kernel(problems, n_groups, DTYPE: tl.constexpr,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                          BLOCK_K: tl.constexpr, ALIGNED: tl.constexpr):
    # Tiles of all groups are numbered in one sequence, group 0's first.
    # This program computes tiles pid, pid + P, pid + 2P, ... (P programs).
    tile = tl.program_id(0)
    n_programs = tl.num_programs(0)
    first = 0  # number of the first tile of group g
    for g in range(n_groups):
        row = problems + g * 9
        M = tl.load(row + 3).to(tl.int32)
        N = tl.load(row + 4).to(tl.int32)
        K = tl.load(row + 5).to(tl.int32)
        tiles_n = tl.cdiv(N, BLOCK_N)
        end = first + tl.cdiv(M, BLOCK_M) * tiles_n
        if tile < end:  # this group has tiles for this program
            a_ptr = tl.load(row + 0).to(tl.pointer_type(DTYPE))
            b_ptr = tl.load(row + 1).to(tl.pointer_type(DTYPE))
            c_ptr = tl.load(row + 2).to(tl.pointer_type(DTYPE))
            lda = tl.load(row + 6).to(tl.int32)
            ldb = tl.load(row + 7).to(tl.int32)
            ldc = tl.load(row + 8).to(tl.int32)
            if ALIGNED:
                # Values loaded from memory carry no alignment facts. The
                # host checked these (see `aligned`); saying so is what
                # lets Triton use 16-byte copies and pipeline them.
                a_ptr = tl.multiple_of(a_ptr, 16)
                b_ptr = tl.multiple_of(b_ptr, 16)
                c_ptr = tl.multiple_of(c_ptr, 16)
                lda = tl.multiple_of(lda, 8)
                ldb = tl.multiple_of(ldb, 8)
                ldc = tl.multiple_of(ldc, 8)
                N = tl.multiple_of(N, 8)
                K = tl.multiple_of(K, 8)
            while tile < end:
                # The tile's place in group g, row-major over its tile grid.
                local = tile - first
                pid_m = local // tiles_n
                pid_n = local % tiles_n
                c = _matmul_tile(a_ptr, b_ptr, M, N, K, lda, ldb, pid_m, pid_n,
                                 BLOCK_M, BLOCK_N, BLOCK_K)
                offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
                offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
                c_ptrs = c_ptr + offs_cm[:, None] * ldc + offs_cn[None, :]
                mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
                tl.store(c_ptrs, c.to(DTYPE), mask=mask)
                tile += n_programs
        first = end
# end snippet


# snippet: tile
@triton.jit
def _matmul_tile(a_ptr, b_ptr, M, N, K, lda, ldb, pid_m, pid_n,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 BLOCK_K: tl.constexpr):
    # The FP16 matmul lesson's tile: rows and columns wrapped with % M and
    # % N (every address in bounds, runs of consecutive offsets), only the
    # K tail masked, FP32 accumulation inside the MMA.
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_am = tl.max_contiguous(tl.multiple_of(offs_am, BLOCK_M), BLOCK_M)
    offs_bn = tl.max_contiguous(tl.multiple_of(offs_bn, BLOCK_N), BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_am[:, None] * lda + offs_k[None, :]
    b_ptrs = b_ptr + offs_k[:, None] * ldb + offs_bn[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * ldb
    return acc
# end snippet


# snippet: launch
# 128x128x64 tiles, 4 warps, 3 stages: the products here are small (M, N up
# to 1024 make at most 64 tiles each), so a smaller tile than the big-matmul
# lessons' 128x256 gives more tiles to share out. The general path moves
# A and B two bytes at a time through registers; it gets a shorter K step
# and 8 warps, which keep its many addresses out of local memory. The
# interpreter runs one program at a time and ignores warps and stages:
# small tiles there.
GPU = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_warps=4, num_stages=3)
GENERAL = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=32, num_warps=8, num_stages=3)
INTERPRETER = dict(BLOCK_M=32, BLOCK_N=32, BLOCK_K=32)
DTYPES = {torch.float16: tl.float16, torch.bfloat16: tl.bfloat16}


def grouped_matmul(problems: torch.Tensor, dtype: torch.dtype, config: dict,
                   programs: int, fast: bool):
    """Every C_g = A_g @ B_g of the device table in one launch of `programs`
    programs; `fast` only if `aligned(problems)` holds."""
    grouped_matmul_kernel[(programs,)](problems, problems.shape[0],
                                       DTYPE=DTYPES[dtype], ALIGNED=fast, **config)


def grouped(groups, config=None, programs=None):
    """Convenience: build the table for (A, B, C) triples and launch once."""
    a0 = groups[0][0]
    host = problem_table(groups)  # checked on the host: no synchronisation
    fast = aligned(host)
    cpu = a0.device.type == "cpu"
    config = config or (INTERPRETER if cpu else GPU if fast else GENERAL)
    programs = programs or (4 if cpu else 2 * sm_count())
    grouped_matmul(host.to(a0.device), a0.dtype, config, programs, fast)
    return host


def sm_count() -> int:
    return torch.cuda.get_device_properties(0).multi_processor_count
# end snippet


# snippet: moe
def moe_problems(x, w, out, counts):
    """The table for a mixture-of-experts layer, built on the device.

    x (T, K): tokens sorted by expert; w (E, K, N): one weight per expert;
    out (T, N); counts (E,): tokens per expert, on the device. Group e is
    rows [start_e, start_e + counts[e]) of x and out against w[e]. No value
    leaves the GPU, so a router's counts never cost a synchronisation.
    """
    E, K, N = w.shape
    es = x.element_size()
    counts = counts.to(torch.int64)
    starts = torch.cumsum(counts, 0) - counts
    table = torch.empty((E, ROW), dtype=torch.int64, device=x.device)
    table[:, A_PTR] = x.data_ptr() + starts * (x.stride(0) * es)
    table[:, B_PTR] = w.data_ptr() + torch.arange(E, device=x.device) * (
        w.stride(0) * es)
    table[:, C_PTR] = out.data_ptr() + starts * (out.stride(0) * es)
    table[:, M_] = counts
    table[:, N_], table[:, K_] = N, K
    table[:, LDA], table[:, LDB], table[:, LDC] = x.stride(0), w.stride(1), N
    return table
# end snippet



# snippet: self-check
def self_check() -> None:
    """Ragged groups against torch (an empty one among them, fewer programs than
    tiles), then an unaligned group that sends the launch down the general path."""
    on_gpu = torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1"
    device = "cuda" if on_gpu else "cpu"
    torch.manual_seed(0)
    for shapes in ([(100, 64, 40), (1, 8, 16), (0, 16, 8), (70, 200, 72)],
                   [(20, 13, 17), (33, 40, 48)]):
        groups = [(torch.randn((M, K), device=device).half(),
                   torch.randn((K, N), device=device).half(),
                   torch.full((M, N), float("nan"), device=device).half())
                  for M, N, K in shapes]
        grouped(groups)
        for a, b, c in groups:  # FP32 sums, one FP16 rounding
            torch.testing.assert_close(c, (a.float() @ b.float()).half(),
                                       rtol=2**-9, atol=1e-2)
        # One program walks every tile itself: each tile is the same
        # instructions whoever runs it, so the same bits.
        alone = [(a, b, torch.full_like(c, float("nan"))) for a, b, c in groups]
        grouped(alone, programs=1)
        assert all(torch.equal(c, c1)
                   for (_, _, c), (_, _, c1) in zip(groups, alone, strict=True))
    print("ragged, empty and unaligned groups match torch; one program gives the same "
          "C bit for bit as many")
    if on_gpu:
        groups = [(torch.randn((M, K), device=device).half(),
                   torch.randn((K, N), device=device).half(),
                   torch.empty((M, N), device=device).half())
                  for M, N, K in [(512, 768, 1024), (300, 1024, 512)] * 8]
        table = problem_table(groups).to(device)
        ms = triton.testing.do_bench(
            lambda: grouped_matmul(table, torch.float16, GPU, 2 * sm_count(), True))
        flop = sum(2 * a.shape[0] * a.shape[1] * b.shape[1] for a, b, _ in groups)
        print(f"16 groups in one launch: {ms * 1e3:.0f} us, "
              f"{flop / ms * 1e-9:.1f} TFLOP/s")
# end snippet


if __name__ == "__main__":
    self_check()
