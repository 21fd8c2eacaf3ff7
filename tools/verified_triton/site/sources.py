"""The lesson sources the site publishes: every .py file under code/, as a download and a page.

One job: list the published files (through safefs: a link or special file
under code/ is an error naming it), say where each lands on the site, and
write its full-source page with line anchors.
"""

from __future__ import annotations

from pathlib import Path

from render import attr, code_block
from safefs import walk_files
from snippets import Region


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


def source_page(rel_path: str, source: str, regions: list[Region], raw_link: str, used_by: list[tuple[str, str]]
                ) -> str:
    """The full-source page: no table of contents (its sidebar would only narrow the code), not searched."""
    out = ["---", "hide:", "  - toc", "search:", "  exclude: true", "---", "",
           f"# `{rel_path}`", "", f"[:material-download: Download `{rel_path}`]({raw_link})", ""]
    if used_by:
        out.append("Imported by: " + ", ".join(f"[{title}]({link})" for title, link in used_by) + ".")
        out.append("")
    if regions:
        out.append("Regions shown on the lesson page: " + ", ".join(
            f"[`{r.name}`](#__codelineno-0-{r.start}) (lines {r.start}-{r.end})" for r in regions) + ".")
        out.append("")
    out.append(code_block(source.rstrip("\n"), "python", f'title="{attr(rel_path)}" linenums="1"'))
    return "\n".join(out) + "\n"
