"""::checks — every recorded check, one column per run; long tables fold, failures never do.

Checks that every run made share one table. In a long list, checks only some
runs made (the GPU's larger shapes, the interpreter's smaller ones) are one
line per group, with their count and their results, the list folded below
it: a column of "not run" per check says nothing a reader needs. A check's `why`, when the
lesson gave one, stands under its name.
"""

from __future__ import annotations

from verified_triton.judge.evidence import Record
from verified_triton.judge.status import LessonStatus
from verified_triton.site.directives import Page, directive
from verified_triton.site.directives.common import STALE_MARK, gpu_first, mode_label
from verified_triton.site.render import (
    COLLAPSE_ROWS_OVER,
    MAX_TEXT,
    SECOND_COPY,
    admonition,
    bounded_rows,
    code,
    md_table,
    text,
    unindexed,
)

# Plain characters, not Material's icons: a checks table repeats its mark in every cell, and an inline
# icon is an <svg> each time (twenty times the bytes of the character).
MARK = {"pass": "✓ pass", "fail": "✗ **fail**", "skip": "– skip"}


@directive("checks", "every recorded check, one column per run (failed and skipped checks never fold away)")
def checks(page: Page) -> str:
    # Check messages are evidence, not prose: kept out of the search index.
    return unindexed(checks_markdown(page))


def checks_markdown(page: Page) -> str:
    st = page.lesson
    records = gpu_first(st)
    ran_in: dict[str, list[int]] = {}  # check name -> the records that ran it, in record order
    for i, record in enumerate(records):
        for check in record.checks:
            runs = ran_in.setdefault(check.name, [])
            if not runs or runs[-1] != i:
                runs.append(i)
    if not ran_in:
        return "_No checks recorded._"
    if len(ran_in) <= COLLAPSE_ROWS_OVER:  # a short table reads best whole, a few "not run" cells and all
        return check_table(st, records, list(ran_in))
    groups: dict[tuple[int, ...], list[str]] = {}
    for name, runs in ran_in.items():
        groups.setdefault(tuple(runs), []).append(name)
    everywhere = tuple(range(len(records)))
    out = []
    if everywhere in groups:
        out.append(check_table(st, records, groups.pop(everywhere)))
    for subset, names in groups.items():
        out.append(partial_group(st, [records[i] for i in subset], records, names))
    return "\n\n".join(out)


def why_of(records: list[Record], name: str) -> str:
    for record in records:
        for check in record.checks:
            if check.name == name and check.why:
                return check.why
    return ""


def rows_for(st: LessonStatus, records: list[Record], names: list[str], limit: int = MAX_TEXT
             ) -> list[list[str]]:
    """One row per check; `limit` cuts each text, for a second copy above the fold (no amplification)."""
    by_record = [{c.name: c for c in r.checks} for r in records]
    rows = []
    for name in names:
        why = why_of(records, name)
        row = [code(name) + (f"<br><small>{text(why, limit)}</small>" if why else "")]
        for record, found in zip(records, by_record, strict=True):
            check = found.get(name)
            if check is None:
                row.append("not run")
                continue
            prefix = f"{'' if st.is_current(record) else f'{STALE_MARK}: '}{MARK.get(check.status, text(check.status))}"
            row.append(f"{prefix}: {text(check.message, limit)}")
        rows.append(row)
    return rows


def headers_for(st: LessonStatus, records: list[Record]) -> list[str]:
    return ["Check"] + [text(mode_label(r)) + ("" if st.is_current(r) else f" ({STALE_MARK})") for r in records]


def counts(records: list[Record], names: list[str]) -> str:
    wanted = set(names)
    parts = []
    for r in records:
        found = [c for c in r.checks if c.name in wanted]
        parts.append(f"{text(mode_label(r))}: " + ", ".join(
            f"{sum(c.status == status for c in found)} {status}" for status in ("pass", "fail", "skip")
            if any(c.status == status for c in found)))
    return "; ".join(parts)


def notable(rows: list[list[str]]) -> list[list[str]]:
    return [row for row in rows if any(MARK["fail"] in cell or MARK["skip"] in cell for cell in row)]


def failed_or_skipped(st: LessonStatus, records: list[Record], names: list[str], headers: list[str],
                      rows: list[list[str]]) -> list[str]:
    """The failed or skipped checks of `rows` again, above the fold, their texts cut (a second copy)."""
    if not notable(rows):
        return []
    short = notable(rows_for(st, records, names, SECOND_COPY))
    return ["", "Failed or skipped:", "", bounded_rows(headers, short, what="checks")]


def check_table(st: LessonStatus, records: list[Record], names: list[str]) -> str:
    """The checks every run made: a table, folded behind its counts when long."""
    headers, rows = headers_for(st, records), rows_for(st, records, names)
    if len(rows) <= COLLAPSE_ROWS_OVER:
        return md_table(headers, rows)
    out = [f"**{len(rows)} checks** recorded ({counts(records, names)}).",
           *failed_or_skipped(st, records, names, headers, rows)]
    out += ["", admonition("abstract", f"All {len(rows)} checks", bounded_rows(headers, rows, what="checks"), True)]
    return "\n".join(out)


def partial_group(st: LessonStatus, ran: list[Record], records: list[Record], names: list[str]) -> str:
    """Checks only some runs made: one line with their count and results, the list folded under it."""
    others = [r for r in records if all(r is not x for x in ran)]
    if all(r.mode == "gpu" for r in ran) and all(r.mode == "interpreter" for r in others):
        where, missing = "on the GPU only", "not run under the interpreter"
    elif all(r.mode == "interpreter" for r in ran) and all(r.mode == "gpu" for r in others):
        where, missing = "under the interpreter only", "not run on the GPU"
    else:
        where = "only in " + ", ".join(text(mode_label(r)) for r in ran)
        missing = "not run in " + ", ".join(text(mode_label(r)) for r in others)
    n = len(names)
    headers, rows = headers_for(st, ran), rows_for(st, ran, names)
    out = [f"**{n} {'check' if n == 1 else 'checks'} {where}** ({missing}): {counts(ran, names)}.",
           *failed_or_skipped(st, ran, names, headers, rows)]
    title = f"The {n} {'check' if n == 1 else 'checks'} {where}"
    out += ["", admonition("abstract", title, bounded_rows(headers, rows, what="checks"), True)]
    return "\n".join(out)
