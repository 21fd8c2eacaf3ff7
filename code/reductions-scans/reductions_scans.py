"""Reductions and scans along rows: tl.sum, tl.max and tl.associative_scan.

A row reduction turns each row of a matrix into one number (its sum, its
maximum); a row scan turns each row into its running totals (a prefix sum).
Both combine the elements of a row with an associative operation, and both
have the same two problems in Triton:

* the last block of a row is ragged, so masked lanes must load a value that
  changes nothing: the operation's *neutral element*, 0 for a sum and -inf
  for a maximum (0 would win the maximum of a row of negative numbers);
* a row may be longer than one block, so the program walks it in a loop and
  carries what it has combined so far: an accumulator for a reduction, the
  running total for a scan.

`tl.sum`, `tl.max` and `tl.associative_scan` (with a combine function we
write) do the work inside one block; the compiler turns them into
per-thread loops, warp shuffles and one trip through shared memory.

Run it:
    TRITON_INTERPRET=1 python reductions_scans.py   # any machine: checks on the CPU
    python reductions_scans.py                      # a CUDA GPU: checks and a timing

Beside it: exercises.py (check your own kernels) and lesson.py (the run the
course records: every check, the compiled code, GB/s against torch and a copy).
"""

import os

import torch
import triton
import triton.language as tl


# snippet: reduce-kernel
@triton.jit
def row_reduce_kernel(
    X, Out,              # x is M x N (rows `stride_x` apart); out has M values
    M, N, stride_x,
    IS_MAX: tl.constexpr,  # False: the row's sum; True: its maximum
    ROWS: tl.constexpr,    # rows per program
    BLOCK_N: tl.constexpr,  # columns per step of the loop (a power of two)
):
    pid = tl.program_id(0)
    rows = pid * ROWS + tl.arange(0, ROWS)
    row_ok = rows < M
    cols = tl.arange(0, BLOCK_N)
    # The neutral element: what a masked lane must hold so that it changes
    # nothing. 0 adds nothing to a sum; -inf never wins a maximum (a 0 would,
    # on a row of negative numbers).
    if IS_MAX:
        neutral: tl.constexpr = float("-inf")
    else:
        neutral: tl.constexpr = 0.0
    # A ROWS x BLOCK_N accumulator: the loop combines element-wise, lane by
    # lane, and only after the loop does one reduction cross the lanes.
    acc = tl.full((ROWS, BLOCK_N), neutral, tl.float32)
    start = 0
    while start < N:
        c = start + cols
        mask = row_ok[:, None] & (c < N)[None, :]
        x = tl.load(X + rows[:, None] * stride_x + c[None, :], mask=mask,
                    other=neutral)
        if IS_MAX:
            acc = tl.maximum(acc, x)
        else:
            acc += x
        start += BLOCK_N
    if IS_MAX:
        result = tl.max(acc, axis=1)
    else:
        result = tl.sum(acc, axis=1)
    tl.store(Out + rows, result, mask=row_ok)


# end snippet


# snippet: tile-config
def tile_config(N: int) -> tuple[int, int, int]:
    """ROWS, BLOCK_N and warps for rows of N float32 values."""
    # A row wider than 4096 values (16 KB) is walked in a loop, 4096 at a
    # time; narrower rows are packed several to a program, so that each
    # step of a program loads at least 2048 values (8 KB) and keeps enough
    # loads in flight. Eight warps give each thread 8 or 16 values: the
    # scan keeps every prefix live at once, and a tile twice this size
    # costs it registers, and so programs per SM.
    BLOCK_N = min(triton.next_power_of_2(N), 4096)
    ROWS = min(max(2048 // BLOCK_N, 1), 64)
    num_warps = 8 if ROWS * BLOCK_N >= 2048 else 4
    return ROWS, BLOCK_N, num_warps


# end snippet


# snippet: reduce-launch
def row_reduce(x: torch.Tensor, op: str = "sum", out=None, config=None):
    """Sum or maximum of every row of a 2-D float32 tensor."""
    assert x.ndim == 2 and x.stride(1) == 1 and x.dtype == torch.float32
    assert op in ("sum", "max")
    M, N = x.shape
    if out is None:
        out = torch.empty(M, device=x.device, dtype=torch.float32)
    ROWS, BLOCK_N, warps = config or tile_config(N)
    grid = (triton.cdiv(M, ROWS),)
    row_reduce_kernel[grid](x, out, M, N, x.stride(0), IS_MAX=op == "max",
                            ROWS=ROWS, BLOCK_N=BLOCK_N, num_warps=warps)
    return out


# end snippet


# snippet: combine
@triton.jit
def add(a, b):
    # A scan's combine function: takes two values (or two blocks of values)
    # and returns one. It must be associative, (a + b) + c == a + (b + c),
    # because the compiler is free to group the terms as it likes.
    return a + b


# end snippet


# snippet: scan-kernel
@triton.jit
def row_cumsum_kernel(
    X, Y,                # x and y are M x N, rows `stride_x`, `stride_y` apart
    M, N, stride_x, stride_y,
    ROWS: tl.constexpr, BLOCK_N: tl.constexpr,
    USE_CUMSUM: tl.constexpr,  # tl.cumsum instead of our own combine function
):
    pid = tl.program_id(0)
    rows = pid * ROWS + tl.arange(0, ROWS)
    row_ok = rows < M
    cols = tl.arange(0, BLOCK_N)
    # The running total of everything to the left of this block, per row.
    carry = tl.zeros((ROWS,), dtype=tl.float32)
    start = 0
    while start < N:
        c = start + cols
        mask = row_ok[:, None] & (c < N)[None, :]
        # Padding loads 0, the neutral element of +: it shifts no prefix sum
        # (and the masked store below never writes it anyway).
        x = tl.load(X + rows[:, None] * stride_x + c[None, :], mask=mask,
                    other=0.0)
        if USE_CUMSUM:
            s = tl.cumsum(x, axis=1)
        else:
            s = tl.associative_scan(x, 1, add)  # inclusive prefix sums
        tl.store(Y + rows[:, None] * stride_y + c[None, :],
                 s + carry[:, None], mask=mask)
        # The block's total moves the carry on to the next block.
        carry += tl.sum(x, axis=1)
        start += BLOCK_N


# end snippet


def row_cumsum(x: torch.Tensor, out=None, config=None, use_cumsum=False):
    """Inclusive prefix sums along every row of a 2-D float32 tensor."""
    assert x.ndim == 2 and x.stride(1) == 1 and x.dtype == torch.float32
    M, N = x.shape
    if out is None:
        out = torch.empty_like(x)
    ROWS, BLOCK_N, warps = config or tile_config(N)
    grid = (triton.cdiv(M, ROWS),)
    row_cumsum_kernel[grid](x, out, M, N, x.stride(0), out.stride(0), ROWS=ROWS,
                            BLOCK_N=BLOCK_N, USE_CUMSUM=use_cumsum,
                            num_warps=warps)
    return out


def self_check() -> None:
    """Every kernel against torch, on rows no block divides, one loop step or many."""
    on_gpu = torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1"
    device = "cuda" if on_gpu else "cpu"
    torch.manual_seed(0)
    for M, N in ((37, 1000), (3, 5000), (5, 1)):
        x = torch.rand(M, N, device=device) * 1.5 - 0.5
        # N float32 additions against float64: an error that grows like sqrt(N).
        tol = 1e-5 * max(1.0, N**0.5 / 16)
        torch.testing.assert_close(row_reduce(x, "sum"), x.double().sum(1).float(),
                                   rtol=tol, atol=tol)
        torch.testing.assert_close(row_cumsum(x), x.double().cumsum(1).float(),
                                   rtol=tol, atol=tol)
        # A maximum picks one of its inputs: exact, even on rows of negatives.
        neg = -(x.abs() + 0.25)
        torch.testing.assert_close(row_reduce(neg, "max"), neg.amax(1), rtol=0, atol=0)
    print("row sums and prefix sums match float64 on 37x1000, 3x5000 and 5x1; "
          "the max of rows of negative numbers bit for bit")
    if on_gpu:
        x = torch.rand(32768, 4096, device=device)
        ms = triton.testing.do_bench(lambda: row_cumsum(x))
        print(f"row cumsum, 32768 x 4096 float32: {ms:.3f} ms, "
              f"{2 * x.numel() * 4 / ms / 1e6:.0f} GB/s")


if __name__ == "__main__":
    self_check()
