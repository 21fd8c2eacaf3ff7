"""Low-memory dropout: a seed instead of a mask.

Dropout zeroes each element with probability p and scales the survivors by
1 / (1 - p). The backward pass must zero the same elements, so PyTorch's
fused dropout writes the mask it drew, one byte per element, and keeps it
until the backward pass reads it again.

A counter-based generator makes the mask unnecessary. Philox turns a key
and a counter into random bits with no state in between: keyed by a seed
and counting with the element's index, it gives element i the same number
every time it is asked, in any program, in any order. The forward kernel
draws the mask from (seed, i); the backward kernel draws it again. What is
kept between the two passes is one integer.

The kernel is written twice: with `tl.rand`, one Philox evaluation per
element (Triton's tutorial), and with `tl.rand4x`, which uses all four
32-bit words that one evaluation produces, a quarter of the integer work.

Run it:
    TRITON_INTERPRET=1 python dropout.py   # any machine: checks on the CPU
    python dropout.py                      # a CUDA GPU: checks and a timing

Beside it: exercises.py (check your own kernels) and lesson.py (the run the
course records: statistics, the compiled code, memory and benchmarks).
"""

import os

import torch
import triton
import triton.language as tl

# 1024 elements per program on a GPU: 8 per thread with 4 warps, two 16-byte
# loads each. The interpreter's cost is per program, not per element, so
# there a program takes 8192; the numbers drawn are the same either way,
# since they depend on the element's index, not on its program.
DEFAULT_BLOCK = 8192 if os.environ.get("TRITON_INTERPRET") == "1" else 1024


# snippet: kernel
@triton.jit
def dropout_kernel(x_ptr, out_ptr, n, p, scale, seed, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    # Philox, keyed by the seed, counting with the element's index: the
    # number for element i depends on (seed, i) and nothing else, not on the
    # block size, the program or what ran before. That is what lets the
    # backward pass draw the same mask again.
    r = tl.rand(seed, offsets)  # float32, uniform in [0, 1)
    keep = r > p
    # scale = 1 / (1 - p) comes from the host: a kept value is x * scale,
    # one float32 multiplication, exactly what torch computes.
    tl.store(out_ptr + offsets, tl.where(keep, x * scale, 0.0), mask=mask)


# end snippet


# snippet: kernel-4x
@triton.jit
def dropout4x_kernel(x_ptr, out_ptr, n, p, scale, seed, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    # One Philox evaluation yields four 32-bit words. Counter k serves the
    # four elements 4k .. 4k+3, so a block of BLOCK elements needs BLOCK/4
    # evaluations where tl.rand needs BLOCK.
    counters = pid * (BLOCK // 4) + tl.arange(0, BLOCK // 4)
    r0, r1, r2, r3 = tl.rand4x(seed, counters)
    # interleave(a, b) is a0 b0 a1 b1 ...; done twice it lays out
    # r0[k] r1[k] r2[k] r3[k] for each k: element 4k + j gets word j of
    # counter k, again a function of (seed, i) alone.
    r = tl.interleave(tl.interleave(r0, r2), tl.interleave(r1, r3))
    keep = r > p
    tl.store(out_ptr + offsets, tl.where(keep, x * scale, 0.0), mask=mask)


# end snippet


# snippet: launch
def dropout(x, p, seed, *, four=True, block=DEFAULT_BLOCK, out=None):
    """Dropout of a contiguous tensor; the mask is drawn from (seed, index)."""
    assert 0.0 <= p < 1.0 and x.is_contiguous() and x.numel() < 2**31
    out = torch.empty_like(x) if out is None else out
    n = x.numel()
    kernel = dropout4x_kernel if four else dropout_kernel
    grid = (triton.cdiv(n, block),)
    kernel[grid](x, out, n, p, 1.0 / (1.0 - p), seed, BLOCK=block)
    return out


class SeededDropout(torch.autograd.Function):
    """Dropout whose backward pass needs two numbers, not an n-element mask."""

    @staticmethod
    def forward(ctx, x, p, seed):
        ctx.p, ctx.seed = p, seed  # all the backward pass needs
        return dropout(x, p, seed)

    @staticmethod
    def backward(ctx, dy):
        # d out / d x is `scale` where the element was kept and 0 where it
        # was dropped: the same mask and the same scale, so the backward
        # pass is the forward kernel applied to dy.
        return dropout(dy.contiguous(), ctx.p, ctx.seed), None, None


# end snippet


def self_check() -> None:
    """Both kernels on sizes that are not multiples of the block (nor of 4)."""
    on_gpu = torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1"
    device = "cuda" if on_gpu else "cpu"
    torch.manual_seed(0)
    p, seed = 0.3, 1234
    scale = torch.tensor(1 / (1 - p), dtype=torch.float32)  # as the kernel gets it
    for n in (1, 1000, 98_433):
        x = torch.randn(n, device=device)
        x[x == 0] = 1.0  # so that `out != 0` is exactly the kept set
        for four in (False, True):
            out = dropout(x, p, seed, four=four)
            kept = out != 0
            # Kept: x * float32(1 / (1 - p)), one rounding, as torch computes it.
            torch.testing.assert_close(out, torch.where(kept, x * scale, 0.0),
                                       rtol=0, atol=0)
            # The same seed, the same mask; the first n of a longer vector alike.
            longer = torch.cat([x, torch.ones(517, device=device)])
            torch.testing.assert_close(dropout(longer, p, seed, four=four)[:n], out,
                                       rtol=0, atol=0)
    # The backward pass, from the seed alone, zeroes what the forward dropped.
    x = torch.randn(5000, device=device)
    x[x == 0] = 1.0
    x.requires_grad_()
    dy = torch.randn(5000, device=device)
    out = SeededDropout.apply(x, p, seed)
    out.backward(dy)
    torch.testing.assert_close(x.grad, torch.where(out != 0, dy * scale, 0.0),
                               rtol=0, atol=0)
    print("dropout: kept values scaled bit for bit, masks drawn again from the "
          "seed, on 1, 1000 and 98433 elements; the backward pass from the seed")
    if on_gpu:
        x = torch.randn(1 << 24, device=device)
        ms = triton.testing.do_bench(lambda: dropout(x, 0.1, seed))
        print(f"dropout (tl.rand4x), 2^24 float32: {ms:.3f} ms, "
              f"{8 * x.numel() / ms / 1e6:.0f} GB/s")


if __name__ == "__main__":
    self_check()
