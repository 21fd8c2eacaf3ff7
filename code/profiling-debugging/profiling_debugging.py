"""Debugging and profiling: the kernels, fixed.

The lesson plants one bug of each kind in small kernels (specimens.py holds
them, each next to what goes wrong) and finds them with the tools. These are
the kernels once fixed, as a reader would keep them:

1. scale_rows: each row of a matrix times its own factor, for a matrix whose
   rows may be padded (a view of a wider one): a row starts at
   row * x_row_stride, never at row * n_cols;
2. fill_fixed: a fill whose mask stops at the tensor's end;
3. copy_kernel and strided_copy_kernel: two copies whose loads the compiler
   makes 16 bytes wide, or cannot, depending on what it can prove.

Run it:
    TRITON_INTERPRET=1 python profiling_debugging.py   # any machine: checks on the CPU
    python profiling_debugging.py                      # a CUDA GPU: checks, a timing

Beside it: specimens.py (the planted bugs, and a command line that runs one
in a process of its own), race_model.py (what a race checker sees),
exercises.py (find and fix bugs yourself) and lesson.py (the run the course
records, with the tools: the debugger, compute-sanitizer, Nsight Compute,
Proton).
"""

import os

import torch
import triton
import triton.language as tl

# -- Step 1: the row stride ----------------------------------------------------------


# snippet: fixed-kernel
@triton.jit
def scale_rows(x_ptr, out_ptr, scale_ptr, n_cols, x_row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask)  # the fix
    s = tl.load(scale_ptr + row)
    tl.store(out_ptr + row * n_cols + cols, x * s, mask=mask)


# end snippet


def scale(kernel, x: torch.Tensor, s: torch.Tensor, **meta) -> torch.Tensor:
    """out = x * s[:, None] for a matrix x whose rows may be padded."""
    rows, n_cols = x.shape
    assert x.stride(1) == 1, "the kernels assume contiguous columns"
    out = torch.empty(rows, n_cols, device=x.device, dtype=x.dtype)
    block = triton.next_power_of_2(n_cols)
    kernel[(rows,)](x, out, s, n_cols, x.stride(0), BLOCK=block, **meta)
    return out


# -- Step 2: a mask that stops at the end ------------------------------------------

EXTRA = 64  # how far past the end the planted mask reaches, in elements


# snippet: fixed-store
@triton.jit
def fill_fixed(out_ptr, n, value, BLOCK: tl.constexpr, EXTRA: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, value, mask=mask)


# end snippet

FILL_BLOCK = 256


def fill(kernel, out: torch.Tensor, value: float) -> None:
    """Launch enough programs to cover the planted mask's reach too."""
    n = out.numel()
    grid = (triton.cdiv(n + EXTRA, FILL_BLOCK),)
    kernel[grid](out, n, value, BLOCK=FILL_BLOCK, EXTRA=EXTRA)


# -- Steps 4 and 5: a copy, contiguous or strided --------------------------------


# snippet: copy-kernels
@triton.jit
def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


@triton.jit
def strided_copy_kernel(x_ptr, out_ptr, n, stride, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs * stride, mask=mask)  # every stride-th element
    tl.store(out_ptr + offs, x, mask=mask)


# end snippet

COPY_BLOCK = 1024


def copy(x: torch.Tensor, out: torch.Tensor):
    """out[:] = x[:], both contiguous; returns the compiled kernel on a GPU."""
    n = x.numel()
    return copy_kernel[(triton.cdiv(n, COPY_BLOCK),)](x, out, n, BLOCK=COPY_BLOCK)


# snippet: self-check
def self_check() -> None:
    """Each fixed kernel against torch, bit for bit, on padded rows and sizes no
    block divides; the fill inside a larger buffer, so a store past its end
    would show; on a GPU, one timing of the copy."""
    on_gpu = torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1"
    device = "cuda" if on_gpu else "cpu"
    torch.manual_seed(0)
    x = torch.randn(5, 160, device=device)[:, :100]  # rows 160 apart
    s = torch.rand(5, device=device) + 0.5
    torch.testing.assert_close(scale(scale_rows, x, s), x * s[:, None], rtol=0, atol=0)
    buffer = torch.zeros(1000 + 4 * EXTRA, device=device)
    fill(fill_fixed, buffer[:1000], 1.0)
    torch.testing.assert_close(buffer, (torch.arange(len(buffer)) < 1000).float().to(
        device), rtol=0, atol=0)
    y = torch.rand(4100, device=device)
    out = torch.empty_like(y)
    copy(y, out)
    torch.testing.assert_close(out, y, rtol=0, atol=0)
    strided_copy_kernel[(3,)](y, out, 2050, 2, BLOCK=COPY_BLOCK)
    torch.testing.assert_close(out[:2050], y[::2], rtol=0, atol=0)
    print("scale_rows, fill_fixed and both copies match torch bit for bit "
          "(padded rows, 1000 and 4100 elements)")
    if on_gpu:
        y = torch.rand(1 << 28, device=device)
        out = torch.empty_like(y)
        ms = triton.testing.do_bench(lambda: copy(y, out))
        print(f"copy_kernel, 2^28 fp32: {ms:.3f} ms, "
              f"{8 * y.numel() / ms / 1e6:.0f} GB/s")


# end snippet


if __name__ == "__main__":
    self_check()
