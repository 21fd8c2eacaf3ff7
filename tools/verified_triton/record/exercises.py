"""Prove a lesson's exercises under the interpreter and write their record.

One job: run record/exercise_proof.py in the lesson's folder under TRITON_INTERPRET=1 (one process: the
starter, the solutions and every declared mistake), read what it wrote through the schema, and write
evidence/<lesson>/exercises.json (judge/exercises.py defines and judges it). The record is tied to the
hash of the exercises' files, taken before the run, so the record names exactly the bytes that ran.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from verified_triton.core import kit, schema
from verified_triton.core.lessons import Lesson, combined_hash, exercise_file_hashes, has_exercises
from verified_triton.core.limits import LIMITS
from verified_triton.core.safefs import UnsafePathError, read_bytes
from verified_triton.judge.evidence import EvidenceError
from verified_triton.judge.exercises import (
    ExercisesRecord,
    ProofEnv,
    proof_from_json,
    read_exercises,
    record_path,
    write_exercises,
)
from verified_triton.record.capture import Captured, run_bounded
from verified_triton.record.runner import TEMP_PREFIX
from verified_triton.record.scrub import scrub_record, scrubber

PROOF = Path(__file__).with_name("exercise_proof.py")
PROOF_OUT = "VT_PROOF_OUT"  # where the proof writes what it found (exercise_proof.py reads it)
TIMEOUT_S = 600.0
STDERR_KEPT = 4000  # characters of a failed proof's stderr kept in the record (its end)


@dataclass
class ProofResult:
    lesson: Lesson
    record: ExercisesRecord


def needs_proof(lesson: Lesson, evidence_dir: Path, versions: tuple[str, str, str], force: bool = False) -> str:
    """'' when the lesson's exercises need proving here, else why not: it poses none, or their record is for
    these exercises and was made with these (python, torch, triton) versions."""
    if not has_exercises(lesson):
        return "no exercises"
    if force:
        return ""
    try:
        old = read_exercises(record_path(evidence_dir, lesson.name), evidence_dir)
    except (EvidenceError, OSError):
        return ""
    same = old.source_hash == combined_hash(exercise_file_hashes(lesson)) and old.outcome == "completed"
    return "up to date" if same and (old.env.python, old.env.torch, old.env.triton) == versions else ""


def prove_lesson(lesson: Lesson, evidence_dir: Path, timeout: float | None = None) -> ProofResult:
    """Run the proof and write the record (whatever it says: a failed proof is evidence too)."""
    files = exercise_file_hashes(lesson)  # before the run: the record names the bytes that ran
    work = Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{os.getpid()}-{lesson.name}-exercises-"))  # swept if killed
    try:
        out = work / "proof.json"
        env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONIOENCODING="utf-8", MPLBACKEND="Agg",
                   PYTHONDONTWRITEBYTECODE="1")
        for name in (kit.RESULTS_ENV, kit.FIGURES_ENV, kit.SMOKE_ENV, kit.SANITIZE_ENV):
            env.pop(name, None)
        env[kit.INTERPRET_ENV] = "1"
        env[PROOF_OUT] = str(out)
        env["PYTHONPATH"] = str(lesson.folder)  # its modules first; the copy's folder holds only the copy
        script = work / PROOF.name
        shutil.copyfile(PROOF, script)
        started = datetime.now(UTC)
        limit = timeout or TIMEOUT_S
        run = run_bounded(str(script), lesson.folder, env, limit)
        record = _record(lesson, files, started, run, limit, out)
        scrub_record(record, scrubber(lesson.root))  # no path of this machine in the record
        write_exercises(evidence_dir, record)
        return ProofResult(lesson, record)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _record(lesson: Lesson, files: dict[str, str], started: datetime, run: Captured, limit: float,
            out: Path) -> ExercisesRecord:
    common = dict(lesson=lesson.name, started_utc=started.strftime(schema.UTC_FORMAT), wall_s=round(run.wall_s, 2),
                  command=f"record/exercise_proof.py in {lesson.relative(lesson.folder)}/, "
                          f"{kit.INTERPRET_ENV}=1",
                  source_hash=combined_hash(files), source_files=files,
                  env=ProofEnv(python=_python_version()))
    tail = run.stderr[-STDERR_KEPT:]
    if run.timed_out:
        return ExercisesRecord(outcome="timeout", exit_code=None, reason=f"killed after {limit:.0f} s",
                               stderr=tail, **common)
    if run.exit_code != 0:
        outcome = "crashed" if run.exit_code < 0 else "failed"
        last = (tail.strip().splitlines() or ["no message"])[-1][:300]
        return ExercisesRecord(outcome=outcome, exit_code=run.exit_code, reason=f"exit {run.exit_code}: {last}",
                               stderr=tail, **common)
    try:
        proof = proof_from_json(read_bytes(out, LIMITS.exercises_json, out.parent), "the proof's results")
    except (UnsafePathError, EvidenceError) as exc:
        return ExercisesRecord(outcome="failed", exit_code=1, reason=str(exc)[:300], stderr=tail, **common)
    if not proof.exercises:
        return ExercisesRecord(outcome="failed", exit_code=1, reason="exercises.py registers no exercise "
                               "(@practice.exercise)", stderr=tail, **common)
    common["env"] = proof.env
    return ExercisesRecord(outcome="completed", exit_code=0, reason="", exercises=proof.exercises,
                           unknown_mistakes=proof.unknown_mistakes, **common)


def _python_version() -> str:
    return ".".join(str(v) for v in sys.version_info[:3])
