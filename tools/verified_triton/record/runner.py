"""Run one lesson in one mode and write its record.

One job: set up the run as the kit's contract says (the variable names and
exit codes come from code/lessonkit.py through kit.py), capture it with
capture.py, read the kit's results through the schema, decide the outcome
from the exit code and the kit's own pass rule, take this machine's paths out
of what it printed (scrub.py), and write the record with its figures and the
benchmarks' history, unless it would replace a current pass with a failure
this machine caused.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from verified_triton.core import kit, schema
from verified_triton.core.lessons import Lesson, combined_hash
from verified_triton.core.limits import LIMITS
from verified_triton.core.safefs import UnsafePathError, read_bytes
from verified_triton.judge.evidence import (
    PNG_MAGIC,
    Environment,
    EvidenceError,
    Record,
    gpu_key,
    hashed_name,
    parse_json,
    read_record,
    record_path,
    sanitize_key,
    write_record,
)
from verified_triton.judge.status import contradictions
from verified_triton.record.capture import Captured, run_bounded
from verified_triton.record.changes import Change, FindingChange, carry_history, changes
from verified_triton.record.machine import ENV_MODULES, Machine
from verified_triton.record.scrub import scrub_record, scrubber

TEMP_PREFIX = "vt-verify-"


@dataclass
class RunResult:
    lesson: Lesson
    mode: str
    record: Record | None
    skipped: str = ""  # why it did not run (up to date, no GPU, not supported), or why it was not recorded
    gpu: int | None = None  # the GPU index it ran on
    changes: tuple[Change | FindingChange, ...] = ()  # benchmarks moved beyond noise; new sanitizer findings
    written: bool = True  # False: it ran, and the record here was kept (see `skipped`)


def mode_key(mode: str, gpu_name: str) -> str:
    """The record's key: derived from the device name by evidence's gpu_key and sanitize_key, the functions
    that name records."""
    if mode == "interpreter":
        return "interpreter"
    return sanitize_key(gpu_name) if mode == "sanitize" else gpu_key(gpu_name)


def run_lesson(lesson: Lesson, mode: str, machine: Machine, evidence_dir: Path, timeout: float | None,
               gpu: int | None = None, force: bool = False) -> RunResult:
    """Run one lesson in one mode in its own process (on GPU `gpu`, if given) and write its record.

    A failure never replaces a current passing record when this machine's
    environment caused it, nor, without `force`, when it ran with other torch
    or Triton versions than that record: the record stays, and why is said.
    """
    limit = timeout or lesson.modes[mode].timeout
    device = machine.gpu(gpu) if mode == "gpu" else None
    work = Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{os.getpid()}-{lesson.name}-"))
    try:
        results_file, fig_dir = work / "results.json", work / "figures"
        env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONIOENCODING="utf-8", MPLBACKEND="Agg")
        env.update({kit.RESULTS_ENV: str(results_file), kit.FIGURES_ENV: str(fig_dir)})
        env.pop(kit.INTERPRET_ENV, None)
        env.pop(kit.SMOKE_ENV, None)  # a smoke run is never evidence (tools/verified_triton/record/smoke.py)
        env.pop(kit.SANITIZE_ENV, None)  # nor is an untimed run under compute-sanitizer (record/sanitizer.py)
        if mode == "interpreter":
            env[kit.INTERPRET_ENV] = "1"
        if device is not None and gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = str(device.index)
        rel_main = lesson.relative(lesson.main)
        command = (f"{kit.INTERPRET_ENV}=1 " if mode == "interpreter" else "") + f"python {rel_main}"
        started = datetime.now(UTC)
        # Hash the files once, before the run: the record's hash and file list describe the same bytes.
        source_files = lesson.source_file_hashes()
        captured = run_bounded(str(lesson.main), lesson.folder, env, limit)
        results, problem = read_results(results_file)
        outcome, reason = classify(lesson, mode, captured, limit, results, problem)
        if outcome == "failed" and results is not None and results.raised is not None:
            reason = failure_reason(results)
        figure_data, figures, fig_problem = ({}, [], "") if results is None else _collect_figures(results, fig_dir)
        if fig_problem:
            outcome, reason = "failed", fig_problem
        environment = environment_failure(captured.exit_code, captured.stderr, lesson.root)
        if outcome == "failed" and environment and captured.exit_code != kit.EXIT_CANNOT_RUN:
            reason = f"this machine could not run it ({environment})"
        env_now = _environment(mode, machine, device, results)
        record = Record(
            lesson=lesson.name, mode=mode, key=mode_key(mode, env_now.device_name), outcome=outcome,
            exit_code=captured.exit_code, started_utc=started.strftime(schema.UTC_FORMAT),
            wall_s=round(captured.wall_s, 2), command=command, source_hash=combined_hash(source_files),
            source_files=source_files, env=env_now,
            stdout=captured.stdout, stderr=captured.stderr, stdout_omitted=captured.stdout_omitted,
            stderr_omitted=captured.stderr_omitted, reason=reason[:LIMITS.string],
            checks=results.checks if results else [], benchmarks=results.benchmarks if results else [],
            tables=results.tables if results else [], figures=figures,
            skipped_parts=results.skipped_parts if results else [], steps=results.steps if results else [],
            predictions=results.predictions if results else [],
            filtered_warnings=results.filtered_warnings if results else [],
        )
        scrub_record(record, scrubber(lesson.root))  # no path of this machine in the record
        path = record_path(evidence_dir, lesson.name, record.key)
        previous = _previous(path, evidence_dir)
        kept = _kept(lesson, record, previous, environment, force)
        if kept:
            return RunResult(lesson, mode, record, kept, gpu=gpu, written=False)
        carry_history(record, previous)
        write_record(evidence_dir, record, figure_data)
        return RunResult(lesson, mode, record, gpu=gpu, changes=tuple(changes(record, previous)))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _kept(lesson: Lesson, new: Record, previous: Record | None, environment: str, force: bool) -> str:
    """Why the failed run `new` must not replace `previous`, a current pass or stop by design ('' if it may)."""
    if (previous is None or not new.failed or previous.source_hash != new.source_hash
            or previous.outcome not in ("passed", "by-design") or contradictions(lesson, previous)):
        return ""
    kept = f"the record here ({previous.outcome} on {previous.date}) stays"
    if environment:  # never, even with --force: the lesson did not fail, this machine did
        return f"not recorded: this machine could not run it ({environment}); {kept}"
    ran, had = (new.env.torch, new.env.triton), (previous.env.torch, previous.env.triton)
    if ran != had and not force:
        return (f"not recorded: this run with torch {ran[0]}, Triton {ran[1]} {new.outcome} ({new.reason[:300]}); "
                f"the record here {previous.outcome} with torch {had[0]}, Triton {had[1]} and stays. Run again with "
                "--force to record the failure under these versions")
    return ""


def failure_reason(results: kit.Results) -> str:
    """A run that an exception ended: the exception where the lesson raised it, then any checks or targets
    that failed before it ('ZeroDivisionError at code/x/x.py:42 (division by zero)')."""
    failed = kit.failures(results.checks, results.benchmarks)
    return results.raised.sentence() + (f"; before it failed: {', '.join(failed)}" if failed else "")


LAST_ERROR = re.compile(r"\A(ModuleNotFoundError|ImportError): (.*)\Z")
FRAME = re.compile(r'^  File "([^"]+)", line [0-9]+', re.M)


def environment_failure(exit_code: int | None, stderr: str, root: Path) -> str:
    """Why a run failed because of this machine, or '': exit 2 (the kit: cannot run here), or an import
    error of torch, Triton or numpy, or one raised outside the project (a broken install)."""
    lines = stderr.strip().splitlines()
    if exit_code == kit.EXIT_CANNOT_RUN:
        return f"exit {exit_code}: {lines[-1][:300] if lines else 'cannot run on this machine'}"
    match = LAST_ERROR.match(lines[-1]) if lines and exit_code not in (None, kit.EXIT_PASSED) else None
    if match is None:
        return ""
    missing = re.search(r"No module named '([^']+)'", match.group(2))
    frames = [f for f in FRAME.findall(stderr) if not f.startswith("<")]
    outside = bool(frames) and not inside(Path(frames[-1]), root)
    if (missing and missing.group(1).split(".")[0] in ENV_MODULES) or outside:
        return f"{match.group(1)}: {match.group(2)[:300]}"
    return ""


def inside(path: Path, root: Path) -> bool:
    try:
        return path.resolve().is_relative_to(Path(root).resolve())
    except OSError:
        return False


def _previous(path: Path, evidence_dir: Path) -> Record | None:
    try:
        return read_record(path, evidence_dir) if path.exists() else None
    except EvidenceError:
        return None  # an unreadable old record has no history worth keeping


def read_results(path: Path) -> tuple[kit.Results | None, str]:
    """The kit's results file through the schema, or None and why not."""
    if not path.exists():
        return None, "the lesson wrote no results (it did not create a Lesson, or died first)"
    try:
        data = read_bytes(path, LIMITS.results_json)
        return schema.load(kit.Results, parse_json(data, "results")), ""
    except (UnsafePathError, EvidenceError, schema.SchemaError) as exc:
        return None, f"the lesson's results file is malformed ({exc}); its structured results were dropped"


def classify(lesson: Lesson, mode: str, run: Captured, limit: float, results: kit.Results | None,
             problem: str) -> tuple[str, str]:
    """The outcome of a run from its exit code, cross-checked with the kit's pass rule."""
    if run.timed_out:
        return "timeout", f"killed after the {limit:.0f} s timeout"
    code = run.exit_code
    expected = lesson.modes[mode].expected_exits
    failed = [f"check {c.name}" for c in results.checks if c.status == "fail"] if results else []
    if code in expected:  # a declared exit is by design only when no check failed before it
        if failed:
            return "failed", ", ".join(failed) + f" (then exit {code}, which lesson.toml expects: {expected[code]})"
        return "by-design", expected[code]
    if code == kit.EXIT_BY_DESIGN and results is not None and results.declined:
        if failed:  # declining never hides a check that failed before it
            return "failed", ", ".join(failed) + f" (then declined: {results.declined})"
        return "by-design", results.declined
    if code is not None and code < 0:
        return "crashed", f"killed by signal {_signal_name(-code)}"
    if problem:
        return "failed", problem
    failures = kit.failures(results.checks, results.benchmarks) if results else []
    if code == kit.EXIT_PASSED:
        return ("passed", "") if not failures else ("failed", "exit 0 despite failures: " + ", ".join(failures))
    if code == kit.EXIT_CANNOT_RUN:
        last = run.stderr.strip().splitlines()[-1:] or ["no message"]
        return "failed", f"the lesson could not run on this machine ({last[0][:300]})"
    meaning = kit.EXIT_MEANINGS.get(code, "an exit code the kit never uses")
    return "failed", ", ".join(failures) or f"exit {code} ({meaning})"


def _signal_name(number: int) -> str:
    import signal

    try:
        return signal.Signals(number).name
    except ValueError:  # e.g. a real-time signal, which has no name in the enum
        return str(number)


def _collect_figures(results: kit.Results, fig_dir: Path) -> tuple[dict[str, bytes], list[kit.Figure], str]:
    """Each figure the kit reported, checked and renamed by its content hash."""
    data, figures = {}, []
    if len(results.figures) > LIMITS.figures_per_record:
        return {}, [], f"{len(results.figures)} figures, over the limit of {LIMITS.figures_per_record}"
    for fig in results.figures:
        names = {}
        for attr in ("file", "dark_file"):
            file = getattr(fig, attr)
            if not file and attr == "dark_file":
                names[attr] = ""
                continue
            if not schema.FIGURE_FILE.match(file):
                return {}, [], f"figure {fig.name!r}: {file[:60]!r} is not a plain PNG file name"
            try:
                content = read_bytes(fig_dir / file, LIMITS.figure, fig_dir)
            except UnsafePathError as exc:
                return {}, [], f"figure {fig.name!r}: {exc.reason}"
            if not content.startswith(PNG_MAGIC):
                return {}, [], f"figure {fig.name!r}: {file} is not a PNG"
            name = hashed_name(Path(file).stem, content)
            data[name] = content
            names[attr] = name
        figures.append(kit.Figure(fig.name, names["file"], fig.caption, names["dark_file"], fig.step))
    return data, figures, ""


def _environment(mode: str, machine: Machine, device, results: kit.Results | None) -> Environment:
    """What ran: the kit's own versions when it reported them, the machine's otherwise."""
    ran = results.device if results else kit.Device()
    gpu = mode != "interpreter"  # a GPU run, or one under compute-sanitizer
    return Environment(
        python=ran.python or machine.python, torch=ran.torch or machine.torch, triton=ran.triton or machine.triton,
        platform=machine.platform,
        device_name="CPU" if not gpu else (device.name if device else ran.name),
        capability=ran.capability if gpu else "", driver=device.driver if gpu and device else "",
        cuda=ran.cuda if gpu else "", baselines=dict(ran.baselines))


def sweep_orphans() -> list[Path]:
    """Remove temp folders left by a verify that was killed (its pid no longer runs)."""
    removed = []
    base = Path(tempfile.gettempdir())
    for folder in base.glob(f"{TEMP_PREFIX}*"):
        pid = folder.name[len(TEMP_PREFIX):].split("-", 1)[0]
        if not pid.isdigit() or folder.is_symlink() or not folder.is_dir():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
        except PermissionError:
            pass
    return removed
