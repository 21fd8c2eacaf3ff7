"""Run every lesson under Triton's interpreter and on a GPU, and record what happened.

    .venv/bin/python tools/verify.py                      run what changed, both modes
    python3 tools/verify.py --lesson fp16-matmul --mode gpu --force   (on a GPU machine)
    .venv/bin/python tools/verify.py --status [--json]    each lesson's badge and summary; runs nothing
    .venv/bin/python tools/verify.py --check              fail unless every lesson's evidence is current and usable
    .venv/bin/python tools/verify.py --check --publish    ... and every lesson VERIFIED, or PARTIALLY VERIFIED by design
    .venv/bin/python tools/verify.py --compare            re-run the interpreter mode and compare with the record
    .venv/bin/python tools/verify.py --smoke              each lesson's GPU-only code once on the CPU; record nothing
    python3 tools/verify.py --mode gpu --gpus 0,1 --shard 1/2 --bundle out.tar.gz   (on a GPU machine: its python3)
    python3 tools/verify.py --mode sanitize --bundle san.tar.gz   the lessons under compute-sanitizer (a GPU machine)
    .venv/bin/python tools/verify.py --import a.tar.gz b.tar.gz   merge bundles recorded elsewhere
    .venv/bin/python tools/verify.py --triton 3.5.1       the interpreter mode under another Triton release
    .venv/bin/python tools/verify.py --matrix [3.4,3.5]   ... under the newest patch of each minor from 3.4 to 3.9

This file is the command line only. The work lives in one module per job:
machine.py (what this machine has), plan.py (what to run, shards, GPUs),
runner.py (one run -> one record), capture.py (the child process),
changes.py (history and changes beyond noise), bundles.py (carrying evidence),
report.py (what is printed), sanitizer.py with sanitizer_command.py and sanitizer_log.py (runs under
compute-sanitizer), status.py and memory.py (the judgement),
evidence.py (the format); releases.py and matrix.py for other Triton releases (record/: environments
and runs; judge/: the release record and what the records say about a lesson's [requires] triton).
A machine without a GPU never writes, deletes or overwrites GPU evidence.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

from verified_triton.core.lessons import MODES, Lesson, LessonError, discover
from verified_triton.core.numfmt import counted
from verified_triton.core.paths import ROOT
from verified_triton.core.safefs import UnsafePathError
from verified_triton.judge.evidence import EvidenceError, read_record, record_path
from verified_triton.judge.exercises import judge_exercises
from verified_triton.judge.matrix import judge_releases
from verified_triton.judge.memory import judge_memory
from verified_triton.judge.status import PARTIAL, judge
from verified_triton.record.awaiting import FILE_NAME as AWAITING_FILE
from verified_triton.record.awaiting import AwaitingError, load_awaiting
from verified_triton.record.bundles import import_bundles, write_bundle
from verified_triton.record.capture import kill_all_on_signals
from verified_triton.record.exercises import needs_proof, prove_lesson
from verified_triton.record.machine import SETUP, Machine, mode_problem, this_machine
from verified_triton.record.matrix import elapsed, plan_matrix, run_matrix, summary_lines
from verified_triton.record.plan import execute, parse_shard, plan_runs, recorded_wall, shard
from verified_triton.record.provenance import Expectation, private_copies, provenance_problems
from verified_triton.record.releases import (
    CACHE_DIR,
    MATRIX,
    ReleaseEnvError,
    ReleaseSpecError,
    prepare,
    resolve_all,
)
from verified_triton.record.report import (
    awaiting_notes,
    check_problems,
    print_status,
    print_summary,
    quiet_broken_pipe,
    release_notes,
    status_json,
    terminal_safe,
)
from verified_triton.record.runner import mode_key, run_lesson, sweep_orphans
from verified_triton.record.sanitizer import print_sanitize_summary, run_sanitize_lesson
from verified_triton.record.sanitizer_command import find_tool, tool_version
from verified_triton.record.smoke import smoke_command

EPILOG = """\
what it does (one of):
  (no action)   run each lesson whose evidence is missing or for another source, in each mode
                this machine can run, and record it under evidence/; with the interpreter mode, prove
                each lesson's exercises too (record/exercises.py: evidence/<lesson>/exercises.json)
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
  --triton X.Y.Z
                the interpreter mode under that Triton release, in an environment of its own
                (.cache/triton/X.Y.Z, made once): one record per lesson and release under
                evidence/<lesson>/releases/; information, never the badge. X.Y: its newest patch;
                'newest': the newest on the package registry
  --matrix [LIST]
                the same for each release of LIST (default: 3.4,3.5,3.6,3.7,3.8,3.9, each its newest
                patch); prints a lesson x release table and where [requires] triton and the matrix
                differ. --check refuses a lesson that fails under a release its [requires] triton claims

modes (--mode):
  interpreter   TRITON_INTERPRET=1 on the CPU: checks, no timings (any machine with torch and Triton)
  gpu           on a CUDA GPU: checks and benchmarks; a machine without one never touches GPU evidence
  sanitize      on a CUDA GPU, under compute-sanitizer's memcheck, synccheck, initcheck and racecheck
                (one process each), PyTorch's caching allocator off: every step once, untimed, at the
                smoke sizes unless lesson.toml says [sanitize] size = "gpu"; records sanitize-gpu-<model>.
                Needs compute-sanitizer (CUDA toolkit): $COMPUTE_SANITIZER, PATH or /usr/local/cuda/bin.
                --jobs lessons at a time share the GPU (nothing is timed)
  all           interpreter and gpu, where this machine can (the default)

exit codes:
  0  everything asked for passed
  1  a run failed, or --check/--compare found a problem (each printed with the lesson's name)
  2  a bad command line, or input verify cannot use (a broken lesson.toml, an unknown lesson, or
     what the site could not build: before any run, --force and --mode gpu too, each lesson's
     regions and every :: line of its page are checked, each problem said as FILE:LINE)

examples:
  .venv/bin/python tools/verify.py --lesson row-sum            # after editing one lesson
  .venv/bin/python tools/verify.py --smoke --lesson row-sum    # its GPU steps' code too, before a GPU run
  .venv/bin/python tools/verify.py --status
  .venv/bin/python tools/verify.py --check --publish           # before publishing
  python3 tools/verify.py --mode gpu --bundle gpu.tar.gz       # on a GPU machine
  .venv/bin/python tools/verify.py --import gpu.tar.gz         # back here
  .venv/bin/python tools/verify.py --matrix --jobs 2           # every lesson under Triton 3.4 to 3.9
  .venv/bin/python tools/verify.py --lesson row-sum --triton 3.5 --force
  python3 tools/verify.py --mode gpu --gpus 0,1 --shard 1/2 --bundle s1.tar.gz
  python3 tools/verify.py --mode sanitize --jobs 8 --bundle san.tar.gz   # the memory check, on a GPU machine

.venv: bash tools/dev.sh author (torch, Triton, MkDocs); see README.md and docs/writing-a-lesson.md."""


def say(prefix: str, lines, err: bool = False) -> None:
    """Each line after `prefix`, made safe for a terminal (they quote what code/, evidence/ and bundles hold)."""
    for line in lines:
        print(f"{prefix}{terminal_safe(line)}", file=sys.stderr if err else sys.stdout)

def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="verify.py", description=__doc__.split("\n")[0], epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lesson", action="append", default=[], metavar="NAME", help="only this lesson (repeatable)")
    p.add_argument("--mode", choices=["interpreter", "gpu", "sanitize", "all"], default="all",
                   help="which runs: interpreter (CPU), gpu, sanitize (on a GPU, under compute-sanitizer), or "
                        "all: interpreter and gpu, as this machine can (default: all)")
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
    p.add_argument("--expect-mode", choices=["interpreter", "gpu", "sanitize"],
                   help="with --import: refuse bundles holding records of the other mode (record/provenance.py)")
    p.add_argument("--expect-gpu", metavar="MODEL",
                   help="with --import: refuse GPU records of another model than MODEL (the runner label, e.g. h200)")
    p.add_argument("--require-attestation", metavar="OWNER/REPO/.github/workflows/FILE@REF",
                   help="with --import: refuse a bundle unless `gh attestation verify` vouches that this workflow "
                        "made it")
    p.add_argument("--accept-changes", action="store_true",
                   help="with --import: replace current records even where the outcome or a ratio changes")
    p.add_argument("--triton", metavar="RELEASE",
                   help="run the interpreter mode under this Triton release (X.Y.Z, X.Y or 'newest') in an "
                        "environment of its own; records evidence/<lesson>/releases/triton-X.Y.Z.json")
    p.add_argument("--matrix", nargs="?", const=",".join(MATRIX), metavar="LIST",
                   help=f"--triton for each release of LIST (default: {','.join(MATRIX)}, each its newest patch)")
    p.add_argument("--evidence-dir", type=Path, default=ROOT / "evidence", help=argparse.SUPPRESS)
    p.add_argument("--cache-dir", type=Path, default=CACHE_DIR, help=argparse.SUPPRESS)
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
                                     ("--import", bool(args.import_paths)), ("--triton", bool(args.triton)),
                                     ("--matrix", bool(args.matrix))) if on]
    if len(actions) > 1:
        return f"{actions[0]} and {actions[1]} are separate jobs: run them one at a time"
    if actions and actions[0] in ("--triton", "--matrix") and args.mode == "gpu":
        return (f"{actions[0]} runs the interpreter mode under other Triton releases; a GPU run uses the Triton "
                "of the machine it runs on (record.yml's triton input, docs/verification.md)")
    allowed = {"--compare": {"timeout"}, "--smoke": {"timeout"}, "--triton": {"timeout", "force"},
               "--matrix": {"timeout", "force"}}.get(actions[0], set()) if actions else set(RUN_OPTIONS)
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


class PagesCannotBuild(Exception):
    """What the site build would refuse in the lessons to run: one 'FILE:LINE: why' each (site/preflight.py)."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("\n".join(problems))


def refuse_what_the_site_cannot_build(lessons: list[Lesson], code_dir: Path) -> None:
    """Before anything is planned or run (a GPU run too, and with --force): the lessons' regions and every
    `::` line of their pages, parsed; PagesCannotBuild (exit 2, nothing run or written) if the build
    would stop at one."""
    try:  # the directives' escape door needs markupsafe, which comes with torch (tests/test_layers.py)
        from verified_triton.site import preflight
    except ImportError:
        return  # no torch either: the machine check that follows refuses every run and says what is missing
    problems = preflight.problems(lessons, code_dir.absolute().parent / "docs")
    if problems:
        raise PagesCannotBuild(problems)


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
    say("note: ", report.notes)
    for change in report.changes:
        print(f"{change.heading}: {terminal_safe(change.describe())}")
    say("refused: ", report.refused, err=True)
    say("held back: ", report.held, err=True)
    if report.held:
        print("import: these records here would change; nothing was replaced. Look at the changes, then "
              "import again with --accept-changes to take the bundles' records", file=sys.stderr)
    print(f"import: {counted(len(report.merged), 'record')} merged, {len(report.refused)} refused"
          + (f", {len(report.unchanged)} unchanged" if report.unchanged else ""))
    if not report.merged and not report.refused and not report.unchanged and not report.held:
        print("import: nothing merged", file=sys.stderr)
    return 0 if report.ok else 1


def _all_lessons(n: int, one: str, many: str) -> str:
    """'the lesson is' for one lesson, 'all 23 lessons are' for more (with the verb given for each)."""
    return f"the lesson {one}" if n == 1 else f"all {n} lessons {many}"


def do_status(args, lessons: list[Lesson], evidence_dir: Path) -> int:
    statuses = [judge(lesson, evidence_dir) for lesson in lessons]
    if args.status:
        if args.json:
            print(json.dumps(status_json(statuses), indent=1))
        else:
            print_status(statuses)
    if args.check:
        # --publish: a release is not made of stale evidence, whatever the file says
        awaiting = {} if args.publish else load_awaiting(evidence_dir)
        problems = check_problems(statuses, awaiting)
        say("check: ", problems, err=True)
        excused = awaiting_notes(statuses, awaiting)
        say("check: note: ", excused)
        say("check: note: ", release_notes(statuses))  # information: what the matrix says [requires] triton should be
        waiting = waiting_for_gpu(statuses)
        unchecked = waiting_for_memory_check(statuses)
        if args.publish:
            for problem in publish_problems(statuses):
                print(f"publish: {terminal_safe(problem)}", file=sys.stderr)
                problems.append(problem)
            if not problems:
                print(f"publish: {_all_lessons(len(statuses), 'is', 'are')} VERIFIED or PARTIALLY VERIFIED by design")
        elif not problems:
            print((f"check: {_all_lessons(len(statuses), 'has', 'have')} current, usable evidence" if not excused else
                   f"check: {len(statuses) - len(excused)} of {counted(len(statuses), 'lesson')} "
                   f"{'has' if len(statuses) - len(excused) == 1 else 'have'} current, usable evidence "
                   f"and {len(excused)} {'waits' if len(excused) == 1 else 'wait'} for a GPU run of a changed source "
                   f"(evidence/{AWAITING_FILE})")
                  + (f"; {len(waiting)} still {'waits' if len(waiting) == 1 else 'wait'} for a GPU run "
                     f"({', '.join(waiting)}): --check --publish refuses {'it' if len(waiting) == 1 else 'them'} "
                     "until it is recorded" if waiting else "")
                  + (f"; {len(unchecked)} still {'waits' if len(unchecked) == 1 else 'wait'} for a memory check "
                     f"({', '.join(unchecked)}): record it on a GPU machine with python3 tools/verify.py --mode "
                     "sanitize --bundle sanitize.tar.gz (--lesson NAME for one); --check --publish refuses "
                     f"{'it' if len(unchecked) == 1 else 'them'} until then" if unchecked else ""))
        return 1 if problems else 0
    return 0


def waiting_for_memory_check(statuses) -> list[str]:
    """Lessons that would be VERIFIED but for a memory check not recorded for this source (the course
    has memory checks, so each lesson needs one)."""
    good = ("passed", "not-supported")
    return [st.lesson.name for st in statuses if st.modes["interpreter"].state in good
            and st.modes["gpu"].state in good and st.modes["sanitize"].state in ("none", "stale")]


def waiting_for_gpu(statuses) -> list[str]:
    """Lessons whose interpreter half is done and whose GPU run is not recorded for this source.
    (A GPU run declined by [requires] is by design: PARTIALLY VERIFIED, and publishable.)"""
    return [st.lesson.name for st in statuses if st.modes["interpreter"].state == "passed"
            and st.modes["gpu"].state in ("none", "stale")]


def publish_problems(statuses) -> list[str]:
    """What --check accepts but publishing does not: every PARTIALLY VERIFIED that is not so by design (the
    judgement's by_design), one line each, naming the lesson and, where one is known, the commands that fix it:
    a GPU run or a memory check not recorded for this source, or a memory check with findings neither fixed nor
    declared, or incomplete."""
    gpu, memory = set(waiting_for_gpu(statuses)), set(waiting_for_memory_check(statuses))
    problems = []
    for st in statuses:
        name = st.lesson.name
        if st.status is not PARTIAL or st.by_design:
            continue
        if name in gpu:
            problems.append(f"{name}: PARTIALLY VERIFIED, not by design: its GPU run is not recorded for this "
                            f"source; record it on a GPU machine (python3 tools/verify.py --lesson {name} --mode gpu "
                            f"--bundle {name}.tar.gz) and bring it here (.venv/bin/python tools/verify.py --import "
                            f"{name}.tar.gz)")
        elif name in memory:
            problems.append(f"{name}: PARTIALLY VERIFIED, not by design: memory safety not checked yet (no memory "
                            f"check recorded for this source); record it on a GPU machine with compute-sanitizer "
                            f"(python3 tools/verify.py --lesson {name} --mode sanitize --bundle "
                            f"{name}-sanitize.tar.gz) and bring it here (.venv/bin/python tools/verify.py --import "
                            f"{name}-sanitize.tar.gz)")
        elif st.modes["sanitize"].state == "partial" and st.memory is not None:
            problems.append(f"{name}: PARTIALLY VERIFIED, not by design: the memory check "
                            f"{'; '.join(st.memory.problems)}. Fix each finding or declare it with "
                            "lesson.sanitizer_known; for a tool that cannot finish, make the run smaller under the "
                            "tool, or declare it with a reproducer ([[sanitize.not_applicable]], "
                            "docs/writing-a-lesson.md); then record the memory check again")
        else:
            problems.append(f"{name}: PARTIALLY VERIFIED, not by design: {st.sentence}")
    return problems


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
        problem = mode_problem("interpreter" if mode == "interpreter" else "gpu")
        if problem:
            label = {"interpreter": "interpreter", "gpu": "GPU", "sanitize": "sanitize"}[mode]
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
    if args.mode in ("gpu", "sanitize") and not machine.has_gpu:
        raise UsageError(f"--mode {args.mode}: no CUDA device found on this machine (nvidia-smi lists none); "
                         "nothing was run and no bundle was written")
    if args.mode == "sanitize":
        sanitizer_preflight()
    gpus = choose_gpus(args.gpus, machine)
    modes = list(MODES) if args.mode == "all" else [args.mode]
    if args.shard:
        k, n = parse_shard(args.shard)
        # The memory check of a shard is the GPU run's shard: both split by the GPU runs' recorded times.
        weights = ["gpu"] if modes == ["sanitize"] else modes
        lessons = shard(lessons, k, n, lambda lesson: recorded_wall(lesson, weights, evidence_dir))
        print(f"shard {k}/{n}: {', '.join(lesson.name for lesson in lessons) or 'no lessons'}", flush=True)
    todo, skipped = plan_runs(lessons, modes, machine, evidence_dir, args.force)
    preflight(sorted({mode for _, mode in todo}, key=[*MODES, "sanitize"].index))
    ran = execute(todo, machine, evidence_dir, args.jobs, args.timeout, gpus, run=partial(run_lesson, force=args.force),
                  wall=lambda lesson: recorded_wall(lesson, ["gpu"], evidence_dir),
                  sanitize=partial(run_sanitize_lesson, force=args.force))
    print_summary(ran + skipped)
    print_sanitize_summary(ran + skipped, {lesson.name: lesson for lesson in lessons})
    status = 0 if "interpreter" not in modes else prove_exercises(lessons, evidence_dir, machine, args.force,
                                                                  args.timeout)
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
    checked = [r for r in ran if r.mode == "sanitize"]
    if checked and all(r.record is None and "compute-sanitizer could not run here" in r.skipped for r in checked):
        print("sanitize: compute-sanitizer is installed but cannot check this machine's GPU (see above); nothing "
              "was recorded, and no lesson failed", file=sys.stderr)
        return 2
    bad = [r for r in ran if r.record is None or r.record.failed
           or (r.record.sanitizer is not None and judge_memory(r.lesson, r.record).state == "failed")]
    return 1 if bad else status


def prove_exercises(lessons: list[Lesson], evidence_dir: Path, machine: Machine, force: bool,
                    timeout: float | None) -> int:
    """Each lesson's exercises under the interpreter, where their record is missing or for other exercises:
    the starter must fail, the solution pass and every declared mistake be caught (record/exercises.py). 1 when
    a proof fails, 0 otherwise."""
    versions = (machine.python, machine.torch, machine.triton)
    todo = []
    for lesson in lessons:
        why_not = needs_proof(lesson, evidence_dir, versions, force)
        if why_not == "up to date":
            print(f"exercises {lesson.name}: up to date", flush=True)
        elif not why_not:
            todo.append(lesson)
    if todo:
        preflight(["interpreter"])
    failed = 0
    for lesson in todo:
        result = prove_lesson(lesson, evidence_dir, timeout)
        judged = judge_exercises(lesson, evidence_dir)
        failed += judged.state != "passed"
        print(f"exercises {lesson.name}: {judged.state} in {result.record.wall_s:.1f} s: "
              f"{terminal_safe(judged.phrase)}", file=sys.stderr if judged.state != "passed" else sys.stdout,
              flush=True)
    return 1 if failed else 0


def do_matrix(args, lessons: list[Lesson], evidence_dir: Path) -> int:
    """Every selected lesson under each release asked for; a table, then what the records say of [requires]."""
    kill_all_on_signals()
    sweep_orphans()
    started = time.monotonic()
    try:
        releases = resolve_all([args.triton] if args.triton else args.matrix.split(","))
    except ReleaseSpecError as exc:
        raise UsageError(f"{exc}; nothing was run") from None
    except ReleaseEnvError as exc:
        print(f"matrix: {terminal_safe(str(exc))}; nothing was run", file=sys.stderr)
        return 1
    print(f"matrix: {len(lessons)} lesson(s) under the interpreter of Triton {', '.join(releases)}, "
          f"{args.jobs} at a time", flush=True)
    environments, unmade = [], []
    for release in releases:
        try:
            environment = prepare(release, args.cache_dir, report=lambda line: print(line, flush=True))
        except ReleaseEnvError as exc:
            print(f"Triton {release}: not run: {terminal_safe(str(exc))}", file=sys.stderr, flush=True)
            unmade.append(release)
            continue
        v = environment.versions
        print(f"Triton {release}: {'this Python' if environment.site is None else 'its own environment'} "
              f"(torch {v.torch}, numpy {v.numpy}, Python {v.python})", flush=True)
        environments.append(environment)
    todo, skipped = plan_matrix(lessons, environments, evidence_dir, args.force)
    ran = run_matrix(todo, evidence_dir, args.jobs, args.timeout, args.force,
                     wall=lambda lesson: recorded_wall(lesson, ["interpreter"], evidence_dir))
    print()
    for line in summary_lines(ran + skipped, lessons, [e.release for e in environments]):
        print(line)
    for lesson in lessons:
        said = judge_releases(lesson, evidence_dir)
        say(f"refused by --check: {lesson.name}: ", said.refusals)
        say(f"note: {lesson.name}: ", said.notes)
        say("unusable: ", said.problems, err=True)
    errors = [r for r in ran if r.record is None]
    written = sum(r.written for r in ran)
    print(f"matrix: {len(ran)} run(s) in {elapsed(time.monotonic() - started)} ({written} record(s) written, "
          f"{len(ran) - written - len(errors)} unchanged or kept), {len(skipped)} up to date or not supported"
          + (f"; not run: Triton {', '.join(unmade)} (no environment)" if unmade else "")
          + (f"; {len(errors)} could not be recorded" if errors else ""))
    return 1 if unmade or errors else 0


def sanitizer_preflight() -> None:
    """UsageError (exit 2) unless compute-sanitizer is here and says its version."""
    binary = find_tool()
    if binary is None:
        raise UsageError("--mode sanitize: compute-sanitizer not found ($COMPUTE_SANITIZER, PATH, /usr/local/cuda/bin, "
                         "/usr/local/cuda-*/bin); it comes with the CUDA toolkit (or pip install "
                         "nvidia-cuda-sanitizer-api and point COMPUTE_SANITIZER at its bin/compute-sanitizer). "
                         "Nothing was run and nothing was written")
    version, problem = tool_version(binary)
    if problem:
        raise UsageError(f"--mode sanitize: {problem}. Nothing was run and nothing was written")
    print(f"compute-sanitizer {version}: {binary}", flush=True)


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
        refuse_what_the_site_cannot_build(lessons, args.code_dir)
        if args.smoke:
            return smoke_command(lessons, args.jobs, args.timeout)
        if args.triton or args.matrix:
            return do_matrix(args, lessons, evidence_dir)
        return do_run(args, lessons, evidence_dir)
    except BrokenPipeError:
        quiet_broken_pipe()
        return 0
    except PagesCannotBuild as exc:
        for problem in exc.problems:
            print(f"error: {terminal_safe(problem)}", file=sys.stderr)
        print("verify: the site could not build this; nothing was run and nothing was written (fix it, then run "
              "again)", file=sys.stderr)
        return 2
    except (LessonError, EvidenceError, UnsafePathError, UsageError, AwaitingError, ValueError) as exc:
        print(f"error: {terminal_safe(str(exc))}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
