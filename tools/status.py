"""Judge a lesson's evidence against its current source: one badge and one sentence.

VERIFIED            interpreter and GPU runs passed on the current source
                    (a mode the lesson declares unsupported is set aside)
PARTIALLY VERIFIED  one mode passed on the current source, the other has no current pass
FAILED              a current run failed
STALE               evidence exists, but none of it is for the current source
UNVERIFIED          no evidence at all
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from evidence import Record, lesson_records
from lessons import Lesson

VERIFIED = "VERIFIED"
PARTIAL = "PARTIALLY VERIFIED"
FAILED = "FAILED"
STALE = "STALE"
UNVERIFIED = "UNVERIFIED"
STATUSES = (VERIFIED, PARTIAL, FAILED, STALE, UNVERIFIED)


@dataclass
class ModeState:
    mode: str
    state: str  # passed | failed | by-design | not-supported | stale | none
    record: Record | None  # the record the state rests on
    phrase: str  # words for the status sentence


@dataclass
class LessonStatus:
    lesson: Lesson
    status: str
    sentence: str
    source_hash: str
    modes: dict[str, ModeState]
    records: list[Record]

    @property
    def current_records(self) -> list[Record]:
        return [r for r in self.records if r.source_hash == self.source_hash]


def judge(lesson: Lesson, evidence_dir: Path) -> LessonStatus:
    source_hash = lesson.source_hash()
    records = lesson_records(evidence_dir, lesson.name)
    interp = _interpreter_state(lesson, [r for r in records if r.mode == "interpreter"], source_hash)
    gpu = _mode_state("gpu", [r for r in records if r.mode == "gpu"], source_hash)
    status = _combine(interp.state, gpu.state)
    sentence = f"{status}: {interp.phrase}; {gpu.phrase}."
    unmet = []
    for r in (interp.record, gpu.record):
        if r is None or r.source_hash != source_hash:
            continue
        for b in r.benchmarks:
            if b.met is False and not b.gate:
                unmet.append(f"{b.name} reached {b.ratio:.2f}x against a {b.threshold:.2f}x goal")
            if b.stretch_met is False:
                unmet.append(f"{b.name} reached {b.ratio:.2f}x against a {b.stretch:.2f}x stretch goal")
    if unmet:
        sentence += " Not met (goals that do not gate the run): " + "; ".join(unmet) + "."
    return LessonStatus(lesson, status, sentence, source_hash, {"interpreter": interp, "gpu": gpu}, records)


def _combine(interp: str, gpu: str) -> str:
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
            state = "failed" if record.outcome in ("failed", "timeout", "crashed") else record.outcome
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


def judge_all(lessons: list[Lesson], evidence_dir: Path) -> list[LessonStatus]:
    return [judge(lesson, evidence_dir) for lesson in lessons]
