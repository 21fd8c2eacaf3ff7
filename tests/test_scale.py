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


def test_the_glossary_reaches_every_page_without_being_parsed_on_each(monkeypatch):
    """Every page has the glossary's definitions, from the abbr extension's glossary, which the hook reads once
    per build: appended to each page's text (pymdownx.snippets' auto_append), its hundred definitions were
    parsed one line at a time on every page, each time testing every block processor against the rest of the
    file: about half of a strict build of 223 lessons (94 s)."""
    import markdown
    from markdown.extensions.abbr import AbbrBlockprocessor
    from mkdocs.config import load_config

    from conftest import REPO

    config = load_config(str(REPO / "mkdocs.yml"))
    config = config.plugins.on_config(config)  # the hooks', as a build runs them
    parsed = []
    run = AbbrBlockprocessor.run

    def counting(self, parent, blocks):
        block = blocks[0]
        found = run(self, parent, blocks)
        if found:  # a definition, taken from the page's text
            parsed.append(block[:40])
        return found

    monkeypatch.setattr(AbbrBlockprocessor, "run", counting)
    md = markdown.Markdown(extensions=config["markdown_extensions"], extension_configs=config["mdx_configs"])
    html = md.convert("# A page\n\nA warp runs the program.\n")
    assert '<abbr title="32 threads' in html, "the glossary's definition of 'warp' did not reach the page"
    assert parsed == [], f"a page parsed {len(parsed)} definitions of its own, the glossary appended to it"


def test_the_record_pages_are_listed_once_per_build_not_once_per_page(monkeypatch):
    """Every page asks the hook whether it is a lesson's record page: the list was made afresh for each, from
    every lesson (307,514 calls of record_uri for the 1,358 pages of 223 lessons); it is made once per build."""
    from mkdocs.config import load_config

    from conftest import REPO
    from verified_triton.core.lessons import discover
    from verified_triton.site import hooks, record_page

    config = load_config(str(REPO / "mkdocs.yml"))
    config.plugins.on_config(config)  # the hooks', as a build runs them
    made = []
    record_uri = record_page.record_uri
    monkeypatch.setattr(record_page, "record_uri", lambda lesson: made.append(lesson.name) or record_uri(lesson))
    asked = [hooks._record_uris() for _page in range(50)]
    assert made == [], f"{len(made)} record uris made for 50 pages"
    assert set(asked[0]) == {record_uri(lesson) for lesson in discover(REPO / "code")}
