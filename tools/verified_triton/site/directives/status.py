"""::status, the lesson's status line; ::badges, what each badge means.

The status line is what a learner reads above the lesson (issue 48 item 2): the badge, in its colour
(a PARTIALLY VERIFIED by design in its own, with its own words), then one line in a learner's words, the
judge's headline (at most 30 words: where and when it ran, what passed, and what a run did not reach as a
short reason), then "The record →", the lesson's record page, which holds the badge's whole reason, every
run, check, benchmark, prediction, the memory check and the releases (site/record_page.py).
"""

from __future__ import annotations

from verified_triton.judge.status import PARTIAL, STATUSES
from verified_triton.site.directives import Page, directive, notebook_form
from verified_triton.site.door import Md, text, url
from verified_triton.site.record_page import LINK_WORDS, link_from
from verified_triton.site.render import BY_DESIGN, admonition, badge, badge_css, badge_label, md_table, unindexed

BY_DESIGN_MEANING = ("what the lesson can run passed; the rest cannot run by design, and nothing is missing: "
                     "Triton's interpreter cannot run Gluon kernels, or the lesson needs a GPU that has not run "
                     "it (a GPU too old for it declines)")


def status_line(page: Page) -> Md:
    """The headline, then the link to the record."""
    st = page.lesson
    return Md("{} [{}]({}){{ .vt-record-link }}").format(st.headline, LINK_WORDS,
                                                          url(link_from(page.src_uri, st.lesson)))


@directive("status", "the lesson's status line: its badge, what its runs verified in at most 30 words, and a "
                     "link to its record (the whole reason, every check, benchmark and run)")
def status(page: Page) -> Md:
    st = page.lesson
    designed = st.by_design
    # Kept out of the search index: the same words on every lesson made every lesson match "passed"
    # (a <section>, as ::checks does: the indexer ends an excluded <div> at the first inner </div>).
    box = admonition(Md("{} vt-status").format(badge_css(st.status, designed)), badge_label(st.status, designed),
                     status_line(page))
    return unindexed(box)


@directive("badges", "a table of the status badges and what each means", needs_lesson=False)
def badges(page: Page) -> Md:
    rows = []
    for s in STATUSES:
        rows.append([badge(s), text(s.meaning)])
        if s is PARTIAL:
            rows.append([badge(s, by_design=True), text(f"{BY_DESIGN}: {BY_DESIGN_MEANING}")])
    return md_table(["Badge", "Means"], rows)


@notebook_form("status")
def status_notebook(page: Page) -> Md:
    # The notebook follows the lesson page: its status line, without the record (which is on the site).
    st = page.lesson
    return Md("**{}** on the site when this notebook was made: {}").format(
        badge_label(st.status, st.by_design), st.headline)
