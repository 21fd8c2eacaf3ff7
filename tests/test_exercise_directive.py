"""`::exercise NAME`, the Practice section's line (issue 50 item 5), rendered from the sources and the proof.

The starter (region NAME of exercises.py), the command that checks it, the hint (from exercises.py's
`@practice.exercise`), and the solution (region NAME of solutions.py) folded under "its check catches N of N
listed mistakes" from the judged proof; a check the proof found wanting shows outside the fold; what the record
says reaches the page through the door.
"""

from __future__ import annotations

import html
from dataclasses import replace

import pytest

from conftest import REPO
from verified_triton.judge.exercises import ExercisesState, ExerciseVerdict, MistakeVerdict
from verified_triton.site import directives

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def site():
    lessons = [x for x in directives.discover(REPO / "code") if x.name == "vector-add"]
    return directives.Site.load(REPO / "code", REPO / "evidence", lessons=lessons)


def page(site, state=None):
    st = site.status("vector-add")
    return directives.Page(site, "lessons/vector-add.md", st if state is None else replace(st, exercises=state))


def test_an_exercise_shows_its_starter_command_hint_and_folded_proven_solution(site):
    out = html.unescape(str(directives.expand("exercise", "axpy", page(site))))  # as the reader sees it
    starter, command, hint, fold = (out.index(s) for s in (
        'title="code/vector-add/exercises.py, lines', "TRITON_INTERPRET=1 python exercises.py --only axpy",
        "**Hint.** offsets", '??? success "Solution; its check catches 3 of 3 listed mistakes"'))
    assert starter < command < hint < fold
    assert "    # Your code here." in out and 'title="code/vector-add/solutions.py, lines' in out
    assert "the store without its mask (it says \u201cwrote past the end\u201d)" in out
    assert "!!! failure" not in out


def test_a_check_not_proven_is_said_outside_the_fold_and_the_records_words_are_escaped(site):
    mistakes = [MistakeVerdict("<b>no mask</b>", False, True, "past", "it passed"),
                MistakeVerdict("off by one", True, True, "past", "wrote past the end")]
    state = ExercisesState("failed", None, [ExerciseVerdict("axpy", "", "failed", "passed", mistakes)], ["x"], "x")
    out = str(directives.expand("exercise", "axpy", page(site, state)))
    assert '!!! failure "This exercise\'s check is not proven"' in out
    assert "the mistake &#60;b&#62;no mask&#60;/b&#62; gets through" in out and "<b>" not in out
    assert '??? success "Solution; its check catches 1 of 2 listed mistakes"' in out
    stale = replace(state, state="stale")
    assert '??? success "Solution (its check is proven for an earlier version)"' in \
        str(directives.expand("exercise", "axpy", page(site, stale)))


def test_an_exercise_the_lesson_does_not_pose_is_refused_naming_those_it_does(site):
    with pytest.raises(directives.DirectiveError, match="poses no exercise of that name .it poses: axpy, grid"):
        directives.expand("exercise", "saxpy", page(site))
