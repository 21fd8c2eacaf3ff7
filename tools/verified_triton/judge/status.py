"""Judge a lesson's evidence against its current source, once, for every reader.

One job: from a lesson and its records, decide the badge, the sentence that
explains it (the record's), the headline above the lesson (a learner's line of
at most HEADLINE_WORDS words), whether a PARTIALLY VERIFIED is so only by
design, a one-line summary of what was verified, and which records are
current and which come from an older source. The site, `verify.py --status`
and `verify.py --check` all read a LessonStatus; none of them re-judges.

The memory check (a sanitize record: the lesson under compute-sanitizer) is
judged in judge/memory.py; its state joins the two runs' here. Once the course
has a sanitize record (any lesson), each lesson needs a current one for VERIFIED.

Adding a status rule touches `_combine` (and, for a new badge, `Status`).
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from verified_triton.core import kit
from verified_triton.core.lessons import Lesson
from verified_triton.core.numfmt import fixed, number, seconds
from verified_triton.judge.evidence import Record, lesson_records, record_path
from verified_triton.judge.exercises import ExercisesState, exercises_reason, judge_exercises
from verified_triton.judge.matrix import ReleaseMatrix, judge_releases
from verified_triton.judge.memory import MemoryCheck, lesson_uses_gluon, memory_state, sanitizer_contradictions


class Status(Enum):
    """The badges, with their CSS class and what each means (the site's table comes from here)."""

    VERIFIED = ("VERIFIED", "vt-verified", "the interpreter run and a GPU run passed on the current source (and, "
                "once the course records memory checks, compute-sanitizer found nothing unexplained in its kernels)")
    PARTIAL = ("PARTIALLY VERIFIED", "vt-partial",
               "one of the two passed on the current source; the other has no current pass: not recorded yet, "
               "or stopped by design, which the lesson's line then says in words (the interpreter cannot run "
               "Gluon kernels, so those lessons run them on the GPU only; a GPU too old for the lesson declines); "
               "or both passed and the memory check has not (not recorded yet, incomplete, or a finding neither "
               "fixed nor declared)")
    FAILED = ("FAILED", "vt-failed", "a run on the current source failed, or its memory check found errors in the "
              "lesson's kernels")
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
    records: list[Record]  # every usable record of the interpreter and GPU runs, current and stale
    problems: list[str] = field(default_factory=list)  # evidence files that could not be used, with why
    sanitize_records: list[Record] = field(default_factory=list)  # every usable sanitize record
    memory: MemoryCheck | None = None  # the current sanitize record's judgement, when there is one
    releases: ReleaseMatrix | None = None  # the runs under other Triton releases (information; never the badge)
    # The line above the lesson, in a learner's words, at most HEADLINE_WORDS words (the page appends the link
    # to the record): "Verified: ran on an H200 and under the interpreter, December 2026; all 10 checks passed."
    headline: str = ""
    # A PARTIALLY VERIFIED that is so only by design (a run stopped by the lesson's own declaration: Gluon's
    # kernels have no interpreter, a GPU below [requires] capability declines), not for want of evidence.
    by_design: bool = False
    exercises: ExercisesState | None = None  # the exercises' proof, judged (judge/exercises.py)

    def is_current(self, record: Record) -> bool:
        return record.source_hash == self.source_hash

    @property
    def current(self) -> list[Record]:
        return [r for r in self.records if self.is_current(r)]

    @property
    def stale(self) -> list[Record]:
        return [r for r in self.records if not self.is_current(r)]

    @property
    def stale_sanitize(self) -> list[Record]:
        return [r for r in self.sanitize_records if not self.is_current(r)]


def judge(lesson: Lesson, evidence_dir: Path) -> LessonStatus:
    records, problems = lesson_records(evidence_dir, lesson.name)
    st = judge_records(lesson, records, problems, evidence_dir, course_checks_memory(evidence_dir),
                       judge_exercises(lesson, evidence_dir))
    st.releases = judge_releases(lesson, evidence_dir)
    return st


def course_checks_memory(evidence_dir: Path) -> bool:
    """Whether the course has memory checks: a sanitize record of any lesson in evidence/."""
    try:
        return any(Path(evidence_dir).glob("*/sanitize-*.json"))
    except OSError:
        return False


def judge_records(lesson: Lesson, records: list[Record], problems: list[str] | None = None,
                  evidence_dir: Path | None = None, memory_required: bool = False,
                  exercises: ExercisesState | None = None) -> LessonStatus:
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
    sanitize_records = [r for r in usable if r.mode == "sanitize"]
    records = [r for r in usable if r.mode != "sanitize"]
    interp = _interpreter_state(lesson, [r for r in records if r.mode == "interpreter"], source_hash)
    gpu = _mode_state("gpu", [r for r in records if r.mode == "gpu"], source_hash)
    judged = memory_state(lesson, sanitize_records, source_hash, memory_required or bool(sanitize_records))
    memory_mode, memory = ModeState("sanitize", judged.state, judged.record, judged.phrase), judged.check
    badge_interp = with_exercises(interp, exercises)  # a stale or failed exercises' proof counts as the run's
    status = _combine(badge_interp.state, gpu.state, memory_mode.state)
    runs = _by_design_words(interp, gpu) or f"{interp.phrase}; {gpu.phrase}."
    sentence = f"{runs} {memory_mode.phrase[:1].upper()}{memory_mode.phrase[1:]}."
    if exercises is not None and exercises.phrase:
        sentence += f" {exercises.phrase[:1].upper()}{exercises.phrase[1:]}."
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
    by_design = partial_by_design(status, badge_interp, gpu, memory_mode)
    return LessonStatus(lesson, status, sentence, _summary(current), source_hash,
                        {"interpreter": interp, "gpu": gpu, "sanitize": memory_mode}, records, problems,
                        sanitize_records, memory,
                        headline=headline(lesson, status, by_design, interp, gpu, memory_mode, memory, problems,
                                          records, exercises),
                        by_design=by_design, exercises=exercises)


def with_exercises(interp: ModeState, exercises: ExercisesState | None) -> ModeState:
    """The interpreter's state as the badge reads it: a failed exercises' proof fails it, a stale or missing one
    makes it stale or missing (judge/exercises.py), unless the run itself is worse already."""
    blocked = exercises.blocks() if exercises is not None else ""
    if not blocked or interp.state in ("failed", "not-supported") or (blocked != "failed" and interp.state in
                                                                       ("stale", "none")):
        return interp
    return ModeState(interp.mode, blocked, interp.record, exercises.phrase)


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
    if record.sanitizer is not None:
        found += sanitizer_contradictions(lesson, record)
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
        expected = lesson.modes["interpreter" if record.mode == "interpreter" else "gpu"].expected_exits
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
    if record.mode in ("gpu", "sanitize") and need.capability:
        if not env.capability[:1].isdigit():
            found.append(f"env.capability: not recorded, so the compute capability {need.capability} this "
                         "lesson requires cannot be checked")
        elif kit.version_tuple(env.capability) < kit.version_tuple(need.capability):
            found.append(f"env.capability: {env.capability[:20]!r} is below the compute capability "
                         f"{need.capability} this lesson requires, where the kit declines by design (exit 3)")
    return found


def _combine(interp: str, gpu: str, memory: str = "not-required") -> Status:
    states = (interp, gpu)
    if "failed" in states or memory == "failed":
        return FAILED
    good = {"passed", "not-supported"}
    if interp in good and gpu in good and "passed" in states:
        return VERIFIED if memory in ("passed", "not-supported", "not-required") else PARTIAL
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


def _who(record: Record) -> str:
    """'the Triton 3.6.0 interpreter run', 'the GPU run on NVIDIA H200 (Triton 3.6.0, torch 2.9.0)'."""
    env = record.env
    if record.mode == "interpreter":
        triton = _version("Triton", env.triton)
        return (f"the {triton} interpreter run" if env.triton[:1].isdigit()
                else "the interpreter run" + (f" ({triton})" if triton else ""))
    versions = ", ".join(v for v in (_version("Triton", env.triton), _version("torch", env.torch)) if v)
    return f"the GPU run on {env.device_name or 'an unnamed GPU'}" + (f" ({versions})" if versions else "")


def _phrase(record: Record) -> str:
    who = _who(record)
    if record.outcome == "failed":  # the cause last, said once: the reason may give the exit code itself
        code = f"exit {record.exit_code}"
        cause = (record.reason if record.reason.startswith(code) else f"{code}: {record.reason}") if record.reason \
            else code
        return f"{who} failed on {record.date} with {cause}"
    outcome = {
        "passed": "passed",
        "crashed": f"crashed ({record.reason or f'exit {record.exit_code}'})",
        "timeout": f"timed out after {seconds(record.wall_s)}",
        "by-design": f"stopped by design ({record.reason})",
    }[record.outcome]
    return f"{who} {outcome} on {record.date}"


def _by_design_words(interp: ModeState, gpu: ModeState) -> str:
    """The two runs in plain words when one stopped by design and the other passed (a PARTIALLY VERIFIED that is
    no defect): what the interpreter could not run and that the GPU run passed, or which GPU the lesson needs;
    "" otherwise."""
    if interp.state == "by-design" and gpu.state == "passed":
        record = interp.record
        ran = [c for c in record.checks if c.status == "pass"]
        passed = "passed" if len(ran) == 1 else "all passed"
        what = f"ran what the interpreter can ({_count(len(ran), 'check')}, {passed}) and stopped" if ran else "stopped"
        return (f"By design, not a fault: {_who(record)} {what} on {record.date} before the rest ({record.reason}); "
                f"{_who(gpu.record)} ran all of it and passed on {gpu.record.date}.")
    if gpu.state == "by-design" and interp.state == "passed":
        record = gpu.record
        return (f"By design, not a fault: {_who(record)} declined on {record.date} ({record.reason}), so no GPU has "
                f"run the kernels yet; {interp.phrase}.")
    return ""


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _version(package: str, version: str) -> str:
    """'Triton 3.6.0', 'Triton not installed', or '' when the record does not say."""
    return f"{package} {version}" if version.strip() else ""


def _summary(current: list[Record]) -> str:
    """'12 checks passed, both gates met, 1 of 2 stretch goals met on NVIDIA H200; 9 checks passed under the
    interpreter'. Gates, goals that do not gate the run and stretch goals are counted apart, so a page never
    sets a missed stretch goal beside VERIFIED as if it were a missed gate."""
    parts = []
    for r in sorted(current, key=lambda r: (r.mode != "gpu", r.key)):
        passed = sum(c.status == "pass" for c in r.checks)
        failed = sum(c.status == "fail" for c in r.checks)
        where = "under the interpreter" if r.mode == "interpreter" else f"on {r.env.device_name}"
        if r.outcome == "by-design":
            why = _first_clause(r.reason)
            done = (f"{_count(passed, 'check')} passed {where}, then it stopped by design" if passed
                    else f"declined by design {where}")
            parts.append(done + (f": {why}" if why else ""))
            continue
        text = f"{_count(passed, 'check')} passed" + (f", {failed} failed" if failed else "")
        text += "".join(f", {words}" for words in target_words(r))
        parts.append(f"{text} {where}")
    return "; ".join(parts) or "nothing verified on the current source"


def target_words(record: Record) -> list[str]:
    """The record's verdicts in words, each kind apart, each kind that has any: gates, goals (which do not gate
    the run), stretch goals: ['both gates met', '0 of 2 stretch goals met']. The summary and the site's folded
    benchmarks line say the same."""
    kinds: dict[str, list[str]] = {"gate": [], "goal": [], "stretch goal": []}
    for b in record.benchmarks:
        if b.verdict is not None:
            kinds["gate" if b.gate else "goal"].append(b.verdict)
        if b.stretch_verdict is not None:
            kinds["stretch goal"].append(b.stretch_verdict)
    return [_verdict_words(kind, verdicts) for kind, verdicts in kinds.items() if verdicts]


def _verdict_words(kind: str, verdicts: list[str]) -> str:
    """'the gate met', 'both gates met', 'all 4 gates met', '1 of 3 stretch goals met (1 within noise)'."""
    n, met, noise = len(verdicts), verdicts.count("met"), verdicts.count("within noise")
    if n == 1:
        return f"the {kind} {verdicts[0]}"
    if met == n:
        return f"both {kind}s met" if n == 2 else f"all {n} {kind}s met"
    return f"{met} of {n} {kind}s met" + (f" ({noise} within noise)" if noise else "")


def _first_clause(reason: str, limit: int = 120) -> str:
    """A reason's first clause (up to its first parenthesis or semicolon), for a one-line summary."""
    clause = reason.split(";")[0].split(" (")[0].strip().rstrip(".")
    return clause if len(clause) <= limit else clause[:limit].rsplit(" ", 1)[0] + " ..."



# -- the headline: the line above the lesson -----------------------------------------------------------
#
# What the long sentence says, in a learner's words and at most HEADLINE_WORDS words: where it ran, when,
# how many checks passed, and, only as a short reason each, what a run did not reach. No tool names and no
# gate or stretch vocabulary (those are the record's); the GPU named once. Every word comes from a fixed
# vocabulary or from a number, a month, a short GPU name or an architecture the evidence and lesson.toml
# hold: nothing a record says in its own words reaches it, so its length is bounded whatever a record holds.

HEADLINE_WORDS = 27  # the page appends "The record →" (3 words): the visible line stays within 30 (issue 48)
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
# The architecture a [requires] capability asks for, for "no Blackwell GPU yet" (major, or (major, minor)).
ARCHITECTURES = {7: "Volta", (7, 5): "Turing", 8: "Ampere", (8, 9): "Ada", 9: "Hopper", 10: "Blackwell",
                 11: "Blackwell", 12: "Blackwell"}
GPU_NOISE = re.compile(r"(?i)nvidia|geforce|tesla|quadro|[0-9]+gb|hbm[0-9a-z]*|pcie|sxm[0-9]*|nvl|mig|"
                       r"[0-9]+g\.[0-9]+gb")
PREFIXES = {Status.VERIFIED: "Verified", Status.FAILED: "Failed", Status.STALE: "Out of date",
            Status.UNVERIFIED: "Not verified yet"}


def partial_by_design(status: Status, interp: ModeState, gpu: ModeState, memory: ModeState) -> bool:
    """A PARTIALLY VERIFIED only by design: one run stopped by the lesson's own declaration (the interpreter run
    of a Gluon lesson after its CPU checks all passed, or a GPU run declined by [requires] capability), the
    other passed, and the memory check passed, does not apply, or could not run on the GPU that declined."""
    if status is not PARTIAL:
        return False
    ran_checks = interp.record is not None and any(c.status == "pass" for c in interp.record.checks)
    stopped = ((interp.state == "by-design" and ran_checks and gpu.state == "passed")
               or (gpu.state == "by-design" and interp.state in ("passed", "not-supported")))
    memory_ok = memory.state in ("passed", "not-supported", "not-required", "by-design") or (
        gpu.state == "by-design" and memory.state == "none")
    return stopped and memory_ok


def headline(lesson: Lesson, status: Status, by_design: bool, interp: ModeState, gpu: ModeState,
             memory: ModeState, check: MemoryCheck | None, problems: list[str], records: list[Record],
             exercises: ExercisesState | None = None) -> str:
    """The status line above a lesson (see the section's comment): 'Verified: ran on an H200 and under the
    interpreter, December 2026; all 10 checks passed.' Clauses are taken in order of importance while they fit
    HEADLINE_WORDS; the first (where it ran, or why nothing did) and the reason for the badge always do."""
    prefix = "Partly verified by design" if by_design else "Partly verified" if status is PARTIAL \
        else PREFIXES[status]
    # The checks counted are those of the runs the line names: passed, failed, or the interpreter's part of a
    # lesson it stops by design (a GPU run declined by design ran none of the lesson).
    runs = [m for m in (interp, gpu) if m.record is not None and (m.state in ("passed", "failed") or (
        m is interp and m.state == "by-design"))]
    dated = [m.record for m in (interp, gpu, memory) if m.record is not None and m.state != "stale"]
    if status is STALE:
        newest = max((r for r in records), key=lambda r: r.started_utc, default=None)
        when = f" of {_month(newest)}" if newest is not None else ""
        return f"{prefix}: the lesson changed after its runs{when}; they need repeating."
    places = []
    if gpu.state == "passed":
        places.append(f"on {_gpu_words(gpu.record)}")
    if interp.state == "passed" or (interp.state == "by-design" and any(c.status == "pass"
                                                                       for c in interp.record.checks)):
        places.append("under the interpreter")
    newest = max(dated, key=lambda r: r.started_utc, default=None)
    first = (f"ran {' and '.join(places)}, {_month(newest)}" if places
             else f"no run passed for this version, {_month(newest)}" if newest is not None
             else "nothing has been recorded for this version")
    # "all" only when every run counted ran to its end: a run that timed out or crashed stopped part-way
    stopped = any(m.record.outcome in ("timeout", "crashed") for m in runs)
    checks = _checks_words([c for m in runs for c in m.record.checks], complete=not stopped)
    reasons = _failures(interp, gpu, memory) + _shortfalls(lesson, interp, gpu, memory, check)
    reasons = exercises_reason(exercises) + reasons  # judge/exercises.py: a fixed phrase, or nothing
    if problems:
        reasons.append("an evidence file is unusable" if len(problems) == 1
                       else f"{number(len(problems))} evidence files are unusable")
    missed = sum(b.verdict not in (None, "met") and not b.gate for b in _benchmarks(gpu)) + sum(
        b.stretch_verdict not in (None, "met") for b in _benchmarks(gpu))
    if missed:
        reasons.append("its speed goal unmet" if missed == 1 and _goals(gpu) == 1
                       else f"{number(missed)} speed goal{'s' * (missed != 1)} unmet")
    clauses = [first] + ([checks] if checks else []) + reasons[:1]  # the first reason is why the badge is not better
    for reason in reasons[1:]:
        if _words([*clauses, reason], prefix) <= HEADLINE_WORDS:
            clauses.append(reason)
    if memory.state == "passed" and status in (VERIFIED, PARTIAL) and checks.endswith(" passed"):
        # said when it fits: the memory check passed too
        memory_too = checks.removesuffix(" passed") + " and the memory check passed"
        if _words([clauses[0], memory_too, *clauses[2:]], prefix) <= HEADLINE_WORDS:
            clauses[1] = memory_too
    return f"{prefix}: {'; '.join(clauses)}."


def _checks_words(checks: list, complete: bool) -> str:
    """'all 30 checks passed', '28 checks passed' (some skipped, or a run stopped part-way: not `complete`),
    '2 of 30 checks failed'; '' for none."""
    passed, failed = (sum(c.status == status for c in checks) for status in ("pass", "fail"))
    if failed:
        return f"{number(failed)} of {number(len(checks))} checks failed"
    if not passed:
        return ""
    if passed < len(checks) or passed == 1 or not complete:
        return f"{number(passed)} check{'s' * (passed != 1)} passed"
    return "both checks passed" if passed == 2 else f"all {number(passed)} checks passed"


def _words(clauses: list[str], prefix: str) -> int:
    return len(f"{prefix}: {'; '.join(clauses)}.".split())


def _failures(interp: ModeState, gpu: ModeState, memory: ModeState) -> list[str]:
    """What failed, one short reason each (failed checks are counted in the checks clause)."""
    found = []
    for mode, where in ((interp, "the interpreter run"), (gpu, f"the run on {_gpu_words(gpu.record)}")):
        if mode.state != "failed":
            continue
        record = mode.record
        if record.outcome == "timeout":
            found.append(f"{where} ran out of time")
        elif record.outcome == "crashed":
            found.append(f"{where} crashed")
        elif any(kit.failures([], [b]) for b in record.benchmarks):
            found.append(f"{where} missed a required speed target")
        elif not any(c.status == "fail" for c in record.checks):
            found.append(f"{where} failed")
    if memory.state == "failed":
        found.append("the memory check found errors")
    return found


def _shortfalls(lesson: Lesson, interp: ModeState, gpu: ModeState, memory: ModeState,
                check: MemoryCheck | None) -> list[str]:
    """What a run did not reach, one short reason each: a stop by design, a run missing or out of date."""
    found = []
    if interp.state == "by-design":
        found.append("Gluon has no interpreter" if lesson_uses_gluon(lesson) else "the interpreter cannot run it all")
    if gpu.state == "by-design":
        found.append(f"no {_architecture(lesson.requires.capability) or 'suitable'} GPU yet")
    for mode, run in ((gpu, "GPU run"), (interp, "interpreter run")):
        if mode.state == "none":
            found.append(f"{'an' if run[0] == 'i' else 'a'} {run} is missing")
        elif mode.state == "stale":
            found.append(f"the {run} is out of date")
    if memory.state == "none" and gpu.state != "by-design":
        found.append("the memory check is missing")
    elif memory.state == "stale":
        found.append("the memory check is out of date")
    elif memory.state == "partial":
        unexplained = check is not None and (check.refused or any(j.known is None for t in check.tools
                                                                  for j in t.lessons))
        found.append("the memory check found something unexplained" if unexplained
                     else "the memory check is incomplete")
    return found


def _benchmarks(mode: ModeState) -> list:
    return mode.record.benchmarks if mode.state == "passed" and mode.record is not None else []


def _goals(mode: ModeState) -> int:
    """How many targets of the run do not gate it (goals and stretch goals)."""
    return sum(b.threshold is not None and not b.gate for b in _benchmarks(mode)) + sum(
        b.stretch is not None for b in _benchmarks(mode))


def _month(record: Record) -> str:
    """'December 2026', from the record's start (a strict UTC stamp: its schema checked it)."""
    return f"{MONTHS[int(record.started_utc[5:7]) - 1]} {record.started_utc[:4]}"


def _gpu_words(record: Record | None) -> str:
    """'an H200', 'an H100', 'an RTX 4090': the model in at most two short words, with its article; 'a GPU'."""
    name = record.env.device_name if record is not None else ""
    # A model's words carry a digit (H200, 4090) or are a short capitalised series (RTX): a name a record
    # makes up of other words is said as "a GPU".
    words = [w for w in re.split(r"[\s_-]+", name) if re.fullmatch(r"[A-Za-z0-9.]{1,12}", w)
             and not GPU_NOISE.fullmatch(w) and (re.search(r"[0-9]", w) or re.fullmatch(r"[A-Z]{2,5}", w))][:2]
    if not words:
        return "a GPU"
    first = words[0]
    # Read as letters (H100, RTX, L4: "an H100") or as a word (Titan: "a Titan").
    spelled = first[1:2].isdigit() or first.isupper()
    vowel = first[0].upper() in ("AEFHILMNORSX" if spelled else "AEIOU")
    return f"{'an' if vowel else 'a'} {' '.join(words)}"


def _architecture(capability: str) -> str:
    """'Blackwell' for [requires] capability 10.0; 'compute capability 13.0' where no name is known; '' for none
    (lesson.toml's schema checked it is a version)."""
    try:
        major, minor = (int(x) for x in (capability.split(".") + ["0"])[:2])
    except ValueError:
        return ""
    name = ARCHITECTURES.get((major, minor)) or ARCHITECTURES.get(major)
    return name or f"compute capability {number(major)}.{number(minor)}"
