"""The registry of `::` directives: one small module per directive, found at import.

A directive is a line of its own in a page, outside fenced code:

    ::NAME ARGS

Each module in this package registers its directives with `@directive`,
giving the name, whether it needs the page's lesson (front matter
`lesson: NAME`), its arguments, the optional words it takes after them
(`flags`: `::table NAME folded`) and a one-line help. The hook expands pages
through `expand`, the unknown-directive error lists the registry, the
`::directives` table is built from it, and so is the authors' table that
docs/writing-a-lesson.md carries as plain Markdown (reference.py; a test keeps
the two equal). Adding a directive is adding one module.

A directive returns safe Markdown, `door.Md` (tools/verified_triton/site/door.py), and so does its
notebook form: `expand` refuses anything else, a plain str included, with a TypeError naming the
directive, so a field written without the door fails the build instead of reaching a page.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from verified_triton.core.lessons import Lesson, discover
from verified_triton.judge.status import LessonStatus, judge
from verified_triton.site import page as page_model
from verified_triton.site.door import Md, indent, require, snippet_safe


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
    docs_dir: Path | None = None  # the pages' folder, for directives that read a file beside them (::glossary)

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
    shown: set[str] = field(default_factory=set)  # keys directives placed on the page (e.g. "prediction:NAME")

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
    render: Callable[..., Md]
    notebook: Callable[..., Md] | None = None  # the form for a notebook; None: left out of notebooks
    body: bool = False  # takes the lines indented under it (4 spaces more) as `body=`, the author's text
    flags: tuple[str, ...] = ()  # optional words after the arguments, each at most once, given as `flags=`

    @property
    def usage(self) -> str:
        return " ".join([f"::{self.name}", *self.args, *(f"[{flag}]" for flag in self.flags)])


REGISTRY: dict[str, Directive] = {}
# Checks run once a whole page has been expanded: check(page) -> a problem in words, or "".
PAGE_CHECKS: list[Callable[[Page], str]] = []


def directive(name: str, help: str, args: tuple[str, ...] = (), needs_lesson: bool = True, body: bool = False,
              flags: tuple[str, ...] = ()):
    """Register `render(page, *args) -> Md` (with the page's LessonStatus as page.lesson).

    With body=True the lines indented under the directive line are the author's text for it, given as
    `render(page, *args, body=TEXT)` (dedented; "" when there are none). With `flags`, the words among them
    that follow the arguments on the line are given as `render(..., flags=frozenset(WORDS))` (the site's
    form only: a notebook shows everything, unfolded).
    """
    def register(fn: Callable[..., Md]) -> Callable[..., Md]:
        if name in REGISTRY:
            raise RuntimeError(f"directive ::{name} registered twice")
        REGISTRY[name] = Directive(name, needs_lesson, args, help, fn, body=body, flags=flags)
        return fn
    return register


def page_check(fn: Callable[[Page], str]) -> Callable[[Page], str]:
    """Register a check of a whole expanded page (for example: every recorded prediction is shown)."""
    PAGE_CHECKS.append(fn)
    return fn


def notebook_form(name: str):
    """Register the notebook form of directive `name` (Md that Jupyter renders as well)."""
    def register(fn: Callable[..., Md]) -> Callable[..., Md]:
        REGISTRY[name].notebook = fn
        return fn
    return register


def resolve(name: str, args_text: str, has_lesson: bool) -> tuple[Directive, list[str]]:
    """The directive a `::` line names and its arguments, or DirectiveError saying why the build refuses the
    line (an unknown name, the wrong number of arguments, a word it takes no flag of, no lesson named): for
    expand and site/preflight.py. The flags are `flags_of(...)`."""
    found = REGISTRY.get(name)
    if found is None:
        known = ", ".join(f"::{k}" for k in sorted(REGISTRY))
        raise DirectiveError(f"unknown directive '::{name}' (known: {known})")
    words = args_text.split()
    args, extra = words[:len(found.args)], words[len(found.args):]
    if len(args) != len(found.args) or any(w not in found.flags for w in extra) or len(set(extra)) != len(extra):
        flags = f" then, if wanted, {' and '.join(found.flags)}" if found.flags else ""
        raise DirectiveError(f"'::{name}' takes {len(found.args) or 'no'} argument(s){flags}: {found.usage}; "
                             f"got {args_text!r}")
    if found.needs_lesson and not has_lesson:
        raise DirectiveError(f"'::{name}' needs the page's front matter to name its lesson (lesson: NAME)")
    return found, args


def flags_of(found: Directive, args_text: str) -> frozenset[str]:
    """The flags a directive line gives (the words after its arguments; resolve() has checked them)."""
    return frozenset(args_text.split()[len(found.args):])


def expand(name: str, args_text: str, page: Page, body: str | None = None) -> Md:
    found, args = resolve(name, args_text, page.lesson is not None)
    extra = {"body": body or ""} if found.body else {}
    if page.notebook:
        if found.notebook is None:
            return Md("")
        out = found.notebook(page, *args, **extra)
        require(out, Md, f"the notebook form of ::{name}")
        return out
    if found.flags:
        extra["flags"] = flags_of(found, args_text)
    out = found.render(page, *args, **extra)
    require(out, Md, f"::{name}")
    # code and evidence with pymdownx.snippets' markers escaped, so a recorded `--8<-- "file"` line shows as
    # written instead of pulling a file into the page
    return snippet_safe(out)


def takes_body(name: str) -> bool:
    found = REGISTRY.get(name)
    return found is not None and found.body


def parse(markdown: str, first_line: int = 1, front_matter: bool = True) -> page_model.PageModel:
    """A page read by the one page model (site/page.py), knowing which directives take a body; a page the model
    cannot read is a PageError at its line."""
    try:
        return page_model.parse(markdown, {name for name in REGISTRY if takes_body(name)}, first_line, front_matter)
    except page_model.PageFormatError as exc:
        raise PageError(exc.line, DirectiveError(exc.message)) from None


def expand_page(markdown: str, page: Page, first_line: int = 1) -> str:
    """Every directive line of a page (without its front matter) expanded; fenced code is left alone.

    Errors come back as (line number, error) through PageError, for the caller to name the file.
    """
    out = expand_parts(parse(markdown, first_line, front_matter=False).parts, page)
    if not page.notebook:
        for check in PAGE_CHECKS:
            problem = check(page)
            if problem:
                raise PageError(first_line, DirectiveError(problem))
    return out


def expand_parts(parts: Iterable[page_model.Part], page: Page) -> str:
    """The page's parts as Markdown, each directive expanded in its place at its indent."""
    out: list[str] = []
    for part in parts:
        if not isinstance(part, page_model.Command):
            out += part.lines
            continue
        try:
            expanded = expand(part.name, part.args, page, part.body if takes_body(part.name) else None)
        except Exception as exc:
            raise PageError(part.line, exc) from None
        out.append(indent(expanded, part.indent))
    return "\n".join(out)


class PageError(Exception):
    def __init__(self, line: int, error: Exception):
        self.line, self.error = line, error
        super().__init__(f"{line}: {error}")


def _load_all() -> None:
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")


_load_all()
