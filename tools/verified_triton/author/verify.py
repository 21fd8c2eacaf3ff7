"""Run every lesson under Triton's interpreter and on a GPU, and record what happened.

    python tools/verify.py                      run what changed, both modes
    python tools/verify.py --lesson fp16-matmul --mode gpu --force
    python tools/verify.py --status [--json]    each lesson's badge and summary; runs nothing
    python tools/verify.py --check              fail unless every lesson's evidence is current and usable
    python tools/verify.py --check --publish    ... and every lesson VERIFIED, or PARTIALLY VERIFIED by design
    python tools/verify.py --compare            re-run the interpreter mode and compare with the record
    python tools/verify.py --smoke              run each lesson's GPU-only code once on the CPU; record nothing
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

from verified_triton.core.lessons import MODES, Lesson, LessonError, discover
from verified_triton.core.paths import ROOT
from verified_triton.core.safefs import UnsafePathError
from verified_triton.judge.evidence import EvidenceError, read_record, record_path
from verified_triton.judge.status import judge
from verified_triton.record.bundles import import_bundles, write_bundle
from verified_triton.record.capture import kill_all_on_signals
from verified_triton.record.machine import SETUP, Machine, mode_problem, this_machine
from verified_triton.record.plan import execute, parse_shard, plan_runs, recorded_wall, shard
from verified_triton.record.provenance import Expectation, private_copies, provenance_problems
from verified_triton.record.report import (
    check_problems,
    print_status,
    print_summary,
    quiet_broken_pipe,
    status_json,
    terminal_safe,
)
from verified_triton.record.runner import mode_key, run_lesson, sweep_orphans
from verified_triton.record.smoke import smoke_command

EPILOG = """\
what it does (one of):
  (no action)   run each lesson whose evidence is missing or for another source, in each mode
                this machine can run, and record it under evidence/
  --status      print each lesson's badge and why; run nothing (--json: for scripts)
  --check       exit 1 unless every lesson's evidence is current and usable (every push);
                a lesson still waiting for its GPU run passes, and the last line says so
  --check --publish
                also exit 1 unless every lesson is VERIFIED, or PARTIALLY VERIFIED by design
                (a GPU below [requires] capability declined it): what the publish job runs
  --compare     re-run the interpreter mode in a scratch folder, exit 1 where it disagrees
  --smoke       a smoke run: the interpreter mode with the GPU steps too, on tiny inputs, untimed;
                exit 1 if a lesson fails, each failure at its FILE:LINE; records nothing (record/smoke.py)
  --import      merge bundles recorded on other machines

modes (--mode):
  interpreter   TRITON_INTERPRET=1 on the CPU: checks, no timings (any machine with torch and Triton)
  gpu           on a CUDA GPU: checks and benchmarks; a machine without one never touches GPU evidence
  all           both, where this machine can (the default)

exit codes:
  0  everything asked for passed
  1  a run failed, or --check/--compare found a problem (each printed with the lesson's name)
  2  a bad command line, or input verify cannot use (a broken lesson.toml, an unknown lesson)

examples:
  .venv/bin/python tools/verify.py --lesson row-sum            # after editing one lesson
  .venv/bin/python tools/verify.py --smoke --lesson row-sum    # its GPU steps' code too, before a GPU run
  .venv/bin/python tools/verify.py --status
  .venv/bin/python tools/verify.py --check --publish           # before publishing
  python3 tools/verify.py --mode gpu --bundle gpu.tar.gz       # on a GPU machine
  .venv/bin/python tools/verify.py --import gpu.tar.gz         # back here
  python3 tools/verify.py --mode gpu --gpus 0,1 --shard 1/2 --bundle s1.tar.gz

.venv: bash tools/dev.sh author (torch, Triton, MkDocs); see README.md and docs/writing-a-lesson.md."""


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="verify.py", description=__doc__.split("\n")[0], epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lesson", action="append", default=[], metavar="NAME", help="only this lesson (repeatable)")
    p.add_argument("--mode", choices=["interpreter", "gpu", "all"], default="all",
                   help="which runs: interpreter (CPU), gpu, or all that this machine can (default: all)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                   help="interpreter runs in parallel (default: the number of CPUs)")
    p.add_argument("--timeout", type=float, help="seconds per run, overriding each lesson's own")
    p.add_argument("--force", action="store_true", help="re-run even when the evidence is current")
    p.add_argument("--status", action="store_true", help="print each lesson's status; run nothing")
    p.add_argument("--json", action="store_true", help="with --status: JSON output")
    p.add_argument("--check", action="store_true", help="exit 1 unless every lesson's evidence is current")
    p.add_argument("--publish", action="store_true",
                   help="with --check: also exit 1 unless every lesson is VERIFIED or PARTIALLY VERIFIED by design")
    p.add_argument("--compare", action="store_true",
                   help="re-run the interpreter mode and exit 1 where it disagrees with the record")
    p.add_argument("--smoke", action="store_true",
                   help="run every step, the GPU's too, once on tiny inputs under the interpreter; record nothing")
    p.add_argument("--shard", metavar="K/N", help="run shard K of N (balanced by recorded wall time)")
    p.add_argument("--gpus", metavar="LIST", help="GPU indices to run on in parallel, one lesson per GPU "
                                                  "(e.g. 0,1), or 'all'")
    p.add_argument("--bundle", type=Path, metavar="PATH", help="after running, write the records to PATH")
    p.add_argument("--import", dest="import_paths", type=Path, nargs="+", metavar="PATH",
                   help="merge one or more bundles")
    p.add_argument("--expect-mode", choices=["interpreter", "gpu"],
                   help="with --import: refuse bundles holding records of the other mode (record/provenance.py)")
    p.add_argument("--expect-gpu", metavar="MODEL",
                   help="with --import: refuse GPU records of another model than MODEL (the runner label, e.g. h200)")
    p.add_argument("--require-attestation", metavar="OWNER/REPO/.github/workflows/FILE@REF",
                   help="with --import: refuse a bundle unless `gh attestation verify` vouches that this workflow "
                        "made it")
    p.add_argument("--accept-changes", action="store_true",
                   help="with --import: replace current records even where the outcome or a ratio changes")
    p.add_argument("--evidence-dir", type=Path, default=ROOT / "evidence", help=argparse.SUPPRESS)
    p.add_argument("--code-dir", type=Path, default=ROOT / "code", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    problem = invalid_combination(args)
    if problem:
        p.error(problem)  # exit 2 with the usage line
    return args


RUN_OPTIONS = ("force", "timeout", "shard", "gpus", "bundle")  # what only a run uses (--compare: --timeout)


def invalid_combination(args: argparse.Namespace) -> str:
    """Options that would be silently ignored together are an error instead ('' when none)."""
    if args.json and not args.status:
        return "--json shapes the output of --status: use --status --json"
    if args.publish and not args.check:
        return "--publish is a stricter --check: use --check --publish"
    actions = [flag for flag, on in (("--check" if args.check else "--status", args.status or args.check),
                                     ("--compare", args.compare), ("--smoke", args.smoke),
                                     ("--import", bool(args.import_paths))) if on]
    if len(actions) > 1:
        return f"{actions[0]} and {actions[1]} are separate jobs: run them one at a time"
    allowed = {"--compare": {"timeout"}, "--smoke": {"timeout"}}.get(actions[0], set()) if actions else set(RUN_OPTIONS)
    if not args.import_paths:
        stray = [flag for flag, on in (("--accept-changes", args.accept_changes), ("--expect-mode", args.expect_mode),
                                       ("--expect-gpu", args.expect_gpu),
                                       ("--require-attestation", args.require_attestation)) if on]
        if stray:
            return f"{stray[0]} applies to --import"
    ignored = [f"--{name}" for name in RUN_OPTIONS if name not in allowed and getattr(args, name) not in (None, False)]
    if ignored:
        return f"{ignored[0]} applies to a run of the lessons, which {actions[0]} does not start"
    return ""


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
    expect = Expectation(args.expect_mode, args.expect_gpu, args.require_attestation)
    # Checked against the job that made them: each bundle copied once, privately; the copy is checked and imported.
    with private_copies(args.import_paths if expect.any else []) as copies:
        if expect.any:
            problems = provenance_problems(args.import_paths, by_name, expect, selected, copies)
            for problem in problems:
                print(f"refused: {terminal_safe(problem)}", file=sys.stderr)
            if problems:
                print("import: nothing merged; a bundle that did not come from the job it should have may mean the "
                      "run was tampered with, so no bundle of this import is taken", file=sys.stderr)
                return 1
        report = import_bundles(args.import_paths, by_name, evidence_dir, selected, args.accept_changes,
                                sources=copies.files)
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
        waiting = waiting_for_gpu(statuses)
        if args.publish:
            for problem in publish_problems(statuses):
                print(f"publish: {terminal_safe(problem)}", file=sys.stderr)
                problems.append(problem)
            if not problems:
                print(f"publish: all {len(statuses)} lessons are VERIFIED or PARTIALLY VERIFIED by design")
        elif not problems:
            print(f"check: all {len(statuses)} lessons have current, usable evidence"
                  + (f"; {len(waiting)} still {'waits' if len(waiting) == 1 else 'wait'} for a GPU run "
                     f"({', '.join(waiting)}): --check --publish refuses {'it' if len(waiting) == 1 else 'them'} "
                     "until it is recorded" if waiting else ""))
        return 1 if problems else 0
    return 0


def waiting_for_gpu(statuses) -> list[str]:
    """Lessons whose interpreter half is done and whose GPU run is not recorded for this source.
    (A GPU run declined by [requires] is by design: PARTIALLY VERIFIED, and publishable.)"""
    return [st.lesson.name for st in statuses if st.modes["interpreter"].state == "passed"
            and st.modes["gpu"].state in ("none", "stale")]


def publish_problems(statuses) -> list[str]:
    """What --check accepts but publishing does not: a lesson still waiting for its GPU run.
    Each names the lesson and the commands that fix it."""
    return [f"{name}: PARTIALLY VERIFIED, not by design: its GPU run is not recorded for this source; "
            f"record it on a GPU machine (python3 tools/verify.py --lesson {name} --mode gpu --bundle {name}.tar.gz) "
            f"and bring it here (python tools/verify.py --import {name}.tar.gz)" for name in waiting_for_gpu(statuses)]


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
        if args.smoke:
            return smoke_command(lessons, args.jobs, args.timeout)
        return do_run(args, lessons, evidence_dir)
    except BrokenPipeError:
        quiet_broken_pipe()
        return 0
    except (LessonError, EvidenceError, UnsafePathError, UsageError, ValueError) as exc:
        print(f"error: {terminal_safe(str(exc))}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
