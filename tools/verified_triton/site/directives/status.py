"""::status, the lesson's badge, summary and sentence; ::badges, what each badge means."""

from __future__ import annotations

from verified_triton.judge.status import STATUSES
from verified_triton.site.directives import Page, directive, notebook_form
from verified_triton.site.directives.memory import memory_fold
from verified_triton.site.directives.releases import release_fold, release_line
from verified_triton.site.door import Md, text, url
from verified_triton.site.render import admonition, badge, md_table, unindexed


@directive("status", "the lesson's badge and what was verified in one line; why, folded under it")
def status(page: Page) -> Md:
    st = page.lesson
    # One compact line above the lesson (issue 25): the badge (the title), what was verified (failed
    # checks, a declined or missing run included), and "Why", which unfolds the sentence that explains the
    # badge and the source it was judged for.
    why = [text(st.sentence), Md(""),
           Md("<small>Source hash {}: the lesson file, the local modules it imports and what `lesson.toml` says "
              "about running it. [How verification works]({})</small>").format(st.source_hash[:12],
                                                                              url(page.root + "verification.md"))]
    if st.stale:
        why[-1:-1] = [Md("Rows and figures from a run of an older source are marked ⚠ older source."), Md("")]
    # Then the Triton releases it was checked under (information, never the badge), their runs folded,
    # and the memory check's line with its details folded (site/directives/memory.py).
    line, fold = release_line(st), release_fold(st, page.root)
    body = [Md("{}.").format(st.summary[:1].upper() + st.summary[1:]) + (Md(" ") + line if line else Md("")),
            Md(""), admonition("vt-why", "Why", Md("\n").join(why), folded=True),
            *([Md(""), fold] if fold else []), Md(""), memory_fold(st)]
    # The same words on every lesson ("passed", "interpreter", "H200"): kept out of the search index, where
    # they made every lesson match (a <section>, as ::checks does: the indexer ends an excluded <div> at
    # the first inner </div>).
    box = admonition(Md("{} vt-status").format(st.status.css), st.status.label, Md("\n").join(body))
    return unindexed(box)


@directive("badges", "a table of the status badges and what each means", needs_lesson=False)
def badges(page: Page) -> Md:
    return md_table(["Badge", "Means"], [[badge(s), text(s.meaning)] for s in STATUSES])


@notebook_form("status")
def status_notebook(page: Page) -> Md:
    st = page.lesson
    # The sentence says what the memory check found (status.py), so it is not said again. It is folded:
    # the reader's first screen is the lesson, not its proof (the first code within 15 % of the page).
    return Md("<details><summary><b>{}</b> on the site when this notebook was made: {}.</summary>"
              "\n\n{}\n\n</details>").format(st.status.label, st.summary, st.sentence)
