"""GELU with libdevice: extern math in a fused elementwise kernel.

`triton.language` has a handful of math functions (exp, log, sin, sqrt,
erf ...). Everything else CUDA's math library offers (erfc, tanh, normcdf,
expm1, log1p, lgamma and about two hundred more) is reached through
libdevice, NVIDIA's math library in LLVM bitcode, which Triton links into
the kernel and inlines: `from triton.language.extra import libdevice`.

The kernel is GEGLU's elementwise half, out = gelu(x + b) * y: a bias add,
an activation and a gated multiply. Eager PyTorch runs it as three kernels
that pass two intermediate tensors through memory; one Triton kernel reads
x and y once and writes out once.

GELU itself, gelu(h) = h * Phi(h) with Phi the normal CDF, can be written
several ways that are equal on paper and not in float32. The textbook form
0.5 h (1 + erf(h / sqrt 2)) cancels catastrophically for negative h;
erfc and normcdf do not.

Run it:
    TRITON_INTERPRET=1 python gelu_libdevice.py   # any machine: checks on the CPU
    python gelu_libdevice.py                      # a CUDA GPU: checks and a timing

Beside it: exercises.py (check your own kernels) and lesson.py (the run the
course records: every form in ulps, the compiled code, GB/s against eager
PyTorch, Liger-Kernel and torch.compile).
"""

import math
import os

import numpy as np
import torch
import triton
import triton.language as tl

# One import serves Triton 3.6 and 3.9 on CUDA: this module holds stubs that
# the compiler replaces with the backend's libdevice (CUDA's or AMD's).
from triton.language.extra import libdevice

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"


# snippet: interpreter-stand-in
def lend_libdevice_to_the_interpreter() -> None:
    """Stand-ins for the libdevice functions this lesson calls.

    The interpreter has no libdevice: in Triton 3.6 and 3.9 alike its
    functions are empty stubs there and return None. Under
    TRITON_INTERPRET=1 we replace them with Python's float64 math, rounded
    to float32. So the interpreter checks the kernels' logic and formulas,
    with functions better than libdevice's; the accuracy of libdevice
    itself is measured only on the GPU.
    """
    from triton.runtime.interpreter import TensorHandle

    def stand_in(f):
        f_elementwise = np.vectorize(f, otypes=[np.float64])

        def call(x):
            data = x.handle.data
            out = f_elementwise(data.astype(np.float64)).astype(data.dtype)
            return tl.core.tensor(TensorHandle(out, x.handle.dtype), x.type)

        return call

    def normcdf(v):
        return 0.5 * math.erfc(-v / math.sqrt(2.0))

    for name, f in (
        ("erf", math.erf),
        ("erfc", math.erfc),
        ("normcdf", normcdf),
        ("tanh", math.tanh),
        ("exp", math.exp),
    ):
        setattr(libdevice, name, stand_in(f))


if INTERPRET:
    lend_libdevice_to_the_interpreter()
# end snippet


# snippet: gelu
SQRT1_2 = tl.constexpr(0.7071067811865476)  # 1 / sqrt(2)
SQRT_2_OVER_PI = tl.constexpr(0.7978845608028654)  # sqrt(2 / pi)


@triton.jit
def gelu(h, FORM: tl.constexpr):
    """GELU of a block of float32 values, written in one of five ways."""
    if FORM == "erf":  # the textbook formula, and PyTorch's
        g = 0.5 * h * (1.0 + libdevice.erf(h * SQRT1_2))
    elif FORM == "erfc":  # 1 + erf(t) = erfc(-t): nothing is subtracted
        g = 0.5 * h * libdevice.erfc(-h * SQRT1_2)
    elif FORM == "normcdf":  # Phi(h) itself
        g = h * libdevice.normcdf(h)
    elif FORM == "tanh":  # approximate="tanh", textbook form
        u = SQRT_2_OVER_PI * (h + 0.044715 * h * h * h)
        g = 0.5 * h * (1.0 + libdevice.tanh(u))
    elif FORM == "sigmoid":  # the same: (1 + tanh u) / 2 = 1 / (1 + e^-2u)
        u = SQRT_2_OVER_PI * (h + 0.044715 * h * h * h)
        g = h / (1.0 + libdevice.exp(-2.0 * u))
    else:  # "none": no activation, the kernel's floor
        g = h
    return g


# end snippet


# snippet: kernel
@triton.jit
def geglu_kernel(
    x_ptr, b_ptr, y_ptr, out_ptr, M, N,
    FORM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    # out = gelu(x + b) * y for M x N row-major x, y and out; b has N.
    rows = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_ok = cols < N
    mask = (rows[:, None] < M) & col_ok[None, :]
    idx = rows[:, None] * N + cols[None, :]
    x = tl.load(x_ptr + idx, mask=mask)
    y = tl.load(y_ptr + idx, mask=mask)
    # One bias row per program, broadcast down the BLOCK_M rows of the tile.
    b = tl.load(b_ptr + cols, mask=col_ok)
    # Everything between the loads and the store stays in registers: the
    # sum, the activation and the product never reach memory.
    out = gelu(x + b[None, :], FORM) * y
    tl.store(out_ptr + idx, out, mask=mask)


# end snippet

# 4 x 512 tiles, 4 warps: 16 elements per thread, four 16-byte loads of x
# and of y each. ptxas gives the normcdf form 40 registers and no spills.
BLOCK_M, BLOCK_N, NUM_WARPS = 4, 512, 4


# snippet: launch
def geglu(x, b, y, form="normcdf", out=None):
    """gelu(x + b) * y in one kernel, for float32 x, y of shape (M, N), b of (N,)."""
    assert x.shape == y.shape and b.shape == (x.shape[1],)
    assert x.is_contiguous() and y.is_contiguous() and x.numel() < 2**31
    M, N = x.shape
    out = torch.empty_like(x) if out is None else out
    grid = (triton.cdiv(N, BLOCK_N), triton.cdiv(M, BLOCK_M))
    geglu_kernel[grid](
        x, b, y, out, M, N,
        FORM=form, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, num_warps=NUM_WARPS,
    )  # fmt: skip
    return out


# end snippet


def self_check() -> None:
    """The kernel against torch and float64, on shapes that leave partial tiles."""
    on_gpu = torch.cuda.is_available() and not INTERPRET
    device = "cuda" if on_gpu else "cpu"
    torch.manual_seed(0)
    for M, N in ((37, 1000), (5, 513), (1, 1)):
        x, y = torch.randn(M, N, device=device), torch.randn(M, N, device=device)
        b = 0.1 * torch.randn(N, device=device)
        h = x + b  # float32, rounded as the kernel rounds it
        # No activation: one rounding for + and one for *, as torch's.
        torch.testing.assert_close(geglu(x, b, y, "none"), h * y, rtol=0, atol=0)
        # Exact GELU in float64, with erfc: no cancellation there either.
        h64 = h.double()
        want = (0.5 * h64 * torch.erfc(-h64 / math.sqrt(2)) * y.double()).float()
        for form in ("erfc", "normcdf"):
            # A few float32 roundings and libdevice's few ulps: 3e-5 relative;
            # 1e-6 absolute where gelu(h) * y is near 0.
            torch.testing.assert_close(geglu(x, b, y, form), want, rtol=3e-5, atol=1e-6)
    print("geglu: with no activation bit for bit against torch; the erfc and "
          "normcdf forms within 3e-5 of float64; on 37x1000, 5x513 and 1x1")
    if on_gpu:
        x, y = torch.randn(8192, 8192, device=device), torch.randn(8192, 8192,
                                                                   device=device)
        b = torch.randn(8192, device=device)
        ms = triton.testing.do_bench(lambda: geglu(x, b, y, "normcdf"))
        print(f"geglu (normcdf), 8192 x 8192 float32: {ms:.3f} ms, "
              f"{12 * x.numel() / ms / 1e6:.0f} GB/s")


if __name__ == "__main__":
    self_check()
