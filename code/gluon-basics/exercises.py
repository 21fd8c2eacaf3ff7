"""Gluon basics: exercises. Fill in each "Your code here", then check your answers:

    TRITON_INTERPRET=1 python exercises.py   # any CPU: the rings' exercises
    python exercises.py                      # a Hopper GPU: the Gluon one too

The rings' exercises run on copy_model.py, the CPU model of steps 3 and 4, in
many random schedules; the Gluon exercise needs a GPU (Gluon has no
interpreter) and says so elsewhere. Each prints one line: passed, or what is
wrong and a hint. --only NAME checks one; --solutions checks solutions.py,
where the mistakes the checks catch are listed.
"""

import sys
from pathlib import Path

import torch
import triton
from copy_model import copies, misplaced, pipelined_copy, warp_specialized
from ring_model import Deadlock
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

sys.path.append(str(Path(__file__).resolve().parent.parent))  # practice.py, in the repo
import practice  # noqa: E402

SEEDS = 40  # random schedules per configuration


# snippet: masked-copy
@gluon.jit
def copy_masked_kernel(src, dst, n, BLOCK: gl.constexpr, VEC: gl.constexpr):
    """Step 1's copy through registers, for any n: the last block runs past it.

    The layout and the offsets are written; keep every lane at or past n from
    loading and from storing.
    """
    layout: gl.constexpr = gl.BlockedLayout([VEC], [32], [gl.num_warps()], [0])
    offs = gl.program_id(0) * BLOCK + gl.arange(0, BLOCK, layout=layout)
    gl.store(dst + offs, gl.load(src + offs))  # Your code here


# end snippet


# snippet: check-masked-copy
@practice.exercise("masked-copy", hint="mask = offs < n, on the load and on the store",
                   needs_gpu="Gluon has no interpreter: this one runs on a Hopper GPU")
def check_masked_copy(m):
    for n in (1, 1000, 5000):  # blocks of 1024
        src = practice.guarded(torch.randn(n, dtype=torch.float16))
        dst = practice.output(n, dtype=torch.float16)
        m.copy_masked_kernel[(triton.cdiv(n, 1024),)](src, dst, n, 1024, 8)
        practice.expect("dst", dst, src, case=f"n = {n}")


# end snippet


# snippet: store-wait
def pending_stores(stages, ahead):
    """Step 3's tma.store_wait(?): how many stores may still be reading shared
    memory when the ring loads the next tile into a slot?

    Loads run `ahead` tiles ahead of the stores, in a ring of `stages` slots:
    the next load reuses the slot of a tile stored some stores ago, and that
    store must have read it. Return the most stores that may stay pending:
    fewer is safe but waits for nothing, more corrupts the copy.
    """
    return 0  # Your code here


# end snippet


# snippet: check-store-wait
@practice.exercise("store-wait", hint="the slot a load reuses held the tile stored "
                   "stages - ahead stores before the newest: the newer ones may stay")
def check_store_wait(m):
    for stages, ahead in ((2, 1), (4, 3), (4, 2), (8, 6)):
        pending = m.pending_stores(stages, ahead)

        def roles(copier, stages=stages, ahead=ahead, pending=pending):
            return {"program": pipelined_copy(copier, 23, stages, ahead, pending)}

        wrong = misplaced(list(copies(roles, stages, 23, SEEDS)))
        case = f"{stages} slots, {ahead} ahead, {pending} stores pending"
        if wrong:
            raise practice.Wrong(f"{case}: in {wrong[0]} of {SEEDS} random schedules "
                                 f"a slot was overwritten before its store read it "
                                 f"(tile {wrong[1]}'s place holds tile {wrong[2]})")
        if pending < stages - ahead:
            raise practice.Wrong(f"{case}: the copy is intact, but it waits for more "
                                 f"stores than it must ({stages - ahead} may stay)")


# end snippet


# snippet: parity
def ws_loader(copier, tiles, ready, empty):
    """Step 4's loader: before loading tile i into slot s, wait until it is empty.

    The storer arrives on empty[s] once the store of the slot's last tile has
    read it, so the barrier completes one phase per lap; a fresh barrier is in
    phase 0. Which parity must the loader wait on, so that the first lap passes
    at once and lap k waits for the storer's k-th release of the slot?
    """
    stages = len(ready)
    for i in range(tiles):
        s, lap = i % stages, (i // stages) & 1  # noqa: F841 - yours to use
        yield empty[s].wait(0)  # Your code here: which parity?
        copier.load(i, s, ready[s])


# end snippet


# snippet: check-parity
@practice.exercise("parity", hint="wait(p) returns once a phase of parity p has "
                   "completed, and a fresh barrier passes wait(1): wait on lap ^ 1")
def check_parity(m):
    for stages, tiles in ((2, 7), (4, 23)):
        def roles(copier, tiles=tiles):
            return warp_specialized(copier, tiles, loader=m.ws_loader)

        try:
            wrong = misplaced(list(copies(roles, stages, tiles, SEEDS)))
        except Deadlock as stuck:
            raise practice.Wrong(f"{stages} slots: deadlock: no role can go on ("
                                 f"{stuck} waiting) and no copy is in flight") from None
        if wrong:
            raise practice.Wrong(f"{stages} slots: in {wrong[0]} of {SEEDS} random "
                                 "schedules a slot was overwritten before its store "
                                 f"read it (tile {wrong[1]}'s place holds tile "
                                 f"{wrong[2]})")


# end snippet


if __name__ == "__main__":
    sys.exit(practice.main())
