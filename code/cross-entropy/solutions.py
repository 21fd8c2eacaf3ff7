"""Cross-entropy: the answers to exercises.py, and the mistakes its checks catch.

    TRITON_INTERPRET=1 python exercises.py --solutions   # these answers pass
"""

import sys
from pathlib import Path

import triton
import triton.language as tl

sys.path.append(str(Path(__file__).resolve().parent.parent))  # practice.py, in the repo
from practice import Mistake  # noqa: E402


# snippet: online-lse
@triton.jit
def row_loss_kernel(X, stride, T, Loss, V, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_row = X + row * stride
    offs = tl.arange(0, BLOCK)
    m = float("-inf")
    d = 0.0
    start = 0
    while start < V:
        cols = start + offs
        # Padding lanes hold -inf: never the max, and exp(-inf) adds 0.
        x = tl.load(x_row + cols, mask=cols < V, other=float("-inf"))
        m_new = tl.maximum(m, tl.max(x, axis=0))
        # The blocks before were summed relative to the old maximum.
        d = d * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
        start += BLOCK
    x_y = tl.load(x_row + tl.load(T + row))
    tl.store(Loss + row, m + tl.log(d) - x_y)


# end snippet


# snippet: grad-in-place
@triton.jit
def grad_kernel(X, stride, T, Lse, Denom, V, ignore_index, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    row_ptr = X + row * stride
    offs = tl.arange(0, BLOCK)
    y = tl.load(T + row)
    lse = tl.load(Lse + row)
    scale = 1.0 / tl.load(Denom).to(tl.float32)
    start = 0
    while start < V:
        cols = start + offs
        mask = cols < V
        x = tl.load(row_ptr + cols, mask=mask, other=0.0)
        g = tl.exp(x - lse) * scale - tl.where(cols == y, scale, 0.0)
        # A padding row's gradient is 0: written, over its logits.
        g = tl.where(y == ignore_index, 0.0, g)
        tl.store(row_ptr + cols, g, mask=mask)
        start += BLOCK


# end snippet


# Each mistake is an edit of this file's text; the check must fail it and say `says`.
MISTAKES = {
    "online-lse": [
        Mistake("no max subtracted", find="m_new = tl.maximum(m, tl.max(x, axis=0))",
                replace="m_new = 0.0", says="+ 100.0"),
        Mistake("d not rescaled when the maximum grows", find="d = d * tl.exp(m - "
                "m_new) + ", replace="d = d + ", says="wrong at"),
        Mistake("padding lanes loaded as 0", find='other=float("-inf"))',
                replace="other=0.0)", says="wrong at"),
        Mistake("rows taken as V apart, not stride", find="x_row = X + row * stride",
                replace="x_row = X + row * V", says="wrong at"),
    ],
    "grad-in-place": [
        Mistake("the padding rows left holding their logits",
                find="g = tl.where(y == ignore_index, 0.0, g)", replace="g = g",
                says="wrong at"),
        Mistake("the one-hot at the block's offset, not the column",
                find="tl.where(cols == y,", replace="tl.where(offs == y,",
                says="wrong at"),
        Mistake("the store without its mask", find="tl.store(row_ptr + cols, g, "
                "mask=mask)", replace="tl.store(row_ptr + cols, g)",
                says="wrote past the end"),
        Mistake("the sum's gradient, not the mean's",
                find="scale = 1.0 / tl.load(Denom).to(tl.float32)",
                replace="scale = 1.0", says="wrong at"),
    ],
}
