"""Vector add, as the course records it: the checks and benchmarks of the page.

The kernel and its launcher are in vector_add.py, which runs alone. This file
checks them the way every lesson is checked (outputs filled with NaN first,
sizes that are not multiples of the block) and times them against torch and
a plain copy, through the course's kit (lessonkit.py), which keeps the record.

Run it:
    TRITON_INTERPRET=1 python lesson.py   # any machine: the checks on the CPU
    python lesson.py                      # a CUDA GPU: checks and GB/s
"""

import sys
from pathlib import Path

import torch

# lessonkit.py sits beside this file in a download, one folder up in the repository.
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]
from vector_add import add  # noqa: E402

from lessonkit import Lesson, bench_interleaved  # noqa: E402


def check_sizes(lesson: Lesson, device: str) -> None:
    """Sizes that are not multiples of the block, so the mask has work to do."""
    torch.manual_seed(0)
    for n in (1, 1000, 98_432, 1 << 20 if device == "cuda" else 200_003):
        x = torch.rand(n, device=device)
        y = torch.rand(n, device=device)
        # Poison: an element the kernel never writes cannot pass.
        out = add(x, y, out=torch.full_like(x, float("nan")))
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
        "add-vs-torch-2^28-fp32", "add vs torch x + y, 2²⁸ fp32", ms, "triton",
        "torch", unit="GB/s", work=bytes_add, baseline_name="torch x + y",
        threshold=0.95,
    )
    # The add moves three vectors and the copy two: with work=(kernel's bytes,
    # baseline's bytes) the ratio compares GB/s, not times.
    lesson.benchmark(
        "add-vs-copy-2^28-fp32", "add vs a copy, 2²⁸ fp32", ms, "triton", "copy",
        unit="GB/s", work=(bytes_add, bytes_copy),
        baseline_name="device-to-device copy", threshold=0.85,
    )
    # end snippet


def main() -> int:
    lesson = Lesson("vector-add")
    device = lesson.device()
    with lesson.step("check-sizes"):
        check_sizes(lesson, device)
    if lesson.step("benchmark", needs_gpu="timings need a GPU"):
        benchmark(lesson, device)
    return lesson.finish()


if __name__ == "__main__":
    sys.exit(main())
