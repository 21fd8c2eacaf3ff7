"""What changed between two builds of one `mkdocs serve` process, so a rebuild does only that.

One job: remember, across rebuilds, a fingerprint of each lesson's inputs
(its source hash, its evidence files, its page) and the expensive things made
from them (archives, notebooks). MkDocs loads the hook module afresh for every
rebuild; this module is imported once, so what it holds survives.

With `mkdocs serve --dirty` (tools/dev.sh serve), MkDocs re-renders only the
pages whose files are newer than their output. The hook writes generated files
into a cache folder only when their content changed, and marks the output of a
lesson page (and of the site-wide pages) out of date when the lesson's
fingerprint changed, so an edit to a lesson shows in seconds whatever the
size of the course. A change to the course's shape (a lesson's title, summary,
order or part, a lesson added or removed) shows in every page's navigation:
every page is rendered again.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from verified_triton.core.safefs import same_bytes, write_bytes

_fingerprints: dict[str, tuple] = {}
_course: tuple | None = None
_memo: dict[tuple, object] = {}


def fingerprint(lesson, evidence_dir: Path, docs_dir: Path) -> tuple:
    evidence = []
    folder = evidence_dir / lesson.name
    if folder.is_dir():
        for entry in sorted(os.scandir(folder), key=lambda e: e.name):
            info = entry.stat(follow_symlinks=False)
            evidence.append((entry.name, info.st_mtime_ns, info.st_size))
    try:
        page = os.stat(docs_dir / lesson.page).st_mtime_ns
    except OSError:
        page = 0
    return (lesson.source_hash(), tuple(evidence), page, placement(lesson))


def placement(lesson) -> tuple:
    """What lesson.toml says about the lesson's place on the site: the navigation, the home page's
    course path, the archive's README and the notebook show it, but the source hash leaves it out."""
    return (lesson.title, lesson.summary, lesson.order, lesson.part, lesson.after, lesson.prerequisites)


def changed(lessons, evidence_dir: Path, docs_dir: Path) -> tuple[set[str], dict[str, tuple]]:
    """The lessons whose inputs differ from the previous build's (all of them the first time),
    and every lesson's fingerprint now."""
    now = {lesson.name: fingerprint(lesson, evidence_dir, docs_dir) for lesson in lessons}
    different = {name for name, fp in now.items() if _fingerprints.get(name) != fp}
    _fingerprints.clear()
    _fingerprints.update(now)
    return different, now


def course_changed(lessons) -> bool:
    """Whether the course's shape differs from the previous build's (True the first time).
    None (the course could not be read) changes nothing: the next good build compares with the last."""
    global _course
    if lessons is None:
        return False
    shape = tuple((lesson.name, lesson.page, placement(lesson)) for lesson in lessons)
    different, _course = shape != _course, shape
    return different


def memo(key: tuple, make):
    """make() once per key, for the life of the process (keys carry a fingerprint)."""
    if key not in _memo:
        if len(_memo) > 4096:
            _memo.clear()
        _memo[key] = make()
    return _memo[key]


def write_if_changed(path: Path, data: bytes, root: Path) -> None:
    """Write only when the content differs, so an unchanged file keeps its time and is not rebuilt.

    Through the safe-file layer: a link planted in the cache is replaced or refused, never followed, and
    nothing is written outside `root` (the project).
    """
    if not same_bytes(path, data, root):
        write_bytes(path, data, root)


def mark_stale(dest: str | None) -> None:
    """Make a page's output older than any source, so a dirty build renders it again (a link is left alone)."""
    if dest and os.path.lexists(dest) and stat.S_ISREG(os.lstat(dest).st_mode):
        os.utime(dest, (0, 0), follow_symlinks=False)
