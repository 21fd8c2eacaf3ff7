"""What a race checker sees: a warp-specialized copy ring, as a model.

A producer warp starts TMA copies into a ring of shared-memory slots; the
copy engine writes a slot and completes its `ready` barrier; a consumer waits
on `ready`, reads the slot and arrives on its `empty` barrier, which the
producer waits on before it refills the slot. Every access is an event
stamped with a vector clock (what it happens after); two accesses to one
slot by different actors, one a write, neither ordered before the other, are
a race. A checker that does not model the mbarriers orders nothing through
them; one that does not see the copy engine's writes sees only the reads.

The lesson runs it to show what racecheck can and cannot see (lesson.py);
exercises.py poses a ring of its own on it. No GPU needed: plain Python.
"""

from collections import Counter
from dataclasses import dataclass


@dataclass
class Event:
    who: str  # "producer" (issues the copies), "tma" (the copy engine), "consumer"
    kind: str  # "write" or "read" of a shared-memory slot
    slot: int
    tile: int
    clock: dict  # a vector clock: what this event happens after


class Deadlock(Exception):
    """A wait that no arrival will ever complete."""


class Ring:
    """The ring's barriers and accesses, as a checker sees them."""

    def __init__(self, stages: int, sees_mbarriers=True, sees_copies=True):
        self.stages, self.sees_mbarriers = stages, sees_mbarriers
        self.sees_copies = sees_copies
        self.clock = {who: Counter() for who in ("producer", "tma", "consumer")}
        self.released = {}  # tile -> the consumer's clock when it arrived on empty
        self.landed = {}  # tile -> the copy engine's clock when ready completed
        self.events = []

    def _tick(self, who):
        self.clock[who][who] += 1
        return dict(self.clock[who])

    def _join(self, who, other, barrier=True):  # `who` now knows what `other` knew
        if self.sees_mbarriers or not barrier:
            for k, v in other.items():
                self.clock[who][k] = max(self.clock[who][k], v)

    # The producer's side.
    def wait_empty(self, slot: int, tile: int) -> None:
        """Before tile `tile` goes into `slot`: the slot's previous tile released."""
        if tile < self.stages:
            return  # the first lap: every slot starts empty
        if tile - self.stages not in self.released:
            raise Deadlock(f"the producer waits on empty[{slot}] for tile {tile}, "
                           f"but tile {tile - self.stages}'s slot was never released")
        self._join("producer", self.released[tile - self.stages])

    def copy(self, slot: int, tile: int) -> None:
        self._tick("producer")  # issue the copy
        self._join("tma", self.clock["producer"], barrier=False)  # in program order
        stamp = self._tick("tma")
        if self.sees_copies:
            self.events.append(Event("tma", "write", slot, tile, stamp))
        self.landed[tile] = stamp

    # The consumer's side.
    def wait_ready(self, slot: int, tile: int) -> None:
        if tile not in self.landed:
            raise Deadlock(f"the consumer waits on ready[{slot}] for tile {tile}, "
                           "which was never copied")
        self._join("consumer", self.landed[tile])

    def read(self, slot: int, tile: int) -> None:
        stamp = self._tick("consumer")
        self.events.append(Event("consumer", "read", slot, tile, stamp))

    def arrive_empty(self, slot: int, tile: int) -> None:
        # The barrier expects one arrival: the first completes the phase, and
        # the producer may go on from there. (A second is a bug of its own.)
        self.released.setdefault(tile, self._tick("consumer"))


# snippet: race-model
def producer(ring: Ring, t: int) -> None:
    s = t % ring.stages
    ring.wait_empty(s, t)
    ring.copy(s, t)


def consumer(ring: Ring, t: int, release_early: bool = False) -> None:
    s = t % ring.stages
    ring.wait_ready(s, t)
    if release_early:  # the bug: the slot handed back before it is read
        ring.arrive_empty(s, t)
    ring.read(s, t)
    if not release_early:
        ring.arrive_empty(s, t)


def ring(stages: int, tiles: int, release_early: bool = False,
         sees_mbarriers: bool = True, sees_copies: bool = True) -> list[Event]:
    """The accesses of `tiles` tiles through a ring of `stages` slots."""
    r = Ring(stages, sees_mbarriers, sees_copies)
    for t in range(tiles):
        producer(r, t)
        consumer(r, t, release_early)
    return r.events


def races(events: list[Event]) -> list[tuple[Event, Event]]:
    """Pairs on one slot, by two actors, one a write, neither ordered first."""

    def before(a, b):
        return a.clock[a.who] <= b.clock.get(a.who, 0)

    return [(a, b) for i, a in enumerate(events) for b in events[i + 1:]
            if a.slot == b.slot and a.who != b.who and "write" in (a.kind, b.kind)
            and not before(a, b) and not before(b, a)]


# end snippet
