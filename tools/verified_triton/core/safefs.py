"""Reading files that come from code/, evidence/ or a bundle without trusting them, and writing generated files.

One job: hand back the bytes of a plain file inside a known folder, bounded,
and write a generated file (a cache entry, an archive, a notebook) inside a
known folder. A symbolic link (anywhere on the way), a hard link (a second
name for a file that may live outside the repository), a FIFO, a socket or a
device is refused with an error naming the path, so nothing outside the
repository is ever read into the site or the evidence, nothing is ever
written outside the folder it belongs in, and nothing can hang a read. Sizes
are checked while reading: a file that grows past its limit stops the read.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path

from verified_triton.core.numfmt import exact


class UnsafePathError(Exception):
    """A path that is not a plain file (or folder) inside its root, or is too large."""

    def __init__(self, path: Path | str, reason: str):
        self.path, self.reason = str(path), reason
        super().__init__(f"{path}: {reason}")


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISDIR, "a folder")):
        if test(mode):
            return name
    return "not a regular file"


def _folders_below(root_s: str, folder_s: str) -> list[str]:
    """Each folder from the one below `root_s` down to `folder_s` (absolute paths, `folder_s` inside)."""
    folders, here = [], root_s
    for part in filter(None, folder_s[len(root_s):].split(os.sep)):
        here = os.path.join(here, part)
        folders.append(here)
    return folders


def check_inside(path: Path, root: Path) -> None:
    """Refuse `path` unless every step from `root` down to it is a plain folder (no link)."""
    root_s = os.path.abspath(root)
    path_s = os.path.abspath(path)
    if not path_s.startswith(root_s.rstrip(os.sep) + os.sep):
        raise UnsafePathError(path, f"outside {root_s}")
    for here in _folders_below(root_s, os.path.dirname(path_s)):
        try:
            mode = os.lstat(here).st_mode
        except FileNotFoundError:
            raise UnsafePathError(path, "not found") from None
        if not stat.S_ISDIR(mode):
            raise UnsafePathError(here, f"{_kind(mode)} on the way to {Path(path_s).name}; links are never followed")


def read_bytes(path: Path, limit: int, root: Path | None = None) -> bytes:
    """The bytes of a plain file (one name, no link), at most `limit` of them."""
    if root is not None:
        check_inside(path, root)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise UnsafePathError(path, "not found") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafePathError(path, "a symbolic link; links are never followed") from None
        raise UnsafePathError(path, f"cannot be read ({exc.strerror})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafePathError(path, f"{_kind(info.st_mode)}, not a plain file")
        if info.st_nlink > 1:
            raise UnsafePathError(path, f"a hard link ({info.st_nlink} names for one file); refused, since "
                                        "its other name may lie outside the repository")
        if info.st_size > limit:
            raise UnsafePathError(path, f"{exact(info.st_size)} bytes, over the limit of {exact(limit)}")
        chunks, size = [], 0
        while True:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise UnsafePathError(path, f"grew past the limit of {exact(limit)} bytes while being read")
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_text(path: Path, limit: int, root: Path | None = None) -> str:
    """UTF-8 text of a plain file; UnsafePathError also for bytes that are not UTF-8."""
    data = read_bytes(path, limit, root)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UnsafePathError(path, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def make_dirs(folder: Path, root: Path) -> None:
    """Make `folder` and its parents up to `root`, each a plain folder: a link or a file on the way is an error."""
    root_s, folder_s = os.path.abspath(root), os.path.abspath(folder)
    if folder_s != root_s and not folder_s.startswith(root_s.rstrip(os.sep) + os.sep):
        raise UnsafePathError(folder, f"outside {root_s}")
    for here in [root_s, *_folders_below(root_s, folder_s)]:
        try:
            mode = os.lstat(here).st_mode
        except FileNotFoundError:
            os.makedirs(here) if here == root_s else os.mkdir(here)  # the root is the caller's to choose
            continue
        if not stat.S_ISDIR(mode):
            raise UnsafePathError(here, f"{_kind(mode)} where a folder belongs; links are never followed")


def write_bytes(path: Path, data: bytes, root: Path) -> None:
    """Write a generated file inside `root`, atomically: its folders are made as plain folders (a link on the
    way is an error), and the file is a new plain file that replaces whatever stood at `path` (a link there is
    replaced, never followed). Nothing outside `root` is read, written or touched."""
    path = Path(path)
    make_dirs(path.parent, root)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")  # O_EXCL: a new file
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)  # rename replaces a link at `path` itself, never its target
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise


def same_bytes(path: Path, data: bytes, root: Path) -> bool:
    """True when `path` is a plain file inside `root` holding exactly `data` (read through no link)."""
    try:
        return read_bytes(path, len(data), root) == data
    except UnsafePathError:
        return False


def walk_files(root: Path, skip=lambda name: False) -> list[Path]:
    """Every plain file under `root`, sorted; any link or special file is an error naming it.

    `skip(name)` leaves out a file or folder by name (scratch folders, caches);
    what it leaves out is not looked into at all.
    """
    root = Path(root)
    try:
        mode = os.lstat(root).st_mode
    except FileNotFoundError:
        return []
    if not stat.S_ISDIR(mode):
        raise UnsafePathError(root, f"{_kind(mode)}, expected a folder")
    found: list[Path] = []
    todo = [root]
    while todo:
        folder = todo.pop()
        with os.scandir(folder) as entries:
            for entry in entries:
                if skip(entry.name):
                    continue
                info = entry.stat(follow_symlinks=False)
                path = Path(entry.path)
                if stat.S_ISDIR(info.st_mode):
                    todo.append(path)
                elif stat.S_ISREG(info.st_mode):
                    if info.st_nlink > 1:
                        raise UnsafePathError(path, f"a hard link ({info.st_nlink} names for one file); refused")
                    found.append(path)
                else:
                    raise UnsafePathError(path, f"{_kind(info.st_mode)}; only plain files are published")
    return sorted(found)
