"""Run lessons under the interpreter of other Triton releases, and record one small record per lesson and release.

One job: for `verify.py --triton X.Y.Z` and `--matrix`, plan the (lesson, release) runs whose record is
missing or out of date, run them in parallel (--jobs) in each release's environment (record/releases.py),
classify each run as runner.py does, and write a release record (judge/releases.py) unless it would say
nothing new or replace a pass with a failure that other versions caused.

Below a lesson's `[requires] triton` the kit stops before running (exit 2), which would say nothing
about the claim; there the lesson runs with that one check lifted (LIFT below: the kit's requirements
without the `triton` key, the rest of the run untouched), so the matrix learns whether the claim could
be lower. At or above the claim, the lesson runs exactly as a reader would run it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from verified_triton.core import kit, schema
from verified_triton.core.lessons import Lesson
from verified_triton.core.limits import LIMITS
from verified_triton.judge.evidence import EvidenceError
from verified_triton.judge.matrix import contradictions
from verified_triton.judge.releases import (
    ReleaseEnv,
    ReleaseRecord,
    read_release,
    release_path,
    release_tuple,
    write_release,
)
from verified_triton.record.capture import run_bounded
from verified_triton.record.plan import Progress, wall_weights
from verified_triton.record.releases import ReleaseEnvironment
from verified_triton.record.report import terminal_safe
from verified_triton.record.runner import TEMP_PREFIX, classify, read_results
from verified_triton.record.scrub import scrubber

LIFT_ENV = "VT_LIFT_MAIN"  # the lesson file the wrapper below runs
LIFT_BROKEN = 97  # the wrapper found no kit to lift the check of: a tool error, never a lesson's outcome
LIFT = f'''\
"""Run a lesson with the kit's [requires] triton check lifted (verify.py --triton below the lesson's claim)."""
import os, runpy, sys
main = os.environ.pop("{LIFT_ENV}")
sys.argv = [main]
sys.path[0] = os.path.dirname(main)
sys.path.insert(1, os.path.dirname(os.path.dirname(main)))  # code/, where lessonkit.py sits
import lessonkit
if not callable(getattr(lessonkit, "_lesson_toml", None)):
    print("verify: the kit has no _lesson_toml() to lift the Triton check of", file=sys.stderr)
    sys.exit({LIFT_BROKEN})
_read = lessonkit._lesson_toml
def _lifted(path):
    found = dict(_read(path))
    found["requires"] = {{k: v for k, v in dict(found.get("requires", {{}})).items() if k != "triton"}}
    return found
lessonkit._lesson_toml = _lifted
runpy.run_path(main, run_name="__main__")
'''


@dataclass
class MatrixResult:
    """One (lesson, release): its record (new, or the one kept), and why it did not run or was not written."""

    lesson: Lesson
    release: str
    record: ReleaseRecord | None
    skipped: str = ""
    written: bool = True
    ran: bool = True
    changes: tuple = ()  # what plan.Progress prints after a run; a release record has no benchmarks

    @property
    def label(self) -> str:
        return f"{self.lesson.name} [Triton {self.release}]"


def below_requires(lesson: Lesson, release: str) -> bool:
    need = lesson.requires.triton
    return bool(need) and release_tuple(release) < release_tuple(need) + (0,) * (3 - len(release_tuple(need)))


def is_up_to_date(lesson: Lesson, record: ReleaseRecord, environment: ReleaseEnvironment) -> bool:
    """Recorded for this source, with the torch and numpy this environment has, on the same Python minor."""
    had, has = record.env, environment.versions
    return (record.source_hash == lesson.source_hash() and (had.torch, had.numpy) == (has.torch, has.numpy)
            and had.python.split(".")[:2] == has.python.split(".")[:2] and not contradictions(lesson, record))


def previous_record(lesson: Lesson, release: str, evidence_dir: Path) -> ReleaseRecord | None:
    path = release_path(evidence_dir, lesson.name, release)
    try:
        return read_release(path, evidence_dir) if os.path.lexists(path) else None
    except EvidenceError:
        return None  # unreadable: a new run replaces it


def plan_matrix(lessons: list[Lesson], environments: list[ReleaseEnvironment], evidence_dir: Path,
                force: bool) -> tuple[list[tuple[Lesson, ReleaseEnvironment]], list[MatrixResult]]:
    todo, skipped = [], []
    for environment in environments:
        for lesson in lessons:
            spec = lesson.modes["interpreter"]
            if not spec.supported:
                skipped.append(MatrixResult(lesson, environment.release, None, f"not supported: {spec.reason}",
                                            written=False, ran=False))
                continue
            old = previous_record(lesson, environment.release, evidence_dir)
            if old is not None and not force and is_up_to_date(lesson, old, environment):
                skipped.append(MatrixResult(lesson, environment.release, old, "up to date", written=False, ran=False))
                continue
            todo.append((lesson, environment))
    return todo, skipped


def run_release(lesson: Lesson, environment: ReleaseEnvironment, evidence_dir: Path, timeout: float | None,
                force: bool = False, run=run_bounded) -> MatrixResult:
    """Run one lesson under the interpreter of one release and write its release record."""
    release = environment.release
    limit = timeout or lesson.modes["interpreter"].timeout
    work = Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{os.getpid()}-{lesson.name}-triton-{release}-"))
    try:
        results_file = work / "results.json"
        env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONIOENCODING="utf-8", MPLBACKEND="Agg")
        env.update({kit.RESULTS_ENV: str(results_file), kit.FIGURES_ENV: str(work / "figures"),
                    kit.INTERPRET_ENV: "1", "PYTHONPATH": environment.pythonpath(os.environ.get("PYTHONPATH", ""))})
        env.pop(kit.SMOKE_ENV, None)
        rel_main = lesson.relative(lesson.main)
        command = f"{kit.INTERPRET_ENV}=1 python {rel_main}  # under Triton {release}"
        script = str(lesson.main)
        if below_requires(lesson, release):
            script = str(work / "lift_requires.py")
            Path(script).write_text(LIFT, encoding="utf-8")
            env[LIFT_ENV] = str(lesson.main)
            command += f", below its [requires] triton {lesson.requires.triton}: the kit's Triton check lifted"
        started = datetime.now(UTC)
        source_hash = lesson.source_hash()  # before the run: the record describes the bytes that ran
        captured = run(script, lesson.folder, env, limit)
        if captured.exit_code == LIFT_BROKEN and below_requires(lesson, release):
            return MatrixResult(lesson, release, None, "verify could not lift the kit's Triton check (" +
                                terminal_safe(captured.stderr.strip()[-200:]) + "); nothing recorded")
        results, problem = read_results(results_file)
        outcome, reason = classify(lesson, "interpreter", captured, limit, results, problem)
        ran = results.device if results else kit.Device()
        if ran.triton and ran.triton != release:
            return MatrixResult(lesson, release, None, f"the lesson imported Triton {terminal_safe(ran.triton[:40])}"
                                f", not {release}; nothing recorded")
        error = last_error(captured.stderr) if outcome in ("failed", "crashed") else ""
        if error and error not in reason:
            reason = f"{reason}: {error}"
        scrub = scrubber(lesson.root)
        has = environment.versions
        checks = results.checks if results else []
        record = ReleaseRecord(
            lesson=lesson.name, release=release, outcome=outcome, exit_code=captured.exit_code,
            reason=one_line(scrub(reason)), checks_passed=sum(c.status == "pass" for c in checks),
            checks_failed=sum(c.status == "fail" for c in checks),
            checks_skipped=sum(c.status == "skip" for c in checks), wall_s=round(captured.wall_s, 2),
            source_hash=source_hash, started_utc=started.strftime(schema.UTC_FORMAT), command=one_line(command),
            env=ReleaseEnv(python=ran.python or has.python, torch=ran.torch or has.torch, triton=release,
                           numpy=has.numpy))
        return keep_or_write(lesson, record, evidence_dir, force)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def keep_or_write(lesson: Lesson, record: ReleaseRecord, evidence_dir: Path, force: bool) -> MatrixResult:
    """Write `record` unless the one here says the same, or is a current pass that other versions would replace
    with a failure (without --force)."""
    previous = previous_record(lesson, record.release, evidence_dir)
    result = MatrixResult(lesson, record.release, record, written=False)
    if previous is not None and previous.same_result(record):
        result.skipped = f"unchanged (the record of {previous.date} says the same; kept)"
        return result
    if (previous is not None and record.failed and not previous.failed and not force
            and previous.source_hash == record.source_hash and previous.env != record.env
            and not contradictions(lesson, previous)):
        result.skipped = (f"not recorded: this run with torch {record.env.torch}, numpy {record.env.numpy}, Python "
                          f"{record.env.python} {record.outcome}; the record here {previous.outcome} with torch "
                          f"{previous.env.torch}, numpy {previous.env.numpy}, Python {previous.env.python} and "
                          "stays. Run again with --force to record the failure under these versions")
        return result
    write_release(evidence_dir, record)
    result.written = True
    return result


def last_error(stderr: str) -> str:
    """The exception a traceback ended with ('ModuleNotFoundError: No module named ...'), or ''."""
    lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
    if not lines or "Traceback (most recent call last)" not in stderr:
        return ""
    last = lines[-1]
    name = last.split(":", 1)[0]
    return last[:300] if name.replace(".", "").replace("_", "").isalnum() and ":" in last else ""


def one_line(text: str) -> str:
    printable = "".join(c if c.isprintable() else " " for c in text.replace("\n", " "))
    return " ".join(printable.split())[:LIMITS.string]


def run_matrix(todo: list[tuple[Lesson, ReleaseEnvironment]], evidence_dir: Path, jobs: int, timeout: float | None,
               force: bool, wall: Callable[[Lesson], float], run=run_release) -> list[MatrixResult]:
    """Every (lesson, release) in parallel, the longest lessons first; one line as each starts and ends."""
    weights = wall_weights(list({lesson.name: lesson for lesson, _ in todo}.values()), wall)
    order = sorted(todo, key=lambda item: (-weights[item[0].name], release_tuple(item[1].release)))
    with Progress(len(order)) as progress:
        def one(item: tuple[Lesson, ReleaseEnvironment]) -> MatrixResult:
            lesson, environment = item
            label = f"{lesson.name} [Triton {environment.release}]"
            progress.started(label)
            try:
                result = run(lesson, environment, evidence_dir, timeout, force)
            except Exception as exc:  # a broken evidence folder, a full disk: report it, run the rest
                result = MatrixResult(lesson, environment.release, None, f"verify could not record this run: {exc}")
            progress.finished(label, result)
            return result

        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            return list(pool.map(one, order))


# -- what is printed at the end ------------------------------------------------------------------------

SHORT = {"passed": "pass", "failed": "FAIL", "timeout": "TIMEOUT", "crashed": "CRASH", "by-design": "declined"}


def summary_lines(results: list[MatrixResult], lessons: list[Lesson], releases: list[str]) -> list[str]:
    """A lesson x release table (outcome and seconds of each run; '=' for a record up to date), then each failure."""
    cell: dict[tuple[str, str], MatrixResult] = {(r.lesson.name, r.release): r for r in results}
    width = max([len(lesson.name) for lesson in lessons] + [6])
    lines = [f"{'lesson':<{width}}  " + "  ".join(f"{'Triton ' + release:<15}" for release in releases)]
    for lesson in lessons:
        row = []
        for release in releases:
            r = cell.get((lesson.name, release))
            if r is None or r.record is None:
                text = "-" if r is None or not r.ran else "error"
            elif not r.ran:
                text = f"= {SHORT[r.record.outcome]}"
            else:
                text = f"{SHORT[r.record.outcome]} {r.record.wall_s:.0f} s"
            row.append(f"{text:<15}")
        lines.append(f"{lesson.name:<{width}}  " + "  ".join(row))
    if any(not r.ran and r.record is not None for r in results):
        lines.append("('= pass': the record here is up to date and was not run again; --force runs it)")
    for r in results:
        if r.record is not None and r.record.failed:
            lines.append(f"{r.label}: {r.record.outcome}: {terminal_safe(r.record.reason)}")
        elif r.record is None and r.ran:
            lines.append(f"{r.label}: error: {terminal_safe(r.skipped)}")
    return lines


def elapsed(seconds: float) -> str:
    minutes, rest = divmod(int(round(seconds)), 60)
    return f"{minutes} min {rest} s" if minutes else f"{rest} s"
