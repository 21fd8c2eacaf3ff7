"""What verify prints: statuses, their JSON form, the problems --check finds, run summaries.

One job: words and JSON for people and scripts, from LessonStatus objects that
status.py judged; nothing here decides anything about evidence.
"""

from __future__ import annotations

import os
import sys
from dataclasses import asdict

from verified_triton.core.kit import not_run_here
from verified_triton.core.lessons import MODES, Lesson
from verified_triton.core.terminal import safe as terminal_safe  # the terminal's door, under the name verify uses
from verified_triton.judge.status import FAILED, PARTIAL, STALE, UNVERIFIED, LessonStatus
from verified_triton.record.awaiting import FILE_NAME as AWAITING_FILE
from verified_triton.record.awaiting import Awaiting


def status_json(statuses: list[LessonStatus]) -> list[dict]:
    out = []
    for st in statuses:
        modes = {}
        for mode, state in st.modes.items():
            rec = state.record
            modes[mode] = {
                "state": state.state,
                "outcome": rec.outcome if rec else None,
                "date": rec.started_utc if rec else None,
                "source_hash": rec.source_hash if rec else None,
                "current": bool(rec and st.is_current(rec)),
                "environment": asdict(rec.env) if rec else None,
            }
        out.append({"lesson": st.lesson.name, "title": st.lesson.title, "status": st.status.label,
                    "headline": st.headline, "by_design": st.by_design,
                    "summary": st.summary, "sentence": st.sentence, "source_hash": st.source_hash,
                    "modes": modes, "problems": st.problems, "releases": releases_json(st),
                    "memory_check": ({"state": st.memory.state, "line": st.memory.line, "problems": st.memory.problems,
                                      "not_applicable": st.memory.not_applicable} if st.memory else None),
                    **exercises_json(st)})
    return out


def exercises_json(st: LessonStatus) -> dict:
    """{"exercises": [{name, solution, starter, mistakes: [{name, caught, message}]}], "exercises_state": ...}
    for a lesson that poses exercises (judge/exercises.py); {} for one that does not yet."""
    ex = st.exercises
    if ex is None or ex.state == "not-required":
        return {}
    return {"exercises_state": ex.state, "exercises": ex.json(), "exercises_problems": ex.problems}


def releases_json(st: LessonStatus) -> dict:
    """The matrix for one lesson: each current release's state, what it says of [requires] triton, and why."""
    m = st.releases
    if m is None:
        return {}
    return {"requires": m.claimed, "lowest_passing": m.lowest, "refusals": m.refusals, "notes": m.notes,
            "results": [{"release": r.release, "outcome": r.record.outcome, "state": r.state,
                         "below_requires": r.below_requires, "reason": r.record.reason, "date": r.record.started_utc}
                        for r in m.results],
            "stale": [r.release for r in m.stale], "problems": m.problems}


def print_status(statuses: list[LessonStatus]) -> None:
    for st in statuses:
        print(f"{st.lesson.name:<28} {st.status.label:<19} {terminal_safe(st.summary)}")
        print(f"{'':<28} {'':<19} {terminal_safe(st.sentence)}")


def check_problems(statuses: list[LessonStatus], awaiting: dict[str, Awaiting] | None = None) -> list[str]:
    """Everything that keeps the evidence from being current and usable, one line each.

    A lesson listed in evidence/awaiting-gpu.toml for its source now, whose interpreter record is
    current, may be STALE and keep GPU records of an older source (record/awaiting.py says when);
    its badge does not change.
    """
    awaiting = awaiting or {}
    problems = []
    for st in statuses:
        name = st.lesson.name
        entry = awaiting.get(name)
        why_not = awaiting_refused(st, entry) if entry is not None else ""
        waived = entry is not None and not why_not
        if why_not:
            problems.append(f"{name}: evidence/{AWAITING_FILE}: {why_not}")
        problems += [f"{name}: unusable evidence: {p}" for p in st.problems]
        if st.exercises is not None and st.exercises.state in ("failed", "stale", "none"):
            problems += [f"{name}: exercises {st.exercises.state}: {p}" for p in st.exercises.problems]
        if st.status in (FAILED, STALE, UNVERIFIED) and not (waived and st.status is STALE):
            problems.append(f"{name}: {st.status.label}: {st.sentence}")
        elif not _interpreter_ok(st):
            problems.append(f"{name}: interpreter mode is {st.modes['interpreter'].state}")
        for rec in [*st.stale, *st.stale_sanitize]:
            if waived and rec.mode != "interpreter":
                continue
            changed = changed_files(st.lesson, rec)
            problems.append(f"{name}: evidence/{name}/{rec.key}.json is for another source (changed since: "
                            f"{', '.join(changed) or 'file list'}); re-record it or delete it")
        if st.releases is not None:  # the matrix is information, but not a claim it refutes, nor a broken record
            problems += [f"{name}: unusable release record: {p}" for p in st.releases.problems]
            problems += [f"{name}: {refusal}" for refusal in st.releases.refusals]
    known = {st.lesson.name for st in statuses}
    problems += [f"evidence/{AWAITING_FILE}: '{name[:64]}' is not a lesson here; remove its entry"
                 for name in sorted(awaiting.keys() - known)]
    return problems


def awaiting_refused(st: LessonStatus, entry: Awaiting) -> str:
    """Why evidence/awaiting-gpu.toml's entry cannot excuse this lesson, or "" when it does."""
    if entry.source_hash != st.source_hash:
        return (f"the entry is for source {entry.source_hash[:12]}, the lesson's source is now "
                f"{st.source_hash[:12]}: record it on a GPU, or update the entry if it still waits")
    if st.status not in (STALE, PARTIAL) or not any(r.mode != "interpreter" for r in [*st.stale, *st.stale_sanitize]):
        return f"the lesson is {st.status.label} with no GPU record for an older source: remove its entry"
    if not _interpreter_ok(st) or not any(r.mode == "interpreter" for r in st.current):
        return (f"its interpreter record is not current and passing: record it first "
                f"(python3 tools/verify.py --lesson {st.lesson.name})")
    return ""


def awaiting_notes(statuses: list[LessonStatus], awaiting: dict[str, Awaiting]) -> list[str]:
    """One line for each lesson the file excuses: what waits, and why."""
    return [f"{st.lesson.name}: {st.status.label}, waiting for a GPU run of this source (evidence/{AWAITING_FILE}): "
            f"{awaiting[st.lesson.name].reason}"
            for st in statuses if st.lesson.name in awaiting and not awaiting_refused(st, awaiting[st.lesson.name])]


def release_notes(statuses: list[LessonStatus]) -> list[str]:
    """Where a lesson's [requires] triton and its release records differ without refuting it, one line each."""
    return [f"{st.lesson.name}: {note}" for st in statuses if st.releases is not None for note in st.releases.notes]


def _interpreter_ok(st: LessonStatus) -> bool:
    """Passed, not supported, or stopped by design after real checks that all passed.

    The last is a Gluon lesson's interpreter run: its kernels cannot run there,
    so it checks what a CPU can and then declines; an empty record does not count.
    """
    mode = st.modes["interpreter"]
    if mode.state in ("passed", "not-supported"):
        return True
    checks = mode.record.checks if mode.record is not None else []
    return mode.state == "by-design" and bool(checks) and all(c.status != "fail" for c in checks)


def changed_files(lesson: Lesson, record) -> list[str]:
    now = lesson.source_file_hashes()
    return sorted(k for k in now.keys() | record.source_files.keys() if now.get(k) != record.source_files.get(k))


STDERR_TAIL_LINES = 15
RUN_ORDER = (*MODES, "sanitize")  # the order of a lesson's rows


def print_summary(results) -> None:
    results, folded = _fold_not_run_here(results)
    print("\nlesson                         mode         outcome     time    note")
    for r in sorted(results, key=lambda r: (r.lesson.order, r.lesson.name, RUN_ORDER.index(r.mode))):
        ran = r.record is not None and (not r.skipped or not r.written)  # not written: it ran, the record stayed
        outcome = r.record.outcome if ran else ("error" if r.record is None and "verify" in r.skipped else "-")
        wall = f"{r.record.wall_s:6.1f}s" if ran else "      -"
        note = r.skipped or (r.record.reason or not_run_here(r.record.steps, r.record.skipped_parts)
                             if r.record else "")
        where = f" GPU {r.gpu}" if r.gpu is not None else ""
        print(f"{r.lesson.name:<30} {terminal_safe(r.mode + where):<12} {terminal_safe(outcome):<10} {wall}  "
              f"{terminal_safe(note)}")
    for line in folded:
        print(line)
    print_failure_tails(results)


def _fold_not_run_here(results) -> tuple[list, list[str]]:
    """Rows this machine could not run ("not run: no CUDA device ...") become one line per reason."""
    kept, groups = [], {}
    for r in results:
        if r.record is None and r.skipped.startswith("not run"):
            groups.setdefault((r.mode, r.skipped), []).append(r.lesson.name)
        else:
            kept.append(r)
    lines = []
    for (mode, why), names in groups.items():
        hint = (f" (record it on a GPU machine: python3 tools/verify.py --mode {mode} --bundle {mode}.tar.gz, "
                f"then --import {mode}.tar.gz here)" if mode != "interpreter" else "")
        lines.append(f"{len(names)} lesson{'s' if len(names) > 1 else ''}, {mode} mode: "
                     f"{terminal_safe(why)}{hint}")
    return kept, lines


def print_failure_tails(results) -> None:
    """For each run that failed, the last lines of what the lesson wrote to stderr (the traceback)."""
    for r in results:
        rec = r.record
        if rec is None or r.skipped or not rec.failed:
            continue
        tail = rec.stderr.rstrip().splitlines()[-STDERR_TAIL_LINES:]
        print(f"\n{r.lesson.name} [{r.mode}] {terminal_safe(rec.outcome)}"
              + (f": {terminal_safe(rec.reason)}" if rec.reason else "")
              + ("; the last lines of its stderr:" if tail else "; it wrote nothing to stderr"))
        for line in tail:
            print(f"    {terminal_safe(line)}")


def quiet_broken_pipe() -> None:
    """After a reader such as `head` went away: silence the rest of our output instead of a traceback."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
