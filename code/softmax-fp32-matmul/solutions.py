"""Softmax and an FP32 matmul: the answers to exercises.py and the mistakes they catch.

    TRITON_INTERPRET=1 python exercises.py --solutions   # these answers pass
"""

import sys
from pathlib import Path

import triton
import triton.language as tl

sys.path.append(str(Path(__file__).resolve().parent.parent))  # practice.py, in the repo
from practice import Mistake  # noqa: E402


# snippet: row-softmax
@triton.jit
def row_softmax_kernel(out_ptr, in_ptr, out_stride, in_stride, n_cols,
                       BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_stride + cols, mask=mask, other=-float("inf"))
    numerator = tl.exp(x - tl.max(x, axis=0))  # every exponent <= 0
    y = numerator / tl.sum(numerator, axis=0)
    tl.store(out_ptr + row * out_stride + cols, y, mask=mask)


# end snippet


# snippet: matmul-tile
@triton.jit
def matmul_tile_kernel(a_ptr, b_ptr, c_ptr, m, n, k,
                       stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
                       stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                       BLOCK_K: tl.constexpr):
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, k, BLOCK_K):
        ks = k0 + offs_k
        k_ok = ks < k  # the last step may be partial
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + ks[None, :] * stride_ak,
                    mask=(offs_m[:, None] < m) & k_ok[None, :], other=0.0)
        b = tl.load(b_ptr + ks[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                    mask=k_ok[:, None] & (offs_n[None, :] < n), other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc, mask=(offs_m[:, None] < m) & (offs_n[None, :] < n))


# end snippet


# Each mistake is an edit of this file's text; the check must fail it and say `says`.
MISTAKES = {
    "row-softmax": [
        Mistake("no max subtraction", find="tl.exp(x - tl.max(x, axis=0))",
                replace="tl.exp(x)", says="exp overflowed"),
        Mistake("0.0 as the padding", find='other=-float("inf"))',
                replace="other=0.0)", says="wrong at"),
        Mistake("rows stepped by n_cols, not by their stride",
                find="in_ptr + row * in_stride", replace="in_ptr + row * n_cols",
                says="wrong at"),
    ],
    "matmul-tile": [
        Mistake("the last, partial K step unmasked", find="k_ok = ks < k ",
                replace="k_ok = ks < k0 + BLOCK_K ", says="wrong at"),
        Mistake("B's strides swapped",
                find="ks[:, None] * stride_bk + offs_n[None, :] * stride_bn",
                replace="ks[:, None] * stride_bn + offs_n[None, :] * stride_bk",
                says="wrong at"),
        Mistake("the store without its mask",
                find="tl.store(c_ptrs, acc, mask=(offs_m[:, None] < m) & "
                "(offs_n[None, :] < n))", replace="tl.store(c_ptrs, acc)",
                says="wrote past the end"),
    ],
}
