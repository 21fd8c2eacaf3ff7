"""Records across recordings: a bounded history, and every change an import must list.

One job: when a new record replaces an older one for the same lesson, mode
and GPU model, carry each benchmark's earlier results forward (at most
LIMITS.history of them, taken from this repository's records only: a bundle's
own history is never believed) and say which benchmarks moved; before an
import replaces a current record for the same source, list everything it
would change (`differences`).

Records are compared by their structure: the whole record, field by field,
recursively, against one short explicit list of what may change silently
(SILENT: dates, wall times, the environment, this repository's history) and
of the measured values that may move within their noise rule (MEASURED: the
benchmarks by their intervals, the numbers a run prints and tabulates within
TEXT_NOISE). Every other field that changes is listed, so a field added to the
format is compared the day it is added: nobody has to add it to a list. What
the lines below say in their own words (the outcome, the checks, the targets,
the predictions, the steps, the figures) is not said twice (SAID).

A move counts when the two recordings' 95 % intervals do not overlap and the
medians differ by more than NOISE (criterion.rs's noise threshold plays the
same part): two runs of unchanged code on one GPU differ by a few percent, and
a site that called that a regression would teach readers to ignore it. An
interval is judged too: one implausibly wide for its method (wider than +-50 %
of its median, or WIDER times as wide as any earlier recording of it here)
hides any move inside it, so it is a change to review, never "within noise".
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from verified_triton.core import kit
from verified_triton.core.limits import LIMITS
from verified_triton.core.numfmt import number
from verified_triton.judge.evidence import HistoryPoint, Record

NOISE = 0.02
WIDE = 0.5  # an interval reaching further than this from its median, relatively, is implausible for any method
WIDER = 4  # ...and so is one this many times as wide as the widest earlier recording of the benchmark here,
WIDER_FLOOR = 0.05  # once it reaches further than +-5 % at all
LISTED = 12  # names or lines of one kind listed per record; the rest are counted
TEXT_NOISE = 0.10  # a number a run prints or tabulates (a time, a rate) may move this much, relatively, unlisted

# What may change between two recordings of one source without being listed: when it ran (an older start is
# listed, below), how long it took, on which software and driver (`env`), this repository's own history, and
# how much of a long output was cut. Paths are the record's fields, list items written [].
SILENT = frozenset({"started_utc", "wall_s", "env", "history", "stdout_omitted", "stderr_omitted",
                    "steps[].stdout_omitted", "sanitizer.runs[].wall_s", "sanitizer.runs[].log_omitted"})
# Measured values, which move from run to run within their noise rule: text a run prints and the cells of its
# tables, compared with their words and integers equal and every other number within TEXT_NOISE (a memory
# address, in hex, may be anything). The benchmarks' rounds have their own rule (`moved`, `implausible`).
MEASURED = frozenset({"stdout", "stderr", "steps[].stdout", "checks[].message", "tables[].rows",
                      "predictions[].measured", "sanitizer.runs[].log", "sanitizer.runs[].notes",
                      "sanitizer.runs[].findings[].detail", "filtered_warnings[].example"})
# Said by the lines of `differences` in their own words (and the benchmarks' measured numbers, by their rule).
SAID = frozenset({"outcome", "checks[].status", "skipped_parts", "steps[].name", "steps[].not_run",
                  "figures[].file", "figures[].dark_file",
                  *(f"benchmarks[].{name}" for name in ("ratio", "ratio_low", "ratio_high", "measured", "baseline",
                                                        "kernel_ms", "baseline_ms", "threshold", "gate", "verdict",
                                                        "stretch", "stretch_verdict")),
                  *(f"predictions[].{name}" for name in ("value", "tolerance", "quantity", "of"))})
SAID_ITEMS = frozenset({"checks", "benchmarks", "predictions", "steps", "figures"})  # an item that came or went
NUMBER = re.compile(r"0x[0-9a-fA-F]+|[-+]?[0-9][0-9,]*(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?")


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
    """What replacing the record `here` by `incoming` (for the same source) would change, one line each,
    before -> after: the start, the outcome; the checks and their outcomes; every benchmark that moved beyond
    noise, appeared or went, or whose interval is implausibly wide; targets, gates and stretch goals and their
    verdicts; predictions and their verdicts; the steps; the skipped parts; the figures' bytes (their names);
    a sanitizer finding the record here did not have."""
    found = []
    if incoming.started_utc < here.started_utc:
        found.append(f"started: {here.started_utc} here -> {incoming.started_utc} in the bundle (older than the "
                     "record here)")
    if here.outcome != incoming.outcome:
        found.append(f"outcome: {here.outcome} -> {incoming.outcome}")
    found += _check_changes(here, incoming)
    found += _benchmark_changes(here, incoming)
    found += _target_changes(here, incoming)
    found += _prediction_changes(here, incoming)
    steps = [[s.name + (" (not run)" if s.not_run else "") for s in r.steps] for r in (here, incoming)]
    if steps[0] != steps[1]:
        found.append(f"steps: {_names(steps[0])} -> {_names(steps[1])}")
    parts = [[p.part for p in r.skipped_parts] for r in (here, incoming)]
    if parts[0] != parts[1]:
        found.append(f"skipped parts: {_names(parts[0])} -> {_names(parts[1])}")
    else:
        found += [f"skipped part {p.part}: its reason changed" for p, q in zip(here.skipped_parts,
                                                                               incoming.skipped_parts, strict=True)
                  if p.reason != q.reason][:LISTED]
    found += _figure_changes(here, incoming)
    found += [change.text for change in finding_changes(incoming, here)]
    found += _listed(list(structural_changes(here, incoming)), "fields changed")
    return found


def structural_changes(here: Record, incoming: Record):
    """Every field of the two records that differs, recursively, but what SILENT lets change, what MEASURED
    lets move within its noise rule, and what SAID says elsewhere: 'path: before -> after', one line each."""
    yield from _walk(asdict(here), asdict(incoming), "", "")


def _walk(a, b, path: str, shape: str):
    if shape in SILENT or shape in SAID:
        return
    if shape in MEASURED:
        if not _within_noise(a, b):
            yield f"{path}: {_shown(a, b)}"
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for key in [*a, *(k for k in b if k not in a)]:
            child = f"{path}.{key}" if path else str(key)
            yield from _walk(a.get(key, _ABSENT), b.get(key, _ABSENT), child, f"{shape}.{key}" if shape else key)
        return
    if isinstance(a, list) and isinstance(b, list):
        yield from _walk_list(a, b, path, shape)
        return
    if a != b or type(a) is not type(b):
        yield f"{path}: {_value(a)} -> {_value(b)}"


_ABSENT = object()  # a field one record has and the other has not (a format that grew)


def _walk_list(a: list, b: list, path: str, shape: str):
    """Items matched by their name (checks, benchmarks...), their tool (a sanitizer's runs) or, for findings,
    their kind, message and places; other lists item by item."""
    keys_a, keys_b = _keys(a), _keys(b)
    if keys_a is None or keys_b is None:
        for i in range(max(len(a), len(b))):
            yield from _walk(a[i] if i < len(a) else _ABSENT, b[i] if i < len(b) else _ABSENT, f"{path}[{i}]",
                             f"{shape}[]")
        return
    old, new = dict(zip(keys_a, a, strict=True)), dict(zip(keys_b, b, strict=True))
    for key in [*old, *(k for k in new if k not in old)]:
        if key in old and key in new:
            yield from _walk(old[key], new[key], f"{path}[{_short(key, 60)}]", f"{shape}[]")
        elif shape not in SAID_ITEMS and not (shape == "sanitizer.runs[].findings" and key not in old):
            # (a new finding has its own line: finding_changes)
            side = "not recorded -> recorded" if key in new else "recorded -> not recorded"
            yield f"{path}[{_short(key, 60)}]: {side}"


def _keys(items: list) -> list[str] | None:
    """Each item's identity where every item is an object with a unique one; None to compare by position."""
    if not items or not all(isinstance(item, dict) for item in items):
        return None
    for field_ in ("name", "tool"):
        keys = [item.get(field_) for item in items]
        if all(isinstance(k, str) for k in keys) and len(set(keys)) == len(keys):
            return keys
    if all({"kind", "message", "locations"} <= item.keys() for item in items):
        keys = [f"{item['kind']}: {item['message']} at " + ", ".join(
            f"{loc.get('kernel', '')}:{loc.get('file', '')}:{loc.get('line', '')}" for loc in item["locations"]
            if isinstance(loc, dict)) for item in items]
        if len(set(keys)) == len(keys):
            return keys
    return None


def _within_noise(a, b) -> bool:
    """Measured values alike but for their noise: numbers within TEXT_NOISE (integer cells equal), texts with
    the same words and their numbers so, lists item by item."""
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_within_noise(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, str) and isinstance(b, str):
        return _same_text(a, b)
    if _is_number(a) and _is_number(b):
        return a == b if isinstance(a, int) and isinstance(b, int) else _close_enough(float(a), float(b))
    return a == b and type(a) is type(b)


def _is_number(x) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def _close_enough(x: float, y: float) -> bool:
    return x == y or abs(x - y) <= TEXT_NOISE * max(abs(x), abs(y))


def _same_text(a: str, b: str) -> bool:
    if a == b:
        return True
    words_a, words_b = NUMBER.split(a), NUMBER.split(b)
    if words_a != words_b:
        return False
    for x, y in zip(NUMBER.findall(a), NUMBER.findall(b), strict=True):
        if x.startswith("0x") and y.startswith("0x"):
            continue  # an address
        try:
            if not _close_enough(float(x.replace(",", "")), float(y.replace(",", ""))):
                return False
        except ValueError:
            if x != y:
                return False
    return True


def _shown(a, b) -> str:
    """How two measured values differ, shortly: texts by the place where they part."""
    if isinstance(a, str) and isinstance(b, str):
        at = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
        start = max(0, at - 20)
        before, after = _value(a[start:start + 60]), _value(b[start:start + 60])
        return f"its text changed at character {number(at)} ({before} -> {after})"
    return f"{_value(a)} -> {_value(b)}"


def _value(x) -> str:
    """A value in a change line: bounded, a missing field said as such."""
    if x is _ABSENT:
        return "not recorded"
    return _short(repr(x), 80)


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."


def new_model(incoming: Record, current_others: list[Record]) -> list[str]:
    """A first record of a GPU model, in any mode on a GPU (its runs, or its memory check), for a lesson with
    current records of that mode from other models here: listed as new (it may turn a verified lesson into a
    failed one, or add a GPU the page will name)."""
    if incoming.mode == "interpreter" or not current_others:
        return []
    what = ", its first memory check" if incoming.mode == "sanitize" else ""
    return [f"a new GPU model here ({incoming.env.device_name[:60]}){what}: not recorded -> {incoming.outcome}"]


def _point(p: HistoryPoint | None) -> str:
    return "not recorded" if p is None else f"{p.ratio:.3f}x [{p.ratio_low:.3f}, {p.ratio_high:.3f}]"


def _names(names: list[str]) -> str:
    """'a, b, c' or 'none'; past LISTED names, how many more."""
    shown = ", ".join(names[:LISTED]) or "none"
    return shown + (f" and {len(names) - LISTED} more" if len(names) > LISTED else "")


def _listed(lines: list[str], what: str) -> list[str]:
    return lines[:LISTED] + ([f"... and {len(lines) - LISTED} more {what}"] if len(lines) > LISTED else [])


def _check_changes(here: Record, incoming: Record) -> list[str]:
    """'checks: 5 passed -> 1 skipped', then each check whose outcome changed, came or went."""
    old = {c.name: c.status for c in here.checks}
    new = {c.name: c.status for c in incoming.checks}
    if old == new:
        return []
    each = [f"check {name}: {old.get(name, 'not recorded')} -> {new.get(name, 'not recorded')}"
            for name in [*old, *(n for n in new if n not in old)] if old.get(name) != new.get(name)]
    return [f"checks: {_counted(here.checks)} -> {_counted(incoming.checks)}", *_listed(each, "checks changed")]


def _counted(checks) -> str:
    words = (("pass", "passed"), ("fail", "failed"), ("skip", "skipped"))
    counts = [f"{n} {word}" for status, word in words if (n := sum(c.status == status for c in checks))]
    return ", ".join(counts) or "none"


def _interval(p: HistoryPoint) -> tuple[float, float, float]:
    return p.ratio, p.ratio_low, p.ratio_high


def _spread(p: HistoryPoint) -> float:
    """How far the interval reaches from the median, relatively (0.05: +-5 %)."""
    return max(p.ratio - p.ratio_low, p.ratio_high - p.ratio) / p.ratio if p.ratio > 0 else float("inf")


def implausible(p: HistoryPoint, earlier: list[HistoryPoint]) -> str:
    """Why the interval of `p` is implausibly wide for its method ('' when it is not): past +-WIDE of its
    median, or WIDER times as wide as the widest of the `earlier` recordings of the benchmark here."""
    spread = _spread(p)
    if spread > WIDE:
        return (f"an interval implausibly wide for its method ({p.ratio_low / p.ratio - 1:+.0%} to "
                f"{p.ratio_high / p.ratio - 1:+.0%} of its median, past +-{WIDE:.0%}), which would hide any move")
    widest = max((_spread(q) for q in earlier), default=None)
    if widest is not None and spread > WIDER_FLOOR and spread > WIDER * widest:
        return (f"an interval implausibly wide for its method (+-{spread:.0%} of its median, more than {WIDER} "
                f"times the widest of its {len(earlier)} earlier recording(s) here, +-{widest:.0%})")
    return ""


def _benchmark_changes(here: Record, incoming: Record) -> list[str]:
    old, now = points_of(here), points_of(incoming)
    labels = {b.name: b.label for b in here.benchmarks} | {b.name: b.label for b in incoming.benchmarks}
    found = []
    for name in [*old, *(n for n in now if n not in old)]:
        q, p = old.get(name), now.get(name)
        wide = ""
        if p is not None and q is not None and _interval(p) != _interval(q):
            wide = implausible(p, [q, *here.history.get(name, [])])
        if q is None or p is None or moved(q, p) or wide:
            found.append(f"{labels[name]}: {_point(q)} -> {_point(p)}" + (f": {wide}" if wide else ""))
    return _listed(found, "benchmarks changed")


def _target(value: float | None, gate: bool | None = None) -> str:
    if value is None:
        return "none"
    return f"{number(value)}x" + ("" if gate is None else " (gates the run)" if gate else " (does not gate)")


def _target_changes(here: Record, incoming: Record) -> list[str]:
    """Targets, gates and stretch goals of the benchmarks in both, and the verdicts the intervals give them."""
    old = {b.name: b for b in here.benchmarks}
    found = []
    for b in incoming.benchmarks:
        a = old.get(b.name)
        if a is None:
            continue
        if (a.threshold, a.gate) != (b.threshold, b.gate):
            found.append(f"{b.label}: target {_target(a.threshold, a.gate)} -> {_target(b.threshold, b.gate)}")
        elif a.verdict != b.verdict:
            found.append(f"{b.label}: the {_target(b.threshold)} target: {a.verdict} -> {b.verdict}")
        if a.stretch != b.stretch:
            found.append(f"{b.label}: stretch goal {_target(a.stretch)} -> {_target(b.stretch)}")
        elif a.stretch_verdict != b.stretch_verdict:
            found.append(f"{b.label}: the {_target(b.stretch)} stretch goal: {a.stretch_verdict} -> "
                         f"{b.stretch_verdict}")
    return _listed(found, "targets changed")


def _prediction_changes(here: Record, incoming: Record) -> list[str]:
    """What each prediction says (its value, tolerance and quantity) and whether the run bore it out."""
    old = {p.name: p for p in here.predictions}
    new = {p.name: p for p in incoming.predictions}
    found = []
    for name in [*old, *(n for n in new if n not in old)]:
        a, b = old.get(name), new.get(name)
        if _said(a) != _said(b):
            found.append(f"prediction {name}: {_said(a)} -> {_said(b)}")
        elif a is not None and _fared(a, here) != _fared(b, incoming):
            found.append(f"prediction {name}: {_fared(a, here)} -> {_fared(b, incoming)}")
    return _listed(found, "predictions changed")


def _said(p: kit.Prediction | None) -> str:
    if p is None:
        return "not recorded"
    what = p.unit if p.quantity == "value" else f"the {p.quantity} of {p.of}"
    return f"{number(p.value)} +-{p.tolerance:.0%} ({what})"


def _fared(p: kit.Prediction, record: Record) -> str:
    outcome = kit.prediction_outcome(p, record.benchmarks)
    return "not measured" if outcome is None else "held" if outcome.held else "missed"


def _figure_changes(here: Record, incoming: Record) -> list[str]:
    """A figure drawn from other bytes has another name (evidence.hashed_name): every name that changed."""
    old = {f.name: (f.file, f.dark_file) for f in here.figures}
    new = {f.name: (f.file, f.dark_file) for f in incoming.figures}
    found = []
    for name in [*old, *(n for n in new if n not in old)]:
        a, b = old.get(name, ("not recorded", "")), new.get(name, ("not recorded", ""))
        if a[0] != b[0]:
            found.append(f"figure {name}: {a[0]} -> {b[0]}")
        if a[1] != b[1]:
            found.append(f"figure {name} (dark): {a[1] or 'none'} -> {b[1] or 'none'}")
    return _listed(found, "figures changed")
