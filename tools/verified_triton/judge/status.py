"""Judge a lesson's evidence against its current source, once, for every reader.

One job: from a lesson and its records, decide the badge, the sentence that
explains it, a one-line summary of what was verified, and which records are
current and which come from an older source. The site, `verify.py --status`
and `verify.py --check` all read a LessonStatus; none of them re-judges.

Adding a status rule touches `_combine` (and, for a new badge, `Status`).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from verified_triton.core import kit
from verified_triton.core.lessons import Lesson
from verified_triton.core.numfmt import fixed, seconds
from verified_triton.judge.evidence import Record, lesson_records, record_path


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
    return judge_records(lesson, records, problems, evidence_dir)


def judge_records(lesson: Lesson, records: list[Record], problems: list[str] | None = None,
                  evidence_dir: Path | None = None) -> LessonStatus:
    source_hash = lesson.source_hash()
    problems = list(problems or [])
    usable = []
    for record in records:  # a record that its own content contradicts is not used, and is named
        found = contradictions(lesson, record)
        if found:
            where = (record_path(evidence_dir, lesson.name, record.key) if evidence_dir is not None
                     else f"{lesson.name}/{record.key}.json")
            problems.append(f"{where}: {'; '.join(found)}; re-record it")
        else:
            usable.append(record)
    records = usable
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
                unmet.append(f"{b.label} reached {fixed(b.ratio)}x against a {fixed(b.threshold)}x goal "
                             f"({b.verdict})")
            if b.stretch_verdict not in (None, "met"):
                unmet.append(f"{b.label} reached {fixed(b.ratio)}x against a {fixed(b.stretch)}x stretch goal "
                             f"({b.stretch_verdict})")
    if unmet:
        sentence += " Goals that do not gate the run, not met: " + "; ".join(unmet) + "."
    if problems:
        sentence += f" {len(problems)} evidence file(s) could not be used: " + "; ".join(problems) + "."
    current = [r for r in records if r.source_hash == source_hash]
    return LessonStatus(lesson, status, sentence, _summary(current), source_hash,
                        {"interpreter": interp, "gpu": gpu}, records, problems)


# -- what a record's content implies ------------------------------------------------------------

def contradictions(lesson: Lesson, record: Record) -> list[str]:
    """Every claim of `record` that its own content does not bear out, as 'field: why' (none: usable).

    A record is never believed about itself: its outcome is re-derived from its exit code, its checks and
    its benchmarks with the kit's own pass rule; every benchmark's ratio, interval and verdicts from its
    recorded rounds; and, for the current source, whether the lesson's [requires] allow what it claims.
    """
    found = []
    for i, bench in enumerate(record.benchmarks):
        found += _benchmark_contradictions(bench, f"benchmarks[{i}]")
    found += _outcome_contradictions(lesson, record)
    if record.mode == "gpu" and record.skipped_parts:
        found.append("skipped_parts: a GPU run skips no parts (the kit records them under the interpreter only)")
    if record.source_hash == lesson.source_hash() and record.outcome == "passed":
        found += _requires_contradictions(lesson, record)
    return found


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9)


def _benchmark_contradictions(b, where: str) -> list[str]:
    """A benchmark re-derived as `lesson.benchmark` computes it: ratio, interval, medians, verdicts."""
    kernel, base = b.kernel_ms, b.baseline_ms
    if not kernel:
        return [f"{where}.kernel_ms: no rounds, so its ratio and verdicts cannot be re-derived (records of "
                "format 1 have none)"]
    if len(base) != len(kernel):
        return [f"{where}.baseline_ms: {len(base)} rounds against {len(kernel)} of the kernel"]
    if b.samples != len(kernel):
        return [f"{where}.samples: {b.samples}, but it has {len(kernel)} rounds"]
    if not all(math.isfinite(x) and x > 0 for x in (*kernel, *base, b.measured, b.baseline)):
        return [f"{where}.kernel_ms: times and rates are positive, finite numbers"]
    k_med, b_med = statistics.median(kernel), statistics.median(base)
    if b.unit in kit.RATE_UNITS:
        # measured = work / median(kernel_ms) * scale: the work per call of each side, recovered
        scale = kit.RATE_UNITS[b.unit]
        k_work, b_work = b.measured * k_med / scale, b.baseline * b_med / scale
        ratios = [(k_work / k * scale) / (b_work / t * scale) for k, t in zip(kernel, base, strict=True)]
        medians = []
    else:
        ratios = [t / k for k, t in zip(kernel, base, strict=True)]
        medians = [("measured", b.measured, k_med, "kernel"), ("baseline", b.baseline, b_med, "baseline")]
    found = []
    ratio, low, high = kit.median_interval(ratios)
    for name, stated, derived in (("ratio", b.ratio, ratio), ("ratio_low", b.ratio_low, low),
                                  ("ratio_high", b.ratio_high, high)):
        if not _close(stated, derived):
            found.append(f"{where}.{name}: {stated:.6g}, but the rounds give {derived:.6g}")
    for name, stated, derived, side in medians:
        if not _close(stated, derived):
            found.append(f"{where}.{name}: {stated:.6g}, but the median of its {side} rounds is {derived:.6g}")
    for name, target, stated in (("verdict", b.threshold, b.verdict), ("stretch_verdict", b.stretch,
                                                                        b.stretch_verdict)):
        derived = None if target is None else kit.verdict(b.ratio_low, b.ratio_high, target)
        if stated != derived:
            against = f"against {target:.6g}" if target is not None else "without a target"
            found.append(f"{where}.{name}: {stated!r}, but the interval {b.ratio_low:.6g}-{b.ratio_high:.6g} "
                         f"{against} gives {derived!r}")
    return found


def _outcome_contradictions(lesson: Lesson, record: Record) -> list[str]:
    """The outcome against the exit code, the checks and the gates, as runner.classify decides it."""
    code, outcome = record.exit_code, record.outcome
    if outcome == "timeout":
        return [] if code is None else [f"exit_code: a run that timed out has no exit code; this one has {code}"]
    if code is None:
        return [f"exit_code: missing, but only a run that timed out has none (outcome {outcome!r})"]
    if outcome == "crashed":
        return [] if code < 0 else [f"exit_code: a crash is a kill by a signal (a negative exit code); "
                                    f"this one has {code}"]
    if outcome == "by-design":
        # A declared exit or a decline is by design only when no check failed before it.
        found = [f"checks[{i}].status: a failed check in a record stopped by design" for i, c in
                 enumerate(record.checks) if c.status == "fail"]
        expected = lesson.modes[record.mode].expected_exits
        if code in expected:
            return found + ([] if record.reason == expected[code] else [
                f"reason: exit {code} is expected by design as {expected[code][:80]!r}, not {record.reason[:80]!r}"])
        if code != kit.EXIT_BY_DESIGN:
            return found + [f"exit_code: stopped by design, but exit code {code} is neither {kit.EXIT_BY_DESIGN} "
                            "(the kit declined by design) nor an exit lesson.toml expects"]
        return found + ([] if record.reason else ["reason: a run stopped by design says why; this one says nothing"])
    if outcome != "passed":
        return []
    found = [] if code == kit.EXIT_PASSED else [f"exit_code: a passing run exits {kit.EXIT_PASSED}; this one "
                                                 f"has exit code {code}"]
    found += [f"checks[{i}].status: a failed check in a record whose outcome is 'passed'"
              for i, c in enumerate(record.checks) if c.status == "fail"]
    found += [f"benchmarks[{i}].verdict: a gate not met in a record whose outcome is 'passed'"
              for i, b in enumerate(record.benchmarks) if kit.failures([], [b])]
    return found


def _requires_contradictions(lesson: Lesson, record: Record) -> list[str]:
    """A pass the lesson's [requires] rule out: the kit exits 2 on an older Triton, 3 on a smaller GPU."""
    found = []
    need = lesson.requires
    env = record.env
    if need.triton and not (env.triton[:1].isdigit() and kit.version_tuple(env.triton)
                            >= kit.version_tuple(need.triton)):
        found.append(f"env.triton: {env.triton[:40]!r} is older than the Triton {need.triton} this lesson "
                     "requires, where the kit stops before running (exit 2)")
    if record.mode == "gpu" and need.capability:
        if not env.capability[:1].isdigit():
            found.append(f"env.capability: not recorded, so the compute capability {need.capability} this "
                         "lesson requires cannot be checked")
        elif kit.version_tuple(env.capability) < kit.version_tuple(need.capability):
            found.append(f"env.capability: {env.capability[:20]!r} is below the compute capability "
                         f"{need.capability} this lesson requires, where the kit declines by design (exit 3)")
    return found


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
        triton = _version("Triton", env.triton)
        who = (f"the {triton} interpreter run" if env.triton[:1].isdigit()
               else "the interpreter run" + (f" ({triton})" if triton else ""))
    else:
        versions = ", ".join(v for v in (_version("Triton", env.triton), _version("torch", env.torch)) if v)
        who = f"the GPU run on {env.device_name or 'an unnamed GPU'}" + (f" ({versions})" if versions else "")
    outcome = {
        "passed": "passed",
        "failed": f"failed (exit {record.exit_code}{': ' + record.reason if record.reason else ''})",
        "crashed": f"crashed ({record.reason or f'exit {record.exit_code}'})",
        "timeout": f"timed out after {seconds(record.wall_s)}",
        "by-design": f"stopped by design ({record.reason})",
    }[record.outcome]
    return f"{who} {outcome} on {record.date}"


def _version(package: str, version: str) -> str:
    """'Triton 3.6.0', 'Triton not installed', or '' when the record does not say."""
    return f"{package} {version}" if version.strip() else ""


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

