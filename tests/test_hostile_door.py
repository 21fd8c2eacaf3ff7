"""Hostile input, issue 30 round 3: every surface through one door, by type.

A throw-away course whose every field from code/ (lesson.toml: title, summary,
part, requires.why, interpreter.reason, prerequisites) and from evidence/
(every string and number of a record: environment, reason, command, streams,
checks and their why, benchmarks' labels, notes, baselines, methods and
libraries, history, tables, figure captions, skipped parts, steps,
predictions' basis, unit and value, expected warnings) is hostile, on pages
that use every registered directive, built with the real hook: the site, its
notebooks and its archives. No element or attribute of a hostile value exists
in any built page, no number is wider than numfmt.WIDEST, a notebook's
Markdown renders (markdown-it, GFM) without them, an archive's README shows
them as text, and nothing printed carries an escape sequence. (mkdocs.yml's
repo_url and branch are checked by siteconfig: tests/test_hostile_config.py.)

Findings 1, 2 and 10 of the issue, each written before the fix:
1. a prediction's unit was live markup on the lesson page, the predictions
   table and in the notebook, and its value a 399-character number;
2. lesson.toml `part` was live markup in the navigation of every page;
10. an escape sequence in lesson.toml `main` reached the terminal raw from `mkdocs build`.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from dataclasses import replace
from html.parser import HTMLParser

import pytest
from markdown_it import MarkdownIt

from conftest import SITE_LESSON, Doc, bench, build_output, figure_name, make_site_project, png, toml_string
from verified_triton.core import numfmt
from verified_triton.core.kit import OPTIONAL_SKIP, Check, Figure, FilteredWarning, Prediction, SkippedPart, Step, Table
from verified_triton.judge.evidence import Environment, HistoryPoint

# Markup for HTML, Markdown and its extensions (emphasis, code, links, templates, math, emoji), a terminal's
# colour and a bidirectional override; SHORT fits a record's environment fields (120 characters).
HOSTILE = ('<img src=x onerror=alert(1)> "><svg onload=alert(2)> *x* `x` [a](javascript:alert(3)) {{ x }} '
           '$x$ :x: \x1b[31mred\x1b[0m \u202eevil ~~s~~ www.evil.example a@evil.example')
SHORT = '<img src=x onerror=alert(1)> "><svg onload=alert(2)> *x* [a](javascript:x) $x$ \x1b[31m\u202e'
assert len(SHORT) <= 120
HUGE, TINY = 9.99e299, -1e300
ESC = "\x1b"

WALK_SOURCE = '''\
import sys
from pathlib import Path

# lessonkit.py sits beside this file in a download, one folder up in the repository.
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]
from lessonkit import Lesson  # noqa: E402


# snippet: kernel
def kernel():
    return 1
# end snippet


def main() -> int:
    lesson = Lesson("walk")
    with lesson.step("work"):
        lesson.check("k", kernel() == 1, "one")
    return lesson.finish()


if __name__ == "__main__":
    sys.exit(main())
'''

WALK_PAGE = """\
---
lesson: walk
---

# The walk

::status

## Requirements

::requirements

## Kernel

::snippet code/walk/walk.py kernel

## Work

::step work

## Checks

::checks

## Benchmarks

::benchmarks

::result speed

## Predictions

::prediction unit
    The author's explanation of a miss.

::prediction huge
    The author's explanation of a miss.

::prediction ratio
    The author's explanation of a miss.

::prediction kern
    The author's explanation of a miss.

## Figures

::figure plot

::figures

## Table

::table walk-table

## Memory check

::memory-check

## Triton releases

::releases

## Output

::output

## Practice

::exercise drill
"""

# The walk's exercise: its hint (code/) is hostile, and so is everything its proof records (evidence/).
WALK_EXERCISES = f'''\
import practice


# snippet: drill
def drill():
    """Pose it."""
    return 0
# end snippet


# snippet: check-drill
@practice.exercise("drill", hint={json.dumps(HOSTILE)})
def check_drill(m):
    return None
# end snippet
'''
WALK_SOLUTIONS = '''\
# snippet: drill
def drill():
    return 1
# end snippet


MISTAKES = {}
'''

OTHER_PAGE = """\
---
lesson: other
---

# The other

::status

## Requirements

::requirements

## Kernel

::snippet code/other/other.py kernel

## Output

::output
"""

INDEX_PAGE = """\
# Fake course

::course-start

::course-needs

::course

## Status

::status-table

## Benchmarks

::benchmark-table

## Libraries

::library-table

## Predictions

::prediction-table

## Releases

::release-table

## Badges

::badges

## Directives

::directives

## Limits

::limits

## Glossary

::glossary
"""


def walk_records(site) -> None:
    env = Environment(python=SHORT, torch=SHORT, triton=SHORT, platform=SHORT, device_name=SHORT,
                      capability="9.0", driver=SHORT, cuda=SHORT)
    b = bench("speed", 1.5, 1.4, 1.6, unit="GB/s", threshold=1.0, stretch=1.2, label=HOSTILE, note=HOSTILE,
              baseline_name=HOSTILE)
    b.method, b.library = HOSTILE, HOSTILE
    light, dark = png(), png(5, 3)
    light_name, dark_name = figure_name("plot", light), figure_name("plot-dark", dark)
    gpu = site.make_record(
        "walk", "gpu", env=env, command=f"python code/walk/walk.py {SHORT}", stdout=HOSTILE + "\n" + HOSTILE,
        stderr=HOSTILE,
        checks=[Check("k", "pass", HOSTILE, why=HOSTILE, step="work"),
                Check(f"{OPTIONAL_SKIP}liger-kernel", "skip", HOSTILE)],
        benchmarks=[b],
        history={"speed": [HistoryPoint(started_utc="2025-12-01T00:00:00Z", source_hash="0" * 64, triton=SHORT,
                                        ratio=1.1, ratio_low=1.0, ratio_high=1.2)]},
        tables=[Table("walk-table", [HOSTILE, "n"], [[HOSTILE, HUGE], [TINY, None]], caption=HOSTILE)],
        figures=[Figure("plot", light_name, HOSTILE, dark_name)],
        steps=[Step("work", HOSTILE + "\n")],
        predictions=[Prediction("unit", 2.0, HOSTILE, 0.15, quantity="value", unit=HOSTILE, measured=2.1),
                     Prediction("huge", HUGE, HOSTILE, 0.15, quantity="value", unit="ms", measured=TINY),
                     Prediction("ratio", HUGE, HOSTILE, 0.1, of="speed"),
                     Prediction("kern", HUGE, HOSTILE, 0.1, of="speed", quantity="kernel")],
        filtered_warnings=[FilteredWarning(HOSTILE, HOSTILE, 2, HOSTILE)])
    site.write(gpu, {light_name: light, dark_name: dark})
    site.write(site.make_record(
        "walk", "interpreter", outcome="failed", exit_code=1, reason=HOSTILE, stdout=HOSTILE, stderr=HOSTILE,
        env=Environment(python=SHORT, torch=SHORT, triton=SHORT, platform=SHORT, device_name="CPU"),
        checks=[Check("k", "fail", HOSTILE, step="work")], skipped_parts=[SkippedPart(HOSTILE, HOSTILE)],
        steps=[Step("work", "", 0, HOSTILE)]))
    site.write(site.make_record("other", "gpu", env=env, outcome="by-design", exit_code=3, reason=HOSTILE,
                                stdout=HOSTILE))
    walk_memory_and_releases(site)
    walk_exercises(site)


def walk_exercises(site) -> None:
    """The exercise's proof: mistakes whose names, declared words and messages are hostile, one let through
    (what ::exercise shows outside its fold), and a hostile hint and starter message."""
    from verified_triton.core.lessons import exercise_file_hashes, exercise_hash
    from verified_triton.judge.exercises import (
        Attempt,
        ExerciseResult,
        ExercisesRecord,
        MistakeResult,
        ProofEnv,
        write_exercises,
    )

    lesson = site.lesson("walk")
    mistakes = [MistakeResult(SHORT, HOSTILE, HOSTILE, HOSTILE, "failed", HOSTILE + " " + HOSTILE),
                MistakeResult(f"2 {SHORT[:100]}", "x", "y", HOSTILE, "passed", "")]  # names: 120 characters
    drill = ExerciseResult("drill", HOSTILE, "", Attempt("failed", HOSTILE), Attempt("passed"), mistakes)
    write_exercises(site.evidence, ExercisesRecord(
        lesson="walk", outcome="completed", exit_code=0, reason="", started_utc="2026-01-02T03:04:05Z", wall_s=1.0,
        command=HOSTILE, source_hash=exercise_hash(lesson), source_files=exercise_file_hashes(lesson),
        env=ProofEnv(SHORT, SHORT, SHORT), exercises=[drill, replace(drill, name="other")]))


def walk_memory_and_releases(site) -> None:
    """A memory check whose finding, message, command and declaration are hostile, and the lesson's runs under
    two Triton releases, one failed for a hostile reason (what ::memory-check, ::releases and the tables show)."""
    from test_matrix import release_record
    from test_sanitize import finding, loc, memory_record, tool_run
    from verified_triton.core import kit
    from verified_triton.judge.releases import write_release

    lesson = site.lesson("walk")
    race = finding("race", loc("code/walk/walk.py", 3, "walk_kernel", "Write"), records=2, hazards=5,
                   message=HOSTILE)
    library = finding("race", loc(HOSTILE[:100], 1, HOSTILE[:100]), records=1, message=HOSTILE)
    known = kit.KnownFinding("racecheck", "walk_kernel", ["code/walk/walk.py:1-9"],
                             [kit.SourceSpan("code/walk/walk.py", 1, 9)], HOSTILE)
    racecheck = tool_run("racecheck", race, library)
    racecheck.command = HOSTILE
    record = memory_record(lesson, racecheck, known=[known])
    site.write(record)
    write_release(site.evidence, release_record(lesson, "3.5.1"))
    write_release(site.evidence, release_record(lesson, "3.4.0", outcome="failed", reason=HOSTILE))


@pytest.fixture(scope="module")
def walked(tmp_path_factory):
    site = make_site_project(tmp_path_factory.mktemp("walk"))
    part = f'part = {toml_string(HOSTILE)}\n'
    site.add_lesson("walk", WALK_PAGE, title=HOSTILE, summary=HOSTILE, source=WALK_SOURCE,
                    toml=part + f'[requires]\ncapability = "9.0"\nwhy = {toml_string(HOSTILE)}\n')
    site.add_lesson("other", OTHER_PAGE, title=f"Other {HOSTILE}", summary=HOSTILE, order=2,
                    source=SITE_LESSON.replace("LESSON", "other"),
                    toml=part + 'prerequisites = ["walk"]\n'
                    f'[interpreter]\nsupported = false\nreason = {toml_string(HOSTILE)}\n')
    (site.docs / "index.md").write_text(INDEX_PAGE, encoding="utf-8")
    (site.docs / "verification.md").write_text("# Verification\n\n## Other Triton releases\n", encoding="utf-8")
    (site.docs / "includes").mkdir()
    (site.docs / "includes" / "abbreviations.md").write_text("*[walkterm]: A term. Taught in: walk.\n",
                                                             encoding="utf-8")
    # a file under code/ is published with a page of its own, titled with its name
    (site.code / "walk" / 'x<img src=x onerror=alert(4)> `*y*` [a](javascript:x).py').write_text("X = 1\n")
    (site.code / "walk" / "exercises.py").write_text(WALK_EXERCISES, encoding="utf-8")
    (site.code / "walk" / "solutions.py").write_text(WALK_SOLUTIONS, encoding="utf-8")
    walk_records(site)
    result = site.build()
    assert result.returncode == 0, build_output(result)
    site.output = build_output(result)
    return site


def pages(site) -> dict[str, str]:
    return {p.relative_to(site.site).as_posix(): p.read_text(encoding="utf-8") for p in site.site.rglob("*.html")}


class BrowserDoc(Doc):
    """Doc, parsing <title> and <textarea> as a browser does: their content is text (RCDATA), so a page title
    from a file name, written there by the theme as it is, is no element (a file name cannot hold '</')."""

    CDATA_CONTENT_ELEMENTS = (*Doc.CDATA_CONTENT_ELEMENTS, "title", "textarea")


def live_markup(html: str) -> list[str]:
    """Elements and attributes a hostile value would make: handlers, its <img>, <svg onload>, javascript:."""
    found = []
    for e in BrowserDoc(html).elements:
        handlers = [k for k in e.attrs if k.startswith("on")]
        if handlers:
            found.append(f"<{e.tag} {' '.join(handlers)}>")
        if e.tag == "img" and e.attrs.get("src") == "x":
            found.append("<img src=x>")
        if any((v or "").strip().lower().startswith("javascript:") for v in e.attrs.values()):
            found.append(f"<{e.tag}> with a javascript: URL")
        if e.tag in ("em", "strong", "code", "del", "s") and "".join(e.text) in ("x", "s"):
            found.append(f"<{e.tag}>{''.join(e.text)}</{e.tag}> from the hostile text")
        if "arithmatex" in e.classes and "".join(e.text).strip("$\\() ") == "x":
            found.append("math from the hostile text")
    return found


NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?(?:e[+-]?\d+)?")


def widest_number(text: str) -> str:
    return max(NUMBER.findall(text), key=len, default="")


def table_cells(html: str) -> list[str]:
    return ["".join(e.text) for e in Doc(html).elements if e.tag == "td"]


# -- finding 1: a prediction's unit and value ----------------------------------------------------------

@pytest.mark.integration
def test_a_predictions_unit_is_text_and_its_numbers_bounded_on_both_pages_and_in_the_notebook(walked):
    lesson, index = walked.html("walk"), (walked.site / "index.html").read_text(encoding="utf-8")
    for where, html in (("lesson page", lesson), ("predictions table", index)):
        assert live_markup(html) == [], where
        cells = [c for c in table_cells(html) if "alert" in c or "e+299" in c or "e+300" in c]
        assert any("<img src=x onerror=alert(1)>" in c for c in cells), f"{where}: the unit is not shown as text"
        widest = max((widest_number(c) for c in table_cells(html)), key=len)
        assert len(widest) <= numfmt.WIDEST, f"{where}: {widest!r}"
    notebook = json.loads((walked.site / "notebooks" / "walk.ipynb").read_text(encoding="utf-8"))
    prose = "\n".join("".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "markdown")
    assert "Prediction" in prose and notebook_markup(prose) == []
    assert len(widest_number(prose)) <= numfmt.WIDEST, widest_number(prose)


# -- finding 2: the part in the navigation ---------------------------------------------------------------

@pytest.mark.integration
def test_the_part_is_a_text_title_in_every_pages_navigation(walked):
    built = pages(walked)
    assert len(built) > 5
    for name, html in built.items():
        assert live_markup(html) == [], name
        doc = Doc(html)
        titles = ["".join(e.text).strip() for e in doc.elements
                  if e.tag in ("label", "span") and e.inside("nav", "md-nav") and "onerror" in "".join(e.text)]
        if "lessons/" in name:
            assert any(t.startswith("<img src=x onerror=alert(1)>") for t in titles), f"{name}: no section title"


# -- finding 10: an escape sequence in lesson.toml main --------------------------------------------------

@pytest.mark.integration
def test_an_escape_in_main_reaches_no_terminal(tmp_path):
    site = make_site_project(tmp_path / "esc")
    site.add_lesson("esc")
    toml = site.code / "esc" / "lesson.toml"
    toml.write_text(toml.read_text(encoding="utf-8").replace(
        'main = "esc.py"', 'main = "\\u001b[31mred\\u001b]0;title\\u0007.py"'), encoding="utf-8")
    built = site.build()
    assert built.returncode != 0 and "main = " in build_output(built)  # refused, naming the field
    assert ESC not in build_output(built) and "\x07" not in build_output(built), build_output(built)
    assert "\\x1b[31mred" in build_output(built)  # shown, as an escape
    status = site.verify("--status")
    assert status.returncode != 0 and ESC not in status.stdout + status.stderr


# -- the walk: every directive, every field ---------------------------------------------------------------

@pytest.mark.unit
def test_the_walk_uses_every_registered_directive_in_both_forms():
    from verified_triton.site import directives

    used = set(re.findall(r"^::([a-z-]+)", WALK_PAGE + OTHER_PAGE + INDEX_PAGE, re.M))
    assert used == set(directives.REGISTRY), set(directives.REGISTRY) ^ used


@pytest.mark.integration
def test_no_hostile_element_or_attribute_in_any_built_page(walked):
    for name, html in pages(walked).items():
        assert live_markup(html) == [], name
    doc = Doc(walked.html("walk"))
    assert "<img src=x onerror=alert(1)>" in doc.all_text  # shown, as text
    source_pages = [html for name, html in pages(walked).items() if name.startswith("source/walk/x")]
    assert len(source_pages) == 1 and "x<img src=x onerror=alert(4)> `*y*`" in Doc(source_pages[0]).all_text
    course = Doc((walked.site / "index.html").read_text(encoding="utf-8")).all_text
    assert "⟨U+202E⟩evil" in course and "{{ x }}" in course and ":x:" in course and "$x$" in course


@pytest.mark.integration
def test_no_number_wider_than_numfmt_allows_in_any_cell(walked):
    for name, html in pages(walked).items():
        for cell in table_cells(html):
            assert len(widest_number(cell)) <= numfmt.WIDEST, f"{name}: {cell[:120]!r}"


class _Tags(HTMLParser):
    def __init__(self, source: str):
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []
        self.feed(source)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if any(k.startswith("on") for k in attrs) or (tag == "img" and attrs.get("src") == "x") or tag == "svg" \
                or any((v or "").lower().startswith("javascript:") for v in attrs.values()):
            self.found.append(f"<{tag} {attrs}>")


def notebook_markup(markdown: str) -> list[str]:
    """What Jupyter would make of hostile text in a Markdown cell (it renders raw HTML, too)."""
    tokens = MarkdownIt("gfm-like").parse(markdown)
    found = _Tags(MarkdownIt("gfm-like").render(markdown)).found
    found += [f"a link to {t.attrs.get('href')}" for block in tokens for t in (block.children or [])
              if t.type == "link_open" and not str(t.attrs.get("href", "")).startswith(("https://", "../", "#"))
              and "attachment:" not in str(t.attrs.get("href", ""))]
    return found


@pytest.mark.integration
def test_notebook_markdown_renders_without_hostile_elements(walked):
    for name in ("walk", "other"):
        notebook = json.loads((walked.site / "notebooks" / f"{name}.ipynb").read_text(encoding="utf-8"))
        for i, cell in enumerate(notebook["cells"]):
            source = "".join(cell["source"])
            if cell["cell_type"] == "markdown":
                assert notebook_markup(source) == [], f"{name} cell {i}: {source[:300]}"
            for output in cell.get("outputs", []):
                assert ESC not in "".join(output.get("text", "")), f"{name} cell {i}: an escape in its output"


@pytest.mark.integration
def test_the_readme_shows_hostile_text_as_text(walked):
    with zipfile.ZipFile(io.BytesIO((walked.site / "downloads" / "walk.zip").read_bytes())) as zf:
        readme = zf.read("walk/README.md").decode("utf-8")
    assert ESC not in readme and "\u202e" not in readme
    assert _Tags(MarkdownIt("gfm-like").render(readme)).found == []
    text = re.sub(r"<[^>]+>", "", MarkdownIt("gfm-like").render(readme))
    import html as html_module

    shown = html_module.unescape(text)
    assert '<img src=x onerror=alert(1)> "><svg onload=alert(2)> *x* `x` [a](javascript:alert(3))' in shown
    assert "pip install torch --index-url https://download.pytorch.org/whl/cpu" in readme


@pytest.mark.integration
def test_nothing_printed_carries_an_escape(walked):
    assert ESC not in walked.output and "\u202e" not in walked.output
    status = walked.verify("--status")
    assert ESC not in status.stdout + status.stderr and "\u202e" not in status.stdout + status.stderr


@pytest.mark.integration
def test_an_exercises_hostile_hint_and_proof_are_text_on_the_page(walked):
    html = walked.html("walk")
    assert live_markup(html) == []
    text = Doc(html).all_text
    assert "Solution; its check catches 1 of 2 listed mistakes" in text and "check is not proven" in text
    assert "Hint. <img src=x onerror=alert(1)>" in text  # the hint, from exercises.py, shown as text
    assert f"the mistake 2 {SHORT[:20]}" in text  # the mistake let through, named as text
