"""Named regions of lesson sources: `# snippet: NAME` ... `# end snippet`.

One job: find the regions in a file and hand back their exact text, dedented,
with the line numbers they came from. Every malformed input is a SnippetError
that names FILE:LINE and what is wrong; nothing is skipped silently.

Command line:
    .venv/bin/python tools/snippets.py list FILE...     one line per region: FILE NAME START-END
    .venv/bin/python tools/snippets.py show FILE NAME   the region's text
Exit 0 on success, 2 on bad input (the error goes to stderr).
"""

from __future__ import annotations

import functools
import re
import sys
import textwrap
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from verified_triton.core.limits import LIMITS
from verified_triton.core.safefs import UnsafePathError, read_text

START = re.compile(r"^\s*#\s*snippet:\s*(?P<name>\S*)\s*$")
END = re.compile(r"^\s*#\s*end snippet\s*$")
# Anything that looks like an attempt at a marker, so a typo is an error and
# not a region that silently never starts.
MARKER_LIKE = re.compile(r"^\s*#\s*(end[\s_-]*snippet|snippet\s*:)", re.IGNORECASE)
VALID_NAME = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


class SnippetError(Exception):
    """A malformed region or a request for one that does not exist."""

    def __init__(self, path: str | Path, line: int | None, message: str):
        self.path = str(path)
        self.line = line
        self.message = message
        where = f"{self.path}:{line}" if line else self.path
        super().__init__(f"{where}: {message}")


@dataclass(frozen=True)
class Region:
    path: str
    name: str
    start: int  # first line of the region's text, 1-based (blank lines after the marker left out)
    end: int  # last line of the region's text, 1-based (blank lines before the end marker left out;
    #           start - 1 when empty)
    text: str  # dedented, newline-terminated lines, from start to end


def parse_regions(text: str, path: str | Path = "<string>") -> dict[str, Region]:
    """Return every region in `text`, keyed by name, in source order."""
    return dict(_parsed(text, str(path)))


@functools.lru_cache(maxsize=256)
def _parsed(text: str, path: str) -> tuple[tuple[str, Region], ...]:
    """The regions of one text, parsed once: a page cuts several regions from a file, and verify's check
    of the pages (preflight.py) and the site build ask for the same files again (a Region is frozen)."""
    # Lines end at \n, \r\n or \r, as Python counts them. Not str.splitlines(), which
    # also breaks at form feeds and U+2028 and would shift every later line number.
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if lines[-1] == "":
        lines.pop()  # the empty piece after the final newline is not a line
    regions: dict[str, Region] = {}
    markers: dict[str, int] = {}  # the line of each region's `# snippet:` marker
    open_name: str | None = None
    open_line = 0
    for number, line in enumerate(lines, start=1):
        _refuse_invisible(line, path, number)
        start = START.match(line)
        if start:
            name = start.group("name")
            if open_name is not None:
                raise SnippetError(
                    path, number,
                    f"region '{name}' starts inside region '{open_name}' "
                    f"(opened at line {open_line}); regions do not nest")
            if not VALID_NAME.match(name):
                raise SnippetError(
                    path, number,
                    f"invalid region name {name!r}: use lower-case letters, "
                    f"digits and '-'")
            if name in regions:
                raise SnippetError(
                    path, number,
                    f"duplicate region '{name}' (first defined at line "
                    f"{markers[name]})")
            open_name, open_line = name, number
        elif END.match(line):
            if open_name is None:
                raise SnippetError(path, number, "'# end snippet' without a matching '# snippet: NAME'")
            first, last = _text_lines(lines, open_line + 1, number - 1)
            regions[open_name] = Region(
                path=str(path), name=open_name, start=first,
                end=last, text=_dedent(lines[first - 1:last]))
            markers[open_name] = open_line
            open_name = None
        elif MARKER_LIKE.match(line):
            raise SnippetError(
                path, number,
                f"malformed snippet marker {line.strip()!r}: expected "
                f"'# snippet: NAME' or '# end snippet'")
    if open_name is not None:
        raise SnippetError(path, open_line, f"region '{open_name}' is never closed with '# end snippet'")
    return tuple(regions.items())


def _text_lines(lines: list[str], first: int, last: int) -> tuple[int, int]:
    """The region's lines first..last (1-based) without the blank lines at either end: the page shows
    neither (the highlighter drops them), so neither the caption's range nor the line numbers count
    them. (first, first - 1) when every line is blank."""
    while first <= last and not lines[first - 1].strip():
        first += 1
    while last >= first and not lines[last - 1].strip():
        last -= 1
    return first, last


def _refuse_invisible(line: str, path: str | Path, number: int) -> None:
    """Format characters (Unicode Cf: bidirectional controls, zero-width marks) can make code
    display in another order than it runs (Trojan Source, CVE-2021-42574): refuse them."""
    for column, char in enumerate(line, start=1):
        if unicodedata.category(char) == "Cf" and not (number == 1 and column == 1 and char == "\ufeff"):
            name = unicodedata.name(char, "unnamed")
            raise SnippetError(path, number, f"invisible format character U+{ord(char):04X} ({name}) at column "
                                             f"{column}: it can make code display in another order than it "
                                             "runs; remove it")


def _dedent(lines: list[str]) -> str:
    if not lines:
        return ""
    return textwrap.dedent("\n".join(lines) + "\n")


def read_regions(path: str | Path, root: Path | None = None) -> dict[str, Region]:
    """Parse the regions of a plain file on disk (inside `root` when given: no links, bounded)."""
    path = Path(path)
    try:
        text = read_text(path, LIMITS.source_file, root)
    except UnsafePathError as exc:
        raise SnippetError(path, None, exc.reason) from None
    return parse_regions(text, path)


def extract(path: str | Path, name: str, root: Path | None = None) -> Region:
    """Return one region of a file, or raise SnippetError naming what exists."""
    regions = read_regions(path, root)
    if name not in regions:
        known = ", ".join(regions) or "none"
        raise SnippetError(path, None, f"no region named '{name}' (regions in this file: {known})")
    return regions[name]


def main(argv: list[str]) -> int:
    usage = "usage: snippets.py list FILE... | snippets.py show FILE NAME"
    try:
        if len(argv) >= 2 and argv[0] == "list":
            for file in argv[1:]:
                for region in read_regions(file).values():
                    print(f"{file} {region.name} {region.start}-{region.end}")
            return 0
        if len(argv) == 3 and argv[0] == "show":
            sys.stdout.write(extract(argv[1], argv[2]).text)
            return 0
    except SnippetError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(usage, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
