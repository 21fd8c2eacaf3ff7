"""Smoke runs: each lesson's GPU-only code, once, on the CPU, on tiny inputs, before any GPU time is spent.

One job: run lessons with TRITON_INTERPRET=1 and VT_SMOKE=1 (the kit's smoke run, code/lessonkit.py) in a
scratch copy of code/ and say, for each, whether it ran through, and where it broke: the FILE:LINE of the
traceback's deepest frame in the lesson's own files, with the error; or the checks that failed. Nothing is
written under evidence/, nor under code/: the lesson runs from the copy, so a file it writes with a
relative path, or beside its own file, lands in the copy, which is removed with everything the run started
(capture.py ends its process group and any session it began). A smoke run calls every benchmarked function
once and times nothing, so it is no evidence of anything but that the code runs. `verify.py --smoke` is its
command line.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from verified_triton.core import kit
from verified_triton.core.lessons import Lesson
from verified_triton.core.numfmt import counted
from verified_triton.record.capture import run_bounded
from verified_triton.record.report import terminal_safe
from verified_triton.record.runner import inside, read_results

FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<function>.+)$')


@dataclass
class SmokeRun:
    lesson: Lesson
    outcome: str  # "passed", "declined" (by design, e.g. Gluon), "failed", "timeout", "not supported"
    wall_s: float = 0.0
    where: str = ""  # FILE:LINE of the failure, relative to the project root ("" when none is known)
    error: str = ""  # the exception, the failed checks, or why it did not run
    results: kit.Results | None = None

    @property
    def ok(self) -> bool:
        return self.outcome in ("passed", "declined", "not supported")

    def line(self) -> str:
        name = self.lesson.name
        if self.outcome == "not supported":
            return f"smoke {name}: not run ({terminal_safe(self.error)})"
        if not self.ok:
            at = f" at {self.where}" if self.where else ""
            return f"smoke {name}: FAILED{at}: {terminal_safe(self.error)}"
        r = self.results
        ran = sum(c.name.startswith("smoke-") for c in r.checks) if r else 0
        skipped = [p.part for p in r.skipped_parts] if r else []
        how = f"the code of {ran} benchmark{'s' * (ran != 1)} ran once, untimed"
        if skipped:
            how += f"; skipped or lent: {', '.join(skipped)}"
        if self.outcome == "declined":
            how += f"; then declined by design: {r.declined if r else ''}"
        return f"smoke {name}: {self.outcome} in {self.wall_s:.1f} s ({terminal_safe(how)})"


def smoke_env(results: Path, figures: Path) -> dict[str, str]:
    """The environment of a smoke run: the interpreter on the CPU even where a GPU is, nothing recorded."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONIOENCODING="utf-8", MPLBACKEND="Agg",
               CUDA_VISIBLE_DEVICES="", PYTHONDONTWRITEBYTECODE="1")
    env.update({kit.INTERPRET_ENV: "1", kit.SMOKE_ENV: "1", kit.RESULTS_ENV: str(results),
                kit.FIGURES_ENV: str(figures)})
    env.pop(kit.SANITIZE_ENV, None)
    return env


def smoke_run(lesson: Lesson, timeout: float | None = None, env: dict[str, str] | None = None) -> SmokeRun:
    """Run one lesson as a smoke run in a scratch folder and judge it (`env`: more variables)."""
    spec = lesson.modes["interpreter"]
    if not spec.supported:
        return SmokeRun(lesson, "not supported", error=f"its interpreter mode is not supported: {spec.reason}")
    work = Path(tempfile.mkdtemp(prefix=f"vt-smoke-{lesson.name}-"))
    try:
        results_file = work / "results.json"
        limit = timeout or spec.timeout
        code = lesson.folder.parent
        copy = work / "code"  # the lesson, its kit and the lessons it uses, where its writes can land harmlessly
        shutil.copytree(code, copy, symlinks=True, ignore=shutil.ignore_patterns("__pycache__", ".*"))
        run = run_bounded(str(copy / lesson.main.relative_to(code)), copy / lesson.folder.name,
                          {**smoke_env(results_file, work / "figures"), **(env or {})}, limit)
        run.stderr = _from_copy(run.stderr, copy, code)
        results, _ = read_results(results_file)
        smoke = SmokeRun(lesson, "passed", run.wall_s, results=results)
        if run.timed_out:
            smoke.outcome, smoke.error = "timeout", f"killed after {limit:.0f} s: make the smoke sizes smaller"
            return smoke
        failed = [c.name for c in results.checks if c.status == "fail"] if results else []
        declined = run.exit_code == kit.EXIT_BY_DESIGN and results and results.declined
        if (declined or run.exit_code in spec.expected_exits) and not failed:
            smoke.outcome = "declined"
        elif run.exit_code != kit.EXIT_PASSED or failed or results is None or not results.smoke:
            smoke.outcome = "failed"
            smoke.where, smoke.error = failure(lesson, run.stderr, failed, run.exit_code)
            if results is not None and not results.smoke and not smoke.error:
                smoke.error = f"the kit did not make a smoke run (an old lessonkit.py without {kit.SMOKE_ENV}?)"
        return smoke
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _from_copy(text: str, copy: Path, code: Path) -> str:
    """What the run printed, with the copy's paths as the files' own (a traceback names code/, not the copy)."""
    for form in sorted({str(copy), os.path.realpath(copy)}, key=len, reverse=True):
        text = text.replace(form + os.sep, str(code) + os.sep)
    return text


def failure(lesson: Lesson, stderr: str, failed_checks: list[str], exit_code: int | None) -> tuple[str, str]:
    """(FILE:LINE, the error) of a failed run: the traceback's deepest frame in the lesson's own files
    (else in code/, the kit's), and its last line; or the checks that failed."""
    lines = stderr.rstrip().splitlines()
    if failed_checks and any(line.startswith("FAILED check") for line in lines):  # the kit's finish()
        return "", f"checks failed: {', '.join(failed_checks)}"
    frames = [(m["path"], int(m["line"])) for m in map(FRAME.match, lines) if m]
    where = ""
    for folder in (lesson.folder, lesson.root / "code"):
        found = [(p, n) for p, n in frames if inside(Path(p), folder)]
        if found:
            path, line = found[-1]
            where = f"{lesson.relative(Path(path).resolve())}:{line}"
            break
    if frames:
        return where, (lines[-1].strip() if lines else "")[:500]
    tail = " | ".join(line.strip() for line in lines[-3:]) or "no message"
    return "", f"exit {exit_code} ({kit.EXIT_MEANINGS.get(exit_code, 'unknown')}): {tail[:500]}"



def smoke_all(lessons: list[Lesson], jobs: int, timeout: float | None = None, report=print,
              env: dict[str, str] | None = None) -> list[SmokeRun]:
    """Smoke-run the lessons, `jobs` at a time, reporting each in the lessons' order."""
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        futures = [pool.submit(smoke_run, lesson, timeout, env) for lesson in lessons]
        runs = []
        for future in futures:
            runs.append(future.result())
            report(runs[-1].line())
    return runs


def smoke_command(lessons: list[Lesson], jobs: int, timeout: float | None) -> int:
    """verify.py --smoke: 0 when every lesson ran through (or declined by design), else 1."""
    runs = smoke_all(lessons, jobs, timeout)
    bad = [r for r in runs if not r.ok]
    wall = sum(r.wall_s for r in runs)
    print(f"smoke: {len(runs) - len(bad)} of {counted(len(runs), 'lesson')} ran through on the CPU "
          f"({wall:.0f} s of runs; nothing timed, nothing recorded)")
    return 1 if bad else 0
