"""How the tools' costs grow with the course: a 200-lesson copy of the repository, timed.

    .venv/bin/python tools/bench_scale.py [--lessons 200] [--keep DIR]

Copies the repository into a temporary folder, adds N scaffolded lessons
(tools/new_lesson.py) with evidence records shaped like a typical lesson's (a
copy of the course's median-sized GPU and interpreter records, each stamped
with the new lesson's source hash, so every lesson is VERIFIED), then times:

    verify.py --status, verify.py --check, a no-op verify.py run,
    mkdocs build --strict, and how long mkdocs serve takes to show an edited lesson,

and prints the numbers with the search index and page counts, for NOTES.md.
A benchmark, not a test: it prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from verified_triton.core.paths import ROOT

PY = sys.executable


def copy_repo(dest: Path) -> None:
    ignore = shutil.ignore_patterns(".git", ".venv", "site", "site-downloads", "__pycache__", "test-artifacts",
                                    "_output", ".pytest_cache", ".ruff_cache")
    shutil.copytree(ROOT, dest, ignore=ignore)


def add_lessons(root: Path, count: int) -> None:
    from verified_triton.author.new_lesson import create
    from verified_triton.core.lessons import load_lesson
    from verified_triton.judge.evidence import write_record

    # A typical lesson: the median-sized GPU and interpreter records of the course.
    gpus = sorted((ROOT / "evidence").glob("*/gpu-*.json"), key=lambda p: p.stat().st_size)
    interps = sorted((ROOT / "evidence").glob("*/interpreter.json"), key=lambda p: p.stat().st_size)
    template_gpu, template_interp = gpus[len(gpus) // 2], interps[len(interps) // 2]
    from verified_triton.judge.evidence import read_record

    gpu = read_record(template_gpu)
    interp = read_record(template_interp)
    for i in range(count):
        name = f"scale-{i:03d}"
        create(name, f"Scale lesson {i}", root, part=f"Part {i // 20 + 1}")
        lesson = load_lesson(root / "code" / name, root / "code")
        for record in (gpu, interp):
            record.lesson, record.source_hash = name, lesson.source_hash()
            record.source_files = lesson.source_file_hashes()
            record.figures = []
            write_record(root / "evidence", record, {})


def timed(cmd: list[str], cwd: Path, repeat: int = 3) -> tuple[float, int]:
    best, code = float("inf"), 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=dict(os.environ,
                              NO_MKDOCS_2_WARNING="1"))
        best = min(best, time.perf_counter() - t0)
        code = done.returncode
    return best, code


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


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lessons", type=int, default=200)
    parser.add_argument("--keep", type=Path, help="build the copy here and keep it")
    args = parser.parse_args(argv)
    work = args.keep or Path(tempfile.mkdtemp(prefix="vt-scale-"))
    root = work / "repo"
    if root.exists():
        shutil.rmtree(root)
    copy_repo(root)
    t0 = time.perf_counter()
    add_lessons(root, args.lessons)
    total = len(list((root / "code").glob("*/lesson.toml")))
    print(f"{total} lessons ({args.lessons} scaffolded in {time.perf_counter() - t0:.1f} s) in {root}")
    verify = [PY, "tools/verify.py"]
    mkdocs = str(Path(PY).with_name("mkdocs"))
    rows = []
    for label, cmd, repeat in (("verify.py --status", verify + ["--status"], 3),
                               ("verify.py --check", verify + ["--check"], 3),
                               ("verify.py (no-op)", verify + ["--mode", "interpreter"], 3),
                               ("mkdocs build --strict", [mkdocs, "build", "--strict", "-q"], 1)):
        seconds, code = timed(cmd, root, repeat)
        rows.append((label, seconds, code))
        print(f"  {label:<24} {seconds:7.2f} s  (exit {code})", flush=True)
    index = root / "site" / "search" / "search_index.json"
    docs = json.loads(index.read_text())["docs"] if index.exists() else []
    pages = len(list((root / "site").rglob("index.html")))
    update = serve_update(root, mkdocs)
    print(f"  {'mkdocs serve: edit shown':<24} {update:7.2f} s")
    size = index.stat().st_size if index.exists() else 0
    print(f"  search index {size / 1024:.0f} KiB, {len(docs)} entries, {size / max(total, 1) / 1024:.1f} KiB per "
          f"lesson; {pages} HTML pages")
    print("\n| measure | seconds |\n| --- | --- |")
    for label, seconds, _ in rows:
        print(f"| {label} | {seconds:.2f} |")
    print(f"| mkdocs serve, edit to page | {update:.2f} |")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
