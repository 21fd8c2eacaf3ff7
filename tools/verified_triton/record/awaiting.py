"""Lessons whose source changed after their last GPU recording, acknowledged until the next one.

One job: read evidence/awaiting-gpu.toml, where an author who fixed a lesson on a
machine without a GPU says so, and tell `verify.py --check` which lessons with GPU
evidence of an older source it may let through. The badge does not change: the page
still says STALE (or PARTIALLY VERIFIED), with the older source's evidence marked
so. The check only stops refusing, and only while

- the entry's `source_hash` is the lesson's source hash now (any further edit of
  the lesson, or of a lesson it uses, undoes the acknowledgement), and
- the interpreter's record is current and usable (the fix ran somewhere), and
- the lesson is STALE or PARTIALLY VERIFIED with a GPU or sanitize record of an
  older source (an entry for a lesson that is current again is a problem: remove
  it, so the file never outlives what it explains). FAILED and UNVERIFIED stay
  problems whatever the file says.

`--check --publish` ignores the file: a release is not made of stale evidence.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from verified_triton.core import schema
from verified_triton.core.limits import LIMITS
from verified_triton.core.safefs import read_text

FILE_NAME = "awaiting-gpu.toml"


class AwaitingError(ValueError):
    """The file is unreadable or does not follow its schema; the message names the file and field."""


@dataclass
class Awaiting:
    lesson: str
    source_hash: str  # the lesson's source hash the acknowledgement is for (verify.py --status --json)
    reason: str  # what changed and why it could not be recorded on a GPU yet


@dataclass
class AwaitingFile:
    awaiting: list[Awaiting] = field(default_factory=list)


def load_awaiting(evidence_dir: Path) -> dict[str, Awaiting]:
    """{lesson: entry} from evidence/awaiting-gpu.toml, or {} when there is none."""
    path = evidence_dir / FILE_NAME
    if not path.is_file() and not path.is_symlink():
        return {}
    try:
        data = schema.load(AwaitingFile, tomllib.loads(read_text(path, LIMITS.source_file, evidence_dir)),
                           FILE_NAME)
    except tomllib.TOMLDecodeError as exc:
        raise AwaitingError(f"{path}: {exc}") from None
    except RecursionError:  # tomllib recurses into nested arrays and tables
        raise AwaitingError(f"{path}: nested too deeply to read (an array or table inside itself thousands of "
                            "times); not an awaiting-gpu.toml") from None
    except schema.SchemaError as exc:
        raise AwaitingError(f"{path}: {exc}") from None
    entries: dict[str, Awaiting] = {}
    for i, entry in enumerate(data.awaiting):
        where = f"{path}: awaiting[{i}]"
        if entry.lesson in entries:
            raise AwaitingError(f"{where}: lesson '{entry.lesson[:64]}' is listed twice")
        if len(entry.source_hash) != 64 or any(c not in "0123456789abcdef" for c in entry.source_hash):
            raise AwaitingError(f"{where}: source_hash must be 64 lower-case hex digits (a SHA-256)")
        if not entry.reason.strip() or len(entry.reason) > 2000:
            raise AwaitingError(f"{where}: reason must say, in at most 2000 characters, why it waits")
        entries[entry.lesson] = entry
    return entries
