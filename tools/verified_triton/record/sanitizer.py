"""Run a lesson under compute-sanitizer and write what its four tools found (verify.py --mode sanitize).

One job, the last of three kept apart: the command line (sanitizer_command.py: where the tool is, its
version, the options of each tool, the environment), the parser (sanitizer_log.py: the tool's text log,
read bounded, into records, summary counts and the tool's own lines), and here the record: each tool's
run classified, its findings grouped by kernel and source line, the lesson's kernels first, bounded by
core/limits.py.

Each lesson runs once per tool, memcheck first: racecheck, synccheck and initcheck check no memory
accesses, so after memcheck finds errors in the lesson's kernels they are not run; otherwise those three
run at the same time (independent processes, each its own log). The lesson runs as
the kit's untimed run on the GPU (VT_SANITIZE=<tool>): every step, each benchmarked function once.
A tool that cannot check this machine's GPU ("Device not supported") is never recorded as the
lesson's failure: nothing is written, and the run says why. Which findings are the lesson's, and what
they make of its badge, is judge/memory.py's job; this module only records.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from verified_triton.core import kit, schema
from verified_triton.core.lessons import Lesson, combined_hash
from verified_triton.core.limits import LIMITS
from verified_triton.core.numfmt import number
from verified_triton.judge.evidence import (
    Record,
    SanitizerFinding,
    SanitizerReproducer,
    SanitizerRun,
    SanitizerToolRun,
    record_path,
    sanitize_key,
    write_record,
)
from verified_triton.judge.memory import finding_is_lessons, judge_memory, lesson_kernels
from verified_triton.record.capture import Captured, run_bounded
from verified_triton.record.changes import carry_history, finding_changes
from verified_triton.record.machine import Machine
from verified_triton.record.report import terminal_safe
from verified_triton.record.runner import (
    TEMP_PREFIX,
    RunResult,
    _environment,
    _kept,
    _previous,
    classify,
    environment_failure,
    read_results,
)
from verified_triton.record.sanitizer_command import (
    ERROR_EXITCODE,
    find_tool,
    sanitize_env,
    shown_command,
    tool_options,
    tool_version,
)
from verified_triton.record.sanitizer_log import UNAVAILABLE, ParsedRecord, Report, kept_log, parse_log, read_log
from verified_triton.record.scrub import scrub_record, scrubber

TOOLS = kit.SANITIZER_TOOLS


# == one tool's run ==================================================================================

def classify_tool(report: Report, run: Captured, limit: float, stderr_problem: str) -> tuple[str, str]:
    """(state, reason) of one tool's run, failing closed: no summary is never clean."""
    if run.timed_out:
        return "timeout", f"killed after the {limit:.0f} s timeout"
    if report.unavailable or stderr_problem:
        return "unavailable", f"compute-sanitizer could not run here: {report.unavailable or stderr_problem}"
    if not report.has_summary:
        return "inconclusive", (f"no summary line in its log (exit {run.exit_code}); a run without one is "
                                "never read as clean")
    if report.incomplete:
        return "incomplete", f"the tool says it did not see everything: {report.incomplete}"
    race = report.race or (0, 0, 0)
    if (report.errors or 0) + race[1] + race[2] == 0 and not report.records:
        return "clean", ""
    return "findings", ""


def group_findings(records: list[ParsedRecord], project_file) -> list[SanitizerFinding]:
    """Report records with the same kind, message and places as one finding, counted."""
    found: dict[tuple, SanitizerFinding] = {}
    for rec in records:
        places = tuple((loc.access, loc.kernel, loc.file, loc.line) for loc in rec.locations if loc.access != "frame")
        key = (rec.kind, rec.message, places, rec.severity)
        if key in found:
            found[key].records += 1
            found[key].hazards += rec.hazards
            continue
        host = next((frame for frame in rec.host_frames if project_file(frame.rsplit(":", 1)[0])), "")
        found[key] = SanitizerFinding(rec.kind, rec.message, list(rec.locations), 1, rec.hazards, rec.severity,
                                      rec.detail, host)
    return list(found.values())


def tool_run(lesson: Lesson, tool: str, binary: str, work: Path, base_env: dict[str, str], limit: float,
             source_files: dict[str, str], scrub, script: Path | None = None
             ) -> tuple[SanitizerToolRun, Captured, kit.Results | None, str]:
    """Run the lesson (or `script`, a reproducer of its folder) under one tool; (its run, what it printed, the
    kit's results, why they are missing)."""
    script = script or lesson.main
    name = tool if script == lesson.main else f"{tool}-{script.stem}"
    log, results_file = work / f"{name}.log", work / f"results-{name}.json"
    env = sanitize_env({**base_env, kit.RESULTS_ENV: str(results_file), kit.FIGURES_ENV: str(work / "figures")},
                       tool, work / "triton-cache")
    options = tool_options(tool, log)
    captured = run_bounded(str(script), lesson.folder, env, limit, prefix=[binary, *options])
    results, problem = read_results(results_file)
    text, missing, log_problem = read_log(log)
    text = scrub(text)
    report = parse_log(text)
    if missing and not report.incomplete:  # what the middle of the log said is not known
        report.incomplete = (f"its log passed {number(LIMITS.sanitizer_log)} bytes: {number(missing)} bytes of it "
                             "were not read")
    stderr_problem = next((line.strip()[:LIMITS.sanitizer_text] for line in captured.stderr.splitlines()
                           if any(marker in line for marker in UNAVAILABLE[:3])), "")
    state, reason = classify_tool(report, captured, limit, stderr_problem)
    if log_problem and state != "timeout":
        reason = f"{reason}; {log_problem}" if reason else log_problem
    app = _app_run(captured, report)
    if state == "unavailable":
        app_outcome, app_reason = "", ""
    elif script != lesson.main:  # a reproducer is a plain script: its exit says how it ended
        app_outcome, app_reason = _plain_outcome(app)
    else:
        app_outcome, app_reason = classify(lesson, "gpu", app, limit, results, problem)
    kernels = lesson_kernels(lesson)

    def project_file(file: str) -> bool:
        return file in source_files or file.startswith("code/")

    findings = group_findings(report.records, project_file)
    findings.sort(key=lambda f: not finding_is_lessons(f, source_files, kernels))  # the lesson's first (stable)
    kept, omitted = findings[:LIMITS.sanitizer_findings], max(0, len(findings) - LIMITS.sanitizer_findings)
    race = report.race or (0, 0, 0)
    stored, log_omitted = kept_log(text)
    notes = list(report.notes)
    if report.not_printed:
        notes.insert(0, f"{number(report.not_printed)} records were not printed (over --print-limit "
                        f"{LIMITS.sanitizer_print_limit}); the summary counts them")
    run = SanitizerToolRun(
        tool=tool, state=state, reason=reason[:LIMITS.string], command=scrub(shown_command(
            binary, options, lesson.relative(script), work)),
        exit_code=None if captured.timed_out else captured.exit_code, wall_s=round(captured.wall_s, 2),
        app_outcome=app_outcome, app_reason=scrub(app_reason)[:LIMITS.string],
        errors=(report.errors or 0) + race[1], warnings=race[2], not_printed=report.not_printed,
        findings=kept if state != "unavailable" else [], findings_omitted=omitted if state != "unavailable" else 0,
        notes=notes[:20], log=stored, log_omitted=log_omitted)
    if state == "unavailable":
        run.errors = run.warnings = run.not_printed = 0
    return run, app, results, problem


def _app_run(captured: Captured, report: Report) -> Captured:
    """The lesson's own run as runner.classify reads it: the tool's exit code for errors found after the
    lesson exited 0 is the lesson's 0."""
    if captured.exit_code == ERROR_EXITCODE:
        return replace(captured, exit_code=kit.EXIT_PASSED)
    return captured


def _plain_outcome(run: Captured) -> tuple[str, str]:
    """How a plain script (a reproducer) ended, from its exit code alone."""
    if run.timed_out:
        return "timeout", "killed at the time limit"
    if run.exit_code == 0:
        return "passed", ""
    if run.exit_code is not None and run.exit_code < 0:
        return "crashed", f"killed by signal {-run.exit_code}"
    return "failed", f"exit {run.exit_code}"


def not_run(tool: str, reason: str) -> SanitizerToolRun:
    return SanitizerToolRun(tool=tool, state="not-run", reason=reason)


_GPU_LOCKS: dict[int | None, threading.Lock] = {}
_GPU_LOCKS_GUARD = threading.Lock()


def one_racecheck_per_gpu(tool: str, gpu: int | None):
    """A lock for racecheck on this GPU (a no-op context for the other tools): racecheck with every kernel
    instrumented is the slow tool, and three at a time on one GPU did not finish fp16-matmul, fp8-matmul or
    split-k in 330 s where one alone did in 390 s (issue 48); the other tools may share the GPU."""
    if tool != "racecheck":
        return contextlib.nullcontext()
    with _GPU_LOCKS_GUARD:
        return _GPU_LOCKS.setdefault(gpu, threading.Lock())


# == one lesson ======================================================================================

def run_sanitize_lesson(lesson: Lesson, mode: str, machine: Machine, evidence_dir: Path, timeout: float | None,
                        gpu: int | None = None, force: bool = False, report=print) -> RunResult:
    """The lesson under each tool in turn, and its sanitize record (plan.execute calls it as run_lesson).

    Nothing is written when memcheck could not run (the tool cannot check this GPU), nor when the
    record here is a complete one for this source and this run is not (a timeout, no summary), unless
    `force`: a run never erases better evidence than it makes.
    """
    spec = lesson.sanitize
    limits = {tool: timeout or spec.timeout(tool) for tool in TOOLS}  # --timeout, else the lesson's, per tool
    device = machine.gpu(gpu)
    binary = find_tool()
    if binary is None:
        return RunResult(lesson, mode, None, "not run: compute-sanitizer not found", gpu=gpu, written=False)
    version, problem = tool_version(binary)
    if problem:
        return RunResult(lesson, mode, None, f"not run: {problem}", gpu=gpu, written=False)
    work = Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{os.getpid()}-{lesson.name}-sanitize-"))
    try:
        base = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONIOENCODING="utf-8", MPLBACKEND="Agg")
        if device is not None and gpu is not None:
            base["CUDA_VISIBLE_DEVICES"] = str(device.index)
        scrub = scrubber(lesson.root)
        started = datetime.now(UTC)
        source_files = lesson.source_file_hashes()
        kernels = lesson_kernels(lesson)
        def one_tool(tool: str, script: Path | None = None) -> SanitizerToolRun:
            t0 = time.monotonic()
            with one_racecheck_per_gpu(tool, gpu):
                run, captured, results, problem = tool_run(lesson, tool, binary, work, base, limits[tool],
                                                           source_files, scrub, script)
            what = tool if script is None else f"{tool}, reproducer {script.name}"
            report(f"    {lesson.name} [sanitize] {what}: {_progress(run, source_files, kernels)} "
                   f"in {time.monotonic() - t0:.1f} s")
            if tool == "memcheck" and script is None:
                first.append((captured, results, problem))
            return run

        first: list[tuple[Captured, kit.Results | None, str]] = []
        memcheck = one_tool(TOOLS[0])
        if memcheck.state == "unavailable":
            return RunResult(lesson, mode, None, f"not recorded: {memcheck.reason}", gpu=gpu, written=False)
        stop = _stop_after_memcheck(memcheck, source_files, kernels)
        # The other tools are independent processes with logs of their own: they run at the same time, so a
        # lesson's check takes its slowest tool's time, not the sum (each is still bounded by `limit`).
        rest = TOOLS[1:]
        if stop:
            others = [not_run(tool, stop) for tool in rest]
        else:
            with ThreadPoolExecutor(max_workers=len(rest)) as pool:
                others = list(pool.map(one_tool, rest))
        runs = [memcheck, *others]
        reproducers = _reproducers(lesson, runs, one_tool)
        captured, results, problem = first[0]
        app = _app_run(captured, Report())
        outcome, reason = classify(lesson, "gpu", app, limits["memcheck"], results, problem)
        environment = environment_failure(app.exit_code, captured.stderr, lesson.root)
        if outcome == "failed" and environment and app.exit_code != kit.EXIT_CANNOT_RUN:
            reason = f"this machine could not run it ({environment})"
        env_now = _environment("sanitize", machine, device, results)
        record = Record(
            lesson=lesson.name, mode="sanitize", key=sanitize_key(env_now.device_name), outcome=outcome,
            exit_code=app.exit_code, started_utc=started.strftime(schema.UTC_FORMAT),
            wall_s=round(runs[0].wall_s + max((r.wall_s for r in runs[1:]), default=0.0), 2), command=runs[0].command,
            source_hash=combined_hash(source_files), source_files=source_files, env=env_now,
            stdout=captured.stdout, stderr=captured.stderr, stdout_omitted=captured.stdout_omitted,
            stderr_omitted=captured.stderr_omitted, reason=reason[:LIMITS.string],
            checks=results.checks if results else [], skipped_parts=results.skipped_parts if results else [],
            steps=results.steps if results else [], filtered_warnings=results.filtered_warnings if results else [],
            sanitizer=SanitizerRun(version=version, size="gpu" if spec.size == "gpu" else "smoke", runs=runs,
                                   known=list(results.sanitizer_known) if results else [], reproducers=reproducers),
        )
        scrub_record(record, scrub)
        path = record_path(evidence_dir, lesson.name, record.key)
        previous = _previous(path, evidence_dir)
        kept = _kept(lesson, record, previous, environment, force) or _less_complete(record, previous, force)
        if kept:
            return RunResult(lesson, mode, record, kept, gpu=gpu, written=False)
        carry_history(record, previous)
        write_record(evidence_dir, record)
        return RunResult(lesson, mode, record, gpu=gpu, changes=tuple(finding_changes(record, previous)))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _reproducers(lesson: Lesson, runs: list[SanitizerToolRun], one_tool) -> list[SanitizerReproducer]:
    """Each reproducer the lesson declares ([[sanitize.not_applicable]]) under its tool, as the lesson was run:
    judge/memory.py holds the lesson's run of that tool against it. One whose tool did not run on the lesson
    is not run either (and says so)."""
    ran = {run.tool: run for run in runs}
    out = []
    for declared in lesson.sanitize.not_applicable:
        lesson_run = ran.get(declared.tool)
        if lesson_run is None or lesson_run.state == "not-run":
            run = not_run(declared.tool, f"{declared.tool} was not run on the lesson")
        else:
            run = one_tool(declared.tool, declared.reproducer)
        out.append(SanitizerReproducer(declared.tool, list(declared.kernels), lesson.relative(declared.reproducer),
                                       declared.why[:LIMITS.string], run))
    return out


def _progress(run: SanitizerToolRun, source_files: dict[str, str], kernels: frozenset[str]) -> str:
    if run.state in ("clean", "not-run"):
        return run.state if run.state == "clean" else f"not run ({terminal_safe(run.reason)})"
    mine = [f for f in run.findings if finding_is_lessons(f, source_files, kernels)]
    counts = f"{number(run.errors)} errors" + (f", {number(run.warnings)} warnings" if run.warnings else "")
    text = f"{run.state}, {counts}, {len(mine)} finding(s) in the lesson's kernels"
    if mine:
        where = mine[0].locations[0] if mine[0].locations else None
        text += f" (first: {mine[0].kernel or 'a kernel'}" + (f" at {where.file}:{where.line}" if where and where.file
                                                               else "") + ")"
    return text + (f"; {terminal_safe(run.reason)}" if run.reason else "")


def _stop_after_memcheck(run: SanitizerToolRun, source_files: dict[str, str], kernels: frozenset[str]) -> str:
    """Why the other tools are not run after this memcheck run ('' when they are)."""
    if run.app_outcome == "by-design":
        return "the lesson declined by design under memcheck"
    if run.state == "timeout":
        return ("memcheck timed out, and the other tools are no faster; give [sanitize] timeout more time, or the "
                "lesson smaller inputs there")
    if any(finding_is_lessons(f, source_files, kernels) for f in run.findings if f.kind != "api"):
        return ("memcheck found errors in the lesson's kernels; racecheck, synccheck and initcheck check no memory "
                "accesses, so they run once those are fixed")
    return ""


COMPLETE = ("clean", "findings")


def _less_complete(new: Record, previous: Record | None, force: bool) -> str:
    """Why `new` must not replace `previous`: a record of the same source whose every tool ran to its summary,
    against one where some did not."""
    if force or previous is None or previous.sanitizer is None or previous.source_hash != new.source_hash:
        return ""
    if all(r.state in COMPLETE for r in previous.sanitizer.runs) and len(previous.sanitizer.runs) == len(TOOLS):
        short = [f"{r.tool} {r.state}" for r in new.sanitizer.runs if r.state not in COMPLETE and r.state != "not-run"]
        if short:
            return (f"not recorded: this run did not complete ({', '.join(short)}); the record here ({previous.date}) "
                    "saw everything and stays. Run again with --force to record it anyway")
    return ""


# == the summary ======================================================================================

def print_sanitize_summary(results: list[RunResult], lessons: dict[str, Lesson]) -> None:
    """One line per lesson (its memory check, judged), then the tools' time and what needs a look."""
    results = sorted(results, key=lambda r: (r.lesson.order, r.lesson.name))
    ran = [r for r in results if r.mode == "sanitize" and r.record is not None and r.record.sanitizer]
    if not ran and not any(r.mode == "sanitize" for r in results):
        return
    print("\nmemory check (compute-sanitizer)")
    per_tool: dict[str, float] = {}
    for r in ran:
        check = judge_memory(lessons[r.lesson.name], r.record)
        note = "" if r.written else f"  [{terminal_safe(r.skipped)}]"
        print(f"{r.lesson.name:<30} {check.state:<10} {terminal_safe(check.line)}{note}")
        for tool_run_ in r.record.sanitizer.runs:
            per_tool[tool_run_.tool] = per_tool.get(tool_run_.tool, 0.0) + tool_run_.wall_s
    for r in results:
        if r.mode == "sanitize" and r.record is None:
            print(f"{r.lesson.name:<30} {'-':<10} {terminal_safe(r.skipped)}")
    if per_tool:
        total = sum(per_tool.values())
        print(f"sanitize: {len(ran)} lesson{'s' * (len(ran) != 1)}, {total:.0f} s of tool runs ("
              + ", ".join(f"{tool} {per_tool[tool]:.0f} s" for tool in TOOLS if tool in per_tool) + ")")
