"""The matmul kernel's scheduler and ring on the CPU: gluon_matmul.py in plain Python.

The tile scheduler is the kernel's integer arithmetic, the same in Python.
The ring is its two roles as actors of ring_model.py (the gluon-basics
lesson's mbarrier and scheduler, through lesson.toml's `uses`): the producer
arms a slot's `ready` barrier and starts a copy that lands later; the
consumer waits for it, issues a product that reads the slot later, and hands
the slot back on its `empty` barrier. `run` draws the order in which copies
land and products read at random, so a slot handed back too early shows as a
product that read another step's operands, and a slot never handed back as
a Deadlock. The lesson's checks, its pictures and its exercises run these.
"""

from __future__ import annotations

import random

from ring_model import AsyncGroups, MBarrier, Trace, run, run_in_rounds

SMEM_LIMIT = 227 * 1024  # bytes of shared memory one Hopper thread block may have


# snippet: scheduler-model
def tile_position(
    tile_id: int, num_pid_m: int, num_pid_n: int, group_m: int
) -> tuple[int, int]:
    """The kernel's tile_coords: its grouped order, the same integer arithmetic
    in Python."""
    num_pid_in_group = group_m * num_pid_n
    group_id = tile_id // num_pid_in_group
    first_pid_m = group_id * group_m
    group_size_m = min(num_pid_m - first_pid_m, group_m)
    return first_pid_m + tile_id % group_size_m, (
        tile_id % num_pid_in_group
    ) // group_size_m


def schedule(M, N, bm, bn, group_m, programs, coords=tile_position):
    """The tiles each persistent program computes, in its order."""
    num_pid_m, num_pid_n = -(-M // bm), -(-N // bn)
    return [
        [
            coords(t, num_pid_m, num_pid_n, group_m)
            for t in range(p, num_pid_m * num_pid_n, programs)
        ]
        for p in range(programs)
    ]


# end snippet


class Products(AsyncGroups):
    """wgmma's asynchronous products (warpgroup_mma_wait), remembering how many
    each wait let stay in flight."""

    def __init__(self):
        super().__init__()
        self.waits: list[int] = []

    def wait(self, n: int):
        self.waits.append(n)
        return super().wait(n)


class Ring:
    """One program's ring: its slots, their barriers, the products in flight,
    and what each product read. `work` is the (tile, k) of every load, in order."""

    def __init__(self, stages: int, tiles: list, k_tiles: int):
        self.tiles, self.k_tiles = tiles, k_tiles
        self.work = [(t, k) for t in tiles for k in range(k_tiles)]
        self.slots, self.events = [None] * stages, []
        self.used = [None] * len(self.work)  # what each product read
        self.ready = [MBarrier(1) for _ in range(stages)]
        self.empty = [MBarrier(1) for _ in range(stages)]
        self.mma = Products()

    def load(self, it: int, s: int) -> None:
        """Arm ready[s] and start the TMA copy of step `it` into slot s."""
        self.ready[s].expect(1)

        def land():
            self.slots[s] = self.work[it]
            self.ready[s].landed(1)

        self.events.append(land)

    def issue(self, it: int, s: int) -> None:
        """warpgroup_mma(..., is_async=True): the tensor cores read slot s later."""
        group = self.mma.issue()

        def mma_reads():
            self.used[it] = self.slots[s]
            self.mma.finish(group)

        self.events.append(mma_reads)


# The consumer's K loop, _mainloop of the kernel (an exercise asks for it).
def mainloop(ring, it, k_tiles):
    """_mainloop: one tile's products; `it` counts the steps of earlier tiles."""
    stages = len(ring.slots)
    for kk in range(k_tiles):
        s = it % stages
        yield ring.ready[s].wait((it // stages) & 1)
        ring.issue(it, s)
        yield ring.mma.wait(1)  # warpgroup_mma_wait(1): this product may run on,
        if kk > 0:  # the one before has read its slot: hand that slot back
            ring.empty[(it - 1) % stages].arrive()
        it += 1
    yield ring.mma.wait(0)  # the tile's last product, then its slot
    ring.empty[(it - 1) % stages].arrive()
    return it


# snippet: ring-model
def producer(ring):
    """_producer: wait for slot s to be empty, arm `ready`, start the copy."""
    stages = len(ring.slots)
    for it in range(len(ring.work)):
        s, lap = it % stages, (it // stages) & 1
        yield ring.empty[s].wait(lap ^ 1)  # a fresh barrier passes parity 1 at once
        ring.load(it, s)


def consumer(ring, loop=mainloop):
    """_consumer: the mainloop of each of the program's tiles (the epilogue
    touches no slot of the ring)."""
    it = 0
    for _ in ring.tiles:
        it = yield from loop(ring, it, ring.k_tiles)


# end snippet


# snippet: ring-checks
def ring_feeds_every_product(stages, tiles, k_tiles, seed, loop=mainloop):
    """One program's products through the ring, in one random schedule: the
    ring, whose `used` says what each product read (its own (tile, k) when the
    protocol is right). A Deadlock propagates."""
    ring = Ring(stages, tiles, k_tiles)
    run({"producer": producer(ring), "consumer": consumer(ring, loop)}, ring.events,
        random.Random(seed))
    return ring


# end snippet


def traced_ring(stages: int, tiles: list, k_tiles: int) -> tuple[Ring, Trace]:
    """One schedule of the ring in rounds, recorded for the pictures."""
    ring = Ring(stages, tiles, k_tiles)
    trace = Trace(
        {f"ready[{s}]": ring.ready[s] for s in range(stages)}
        | {f"empty[{s}]": ring.empty[s] for s in range(stages)}
        | {"mma": ring.mma}
    )
    run_in_rounds({"producer": producer(ring), "consumer": consumer(ring)}, ring.events,
                  trace)
    assert ring.used == ring.work, "the pictured schedule feeds every product"
    return ring, trace


def smem_bytes(bm, bn, bk, stages, epi_split, elem=2) -> int:
    """Shared memory of matmul_ws_kernel: the ring, the epilogue tile, the barriers."""
    return (
        stages * (bm * bk + bk * bn) * elem
        + bm * (bn // epi_split) * elem
        + 2 * stages * 8
    )
