"""MkDocs hooks: the course's navigation, its published sources and evidence, and `::` directives.

The hook is thin; each job lives elsewhere:
- the Lessons section of the navigation comes from lesson.toml (`order`), never from mkdocs.yml;
- every lesson source is published as a download and a full-source page (sources.py);
- every usable record and the figures it names are published, read through the schema and safefs;
- `::NAME ARGS` lines are expanded by the directive registry (tools/directives/).
Any error (a bad directive, a missing file or region, unusable evidence, a link
under code/ or evidence/) fails the build with the page's FILE:LINE or the file's path.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

sys.path.insert(0, str(Path(__file__).resolve().parent))

import directives  # noqa: E402
import render  # noqa: E402
import sources  # noqa: E402
from evidence import EvidenceError, read_figure  # noqa: E402
from lessons import LessonError, discover  # noqa: E402
from limits import LIMITS  # noqa: E402
from safefs import UnsafePathError, read_text  # noqa: E402
from snippets import SnippetError, read_regions  # noqa: E402
from status import judge  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
# Tests point the hook at a throw-away project; the site publishes them as code/ and evidence/ all the same.
CODE_DIR = Path(os.environ.get("VT_CODE_DIR") or ROOT / "code").absolute()
EVIDENCE_DIR = Path(os.environ.get("VT_EVIDENCE_DIR") or ROOT / "evidence").absolute()
DIRECTIVE = re.compile(r"^(?P<indent>[ \t]*)::(?P<name>[a-z][a-z-]*)(?:[ \t]+(?P<args>.*?))?[ \t]*$")
FENCE = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})")
LESSONS_SECTION = "Lessons"

_site: directives.Site | None = None


class _QuietCodeLineAnchors(logging.Filter):
    """MkDocs cannot see the highlighter's line anchors (#__codelineno-0-N) and logs each link to one;
    tests/test_site.py checks every anchor in the built HTML instead. Other messages pass."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "__codelineno-" not in record.getMessage()


def on_startup(command, dirty) -> None:
    logging.getLogger("mkdocs.structure.pages").addFilter(_QuietCodeLineAnchors())


def on_config(config):
    """Fill the Lessons section of the navigation from the lessons' own order."""
    try:
        lessons = discover(CODE_DIR)
    except (LessonError, UnsafePathError) as exc:
        raise PluginError(str(exc)) from None
    pages = [lesson.page for lesson in lessons]
    nav = config.get("nav") or []
    for i, item in enumerate(nav):
        if isinstance(item, dict) and LESSONS_SECTION in item:
            nav[i] = {LESSONS_SECTION: pages}
            break
    else:
        nav.insert(1 if nav else 0, {LESSONS_SECTION: pages})
    config["nav"] = nav
    return config


def on_pre_build(config) -> None:
    global _site
    try:
        lessons = discover(CODE_DIR)
        statuses = {lesson.name: judge(lesson, EVIDENCE_DIR) for lesson in lessons}
    except (LessonError, EvidenceError, UnsafePathError) as exc:
        raise PluginError(str(exc)) from None
    problems = [p for st in statuses.values() for p in st.problems]
    if problems:
        raise PluginError("unusable evidence (fix or re-record it):\n  " + "\n  ".join(problems))
    repo = (config.get("repo_url") or "").rstrip("/")
    extra = dict(config.get("extra") or {})
    _site = directives.Site(CODE_DIR, EVIDENCE_DIR, lessons, statuses, repo, extra.get("branch", "main"), extra)


def on_files(files: Files, config) -> Files:
    site = _site
    imports = {lesson.name: [p for p in lesson.source_files() if p.suffix == ".py" and p != lesson.main]
               for lesson in site.lessons}
    try:
        published = sources.published(CODE_DIR)
        for path in published:
            rel = sources.site_path(CODE_DIR, path)
            text = read_text(path, LIMITS.source_file, CODE_DIR)
            files.append(File.generated(config, rel, content=text))
            regions = list(read_regions(path, CODE_DIR).values())
            page_uri = sources.page_uri(rel)
            up = "../" * page_uri.count("/")
            links = _import_links(path, site, imports, up)
            content = sources.source_page(rel, text, regions, f"{up}{rel}", links)
            files.append(File.generated(config, page_uri, content=content))
        for st in site.statuses.values():
            for record in st.records:
                rec_uri = f"evidence/{record.lesson}/{record.key}.json"
                files.append(File.generated(config, rec_uri, content=record.to_json()))
                for fig in record.figures:
                    for file in (fig.file, fig.dark_file):
                        if file:
                            data = read_figure(EVIDENCE_DIR, record, file)
                            files.append(File.generated(config, f"evidence/{record.lesson}/{record.key}/{file}",
                                                        content=data))
    except (SnippetError, EvidenceError, UnsafePathError) as exc:
        raise PluginError(str(exc)) from None
    for st in site.statuses.values():
        if files.get_file_from_path(st.lesson.page) is None:
            raise PluginError(f"{st.lesson.folder / 'lesson.toml'}: page = '{st.lesson.page}' "
                              f"does not exist under docs/")
    return files


def _import_links(path: Path, site, imports: dict, up: str) -> list[tuple[str, str]]:
    """On a lesson file's page: the local modules it uses; on a module's page: the lessons that use it."""
    links = []
    for lesson in site.lessons:
        if path == lesson.main:
            links += [(f"`{m.name}`", f"{up}{sources.page_uri(sources.site_path(CODE_DIR, m))}")
                      for m in imports[lesson.name]]
        elif path in imports[lesson.name]:
            links.append((render.text(lesson.title), f"{up}{lesson.page}"))
    return links


def on_page_markdown(markdown: str, page, config, files) -> str:
    src = page.file.src_uri
    where = f"docs/{src}"
    offset = _front_matter_lines(page, markdown)
    name = page.meta.get("lesson")
    lesson = None
    if name:
        lesson = _site.status(name)
        if lesson is None:
            raise PluginError(f"{where}: front matter names lesson '{name}', but there is no "
                              f"code/{name}/lesson.toml (lessons: {', '.join(_site.statuses) or 'none'})")
    ctx = directives.Page(_site, src, lesson)
    out: list[str] = []
    fence: str | None = None
    for number, line in enumerate(markdown.split("\n"), start=1 + offset):
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
        match = DIRECTIVE.match(line)
        if not match:
            out.append(line)
            continue
        try:
            expanded = directives.expand(match.group("name"), (match.group("args") or "").strip(), ctx)
        except (SnippetError, EvidenceError, LessonError, UnsafePathError, directives.DirectiveError) as exc:
            raise PluginError(f"{where}:{number}: {exc}") from None
        out.append(render.indent_block(expanded, match.group("indent")))
    return "\n".join(out)


def _front_matter_lines(page, markdown: str) -> int:
    try:
        source = Path(page.file.abs_src_path).read_text(encoding="utf-8")
    except (OSError, TypeError):
        return 0
    return max(0, source.count("\n") - markdown.count("\n"))
