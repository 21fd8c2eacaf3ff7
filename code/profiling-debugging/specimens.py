"""The kernels the profiling lesson debugs, and a command line to run one alone.

Each bug here is planted on purpose; the fixes are in profiling_debugging.py,
the lesson's kernels module. A tool that watches a
whole process (compute-sanitizer, Nsight Compute, Proton) is best given a
process that does nothing else, and a kernel that writes where it should not
is best run where the damage cannot reach the lesson. So the lesson starts
this file in a child process:

    python specimens.py print                 # the buggy kernel's device_print
    python specimens.py store planted|fixed   # one store past a tensor's end
    python specimens.py assert device|block|scalar
    python specimens.py copy N                # the copy kernel, twice
    python specimens.py proton FILE N         # the copy kernel under Proton

With TRITON_INTERPRET=1 in its environment the child runs on the CPU too.
"""

import os
import sys

import torch
import triton
import triton.language as tl
from profiling_debugging import EXTRA, copy, fill, fill_fixed, scale

# -- Step 1: a wrong row stride ------------------------------------------------


# snippet: buggy-kernel
@triton.jit
def scale_rows_buggy(
    x_ptr, out_ptr, scale_ptr, n_cols, x_row_stride,
    BLOCK: tl.constexpr, DEBUG: tl.constexpr = False, PAUSE: tl.constexpr = False,
):
    # One program per row: out[row, :] = x[row, :] * scale[row].
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    offs = row * n_cols + cols  # the planted bug: x's rows are x_row_stride apart
    if DEBUG:  # a constexpr: False compiles both prints out entirely
        tl.static_print("BLOCK =", BLOCK)  # once, while the kernel compiles
        tl.device_print("offs", offs)  # every element of every program, as it runs
    if PAUSE:  # the interpreter only: stop here, in Python, with every local
        breakpoint()
    x = tl.load(x_ptr + offs, mask=mask)
    s = tl.load(scale_ptr + row)
    tl.store(out_ptr + row * n_cols + cols, x * s, mask=mask)


# end snippet


# -- Step 2: a store past the end ----------------------------------------------

# snippet: planted-store
@triton.jit
def fill_planted(out_ptr, n, value, BLOCK: tl.constexpr, EXTRA: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n + EXTRA  # the planted bug: EXTRA elements too many
    tl.store(out_ptr + offs, value, mask=mask)


# end snippet

# snippet: asserting-stores
@triton.jit
def fill_device_assert(out_ptr, n, value, BLOCK: tl.constexpr, EXTRA: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n + EXTRA
    tl.device_assert((offs < n) | ~mask, "store past the end")
    tl.store(out_ptr + offs, value, mask=mask)


@triton.jit
def fill_assert_block(out_ptr, n, value, BLOCK: tl.constexpr, EXTRA: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n + EXTRA
    assert (offs < n) | ~mask, "store past the end"
    tl.store(out_ptr + offs, value, mask=mask)


@triton.jit
def fill_assert_scalar(out_ptr, n, value, BLOCK: tl.constexpr, EXTRA: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n + EXTRA
    outside = tl.sum(((offs >= n) & mask).to(tl.int32), axis=0)
    assert outside == 0, "store past the end"
    tl.store(out_ptr + offs, value, mask=mask)


# end snippet

ASSERTING = {
    "device": fill_device_assert,
    "block": fill_assert_block,
    "scalar": fill_assert_scalar,
}


# -- The child's command line ------------------------------------------------------

MARK = "specimen:"  # every line the lesson reads back starts with this


def device() -> str:
    return "cpu" if os.environ.get("TRITON_INTERPRET") == "1" else "cuda"


def child_print() -> None:
    """The buggy kernel on three rows of a padded matrix, printing its offsets."""
    x = torch.arange(3 * 12, dtype=torch.float32, device=device()).reshape(3, 12)
    scale(scale_rows_buggy, x[:, :6], torch.ones(3, device=device()), DEBUG=True)
    if device() == "cuda":
        torch.cuda.synchronize()  # device_print's buffer is written out here
    print(f"{MARK} row stride {x.stride(0)}, {6} columns", flush=True)


def child_store(which: str) -> None:
    """Eight tensors of 1000 floats side by side; the fill runs on the fourth."""
    kernel = {"planted": fill_planted, "fixed": fill_fixed}[which]
    tensors = [torch.zeros(1000, device=device()) for _ in range(8)]
    fill(kernel, tensors[3], 1.0)
    print(f"{MARK} launched", flush=True)
    if device() == "cuda":
        torch.cuda.synchronize()
    changed = [int((t != 0).sum()) for t in tensors]
    print(f"{MARK} nonzero elements per tensor {changed}", flush=True)


def child_assert(which: str) -> None:
    """An asserting fill into a tensor with room after it: the store is harmless."""
    buffer = torch.zeros(1000 + 2 * EXTRA, device=device())
    try:
        fill(ASSERTING[which], buffer[:1000], 1.0)
        if device() == "cuda":
            torch.cuda.synchronize()
    except BaseException as exc:  # noqa: BLE001 - what fired, or that nothing did
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        print(f"{MARK} raised {type(exc).__name__}: {first[:300]}", flush=True)
        sys.exit(1)
    past = int((buffer[1000:] != 0).sum())
    print(f"{MARK} no assertion fired; {past} written past the end", flush=True)


def child_copy(n: int) -> None:
    x = torch.rand(n, device=device())
    out = torch.empty_like(x)
    for _ in range(2):  # the first call compiles; a profiler may skip it
        copy(x, out)
    if device() == "cuda":
        torch.cuda.synchronize()
    print(f"{MARK} copied {n} floats: {bool(torch.equal(out, x))}", flush=True)


# snippet: proton
def child_proton(path: str, n: int) -> None:
    import triton.profiler as proton

    x = torch.rand(n, device=device())
    out = torch.empty_like(x)
    copy(x, out)  # compiled before the profile starts
    torch.cuda.synchronize()
    proton.start(path.removesuffix(".hatchet"))  # writes PATH, a JSON tree
    for _ in range(10):
        copy(x, out)
    torch.cuda.synchronize()
    proton.finalize()
    print(f"{MARK} profiled 10 copies of {n} floats", flush=True)


# end snippet


def main(argv: list[str]) -> None:
    what, args = argv[0], argv[1:]
    if what == "print":
        child_print()
    elif what == "store":
        child_store(args[0])
    elif what == "assert":
        child_assert(args[0])
    elif what == "copy":
        child_copy(int(args[0]))
    elif what == "proton":
        child_proton(args[0], int(args[1]))
    else:
        sys.exit(f"specimens.py: unknown command {what!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
