"""Vector add: the first Triton program.

Every Triton kernel is a function that one *program* runs over one block of
the data. The launch grid says how many programs there are; `tl.program_id`
tells each one which block is its own; `tl.arange` turns that into offsets;
and a mask keeps the last, partial block from reading or writing past the
end. That is the whole model. The rest of the course adds tiles, reductions
and pipelines on top of these four ideas.

Run it:
    TRITON_INTERPRET=1 python vector_add.py   # any machine: checks on the CPU
    python vector_add.py                      # a CUDA GPU: checks and GB/s
"""

import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

# lessonkit.py sits beside this file in a download, one folder up in the repository.
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]
from lessonkit import Lesson, bench_interleaved  # noqa: E402


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
def add(x: torch.Tensor, y: torch.Tensor, block_size: int = 1024) -> torch.Tensor:
    assert x.shape == y.shape and x.is_contiguous() and y.is_contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    # One program per block; cdiv rounds up so the tail gets a program too.
    grid = (triton.cdiv(n, block_size),)
    add_kernel[grid](x, y, out, n, BLOCK_SIZE=block_size)
    return out


# end snippet


def check_sizes(lesson: Lesson, device: str) -> None:
    """Sizes that are not multiples of the block, so the mask has work to do."""
    torch.manual_seed(0)
    for n in (1, 1000, 98_432, 1 << 20 if device == "cuda" else 200_003):
        x = torch.rand(n, device=device)
        y = torch.rand(n, device=device)
        out = torch.full_like(
            x, float("nan")
        )  # poison: an unwritten element cannot pass
        out.copy_(add(x, y))
        # Addition of two float32 values is exact up to one rounding, so
        # the result must equal torch's bit for bit.
        lesson.check(
            f"matches-torch-n{n}", torch.equal(out, x + y), f"{n} elements, bit-exact"
        )


def benchmark(lesson: Lesson, device: str) -> None:
    n = lesson.size(gpu=1 << 28, smoke=1000)
    # snippet: contenders
    # A memory-bound kernel: 3 * 4 bytes move per element (two reads, one
    # write) and one addition happens. The ceiling is DRAM bandwidth, so the
    # kernel races torch's own `x + y` and a plain copy, which moves 2 * 4
    # bytes per element and is the best any kernel does.
    x = torch.rand(n, device=device)
    y = torch.rand(n, device=device)
    dst = torch.empty_like(x)
    contenders = {
        "triton": lambda: add(x, y),
        "torch": lambda: x + y,
        "copy": lambda: dst.copy_(x),
    }
    bytes_add = 3 * n * x.element_size()
    bytes_copy = 2 * n * x.element_size()
    # end snippet
    # snippet: measure
    # The prediction, from the bytes alone: all three are memory-bound, so
    # each moves its bytes at the same rate. Counted in GB/s, the kernel's
    # 12 bytes an element match x + y's 12 and the copy's 8: ratios of 1.
    lesson.predict("add-vs-torch-2^28-fp32", 1.0,
                   "memory-bound like x + y, moving the same 12 bytes an element", 0.05)
    lesson.predict("add-vs-copy-2^28-fp32", 1.0,
                   "memory-bound: 12 bytes an element at the rate a copy moves its 8",
                   0.10)
    # The three take turns, round after round, so clock drift hits all alike.
    # Each call is timed on its own (events): inside a CUDA graph a copy of
    # 1 GiB becomes a copy-engine transfer, slower than any kernel's copy.
    ms = bench_interleaved(contenders, method="events")
    lesson.benchmark(
        "add-vs-torch-2^28-fp32",
        "add vs torch x + y, 2^28 fp32",
        ms,
        "triton",
        "torch",
        unit="GB/s",
        work=bytes_add,
        baseline_name="torch x + y",
        threshold=0.95,
    )
    # The add moves three vectors and the copy two: with work=(kernel's bytes,
    # baseline's bytes) the ratio compares GB/s, not times.
    lesson.benchmark(
        "add-vs-copy-2^28-fp32",
        "add vs a copy, 2^28 fp32",
        ms,
        "triton",
        "copy",
        unit="GB/s",
        work=(bytes_add, bytes_copy),
        baseline_name="device-to-device copy",
        threshold=0.85,
    )
    # end snippet


def try_this(lesson: Lesson, device: str) -> None:
    # snippet: solution-block-size
    # Exercise: the same kernel with blocks of 128 needs 8 times the
    # programs; the sum must not change.
    x = torch.rand(10_000, device=device)
    y = torch.rand(10_000, device=device)
    out = add(x, y, block_size=128)
    ok = torch.equal(out, x + y)
    # end snippet
    lesson.check("exercise-block-size-128", ok, "blocks of 128, 79 programs")


def main() -> int:
    lesson = Lesson("vector-add")
    device = lesson.device()
    with lesson.step("check-sizes"):
        check_sizes(lesson, device)
    if lesson.step("benchmark", needs_gpu="timings need a GPU"):
        benchmark(lesson, device)
    with lesson.step("exercises"):
        try_this(lesson, device)
    return lesson.finish()


if __name__ == "__main__":
    sys.exit(main())
