"""Vector add: the answers to exercises.py, and the classic mistakes its checks catch.

    TRITON_INTERPRET=1 python exercises.py --solutions   # these answers pass
"""

import sys
from pathlib import Path

import triton
import triton.language as tl

sys.path.append(str(Path(__file__).resolve().parent.parent))  # practice.py, in the repo
from vector_add import add_kernel  # noqa: E402

from practice import Mistake  # noqa: E402


# snippet: axpy
@triton.jit
def axpy_kernel(a, x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, a * x + y, mask=mask)


# end snippet


# snippet: grid
def add_into(x, y, out, block_size):
    n = x.numel()
    grid = (triton.cdiv(n, block_size),)  # the last, partial block gets a program
    add_kernel[grid](x, y, out, n, BLOCK_SIZE=block_size)


# end snippet


# Each mistake is an edit of this file's text; the check must fail it and say `says`.
MISTAKES = {
    "axpy": [
        Mistake("the store without its mask", find="a * x + y, mask=mask)",
                replace="a * x + y)", says="wrote past the end"),
        Mistake("one lane too many", find="mask = offsets < n",
                replace="mask = offsets <= n", says="wrote past the end"),
        Mistake("every program on the first block", find="offsets = pid * BLOCK + ",
                replace="offsets = ", says="never written"),
    ],
    "grid": [
        Mistake("a grid that misses the last block", find="triton.cdiv(n, block_size)",
                replace="n // block_size", says="never written"),
        Mistake("an off-by-one bound", find="add_kernel[grid](x, y, out, n,",
                replace="add_kernel[grid](x, y, out, n - 1,", says="never written"),
    ],
}
