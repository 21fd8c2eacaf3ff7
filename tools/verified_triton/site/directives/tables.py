"""::table NAME — one table a run recorded with lesson.table(NAME, ...), from the best record that has it.

Shown open by default, as every page has it; `::table NAME folded` folds it under a title made of its
caption's first clause, for a sweep or a per-run table the reader opens on purpose (a title of the
author's own: put the line, indented, under Material's `??? note "Title"`).
"""

from __future__ import annotations

import re

from verified_triton.site.directives import DirectiveError, Page, common, directive, notebook_form
from verified_triton.site.door import Md, text
from verified_triton.site.render import SECOND_COPY, admonition, bounded_rows, number

TITLE_CHARS = 80  # a folded table's title, at most (the caption is shown in full under the table)


def cell(value) -> Md:
    if isinstance(value, float):
        return number(value)
    return Md("") if value is None else text(value)


@directive("table", "one table a run recorded with lesson.table(NAME, ...) (folded: titled from its caption)",
           args=("NAME",), flags=("folded",))
def table(page: Page, name: str, flags: frozenset[str] = frozenset()) -> Md:
    shown = table_markdown(page, name)
    if "folded" not in flags or not page.lesson.records:
        return shown
    return admonition("abstract", fold_title(page, name), shown, folded=True)


def fold_title(page: Page, name: str) -> str:
    """'Table: ' and the first clause of the table's caption (before a ';', a '(' or a sentence's end), or of
    its name when it has none."""
    caption = next((t.caption for r in common.gpu_first(page.lesson) for t in r.tables
                    if t.name == name and t.caption), "")
    clause = re.split(r";|\(|\. |:\s", " ".join(caption.split()), maxsplit=1)[0].strip(" .,") or name
    if len(clause) > TITLE_CHARS:
        clause = clause[:TITLE_CHARS].rsplit(" ", 1)[0] + " …"
    return f"Table: {clause}"


def table_markdown(page: Page, name: str) -> Md:
    st = page.lesson
    for record in common.gpu_first(st):
        for t in record.tables:
            if t.name != name:
                continue
            rows = [[cell(c) for c in row] + [Md("")] * (len(t.columns) - len(row)) for row in t.rows]
            rows = [row[: len(t.columns)] for row in rows]
            # a header is repeated inside the fold of a long table: short, so it is no amplifier
            body = bounded_rows([text(c, SECOND_COPY) for c in t.columns], rows, what="rows")
            # which run recorded it; the machine and date are the page's status line's
            where = Md("({})").format(common.run_words(record) if st.is_current(record)
                                      else f"{common.mode_label(record)}, {record.date}")
            caption = (Md("{} ").format(t.caption) if t.caption else Md("")) + where
            block = Md("{}\n\n<small>{}</small>").format(body, caption)
            note = common.stale_note(st, record)
            return admonition("vt-stale", common.STALE_MARK, Md("{}\n\n{}").format(note, block)) if note else block
    if not st.records:
        return Md("_Table {} appears once the lesson has been run._").format(name)
    common.require_recorded(st, "table", name, lambda r: (t.name for t in r.tables))
    return Md("_Table {} is recorded by the GPU run, which has not been recorded yet._").format(name)


@notebook_form("table")
def table_notebook(page: Page, name: str) -> Md:
    try:
        md = table_markdown(page, name)
    except DirectiveError:
        return Md("")
    return md.replace(Md('!!! vt-stale "{}"').format(common.STALE_MARK), Md("**{}**").format(common.STALE_MARK))
