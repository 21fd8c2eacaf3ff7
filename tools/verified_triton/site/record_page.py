"""A lesson's record: the page that holds its proof, generated from the evidence, one click from the lesson.

One job: say where a lesson's record page lives and what it is made of. The MkDocs hook adds the page to
the build (hooks.on_files), places it in the navigation under its lesson (hooks.course_nav) and keeps it
out of the lesson chain of the footer (hooks.on_nav); the lesson's status line links it (directives/status.py).

The page is Markdown made of the same `::` directives the lesson pages used to carry, expanded like any
page: the badge and its whole reason, every run with its machine, versions, date and source hash, every
check, the benchmark tables with their intervals and history, the predictions against the measurements,
the memory check, the Triton releases, and what each run printed. It is left out of the search index:
the lesson page is what a search should find, and the record's words are the same on every lesson.

The lesson page is `lessons/NAME.md` (lesson.toml `page`); its record is `lessons/NAME/record.md`, built to
`lessons/NAME/record/`. Notebooks follow the lesson page, never this one.
"""

from __future__ import annotations

import posixpath

from verified_triton.core.lessons import Lesson
from verified_triton.site.door import text

NAV_TITLE = "The record"
LINK_WORDS = "The record →"

# Each section is one directive of the registry (site/directives/); `record-*` ones exist for this page.
SECTIONS = (
    ("", "::record-verdict"),
    ("The runs: where, when, with what", "::record-runs"),
    ("Every check", "::checks"),
    ("Benchmarks", "::benchmarks history"),
    ("Predictions against the measurements", "::record-predictions"),
    ("Memory check", "::memory-check open"),
    ("Triton releases", "::releases open"),
    ("What each run printed", "::output"),
)


def record_uri(lesson: Lesson) -> str:
    """The record page's path under docs/: `lessons/NAME/record.md`."""
    return posixpath.join(posixpath.splitext(lesson.page)[0], "record.md")


def record_url(lesson: Lesson) -> str:
    """Its URL path under the site's root: `lessons/NAME/record/` (for a link from outside the site)."""
    return posixpath.join(posixpath.splitext(lesson.page)[0], "record") + "/"


def link_from(src_uri: str, lesson: Lesson) -> str:
    """The Markdown link target of the record from the page at docs-relative `src_uri` (MkDocs resolves it)."""
    return posixpath.relpath(record_uri(lesson), posixpath.dirname(src_uri) or ".")


def markdown(lesson: Lesson) -> str:
    """The record page's source: front matter (its lesson; out of search), a title, one directive a section."""
    title = text(lesson.title)  # the heading shows the title as written, whatever it holds
    lines = ["---", f"lesson: {lesson.name}", "search:", "  exclude: true", "---", "",
             f"# The record: {title}", ""]
    for heading, line in SECTIONS:
        if heading:
            lines += [f"## {heading}", ""]
        lines += [line, ""]
    return "\n".join(lines)
