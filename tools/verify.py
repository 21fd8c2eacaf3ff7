"""Run every lesson under Triton's interpreter and on a GPU, and record what happened.

    python tools/verify.py                      run what changed, both modes
    python tools/verify.py --lesson fp16-matmul --mode gpu --force
    python tools/verify.py --status [--json]    each lesson's badge and summary; runs nothing
    python tools/verify.py --check              fail unless every lesson's evidence is current and usable
    python tools/verify.py --compare            re-run the interpreter mode and compare with the record
    python tools/verify.py --mode gpu --gpus 0,1 --shard 1/2 --bundle out.tar.gz   (on GPU machines)
    python tools/verify.py --import a.tar.gz b.tar.gz   merge bundles recorded elsewhere

This file is the command line only. The work lives in one module per job:
machine.py (what this machine has), plan.py (what to run, shards, GPUs),
runner.py (one run -> one record), capture.py (the child process),
changes.py (history and changes beyond noise), bundles.py (carrying evidence),
report.py (what is printed), status.py (the judgement), evidence.py (the format).
A machine without a GPU never writes, deletes or overwrites GPU evidence.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bundles import import_bundles, write_bundle  # noqa: E402
from capture import kill_all_on_signals  # noqa: E402
from evidence import EvidenceError, read_record, record_path  # noqa: E402
from lessons import MODES, Lesson, LessonError, discover  # noqa: E402
from machine import SETUP, Machine, mode_problem, this_machine  # noqa: E402
from plan import execute, parse_shard, plan_runs, recorded_wall, shard  # noqa: E402
from report import (  # noqa: E402
    check_problems,
    print_status,
    print_summary,
    quiet_broken_pipe,
    status_json,
    terminal_safe,
)
from runner import mode_key, run_lesson, sweep_orphans  # noqa: E402
from safefs import UnsafePathError  # noqa: E402
from status import judge  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="verify.py", description=__doc__.split("\n")[0])
    p.add_argument("--lesson", action="append", default=[], metavar="NAME", help="only this lesson (repeatable)")
    p.add_argument("--mode", choices=["interpreter", "gpu", "all"], default="all")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="interpreter runs in parallel")
    p.add_argument("--timeout", type=float, help="seconds per run, overriding each lesson's own")
    p.add_argument("--force", action="store_true", help="re-run even when the evidence is current")
    p.add_argument("--status", action="store_true", help="print each lesson's status; run nothing")
    p.add_argument("--json", action="store_true", help="with --status: JSON output")
    p.add_argument("--check", action="store_true", help="exit 1 unless every lesson's evidence is current")
    p.add_argument("--compare", action="store_true",
                   help="re-run the interpreter mode and exit 1 where it disagrees with the record")
    p.add_argument("--shard", metavar="K/N", help="run shard K of N (balanced by recorded wall time)")
    p.add_argument("--gpus", metavar="LIST", help="GPU indices to run on in parallel, one lesson per GPU "
                                                  "(e.g. 0,1), or 'all'")
    p.add_argument("--bundle", type=Path, metavar="PATH", help="after running, write the records to PATH")
    p.add_argument("--import", dest="import_paths", type=Path, nargs="+", metavar="PATH",
                   help="merge one or more bundles")
    p.add_argument("--accept-changes", action="store_true",
                   help="with --import: replace current records even where the outcome or a ratio changes")
    p.add_argument("--evidence-dir", type=Path, default=ROOT / "evidence", help=argparse.SUPPRESS)
    p.add_argument("--code-dir", type=Path, default=ROOT / "code", help=argparse.SUPPRESS)
    return p.parse_args(argv)


class UsageError(Exception):
    pass


def select(all_lessons: list[Lesson], names: list[str]) -> list[Lesson]:
    if not names:
        return all_lessons
    by_name = {lesson.name: lesson for lesson in all_lessons}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise LessonError(f"unknown lesson(s): {', '.join(unknown)}; known: {', '.join(by_name)}")
    return [by_name[n] for n in names]


def choose_gpus(spec: str | None, machine: Machine) -> list[int] | None:
    if spec is None:
        return None
    have = [g.index for g in machine.gpus]
    if spec == "all":
        wanted = have
    else:
        try:
            wanted = [int(x) for x in spec.split(",") if x.strip()]
        except ValueError:
            raise UsageError(f"--gpus takes indices like 0,1 or 'all'; got {spec!r}") from None
    missing = [g for g in wanted if g not in have]
    if missing or not wanted or len(set(wanted)) != len(wanted):
        raise UsageError(f"--gpus {spec}: this machine has GPUs {have or 'none'}")
    return wanted


def do_import(args, every: list[Lesson], lessons: list[Lesson], evidence_dir: Path) -> int:
    """Merge bundles: records of the selected `lessons` only, checked against `every` lesson here."""
    selected = {lesson.name for lesson in lessons} if args.lesson else None
    by_name = {lesson.name: lesson for lesson in every}
    report = import_bundles(args.import_paths, by_name, evidence_dir, selected, args.accept_changes)
    for rec in report.merged:
        print(f"imported {rec.lesson} {rec.key} ({rec.outcome}, {rec.started_utc})")
    for note in report.notes:
        print(f"note: {terminal_safe(note)}")
    for change in report.changes:
        print(f"change beyond noise: {terminal_safe(change.describe())}")
    for problem in report.refused:
        print(f"refused: {terminal_safe(problem)}", file=sys.stderr)
    for change in report.held:
        print(f"held back: {terminal_safe(change)}", file=sys.stderr)
    if report.held:
        print("import: these records here would change; nothing was replaced. Look at the changes, then "
              "import again with --accept-changes to take the bundles' records", file=sys.stderr)
    print(f"import: {len(report.merged)} records merged, {len(report.refused)} refused"
          + (f", {len(report.unchanged)} unchanged" if report.unchanged else ""))
    if not report.merged and not report.refused and not report.unchanged and not report.held:
        print("import: nothing merged", file=sys.stderr)
    return 0 if report.ok else 1


def do_status(args, lessons: list[Lesson], evidence_dir: Path) -> int:
    statuses = [judge(lesson, evidence_dir) for lesson in lessons]
    if args.status:
        if args.json:
            print(json.dumps(status_json(statuses), indent=1))
        else:
            print_status(statuses)
    if args.check:
        problems = check_problems(statuses)
        for problem in problems:
            print(f"check: {terminal_safe(problem)}", file=sys.stderr)
        if not problems:
            print(f"check: all {len(statuses)} lessons have current, usable evidence")
        return 1 if problems else 0
    return 0


def compare_fresh(lessons: list[Lesson], evidence_dir: Path, machine: Machine, jobs: int,
                  timeout: float | None) -> list[str]:
    """Re-run the interpreter mode into a scratch folder; report where it disagrees with the record."""
    scratch = Path(tempfile.mkdtemp(prefix="verify-compare-"))
    try:
        todo = [(lesson, "interpreter") for lesson in lessons if lesson.modes["interpreter"].supported]
        fresh = execute(todo, machine, scratch, jobs, timeout)
        problems = []
        for r in fresh:
            if r.record is None:
                problems.append(f"{r.lesson.name}: {r.skipped}")
                continue
            path = record_path(evidence_dir, r.lesson.name, "interpreter")
            if not path.exists():
                problems.append(f"{r.lesson.name}: fresh run {r.record.outcome}, but no committed record")
                continue
            old = read_record(path, evidence_dir)
            if old.outcome != r.record.outcome:
                problems.append(f"{r.lesson.name}: committed outcome {old.outcome}, fresh run {r.record.outcome}"
                                f"{' (' + r.record.reason + ')' if r.record.reason else ''}")
            old_checks = {c.name: c.status for c in old.checks}
            new_checks = {c.name: c.status for c in r.record.checks}
            if old_checks != new_checks:
                diff = sorted(k for k in old_checks.keys() | new_checks.keys()
                              if old_checks.get(k) != new_checks.get(k))
                problems.append(f"{r.lesson.name}: checks differ from the committed record: "
                                + ", ".join(f"{k} {old_checks.get(k)} -> {new_checks.get(k)}" for k in diff))
        return problems
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def preflight(modes: list[str]) -> None:
    """UsageError (exit 2, nothing run or written) unless this Python can run each of `modes`."""
    for mode in modes:
        problem = mode_problem(mode)
        if problem:
            label = "interpreter" if mode == "interpreter" else "GPU"
            raise UsageError(f"the {label} mode cannot run here: {problem}. It needs {SETUP}. Nothing was run "
                             "and nothing was written")


def do_run(args, lessons: list[Lesson], evidence_dir: Path) -> int:
    kill_all_on_signals()
    sweep_orphans()
    machine = this_machine()
    print(f"machine: python {machine.python}, torch {machine.torch}, triton {machine.triton}, "
          f"GPUs: {', '.join(f'{g.index}: {g.name}' for g in machine.gpus) or 'none'}", flush=True)
    if args.compare:
        preflight(["interpreter"])
        problems = compare_fresh(lessons, evidence_dir, machine, args.jobs, args.timeout)
        for problem in problems:
            print(f"compare: {terminal_safe(problem)}", file=sys.stderr)
        print("compare: fresh interpreter runs " + ("disagree" if problems else "agree with the records"))
        return 1 if problems else 0
    if args.mode == "gpu" and not machine.has_gpu:
        raise UsageError("--mode gpu: no CUDA device found on this machine (nvidia-smi lists none); "
                         "nothing was run and no bundle was written")
    gpus = choose_gpus(args.gpus, machine)
    modes = list(MODES) if args.mode == "all" else [args.mode]
    if args.shard:
        k, n = parse_shard(args.shard)
        lessons = shard(lessons, k, n, lambda lesson: recorded_wall(lesson, modes, evidence_dir))
        print(f"shard {k}/{n}: {', '.join(lesson.name for lesson in lessons) or 'no lessons'}", flush=True)
    todo, skipped = plan_runs(lessons, modes, machine, evidence_dir, args.force)
    preflight(sorted({mode for _, mode in todo}, key=MODES.index))
    ran = execute(todo, machine, evidence_dir, args.jobs, args.timeout, gpus, run=partial(run_lesson, force=args.force),
                  wall=lambda lesson: recorded_wall(lesson, ["gpu"], evidence_dir))
    print_summary(ran + skipped)
    status = 0
    if args.bundle:
        keys = {mode_key(m, machine.gpus[0].name if machine.gpus else "") for m in modes
                if m == "interpreter" or machine.has_gpu}
        records = [read_record(record_path(evidence_dir, lesson.name, key), evidence_dir)
                   for lesson in lessons for key in sorted(keys)
                   if record_path(evidence_dir, lesson.name, key).exists()]
        if not records:
            print("bundle: no records to bundle; nothing written", file=sys.stderr)
            status = 1
        else:
            write_bundle(args.bundle, records, evidence_dir)
    bad = [r for r in ran if r.record is None or r.record.failed]
    return 1 if bad else status


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    try:
        evidence_dir = args.evidence_dir.absolute()
        every = discover(args.code_dir)
        lessons = select(every, args.lesson)
        if args.import_paths:
            return do_import(args, every, lessons, evidence_dir)
        if args.status or args.check:
            return do_status(args, lessons, evidence_dir)
        return do_run(args, lessons, evidence_dir)
    except BrokenPipeError:
        quiet_broken_pipe()
        return 0
    except (LessonError, EvidenceError, UnsafePathError, UsageError, ValueError) as exc:
        print(f"error: {terminal_safe(str(exc))}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
