"""The mbarrier of the Gluon lessons, and a scheduler that runs a kernel's roles.

Written once, here, and used by the three Gluon lessons (gluon-matmul and
gluon-attention through lesson.toml's `uses = ["gluon-basics"]`). A kernel's
roles (a loader, a storer, a producer, consumer warpgroups) are *actors*:
Python generators that yield what they wait for, as the kernel calls
`mbarrier.wait`, `tma.store_wait` or `warpgroup_mma_wait`. What the hardware
does on its own time (a TMA copy landing, a store or a wgmma reading shared
memory) is an *event*: a function put in a list, run later. `run` picks
among the actors that can go on and the events in flight at random, so every
order the hardware could choose is a possible draw, and a check runs many.

Plain Python, no torch and no Gluon: the interpreter run of each lesson
checks its kernel's protocol here. `Trace` and `run_in_rounds` exist for
the pictures: they record one schedule of the same model, step by step.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass
class Wait:
    """What an actor yields: a condition, and what it waits on (for the trace)."""

    ready: object  # () -> bool
    on: object  # the MBarrier or AsyncGroups waited on
    arg: int  # the parity, or the number of groups that may stay pending

    def __call__(self) -> bool:
        return self.ready()


# snippet: mbarrier-model
class MBarrier:
    """The mbarrier of these lessons: phases, arrivals and transaction bytes.

    A phase completes when `count` arrivals have come and every byte armed
    by `expect` has landed; then the next phase begins. `wait(parity)`
    returns once the phase of that parity has completed, that is while the
    phase in progress has the other parity: on a fresh barrier (phase 0 in
    progress) wait(1) returns at once and wait(0) blocks. Only the parity is
    compared, so phase k and phase k + 2 look the same to a waiter.
    """

    def __init__(self, count: int):
        self.count, self.arrivals, self.bytes, self.completed = count, 0, 0, 0

    def expect(self, nbytes: int) -> None:  # arrive and arm, as arrive.expect_tx does
        self.bytes += nbytes
        self.arrive()

    def arrive(self) -> None:
        self.arrivals += 1
        self._advance()

    def landed(self, nbytes: int) -> None:  # the copy engine delivered bytes
        self.bytes -= nbytes
        self._advance()

    def _advance(self) -> None:
        if self.arrivals == self.count and self.bytes == 0:
            self.completed += 1
            self.arrivals = 0

    def passed(self, parity: int) -> bool:
        return self.completed % 2 != parity

    def wait(self, parity: int) -> Wait:  # an actor yields it: mbarrier.wait(bar, p)
        return Wait(lambda: self.passed(parity), self, parity)


# end snippet


class AsyncGroups:
    """Asynchronous operations committed in order: TMA stores (tma.store_wait)
    and wgmma products (warpgroup_mma_wait). wait(n) returns once at most the
    n newest are unfinished."""

    def __init__(self):
        self.done: list[bool] = []

    def issue(self) -> int:
        self.done.append(False)
        return len(self.done) - 1

    def finish(self, group: int) -> None:
        self.done[group] = True

    def wait(self, n: int) -> Wait:
        return Wait(lambda: all(self.done[: max(0, len(self.done) - n)]), self, n)


def busy(what: str) -> Wait:
    """A step of work that waits for nothing (a softmax), for an actor to yield:
    other actors and events may move before it goes on."""
    return Wait(lambda: True, what, 0)


class Deadlock(Exception):
    """No actor can go on and nothing is in flight; the message names the actors."""


def run(actors: dict, events: list, rng: random.Random, trace: Trace | None = None):
    """Advance actors and events in a random order until all are done."""
    waits = dict.fromkeys(actors)
    while actors or events:
        ready = [n for n in actors if waits[n] is None or waits[n]()]
        if trace:
            trace.observe(waits, ready)
        choices = ready + ["event"] * bool(events)
        if not choices:
            raise Deadlock(", ".join(sorted(actors)))
        pick = rng.choice(choices)
        if pick == "event":
            event = events.pop(rng.randrange(len(events)))
            event()
            pick, consumed = event.__name__, None
        else:
            consumed = waits[pick]
            _advance(actors, waits, pick)
        if trace:
            trace.after(pick, consumed)
            trace.tick()


def run_in_rounds(actors: dict, events: list, trace: Trace | None = None) -> None:
    """One schedule of the same model, for a picture: in each round every actor
    that can go on takes one step, in the order given, then every event issued
    before the round completes. (The random `run` can draw this order too.)"""
    waits = dict.fromkeys(actors)
    while actors or events:
        ready = [n for n in actors if waits[n] is None or waits[n]()]
        if trace:
            trace.observe(waits, ready)
        if not ready and not events:
            raise Deadlock(", ".join(sorted(actors)))
        due = list(events)
        for name in ready:
            consumed = waits[name]
            _advance(actors, waits, name)
            if trace:
                trace.after(name, consumed)
        for event in due:
            events.remove(event)
            event()
            if trace:
                trace.after(event.__name__)
        if trace:
            trace.tick()


def _advance(actors: dict, waits: dict, name: str) -> None:
    try:
        waits[name] = next(actors[name])
    except StopIteration:
        del actors[name], waits[name]


@dataclass
class Change:
    t: int  # the step (run) or round (run_in_rounds)
    who: str  # the actor, or the event's function name
    name: str  # the watched barrier or group
    old: tuple  # a barrier: (completed phases, arrivals, bytes); groups: done flags
    new: tuple

    @property
    def barrier(self) -> bool:
        return len(self.new) == 3 and not isinstance(self.new[0], bool)


@dataclass
class Trace:
    """One schedule, recorded for a picture: at every step, which actor was
    blocked on what, and what each step changed in the watched barriers and
    groups (their state before and after). It only reads the model."""

    watched: dict  # name -> MBarrier or AsyncGroups
    t: int = 0
    blocked: list = field(default_factory=list)  # (t, actor, Wait)
    changes: list = field(default_factory=list)  # Change
    steps: list = field(default_factory=list)  # (t, who, the Wait it went past or None)
    _last: dict = field(default_factory=dict)

    def __post_init__(self):
        self._last = {name: _state(obj) for name, obj in self.watched.items()}

    def name_of(self, obj) -> str:
        return next((n for n, o in self.watched.items() if o is obj), "?")

    def observe(self, waits: dict, ready: list) -> None:
        for actor, wait in waits.items():
            if wait is not None and actor not in ready:
                self.blocked.append((self.t, actor, wait))

    def after(self, who: str, consumed: Wait | None = None) -> None:
        self.steps.append((self.t, who, consumed))
        for name, obj in self.watched.items():
            new = _state(obj)
            if new != self._last[name]:
                self.changes.append(Change(self.t, who, name, self._last[name], new))
                self._last[name] = new

    def tick(self) -> None:
        self.t += 1


def _state(obj) -> tuple:
    if isinstance(obj, MBarrier):
        return (obj.completed, obj.arrivals, obj.bytes)
    return tuple(obj.done)  # AsyncGroups
