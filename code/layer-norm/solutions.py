"""Layer norm: the answers to exercises.py, and the classic mistakes its checks catch.

    TRITON_INTERPRET=1 python exercises.py --solutions   # these answers pass
"""

import sys
from pathlib import Path

import triton
import triton.language as tl

sys.path.append(str(Path(__file__).resolve().parent.parent))  # practice.py, in the repo
from practice import Mistake  # noqa: E402


# snippet: row-stats
@triton.jit
def row_stats_kernel(X, Mean, Rstd, stride, N, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(X + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / N
    # The padding lanes hold 0 - mean now: put them back to 0 before squaring.
    xc = tl.where(mask, x - mean, 0.0)
    var = tl.sum(xc * xc, axis=0) / N
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, 1.0 / tl.sqrt(var + eps))


# end snippet


# snippet: partial-sums
@triton.jit
def partial_sums_kernel(DY, XHAT, DW_part, DB_part, stride, M, N, ROWS_PER_PROGRAM,
                        BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    col_ok = cols < N
    dw = tl.zeros((BLOCK_N,), dtype=tl.float32)
    db = tl.zeros((BLOCK_N,), dtype=tl.float32)
    first = pid * ROWS_PER_PROGRAM
    last = tl.minimum(first + ROWS_PER_PROGRAM, M)  # the last slice is shorter
    for row in range(first, last):
        dy = tl.load(DY + row * stride + cols, mask=col_ok, other=0.0)
        xhat = tl.load(XHAT + row * stride + cols, mask=col_ok, other=0.0)
        dw += dy * xhat
        db += dy
    # Row pid of the partial sums is this program's alone: no atomics.
    part = pid * N + cols
    tl.store(DW_part + part, dw, mask=col_ok)
    tl.store(DB_part + part, db, mask=col_ok)


# end snippet


# Each mistake is an edit of this file's text; the check must fail it and say `says`.
MISTAKES = {
    "row-stats": [
        Mistake("the padding left in the variance",
                find="xc = tl.where(mask, x - mean, 0.0)", replace="xc = x - mean",
                says="wrong at"),
        Mistake("one pass: E[x²] - E[x]²", find="var = tl.sum(xc * xc, axis=0) / N",
                replace="var = tl.sum(x * x, axis=0) / N - mean * mean",
                says="around 100.0"),
        Mistake("rows taken as N apart, not stride", find="X + row * stride + cols",
                replace="X + row * N + cols", says="wrong at"),
        Mistake("the mean over the padded block", find="mean = tl.sum(x, axis=0) / N",
                replace="mean = tl.sum(x, axis=0) / BLOCK_N", says="wrong at"),
    ],
    "partial-sums": [
        Mistake("the last slice runs past row M", find="last = tl.minimum(first + "
                "ROWS_PER_PROGRAM, M)", replace="last = first + ROWS_PER_PROGRAM",
                says="wrong at"),
        Mistake("every program on partial row 0", find="part = pid * N + cols",
                replace="part = cols", says="never written"),
        Mistake("the stores without the column mask", find="db, mask=col_ok)",
                replace="db)", says="wrote past the end"),
        Mistake("one row of the next slice too", find="range(first, last)",
                replace="range(first, last + 1)", says="wrong at"),
    ],
}
