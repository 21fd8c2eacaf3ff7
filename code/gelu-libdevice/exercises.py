"""GELU with libdevice: exercises. Fill in each "Your code here", then check them:

    TRITON_INTERPRET=1 python exercises.py   # any CPU (on a GPU: python exercises.py)

Each exercise prints one line: passed, or what is wrong and a hint. With --only NAME
it checks one; --solutions checks the answers in solutions.py. Under the interpreter
libdevice's functions are the kernels module's stand-ins (float64 math, rounded).
"""

import math
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

sys.path.append(str(Path(__file__).resolve().parent.parent))  # practice.py, in the repo
from gelu_libdevice import SQRT1_2  # noqa: E402  (and the interpreter's stand-ins)

import practice  # noqa: E402


def exact_gelu(h):
    """gelu(h) = h * Phi(h) in float64, with erfc: nothing cancels."""
    h = h.double()
    return 0.5 * h * torch.erfc(-h / math.sqrt(2))


# snippet: stable-gelu
@triton.jit
def gelu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """out = gelu(x), exact GELU, accurate to a few hundred float32 ulps for
    every x in [-10, 10]: in the left tail too, where gelu(x) is as small as
    -7.6e-23 and every digit of it counts.

    This is the textbook formula, and it is right for x >= 0. Find why it
    returns 0 for x below about -5.5, and write it so that it does not.
    """
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    h = tl.load(x_ptr + offsets, mask=mask)
    # Your code here: 1 + erf(t) subtracts two nearly equal numbers for t < 0.
    g = 0.5 * h * (1.0 + libdevice.erf(h * SQRT1_2))
    tl.store(out_ptr + offsets, g, mask=mask)


# end snippet


# snippet: check-stable-gelu
@practice.exercise("stable-gelu", hint="1 + erf(t) = erfc(-t), and erfc computes the "
                   "small tail directly: g = 0.5 * h * libdevice.erfc(-h * SQRT1_2) "
                   "(or h * libdevice.normcdf(h))")
def check_stable_gelu(m):
    x = torch.linspace(-10.0, 10.0, 2001)  # 2001 points: the last block is partial
    out = practice.output(2001)
    m.gelu_kernel[(triton.cdiv(2001, 256),)](practice.guarded(x), out, 2001,
                                            BLOCK=256)
    # Rounding h / sqrt(2) costs up to cond(x) ~ 1 + x^2 ulps in the tail (about
    # 100 at -10), and libdevice's erfc a few more: 3e-5 relative is 250 ulps.
    practice.expect("out", out, exact_gelu(x), rtol=3e-5,
                    case="2001 points on [-10, 10], BLOCK = 256")


# end snippet


# snippet: gelu-grad
@triton.jit
def gelu_grad_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """out = gelu'(x) = Phi(x) + x * phi(x), the derivative GEGLU's backward
    pass needs: Phi the normal CDF (libdevice.normcdf), phi the normal density,
    exp(-x^2 / 2) / sqrt(2 pi). One program per BLOCK elements.
    """
    # Your code here.
    pass


# end snippet


# snippet: check-gelu-grad
@practice.exercise("gelu-grad", hint="pdf = libdevice.exp(-0.5 * h * h) * "
                   "0.3989422804014327 (1 / sqrt(2 pi)); store "
                   "libdevice.normcdf(h) + h * pdf under the mask offsets < n")
def check_gelu_grad(m):
    for n in (1, 1000, 3001):  # blocks of 1024
        x = 4 * torch.randn(n)
        out = practice.output(n)
        m.gelu_grad_kernel[(triton.cdiv(n, 1024),)](practice.guarded(x), out, n,
                                                    BLOCK=1024)
        h = x.double()
        want = 0.5 * torch.erfc(-h / math.sqrt(2)) + h * torch.exp(-0.5 * h * h) / \
            math.sqrt(2 * math.pi)
        # The derivative crosses 0 near x = -0.75, where only an absolute
        # tolerance means anything; elsewhere a few float32 roundings.
        practice.expect("out", out, want, rtol=1e-5, atol=1e-6,
                        case=f"n = {n}, BLOCK = 1024")


# end snippet


if __name__ == "__main__":
    sys.exit(practice.main())
