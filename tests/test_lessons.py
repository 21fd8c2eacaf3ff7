"""lessons.py: finding lessons, reading lesson.toml, and hashing the source a run depends on."""

from __future__ import annotations

import shutil

import pytest

from conftest import PASSING, REPO, make_project
from verified_triton.core.lessons import DEFAULT_TIMEOUT, LessonError, discover, file_sha256, load_lesson
from verified_triton.site.snippets import read_regions

pytestmark = pytest.mark.unit

HELPER_USER = """\
    import json
    import helper
    from helper import thing  # noqa: F401
    from . import sibling  # noqa: F401  (relative: not followed)

    lesson = Lesson("uses-helper")
    lesson.check("helper", helper.VALUE == 2)
    sys.exit(lesson.finish())
"""
FILES = {
    "helper.py": "import util\nVALUE = util.ONE + 1\nthing = None\n",
    "util.py": "ONE = 1\n",
    "unused.py": "NOT_IMPORTED = True\n",
    "sibling.py": "X = 1\n",
}


def test_source_files_follow_local_imports_transitively(project):
    project.add("uses-helper", HELPER_USER, files=FILES)
    lesson = project.lesson("uses-helper")
    assert [lesson.relative(p) for p in lesson.source_files()] == [
        "code/lessonkit.py",
        "code/uses-helper/helper.py",
        "code/uses-helper/lesson.toml",
        "code/uses-helper/uses_helper.py",
        "code/uses-helper/util.py",
    ]


@pytest.mark.parametrize("edited, changes", [
    ("util.py", True), ("helper.py", True), ("uses_helper.py", True),
    ("unused.py", False), ("sibling.py", False),
    ("lesson.toml", False),  # a comment: lesson.toml counts by what it says about running the lesson
])
def test_source_hash_changes_with_every_source_file_and_nothing_else(project, edited, changes):
    folder = project.add("uses-helper", HELPER_USER, files=FILES)
    before = project.lesson("uses-helper").source_hash()
    path = folder / edited
    path.write_text(path.read_text() + "\n# edited\n")
    assert (project.lesson("uses-helper").source_hash() != before) is changes


@pytest.mark.parametrize("addition, changes", [
    ("timeout = 77\n", True),
    ("[requires]\ncapability = \"9.0\"\n", True),
    ("[interpreter]\nsupported = false\nreason = \"no\"\n", True),
    ("[gpu.expected_exits]\n\"3\" = \"a gate\"\n", True),
    ("prerequisites = []\n", False),
])
def test_lesson_toml_counts_by_its_run_keys(project, addition, changes):
    folder = project.add("good", PASSING)
    before = project.lesson("good").source_hash()
    toml = folder / "lesson.toml"
    toml.write_text(toml.read_text().replace('summary = "a fake"\n', 'summary = "a fake"\n' + addition))
    assert (project.lesson("good").source_hash() != before) is changes


@pytest.mark.parametrize("old, new", [
    ('title = "Fake lesson good"', 'title = "A new title"'),
    ('summary = "a fake"', 'summary = "reworded"'),
    ("order = 1", "order = 7"),
])
def test_placing_a_lesson_on_the_site_never_makes_its_evidence_stale(project, old, new):
    folder = project.add("good", PASSING)
    before = project.lesson("good").source_hash()
    toml = folder / "lesson.toml"
    toml.write_text(toml.read_text().replace(old, new))
    assert project.lesson("good").source_hash() == before


def test_source_hash_ignores_line_endings_and_location(project, tmp_path):
    folder = project.add("good", PASSING)
    before = project.lesson("good").source_hash()
    main = project.main_file("good")
    main.write_bytes(main.read_bytes().replace(b"\n", b"\r\n"))
    assert b"\r\n" in main.read_bytes()
    assert project.lesson("good").source_hash() == before
    lf = folder / "lf.py"
    lf.write_bytes(main.read_bytes().replace(b"\r\n", b"\n"))
    assert file_sha256(main) == file_sha256(lf)
    # The same sources in another checkout hash the same: evidence moves between machines.
    other = make_project(tmp_path / "elsewhere" / "deeper")
    shutil.copytree(project.code, other.code, dirs_exist_ok=True)
    assert other.lesson("good").source_hash() == before


def test_source_hash_depends_on_the_path_too(project):
    project.add("good", PASSING)
    before = project.lesson("good").source_hash()
    shutil.copytree(project.code / "good", project.code / "renamed")
    assert project.lesson("renamed").source_hash() != before


def test_defaults_and_timeouts(project):
    project.add("plain", PASSING)
    lesson = project.lesson("plain")
    assert lesson.title == "Fake lesson plain" and lesson.page == "lessons/plain.md"
    assert lesson.main == (project.code / "plain" / "plain.py").absolute()
    assert lesson.root == project.root.absolute()
    assert lesson.order == 1 and lesson.summary == "a fake" and lesson.prerequisites == ()
    for mode in ("interpreter", "gpu"):
        spec = lesson.modes[mode]
        assert spec.supported and spec.timeout == DEFAULT_TIMEOUT and spec.expected_exits == {}

    project.add("timed", PASSING, toml='timeout = 50\nprerequisites = ["plain"]\n[gpu]\ntimeout = 10\n'
                                        '[gpu.expected_exits]\n"3" = "needs sm_90"\n"-6" = "aborts"\n')
    timed = project.lesson("timed")
    assert timed.modes["interpreter"].timeout == 50.0
    assert timed.modes["gpu"].timeout == 10.0
    assert timed.modes["gpu"].expected_exits == {3: "needs sm_90", -6: "aborts"}
    assert timed.prerequisites == ("plain",)


def test_discover_orders_lessons_and_skips_folders_without_toml(project):
    project.add("zeta", PASSING, order=1)
    project.add("alpha", PASSING, order=2)
    project.add("beta", PASSING, order=1)
    (project.code / "scratch").mkdir()
    (project.code / "scratch" / "notes.py").write_text("x = 1\n")
    assert [lesson.name for lesson in discover(project.code)] == ["beta", "zeta", "alpha"]


@pytest.mark.parametrize("toml, expect", [
    ('main = "x.py"\npage = "p.md"\n', "missing field 'title'"),
    ('title = "t"\npage = "p.md"\n', "missing field 'main'"),
    ('title = "t"\nmain = "other.py"\npage = "p.md"\n', "main = 'other.py' is not a .py file in broken/"),
    ('title = "t"\nmain = "../x.py"\npage = "p.md"\n', "is not a .py file"),
    ('title = = "t"\n', "lesson.toml:"),
    ('title = "t"\nmain = "x.py"\npage = "p.md"\n[gpu.expected_exits]\n"one" = "why"\n', "expected_exits"),
    ('title = "t"\nmain = "x.py"\npage = "p.md"\ntitel = "typo"\n', "unknown field 'titel'"),
    ('title = "t"\nmain = "x.py"\npage = "p.md"\norder = "first"\n', "order: expected a number"),
    ('title = "t"\nmain = "x.py"\npage = "p.md"\norder = 2\nafter = "x"\n', "either order = N or after"),
    ('title = "t"\nmain = "x.py"\npage = "p.md"\nafter = "broken"\n', "must name another lesson"),
    ('title = "t"\nmain = "x.py"\npage = "p.md"\n[requires]\ncapability = "nine"\n', "is not a version"),
    ('title = "t"\nmain = "x.py"\npage = "p.md"\ntimeout = 99999\n', "timeout must be between"),
])
def test_lesson_toml_errors_name_the_file(project, toml, expect):
    folder = project.code / "broken"
    folder.mkdir()
    (folder / "x.py").write_text("x = 1\n")
    (folder / "lesson.toml").write_text(toml)
    with pytest.raises(LessonError) as info:
        load_lesson(folder)
    assert str(info.value).startswith(str(folder / "lesson.toml"))
    assert expect in str(info.value)


def test_a_syntax_error_does_not_stop_finding_and_hashing_the_sources(project):
    """Imports are found without parsing (a course reads the kit hundreds of times): a syntax error
    surfaces when the lesson runs (tests/test_verify.py), and its file is still hashed, so fixing it
    makes the evidence stale."""
    project.add("broken", PASSING, files={"helper.py": "def f(:\n"})
    main = project.main_file("broken")
    main.write_text(main.read_text() + "import helper\n")
    lesson = project.lesson("broken")
    assert "code/broken/helper.py" in lesson.source_file_hashes()
    before = lesson.source_hash()
    (project.code / "broken" / "helper.py").write_text("def f():\n    pass\n")
    assert project.lesson("broken").source_hash() != before


def _placed(project, name: str, placement: str, part: str = "") -> None:
    """A lesson whose lesson.toml says only `placement` (order = N or after = "x") about its place."""
    folder = project.add(name, PASSING)
    toml = folder / "lesson.toml"
    text = toml.read_text().replace("order = 1\n", placement + "\n")
    toml.write_text(text + (f'part = "{part}"\n' if part else ""))


def test_a_fractional_order_goes_between_two_lessons_without_renumbering_them(project):
    for name, order in (("one", "1"), ("two", "2"), ("three", "3")):
        _placed(project, name, f"order = {order}")
    _placed(project, "between", "order = 2.5")
    assert [lesson.name for lesson in discover(project.code)] == ["one", "two", "between", "three"]


def test_after_places_a_lesson_right_behind_another(project):
    """after = "x": no number to choose; several after one lesson by name, a chain in its order."""
    for name, order in (("one", "1"), ("two", "2"), ("three", "3")):
        _placed(project, name, f"order = {order}")
    _placed(project, "b-after-one", 'after = "one"')
    _placed(project, "a-after-one", 'after = "one"')
    _placed(project, "c-after-b", 'after = "b-after-one"')
    _placed(project, "last-after-three", 'after = "three"')
    lessons = discover(project.code)
    assert [lesson.name for lesson in lessons] == [
        "one", "a-after-one", "b-after-one", "c-after-b", "two", "three", "last-after-three"]
    # a lesson placed by `after` takes its anchor's order, so sorting by order agrees with the course
    assert [lesson.order for lesson in lessons] == [1, 1, 1, 1, 2, 3, 3]


@pytest.mark.parametrize("placements, expect", [
    ({"a": 'after = "nope"'}, "after = 'nope' is not a lesson"),
    ({"a": 'after = "b"', "b": 'after = "a"'}, "makes a loop"),
])
def test_after_that_cannot_be_placed_names_the_file(project, placements, expect):
    _placed(project, "anchor", "order = 1")
    for name, placement in placements.items():
        _placed(project, name, placement)
    with pytest.raises(LessonError) as info:
        discover(project.code)
    assert str(info.value).startswith(str(project.code.absolute() / "a" / "lesson.toml"))
    assert expect in str(info.value)


@pytest.mark.parametrize("prerequisites, expect", [
    ('["nope"]', "prerequisite 'nope' is not a lesson"),
    ('["later"]', "prerequisite 'later' comes later in the course"),
])
def test_prerequisites_name_earlier_lessons(project, prerequisites, expect):
    project.add("first", PASSING, order=1, toml=f"prerequisites = {prerequisites}\n")
    project.add("later", PASSING, order=2)
    with pytest.raises(LessonError) as info:
        discover(project.code)
    assert str(info.value).startswith(str(project.code.absolute() / "first" / "lesson.toml"))
    assert expect in str(info.value)


# -- the real course ------------------------------------------------------------------

def test_every_real_lesson_loads_and_its_regions_parse():
    lessons = discover(REPO / "code")
    assert lessons, "no lessons under code/"
    for lesson in lessons:
        files = [lesson.relative(p) for p in lesson.source_files()]
        assert lesson.relative(lesson.main) in files and f"code/{lesson.name}/lesson.toml" in files
        assert len(lesson.source_hash()) == 64
        read_regions(lesson.main)  # raises SnippetError naming FILE:LINE when a marker is malformed
    assert len({lesson.name for lesson in lessons}) == len(lessons)


BASELINE_USER = """\
    def baseline():
        import base_kernel  # another lesson's module: found through lesson.toml's `uses`
        return base_kernel.VALUE

    lesson = Lesson("user")
    sys.exit(lesson.finish())
"""


def test_uses_puts_another_lessons_module_in_the_hash_and_the_archive(project):
    """Fails without `uses`: the module of the other lesson was neither hashed nor archived."""

    project.add("base", "lesson = Lesson('base')\nsys.exit(lesson.finish())\n",
                files={"base_kernel.py": "VALUE = 1\n"})
    project.add("user", BASELINE_USER, toml='uses = ["base"]\n', order=2)
    lesson = project.lesson("user")
    assert "code/base/base_kernel.py" in [lesson.relative(p) for p in lesson.source_files()]
    before = lesson.source_hash()
    (project.code / "base" / "base_kernel.py").write_text("VALUE = 2\n")
    assert project.lesson("user").source_hash() != before
    from verified_triton.site import sources

    files = sources.lesson_files(project.lesson("user"), project.code)
    assert sorted(files) == ["base_kernel.py", "lesson.toml", "lessonkit.py", "user.py"]


def test_without_uses_the_hash_of_a_lesson_is_what_it_was(project):
    """`uses` enters the run keys only when given: other lessons' evidence is not made stale by it."""
    folder = project.add("plain", "lesson = Lesson('plain')\nsys.exit(lesson.finish())\n")
    before = project.lesson("plain").source_hash()
    toml = folder / "lesson.toml"
    toml.write_text(toml.read_text() + "uses = []\n")
    assert project.lesson("plain").source_hash() == before


@pytest.mark.parametrize("uses", ['["nowhere"]', '["user"]', '["../base"]'])
def test_uses_must_name_another_lesson(project, uses):
    project.add("base", "lesson = Lesson('base')\nsys.exit(lesson.finish())\n")
    project.add("user", BASELINE_USER, toml=f"uses = {uses}\n", order=2)
    with pytest.raises(LessonError, match=r"lesson\.toml:6: uses = .* must name another lesson's folder"):
        project.lesson("user")
