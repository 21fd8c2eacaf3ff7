"""Batched matmul: the answers to exercises.py, and the mistakes its checks catch.

    TRITON_INTERPRET=1 python exercises.py --solutions   # these answers pass
"""

import sys
from pathlib import Path

import triton
import triton.language as tl

sys.path.append(str(Path(__file__).resolve().parent.parent))  # practice.py, in the repo
from practice import Mistake  # noqa: E402


# snippet: batch-axis
@triton.jit
def batched_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                   stride_ab, stride_am, stride_ak, stride_bb, stride_bk, stride_bn,
                   stride_cb, stride_cm, stride_cn,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # Axis 1 is the batch. In int64: batch * stride can pass 2^31 elements.
    pid_b = tl.program_id(1).to(tl.int64)
    a_ptr += pid_b * stride_ab  # 0 when A is shared by the whole batch
    b_ptr += pid_b * stride_bb
    c_ptr += pid_b * stride_cb

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


# snippet: work-items
@triton.jit
def work_items_kernel(batch_ptr, pid_m_ptr, pid_n_ptr, owner_ptr, batch, M, N,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                      NUM_SMS: tl.constexpr):
    start = tl.program_id(axis=0)
    tiles_n = tl.cdiv(N, BLOCK_N)
    tiles_per_matrix = tl.cdiv(M, BLOCK_M) * tiles_n
    for item in tl.range(start, batch * tiles_per_matrix, NUM_SMS):
        pid_b = item // tiles_per_matrix  # which matrix of the batch
        tile = item % tiles_per_matrix  # which tile of that matrix
        tl.store(batch_ptr + item, pid_b)
        tl.store(pid_m_ptr + item, tile // tiles_n)
        tl.store(pid_n_ptr + item, tile % tiles_n)
        tl.store(owner_ptr + item, start)


# end snippet


# Each mistake is an edit of this file's text; the check must fail it and say `says`.
MISTAKES = {
    "batch-axis": [
        Mistake("C not moved to the program's matrix",
                find="    c_ptr += pid_b * stride_cb\n", replace="",
                says="never written"),
        Mistake("A's batch stride assumed M * K (a wrong stride)",
                find="a_ptr += pid_b * stride_ab", replace="a_ptr += pid_b * M * K",
                says="wrong at"),
        Mistake("the batch from the wrong grid axis", find="pid_b = tl.program_id(1)",
                replace="pid_b = tl.program_id(0)", says="wrote past the end"),
    ],
    "work-items": [
        Mistake("only the first matrix's tiles",
                find="range(start, batch * tiles_per_matrix,",
                replace="range(start, tiles_per_matrix,", says="never computed"),
        Mistake("the items dealt to the matrices in turn",
                find="pid_b = item // tiles_per_matrix",
                replace="pid_b = item % batch", says="matrix"),
        Mistake("every program on every item", find="tiles_per_matrix, NUM_SMS)",
                replace="tiles_per_matrix, 1)", says="owner"),
    ],
}
