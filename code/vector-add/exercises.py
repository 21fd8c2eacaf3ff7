"""Vector add: exercises. Fill in each "Your code here", then check your answers:

    TRITON_INTERPRET=1 python exercises.py   # any CPU (on a GPU: python exercises.py)

Each exercise prints one line: passed, or what is wrong and a hint. With --only NAME
it checks one; --solutions checks the answers in solutions.py, where the classic
mistakes the checks catch are listed (the lesson's page says how many were caught).
"""

import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.append(str(Path(__file__).resolve().parent.parent))  # practice.py, in the repo
from vector_add import add_kernel  # noqa: E402

import practice  # noqa: E402


# snippet: axpy
@triton.jit
def axpy_kernel(a, x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """out[i] = a * x[i] + y[i] for every i < n, one block of BLOCK per program.

    Write it as add_kernel is written: this program's offsets, a mask for the
    last, partial block, two loads and one store.
    """
    # Your code here.
    pass


# end snippet


# snippet: check-axpy
@practice.exercise("axpy", hint="offsets = pid * BLOCK + tl.arange(0, BLOCK), and "
                   "mask = offsets < n on both loads and on the store")
def check_axpy(m):
    for n in (1, 200, 1000):  # blocks of 128: the last one is partial
        x, y = practice.guarded(torch.rand(n)), practice.guarded(torch.rand(n))
        out = practice.output(n)
        m.axpy_kernel[(triton.cdiv(n, 128),)](-0.5, x, y, out, n, BLOCK=128)
        # -0.5 * x is exact, so out must equal torch's bit for bit.
        practice.expect("out", out, -0.5 * x + y, case=f"n = {n}, BLOCK = 128")


# end snippet


# snippet: grid
def add_into(x, y, out, block_size):
    """Launch add_kernel so that out = x + y, for any size, in blocks of block_size.

    How many programs does the grid need, so that the last, partial block gets
    one too?
    """
    n = x.numel()
    grid = (1,)  # Your code here: one program is not enough.
    add_kernel[grid](x, y, out, n, BLOCK_SIZE=block_size)


# end snippet


# snippet: check-grid
@practice.exercise("grid", hint="one program per block, rounding up: "
                   "grid = (triton.cdiv(n, block_size),)")
def check_grid(m):
    for n, block in ((1, 64), (1000, 256), (1537, 256), (2048, 512)):
        x, y = practice.guarded(torch.rand(n)), practice.guarded(torch.rand(n))
        out = practice.output(n)
        m.add_into(x, y, out, block)
        practice.expect("out", out, x + y, case=f"n = {n}, block_size = {block}")
    return lambda: m.add_into(x, y, out, 512)  # timed on a GPU


# end snippet


if __name__ == "__main__":
    sys.exit(practice.main())
