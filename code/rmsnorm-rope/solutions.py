"""RMSNorm + RoPE: the answers to exercises.py, and the mistakes its checks catch.

    TRITON_INTERPRET=1 python exercises.py --solutions   # these answers pass
"""

import sys
from pathlib import Path

import triton
import triton.language as tl

sys.path.append(str(Path(__file__).resolve().parent.parent))  # practice.py, in the repo
from practice import Mistake  # noqa: E402


# snippet: rope
@triton.jit
def rope_kernel(X, Cos, Sin, Pos, Out, n_rows, H, stride_xt, stride_xh,
                HALF: tl.constexpr, BLOCK_HALF: tl.constexpr, ROWS: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_HALF)
    tok = rows // H
    head = rows % H
    row_ok = rows < n_rows
    mask = row_ok[:, None] & (cols < HALF)[None, :]
    x_ptr = X + tok[:, None] * stride_xt + head[:, None] * stride_xh + cols[None, :]
    x1 = tl.load(x_ptr, mask=mask, other=0.0)
    x2 = tl.load(x_ptr + HALF, mask=mask, other=0.0)
    # The angle is the token's, whichever head: every head reads the same row.
    pos = tl.load(Pos + tok, mask=row_ok, other=0)
    cs = pos[:, None] * HALF + cols[None, :]
    c = tl.load(Cos + cs, mask=mask, other=0.0)
    s = tl.load(Sin + cs, mask=mask, other=0.0)
    o_ptr = Out + rows[:, None] * (2 * HALF) + cols[None, :]
    tl.store(o_ptr, x1 * c - x2 * s, mask=mask)
    tl.store(o_ptr + HALF, x2 * c + x1 * s, mask=mask)


# end snippet


# snippet: interleaved
@triton.jit
def rmsnorm_rope_interleaved_kernel(X, W, Cos, Sin, Pos, Out, n_rows, H, eps,
                                    D: tl.constexpr, ROWS: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_ok = rows < n_rows
    cols = tl.arange(0, D)
    offs = rows[:, None] * D + cols[None, :]
    x = tl.load(X + offs, mask=row_ok[:, None], other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=1) / D + eps)
    n = x * rstd[:, None] * tl.load(W + cols).to(tl.float32)[None, :]
    # (ROWS, D) -> (ROWS, D/2, 2): the last dimension holds a pair; split it.
    even, odd = tl.split(tl.reshape(n, (ROWS, D // 2, 2)))
    pos = tl.load(Pos + rows // H, mask=row_ok, other=0)
    cs = pos[:, None] * (D // 2) + tl.arange(0, D // 2)[None, :]
    c = tl.load(Cos + cs, mask=row_ok[:, None], other=0.0)
    s = tl.load(Sin + cs, mask=row_ok[:, None], other=0.0)
    out = tl.join(even * c - odd * s, odd * c + even * s)
    tl.store(Out + offs, tl.reshape(out, (ROWS, D)).to(Out.dtype.element_ty),
             mask=row_ok[:, None])


# end snippet


# Each mistake is an edit of this file's text; the check must fail it and say `says`.
MISTAKES = {
    "rope": [
        Mistake("x taken as contiguous",
                find="tok[:, None] * stride_xt + head[:, None] * stride_xh",
                replace="rows[:, None] * (2 * HALF)", says="wrong at"),
        Mistake("the position of the row, not of the token", find="Pos + tok, mask",
                replace="Pos + rows, mask", says="wrong at"),
        Mistake("the second half at the block's width",
                find="x2 = tl.load(x_ptr + HALF",
                replace="x2 = tl.load(x_ptr + BLOCK_HALF", says="wrong at"),
        Mistake("the rotation's sign flipped", find="x1 * c - x2 * s",
                replace="x1 * c + x2 * s", says="wrong at"),
    ],
    "interleaved": [
        Mistake("rotate-half's pairs, not neighbours", find="tl.split(tl.reshape(n, "
                "(ROWS, D // 2, 2)))", replace="tl.split(tl.permute(tl.reshape(n, "
                "(ROWS, 2, D // 2)), (0, 2, 1)))", says="wrong at"),
        Mistake("the store without its row mask", find="(ROWS, D)).to(Out.dtype."
                "element_ty),\n             mask=row_ok[:, None])",
                replace="(ROWS, D)).to(Out.dtype.element_ty))",
                says="wrote past the end"),
        Mistake("every head at the position of row, not token", find="Pos + rows // H",
                replace="Pos + rows", says="wrong at"),
        Mistake("the mean of squares over half the head", find="tl.sum(x * x, axis=1) "
                "/ D", replace="tl.sum(x * x, axis=1) / (D // 2)", says="wrong at"),
    ],
}
