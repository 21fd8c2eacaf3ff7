"""The copy kernels' rings on the CPU: steps 3 and 4 as roles of ring_model.py.

gluon_basics.py's pipelined copy (step 3) and its warp-specialized ring
(step 4) wait on mbarriers and on TMA stores that the copy engine finishes in
its own time. Here each role is an actor of ring_model.py, a generator that
yields what the kernel waits for, and `Copier` is the copy engine: its loads
land and its stores read their slot later, in an order `run` draws at random.
A wrong wait shows as a copy that is not intact (a slot reloaded before its
store read it) or as a Deadlock. Plain Python: the lesson's checks, its
pictures and its exercises run these on any CPU.
"""

from __future__ import annotations

import random

from ring_model import AsyncGroups, MBarrier, Trace, run, run_in_rounds


class Copier:
    """The copy engine of the copy kernels: shared-memory slots, TMA loads that
    land later, TMA stores that read their slot later (one bulk group each)."""

    def __init__(self, events: list, stages: int, tiles: int):
        self.events, self.slots, self.out = events, [None] * stages, [None] * tiles
        self.stores = AsyncGroups()

    def load(self, tile: int, slot: int, bar: MBarrier) -> None:
        bar.expect(1)  # one "byte" per tile in the model

        def land():
            self.slots[slot] = tile
            bar.landed(1)

        self.events.append(land)

    def store(self, tile: int, slot: int) -> None:
        group = self.stores.issue()

        def read():  # the copy engine reads the slot whenever it gets to it
            self.out[tile] = self.slots[slot]
            self.stores.finish(group)

        self.events.append(read)


# snippet: ring-model
def pipelined_copy(copier, tiles, stages, ahead, pending=None):
    """The schedule of copy_tma_pipelined_kernel for one program, step by step.

    `pending`: the stores tma.store_wait lets stay in flight before the next
    load (the kernel's STAGES - AHEAD).
    """
    pending = stages - ahead if pending is None else pending
    ready = [MBarrier(1) for _ in range(stages)]
    for i in range(min(ahead, tiles)):
        copier.load(i, i % stages, ready[i % stages])
    for i in range(tiles):
        s = i % stages
        yield ready[s].wait((i // stages) & 1)
        copier.store(i, s)
        yield copier.stores.wait(pending)  # tma.store_wait(pending)
        if i + ahead < tiles:
            copier.load(i + ahead, (i + ahead) % stages, ready[(i + ahead) % stages])
    yield copier.stores.wait(0)


# end snippet


def ws_loader(copier, tiles, ready, empty):
    """Step 4's loader: wait until tile i's slot is empty, then load it."""
    stages = len(ready)
    for i in range(tiles):
        s, lap = i % stages, (i // stages) & 1
        yield empty[s].wait(lap ^ 1)  # a fresh barrier passes parity 1 at once
        copier.load(i, s, ready[s])


def ws_storer(copier, tiles, ready, empty):
    """Step 4's storer: wait for tile i, store it, release the slot before it."""
    stages = len(ready)
    for i in range(tiles):
        s, lap = i % stages, (i // stages) & 1
        yield ready[s].wait(lap)
        copier.store(i, s)
        yield copier.stores.wait(1)
        if i > 0:
            empty[(i + stages - 1) % stages].arrive()
    yield copier.stores.wait(0)


# snippet: ring-checks
def copies(roles, stages: int, tiles: int, seeds: int):
    """What each of `seeds` random schedules copied: the output's tiles, in order.

    `roles(copier)` gives the kernel's roles as actors; the copy engine
    finishes its loads and stores in a different random order each time.
    """
    for seed in range(seeds):
        events = []
        copier = Copier(events, stages, tiles)
        run(roles(copier), events, random.Random(seed))
        yield copier.out


def copies_intact(roles, stages: int, tiles: int, seeds: int) -> int:
    """How many of `seeds` random schedules copy every tile into its place."""
    return sum(out == list(range(tiles)) for out in copies(roles, stages, tiles, seeds))


def misplaced(copied: list[list]) -> tuple[int, int, object] | None:
    """Of the outputs `copies` gave, (how many have a tile out of place, the first
    such tile, what its place holds), or None when every one is intact."""
    wrong = [out for out in copied if out != list(range(len(out)))]
    if not wrong:
        return None
    tile = next(i for i, got in enumerate(wrong[0]) if got != i)
    return len(wrong), tile, wrong[0][tile]


def warp_specialized(copier, tiles, ready=None, empty=None, loader=ws_loader) -> dict:
    """The loader and the storer of step 4, meeting only at ready/empty barriers."""
    stages = len(copier.slots)
    ready = ready or [MBarrier(1) for _ in range(stages)]
    empty = empty or [MBarrier(1) for _ in range(stages)]
    return {
        "loader": loader(copier, tiles, ready, empty),
        "storer": ws_storer(copier, tiles, ready, empty),
    }


# end snippet


def traced_ws_ring(stages: int, tiles: int) -> Trace:
    """One schedule of step 4's ring, in rounds, recorded for the pictures."""
    events = []
    copier = Copier(events, stages, tiles)
    ready = [MBarrier(1) for _ in range(stages)]
    empty = [MBarrier(1) for _ in range(stages)]
    trace = Trace(
        {f"ready[{s}]": ready[s] for s in range(stages)}
        | {f"empty[{s}]": empty[s] for s in range(stages)}
    )
    roles = warp_specialized(copier, tiles, ready=ready, empty=empty)
    run_in_rounds(roles, events, trace)
    assert copier.out == list(range(tiles)), "the pictured schedule copies every tile"
    return trace
