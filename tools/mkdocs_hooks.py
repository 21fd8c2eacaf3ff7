"""MkDocs hooks: expand `::` directives in pages from lesson sources and evidence.

A directive is a line of its own, outside fenced code:

    ::snippet code/<lesson>/<file>.py <region>   a region, titled, linked to the full source
    ::status        the lesson's badge and sentence      (page front matter: `lesson: <name>`)
    ::output        recorded output of each mode in tabs, with environment and date
    ::checks        table of checks from every record
    ::benchmarks    table of benchmarks from every record
    ::figures       figures the runs saved
    ::table NAME    a table a run recorded with lesson.table(NAME, ...)
    ::course        (any page) the lessons in course order, with badges
    ::status-table  (any page) every lesson's status, dates, GPU and versions
    ::benchmark-table (any page) every benchmark from every record

Any error (bad directive, missing file or region, unreadable evidence) fails
the build with the page's FILE:LINE. The site also publishes every source file
under code/ as a download and as a full-source page with line anchors.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

sys.path.insert(0, str(Path(__file__).resolve().parent))

import render  # noqa: E402
from evidence import EvidenceError  # noqa: E402
from lessons import LessonError, discover  # noqa: E402
from snippets import SnippetError, extract, read_regions  # noqa: E402
from status import LessonStatus, judge  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
# Tests point the hook at a throw-away project; the site publishes them as code/ and evidence/ all the same.
CODE_DIR = Path(os.environ.get("VT_CODE_DIR") or ROOT / "code").resolve()
EVIDENCE_DIR = Path(os.environ.get("VT_EVIDENCE_DIR") or ROOT / "evidence").resolve()
DIRECTIVE = re.compile(r"^(?P<indent>[ \t]*)::(?P<name>[a-z][a-z-]*)(?:[ \t]+(?P<args>.*?))?[ \t]*$")
FENCE = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})")

_statuses: dict[str, LessonStatus] = {}


def on_pre_build(config) -> None:
    _statuses.clear()
    try:
        for lesson in discover(CODE_DIR):
            _statuses[lesson.name] = judge(lesson, EVIDENCE_DIR)
    except (LessonError, EvidenceError) as exc:
        raise PluginError(str(exc)) from None


def _source_files() -> list[Path]:
    """Every published source: scratch files and folders starting with '_' or '.' stay out."""
    return sorted(p for p in CODE_DIR.rglob("*.py")
                  if not any(part.startswith(("_", ".")) for part in p.relative_to(CODE_DIR).parts))


def _code_rel(path: Path) -> str:
    """A source file's site path: code/<lesson>/<file>.py."""
    return "code/" + path.relative_to(CODE_DIR).as_posix()


def source_page_uri(rel_path: str) -> str:
    """code/a/b.py -> source/a/b.md"""
    return "source/" + rel_path.removeprefix("code/").removesuffix(".py") + ".md"


def on_files(files: Files, config) -> Files:
    for path in _source_files():
        rel = _code_rel(path)
        files.append(File.generated(config, rel, abs_src_path=str(path)))
        try:
            regions = list(read_regions(path).values())
        except SnippetError as exc:
            raise PluginError(str(exc)) from None
        page_uri = source_page_uri(rel)
        depth = page_uri.count("/")
        raw_link = "../" * depth + rel
        content = render.source_page(rel, path.read_text(encoding="utf-8"), regions, raw_link)
        files.append(File.generated(config, page_uri, content=content))
    if EVIDENCE_DIR.is_dir():
        for path in sorted(EVIDENCE_DIR.rglob("*")):
            if path.is_file() and path.suffix in (".json", ".png") and not path.name.startswith("."):
                files.append(File.generated(config, "evidence/" + path.relative_to(EVIDENCE_DIR).as_posix(),
                                            abs_src_path=str(path)))
    for st in _statuses.values():
        if files.get_file_from_path(st.lesson.page) is None:
            raise PluginError(f"{st.lesson.folder / 'lesson.toml'}: page = '{st.lesson.page}' "
                              f"does not exist under docs/")
    return files


def on_page_markdown(markdown: str, page, config, files) -> str:
    src = page.file.src_uri
    where = f"docs/{src}"
    offset = _front_matter_lines(page, markdown)
    root = "../" * src.count("/")
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
            expanded = _expand(match.group("name"), (match.group("args") or "").strip(), page, root)
        except (SnippetError, EvidenceError, LessonError, DirectiveError) as exc:
            raise PluginError(f"{where}:{number}: {exc}") from None
        out.append(render.indent_block(expanded, match.group("indent")))
    return "\n".join(out)


class DirectiveError(Exception):
    pass


def _front_matter_lines(page, markdown: str) -> int:
    try:
        source = Path(page.file.abs_src_path).read_text(encoding="utf-8")
    except (OSError, TypeError):
        return 0
    return max(0, source.count("\n") - markdown.count("\n"))


def _lesson_status(page, directive: str) -> LessonStatus:
    name = page.meta.get("lesson")
    if not name:
        raise DirectiveError(f"'::{directive}' needs the page's front matter to name its lesson (lesson: NAME)")
    if name not in _statuses:
        raise DirectiveError(f"front matter names lesson '{name}', but there is no code/{name}/lesson.toml "
                             f"(lessons: {', '.join(_statuses) or 'none'})")
    return _statuses[name]


def _expand(name: str, args: str, page, root: str) -> str:
    if name == "snippet":
        return _snippet(args, root)
    if name == "course":
        return _course(root)
    if name == "status-table":
        return _status_table(root)
    if name == "benchmark-table":
        return _benchmark_table(root)
    lesson_directives = {
        "status": lambda st: render.status_admonition(st, root),
        "output": render.output_tabs,
        "checks": render.checks_table,
        "benchmarks": render.benchmarks_table,
        "figures": lambda st: render.figures(st, f"{root}evidence/"),
        "table": lambda st: _table(st, args),
    }
    if name not in lesson_directives:
        known = ["snippet", "course", "status-table", "benchmark-table", *lesson_directives]
        raise DirectiveError(f"unknown directive '::{name}' (known: {', '.join('::' + k for k in known)})")
    if args and name != "table":
        raise DirectiveError(f"'::{name}' takes no arguments, got {args!r}")
    return lesson_directives[name](_lesson_status(page, name))


def _snippet(args: str, root: str) -> str:
    parts = args.split()
    if len(parts) != 2:
        raise DirectiveError(f"'::snippet' takes a file and a region name, e.g. "
                             f"'::snippet code/vector-add/vector_add.py kernel'; got {args!r}")
    rel, region_name = parts
    path = (CODE_DIR / rel.removeprefix("code/")).resolve() if rel.startswith("code/") else None
    if path is None or not path.is_relative_to(CODE_DIR) or path.suffix != ".py":
        raise DirectiveError(f"'::snippet' shows Python files under code/, not {rel!r}")
    if not path.is_file():
        raise DirectiveError(f"{rel}: file not found")
    region = extract(path, region_name)
    rel = _code_rel(path)
    links = render.SourceLinks(page=root + source_page_uri(rel), raw=root + rel)
    return render.snippet(region, rel, links)


def _table(st: LessonStatus, name: str) -> str:
    if not name:
        raise DirectiveError("'::table' needs the name of a table the lesson records")
    table = render.result_table(st, name)
    if table is None:
        if not st.records:
            return f"_Table {render.code(name)} appears once the lesson has been run._"
        known = sorted({t.name for r in st.records for t in r.tables})
        if any(r.mode == "gpu" for r in st.records) or known:
            raise DirectiveError(f"no recorded table named '{name}' for lesson '{st.lesson.name}' "
                                 f"(recorded tables: {', '.join(known) or 'none'})")
        return f"_Table {render.code(name)} is recorded by the GPU run, which has not been recorded yet._"
    return table


def _course(root: str) -> str:
    out = []
    titles = {name: st.lesson.title for name, st in _statuses.items()}
    for number, st in enumerate(_statuses.values(), start=1):
        lesson = st.lesson
        prereq = ", ".join(f"[{render.text(titles.get(p, p))}]({root}{_statuses[p].lesson.page})"
                           if p in _statuses else render.text(p) for p in lesson.prerequisites)
        out.append(f"{number}. **[{render.text(lesson.title)}]({root}{lesson.page})** {render.badge(st.status)}  \n"
                   f"    {render.text(lesson.summary)}"
                   + (f"  \n    <small>Builds on: {prereq}</small>" if prereq else ""))
    return "\n".join(out) or "_No lessons yet._"


def _mode_cell(st: LessonStatus, mode: str) -> str:
    state = st.modes[mode]
    rec = state.record
    if rec is None:
        return render.text(state.state if state.state != "none" else "not recorded")
    env = rec.env
    where = env.device_name if mode == "gpu" else "CPU"
    current = "" if rec.source_hash == st.source_hash else ", older source"
    return render.text(f"{rec.outcome}{current}, {rec.date}, {where}, Triton {env.triton}, torch {env.torch}")


def _status_table(root: str) -> str:
    rows = [[f"[{render.text(st.lesson.title)}]({root}{st.lesson.page})", render.badge(st.status),
             _mode_cell(st, "interpreter"), _mode_cell(st, "gpu")] for st in _statuses.values()]
    table = render.md_table(["Lesson", "Status", "Interpreter run", "GPU run"], rows)
    sentences = "\n".join(f"- **{render.text(st.lesson.name)}**: {render.text(st.sentence)}"
                          for st in _statuses.values())
    return f"{table}\n\n{sentences}"


def _benchmark_table(root: str) -> str:
    rows, bars = [], []
    for st in _statuses.values():
        link = f"[{render.text(st.lesson.name)}]({root}{st.lesson.page})"
        current = sorted((r for r in st.records if r.source_hash == st.source_hash), key=lambda r: r.key)
        rows += render.benchmark_rows(current, with_lesson=True, lesson_link=link)
        bars += [(f"{st.lesson.name}: {b.name}", b) for r in current for b in r.benchmarks]
    if not rows:
        return "_No benchmarks recorded yet: benchmarks run on a GPU only._"
    align = ["---", "---", "---:", "---:", "---:", "---", "---"]
    table = render.md_table(["Lesson", *render.BENCH_COLUMNS], rows, align)
    return f"{render.ratio_chart(bars)}\n\n{table}"
