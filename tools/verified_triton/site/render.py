"""Markdown building blocks that make untrusted text safe to show.

One job: text in, Markdown out. Everything that came from a run, a bundle or
an author's declaration goes through `text()`, `code()` or `code_block()`, so
recorded output containing HTML, Markdown, template braces, terminal escapes
or invisible format characters shows as the characters it is, never as
markup. The directives (tools/verified_triton/site/directives/) build pages from these blocks.
"""

from __future__ import annotations

import re
import unicodedata

from verified_triton.core import numfmt
from verified_triton.core.limits import LIMITS
from verified_triton.judge.status import Status

ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
MAX_LINE = 1000  # characters of one output line shown on a page
MAX_LINES = 400  # lines of one stream shown on a page (head and tail)
MAX_TEXT = LIMITS.string  # characters of one inline value (a check message, a table cell, a reason)
SECOND_COPY = 200  # characters of a text shown a second time on one page (a failed check above its fold, alt text)
COLLAPSE_ROWS_OVER = 12  # a longer checks table folds away behind its summary


# -- escaping -------------------------------------------------------------------

def visible(s: str) -> str:
    """Control and invisible format characters as visible marks: a bidirectional override
    (Trojan Source) shows as ⟨U+202E⟩ instead of reordering what follows it."""
    s = CONTROL.sub(_control_picture, s)
    if any(unicodedata.category(c) == "Cf" for c in s):
        s = "".join(f"⟨U+{ord(c):04X}⟩" if unicodedata.category(c) == "Cf" else c for c in s)
    return s


# The characters that can mean something to HTML (& < > " '), to Markdown and its
# extensions here (code, emphasis, links, table cells, attribute lists, emoji
# shortcodes, math, escapes, headings) or to a template engine ({ }). Each becomes a
# numeric character reference; other punctuation (. , ; / ( ) + - % ?) cannot
# start anything on its own and stays as it is, which keeps pages of long
# evidence tables cheap to build.
# '@' and the '.' of "www." too: Jupyter's and GitHub's Markdown make a link of a bare address (GFM
# autolinks), and the directives' text also reaches notebooks.
SPECIAL = frozenset('&<>"\'`*_[]|{}:\\$~^=!#@')
_ESCAPES = {ord(c): f"&#{ord(c)};" for c in SPECIAL | {"\t"}}
WWW = re.compile(r"(?i)(www)\.")


def text(value: object, limit: int = MAX_TEXT) -> str:
    """Inline text that Markdown, HTML and the template engine all leave alone.

    Every character in SPECIAL becomes a numeric character reference, so
    nothing in it can open a tag, a link, emphasis, a table cell, math or an
    emoji shortcode; the browser shows the same characters. Past `limit`
    characters the rest is cut, and the cut is said (a second copy of a text
    on one page, such as an alt text, takes a short limit: no amplification).
    """
    s = _cut(visible(_one_line(value)), limit)
    return WWW.sub(r"\1&#46;", s.translate(_ESCAPES))


def _one_line(value: object) -> str:
    """The text of `value` without terminal colour codes, its line breaks as spaces."""
    return ANSI.sub("", str(value)).replace("\r\n", " ").replace("\n", " ").replace("\r", " ")


def _cut(s: str, limit: int) -> str:
    """`s` up to `limit` characters, the cut said."""
    return s[:limit] + f" [... {len(s) - limit} more characters]" if len(s) > limit else s


# Markdown read outside the site: a notebook's Markdown cells (Jupyter, Colab), an archive's README (GitHub,
# an editor). CommonMark makes any backslash-escaped ASCII punctuation literal, which reads better in a plain
# README than character references; these are the characters that can start something in CommonMark, GFM
# (autolinks, tables, strikethrough) or Jupyter (math), wherever they stand in a line.
MARKDOWN_SPECIAL = frozenset("\\`*_{}[]<>&|~$!:@^")
LINE_START = re.compile(r"\A(?:[#+=>-]|[0-9]+(?=[.)]))")  # a heading, list, quote or setext line at a line start


def markdown_text(value: object, limit: int = MAX_TEXT, line_start: bool = False) -> str:
    """Text that any Markdown reader shows as the characters it is: no HTML, link, image, bare URL or address,
    emphasis, code, math, table cell, heading or list; one line, controls and invisible characters visible,
    bounded. For lesson.toml text and evidence fields in notebooks and archive READMEs; `line_start` where
    the text begins a line (where '# ', '- ' or '1. ' would start a heading or a list)."""
    s = _cut(visible(_one_line(value).replace("\t", " ")).strip(), limit)
    s = "".join(f"\\{c}" if c in MARKDOWN_SPECIAL else c for c in s)
    s = WWW.sub(r"\1\\.", s)
    if not line_start:
        return s
    return LINE_START.sub(lambda m: m.group() + "\\" if m.group()[0].isdigit() else "\\" + m.group(), s)


def snippet_safe(markdown: str) -> str:
    """Markdown from code or evidence with pymdownx.snippets' markers escaped.

    The snippets extension (which appends the glossary's abbreviations to
    every page) reads every line of a page, inside code blocks too: a line
    `--8<-- "file"` pulls a file in, a line `--8<--` starts a list of files,
    and a `--8<-- [start:name]` marker is deleted. Its own escape, a `;`
    before the marker, is removed again when the page is converted, so the
    reader sees the line as it was recorded.
    """
    if "8<-" not in markdown:
        return markdown
    from pymdownx.snippets import SnippetPreprocessor as Snippets

    lines = markdown.split("\n")
    for i, line in enumerate(lines):
        if "8<-" not in line:
            continue
        whole = Snippets.RE_ALL_SNIPPETS.match(line)
        section = None if whole else Snippets.RE_SNIPPET_SECTION.match(line)
        at = whole.end("space") if whole else section.start("escape") if section else -1
        if at >= 0:
            lines[i] = line[:at] + ";" + line[at:]
    return "\n".join(lines)


def code(value: object) -> str:
    """Inline code of `text(value)`: HTML <code>, because a Markdown code span would show the
    character references literally (`&#45;` for '-')."""
    return f"<code>{text(value)}</code>"


def _control_picture(match: re.Match) -> str:
    point = ord(match.group())
    return chr(0x2421) if point == 0x7F else chr(0x2400 + point)


def clean_output(raw: str) -> str:
    """Recorded output as plain text: escapes stripped, controls made visible, size bounded."""
    s = ANSI.sub("", raw.replace("\r\n", "\n"))
    lines = []
    for line in s.split("\n"):
        line = line.rsplit("\r", 1)[-1]  # a progress bar's last state, as a terminal shows it
        line = visible(line.replace("\t", "    "))
        if len(line) > MAX_LINE:
            line = line[:MAX_LINE] + f" [... {len(line) - MAX_LINE} more characters]"
        lines.append(line)
    if len(lines) > MAX_LINES:
        head, tail = lines[: MAX_LINES * 3 // 4], lines[-(MAX_LINES // 4):]
        lines = head + [f"[... {len(lines) - len(head) - len(tail)} lines not shown; "
                        "the evidence file has them ...]"] + tail
    return "\n".join(lines).rstrip("\n")


def code_block(body: str, lang: str = "text", attrs: str = "", indent: str = "") -> str:
    """A fenced block whose fence is longer than any backtick run inside it."""
    body = body.replace("\r\n", "\n").replace("\r", "\n")  # Markdown ends lines at \r too: indent every one
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    fence = "`" * max(3, longest + 1)
    head = f"{fence}{lang}" + (f" {attrs}" if attrs else "")
    lines = [head, *body.split("\n"), fence]
    return "\n".join(indent + line if line else line for line in lines)


def indent_block(markdown: str, indent: str) -> str:
    return "\n".join(indent + line if line else line for line in markdown.split("\n"))


def attr(s: str) -> str:
    """A value for a Markdown attribute in double quotes (a code block's title)."""
    return visible(s).replace("\\", "/").replace('"', "'")


# -- blocks ------------------------------------------------------------------------

def md_table(columns: list[str], rows: list[list[str]], align: list[str] | None = None) -> str:
    align = align or ["---"] * len(columns)
    lines = ["| " + " | ".join(columns) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(cell or " " for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def admonition(kind: str, title: str, body: str, folded: bool | None = None) -> str:
    """!!! kind "title" (or ??? / ???+ when folded is True / False); `title` must already be safe."""
    marker = "!!!" if folded is None else ("???" if folded else "???+")
    return f'{marker} {kind} "{title}"\n\n{indent_block(body, "    ")}'


def unindexed(markdown: str) -> str:
    """Markdown kept out of the search index (Material's search skips data-search-exclude)."""
    return f"<section markdown data-search-exclude>\n\n{markdown}\n\n</section>"


def bounded_rows(columns: list[str], rows: list[list[str]], align: list[str] | None = None,
                 what: str = "rows") -> str:
    """A table whose rows past LIMITS.rows_shown fold away, and past four times that are cut."""
    shown = LIMITS.rows_shown
    if len(rows) <= shown:
        return md_table(columns, rows, align)
    cut = rows[: 4 * shown]
    out = [md_table(columns, cut[:shown], align), "",
           admonition("abstract", f"{len(cut) - shown} more {what}", md_table(columns, cut[shown:], align), True)]
    if len(rows) > len(cut):
        out += ["", f"_{len(rows) - len(cut)} more {what} are in the evidence file and not shown here._"]
    return "\n".join(out)


def badge(status: Status) -> str:
    return f'<span class="vt-badge {status.css}">{status.label}</span>'


# -- numbers -------------------------------------------------------------------------

def number(x: float | int | None) -> str:
    """One rounding rule for measured values: 3 significant digits, thousands separated, bounded width."""
    return numfmt.number(x)


def ratio(x: float) -> str:
    return f"{numfmt.fixed(x)}×"


def interval(low: float, high: float) -> str:
    return f"{numfmt.fixed(low)}–{numfmt.fixed(high)}"
