"""Hostile input, issue 47 (round 4), items 5 and 11: what a source hash covers, and files nested too deeply.

5. A lesson importing a module from experiments/ kept its source hash when that module changed
   (core/lessons.py looked in the lesson's folder, code/ and `uses` only). Which module Python imports there
   depends on the sys.path the lesson builds as it runs, and a reader's zip carries code/ only: an import the
   repository holds outside code/ is refused, naming the file; a package inside the lesson's folder is hashed
   whole.
11. A 30,000-deep nested array in a lesson.toml or in evidence/awaiting-gpu.toml ended in a RecursionError
   traceback: each is now a bad file, named, with exit 2.

Each test failed on the code before its change.
"""

from __future__ import annotations

import pytest

from conftest import PASSING
from verified_triton.core.lessons import LessonError

pytestmark = pytest.mark.integration

DEEP = "[" * 30_000 + "]" * 30_000
EXPERIMENT_IMPORT = """\
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments"))
    from probe import measured  # noqa: E402

    lesson = Lesson("uses-probe")
    lesson.check("probe", measured() == 1, "the experiment's helper")
    sys.exit(lesson.finish())
"""


def no_traceback(result) -> None:
    assert "Traceback" not in result.stdout + result.stderr, result.stdout + result.stderr


def test_an_import_from_outside_code_is_refused_naming_the_file(project):
    (project.root / "experiments").mkdir()
    (project.root / "experiments" / "probe.py").write_text("def measured():\n    return 1\n")
    project.add("uses-probe", EXPERIMENT_IMPORT)
    with pytest.raises(LessonError, match=r"imports 'probe', which is experiments/probe\.py, outside code/"):
        project.lesson("uses-probe").source_hash()
    result = project.verify("--status")
    assert result.returncode == 2 and "experiments/probe.py, outside code/" in result.stderr
    no_traceback(result)


def test_a_package_in_the_lessons_folder_is_hashed_whole(project):
    project.add("packaged", "from kernels.tiles import one  # noqa: F401\n" + PASSING.replace("    ", ""),
                files={})
    package = project.code / "packaged" / "kernels"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "tiles.py").write_text("def one():\n    return 1\n")
    lesson = project.lesson("packaged")
    assert {"code/packaged/kernels/__init__.py", "code/packaged/kernels/tiles.py"} <= set(lesson.source_file_hashes())
    before = lesson.source_hash()
    (package / "tiles.py").write_text("def one():\n    return 2\n")
    assert project.lesson("packaged").source_hash() != before


def test_the_course_imports_nothing_from_outside_code():
    from conftest import REPO
    from verified_triton.core.lessons import discover

    for lesson in discover(REPO / "code"):
        assert all(f.startswith("code/") for f in lesson.source_file_hashes()), lesson.name


def test_a_deeply_nested_lesson_toml_is_a_bad_file(project):
    project.add("deep", PASSING, toml=f"nested = {DEEP}\n")
    result = project.verify("--status")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "lesson.toml: nested too deeply to read" in result.stderr
    no_traceback(result)


def test_a_deeply_nested_awaiting_file_is_a_bad_file(project):
    project.add("good", PASSING)
    (project.evidence / "awaiting-gpu.toml").write_text(f"awaiting = {DEEP}\n")
    result = project.verify("--check")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "awaiting-gpu.toml: nested too deeply to read" in result.stderr
    no_traceback(result)
