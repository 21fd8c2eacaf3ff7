"""GELU with libdevice: the answers to exercises.py, and the mistakes its checks catch.

    TRITON_INTERPRET=1 python exercises.py --solutions   # these answers pass
"""

import sys
from pathlib import Path

import triton
import triton.language as tl
from triton.language.extra import libdevice

sys.path.append(str(Path(__file__).resolve().parent.parent))  # practice.py, in the repo
from gelu_libdevice import SQRT1_2  # noqa: E402

from practice import Mistake  # noqa: E402


# snippet: stable-gelu
@triton.jit
def gelu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    h = tl.load(x_ptr + offsets, mask=mask)
    g = 0.5 * h * libdevice.erfc(-h * SQRT1_2)  # 1 + erf(t) = erfc(-t)
    tl.store(out_ptr + offsets, g, mask=mask)


# end snippet


# snippet: gelu-grad
@triton.jit
def gelu_grad_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    h = tl.load(x_ptr + offsets, mask=mask)
    pdf = libdevice.exp(-0.5 * h * h) * 0.3989422804014327  # 1 / sqrt(2 pi)
    tl.store(out_ptr + offsets, libdevice.normcdf(h) + h * pdf, mask=mask)


# end snippet


# Each mistake is an edit of this file's text; the check must fail it and say `says`.
MISTAKES = {
    "stable-gelu": [
        Mistake("the textbook form, 1 + erf", find="libdevice.erfc(-h * SQRT1_2)",
                replace="(1.0 + libdevice.erf(h * SQRT1_2))", says="wrong at"),
        Mistake("erfc of the wrong sign", find="libdevice.erfc(-h * SQRT1_2)",
                replace="libdevice.erfc(h * SQRT1_2)", says="wrong at"),
        Mistake("the store without its mask", find="g, mask=mask)", replace="g)",
                says="wrote past the end"),
    ],
    "gelu-grad": [
        Mistake("Phi alone: the product rule's second term forgotten",
                find="libdevice.normcdf(h) + h * pdf", replace="libdevice.normcdf(h)",
                says="wrong at"),
        Mistake("the density without its 1 / sqrt(2 pi)",
                find=" * 0.3989422804014327", replace="", says="wrong at"),
        Mistake("the store without its mask", find="h * pdf, mask=mask)",
                replace="h * pdf)", says="wrote past the end"),
    ],
}
