"""The registry of `::` directives: one small module per directive, found at import.

A directive is a line of its own in a page, outside fenced code:

    ::NAME ARGS

Each module in this package registers its directives with `@directive`,
giving the name, whether it needs the page's lesson (front matter
`lesson: NAME`), its arguments and a one-line help. The hook expands pages
through `expand`, the unknown-directive error lists the registry, and the
authors' table in docs/writing-a-lesson.md is the `::directives` directive,
built from the same registry. Adding a directive is adding one module.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from lessons import Lesson, discover
from status import LessonStatus, judge


class DirectiveError(Exception):
    """A directive that cannot be expanded; the hook adds the page's FILE:LINE."""


LINE = re.compile(r"^(?P<indent>[ \t]*)::(?P<name>[a-z][a-z-]*)(?:[ \t]+(?P<args>.*?))?[ \t]*$")
FENCE = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})")


@dataclass
class Site:
    """What every page of one build shares: the lessons, their judgement, the configuration."""

    code_dir: Path
    evidence_dir: Path
    lessons: list[Lesson]
    statuses: dict[str, LessonStatus]
    repo_url: str = ""  # https://github.com/OWNER/REPO, or "" when not configured
    branch: str = "main"
    extra: dict = field(default_factory=dict)

    def status(self, name: str) -> LessonStatus | None:
        return self.statuses.get(name)

    @classmethod
    def load(cls, code_dir: Path, evidence_dir: Path, lessons: list[Lesson] | None = None, repo_url: str = "",
             branch: str = "main", extra: dict | None = None) -> Site:
        """The lessons under code/ (or those given, already discovered) and their judgement."""
        code_dir, evidence_dir = Path(code_dir).absolute(), Path(evidence_dir).absolute()
        lessons = discover(code_dir) if lessons is None else lessons
        statuses = {lesson.name: judge(lesson, evidence_dir) for lesson in lessons}
        return cls(code_dir, evidence_dir, lessons, statuses, repo_url, branch, dict(extra or {}))


@dataclass
class Page:
    site: Site
    src_uri: str  # docs-relative path of the page, e.g. lessons/vector-add.md
    lesson: LessonStatus | None  # the lesson the front matter names, if any
    notebook: bool = False  # rendering for a Jupyter notebook instead of the site
    attachments: dict[str, bytes] = field(default_factory=dict)  # images a notebook cell embeds

    @property
    def root(self) -> str:
        """The relative prefix from this page to the site root."""
        return "../" * self.src_uri.count("/")


@dataclass
class Directive:
    name: str
    needs_lesson: bool
    args: tuple[str, ...]  # argument names, shown in help; the count is checked
    help: str
    render: Callable[..., str]
    notebook: Callable[..., str] | None = None  # the form for a notebook; None: left out of notebooks

    @property
    def usage(self) -> str:
        return " ".join([f"::{self.name}", *self.args])


REGISTRY: dict[str, Directive] = {}


def directive(name: str, help: str, args: tuple[str, ...] = (), needs_lesson: bool = True):
    """Register `render(page, *args) -> Markdown` (with the page's LessonStatus as page.lesson)."""
    def register(fn: Callable[..., str]) -> Callable[..., str]:
        if name in REGISTRY:
            raise RuntimeError(f"directive ::{name} registered twice")
        REGISTRY[name] = Directive(name, needs_lesson, args, help, fn)
        return fn
    return register


def notebook_form(name: str):
    """Register the notebook form of directive `name` (plain Markdown that Jupyter renders)."""
    def register(fn: Callable[..., str]) -> Callable[..., str]:
        REGISTRY[name].notebook = fn
        return fn
    return register


def expand(name: str, args_text: str, page: Page) -> str:
    found = REGISTRY.get(name)
    if found is None:
        known = ", ".join(f"::{k}" for k in sorted(REGISTRY))
        raise DirectiveError(f"unknown directive '::{name}' (known: {known})")
    args = args_text.split()
    if len(args) != len(found.args):
        raise DirectiveError(f"'::{name}' takes {len(found.args) or 'no'} argument(s): {found.usage}; "
                             f"got {args_text!r}")
    if found.needs_lesson and page.lesson is None:
        raise DirectiveError(f"'::{name}' needs the page's front matter to name its lesson (lesson: NAME)")
    if page.notebook:
        return found.notebook(page, *args) if found.notebook else ""
    return found.render(page, *args)


def expand_page(markdown: str, page: Page, first_line: int = 1) -> str:
    """Every directive line of a page expanded; lines inside fenced code are left alone.

    Errors come back as (line number, error) through PageError, for the caller to name the file.
    """
    from render import indent_block

    out: list[str] = []
    fence: str | None = None
    for number, line in enumerate(markdown.split("\n"), start=first_line):
        opened = FENCE.match(line)
        if fence is not None:
            if opened and opened.group("fence")[0] == fence[0] and len(opened.group("fence")) >= len(fence) \
                    and not line.strip()[len(opened.group("fence")):].strip():
                fence = None
            out.append(line)
            continue
        if opened:
            fence = opened.group("fence")
            out.append(line)
            continue
        match = LINE.match(line)
        if not match:
            out.append(line)
            continue
        try:
            expanded = expand(match.group("name"), (match.group("args") or "").strip(), page)
        except Exception as exc:
            raise PageError(number, exc) from None
        out.append(indent_block(expanded, match.group("indent")))
    return "\n".join(out)


class PageError(Exception):
    def __init__(self, line: int, error: Exception):
        self.line, self.error = line, error
        super().__init__(f"{line}: {error}")


def _load_all() -> None:
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")


_load_all()
