"""Split-K: the answers to exercises.py, and the classic mistakes its checks catch.

    TRITON_INTERPRET=1 python exercises.py --solutions   # these answers pass
"""

import sys
from pathlib import Path

import triton
import triton.language as tl

sys.path.append(str(Path(__file__).resolve().parent.parent))  # practice.py, in the repo
from practice import Mistake  # noqa: E402


# snippet: slice
@triton.jit
def split_k_partial_kernel(a_ptr, b_ptr, ws_ptr, M, N, K, k_per_split,
                           stride_am, stride_ak, stride_bk, stride_bn,
                           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                           BLOCK_K: tl.constexpr):
    pid_n = tl.program_id(0)
    pid_m = tl.program_id(1)
    pid_s = tl.program_id(2)
    offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    k_start = pid_s * k_per_split
    k_end = tl.minimum(k_start + k_per_split, K)  # the last slice stops at K
    ks = k_start + offs_k
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + ks[None, :] * stride_ak
    b_ptrs = b_ptr + ks[:, None] * stride_bk + offs_n[None, :] * stride_bn
    for k in range(k_start, k_end, BLOCK_K):
        k_left = k_end - k  # this slice's values only: the next slice adds its own
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tile = offs_cm[:, None] * N + offs_cn[None, :]
    tl.store(ws_ptr + pid_s * M * N + tile, acc, mask=mask)


# end snippet


# snippet: ordered-sum
@triton.jit
def ordered_sum_kernel(ws_ptr, c_ptr, MN, SPLITS, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < MN
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for s in range(0, SPLITS):  # slice 0 first, then 1, 2, ...: a fixed order
        acc += tl.load(ws_ptr + s * MN + offs, mask=mask, other=0.0)
    tl.store(c_ptr + offs, acc.to(tl.float16), mask=mask)


# end snippet


# Each mistake is an edit of this file's text; the check must fail it and say `says`.
MISTAKES = {
    "slice": [
        Mistake("the slice's mask ends at K, not at the slice's end",
                find="k_left = k_end - k", replace="k_left = K - k", says="wrong at"),
        Mistake("the last slice not cut short at K",
                find="k_end = tl.minimum(k_start + k_per_split, K)",
                replace="k_end = k_start + k_per_split", says="wrong at"),
        Mistake("every slice into the same slot of the workspace",
                find="ws_ptr + pid_s * M * N + tile", replace="ws_ptr + tile",
                says="never written"),
    ],
    "ordered-sum": [
        Mistake("the store without its mask", find="acc.to(tl.float16), mask=mask)",
                replace="acc.to(tl.float16))", says="wrote past the end"),
        Mistake("one lane too many", find="mask = offs < MN",
                replace="mask = offs <= MN", says="wrote past the end"),
        Mistake("one slice short", find="range(0, SPLITS)",
                replace="range(0, SPLITS - 1)", says="wrong at"),
    ],
}
