"""::checks — every recorded check, one column per run; long tables fold, failures never do.

Checks that every run made share one table. In a long list, checks only some
runs made (the GPU's larger shapes, the interpreter's smaller ones) are one
line per group, with their count and their results, the list folded below
it: a column of "not run" per check says nothing a reader needs. A check's `why`, when the
lesson gave one, stands under its name.

`::checks folded` is the reading path's form: one line, "19 checks passed on NVIDIA H200 and 15 under the
interpreter", with the author's words about how they check (the lines indented under the directive) in
parentheses after it, the failed and skipped checks under it, and every table folded below.
"""

from __future__ import annotations

from verified_triton.judge.evidence import Record
from verified_triton.judge.status import LessonStatus
from verified_triton.site.directives import DirectiveError, Page, directive
from verified_triton.site.directives.common import STALE_MARK, gpu_first, mode_label
from verified_triton.site.door import MAX_TEXT, Md, code, page_markdown, text
from verified_triton.site.render import COLLAPSE_ROWS_OVER, SECOND_COPY, admonition, bounded_rows, md_table, unindexed

# Plain characters, not Material's icons: a checks table repeats its mark in every cell, and an inline
# icon is an <svg> each time (twenty times the bytes of the character).
MARK = {"pass": Md("✓ pass"), "fail": Md("✗ **fail**"), "skip": Md("– skip")}


@directive("checks", "every recorded check, one column per run; failures never fold away (folded: a line "
           "of counts)", flags=("folded",), body=True)
def checks(page: Page, body: str = "", flags: frozenset[str] = frozenset()) -> Md:
    # Check messages are evidence, not prose: kept out of the search index.
    if "folded" in flags:
        return unindexed(folded_checks(page, body))
    if body:
        raise DirectiveError("'::checks' takes the words indented under it only when folded: '::checks folded'")
    return unindexed(checks_markdown(page))


def folded_checks(page: Page, body: str) -> Md:
    """One line of counts per run and the author's words, the failed and skipped checks, every table folded."""
    st = page.lesson
    records = gpu_first(st)
    if not any(r.checks for r in records):
        return Md("_No checks recorded._")
    how = Md(" ({})").format(page_markdown(" ".join(body.split()))) if body.strip() else Md("")
    out = [Md("{}{}.").format(count_line(st, records), how)]
    names = list(dict.fromkeys(c.name for r in records for c in r.checks))
    headers, rows = headers_for(st, records), rows_for(st, records, names)
    out += failed_or_skipped(st, records, names, headers, rows)
    out += [Md(""), admonition("abstract", f"All {len(names)} checks, one column per run",
                               checks_markdown(page, fold=False), True)]
    return Md("\n").join(out)


def count_line(st: LessonStatus, records: list[Record]) -> Md:
    """'**19 checks passed** on NVIDIA H200 and 15 under the interpreter'; a failure or a skip is counted
    where it happened ('**18 of 19 checks passed** on NVIDIA H200 (1 failed)')."""
    parts = []
    for r in records:
        n = len(r.checks)
        if not n:
            continue
        passed = sum(c.status == "pass" for c in r.checks)
        where = "under the interpreter" if r.mode == "interpreter" else f"on {r.env.device_name}"
        older = "" if st.is_current(r) else f" ({STALE_MARK})"
        problems = [f"{k} {word}" for status, word in (("fail", "failed"), ("skip", "skipped"))
                    if (k := sum(c.status == status for c in r.checks))]
        count = f"{passed}" if passed == n else f"{passed} of {n}"
        if not parts:
            count = Md("**{} {} passed**").format(count, "check" if n == 1 else "checks")
        parts.append(Md("{} {}{}").format(count, where, older)
                     + (Md(" ({})").format(", ".join(problems)) if problems else Md("")))
    return Md(", ").join(parts[:-1]) + (Md(" and ") if len(parts) > 1 else Md("")) + parts[-1]


def checks_markdown(page: Page, fold: bool = True) -> Md:
    """The checks as tables; with `fold`, a long table folds behind its counts (inside ::checks folded's own
    fold, it does not fold again)."""
    st = page.lesson
    records = gpu_first(st)
    ran_in: dict[str, list[int]] = {}  # check name -> the records that ran it, in record order
    for i, record in enumerate(records):
        for check in record.checks:
            runs = ran_in.setdefault(check.name, [])
            if not runs or runs[-1] != i:
                runs.append(i)
    if not ran_in:
        return Md("_No checks recorded._")
    if len(ran_in) <= COLLAPSE_ROWS_OVER:  # a short table reads best whole, a few "not run" cells and all
        return check_table(st, records, list(ran_in), fold)
    groups: dict[tuple[int, ...], list[str]] = {}
    for name, runs in ran_in.items():
        groups.setdefault(tuple(runs), []).append(name)
    everywhere = tuple(range(len(records)))
    out = []
    if everywhere in groups:
        out.append(check_table(st, records, groups.pop(everywhere), fold))
    for subset, names in groups.items():
        out.append(partial_group(st, [records[i] for i in subset], records, names, fold))
    return Md("\n\n").join(out)


def why_of(records: list[Record], name: str) -> str:
    for record in records:
        for check in record.checks:
            if check.name == name and check.why:
                return check.why
    return ""


def rows_for(st: LessonStatus, records: list[Record], names: list[str], limit: int = MAX_TEXT
             ) -> list[list[Md]]:
    """One row per check; `limit` cuts each text, for a second copy above the fold (no amplification)."""
    by_record = [{c.name: c for c in r.checks} for r in records]
    rows = []
    for name in names:
        why = why_of(records, name)
        row = [code(name) + (Md("<br><small>{}</small>").format(text(why, limit)) if why else Md(""))]
        for record, found in zip(records, by_record, strict=True):
            check = found.get(name)
            if check is None:
                row.append(Md("not run"))
                continue
            stale = Md("") if st.is_current(record) else Md("{}: ").format(STALE_MARK)
            prefix = stale + MARK.get(check.status, text(check.status))
            row.append(Md("{}: {}").format(prefix, text(check.message, limit)))
        rows.append(row)
    return rows


def headers_for(st: LessonStatus, records: list[Record]) -> list[Md]:
    return [Md("Check")] + [text(mode_label(r)) + ("" if st.is_current(r) else f" ({STALE_MARK})") for r in records]


def counts(records: list[Record], names: list[str]) -> Md:
    wanted = set(names)
    parts = []
    for r in records:
        found = [c for c in r.checks if c.name in wanted]
        parts.append(Md("{}: ").format(mode_label(r)) + Md(", ").join(
            f"{sum(c.status == status for c in found)} {status}" for status in ("pass", "fail", "skip")
            if any(c.status == status for c in found)))
    return Md("; ").join(parts)


def notable(rows: list[list[Md]]) -> list[list[Md]]:
    return [row for row in rows if any(MARK["fail"] in cell or MARK["skip"] in cell for cell in row)]


def failed_or_skipped(st: LessonStatus, records: list[Record], names: list[str], headers: list[Md],
                      rows: list[list[Md]]) -> list[Md]:
    """The failed or skipped checks of `rows` again, above the fold, their texts cut (a second copy)."""
    if not notable(rows):
        return []
    short = notable(rows_for(st, records, names, SECOND_COPY))
    return [Md(""), Md("Failed or skipped:"), Md(""), bounded_rows(headers, short, what="checks")]


def check_table(st: LessonStatus, records: list[Record], names: list[str], fold: bool = True) -> Md:
    """The checks every run made: a table, folded behind its counts when long (and `fold`)."""
    headers, rows = headers_for(st, records), rows_for(st, records, names)
    if len(rows) <= COLLAPSE_ROWS_OVER or not fold:
        return md_table(headers, rows) if len(rows) <= COLLAPSE_ROWS_OVER else \
            bounded_rows(headers, rows, what="checks")
    out = [Md("**{} checks** recorded ({}).").format(len(rows), counts(records, names)),
           *failed_or_skipped(st, records, names, headers, rows)]
    out += [Md(""), admonition("abstract", f"All {len(rows)} checks", bounded_rows(headers, rows, what="checks"),
                               True)]
    return Md("\n").join(out)


def partial_group(st: LessonStatus, ran: list[Record], records: list[Record], names: list[str],
                  fold: bool = True) -> Md:
    """Checks only some runs made: one line with their count and results, the list folded under it (or, without
    `fold`, the table under the line)."""
    others = [r for r in records if all(r is not x for x in ran)]
    if all(r.mode == "gpu" for r in ran) and all(r.mode == "interpreter" for r in others):
        where, missing = "on the GPU only", "not run under the interpreter"
    elif all(r.mode == "interpreter" for r in ran) and all(r.mode == "gpu" for r in others):
        where, missing = "under the interpreter only", "not run on the GPU"
    else:
        where = Md("only in ") + Md(", ").join(mode_label(r) for r in ran)
        missing = Md("not run in ") + Md(", ").join(mode_label(r) for r in others)
    n = len(names)
    headers, rows = headers_for(st, ran), rows_for(st, ran, names)
    out = [Md("**{} {} {}** ({}): {}.").format(n, "check" if n == 1 else "checks", where, missing, counts(ran, names))]
    if not fold:
        return Md("\n").join([*out, Md(""), bounded_rows(headers, rows, what="checks")])
    out += failed_or_skipped(st, ran, names, headers, rows)
    title = Md("The {} {} {}").format(n, "check" if n == 1 else "checks", where)
    out += [Md(""), admonition("abstract", title, bounded_rows(headers, rows, what="checks"), True)]
    return Md("\n").join(out)
