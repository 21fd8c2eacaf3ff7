"""::checks — every recorded check, one column per run; long tables fold, failures never do."""

from __future__ import annotations

from directives import Page, directive
from directives.common import STALE_MARK, gpu_first, mode_label
from render import COLLAPSE_ROWS_OVER, SECOND_COPY, admonition, bounded_rows, code, md_table, text

MARK = {"pass": ":material-check: pass", "fail": ":material-close: **fail**", "skip": ":material-minus: skip"}


@directive("checks", "every recorded check, one column per run (failed and skipped checks never fold away)")
def checks(page: Page) -> str:
    # Check messages are evidence, not prose: kept out of the search index.
    return f"<section markdown data-search-exclude>\n\n{checks_markdown(page)}\n\n</section>"


def checks_markdown(page: Page) -> str:
    st = page.lesson
    records = gpu_first(st)
    names: dict[str, None] = {}
    for record in records:
        for check in record.checks:
            names.setdefault(check.name)
    if not names:
        return "_No checks recorded._"
    headers = ["Check"] + [text(mode_label(r)) + ("" if st.is_current(r) else f" ({STALE_MARK})") for r in records]
    by_record = [{c.name: c for c in r.checks} for r in records]
    rows, short = [], []  # short: the same rows, for a second copy above the fold (no amplification)
    for name in names:
        row, brief = [code(name)], [code(name)]
        for record, found in zip(records, by_record, strict=True):
            check = found.get(name)
            if check is None:
                row.append("not run")
                brief.append("not run")
                continue
            prefix = f"{'' if st.is_current(record) else f'{STALE_MARK}: '}{MARK.get(check.status, text(check.status))}"
            row.append(f"{prefix}: {text(check.message)}")
            brief.append(f"{prefix}: {text(check.message, SECOND_COPY)}")
        rows.append(row)
        short.append(brief)
    if len(rows) <= COLLAPSE_ROWS_OVER:
        return md_table(headers, rows)
    counts = "; ".join(f"{text(mode_label(r))}: " + ", ".join(
        f"{sum(c.status == status for c in r.checks)} {status}" for status in ("pass", "fail", "skip")
        if any(c.status == status for c in r.checks)) for r in records if r.checks)
    out = [f"**{len(rows)} checks** recorded ({counts})."]
    notable = [brief for row, brief in zip(rows, short, strict=True)
               if any(":material-close:" in cell or ":material-minus:" in cell for cell in row)]
    if notable:
        out += ["", "Failed or skipped:", "", bounded_rows(headers, notable, what="checks")]
    out += ["", admonition("abstract", f"All {len(rows)} checks", bounded_rows(headers, rows, what="checks"), True)]
    return "\n".join(out)
