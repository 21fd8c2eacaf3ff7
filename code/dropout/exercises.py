"""Low-memory dropout: exercises. Fill in each "Your code here", then check them:

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
from dropout import dropout  # noqa: E402

P, SEED = 0.3, 1234
SCALE = 1.0 / (1.0 - P)  # passed as a float32, as dropout() passes it


# snippet: chunk
@triton.jit
def chunk_kernel(x_ptr, out_ptr, n, start, p, scale, seed, BLOCK: tl.constexpr):
    """Dropout of x[0:n], which holds elements start .. start + n - 1 of a longer
    tensor, so that the chunks of a tensor drop what dropout() of the whole drops.

    Element i of the chunk is element start + i of the whole, and its number is
    Philox's for (seed, start + i). Keep it where that number exceeds p, scaled
    by `scale`, else 0; one program per BLOCK elements of the chunk.
    """
    # Your code here.
    pass


# end snippet


# snippet: check-chunk
@practice.exercise("chunk", hint="the counter is the element's index in the whole "
                   "tensor: r = tl.rand(seed, start + offsets), kept = r > p, and "
                   "the mask offsets < n on the load and on the store")
def check_chunk(m):
    whole = torch.randn(5000, device=practice.DEVICE)
    want = dropout(whole, P, SEED, four=False)  # the whole tensor at once
    for start, n in ((0, 1000), (1000, 2500), (3500, 1500)):  # blocks of 256
        x = practice.guarded(whole[start:start + n])
        out = practice.output(n)
        grid = (triton.cdiv(n, 256),)
        m.chunk_kernel[grid](x, out, n, start, P, SCALE, SEED, BLOCK=256)
        practice.expect("out", out, want[start:start + n],
                        case=f"the chunk at {start} of {n} elements, BLOCK = 256")


# end snippet


# snippet: rows
@triton.jit
def rows_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, p, scale, seed,
                BLOCK: tl.constexpr):
    """Dropout of a 2-D tensor whose rows are x_stride elements apart (out's
    out_stride), drawing the mask dropout() draws for x.contiguous(): element
    (row, col) is element row * n_cols + col there.

    One program per row and block of BLOCK columns: the grid is
    (rows, cdiv(n_cols, BLOCK)). Where (row, col) sits in memory is one thing;
    which number Philox gives it is another.
    """
    # Your code here.
    pass


# end snippet


# snippet: check-rows
@practice.exercise("rows", hint="address and counter differ: load at "
                   "row * x_stride + cols, store at row * out_stride + cols, but "
                   "draw tl.rand(seed, row * n_cols + cols); mask cols < n_cols")
def check_rows(m):
    for rows, cols in ((3, 700), (4, 300)):  # blocks of 256 columns
        data = torch.randn(rows, cols, device=practice.DEVICE)
        x = practice.guarded(data, gap=5)  # rows cols + 5 apart
        out = practice.output(rows, cols, gap=3)  # and cols + 3 apart
        grid = (rows, triton.cdiv(cols, 256))
        m.rows_kernel[grid](x, out, cols, x.stride(0), out.stride(0), P, SCALE, SEED,
                            BLOCK=256)
        practice.expect("out", out, dropout(data, P, SEED, four=False),
                        case=f"{rows} x {cols}, strides {x.stride(0)} and "
                        f"{out.stride(0)}, BLOCK = 256")


# end snippet


# snippet: four-words
@triton.jit
def four_words_kernel(x_ptr, out_ptr, n, p, scale, seed, BLOCK: tl.constexpr):
    """dropout_kernel with a quarter of the Philox evaluations: one
    tl.rand4x(seed, k) serves four elements, element 4k + j taking word j of
    counter k, so that the mask is dropout(x, p, seed, four=True)'s.
    """
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    # Your code here: this block's counters, tl.rand4x, and its four words laid
    # out one per element. tl.rand (one evaluation per element) draws another mask.
    r = tl.rand(seed, offsets)
    keep = r > p
    tl.store(out_ptr + offsets, tl.where(keep, x * scale, 0.0), mask=mask)


# end snippet


# snippet: check-four-words
@practice.exercise("four-words", hint="counters = pid * (BLOCK // 4) + "
                   "tl.arange(0, BLOCK // 4); r0, r1, r2, r3 = tl.rand4x(seed, "
                   "counters); tl.interleave(a, b) is a0 b0 a1 b1 ..., so "
                   "interleave the interleaved pairs (r0, r2) and (r1, r3)")
def check_four_words(m):
    for n in (1, 1000, 4097):  # blocks of 256: the last one is partial
        x = practice.guarded(torch.randn(n))
        out = practice.output(n)
        m.four_words_kernel[(triton.cdiv(n, 256),)](x, out, n, P, SCALE, SEED,
                                                    BLOCK=256)
        practice.expect("out", out, dropout(x, P, SEED, four=True),
                        case=f"n = {n}, BLOCK = 256")


# end snippet


if __name__ == "__main__":
    sys.exit(practice.main())
