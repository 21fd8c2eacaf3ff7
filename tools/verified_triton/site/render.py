"""Markdown building blocks for the site's pages: tables, admonitions, folds, badges and numbers.

One job: compose safe Markdown. Every value arrives escaped through the door
(tools/verified_triton/site/door.py): the blocks here are Md templates, so a
plain str handed to one (a cell, a title) is escaped by `door.text()` on the
way in, and what comes out is Md, which the directives return. The door's
escapers are named here too, for the directives that use both.
"""

from __future__ import annotations

from verified_triton.core import numfmt
from verified_triton.core.limits import LIMITS
from verified_triton.judge.status import Status
from verified_triton.site.door import (  # noqa: F401 - the door's escapers, where the blocks are
    ANSI,
    CONTROL,
    MAX_LINE,
    MAX_LINES,
    MAX_TEXT,
    SPECIAL,
    Md,
    PlainMd,
    attr,
    clean_output,
    code,
    code_block,
    code_span,
    markdown_text,
    raw_html_text,
    snippet_safe,
    text,
    url,
    visible,
)
from verified_triton.site.door import indent as indent_block  # noqa: F401

SECOND_COPY = 200  # characters of a text shown a second time on one page (a failed check above its fold, alt text)
COLLAPSE_ROWS_OVER = 12  # a longer checks table folds away behind its summary


# -- blocks ------------------------------------------------------------------------

def md_table(columns: list, rows: list[list], align: list[Md] | None = None) -> Md:
    """A Markdown table; a cell that is not Md is escaped (one line, no '|' can split it)."""
    align = align or [Md("---")] * len(columns)
    bar = Md(" | ")

    def line(cells) -> Md:
        return Md("| {} |").format(bar.join(cells))

    lines = [line(columns), line(align)] + [line(cell or Md(" ") for cell in row) for row in rows]
    return Md("\n").join(lines)


def admonition(kind: str, title: str, body: Md, folded: bool | None = None) -> Md:
    """!!! kind "title" (or ??? / ???+ when folded is True / False) over the indented body."""
    marker = Md("!!!") if folded is None else (Md("???") if folded else Md("???+"))
    return Md('{} {} "{}"\n\n{}').format(marker, kind, title, indent_block(body, "    "))


def unindexed(markdown: Md) -> Md:
    """Markdown kept out of the search index (Material's search skips data-search-exclude)."""
    return Md("<section markdown data-search-exclude>\n\n{}\n\n</section>").format(markdown)


def bounded_rows(columns: list, rows: list[list], align: list[Md] | None = None, what: str = "rows") -> Md:
    """A table whose rows past LIMITS.rows_shown fold away, and past four times that are cut."""
    shown = LIMITS.rows_shown
    if len(rows) <= shown:
        return md_table(columns, rows, align)
    cut = rows[: 4 * shown]
    out = [md_table(columns, cut[:shown], align), Md(""),
           admonition("abstract", f"{len(cut) - shown} more {what}", md_table(columns, cut[shown:], align), True)]
    if len(rows) > len(cut):
        out += [Md(""), Md("_{} more {} are in the evidence file and not shown here._").format(len(rows) - len(cut),
                                                                                             what)]
    return Md("\n").join(out)


BY_DESIGN = "by design"  # the words a partial by design adds to its badge, in its own colour (verified.css)
BY_DESIGN_CSS = "vt-by-design"


def badge(status: Status, by_design: bool = False) -> Md:
    """The badge as a chip: its label and colour; a PARTIALLY VERIFIED by design is told apart by both."""
    return Md('<span class="vt-badge {}">{}</span>').format(badge_css(status, by_design),
                                                          badge_label(status, by_design))


def badge_label(status: Status, by_design: bool = False) -> str:
    """'PARTIALLY VERIFIED', or 'PARTIALLY VERIFIED · by design' for a partial that lacks no evidence."""
    return f"{status.label} · {BY_DESIGN}" if by_design and status is Status.PARTIAL else status.label


def badge_css(status: Status, by_design: bool = False) -> str:
    return f"{status.css} {BY_DESIGN_CSS}" if by_design and status is Status.PARTIAL else status.css


# -- numbers -------------------------------------------------------------------------

def number(x: float | int | None) -> Md:
    """One rounding rule for measured values: 3 significant digits, thousands separated, bounded width."""
    return text(numfmt.number(x))


def ratio(x: float) -> Md:
    return text(f"{numfmt.fixed(x)}×")


def interval(low: float, high: float) -> Md:
    return text(f"{numfmt.fixed(low)}–{numfmt.fixed(high)}")


def percent(fraction: float, signed: bool = False) -> Md:
    """A fraction in whole percent ('+12', '5'), in numfmt's bounded width: a gap or a tolerance."""
    shown = numfmt.fixed(fraction * 100, 0)
    return text(("+" if signed and not shown.startswith("-") else "") + shown)
