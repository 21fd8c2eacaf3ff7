"""Softmax and an FP32 matmul: exercises. Fill in each "Your code here", then check:

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


# snippet: row-softmax
@triton.jit
def row_softmax_kernel(out_ptr, in_ptr, out_stride, in_stride, n_cols,
                       BLOCK: tl.constexpr):
    """out[row] = softmax(in[row]) for the row `tl.program_id(0)`: n_cols values,
    held in one block of BLOCK (the next power of two), rows `in_stride` (and
    `out_stride`) elements apart.

    The rows are checked where it matters: some climb past 88.7, where float32's
    exp overflows, and some hold only negative numbers, in a width that leaves
    masked lanes.
    """
    # Your code here.
    pass


# end snippet


# snippet: check-row-softmax
@practice.exercise("row-softmax", hint="pad the masked lanes with -inf "
                   "(other=-float(\"inf\")): it never wins the max and exp(-inf) = 0 "
                   "adds nothing; subtract the row's max before tl.exp; address row "
                   "r at r * in_stride (and r * out_stride)")
def check_row_softmax(m):
    rows, cols = 12, 1000  # 24 masked lanes in a block of 1024
    # Rows 0-5 all below -1; rows 6-11 shifted up by 20 each, up to about 103.
    shift = torch.tensor([-21.0] * 6 + [20.0 * i for i in range(1, 7)])
    data = torch.randn(rows, cols) + shift[:, None]
    want = torch.softmax(data.double(), dim=1)
    x = practice.guarded(data, gap=7)
    # First into zeros: an inf or a NaN there was computed, not left unwritten.
    out = practice.guarded(torch.zeros(rows, cols), gap=5)
    m.row_softmax_kernel[(rows,)](out, x, out.stride(0), x.stride(0), cols,
                                  BLOCK=1024)
    broken = (~torch.isfinite(out)).any(dim=1).nonzero().flatten().tolist()
    if broken:
        raise practice.Wrong(f"out: inf or NaN in rows {broken} (row maxima "
                             f"{[round(float(data[r].max()), 1) for r in broken]}): "
                             "exp overflowed")
    out = practice.output(rows, cols, gap=5)
    m.row_softmax_kernel[(rows,)](out, x, out.stride(0), x.stride(0), cols,
                                  BLOCK=1024)
    # A sum of 1000 rounded exponentials: 1e-5 relative to the row's values.
    practice.expect("out", out, want, rtol=1e-5, atol=1e-8,
                    case=f"{rows} rows of {cols}, strides {x.stride(0)} and "
                    f"{out.stride(0)}, BLOCK = 1024")


# end snippet


# snippet: matmul-tile
@triton.jit
def matmul_tile_kernel(a_ptr, b_ptr, c_ptr, m, n, k,
                       stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
                       stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                       BLOCK_K: tl.constexpr):
    """C = A @ B in FP32 (A is m x k, B is k x n, any strides): the program
    (tl.program_id(0), tl.program_id(1)) computes one BLOCK_M x BLOCK_N tile of
    C, walking K in steps of BLOCK_K with an FP32 accumulator and
    tl.dot(..., input_precision="ieee").

    m, n and k are not multiples of the blocks, and B arrives column-major:
    masks on every load and on the store, and strides for every address.
    """
    # Your code here.
    pass


# end snippet


# snippet: check-matmul-tile
@practice.exercise("matmul-tile", hint="offs_k = tl.arange(0, BLOCK_K); each step "
                   "loads A at offs_m[:, None] * stride_am + (k0 + offs_k)[None, :] * "
                   "stride_ak and B at (k0 + offs_k)[:, None] * stride_bk + "
                   "offs_n[None, :] * stride_bn, masked on rows, columns and "
                   "k0 + offs_k < k (other=0.0); store under (rows < m) & (cols < n)")
def check_matmul_tile(m):
    for (rows, cols, depth) in ((70, 50, 100), (33, 65, 16)):  # tiles of 32 x 32 x 16
        a_data, b_data = torch.randn(rows, depth), torch.randn(depth, cols)
        a = practice.guarded(a_data, gap=3)
        b = practice.guarded(b_data.t(), gap=5).t()  # column-major: stride (1, k + 5)
        c = practice.output(rows, cols, gap=2)
        grid = (triton.cdiv(rows, 32), triton.cdiv(cols, 32))
        m.matmul_tile_kernel[grid](a, b, c, rows, cols, depth, a.stride(0),
                                   a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                                   c.stride(1), BLOCK_M=32, BLOCK_N=32, BLOCK_K=16)
        want = a_data.double() @ b_data.double()
        # k FP32 products and sums: 1e-5 of the largest value (tf32 misses it
        # by far on a GPU; the interpreter computes either in FP32).
        practice.expect("c", c, want, rtol=1e-5, atol=1e-5 * float(want.abs().max()),
                        case=f"{rows} x {depth} @ {depth} x {cols}, B column-major, "
                        "tiles 32 x 32 x 16")


# end snippet


if __name__ == "__main__":
    sys.exit(practice.main())
