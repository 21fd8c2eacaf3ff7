"""How the tools' costs grow with the course: a 200-lesson copy of the repository, timed.

    .venv/bin/python tools/bench_scale.py [--lessons 200] [--keep DIR] [--only status,check,build] [--repeat 3]
    .venv/bin/python tools/bench_scale.py --reuse DIR --only status,check,build   time an existing copy again

Copies the repository into a temporary folder, adds N scaffolded lessons
(tools/new_lesson.py) with evidence records shaped like a typical lesson's (a
copy of the course's median-sized GPU, interpreter and memory-check records,
exercises record and release records, each stamped with the new lesson's
source hash, so every lesson is VERIFIED and carries its release matrix), then times:

    verify.py --status, verify.py --check, a no-op verify.py run,
    mkdocs build --strict, and how long mkdocs serve takes to show an edited lesson,

(--only picks some of status, check, noop, build, serve), each the median of --repeat runs (the build and
the serve once unless --repeat is given), and prints the numbers with the search index and page counts, for
NOTES.md. A benchmark, not a test: it prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from verified_triton.core.paths import ROOT

PY = sys.executable


def copy_repo(dest: Path) -> None:
    anywhere = shutil.ignore_patterns(".git", ".venv", "__pycache__", "_output", ".pytest_cache", ".ruff_cache")
    built = {"site", "site-downloads", "test-artifacts", ".cache"}  # the build's outputs, at the top only (not site/
    # of tools/verified_triton, the hooks' package)

    def ignore(folder: str, names: list[str]) -> set[str]:
        return set(anywhere(folder, names)) | (built & set(names) if Path(folder) == ROOT else set())

    shutil.copytree(ROOT, dest, ignore=ignore)


def _median_file(pattern: str, keep=lambda raw: True) -> Path | None:
    """The course's median-sized evidence file matching `pattern` under evidence/ whose JSON `keep` accepts
    (None: there is none)."""
    found = sorted((p for p in (ROOT / "evidence").glob(pattern) if keep(json.loads(p.read_text()))),
                   key=lambda p: (p.stat().st_size, str(p)))
    return found[len(found) // 2] if found else None


def _clean(raw: dict) -> bool:
    """A memory check whose every tool finished clean (a typical lesson's: its badge VERIFIED)."""
    runs = (raw.get("sanitizer") or {}).get("runs") or []
    return bool(runs) and all(run.get("state") == "clean" for run in runs)


def _scaffold_steps(record) -> None:
    """The record's steps named as the scaffolded lesson's main() names its own (its page shows `::step check`
    and `::step benchmark`): the first step is "check", the benchmark step (else the second) "benchmark"."""
    names = [step.name for step in record.steps]
    if not names:
        return
    bench = "benchmark" if "benchmark" in names else names[1] if len(names) > 1 else ""
    rename = {names[0]: "check", **({bench: "benchmark"} if bench and bench != names[0] else {})}
    rename.update({n: f"{n}-{i}" for i, n in enumerate(names) if n in ("check", "benchmark") and n not in rename})
    for step in record.steps:
        step.name = rename.get(step.name, step.name)
    for check in record.checks:
        check.step = rename.get(check.step, check.step)


def add_lessons(root: Path, count: int) -> None:
    from verified_triton.author.new_lesson import create
    from verified_triton.core.lessons import exercise_file_hashes, exercise_hash, load_lesson
    from verified_triton.judge.evidence import read_record, write_record
    from verified_triton.judge.exercises import read_exercises, write_exercises
    from verified_triton.judge.releases import read_release, write_release

    # A typical lesson: the median-sized records of each kind the course holds.
    records = [read_record(path) for path in filter(None, (
        _median_file("*/gpu-*.json"), _median_file("*/interpreter.json"), _median_file("*/sanitize-*.json", _clean)))]
    exercises_path = _median_file("*/exercises.json")
    exercises = read_exercises(exercises_path) if exercises_path else None
    folders = sorted({p.parent for p in (ROOT / "evidence").glob("*/releases/triton-*.json")})
    releases = ([read_release(p) for p in sorted(folders[len(folders) // 2].glob("triton-*.json"))]
                if folders else [])
    for i in range(count):
        name = f"scale-{i:03d}"
        create(name, f"Scale lesson {i}", root, part=f"Part {i // 20 + 1}")
        lesson = load_lesson(root / "code" / name, root / "code")
        for record in records:
            record.lesson, record.source_hash = name, lesson.source_hash()
            record.source_files = lesson.source_file_hashes()
            record.figures, record.predictions = [], []  # the scaffolded page places neither
            _scaffold_steps(record)
            write_record(root / "evidence", record, {})
        if exercises is not None:
            exercises.lesson, exercises.source_hash = name, exercise_hash(lesson)
            exercises.source_files = exercise_file_hashes(lesson)
            write_exercises(root / "evidence", exercises)
        for release in releases:
            release.lesson, release.source_hash = name, lesson.source_hash()
            write_release(root / "evidence", release)


def timed(cmd: list[str], cwd: Path, repeat: int = 3) -> tuple[float, float, int]:
    """The median wall time of `repeat` runs, the median of their CPU time (user + system: steadier on a
    machine with other work running), and the last run's exit code."""
    walls, cpus, code = [], [], 0
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=dict(os.environ,
                              NO_MKDOCS_2_WARNING="1"))
        walls.append(time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        code = done.returncode
    return statistics.median(walls), statistics.median(cpus), code


def serve_update(root: Path, mkdocs: str) -> float:
    """Seconds from editing a lesson file to mkdocs serve showing the change."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([mkdocs, "serve", "--dirty", "--no-strict", "-a", f"127.0.0.1:{port}"], cwd=root,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                            env=dict(os.environ, NO_MKDOCS_2_WARNING="1"))
    url = f"http://127.0.0.1:{port}/source/scale-000/scale_000/"
    try:
        deadline = time.time() + 300
        while time.time() < deadline:
            try:
                urllib.request.urlopen(url, timeout=2).read()
                break
            except OSError:
                time.sleep(0.5)
        main = root / "code" / "scale-000" / "scale_000.py"
        marker = f"edited-{time.time_ns()}"
        t0 = time.perf_counter()
        main.write_text(main.read_text() + f"\n# {marker}\n")
        while time.perf_counter() - t0 < 300:
            try:
                if marker in urllib.request.urlopen(url, timeout=5).read().decode():
                    return time.perf_counter() - t0
            except OSError:
                pass
            time.sleep(0.1)
        return float("nan")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait()


MEASURES = ("status", "check", "noop", "build", "serve")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lessons", type=int, default=200)
    parser.add_argument("--keep", type=Path, help="build the copy here and keep it")
    parser.add_argument("--reuse", type=Path, help="time the copy a --keep run left in this folder, as it is")
    parser.add_argument("--only", default=",".join(MEASURES), help=f"which measures, of {','.join(MEASURES)}")
    parser.add_argument("--repeat", type=int, help="runs per measure, the median quoted (default 3; the build 1)")
    args = parser.parse_args(argv)
    only = [m for m in args.only.split(",") if m]
    unknown = [m for m in only if m not in MEASURES]
    if unknown:
        parser.error(f"--only: unknown measure {unknown[0]!r} (of {', '.join(MEASURES)})")
    work = args.reuse or args.keep or Path(tempfile.mkdtemp(prefix="vt-scale-"))
    root = work / "repo"
    if args.reuse:
        if not (root / "code").is_dir():
            parser.error(f"--reuse: no copy in {root} (make one with --keep)")
    else:
        if root.exists():
            shutil.rmtree(root)
        copy_repo(root)
        t0 = time.perf_counter()
        add_lessons(root, args.lessons)
        print(f"{args.lessons} lessons scaffolded in {time.perf_counter() - t0:.1f} s")
    total = len(list((root / "code").glob("*/lesson.toml")))
    print(f"{total} lessons in {root}")
    verify = [PY, "tools/verify.py"]
    mkdocs = str(Path(PY).with_name("mkdocs"))
    rows = []
    for label, key, cmd in (("verify.py --status", "status", verify + ["--status"]),
                            ("verify.py --check", "check", verify + ["--check"]),
                            ("verify.py (no-op)", "noop", verify + ["--mode", "interpreter"]),
                            ("mkdocs build --strict", "build", [mkdocs, "build", "--strict", "-q"])):
        if key not in only:
            continue
        repeat = args.repeat or (1 if key == "build" else 3)
        seconds, cpu, code = timed(cmd, root, repeat)
        rows.append((label, seconds, cpu))
        print(f"  {label:<24} {seconds:7.2f} s  (CPU {cpu:.2f} s; median of {repeat}, exit {code})", flush=True)
    index = root / "site" / "search" / "search_index.json"
    if "build" in only and index.exists():
        docs = json.loads(index.read_text())["docs"]
        pages = len(list((root / "site").rglob("index.html")))
        size = index.stat().st_size
        print(f"  search index {size / 1024:.0f} KiB, {len(docs)} entries, {size / max(total, 1) / 1024:.1f} KiB "
              f"per lesson; {pages} HTML pages")
    if "serve" in only:
        update = serve_update(root, mkdocs)
        rows.append(("mkdocs serve, edit to page", update, float("nan")))
        print(f"  {'mkdocs serve: edit shown':<24} {update:7.2f} s")
    print("\n| measure | wall s | CPU s |\n| --- | --- | --- |")
    for label, seconds, cpu in rows:
        print(f"| {label} | {seconds:.2f} | {cpu:.2f} |")
    if not (args.keep or args.reuse):
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
