"""The home page for a learner (issue 32 item 1): the first lesson one tap away, what each part needs, the map.

::course-start, ::course-needs and ::course (site/directives/course.py) read only lesson.toml (title, part,
summary, [requires]) and the judgement: no list on the home page is typed.
"""

from __future__ import annotations

from html import unescape

import markdown
import pytest

from conftest import PASSING, fake_record
from test_render import EXTENSIONS, page_of
from verified_triton.judge.evidence import write_record
from verified_triton.site.directives.course import course, course_needs, course_start, short_summary, spans

pytestmark = pytest.mark.unit


def course_of(project):
    """Five lessons in two parts: capabilities 7.0, 7.0, 9.0 (Foundations), 8.0 and none (Matmul); the last
    lesson's interpreter run stopped by design."""
    for order, (name, part, need) in enumerate([("one", "Foundations", "7.0"), ("two", "Foundations", "7.0"),
                                                 ("three", "Foundations", "9.0"), ("four", "Matmul", "8.0"),
                                                 ("five", "Matmul", "")], start=1):
        requires = f'[requires]\ncapability = "{need}"\n' if need else ""
        project.add(name, PASSING, order=order, toml=f'part = "{part}"\n{requires}')
    write_record(project.evidence, fake_record(project.lesson("one"), "gpu"))
    write_record(project.evidence, fake_record(project.lesson("five"), "interpreter", "by-design", exit_code=3,
                                               reason="kernels need a GPU"))
    return page_of(project, None, "index.md")


def test_the_start_button_goes_to_the_first_lesson(project):
    md = course_start(course_of(project))
    assert md == "[Start with lesson 1: Fake lesson one](lessons/one.md){ .md-button .md-button--primary }"


def test_the_map_has_a_heading_per_part_and_a_line_per_lesson_in_course_order(project):
    html = markdown.markdown(course(course_of(project)), extensions=EXTENSIONS)
    assert [h.split(">")[1].split("<")[0] for h in html.split("<h3")[1:]] == ["Foundations", "Matmul"]
    foundations, matmul = html.split("<h3")[1:]
    assert foundations.count("<li>") == 3 and matmul.count("<li>") == 2
    for number, name in enumerate(["one", "two", "three", "four", "five"], start=1):
        assert f'<strong>{number}</strong> <a href="lessons/{name}.md">Fake lesson {name}</a>' in html
    # each line carries its badge, small, and the summary
    assert '<small class="vt-map-badge"><span class="vt-badge vt-partial">PARTIALLY VERIFIED</span></small>' in html
    assert html.count("a fake") == 5


def test_what_each_part_needs_comes_from_requires(project):
    html = unescape(markdown.markdown(course_needs(course_of(project)), extensions=EXTENSIONS))
    rows = [row for row in html.split("<tr>")[2:]]
    assert "Foundations <small>(1–3)</small>" in rows[0] and "Matmul <small>(4, 5)</small>" in rows[1]
    assert "7.0+: 1, 2 · 9.0+: 3" in rows[0] and "every lesson" in rows[0]
    assert "8.0+: 4 · not stated: 5" in rows[1]
    assert "5: the checks that need no GPU; the kernels run on the GPU only" in rows[1]
    # Colab's free T4 (7.5) runs the lessons that need 7.0, none that state nothing or more
    cells = [row.split("<td>")[-1].split("</td>")[0] for row in rows]
    assert cells == ["1, 2", "none"]
    assert "On Colab's free T4 (7.5)" in html


def test_a_long_summary_is_cut_at_a_word_and_says_so():
    assert short_summary("The first Triton program: grids and masks; GB/s against torch.") == \
        "The first Triton program: grids and masks"
    long = "A device table of per-group pointers, shapes and strides, and a fixed grid of programs walking one tile"
    assert short_summary(long, limit=60) == "A device table of per-group pointers, shapes and strides …"
    assert short_summary("word " * 40, limit=30).endswith(" …") and len(short_summary("word " * 40, limit=30)) <= 32


def test_lesson_numbers_read_as_spans():
    assert spans([1, 2, 3, 5]) == "1–3, 5" and spans([4, 5]) == "4, 5" and spans([7]) == "7"
