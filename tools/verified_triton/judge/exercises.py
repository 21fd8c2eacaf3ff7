"""The exercises' record, and the one judgement of it: are the lesson's checkers proven?

One job: define the record `verify.py` writes after proving a lesson's exercises (record/exercises.py),
read it back through the schema, and judge it against the lesson's exercise files now:

    evidence/<lesson>/exercises.json

A lesson poses exercises when its folder holds exercises.py (the starters and their checks, code/practice.py
runs them) and solutions.py (the answers, and MISTAKES: each exercise's classic mistakes as small edits of
its answer, each with the words its check must say). One process under the interpreter ran every check on
the starter, on the answer and on each mistake; the record keeps what each attempt said. The record is tied
to its own hash, over exercises.py, solutions.py and their local imports (core/lessons.py: exercise_files),
so an edited exercise makes it stale and leaves the lesson's GPU record current.

Nothing in the record is believed about itself: whether a mistake was caught is derived here (its check
failed, and said the declared words), never read. The judgement:

- passed: every exercise that runs here passes on its answer and fails on its starter, and every mistake
  declared for it is caught; at least MIN_EXERCISES exercises run here, each declaring at least
  MIN_MISTAKES mistakes. An exercise that needs a GPU (Gluon) is recorded as not run, its mistakes not
  proven; it counts for nothing either way.
- failed: any of those is not so (a checker that lets a declared mistake through, an answer that fails,
  a starter that passes), or the proof itself failed to run: a failed check of the lesson (FAILED).
- stale / none: no record for the exercises as they are now: like a stale or missing interpreter run,
  the lesson is not VERIFIED, and `verify.py --check` names it.
- not-required: the lesson poses no exercises (yet): nothing is judged.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

from verified_triton.core import schema
from verified_triton.core.lessons import Lesson, exercise_file_hashes, exercise_hash, has_exercises
from verified_triton.core.limits import LIMITS
from verified_triton.judge.evidence import (
    EXERCISES_RECORD,
    STAMP_RULE,
    EvidenceError,
    atomic_write_text,
    load_checked,
    parse_json,
    read_json,
)

FORMAT = 1
MIN_EXERCISES = 2  # per lesson, runnable under the interpreter
MIN_MISTAKES = 2  # declared per exercise
EXERCISE_NAME = re.compile(r"\A[a-z0-9]+(?:-[a-z0-9]+)*\Z")  # like a snippet region's: the page names it
ATTEMPT = Literal["passed", "failed", "needs a GPU", "error"]  # "error": a mistake's edit could not load
COMMAND = ".venv/bin/python tools/verify.py --lesson {name}"


@dataclass
class Attempt:
    status: ATTEMPT
    message: str = ""


@dataclass
class MistakeResult:
    name: str
    find: str
    replace: str
    says: str  # what the check must say when it fails this mistake
    status: ATTEMPT
    message: str = ""


@dataclass
class ExerciseResult:
    name: str
    hint: str
    needs_gpu: str  # why it runs on a GPU only ("": under the interpreter too)
    starter: Attempt
    solution: Attempt
    mistakes: list[MistakeResult] = field(default_factory=list)


@dataclass
class ProofEnv:
    python: str = ""
    torch: str = ""
    triton: str = ""


@dataclass
class ExercisesProof:
    """What record/exercise_proof.py writes, read through the schema before anything uses it."""

    exercises: list[ExerciseResult]
    env: ProofEnv
    unknown_mistakes: list[str] = field(default_factory=list)  # MISTAKES keys naming no exercise


@dataclass
class ExercisesRecord:
    lesson: str
    outcome: Literal["completed", "failed", "timeout", "crashed"]  # of the proving process itself
    exit_code: int | None
    reason: str  # why the proof did not complete ('' when it did)
    started_utc: str
    wall_s: float
    command: str
    source_hash: str  # core/lessons.py exercise_hash: exercises.py, solutions.py and their imports
    source_files: dict[str, str]
    env: ProofEnv
    exercises: list[ExerciseResult] = field(default_factory=list)
    unknown_mistakes: list[str] = field(default_factory=list)
    stderr: str = ""  # the proof's last words, when it failed
    format_version: int = FORMAT

    @property
    def date(self) -> str:
        return self.started_utc[:10]

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, ensure_ascii=False, allow_nan=False) + "\n"


# -- reading and writing -------------------------------------------------------------------

def record_path(evidence_dir: Path, lesson: str) -> Path:
    return Path(evidence_dir) / lesson / EXERCISES_RECORD


def proof_from_json(data: bytes, where: str) -> ExercisesProof:
    try:
        proof = schema.load(ExercisesProof, parse_json(data, where))
        _results_rules(proof.exercises, "exercises")
    except schema.SchemaError as exc:
        raise EvidenceError(f"{where}: {exc}") from None
    return proof


def read_exercises(path: Path, root: Path | None = None) -> ExercisesRecord:
    """The record from disk, bounded and through no link, through the schema and its value rules."""
    raw = read_json(path, LIMITS.exercises_json, root)
    if not isinstance(raw, dict) or raw.get("format_version") != FORMAT:
        raise EvidenceError(f"{path}: not an exercises record of format {FORMAT}; re-record it")
    return load_checked(ExercisesRecord, raw, str(path), _value_rules)


def write_exercises(evidence_dir: Path, record: ExercisesRecord) -> Path:
    path = record_path(evidence_dir, record.lesson)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, record.to_json())
    return path


def _value_rules(r: ExercisesRecord) -> None:
    req = schema.require
    req(schema.LESSON_NAME.match(r.lesson) is not None, "lesson", f"{r.lesson[:60]!r} is not a lesson name")
    req(schema.utc_stamp(r.started_utc) is not None, "started_utc", STAMP_RULE)
    req(schema.SHA256.match(r.source_hash) is not None, "source_hash", "expected 64 hex digits")
    for rel, sha in r.source_files.items():
        req(schema.REL_PATH.match(rel) is not None and schema.SHA256.match(sha) is not None,
            "source_files", f"{rel[:60]!r}: expected a relative path and 64 hex digits")
    req(0 <= r.wall_s <= 4 * 3600, "wall_s", "expected 0 to 14400 seconds")
    req((r.outcome == "timeout") == (r.exit_code is None), "exit_code",
        "only a proof killed at its time limit has no exit code")
    req(r.outcome != "completed" or (r.exit_code == 0 and bool(r.exercises)), "outcome",
        "a completed proof exits 0 and holds the exercises it ran")
    _results_rules(r.exercises, "exercises")


def _results_rules(results: list[ExerciseResult], where: str) -> None:
    names = [e.name for e in results]
    for i, e in enumerate(results):
        schema.require(EXERCISE_NAME.match(e.name) is not None and len(e.name) <= LIMITS.name,
                       f"{where}[{i}].name", f"{e.name[:60]!r}: lower-case letters, digits and '-'")
        schema.require(names.count(e.name) == 1, f"{where}[{i}].name", f"{e.name!r} twice")
        gpu = "needs a GPU"
        for who in ("starter", "solution"):
            status = getattr(e, who).status
            schema.require(status != "error", f"{where}[{i}].{who}.status", "only a mistake's edit can fail to load")
            schema.require((status == gpu) == bool(e.needs_gpu), f"{where}[{i}].{who}.status",
                           "an exercise is not run here exactly when it needs a GPU")


# -- the judgement -------------------------------------------------------------------------

@dataclass
class MistakeVerdict:
    name: str
    caught: bool  # derived: the check failed, saying what the mistake declares
    proven: bool  # run here (a GPU-only exercise's mistakes are not)
    says: str
    message: str


@dataclass
class ExerciseVerdict:
    name: str
    needs_gpu: str
    starter: str
    solution: str
    mistakes: list[MistakeVerdict]
    hint: str = ""


@dataclass
class ExercisesState:
    state: str  # passed | failed | stale | none | not-required
    record: ExercisesRecord | None
    exercises: list[ExerciseVerdict]
    problems: list[str]  # why it is failed, stale or missing, one clause each
    phrase: str  # for the lesson's status sentence ('' when not required)

    def blocks(self) -> str:
        """The interpreter state this lets the badge use in place of a passing one: a failed proof fails the
        lesson, a stale or missing one keeps it from VERIFIED as a stale or missing interpreter run would."""
        return {"failed": "failed", "stale": "stale", "none": "none"}.get(self.state, "")

    def caught(self) -> tuple[int, int]:
        """(mistakes caught, mistakes proven here)."""
        proven = [m for e in self.exercises for m in e.mistakes if m.proven]
        return sum(m.caught for m in proven), len(proven)

    def json(self) -> list[dict]:
        """`verify.py --status --json`'s list: per exercise, its solution, its starter and each mistake."""
        return [{"name": e.name, "needs_gpu": e.needs_gpu, "solution": e.solution, "starter": e.starter,
                 "mistakes": [{"name": m.name, "caught": m.caught if m.proven else None, "message": m.message}
                              for m in e.mistakes]}
                for e in self.exercises]


def judge_exercises(lesson: Lesson, evidence_dir: Path | None) -> ExercisesState:
    if not has_exercises(lesson):
        return ExercisesState("not-required", None, [], [], "")
    command = COMMAND.format(name=lesson.name)
    path = record_path(evidence_dir, lesson.name) if evidence_dir is not None else None
    if path is None or not (path.exists() or path.is_symlink()):
        return ExercisesState("none", None, [], [f"no exercises record ({command} proves them)"],
                              f"the exercises' checks are not proven yet ({command})")
    try:
        record = read_exercises(path, evidence_dir)
    except EvidenceError as exc:
        return ExercisesState("none", None, [], [f"unusable exercises record: {exc}"],
                              f"the exercises record cannot be used ({command} proves them again)")
    if record.lesson != lesson.name:
        return ExercisesState("none", None, [], [f"{path}: holds the exercises of {record.lesson}"],
                              f"the exercises record is another lesson's ({command} proves them again)")
    if record.source_hash != exercise_hash(lesson):
        changed = sorted(k for k in exercise_file_hashes(lesson).items() ^ record.source_files.items())
        files = ", ".join(dict.fromkeys(rel for rel, _ in changed)) or "the file list"
        return ExercisesState("stale", record, verdicts(record), [f"the exercises changed since they were proven "
                                                                  f"on {record.date} ({files}): {command}"],
                              f"the exercises' proof of {record.date} was for older exercises ({command})")
    return judged(record)


def verdicts(record: ExercisesRecord) -> list[ExerciseVerdict]:
    out = []
    for e in record.exercises:
        mistakes = [MistakeVerdict(m.name, m.status == "failed" and bool(m.says) and m.says in m.message,
                                   m.status != "needs a GPU", m.says, m.message) for m in e.mistakes]
        out.append(ExerciseVerdict(e.name, e.needs_gpu, e.starter.status, e.solution.status, mistakes, e.hint))
    return out


def judged(record: ExercisesRecord) -> ExercisesState:
    """A current record, judged (see the module's docstring)."""
    exercises = verdicts(record)
    if record.outcome != "completed":
        why = f"the proof of the exercises {record.outcome} ({record.reason or 'no reason recorded'})"
        return ExercisesState("failed", record, exercises, [why], why)
    problems = [f"MISTAKES names {name!r}, which is no exercise" for name in record.unknown_mistakes]
    here = [e for e in exercises if not e.needs_gpu]
    if len(here) < MIN_EXERCISES:
        problems.append(f"{len(here)} exercise(s) run under the interpreter; a lesson poses at least {MIN_EXERCISES}")
    for e in here:
        if e.solution != "passed":
            problems.append(f"exercise {e.name}: the solution fails its own check")
        if e.starter == "passed":
            problems.append(f"exercise {e.name}: the starter passes its check, so there is nothing to do")
        if len(e.mistakes) < MIN_MISTAKES:
            problems.append(f"exercise {e.name} declares {len(e.mistakes)} mistake(s); each declares at least "
                            f"{MIN_MISTAKES}")
        for m in e.mistakes:
            if not m.caught:
                said = m.message[:200] or "nothing"
                problems.append(f"exercise {e.name}: the check lets the mistake '{m.name}' through (it should "
                                f"fail saying '{m.says}'; it said: {said})")
    caught, proven = ExercisesState("", record, exercises, [], "").caught()
    gpu_only = [e.name for e in exercises if e.needs_gpu]
    tail = f"; {', '.join(gpu_only)} run{'s' * (len(gpu_only) == 1)} on a GPU only" if gpu_only else ""
    if problems:
        return ExercisesState("failed", record, exercises, problems,
                              "the exercises' checks are not proven: " + "; ".join(problems))
    return ExercisesState("passed", record, exercises, [],
                          f"the checks of its {len(here)} exercises catch {caught} of {proven} listed mistakes "
                          f"(proven on {record.date}){tail}")


def exercises_reason(exercises: ExercisesState | None) -> list[str]:
    """The headline's short reason, from a fixed vocabulary (nothing the record says in its own words)."""
    if exercises is None:
        return []
    return {"failed": ["an exercise's check is not proven"], "stale": ["its exercises changed since checked"],
            "none": ["its exercises not checked yet"]}.get(exercises.state, [])
