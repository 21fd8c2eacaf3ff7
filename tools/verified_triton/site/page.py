"""The page model: a page's Markdown, parsed once, into the parts every reader of a page sees alike.

One job: split a page into its front matter and its parts, in order, each with the page line it starts on.

    Text      a line of prose, passed on as it is
    Fence     fenced code, from its opening line to its closing one: text, never a directive
    Command   a `::NAME ARGS` line outside fenced code, and its body when the directive takes one
    Block     the opening line of one of Material's blocks: an admonition (`!!! kind "Title"`), a fold
              (`??? kind "Title"`, open at first with `???+`) or a tab (`=== "Title"`); the lines indented
              under it are inside it

Every part knows the blocks it lies in (`within`, outermost first): a `::snippet` in a folded solution says so.
The build (directives.expand_page), the check before a run (preflight.py), the notebook (notebook.py) and the
prose lint (author/prose_lint.py) read pages through this module alone; tests/test_page_model.py fails if
another module scans the page format itself.

The rules, once:

- A fence opens with three or more backticks or tildes, at any indent, and closes with a line of the same
  character, at least as long, and nothing else. As pymdownx's superfences reads it (which the site builds
  with), not CommonMark: the opening line's attributes may hold a backtick (a source page's title). A fence
  never closed is a PageFormatError at the line that opened it: the rest of the page would silently be code.
- A directive line is `::NAME ARGS` alone on its line (NAME: lower-case letters and '-'), at any indent.
- A body (of a directive that takes one, of a block) is the lines after it that are blank or indented 4 or more
  columns past it, a tab counting 4; a directive's body leaves its trailing blank lines to the page.
- Front matter (MkDocs's rule): a first line `---`, up to a line `---` or `...`; `lesson: NAME` in it names the
  page's lesson.

Nothing here needs MkDocs, pymdownx or YAML: a GPU machine's stock python3 runs the check before a run.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Collection, Iterator
from dataclasses import dataclass

FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})")
COMMAND = re.compile(r"^(?P<indent>[ \t]*)::(?P<name>[a-z][a-z-]*)(?:[ \t]+(?P<args>.*?))?[ \t]*$")
ADMONITION = re.compile(r'^(?P<indent>[ \t]*)(?P<marker>!!!|\?\?\?\+?)\s+(?P<kind>[\w-]+)?[\w -]*?'
                        r'(?:\s*"(?P<title>[^"]*)")?\s*$')
TAB = re.compile(r'^(?P<indent>[ \t]*)(?P<marker>===\+?)\s+"(?P<title>[^"]*)"\s*$')
FRONT_MATTER_LESSON = re.compile(r"^lesson:[ \t]*['\"]?(?P<name>[^'\"#\s]*)['\"]?[ \t]*(?:#.*)?$")
BODY_INDENT = 4  # columns past its opener that put a line in a body


class PageFormatError(Exception):
    """A page the model cannot read; `line` is the page line at fault."""

    def __init__(self, line: int, message: str):
        self.line, self.message = line, message
        super().__init__(f"{line}: {message}")


def columns(line: str) -> int:
    """How far a line is indented, a tab counting 4 columns."""
    expanded = line.expandtabs(BODY_INDENT)
    return len(expanded) - len(expanded.lstrip())


@dataclass(frozen=True)
class OneLine:
    """A part that is one page line."""

    line: int
    text: str
    within: tuple[Block, ...]

    @property
    def lines(self) -> tuple[str, ...]:
        return (self.text,)


@dataclass(frozen=True)
class Text(OneLine):
    """One line of prose (blank lines included)."""


@dataclass(frozen=True)
class Block(OneLine):
    """The opening line of an admonition, a fold or a tab."""

    indent: str
    marker: str  # "!!!", "???", "???+", "===" or "===+"
    kind: str  # the admonition's kind ("note", "success"); "" for a tab
    title: str | None  # the quoted title, None when the line gives none

    @property
    def folded(self) -> bool:
        """A fold (`???`, `???+`): in a notebook, a <details> block."""
        return self.marker.startswith("???")

    @property
    def tab(self) -> bool:
        return self.marker.startswith("===")


@dataclass(frozen=True)
class Fence:
    """Fenced code, its fences included."""

    line: int
    lines: tuple[str, ...]
    indent: str
    fence: str  # the opening run of backticks or tildes
    within: tuple[Block, ...]

    @property
    def info(self) -> str:
        """What follows the opening fence (a language, attributes)."""
        return self.lines[0].lstrip(" \t")[len(self.fence):].strip()

    @property
    def code(self) -> tuple[str, ...]:
        return self.lines[1:-1]


@dataclass(frozen=True)
class Command:
    """A `::NAME ARGS` line and its body (the lines indented under it, for a directive that takes one)."""

    line: int
    text: str
    indent: str
    name: str
    args: str  # the rest of the line, stripped
    body_lines: tuple[str, ...]  # as the page has them (empty for a directive that takes no body)
    within: tuple[Block, ...]

    @property
    def body(self) -> str:
        """The body as the directive reads it: dedented, without blank lines at either end."""
        return textwrap.dedent("\n".join(self.body_lines)).strip("\n")

    @property
    def lines(self) -> tuple[str, ...]:
        return (self.text, *self.body_lines)


Part = Text | Fence | Command | Block


@dataclass(frozen=True)
class Row:
    """One page line and the part it belongs to."""

    number: int
    text: str
    part: Part

    @property
    def opens(self) -> bool:
        """The part's first line (a directive's own line, not its body's; a fence's opening line)."""
        return self.number == self.part.line


@dataclass(frozen=True)
class PageModel:
    parts: tuple[Part, ...]
    front_matter: tuple[str, ...]  # its lines, the `---` lines included; () without front matter
    first_line: int  # the page line of the first line after the front matter

    @property
    def lesson(self) -> str:
        """The lesson the front matter names ('' when none)."""
        found = (m.group("name") for m in map(FRONT_MATTER_LESSON.match, self.front_matter[1:-1]) if m)
        return next(found, "")

    def rows(self) -> Iterator[Row]:
        """Every line after the front matter, in order, with its part."""
        for part in self.parts:
            for offset, text in enumerate(part.lines):
                yield Row(part.line + offset, text, part)

    def commands(self) -> Iterator[Command]:
        return (p for p in self.parts if isinstance(p, Command))

    @property
    def body(self) -> str:
        """The page without its front matter."""
        return "\n".join(row.text for row in self.rows())


def parse(text: str, bodies: Collection[str] = (), first_line: int = 1, front_matter: bool = True) -> PageModel:
    """The parts of a page. `bodies`: the directives that take the lines indented under them as their body
    (the registry's, site/directives). `first_line`: the page line of text's first line. With `front_matter`,
    a leading front matter block is set apart. PageFormatError names the line of what cannot be read."""
    lines = text.split("\n")
    start = _front_matter_end(lines) if front_matter else 0
    parts: list[Part] = []
    open_blocks: list[Block] = []
    index = start
    while index < len(lines):
        line, number = lines[index], first_line + index
        if line.strip():
            while open_blocks and columns(line) < columns(open_blocks[-1].text) + BODY_INDENT:
                open_blocks.pop()
        within = tuple(open_blocks)
        part, index = _part_at(lines, index, number, within, bodies)
        parts.append(part)
        if isinstance(part, Block):
            open_blocks.append(part)
    return PageModel(tuple(parts), tuple(lines[:start]), first_line + start)


def _part_at(lines: list[str], index: int, number: int, within: tuple[Block, ...],
             bodies: Collection[str]) -> tuple[Part, int]:
    """The part that starts at lines[index], and the index after it."""
    line = lines[index]
    opened = FENCE.match(line)
    if opened:
        end = _fence_end(lines, index, opened.group("fence"), number)
        return Fence(number, tuple(lines[index:end]), opened.group("indent"), opened.group("fence"), within), end
    command = COMMAND.match(line)
    if command:
        end = _body_end(lines, index + 1, line) if command.group("name") in bodies else index + 1
        return Command(number, line, command.group("indent"), command.group("name"),
                       (command.group("args") or "").strip(), tuple(lines[index + 1:end]), within), end
    block = ADMONITION.match(line) or TAB.match(line)
    if block:
        fields = block.groupdict()
        return Block(number, line, within, block.group("indent"), block.group("marker"), fields.get("kind") or "",
                     block.group("title")), index + 1
    return Text(number, line, within), index + 1


def _fence_end(lines: list[str], index: int, fence: str, number: int) -> int:
    """The index after the line that closes the fence opened at lines[index]."""
    for end in range(index + 1, len(lines)):
        closing = FENCE.match(lines[end])
        if closing and closing.group("fence")[0] == fence[0] and len(closing.group("fence")) >= len(fence) \
                and not lines[end].strip()[len(closing.group("fence")):].strip():
            return end + 1
    raise PageFormatError(number, f"the fence {fence} opened here is never closed: add a line {fence} where the "
                                  "code ends (else the rest of the page is code)")


def _body_end(lines: list[str], start: int, opener: str) -> int:
    """The index after the body that starts at lines[start]: blank lines and lines indented BODY_INDENT or more
    columns past the opener; the blank lines at its end are left to the page."""
    need = columns(opener) + BODY_INDENT
    end = last = start
    while end < len(lines):
        if lines[end].strip():
            if columns(lines[end]) < need:
                break
            last = end + 1
        end += 1
    return last


def _front_matter_end(lines: list[str]) -> int:
    """The index of the first line after the front matter (0 when the page has none)."""
    if not lines or lines[0].rstrip() != "---":
        return 0
    for index in range(1, len(lines)):
        if lines[index].rstrip() in ("---", "..."):
            return index + 1
    return 0
