"""verify refuses what the page cannot build (issue 37, item 2): before it plans or runs anything, it checks the
lesson's regions and every `::` line of its page (site/preflight.py, a quick parse, no site build). Before, a
page naming a region that does not exist, or a `# snippet:` never closed, passed `verify.py --lesson`: the run
was recorded, the fix changed the source hash, and the evidence was STALE (on a GPU: a device session lost)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import SiteProject, make_site_project
from verified_triton.core.lessons import discover
from verified_triton.site import preflight

ROOT = Path(__file__).resolve().parent.parent

SOURCE = '''\
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]
from lessonkit import Lesson  # noqa: E402


# snippet: kernel
def kernel():
    return 1
# end snippet


def main() -> int:
    lesson = Lesson("LESSON")
    with lesson.step("checks"):
        lesson.check("one", kernel() == 1)
    if lesson.step("timing", needs_gpu="timings need a GPU"):
        print("timed")
    return lesson.finish()


if __name__ == "__main__":
    sys.exit(main())
'''

PAGE = """\
---
lesson: LESSON
---

# A lesson

::status

```markdown
::snippet code/LESSON/LESSON.py inside-a-fence-is-text
::nonsense
```

::snippet code/LESSON/LESSON.py kernel

::step checks

## Timing

::step timing

::prediction p
    The body of a directive is text: ::nonsense here is not a directive.

::output
"""


@pytest.fixture
def site(tmp_path) -> SiteProject:
    project = make_site_project(tmp_path / "repo")
    project.add_lesson("lesson", PAGE.replace("LESSON", "lesson"), source=SOURCE.replace("LESSON", "lesson"))
    return project


def edit(path: Path, old: str, new: str) -> int:
    """Replace `old` once; the 1-based line where `new` now starts."""
    text = path.read_text(encoding="utf-8")
    assert text.count(old) >= 1, old
    text = text.replace(old, new, 1)
    path.write_text(text, encoding="utf-8")
    return text[:text.index(new)].count("\n") + 1


def page_of(site: SiteProject) -> Path:
    return site.docs / "lessons" / "lesson.md"


def refused(site: SiteProject, *args: str, **env: str) -> str:
    """verify on the lesson: exit 2, nothing run, nothing recorded; its stderr."""
    before = site.files()
    result = site.verify("--lesson", "lesson", *args, **env)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "running" not in result.stdout and "machine:" not in result.stdout, result.stdout
    assert site.files() == before, "verify recorded something"
    assert "nothing was run and nothing was written" in result.stderr
    assert "Traceback" not in result.stderr
    return result.stderr


@pytest.mark.unit
def test_a_good_lesson_passes_and_its_fenced_and_body_lines_are_text(site):
    lessons = discover(site.code)
    assert preflight.problems(lessons, site.docs) == []


@pytest.mark.integration
def test_a_page_naming_a_region_that_does_not_exist(site):
    line = edit(page_of(site), "::snippet code/lesson/lesson.py kernel", "::snippet code/lesson/lesson.py kernal")
    said = refused(site, "--mode", "interpreter")
    assert f"error: docs/lessons/lesson.md:{line}: '::snippet code/lesson/lesson.py kernal': no region named " \
           "'kernal' (regions in this file: kernel)" in said, said


@pytest.mark.integration
def test_a_page_naming_a_file_that_does_not_exist(site):
    line = edit(page_of(site), "::snippet code/lesson/lesson.py kernel", "::snippet code/lesson/lessons.py kernel")
    said = refused(site)
    assert f"docs/lessons/lesson.md:{line}: '::snippet code/lesson/lessons.py kernel': code/lesson/lessons.py" \
           in said, said


@pytest.mark.integration
def test_a_snippet_never_closed(site):
    main = site.code / "lesson" / "lesson.py"
    edit(main, "    return 1\n# end snippet\n", "    return 1\n")
    line = SOURCE.splitlines().index("# snippet: kernel") + 1
    said = refused(site)
    assert f"error: code/lesson/lesson.py:{line}: region 'kernel' is never closed with '# end snippet'" in said


@pytest.mark.integration
def test_an_unknown_directive_and_one_with_the_wrong_arguments(site):
    unknown = edit(page_of(site), "::status\n", "::statuss\n")
    wrong = edit(page_of(site), "::output\n", "::output everything\n")
    said = refused(site)
    assert f"error: docs/lessons/lesson.md:{unknown}: unknown directive '::statuss' (known: " in said
    assert (f"error: docs/lessons/lesson.md:{wrong}: '::output' takes no argument(s) then, if wanted, folded: "
            "::output [folded]; got 'everything'") in said, said


@pytest.mark.integration
def test_a_step_main_does_not_have(site):
    line = edit(page_of(site), "::step timing", "::step timings")
    said = refused(site)
    assert f"error: docs/lessons/lesson.md:{line}: '::step timings': main() in lesson.py has no step of that " \
           "name (steps: checks, timing)" in said, said


@pytest.mark.integration
def test_a_page_that_needs_its_lesson_but_names_none(site):
    edit(page_of(site), "---\nlesson: lesson\n---\n", "")
    said = refused(site)
    assert "error: docs/lessons/lesson.md:" in said and "'::status' needs the page's front matter to name its " \
        "lesson (lesson: NAME)" in said, said


@pytest.mark.integration
def test_force_does_not_skip_it_and_a_gpu_run_refuses_before_any_gpu_time(site):
    edit(page_of(site), "::step timing", "::step timings")
    for args in (["--force"], ["--mode", "gpu", "--force"], ["--smoke"]):
        assert "'::step timings'" in refused(site, *args, VT_FAKE_GPUS="0:NVIDIA H200")


@pytest.mark.integration
def test_a_missing_page_is_refused_where_the_project_has_pages(site):
    page_of(site).unlink()
    said = refused(site)
    assert "code/lesson/lesson.toml: page = 'lessons/lesson.md' does not exist under docs/" in said, said


@pytest.mark.integration
def test_every_problem_is_said_at_once(site):
    edit(page_of(site), "::status\n", "::statuss\n")
    edit(page_of(site), "::step timing", "::step timings")
    said = refused(site)
    assert "'::statuss'" in said and "'::step timings'" in said


@pytest.mark.unit
def test_todays_course_passes():
    assert preflight.problems(discover(ROOT / "code"), ROOT / "docs") == []
