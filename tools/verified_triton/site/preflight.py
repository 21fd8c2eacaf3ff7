"""What the site could not build from a lesson, found before verify runs it.

One job: a quick parse, no site build. Each region of the lesson's source files (snippets.py's parser),
and every `::` line of its page as the page model reads it (site/page.py: fenced code and directive bodies are
text), against the registry's grammar and argument counts (a `::snippet` region and a `::step` name against the
files they name: snippets.py, lesson_source.py), is checked the way the build reads it, and what fails is said
as FILE:LINE and why, every problem at once. verify calls it before it plans or runs anything, so a page the build would
refuse costs no run, no GPU time, and no record that the fix would make stale.

What needs a run's results (a `::table` or `::prediction` NAME) is left to the build. Nothing imported here
needs MkDocs, pymdownx, nbformat or YAML: a GPU machine's stock python3 runs it (tests/test_layers.py).
"""

from __future__ import annotations

from pathlib import Path

from verified_triton.core.lessons import Lesson
from verified_triton.core.limits import LIMITS
from verified_triton.core.safefs import UnsafePathError, read_text
from verified_triton.site import lesson_source
from verified_triton.site.directives import DirectiveError, PageError, parse, resolve
from verified_triton.site.directives.snippet import find_region
from verified_triton.site.snippets import SnippetError, read_regions


def problems(lessons: list[Lesson], docs_dir: Path) -> list[str]:
    """Every problem the site build would stop at in these lessons, each as 'FILE:LINE: what', paths
    relative to the repository. A project without a docs/ folder has no pages to check: only regions."""
    found: list[str] = []
    for lesson in lessons:
        found += _region_problems(lesson)
        if docs_dir.is_dir():
            found += _page_problems(lesson, docs_dir)
    return list(dict.fromkeys(found))  # a module several lessons import is said once


def _region_problems(lesson: Lesson) -> list[str]:
    found = []
    for path in lesson.source_files():
        if path.suffix == ".py":
            try:
                read_regions(path, lesson.folder.parent)
            except SnippetError as exc:
                found.append(_snippet_error(lesson, exc))
    return found


def _snippet_error(lesson: Lesson, exc: SnippetError) -> str:
    where = _relative(lesson, Path(exc.path))
    return f"{where}:{exc.line}: {exc.message}" if exc.line else f"{where}: {exc.message}"


def _relative(lesson: Lesson, path: Path) -> str:
    try:
        return path.absolute().relative_to(lesson.root).as_posix()
    except ValueError:
        return str(path)


def _page_problems(lesson: Lesson, docs_dir: Path) -> list[str]:
    page = docs_dir / lesson.page
    shown = f"docs/{lesson.page}"
    if not page.is_file():
        return [f"{_relative(lesson, lesson.folder / 'lesson.toml')}: page = '{lesson.page}' does not exist "
                "under docs/"]
    try:
        text = read_text(page, LIMITS.source_file, docs_dir)
    except UnsafePathError as exc:
        return [f"{shown}: {exc.reason}"]
    try:
        model = parse(text)
    except PageError as exc:
        return [f"{shown}:{exc.line}: {exc.error}"]
    named = model.lesson
    found = []
    if named and named != lesson.name:
        found.append(f"{shown}:2: the front matter names lesson '{named}', but this is the page of "
                     f"'{lesson.name}' (its lesson.toml's page)")
    for command in model.commands():
        problem = _directive_problem(lesson, command.name, command.args, bool(named))
        if problem:
            found.append(f"{shown}:{command.line}: {problem}")
    return found


def _directive_problem(lesson: Lesson, name: str, args_text: str, has_lesson: bool) -> str:
    """What the build would say of one directive line ('' when nothing before a run can be wrong with it)."""
    try:
        _, args = resolve(name, args_text, has_lesson)
        if name == "snippet":
            find_region(lesson.folder.parent, *args)
        elif name == "step":
            lesson_source.read(lesson, lesson.folder.parent).step(args[0])
    except SnippetError as exc:  # the file (named), or its region (the file is in the line already)
        file = args[0] if not (lesson.folder.parent / args[0].removeprefix("code/")).is_file() else ""
        return f"'::{name} {args_text}': " + (f"{file}: " if file else "") + exc.message
    except (DirectiveError, lesson_source.SourceError) as exc:
        return str(exc)
    return ""
