"""Benchmarks across recordings: a bounded history, and changes beyond noise.

One job: when a new record replaces an older one for the same lesson, mode
and GPU model, carry each benchmark's earlier results forward (at most
LIMITS.history of them) and say which benchmarks moved. A move counts when
the two recordings' 95 % intervals do not overlap and the medians differ by
more than NOISE (criterion.rs's noise threshold plays the same part): two
runs of unchanged code on one GPU differ by a few percent, and a site that
called that a regression would teach readers to ignore it.
"""

from __future__ import annotations

from dataclasses import dataclass

from evidence import HistoryPoint, Record
from limits import LIMITS

NOISE = 0.02


@dataclass(frozen=True)
class Change:
    lesson: str
    key: str
    label: str
    old: HistoryPoint
    new: HistoryPoint

    @property
    def direction(self) -> str:
        return "faster" if self.new.ratio > self.old.ratio else "slower"

    def describe(self) -> str:
        pct = (self.new.ratio / self.old.ratio - 1) * 100
        return (f"{self.lesson} [{self.key}] {self.label}: {self.direction}, {self.old.ratio:.3f}x "
                f"[{self.old.ratio_low:.3f}, {self.old.ratio_high:.3f}] on {self.old.started_utc[:10]} -> "
                f"{self.new.ratio:.3f}x [{self.new.ratio_low:.3f}, {self.new.ratio_high:.3f}] ({pct:+.1f} %)")


def points_of(record: Record) -> dict[str, HistoryPoint]:
    return {b.name: HistoryPoint(record.started_utc, record.source_hash, record.env.triton, b.ratio,
                                 b.ratio_low, b.ratio_high) for b in record.benchmarks}


def carry_history(new: Record, previous: Record | None) -> None:
    """Fill new.history from what it already has, the previous record's history and its results."""
    older = {}
    if previous is not None and previous.started_utc < new.started_utc:
        older = points_of(previous)
    history = {}
    for bench in new.benchmarks:
        points = {p.started_utc: p for p in new.history.get(bench.name, [])}
        if previous is not None:
            points.update({p.started_utc: p for p in previous.history.get(bench.name, [])})
        if bench.name in older:
            points[older[bench.name].started_utc] = older[bench.name]
        kept = sorted((p for p in points.values() if p.started_utc < new.started_utc), key=lambda p: p.started_utc)
        if kept:
            history[bench.name] = kept[-LIMITS.history:]
    new.history = history


def changes(new: Record, previous: Record | None) -> list[Change]:
    """Benchmarks of `new` that moved beyond noise since `previous`."""
    if previous is None or previous.started_utc >= new.started_utc:
        return []
    old, now = points_of(previous), points_of(new)
    labels = {b.name: b.label for b in new.benchmarks}
    found = []
    for name, p in now.items():
        q = old.get(name)
        if q is None or q.ratio <= 0:
            continue
        apart = p.ratio_low > q.ratio_high or p.ratio_high < q.ratio_low
        if apart and abs(p.ratio / q.ratio - 1) > NOISE:
            found.append(Change(new.lesson, new.key, labels[name], q, p))
    return found
