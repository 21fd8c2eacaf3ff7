"""Batched matmul: exercises. Fill in each "Your code here", then check your answers:

    TRITON_INTERPRET=1 python exercises.py   # any CPU (on a GPU: python exercises.py)

Each exercise prints one line: passed, or what is wrong and a hint. With --only NAME
it checks one; --solutions checks the answers in solutions.py.
"""

import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.append(str(Path(__file__).resolve().parent.parent))  # practice.py, in the repo
import practice  # noqa: E402


# snippet: batch-axis
@triton.jit
def batched_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                   stride_ab, stride_am, stride_ak, stride_bb, stride_bk, stride_bn,
                   stride_cb, stride_cm, stride_cn,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """C[i] = A[i] @ B[i] for every matrix i of the batch, on a grid of (tiles of
    one C, batch): axis 0 numbers the tiles of one C row-major, axis 1 the batch.

    The single-matrix tile is written for you. Move this program to its matrix
    first: any batch stride may be 0 (one A shared by the whole batch) or not
    the product of the other two dimensions (a transposed view).
    """
    # Your code here: this program's matrix of the batch.

    pid = tl.program_id(0)
    pid_m = pid // tl.cdiv(N, BLOCK_N)
    pid_n = pid % tl.cdiv(N, BLOCK_N)
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
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


def batch_operands(batch, M, N, K, layout):
    """Guarded FP16 A (batch, M, K) and B (batch, K, N) in one of three layouts."""
    if layout == "broadcast A":  # one A for the whole batch: batch stride 0
        a = practice.guarded(torch.randn(1, M, K).half()).expand(batch, M, K)
    else:
        a = practice.guarded(torch.randn(batch, M, K).half())
    if layout == "transposed B":  # stored (batch, N, K): strides (N*K, 1, K)
        b = practice.guarded(torch.randn(batch, N, K).half()).transpose(1, 2)
    else:
        b = practice.guarded(torch.randn(batch, K, N).half())
    return a, b


# snippet: check-batch-axis
@practice.exercise("batch-axis", hint="pid_b = tl.program_id(1), then a_ptr += pid_b "
                   "* stride_ab, b_ptr += pid_b * stride_bb and c_ptr += pid_b * "
                   "stride_cb (in int64 on a GPU: .to(tl.int64) on pid_b, since batch "
                   "* stride can pass 2³¹ elements)")
def check_batch_axis(m):
    batch, M, N, K = 3, 40, 50, 40  # a multiple of none of the 32 x 32 x 32 tiles
    for layout in ("contiguous", "broadcast A", "transposed B"):
        a, b = batch_operands(batch, M, N, K, layout)
        c = practice.output(batch, M, N, dtype=torch.float16)
        grid = (triton.cdiv(M, 32) * triton.cdiv(N, 32), batch)
        m.batched_kernel[grid](a, b, c, M, N, K, *a.stride(), *b.stride(), *c.stride(),
                               BLOCK_M=32, BLOCK_N=32, BLOCK_K=32)
        want = torch.bmm(a.double(), b.double())
        practice.expect("C", c, want, 2.0**-10, 4 * 2.0**-23 * K**0.5 *
                        float(want.abs().max()), case=f"batch {batch} of {M}x{N}x{K}, "
                        f"{layout}, strides A {a.stride()}, B {b.stride()}")


# end snippet


# snippet: work-items
@triton.jit
def work_items_kernel(batch_ptr, pid_m_ptr, pid_n_ptr, owner_ptr, batch, M, N,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                      NUM_SMS: tl.constexpr):
    """Step 2's schedule, without the matmul: one stream of work items, every tile of
    every matrix of the batch, numbered matrix by matrix (matrix 0's tiles first,
    each matrix's tiles row-major). Program p of NUM_SMS takes items p, p + NUM_SMS,
    p + 2 * NUM_SMS, ...; for each, it stores at index `item` the matrix of the
    batch, the tile's (pid_m, pid_n) in that matrix, and p.
    """
    start = tl.program_id(axis=0)
    tiles_n = tl.cdiv(N, BLOCK_N)
    tiles_per_matrix = tl.cdiv(M, BLOCK_M) * tiles_n
    # Your code here: the loop over this program's items.


# end snippet


def work_items(batch, M, N, block_m, block_n, programs):
    """[(matrix, pid_m, pid_n, owner), ...] by item, built item by item."""
    tiles_n = triton.cdiv(N, block_n)
    tiles = [(m, t // tiles_n, t % tiles_n) for m in range(batch)
             for t in range(triton.cdiv(M, block_m) * tiles_n)]
    return [(*t, i % programs) for i, t in enumerate(tiles)]


def judge_items(got, want):
    """Raise practice.Wrong naming the first work item whose entry is wrong."""
    names = ("matrix", "pid_m", "pid_n", "owner")
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        if -1 in g:
            missing = sum(-1 in x for x in got)
            raise practice.Wrong(f"item {i} was never computed ({missing} of "
                                 f"{len(got)} items were not)")
        if g != w:
            wrong = [f"{n} {a}, expected {b}"
                     for n, a, b in zip(names, g, w, strict=True) if a != b]
            raise practice.Wrong(f"item {i}: {'; '.join(wrong)}")


# snippet: check-work-items
@practice.exercise("work-items", hint="for item in tl.range(start, batch * "
                   "tiles_per_matrix, NUM_SMS): pid_b = item // tiles_per_matrix, "
                   "tile = item % tiles_per_matrix, pid_m = tile // tiles_n, pid_n = "
                   "tile % tiles_n, then the four stores at item")
def check_work_items(m):
    batch, M, N = 3, 100, 70  # 4 x 3 tiles of 32 x 32 in each matrix: 36 items
    for programs in (1, 5, 8):
        want = work_items(batch, M, N, 32, 32, programs)
        out = [practice.guarded(torch.full((len(want),), -1, dtype=torch.int32))
               for _ in range(4)]
        m.work_items_kernel[(programs,)](*out, batch, M, N, BLOCK_M=32, BLOCK_N=32,
                                         NUM_SMS=programs)
        case = f"batch {batch} of {M}x{N}, tiles of 32 x 32, {programs} programs"
        try:
            judge_items(list(zip(*[o.tolist() for o in out], strict=True)), want)
        except practice.Wrong as wrong:
            raise practice.Wrong(f"{case}: {wrong}") from None
        practice.expect("owner", out[3], [w[3] for w in want], case=case)


# end snippet


if __name__ == "__main__":
    sys.exit(practice.main())
