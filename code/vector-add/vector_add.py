"""Vector add: the first Triton program.

Every Triton kernel is a function that one *program* runs over one block of
the data. The launch grid says how many programs there are; `tl.program_id`
tells each one which block is its own; `tl.arange` turns that into offsets;
and a mask keeps the last, partial block from reading or writing past the
end. That is the whole model. The rest of the course adds tiles, reductions
and pipelines on top of these four ideas.

Run it:
    TRITON_INTERPRET=1 python vector_add.py   # any machine: checks on the CPU
    python vector_add.py                      # a CUDA GPU: checks and a timing

Beside it: exercises.py (check your own kernels) and lesson.py (the run the
course records: every check and benchmark on the lesson's page).
"""

import os

import torch
import triton
import triton.language as tl


# snippet: kernel
@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    # Program `pid` owns elements [pid * BLOCK_SIZE, (pid + 1) * BLOCK_SIZE).
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    # n_elements is rarely a multiple of BLOCK_SIZE: the last program's
    # extra lanes are masked off, so they neither load nor store.
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


# end snippet


# snippet: launch
def add(x: torch.Tensor, y: torch.Tensor, block_size: int = 1024,
        out: torch.Tensor | None = None) -> torch.Tensor:
    assert x.shape == y.shape and x.is_contiguous() and y.is_contiguous()
    out = torch.empty_like(x) if out is None else out
    n = x.numel()
    # One program per block; cdiv rounds up so the tail gets a program too.
    grid = (triton.cdiv(n, block_size),)
    add_kernel[grid](x, y, out, n, BLOCK_SIZE=block_size)
    return out


# end snippet


# snippet: self-check
def self_check() -> None:
    """The kernel against torch, on sizes that are not multiples of the block."""
    on_gpu = torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1"
    device = "cuda" if on_gpu else "cpu"
    torch.manual_seed(0)
    for n in (1, 1000, 98_433):
        x, y = torch.rand(n, device=device), torch.rand(n, device=device)
        # One float32 rounding on both sides: equal bit for bit.
        torch.testing.assert_close(add(x, y), x + y, rtol=0, atol=0)
    print("add matches torch bit for bit on 1, 1000 and 98433 elements")
    if on_gpu:
        x, y = torch.rand(1 << 24, device=device), torch.rand(1 << 24, device=device)
        ms = triton.testing.do_bench(lambda: add(x, y))
        gbps = 3 * x.numel() * x.element_size() / ms / 1e6
        print(f"add, 2^24 float32: {ms:.3f} ms, {gbps:.0f} GB/s")


# end snippet


if __name__ == "__main__":
    self_check()
