"""Low-memory dropout: the answers to exercises.py, and the mistakes its checks catch.

    TRITON_INTERPRET=1 python exercises.py --solutions   # these answers pass
"""

import sys
from pathlib import Path

import triton
import triton.language as tl

sys.path.append(str(Path(__file__).resolve().parent.parent))  # practice.py, in the repo
from practice import Mistake  # noqa: E402


# snippet: chunk
@triton.jit
def chunk_kernel(x_ptr, out_ptr, n, start, p, scale, seed, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    r = tl.rand(seed, start + offsets)  # the element's index in the whole tensor
    kept = r > p
    tl.store(out_ptr + offsets, tl.where(kept, x * scale, 0.0), mask=mask)


# end snippet


# snippet: rows
@triton.jit
def rows_kernel(x_ptr, out_ptr, n_cols, x_stride, out_stride, p, scale, seed,
                BLOCK: tl.constexpr):
    row = tl.program_id(axis=0)
    cols = tl.program_id(axis=1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask)  # where it sits
    r = tl.rand(seed, row * n_cols + cols)  # which number it gets
    y = tl.where(r > p, x * scale, 0.0)
    tl.store(out_ptr + row * out_stride + cols, y, mask=mask)


# end snippet


# snippet: four-words
@triton.jit
def four_words_kernel(x_ptr, out_ptr, n, p, scale, seed, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    counters = pid * (BLOCK // 4) + tl.arange(0, BLOCK // 4)
    r0, r1, r2, r3 = tl.rand4x(seed, counters)
    r = tl.interleave(tl.interleave(r0, r2), tl.interleave(r1, r3))
    keep = r > p
    tl.store(out_ptr + offsets, tl.where(keep, x * scale, 0.0), mask=mask)


# end snippet


# Each mistake is an edit of this file's text; the check must fail it and say `says`.
MISTAKES = {
    "chunk": [
        Mistake("counting from the chunk, not the whole",
                find="tl.rand(seed, start + offsets)", replace="tl.rand(seed, offsets)",
                says="wrong at"),
        Mistake("kept where the number is below p", find="kept = r > p",
                replace="kept = r < p", says="wrong at"),
        Mistake("the store without its mask",
                find="tl.where(kept, x * scale, 0.0), mask=mask)",
                replace="tl.where(kept, x * scale, 0.0))", says="wrote past the end"),
    ],
    "rows": [
        Mistake("the counter taken from the address",
                find="tl.rand(seed, row * n_cols + cols)",
                replace="tl.rand(seed, row * x_stride + cols)", says="wrong at"),
        Mistake("the output stepped with x's stride",
                find="out_ptr + row * out_stride", replace="out_ptr + row * x_stride",
                says="wrote past the end"),
        Mistake("the store without its column mask", find="cols, y, mask=mask)",
                replace="cols, y)", says="wrote past the end"),
    ],
    "four-words": [
        Mistake("the four words in the wrong order",
                find="tl.interleave(tl.interleave(r0, r2), tl.interleave(r1, r3))",
                replace="tl.interleave(tl.interleave(r0, r1), tl.interleave(r2, r3))",
                says="wrong at"),
        Mistake("every program on the first block's counters",
                find="counters = pid * (BLOCK // 4) + ", replace="counters = ",
                says="wrong at"),
    ],
}
