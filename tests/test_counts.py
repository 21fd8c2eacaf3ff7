"""Counts are written as people write them: "1 check passed", "the lesson has", "1 record", never
"1 checks passed" or "all 1 lessons" (issue 46, a newcomer's first hour).

The places that write a count were found by a grep of tools/ for an f-string's number followed by a plural
noun (`{len(records)} records`); each writes it through core/numfmt.py's `counted`, or says "the lesson"
for one. A course of one lesson with one check is where the plural showed.
"""

from __future__ import annotations

import shutil

import pytest

from conftest import make_project
from verified_triton.core.numfmt import counted
from verified_triton.site.door import MAX_LINE, MAX_LINES, clean_output

ONE_CHECK = 'lesson = Lesson("one")\nlesson.check("only", True, "the one check")\nsys.exit(lesson.finish())\n'


@pytest.mark.unit
@pytest.mark.parametrize("n, noun, plural, written", [
    (0, "check", "", "0 checks"), (1, "check", "", "1 check"), (2, "check", "", "2 checks"),
    (1234, "record", "", "1,234 records"), (1, "match", "matches", "1 match"), (3, "match", "matches", "3 matches"),
])
def test_counted_writes_one_in_the_singular(n, noun, plural, written):
    assert counted(n, noun, plural) == written


@pytest.mark.unit
def test_a_page_says_1_line_and_1_character_not_shown():
    """Before: '[... 1 lines not shown ...]' and '[... 1 more characters]'."""
    shown = clean_output("\n".join(["x"] * MAX_LINES + ["y" * (MAX_LINE + 1)]))
    assert "[... 1 line not shown; the evidence file has them ...]" in shown
    shown = clean_output("y" * (MAX_LINE + 1))
    assert shown.endswith("[... 1 more character]")


@pytest.mark.integration
def test_a_course_of_one_lesson_with_one_check_is_counted_in_the_singular(tmp_path):
    """Before: 'check: all 1 lessons have current, usable evidence', 'bundle: 1 records', 'import: 1 records
    merged', 'smoke: 1 of 1 lessons ran through'."""
    project = make_project(tmp_path / "project")
    project.add("one", ONE_CHECK)
    bundle = tmp_path / "one.tar.gz"
    run = project.verify("--mode", "interpreter", "--bundle", str(bundle))
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"bundle: 1 record -> {bundle}" in run.stdout

    status = project.verify("--status")
    assert "1 check passed under the interpreter" in status.stdout, status.stdout
    check = project.verify("--check")
    assert "check: the lesson has current, usable evidence" in check.stdout, check.stdout

    other = make_project(tmp_path / "other")
    shutil.copytree(project.code, other.code, dirs_exist_ok=True)
    imported = other.verify("--import", str(bundle))
    assert "import: 1 record merged, 0 refused" in imported.stdout, imported.stdout + imported.stderr

    smoke = project.verify("--smoke")
    assert "smoke: 1 of 1 lesson ran through on the CPU" in smoke.stdout, smoke.stdout + smoke.stderr

    for said in (run.stdout, status.stdout, check.stdout, imported.stdout, smoke.stdout):
        for wrong in ("1 checks", "1 records", "1 lessons", "all 1 "):
            assert wrong not in said, said
