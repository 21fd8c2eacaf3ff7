"""A course of hundreds of lessons costs each shared file once, not once per lesson (issue 46, item 6).

Not timing tests: each counts the work a judgement or a build does for N lessons that share files, and holds
it to once per file. NOTES.md ("Scale, 223 lessons") has the wall times these counts stand for
(tools/bench_scale.py).
"""

from __future__ import annotations

import ast
import collections

import pytest

pytestmark = pytest.mark.unit

LESSONS = 4

SHARED = '''\
import triton
import triton.language as tl


@triton.jit
def shared_kernel(x_ptr):
    pass
'''

BODY = '''\
from shared_kernels import shared_kernel  # noqa: E402,F401
import triton  # noqa: E402


@triton.jit
def own_kernel(x_ptr):
    pass


if __name__ == "__main__":
    lesson = Lesson("LESSON")
    sys.exit(lesson.finish())
'''


@pytest.fixture
def course(project):
    """LESSONS lessons, each importing the kit and a module of kernels they all share."""
    (project.code / "shared_kernels.py").write_text(SHARED, encoding="utf-8")
    names = [f"lesson-{i}" for i in range(LESSONS)]
    for i, name in enumerate(names):
        project.add(name, BODY.replace("LESSON", name), order=i + 1)
    return project, names


def test_the_memory_check_parses_each_shared_module_once_for_every_lesson(course, monkeypatch):
    """The lessons' kernels (judge/memory.py) are found with a parse of each file once per version of the file:
    the module every lesson imports was parsed once per lesson, the kit (85 KB) too, which was most of
    `verify.py --status` for 223 lessons (15 of 18 s under cProfile)."""
    from verified_triton.judge.memory import lesson_kernels

    project, names = course
    parsed: collections.Counter[str] = collections.Counter()
    parse = ast.parse

    def counting(source, *args, **kwargs):
        parsed[source] += 1
        return parse(source, *args, **kwargs)

    monkeypatch.setattr(ast, "parse", counting)
    kernels = [lesson_kernels(project.lesson(name)) for name in names]
    assert kernels == [{"shared_kernel", "own_kernel"}] * LESSONS
    assert parsed[SHARED] == 1
    assert parsed[(project.code / "lessonkit.py").read_text(encoding="utf-8")] <= 1
    assert max(parsed.values()) == 1, "a file was parsed more than once"
