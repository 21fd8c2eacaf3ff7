"""Judge a lesson's evidence against its current source, once, for every reader.

One job: from a lesson and its records, decide the badge, the sentence that
explains it, a one-line summary of what was verified, and which records are
current and which come from an older source. The site, `verify.py --status`
and `verify.py --check` all read a LessonStatus; none of them re-judges.

Adding a status rule touches `_combine` (and, for a new badge, `Status`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from evidence import Record, lesson_records
from lessons import Lesson


class Status(Enum):
    """The badges, with their CSS class and what each means (the site's table comes from here)."""

    VERIFIED = ("VERIFIED", "vt-verified", "the interpreter run and a GPU run passed on the current source")
    PARTIAL = ("PARTIALLY VERIFIED", "vt-partial",
               "one of the two passed on the current source; the other has no current pass "
               "(not recorded, or declined by design, e.g. a GPU too old for the lesson)")
    FAILED = ("FAILED", "vt-failed", "a run on the current source failed")
    STALE = ("STALE", "vt-stale", "runs were recorded, but the source has changed since")
    UNVERIFIED = ("UNVERIFIED", "vt-unverified", "nothing usable has been recorded")

    def __init__(self, label: str, css: str, meaning: str):
        self.label, self.css, self.meaning = label, css, meaning

    def __str__(self) -> str:
        return self.label


VERIFIED, PARTIAL, FAILED, STALE, UNVERIFIED = (Status.VERIFIED, Status.PARTIAL, Status.FAILED, Status.STALE,
                                                Status.UNVERIFIED)
STATUSES = tuple(Status)


@dataclass
class ModeState:
    mode: str
    state: str  # passed | failed | by-design | not-supported | stale | none
    record: Record | None  # the record the state rests on
    phrase: str  # words for the status sentence


@dataclass
class LessonStatus:
    lesson: Lesson
    status: Status
    sentence: str  # why, in words, starting with a capital letter
    summary: str  # what was verified, in one line
    source_hash: str
    modes: dict[str, ModeState]
    records: list[Record]  # every usable record, current and stale
    problems: list[str] = field(default_factory=list)  # evidence files that could not be used, with why

    def is_current(self, record: Record) -> bool:
        return record.source_hash == self.source_hash

    @property
    def current(self) -> list[Record]:
        return [r for r in self.records if self.is_current(r)]

    @property
    def stale(self) -> list[Record]:
        return [r for r in self.records if not self.is_current(r)]


def judge(lesson: Lesson, evidence_dir: Path) -> LessonStatus:
    records, problems = lesson_records(evidence_dir, lesson.name)
    return judge_records(lesson, records, problems)


def judge_records(lesson: Lesson, records: list[Record], problems: list[str] | None = None) -> LessonStatus:
    source_hash = lesson.source_hash()
    interp = _interpreter_state(lesson, [r for r in records if r.mode == "interpreter"], source_hash)
    gpu = _mode_state("gpu", [r for r in records if r.mode == "gpu"], source_hash)
    status = _combine(interp.state, gpu.state)
    sentence = f"{interp.phrase}; {gpu.phrase}."
    sentence = sentence[:1].upper() + sentence[1:]
    unmet = []
    for r in (interp.record, gpu.record):
        if r is None or r.source_hash != source_hash:
            continue
        for b in r.benchmarks:
            if b.verdict not in (None, "met") and not b.gate:
                unmet.append(f"{b.label} reached {b.ratio:.2f}x against a {b.threshold:.2f}x goal ({b.verdict})")
            if b.stretch_verdict not in (None, "met"):
                unmet.append(f"{b.label} reached {b.ratio:.2f}x against a {b.stretch:.2f}x stretch goal "
                             f"({b.stretch_verdict})")
    if unmet:
        sentence += " Goals that do not gate the run, not met: " + "; ".join(unmet) + "."
    if problems:
        sentence += f" {len(problems)} evidence file(s) could not be used: " + "; ".join(problems) + "."
    current = [r for r in records if r.source_hash == source_hash]
    return LessonStatus(lesson, status, sentence, _summary(current), source_hash,
                        {"interpreter": interp, "gpu": gpu}, records, list(problems or []))


def _combine(interp: str, gpu: str) -> Status:
    states = (interp, gpu)
    if "failed" in states:
        return FAILED
    good = {"passed", "not-supported"}
    if interp in good and gpu in good and "passed" in states:
        return VERIFIED
    if "passed" in states:
        return PARTIAL
    if "stale" in states:
        return STALE
    return UNVERIFIED


def _interpreter_state(lesson: Lesson, records: list[Record], source_hash: str) -> ModeState:
    spec = lesson.modes["interpreter"]
    if not spec.supported:
        return ModeState("interpreter", "not-supported", None,
                         f"the interpreter cannot run this lesson ({spec.reason})")
    return _mode_state("interpreter", records, source_hash)


def _mode_state(mode: str, records: list[Record], source_hash: str) -> ModeState:
    current = sorted((r for r in records if r.source_hash == source_hash),
                     key=lambda r: r.started_utc, reverse=True)
    for wanted in ("failed", "passed", "by-design"):
        for record in current:
            state = "failed" if record.failed else record.outcome
            if state == wanted:
                return ModeState(mode, state, record, _phrase(record))
    label = "interpreter run" if mode == "interpreter" else "GPU run"
    if records:
        newest = max(records, key=lambda r: r.started_utc)
        return ModeState(mode, "stale", newest,
                         f"the {label} recorded on {newest.date} was for an older source and "
                         f"has not been repeated since the change")
    return ModeState(mode, "none", None, f"the {label} has not been recorded for this source")


def _phrase(record: Record) -> str:
    env = record.env
    if record.mode == "interpreter":
        who = f"the Triton {env.triton} interpreter run"
    else:
        who = f"the GPU run on {env.device_name or 'an unnamed GPU'} (Triton {env.triton}, torch {env.torch})"
    outcome = {
        "passed": "passed",
        "failed": f"failed (exit {record.exit_code}{': ' + record.reason if record.reason else ''})",
        "crashed": f"crashed ({record.reason or f'exit {record.exit_code}'})",
        "timeout": f"timed out after {record.wall_s:.0f} s",
        "by-design": f"stopped by design ({record.reason})",
    }[record.outcome]
    return f"{who} {outcome} on {record.date}"


def _summary(current: list[Record]) -> str:
    """'12 checks passed, 3 of 4 targets met (1 within noise) on NVIDIA H200; 9 checks under the interpreter'."""
    parts = []
    for r in sorted(current, key=lambda r: (r.mode != "gpu", r.key)):
        passed = sum(c.status == "pass" for c in r.checks)
        failed = sum(c.status == "fail" for c in r.checks)
        where = "under the interpreter" if r.mode == "interpreter" else f"on {r.env.device_name}"
        if r.outcome == "by-design":
            parts.append(f"declined by design {where}")
            continue
        text = f"{passed} checks passed" + (f", {failed} failed" if failed else "")
        verdicts = [v for b in r.benchmarks for v in (b.verdict, b.stretch_verdict) if v is not None]
        if verdicts:
            met = verdicts.count("met")
            noise = verdicts.count("within noise")
            text += f", {met} of {len(verdicts)} targets met" + (f" ({noise} within noise)" if noise else "")
        parts.append(f"{text} {where}")
    return "; ".join(parts) or "nothing verified on the current source"

