"""Debugging and profiling: exercises. Each starter has a bug: find it and fix it.

    TRITON_INTERPRET=1 python exercises.py   # any CPU (on a GPU: python exercises.py)

Each exercise prints one line: passed, or what is wrong and a hint. With --only NAME
it checks one; --solutions checks the answers in solutions.py. The checks see what
a test on a contiguous, unpoisoned tensor misses: rows further apart than their
width, outputs that start as NaN, and poisoned bands around every buffer.
"""

import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.append(str(Path(__file__).resolve().parent.parent))  # practice.py, in the repo
from race_model import Deadlock, Ring, producer, races  # noqa: E402

import practice  # noqa: E402


# snippet: wrong-stride
@triton.jit
def scale_rows_kernel(x_ptr, out_ptr, scale_ptr, n_cols, x_row_stride,
                      BLOCK: tl.constexpr):
    """out[row, :] = x[row, :] * scale[row], one program per row.

    x may be a view of a wider matrix, its rows x_row_stride elements apart;
    out is contiguous. This kernel passes every test on a contiguous x and is
    wrong: run the check, read which rows it names, and fix the line.
    """
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    offs = row * n_cols + cols
    x = tl.load(x_ptr + offs, mask=mask)
    s = tl.load(scale_ptr + row)
    tl.store(out_ptr + row * n_cols + cols, x * s, mask=mask)


# end snippet


# snippet: check-wrong-stride
@practice.exercise("wrong-stride", hint="row 0 is right and every later row is "
                   "wrong: a row starts at row * x_row_stride, the distance between "
                   "two rows of x, which is n_cols only when x is contiguous")
def check_wrong_stride(m):
    for rows, cols, pad in ((5, 100, 60), (3, 7, 1)):
        x = practice.guarded(torch.randn(rows, cols), gap=pad)  # padding: POISON
        s = practice.guarded(torch.rand(rows) + 0.5)
        out = practice.output(rows, cols)
        m.scale_rows_kernel[(rows,)](x, out, s, cols, x.stride(0),
                                     BLOCK=triton.next_power_of_2(cols))
        # One float32 product each: equal to torch's bit for bit.
        practice.expect("out", out, x * s[:, None],
                        case=f"{rows} rows of {cols}, {x.stride(0)} apart")


# end snippet


# snippet: out-of-bounds
@triton.jit
def copy_tile_kernel(x_ptr, out_ptr, rows, cols, stride_x, stride_out,
                     BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    """out[:rows, :cols] = x[:rows, :cols], one BLOCK_R x BLOCK_C tile per program.

    A 2-D grid of programs, tile (program_id(0), program_id(1)); the rows of x
    and of out are stride_x and stride_out elements apart. Neither rows nor
    cols is a multiple of its block. This kernel writes where it must not: the
    check's poisoned bands see where.
    """
    r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    mask = (r < rows)[:, None]
    x = tl.load(x_ptr + r[:, None] * stride_x + c[None, :], mask=mask)
    tl.store(out_ptr + r[:, None] * stride_out + c[None, :], x, mask=mask)


# end snippet


# snippet: check-out-of-bounds
@practice.exercise("out-of-bounds", hint="a tile's lanes past the last column are "
                   "as real as those past the last row: mask = (r < rows)[:, None] "
                   "& (c < cols)[None, :], on the load and on the store")
def check_out_of_bounds(m):
    for rows, cols, gap in ((37, 50, 3), (16, 32, 0), (5, 70, 9)):
        # x: the top rows of a taller matrix, so a lane past its edge reads a
        # real number (a copied POISON would look like an untouched band);
        # out's rows `gap` elements further apart than its width.
        x = practice.guarded(torch.randn(rows + 16, cols + 32))[:rows, :cols]
        out = practice.output(rows, cols, gap=gap)
        grid = (triton.cdiv(rows, 16), triton.cdiv(cols, 32))
        m.copy_tile_kernel[grid](x, out, rows, cols, x.stride(0), out.stride(0),
                                 BLOCK_R=16, BLOCK_C=32)
        practice.expect("out", out, x, case=f"{rows} x {cols} in tiles of 16 x 32, "
                        f"out's rows {out.stride(0)} apart")


# end snippet


# snippet: stencil-ring
def consumer(ring, t):
    """The consumer's part for tile t of a ring whose consumer needs two tiles.

    Tile t's result needs tiles t - 1 and t (a stencil), so the consumer reads
    tile t - 1 again, from its slot, after tile t has landed, and only then may
    tile t - 1's slot go back to the producer. The ring's calls: wait_ready(s,
    t) before reading tile t from slot s = t % ring.stages, read(s, t), and
    arrive_empty(s, t) to hand tile t's slot back. This version races: the
    check names the pair. Fix the order.
    """
    s = t % ring.stages
    ring.wait_ready(s, t)
    if t > 0:
        prev = (t - 1) % ring.stages
        ring.arrive_empty(prev, t - 1)
        ring.read(prev, t - 1)
    ring.read(s, t)


# end snippet


def run_stencil(m, stages, tiles):
    """The ring with the lesson's producer and the consumer of `m`: its events."""
    ring = Ring(stages)
    for t in range(tiles):
        producer(ring, t)
        m.consumer(ring, t)
    return ring.events


# snippet: check-stencil-ring
@practice.exercise("stencil-ring", hint="a slot goes back to the producer after the "
                   "last read of its tile: tile t - 1 is read last at step t, so "
                   "arrive_empty(prev, t - 1) comes after read(prev, t - 1), and "
                   "every read after wait_ready")
def check_stencil_ring(m):
    for stages, tiles in ((3, 12), (2, 9)):
        try:
            events = run_stencil(m, stages, tiles)
        except Deadlock as stuck:
            raise practice.Wrong(f"deadlock at {stages} slots: {stuck}") from None
        reads = [sum(e.kind == "read" and e.tile == t for e in events)
                 for t in range(tiles)]
        want = [2] * (tiles - 1) + [1]  # the last tile has no step after it
        if reads != want:
            t = next(t for t in range(tiles) if reads[t] != want[t])
            raise practice.Wrong(f"tile {t} read {reads[t]} time(s), not {want[t]}, "
                                 f"at {stages} slots")
        found = races(events)
        if found:
            a, b = found[0]
            raise practice.Wrong(
                f"race at {stages} slots: {len(found)} unordered pair(s); the first, "
                f"the {a.who}'s {a.kind} of tile {a.tile} and the {b.who}'s {b.kind} "
                f"of tile {b.tile}, both in slot {a.slot}")


# end snippet


if __name__ == "__main__":
    sys.exit(practice.main())
