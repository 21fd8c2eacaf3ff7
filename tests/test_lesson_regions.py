"""The lesson leads, the proof follows (issue 32 items 2, 3 and 5, the lessons' side).

- A region a page shows is a kernel, its launcher, its reference or the idea being taught: the kit's
  reporting (`lesson.…`, `bench_interleaved`, `bench_ms`) stays out of it, unless the page shows the
  region folded under a title that starts "How this page measures". How the course measures is explained once, on
  docs/measuring.md, and every page that shows a benchmark links to it.
- The default view of a lesson page (what shows before a reader opens a fold) holds at most 3,500 words
  of prose and tables.
"""

from __future__ import annotations

import io
import re
import tokenize
from html.parser import HTMLParser
from pathlib import Path

import pytest

from conftest import REPO
from verified_triton.core.lessons import discover
from verified_triton.site.snippets import read_regions

MEASURES_FOLD = "How this page measures"
WORD_LIMIT = 3500
# Owned elsewhere this round, or the exception the rule allows:
NOT_THIS_RULE = {
    "gluon-basics": "the Gluon lessons' pages are the gluon helper's this round",
    "profiling-debugging": "timing is what it teaches: its clocks and rounds regions show the kit's timer on purpose",
}
LESSONS = [lesson for lesson in discover(REPO / "code") if lesson.name not in NOT_THIS_RULE]

# The kit's reporting: the Lesson object (by the name every lesson gives it) and the timers, as names in
# the code (not in its comments or strings: a docstring may say "the lesson").
HARNESS = {"lesson", "Lesson", "bench_interleaved", "bench_ms"}
SNIPPET = re.compile(r"^(?P<indent>[ \t]*)::snippet[ \t]+(?P<file>\S+)[ \t]+(?P<region>\S+)[ \t]*$")
FOLD = re.compile(r"^(?P<indent>[ \t]*)(?:\?\?\?\+?|!!!)[ \t]+[\w-]+(?:[ \t]+\"(?P<title>[^\"]*)\")?")


def placed_snippets(page: str) -> list[tuple[int, str, str, list[str]]]:
    """Each ::snippet line of a page: its line number, file, region, and the titles of the folds around it."""
    out, folds = [], []  # folds: (indent, title) of the open admonitions and details
    for number, line in enumerate(page.splitlines(), 1):
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        folds = [(i, t) for i, t in folds if indent > i]
        if fold := FOLD.match(line):
            folds.append((len(fold["indent"]), fold["title"] or ""))
        elif snippet := SNIPPET.match(line):
            out.append((number, snippet["file"], snippet["region"], [t for _, t in folds]))
    return out


def harness_lines(text: str) -> list[str]:
    """Code lines of a region that name the kit's reporting (names only: comments and strings are prose)."""
    lines = text.splitlines()
    try:
        names = [(tok.start[0], tok.string) for tok in tokenize.generate_tokens(io.StringIO(text).readline)
                 if tok.type == tokenize.NAME]
    except (tokenize.TokenError, IndentationError, SyntaxError) as exc:
        raise AssertionError(f"a region that does not tokenize: {exc}\n{text}") from None
    return list(dict.fromkeys(lines[row - 1].strip() for row, name in names if name in HARNESS))


@pytest.mark.unit
@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.name)
def test_a_shown_region_holds_no_harness(lesson):
    page_path = REPO / "docs" / lesson.page
    found = []
    for number, file, region, folds in placed_snippets(page_path.read_text(encoding="utf-8")):
        if any(title.startswith(MEASURES_FOLD) for title in folds):
            continue
        lines = harness_lines(read_regions(REPO / file)[region].text)
        if lines:
            found.append(f"{page_path.relative_to(REPO)}:{number}: region {region} of {file} shows "
                         f"the kit's reporting: {lines[:3]}")
    assert not found, ("move the kit's calls out of the shown region, or fold it under "
                       f"??? note \"{MEASURES_FOLD}\":\n" + "\n".join(found))


@pytest.mark.unit
@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.name)
def test_a_lessons_figures_take_the_kits_text_size(lesson):
    """The kit sizes a figure's text to read on a phone (lessonkit.plot_text); a lesson's own fontsize=8
    drew 5-px legends there."""
    found = [f"{path.relative_to(REPO)}:{number}: {line.strip()}"
             for path in sorted((REPO / "code" / lesson.name).glob("*.py"))
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if re.search(r"\b(fontsize|labelsize)\s*=", line.split("#", 1)[0])]
    assert not found, "text sizes set by hand:\n" + "\n".join(found)


@pytest.mark.unit
def test_harness_is_found_in_code_not_in_prose():
    region = ('def paths(a):\n    """The ways the lesson compares."""  # the lesson\n    return a\n'
              "ms = bench_interleaved(fns)\nlesson.check('x', ok)\n")
    assert harness_lines(region) == ["ms = bench_interleaved(fns)", "lesson.check('x', ok)"]


@pytest.mark.unit
def test_the_folds_parser_sees_indentation():
    page = ('::snippet a.py shown\n\n??? note "How this page measures"\n\n    ::snippet a.py folded\n\n'
            "::snippet a.py after\n")
    assert [(region, folds) for _, _, region, folds in placed_snippets(page)] == [
        ("shown", []), ("folded", [MEASURES_FOLD]), ("after", [])]


@pytest.mark.unit
def test_the_measuring_page_is_in_the_nav_and_every_benchmarking_page_links_it():
    assert (REPO / "docs" / "measuring.md").is_file()
    assert re.search(r"^  - [^:]+: measuring\.md$", (REPO / "mkdocs.yml").read_text(), re.M)
    missing = [lesson.page for lesson in LESSONS
               if "::benchmarks" in (page := (REPO / "docs" / lesson.page).read_text(encoding="utf-8"))
               and "../measuring.md" not in page]
    assert not missing, f"pages with benchmarks that do not link ../measuring.md: {missing}"


# -- the default view ---------------------------------------------------------------------------

class VisibleWords(HTMLParser):
    """Words of a built page's article outside <pre> and outside closed <details>: prose and tables. A
    formula (arithmatex's span or div, typeset by KaTeX in the browser) is one word, not its LaTeX."""

    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, bool]] = []  # (tag, counted)
        self.words = 0

    def handle_starttag(self, tag, attrs):
        if tag in self.VOID:
            return
        attrs = dict(attrs)
        classes = (attrs.get("class") or "").split()
        counted = self.stack[-1][1] if self.stack else False
        if tag == "article" and "md-content__inner" in classes:
            counted = True
        if "arithmatex" in classes and counted:
            self.words += 1
            counted = False
        if (tag == "details" and "open" not in attrs) or tag in ("pre", "script", "style") \
                or "headerlink" in classes:
            counted = False
        self.stack.append((tag, counted))

    def handle_endtag(self, tag):
        if tag in self.VOID:
            return
        while self.stack and self.stack.pop()[0] != tag:
            pass

    def handle_data(self, data):
        if self.stack and self.stack[-1][1]:
            self.words += len(data.split())


def visible_words(html: str) -> int:
    parser = VisibleWords()
    parser.feed(html)
    return parser.words


@pytest.mark.unit
def test_the_counter_skips_closed_folds_and_code():
    html = ('<article class="md-content__inner md-typeset"><h2>Two words<a class="headerlink">¶</a></h2>'
            "<p>three more words</p><details><summary>hidden</summary><p>not these</p></details>"
            '<details open=""><summary>shown</summary></details><pre><code>x = 1</code></pre>'
            "<table><tr><td>cell</td></tr></table>"
            '<p>a formula <span class="arithmatex">\\(2 S^2 D\\)</span></p></article><p>outside</p>')
    assert visible_words(html) == 2 + 3 + 1 + 1 + 3


@pytest.fixture
def built_site(real_site) -> Path:
    """The run's one build of the real site (conftest.py)."""
    return real_site


@pytest.mark.integration
def test_the_default_view_of_a_lesson_page_is_at_most_3500_words(built_site):
    counts = {lesson.name: visible_words((built_site / lesson.page.removesuffix(".md") / "index.html")
                                         .read_text(encoding="utf-8")) for lesson in LESSONS}
    over = {name: n for name, n in counts.items() if n > WORD_LIMIT}
    assert not over, f"default views over {WORD_LIMIT} words (fold the rest on purpose): {over}"
