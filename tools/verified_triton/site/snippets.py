"""Named regions of lesson sources: `# snippet: NAME` ... `# end snippet`.

One job: find the regions in a file and hand back their exact text, dedented,
with the line numbers they came from. Every malformed input is a SnippetError
that names FILE:LINE and what is wrong; nothing is skipped silently.

The markers' grammar is the kit's (code/lessonkit.py, `snippet_regions`): the
lessons' own reading of their regions (sanitizer_known) and the site's are one
function, so the two cannot drift apart. This module adds what the site needs
on top: each region's text, and the refusal of invisible format characters.

Command line:
    .venv/bin/python tools/snippets.py list FILE...     one line per region: FILE NAME START-END
    .venv/bin/python tools/snippets.py show FILE NAME   the region's text
Exit 0 on success, 2 on bad input (the error goes to stderr).
"""

from __future__ import annotations

import functools
import sys
import textwrap
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from verified_triton.core.kit import kit
from verified_triton.core.limits import LIMITS
from verified_triton.core.safefs import UnsafePathError, read_text

START, END = kit.SNIPPET_START, kit.SNIPPET_END  # a marker line (the notebook leaves them out of its cells)
MARKER_LIKE = kit.SNIPPET_LIKE  # a line that looks like a marker: one or an error


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


@functools.lru_cache(maxsize=4096)  # every file of a course of hundreds of lessons, its pages' and notebooks' asks
def _parsed(text: str, path: str) -> tuple[tuple[str, Region], ...]:
    """The regions of one text, parsed once: a page cuts several regions from a file, and verify's check
    of the pages (preflight.py) and the site build ask for the same files again (a Region is frozen)."""
    lines = kit.source_lines(text)
    for number, line in enumerate(lines, start=1):
        if not line.isascii():  # no ASCII character is a format character
            _refuse_invisible(line, path, number)
    try:
        spans = kit.snippet_regions(text, path)
    except kit.FormatError as exc:
        raise SnippetError(path, exc.line, exc.message) from None
    return tuple((name, Region(path=path, name=name, start=first, end=last, text=_dedent(lines[first - 1:last])))
                 for name, (first, last) in spans.items())


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
