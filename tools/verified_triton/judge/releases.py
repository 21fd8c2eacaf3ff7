"""The release record: how one lesson fared under the interpreter of one other Triton release.

One job: define the small record `verify.py --triton X.Y.Z` and `--matrix` write, write it atomically,
and read it back through the schema and its value rules. It sits beside the lesson's other evidence:

    evidence/<lesson>/releases/triton-<X.Y.Z>.json

and is tied to the source hash like every record, but it never touches the badge: the badge is defined
by the pinned versions (evidence.py's records). A release record is information, which
judge/matrix.py turns into the lesson's range of Triton releases.

Nothing in a release record is believed about itself: its release must be the Triton its environment
imported, its outcome must agree with its exit code and its counts, and its file name must be its
lesson's and its release's.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from verified_triton.core import kit, schema
from verified_triton.core.limits import LIMITS
from verified_triton.core.numfmt import number
from verified_triton.core.safefs import UnsafePathError, walk_files
from verified_triton.judge.evidence import (
    OUTCOMES,
    STAMP_RULE,
    EvidenceError,
    atomic_write_text,
    check_plain_path,
    json_object,
    load_checked,
    read_each,
    read_json,
)

RELEASE_FORMAT = 1
FOLDER = "releases"
# X.Y.Z in ASCII digits, no leading zeros, nothing after it: a release on the package registry.
RELEASE = re.compile(r"\A(?:0|[1-9][0-9]{0,2})\.(?:0|[1-9][0-9]{0,2})\.(?:0|[1-9][0-9]{0,2})\Z")
FILE_NAME = re.compile(r"\Atriton-(?P<release>[0-9.]{5,11})\.json\Z")
MAX_WALL_S = 4 * 3600.0  # a lesson's timeout is at most an hour


@dataclass
class ReleaseEnv:
    """The versions the run's environment really had (the kit's report, else the environment's probe)."""

    python: str
    torch: str
    triton: str
    numpy: str = ""


@dataclass
class ReleaseRecord:
    lesson: str
    release: str  # X.Y.Z: the Triton release the interpreter ran
    outcome: str  # one of evidence.OUTCOMES
    exit_code: int | None  # None: killed at the time limit
    reason: str  # why it failed, timed out or declined, in words ('' when it passed)
    checks_passed: int
    checks_failed: int
    checks_skipped: int
    wall_s: float
    source_hash: str
    started_utc: str
    command: str
    env: ReleaseEnv
    format_version: int = RELEASE_FORMAT

    @property
    def date(self) -> str:
        return self.started_utc[:10]

    @property
    def failed(self) -> bool:
        return self.outcome in ("failed", "timeout", "crashed")

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, ensure_ascii=False, allow_nan=False) + "\n"

    def same_result(self, other: ReleaseRecord) -> bool:
        """Whether `other` says the same as this record (its date, command and time aside)."""
        keep = ("lesson", "release", "outcome", "exit_code", "reason", "checks_passed", "checks_failed",
                "checks_skipped", "source_hash", "env")
        return all(getattr(self, name) == getattr(other, name) for name in keep)


def release_tuple(release: str) -> tuple[int, ...]:
    return kit.version_tuple(release)


def minor(release: str) -> str:
    """'3.5.1' -> '3.5'."""
    return ".".join(release.split(".")[:2])


# -- reading -------------------------------------------------------------------

def release_from_json(raw, where: str) -> ReleaseRecord:
    """A ReleaseRecord from parsed JSON: the schema, then the value rules; EvidenceError naming `where`."""
    version = json_object(raw, where).get("format_version")
    if version != RELEASE_FORMAT or isinstance(version, bool):
        raise EvidenceError(f"{where}: format_version {str(version)[:20]!r}, not the release record format "
                            f"{RELEASE_FORMAT} this checkout reads; re-record it")
    return load_checked(ReleaseRecord, raw, where, _value_rules)


def read_release(path: Path, root: Path | None = None) -> ReleaseRecord:
    """One release record from disk, bounded and through no link, or EvidenceError."""
    return release_from_json(read_json(path, LIMITS.release_json, root), str(path))


def _value_rules(r: ReleaseRecord) -> None:
    req = schema.require
    req(schema.LESSON_NAME.match(r.lesson) is not None, "lesson", f"{r.lesson[:60]!r} is not a lesson name")
    req(RELEASE.match(r.release) is not None, "release", f"{r.release[:30]!r} is not a release like 3.5.1")
    req(r.outcome in OUTCOMES, "outcome", f"{r.outcome[:30]!r} is not one of {', '.join(OUTCOMES)}")
    for name in ("python", "torch", "triton", "numpy"):
        value = getattr(r.env, name)
        req(len(value) <= LIMITS.environment and (not value or schema.PACKAGE.match(value) is not None),
            f"env.{name}", "expected a version ([A-Za-z0-9._+-], at most "
                           f"{LIMITS.environment} characters)")
    req(r.env.triton == r.release, "env.triton", f"{r.env.triton[:40]!r}, but the record is for Triton "
        f"{r.release}: a run counts for the release its environment imported, nothing else")
    req(schema.utc_stamp(r.started_utc) is not None, "started_utc", STAMP_RULE)
    req(schema.SHA256.match(r.source_hash) is not None, "source_hash", "expected 64 hex digits")
    req(0 <= r.wall_s <= MAX_WALL_S, "wall_s", f"expected 0 to {MAX_WALL_S:.0f} seconds")
    for name in ("checks_passed", "checks_failed", "checks_skipped"):
        req(0 <= getattr(r, name) <= LIMITS.checks, name, f"expected 0 to {LIMITS.checks} checks")
    for name in ("reason", "command"):
        req(getattr(r, name).isprintable(), name, "printable text on one line")
    code, outcome = r.exit_code, r.outcome
    if outcome == "timeout":
        req(code is None, "exit_code", "a run that timed out has no exit code")
        return
    req(code is not None, "exit_code", f"missing, but only a run that timed out has none (outcome {outcome!r})")
    if outcome == "passed":
        req(code == kit.EXIT_PASSED, "exit_code", f"a passing run exits {kit.EXIT_PASSED}; this one has {code}")
        req(r.checks_failed == 0, "checks_failed", "a failed check in a record whose outcome is 'passed'")
    elif outcome == "crashed":
        req(code < 0, "exit_code", "a crash is a kill by a signal (a negative exit code)")
    elif outcome == "by-design":
        req(bool(r.reason), "reason", "a run stopped by design says why")
        req(r.checks_failed == 0, "checks_failed", "declining never hides a failed check")


# -- files -----------------------------------------------------------------------

def release_path(evidence_dir: Path, lesson: str, release: str) -> Path:
    return Path(evidence_dir) / lesson / FOLDER / f"triton-{release}.json"


def write_release(evidence_dir: Path, record: ReleaseRecord) -> Path:
    """Write a release record atomically, through no link: the previous one stays whole until it is replaced."""
    path = release_path(evidence_dir, record.lesson, record.release)
    check_plain_path(Path(evidence_dir), path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, record.to_json())
    return path


def lesson_releases(evidence_dir: Path, lesson: str) -> tuple[list[ReleaseRecord], list[str]]:
    """Every readable release record of one lesson, and a message for each file that is not usable."""
    folder = Path(evidence_dir) / lesson / FOLDER
    try:
        files = walk_files(folder, skip=lambda name: name.startswith("."))
    except UnsafePathError as exc:
        return [], [str(exc)]
    if len(files) > LIMITS.releases:
        return [], [f"{folder}: {number(len(files))} files, over the limit of {LIMITS.releases} release records per "
                    "lesson; remove the old ones"]
    named, problems = {}, []
    for path in files:
        match = FILE_NAME.match(path.name) if path.parent == folder else None
        if match is None or not RELEASE.match(match.group("release")):
            problems.append(f"{path}: not a release record (evidence/{lesson}/{FOLDER}/triton-X.Y.Z.json); "
                            "remove it")
        else:
            named[path] = match.group("release")
    records, unusable = read_each(list(named), lambda path: read_release(path, evidence_dir),
                                  lambda record, path: "" if (record.lesson, record.release) == (lesson, named[path])
                                  else f"{record.lesson} under Triton {record.release}")
    return records, problems + unusable
