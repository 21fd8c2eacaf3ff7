"""The lesson sources the site publishes: every .py file under code/, as a download and a page.

One job: list the published files (through safefs: a link or special file
under code/ is an error naming it), say where each lands on the site, and
write its full-source page with line anchors.
"""

from __future__ import annotations

from pathlib import Path

from verified_triton.core.lessons import Lesson, exercise_files
from verified_triton.core.limits import LIMITS
from verified_triton.core.safefs import read_bytes, walk_files
from verified_triton.site.door import Md, attr, code_block, code_span, url
from verified_triton.site.snippets import Region


def published(code_dir: Path) -> list[Path]:
    """Every .py file under code/; scratch names starting with '_' or '.' stay out."""
    return [p for p in walk_files(code_dir, skip=lambda name: name.startswith(("_", ".")))
            if p.suffix == ".py"]


def site_path(code_dir: Path, path: Path) -> str:
    """A source file's site path: code/<lesson>/<file>.py."""
    return "code/" + path.relative_to(code_dir).as_posix()


def page_uri(rel_path: str) -> str:
    """code/a/b.py -> source/a/b.md"""
    return "source/" + rel_path.removeprefix("code/").removesuffix(".py") + ".md"


def source_page(rel_path: str, source: str, regions: list[Region], raw_link: str, used_by: list[tuple[Md, Md]]
                ) -> Md:
    """The full-source page: no table of contents (its sidebar would only narrow the code), not searched."""
    out = [Md("---\nhide:\n  - toc\nsearch:\n  exclude: true\n---\n"),
           Md("# {}").format(code_span(rel_path)), Md(""),
           Md("[:material-download: Download {}]({})").format(code_span(rel_path), url(raw_link)), Md("")]
    if used_by:
        out.append(Md("Imported by: {}.").format(Md(", ").join(Md("[{}]({})").format(title, link)
                                                               for title, link in used_by)))
        out.append(Md(""))
    if regions:
        out.append(Md("Regions shown on the lesson page: {}.").format(Md(", ").join(
            Md("[{}]({}) (lines {}-{})").format(code_span(r.name), url(f"#__codelineno-0-{r.start}"), r.start, r.end)
            for r in regions)))
        out.append(Md(""))
    out.append(code_block(source.rstrip("\n"), "python", Md('title="{}" linenums="1"').format(attr(rel_path))))
    return Md("\n").join(out) + Md("\n")

def lesson_files(lesson: Lesson, code_dir: Path, exercises: bool = False) -> dict[str, bytes]:
    """Archive name -> bytes: the lesson's sources (the kit too), each read through safefs; with `exercises`,
    exercises.py, solutions.py and what they import too (practice.py).

    The kit and the modules of the lessons it `uses` sit beside the main file in the archive,
    where its imports find them.
    """
    files = {}
    code_dir = Path(code_dir).absolute()
    paths = list(dict.fromkeys([*lesson.source_files(), *(exercise_files(lesson) if exercises else [])]))
    for path in paths:
        if path.parent == lesson.folder or not path.is_relative_to(lesson.folder):
            name = path.name
        else:
            name = path.relative_to(lesson.folder).as_posix()
        if name in files:
            raise ValueError(f"{path}: two source files of {lesson.name} would share the name {name} in its archive")
        files[name] = read_bytes(path, LIMITS.source_file, code_dir)
    return files
