"""Debugging and profiling: the fixes to exercises.py, and the mistakes it catches.

    TRITON_INTERPRET=1 python exercises.py --solutions   # these answers pass
"""

import sys
from pathlib import Path

import triton
import triton.language as tl

sys.path.append(str(Path(__file__).resolve().parent.parent))  # practice.py, in the repo
from practice import Mistake  # noqa: E402


# snippet: wrong-stride
@triton.jit
def scale_rows_kernel(x_ptr, out_ptr, scale_ptr, n_cols, x_row_stride,
                      BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    offs = row * x_row_stride + cols  # the fix: x's rows are x_row_stride apart
    x = tl.load(x_ptr + offs, mask=mask)
    s = tl.load(scale_ptr + row)
    tl.store(out_ptr + row * n_cols + cols, x * s, mask=mask)


# end snippet


# snippet: out-of-bounds
@triton.jit
def copy_tile_kernel(x_ptr, out_ptr, rows, cols, stride_x, stride_out,
                     BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    mask = (r < rows)[:, None] & (c < cols)[None, :]  # the fix: both edges
    x = tl.load(x_ptr + r[:, None] * stride_x + c[None, :], mask=mask)
    tl.store(out_ptr + r[:, None] * stride_out + c[None, :], x, mask=mask)


# end snippet


# snippet: stencil-ring
def consumer(ring, t):
    s = t % ring.stages
    ring.wait_ready(s, t)
    ring.read(s, t)
    if t > 0:
        prev = (t - 1) % ring.stages
        ring.read(prev, t - 1)
    release = t - 1  # the tile whose last read is done: its slot may be refilled
    if release >= 0:
        ring.arrive_empty(release % ring.stages, release)


# end snippet


# Each mistake is an edit of this file's text; the check must fail it and say `says`.
MISTAKES = {
    "wrong-stride": [
        Mistake("the row's start from the number of columns",
                find="offs = row * x_row_stride + cols",
                replace="offs = row * n_cols + cols", says="wrong at"),
        Mistake("the store without its mask", find="x * s, mask=mask)",
                replace="x * s)", says="wrote past the end"),
        Mistake("every row scaled by row 0's factor", find="tl.load(scale_ptr + row)",
                replace="tl.load(scale_ptr)", says="wrong at"),
        Mistake("out's rows taken as x's", find="out_ptr + row * n_cols",
                replace="out_ptr + row * x_row_stride", says="wrote past the end"),
    ],
    "out-of-bounds": [
        Mistake("the column mask forgotten", find="(r < rows)[:, None] & (c < cols)"
                "[None, :]", replace="(r < rows)[:, None]", says="wrote past the end"),
        Mistake("one row too many", find="(r < rows)[:, None] &",
                replace="(r <= rows)[:, None] &", says="wrote past the end"),
        Mistake("out's rows taken as x's", find="out_ptr + r[:, None] * stride_out",
                replace="out_ptr + r[:, None] * stride_x", says="wrote past the end"),
        Mistake("the mask on the load only", find="x, mask=mask)",
                replace="x)", says="wrote past the end"),
    ],
    "stencil-ring": [
        Mistake("tile t - 1's slot released before its second read",
                find="ring.read(prev, t - 1)",
                replace="ring.arrive_empty(prev, t - 1)\n"
                "        ring.read(prev, t - 1)",
                says="race"),
        Mistake("tile t's slot released after its first read", find="release = t - 1",
                replace="release = t", says="race"),
        Mistake("tile t read before its copy has landed", find="ring.wait_ready(s, t)",
                replace="pass", says="race"),
        Mistake("a slot never released",
                find="ring.arrive_empty(release % ring.stages, release)",
                replace="pass", says="deadlock"),
    ],
}
