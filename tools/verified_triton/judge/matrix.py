"""Judge a lesson's release records: which Triton releases it was checked under, and its claimed range.

One job: from a lesson and its release records (judge/releases.py), decide for the current source
which releases it passes, declines by design or fails under, the lowest release from which every
newer one in the matrix passes, and whether lesson.toml's `[requires] triton` states that range.
The badge never depends on it (the pinned versions define the badge); the one rule with teeth is
that `verify.py --check` refuses a lesson that fails under a release its `[requires] triton` claims.

Below its `[requires] triton` the kit would stop a lesson before it runs (exit 2); the matrix runs it
there with that check lifted (record/matrix.py), so a failure there is what the claim says and a
pass there says the claim could be lower. Both are information.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from verified_triton.core import kit
from verified_triton.core.lessons import Lesson
from verified_triton.judge.releases import ReleaseRecord, lesson_releases, minor, release_path, release_tuple

PASSED, DECLINED, FAILED = "passed", "declined", "failed"


@dataclass(frozen=True)
class ReleaseResult:
    record: ReleaseRecord
    state: str  # PASSED, DECLINED (stopped by design: the interpreter cannot run its kernels) or FAILED
    below_requires: bool  # the release is below [requires] triton: run with the kit's version check lifted

    @property
    def release(self) -> str:
        return self.record.release

    @property
    def minor(self) -> str:
        return minor(self.record.release)

    @property
    def ok(self) -> bool:
        return self.state != FAILED


@dataclass
class ReleaseMatrix:
    lesson: str
    claimed: str  # lesson.toml's [requires] triton, '' when it states none
    why: str  # lesson.toml's [requires] why
    results: list[ReleaseResult] = field(default_factory=list)  # current: the newest patch of each minor, in order
    stale: list[ReleaseRecord] = field(default_factory=list)  # recorded for an older source
    problems: list[str] = field(default_factory=list)  # release records that could not be used, with why
    lowest: str = ""  # the lowest release from which every newer one in the matrix passes ('' when none does)
    refusals: list[str] = field(default_factory=list)  # failures inside the claimed range: --check refuses them
    notes: list[str] = field(default_factory=list)  # where the claim and the matrix differ otherwise

    @property
    def failing(self) -> list[ReleaseResult]:
        return [r for r in self.results if not r.ok]

    def in_claimed_range(self, release: str) -> bool:
        return not self.claimed or release_tuple(release) >= _padded(self.claimed)


def _padded(version: str) -> tuple[int, ...]:
    parts = release_tuple(version)
    return parts + (0,) * (3 - len(parts))


def judge_releases(lesson: Lesson, evidence_dir: Path) -> ReleaseMatrix:
    records, problems = lesson_releases(evidence_dir, lesson.name)
    return judge_release_records(lesson, records, problems, evidence_dir)


def judge_release_records(lesson: Lesson, records: list[ReleaseRecord], problems: list[str] | None = None,
                          evidence_dir: Path | None = None) -> ReleaseMatrix:
    need = lesson.requires
    matrix = ReleaseMatrix(lesson.name, need.triton, need.why, problems=list(problems or []))
    source_hash = lesson.source_hash()
    newest: dict[str, ReleaseRecord] = {}
    for record in records:
        found = contradictions(lesson, record)
        if found:
            where = (release_path(evidence_dir, lesson.name, record.release) if evidence_dir is not None
                     else f"{lesson.name}/releases/triton-{record.release}.json")
            matrix.problems.append(f"{where}: {'; '.join(found)}; re-record it")
            continue
        if record.source_hash != source_hash:
            matrix.stale.append(record)
            continue
        key = minor(record.release)
        if key not in newest or release_tuple(record.release) > release_tuple(newest[key].release):
            newest[key] = record
    for record in sorted(newest.values(), key=lambda r: release_tuple(r.release)):
        below = bool(need.triton) and not matrix.in_claimed_range(record.release)
        matrix.results.append(ReleaseResult(record, _state(record), below))
    matrix.lowest = lowest_passing(matrix.results)
    matrix.refusals = _refusals(lesson, matrix)
    matrix.notes = _notes(lesson, matrix)
    return matrix


def contradictions(lesson: Lesson, record: ReleaseRecord) -> list[str]:
    """What the lesson's own declarations say a record cannot hold (none: usable)."""
    if record.outcome != "by-design":
        return []
    expected = lesson.modes["interpreter"].expected_exits
    if record.exit_code in expected:
        return [] if record.reason == expected[record.exit_code] else [
            f"reason: exit {record.exit_code} is expected by design as {expected[record.exit_code][:80]!r}, "
            f"not {record.reason[:80]!r}"]
    if record.exit_code != kit.EXIT_BY_DESIGN:
        return [f"exit_code: stopped by design, but exit code {record.exit_code} is neither {kit.EXIT_BY_DESIGN} "
                "(the kit declined by design) nor an exit lesson.toml expects"]
    return []


def _state(record: ReleaseRecord) -> str:
    if record.failed:
        return FAILED
    return PASSED if record.outcome == "passed" else DECLINED


def lowest_passing(results: list[ReleaseResult]) -> str:
    """The lowest release from which every newer result passes ('' when the newest fails, or none passed).

    A decline by design counts as no failure, but proves nothing either: a Gluon lesson that declines under
    every release (the interpreter cannot run its kernels) says nothing about the Triton it needs, and a
    decline below the lowest pass does not lower it.
    """
    suffix: list[ReleaseResult] = []
    for result in reversed(results):
        if not result.ok:
            break
        suffix.insert(0, result)
    while suffix and suffix[0].state != PASSED:
        suffix.pop(0)
    return suffix[0].release if suffix else ""


def check_command(lesson: str, release: str) -> str:
    return f".venv/bin/python tools/verify.py --lesson {lesson} --triton {release} --force"


def _refusals(lesson: Lesson, m: ReleaseMatrix) -> list[str]:
    """Every release inside the claimed range that the lesson fails under, named with the command that shows it."""
    claim = (f"[requires] triton = \"{m.claimed}\" claims Triton {m.claimed} and newer" if m.claimed
             else "lesson.toml states no [requires] triton, so it claims every Triton release")
    out = []
    for r in m.results:
        if r.ok or r.below_requires:
            continue
        says = (f"the lowest release it passes on is {m.lowest}" if m.lowest
                else "it passes from no release of the matrix on")
        out.append(f"{claim}, but it {r.record.outcome} under the interpreter of Triton {r.release} "
                   f"({r.record.reason or 'no reason'}); "
                   f"{says}. See it: {check_command(lesson.name, r.release)}. lesson.toml's [requires] is part of "
                   "the source hash: changing it means re-recording the lesson")
    return out


def _against_claim(release: str, claimed: str) -> int:
    """-1, 0 or 1: `release` below, within or above the claim, at the claim's precision ('3.5' covers 3.5.1)."""
    claim = release_tuple(claimed)
    have = release_tuple(release)[:len(claim)]
    return (have > claim) - (have < claim)


def _notes(lesson: Lesson, m: ReleaseMatrix) -> list[str]:
    """Where the claim and the matrix differ without a failure inside the claim, and stale records."""
    notes = []
    if m.results and not m.refusals:
        stated = f"[requires] triton = \"{m.claimed}\"" if m.claimed else "no [requires] triton"
        says = f"the matrix says [requires] triton = \"{minor(m.lowest)}\"" if m.lowest else ""
        first = m.results[0].release
        if not m.lowest:
            if any(not r.ok for r in m.results):  # every failure lies below the claim, even the newest release's
                notes.append(f"it states {stated}, above every release the matrix checked, and fails under the "
                             f"newest one ({m.results[-1].release})")
        elif m.claimed and _against_claim(m.lowest, m.claimed) < 0:
            lifted = ", ".join(r.release for r in m.results if r.below_requires and r.state == PASSED)
            notes.append(f"it states {stated}, but its interpreter run passes under Triton {lifted} too (the kit's "
                         f"version check lifted; its GPU steps are not checked there): {says}")
        elif not m.claimed or _against_claim(m.lowest, m.claimed) > 0:
            unchecked = (f"nothing below {first} is checked" if m.lowest == first
                         else f"no release between {m.claimed or 'the first'} and {m.lowest} is checked")
            notes.append(f"it states {stated}; it passes under Triton {m.lowest} and every newer release of the "
                         f"matrix, and {unchecked}: {says}")
    if m.stale:
        releases = ", ".join(sorted((r.release for r in m.stale), key=release_tuple))
        notes.append(f"the release records for Triton {releases} are for an older source: "
                     f".venv/bin/python tools/verify.py --lesson {lesson.name} --matrix repeats them")
    return notes
