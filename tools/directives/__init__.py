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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from lessons import Lesson
from status import LessonStatus


class DirectiveError(Exception):
    """A directive that cannot be expanded; the hook adds the page's FILE:LINE."""


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


@dataclass
class Page:
    site: Site
    src_uri: str  # docs-relative path of the page, e.g. lessons/vector-add.md
    lesson: LessonStatus | None  # the lesson the front matter names, if any

    @property
    def root(self) -> str:
        """The relative prefix from this page to the site root."""
        return "../" * self.src_uri.count("/")


@dataclass(frozen=True)
class Directive:
    name: str
    needs_lesson: bool
    args: tuple[str, ...]  # argument names, shown in help; the count is checked
    help: str
    render: Callable[..., str]

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
    return found.render(page, *args)


def _load_all() -> None:
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")


_load_all()
