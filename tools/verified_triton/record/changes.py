"""Benchmarks across recordings: a bounded history, and changes beyond noise.

One job: when a new record replaces an older one for the same lesson, mode
and GPU model, carry each benchmark's earlier results forward (at most
LIMITS.history of them, taken from this repository's records only: a bundle's
own history is never believed) and say which benchmarks moved; before an
import replaces a current record, list what it would change. A move counts when
the two recordings' 95 % intervals do not overlap and the medians differ by
more than NOISE (criterion.rs's noise threshold plays the same part): two
runs of unchanged code on one GPU differ by a few percent, and a site that
called that a regression would teach readers to ignore it.
"""

from __future__ import annotations

from dataclasses import dataclass

from verified_triton.core.limits import LIMITS
from verified_triton.judge.evidence import HistoryPoint, Record

NOISE = 0.02


@dataclass(frozen=True)
class Change:
    lesson: str
    key: str
    label: str
    old: HistoryPoint
    new: HistoryPoint
    heading = "change beyond noise"  # how verify introduces it

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
    """Set new.history from the record it replaces here: that record's history and its own results.

    Whatever history `new` arrived with (a bundle's) is dropped: the history
    of a benchmark is what this repository recorded or imported.
    """
    older = {}
    if previous is not None and previous.started_utc < new.started_utc:
        older = points_of(previous)
    history = {}
    for bench in new.benchmarks:
        points = {}
        if previous is not None:
            points.update({p.started_utc: p for p in previous.history.get(bench.name, [])})
        if bench.name in older:
            points[older[bench.name].started_utc] = older[bench.name]
        kept = sorted((p for p in points.values() if p.started_utc < new.started_utc), key=lambda p: p.started_utc)
        if kept:
            history[bench.name] = kept[-LIMITS.history:]
    new.history = history


def moved(old: HistoryPoint, new: HistoryPoint) -> bool:
    """Beyond noise: the two intervals do not overlap and the medians differ by more than NOISE."""
    if old.ratio <= 0:
        return False
    apart = new.ratio_low > old.ratio_high or new.ratio_high < old.ratio_low
    return apart and abs(new.ratio / old.ratio - 1) > NOISE


def changes(new: Record, previous: Record | None) -> list[Change]:
    """Benchmarks of `new` that moved beyond noise since `previous`."""
    if previous is None or previous.started_utc >= new.started_utc:
        return []
    old, now = points_of(previous), points_of(new)
    labels = {b.name: b.label for b in new.benchmarks}
    return [Change(new.lesson, new.key, labels[name], old[name], p) for name, p in now.items()
            if name in old and moved(old[name], p)]


@dataclass(frozen=True)
class FindingChange:
    """A sanitizer finding that a new sanitize record has and the one it replaces had not."""

    lesson: str
    key: str
    text: str
    heading = "change"

    def describe(self) -> str:
        return f"{self.lesson} [{self.key}] {self.text}"


def _findings(record: Record | None) -> dict[tuple, str]:
    """Each finding of a sanitize record by (tool, kind, kernel, places), with words for it."""
    found = {}
    for run in record.sanitizer.runs if record is not None and record.sanitizer else []:
        for f in run.findings:
            places = tuple((loc.file, loc.line) for loc in f.locations if loc.access != "frame")
            where = ", ".join(f"{file}:{line}" for file, line in places[:3]) or "no line"
            found[(run.tool, f.kind, f.kernel, places)] = f"{run.tool}: {f.message} in {f.kernel or 'a kernel'} " \
                                                          f"at {where}"
    return found


def finding_changes(new: Record, previous: Record | None) -> list[FindingChange]:
    """The findings of `new` that `previous` (the record it replaces) did not have: a new finding is a change."""
    old = _findings(previous)
    return [FindingChange(new.lesson, new.key, f"new finding, {text}") for key, text in _findings(new).items()
            if key not in old]


def differences(here: Record, incoming: Record) -> list[str]:
    """What replacing the record `here` by `incoming` would change, before -> after, one line each:
    the outcome, every benchmark that moved beyond noise (or appeared, or went), an older start, and a
    sanitizer finding the record here did not have."""
    found = []
    if incoming.started_utc < here.started_utc:
        found.append(f"started: {here.started_utc} here -> {incoming.started_utc} in the bundle (older than the "
                     "record here)")
    if here.outcome != incoming.outcome:
        found.append(f"outcome: {here.outcome} -> {incoming.outcome}")
    old, now = points_of(here), points_of(incoming)
    labels = {b.name: b.label for b in here.benchmarks} | {b.name: b.label for b in incoming.benchmarks}
    for name in [*old, *(n for n in now if n not in old)]:
        q, p = old.get(name), now.get(name)
        if q is None or p is None or moved(q, p):
            found.append(f"{labels[name]}: {_point(q)} -> {_point(p)}")
    found += [change.text for change in finding_changes(incoming, here)]
    return found


def _point(p: HistoryPoint | None) -> str:
    return "not recorded" if p is None else f"{p.ratio:.3f}x [{p.ratio_low:.3f}, {p.ratio_high:.3f}]"
