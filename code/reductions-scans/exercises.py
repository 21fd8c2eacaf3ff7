"""Reductions and scans: exercises. Fill in each "Your code here", then check them:

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
from reductions_scans import add  # noqa: E402, F401  (the combine function, for a scan)

import practice  # noqa: E402


# snippet: row-max
@triton.jit
def row_max_kernel(X, Out, N, stride, BLOCK: tl.constexpr):
    """Out[row] = the maximum of row `row` of X: N values, the rows `stride`
    elements apart. One program per row; a row may be longer than BLOCK, so the
    program walks it BLOCK columns at a time (a `while` loop, as the lesson's
    kernels), keeping a running maximum of each lane and reducing across the
    lanes once, at the end.

    The rows are negative numbers. What must a masked lane load, and where must
    the running maximum start, so that neither ever wins?
    """
    # Your code here.
    pass


# end snippet


# snippet: check-row-max
@practice.exercise("row-max", hint="the neutral element of max is -inf: "
                   "other=float(\"-inf\") on the load and an accumulator that starts "
                   "at -inf; walk the row while start < N, so that the last, partial "
                   "block counts too, with the mask cols < N")
def check_row_max(m):
    for rows, n in ((4, 1000), (3, 300), (2, 77)):  # blocks of 256: ragged rows
        data = -(torch.rand(rows, n) + 0.25)  # every value below 0
        x = practice.guarded(data, gap=9)  # rows n + 9 apart
        out = practice.output(rows)
        m.row_max_kernel[(rows,)](x, out, n, x.stride(0), BLOCK=256)
        # A maximum picks one of its inputs: exact.
        practice.expect("out", out, data.amax(dim=1),
                        case=f"{rows} rows of {n}, stride {x.stride(0)}, BLOCK = 256")


# end snippet


# snippet: exclusive-cumsum
@triton.jit
def exclusive_cumsum_kernel(X, Y, N, stride_x, stride_y, BLOCK: tl.constexpr):
    """Y[row, i] = X[row, 0] + ... + X[row, i - 1], the sum of what comes
    *before* element i (Y[row, 0] = 0): an exclusive prefix sum, as a
    sort or a stream compaction needs for its output offsets. X's rows are
    stride_x apart, Y's stride_y. One program per row, walked BLOCK columns at a
    time (a `while` loop), with a carry from block to block.

    tl.associative_scan(x, 0, add) gives the inclusive sums of one block (each
    element counted in its own sum); `add` is the lesson's combine function.
    """
    # Your code here.
    pass


# end snippet


# snippet: check-exclusive-cumsum
@practice.exercise("exclusive-cumsum", hint="the inclusive scan minus the element "
                   "itself, plus the carry of the blocks before: "
                   "s = tl.associative_scan(x, 0, add); store s - x + carry, then "
                   "carry += tl.sum(x, axis=0); mask cols < N on the load and store")
def check_exclusive_cumsum(m):
    for rows, n in ((3, 1000), (2, 256), (4, 5)):  # blocks of 256
        data = torch.rand(rows, n) * 1.5 - 0.5
        x = practice.guarded(data, gap=3)
        y = practice.output(rows, n, gap=5)
        m.exclusive_cumsum_kernel[(rows,)](x, y, n, x.stride(0), y.stride(0), BLOCK=256)
        want = data.double().cumsum(dim=1) - data.double()  # what comes before
        # n float32 additions: 1e-5 relative to sums that grow like n / 4.
        practice.expect("y", y, want, rtol=1e-5, atol=1e-5 * n,
                        case=f"{rows} rows of {n}, BLOCK = 256")


# end snippet


if __name__ == "__main__":
    sys.exit(practice.main())
