"""::glossary — every term of the abbreviations file, its definition and the lesson that teaches it.

The definitions are the ones a reader sees on hover on every page (Material's
abbreviations, the abbr extension's glossary); see tools/verified_triton/site/glossary.py.
"""

from __future__ import annotations

import re

from verified_triton.core.safefs import UnsafePathError
from verified_triton.site.directives import DirectiveError, Page, directive
from verified_triton.site.door import Md, text, url
from verified_triton.site.glossary import ABBREVIATIONS, GlossaryError, lesson_for, read
from verified_triton.site.render import md_table


def anchor(term: str) -> str:
    return "term-" + (re.sub(r"[^a-z0-9]+", "-", term.casefold()).strip("-") or "x")


@directive("glossary", "every glossary term with its definition and a link to the lesson that teaches it",
           needs_lesson=False)
def glossary(page: Page) -> Md:
    if page.site.docs_dir is None:
        raise DirectiveError("::glossary needs the docs folder (the site was loaded without it)")
    path = page.site.docs_dir / ABBREVIATIONS
    try:
        entries = read(path, page.site.docs_dir)
    except (GlossaryError, UnsafePathError) as exc:
        raise DirectiveError(str(exc)) from None
    rows = []
    for entry in sorted(entries, key=lambda e: e.term.casefold()):
        lesson = lesson_for(entry, page.site.lessons)
        if lesson is None:
            raise DirectiveError(f"{path}:{entry.line}: '{entry.term}' is taught in '{entry.taught_in}', which is "
                                 "no lesson's title (up to its colon) or name")
        others = entry.forms[1:]
        term = Md('<span id="{}"></span>**{}**').format(anchor(entry.term), entry.term) + (
            Md("<br><small>also {}</small>").format(Md(", ").join(others)) if others else Md(""))
        title = lesson.title.split(":")[0].strip()
        rows.append([term, text(entry.definition), Md("[{}]({})").format(title, url(page.root + lesson.page))])
    return md_table(["Term", "Meaning", "Taught in"], rows)
