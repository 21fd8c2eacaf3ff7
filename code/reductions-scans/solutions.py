"""Reductions and scans: the answers to exercises.py, and the mistakes its checks catch.

    TRITON_INTERPRET=1 python exercises.py --solutions   # these answers pass
"""

import sys
from pathlib import Path

import triton
import triton.language as tl

sys.path.append(str(Path(__file__).resolve().parent.parent))  # practice.py, in the repo
from reductions_scans import add  # noqa: E402

from practice import Mistake  # noqa: E402


# snippet: row-max
@triton.jit
def row_max_kernel(X, Out, N, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    acc = tl.full((BLOCK,), float("-inf"), tl.float32)  # max's neutral element
    start = 0
    while start < N:  # the last, partial block included
        c = start + cols
        x = tl.load(X + row * stride + c, mask=c < N, other=float("-inf"))
        acc = tl.maximum(acc, x)
        start += BLOCK
    tl.store(Out + row, tl.max(acc, axis=0))


# end snippet


# snippet: exclusive-cumsum
@triton.jit
def exclusive_cumsum_kernel(X, Y, N, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    carry = 0.0  # the sum of the blocks before this one
    start = 0
    while start < N:
        c = start + cols
        mask = c < N
        x = tl.load(X + row * stride_x + c, mask=mask, other=0.0)
        s = tl.associative_scan(x, 0, add)  # inclusive: x[0] + ... + x[i]
        tl.store(Y + row * stride_y + c, s - x + carry, mask=mask)
        carry += tl.sum(x, axis=0)
        start += BLOCK


# end snippet


# Each mistake is an edit of this file's text; the check must fail it and say `says`.
MISTAKES = {
    "row-max": [
        Mistake("0 as the padding of a maximum", find='other=float("-inf"))',
                replace="other=0.0)", says="wrong at"),
        Mistake("the running maximum starts at 0",
                find='tl.full((BLOCK,), float("-inf"), tl.float32)',
                replace="tl.zeros((BLOCK,), tl.float32)", says="wrong at"),
        Mistake("a loop that misses the last, partial block",
                find="while start < N:  # the last",
                replace="while start + BLOCK <= N:  # the last", says="wrong at"),
        Mistake("rows stepped by N, not by their stride", find="X + row * stride + c",
                replace="X + row * N + c", says="wrong at"),
    ],
    "exclusive-cumsum": [
        Mistake("inclusive, not exclusive (off by one element)",
                find="s - x + carry, mask=mask)", replace="s + carry, mask=mask)",
                says="wrong at"),
        Mistake("the carry replaced, not added to", find="carry += tl.sum(x, axis=0)",
                replace="carry = tl.sum(x, axis=0)", says="wrong at"),
        Mistake("the store without its mask", find="s - x + carry, mask=mask)",
                replace="s - x + carry)", says="wrote past the end"),
    ],
}
