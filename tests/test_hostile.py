"""Hostile input: recorded output, evidence and declarations that try to be HTML, Markdown or templates.

A throw-away project (temp code/ with a fake lesson, temp evidence/ with hand-written
records, temp docs/ with a page using every directive) is built with the real hook,
pointed there by VT_CODE_DIR and VT_EVIDENCE_DIR. Nothing here touches the real site.
The built HTML must show the hostile text as text, keep its layout, drop terminal
escapes and stay small; malformed evidence and regions must fail the build with a
message naming the file, never a traceback.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import textwrap
import zlib
from collections import defaultdict
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import markdown
import pytest

import conftest

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ROOT / "tools"
if str(TOOLS) not in sys.path:
    sys.path.insert(0, str(TOOLS))

from evidence import (  # noqa: E402
    Benchmark,
    Check,
    Environment,
    EvidenceError,
    Figure,
    Record,
    Table,
    read_record,
    write_record,
)
from lessons import load_lesson  # noqa: E402
from render import MAX_LINE, MAX_LINES, MAX_TEXT, clean_output, code_block, text  # noqa: E402

HOSTILE = "<script>alert(1)</script>"
# Things that mean something to HTML, Markdown, the extensions, MkDocs' templates or a terminal.
INLINE = [HOSTILE, "</code>", "</pre>", "**bold**", "[link](http://x)", "| table |", "{{ config }}", "{% raw %}",
          ":material-check:", "&amp;", "<img src=x onerror=alert(2)>", "`tick`"]
ANSI_RED, ANSI_RESET = "\x1b[31m", "\x1b[0m"
HOSTILE_LINE = " ".join(INLINE) + f" {ANSI_RED}red{ANSI_RESET} bell\x07"
# A block of recorded output whose lines start with Markdown block syntax.
HOSTILE_BLOCK = "\n".join([
    HOSTILE,
    "</code></pre></div>",
    "# heading",
    "**bold** [link](http://x) | table | cell |",
    "| table |",
    "|---|",
    "```",
    "`````python",
    "!!! note",
    "    indented under the note",
    '=== "tab"',
    "    inside the tab",
    "{{ config }} {% raw %} {% endraw %}",
    f"{ANSI_RED}red text{ANSI_RESET} and \x1b]0;window title\x07 after",
    "progress 10%\rprogress 100%",
    "not utf-8: \ufffd\ufffd here",
    "tab\there",
    "`````",
    "```",
])
LONG_LINE = "L" * 100_000
BULK_LINE = "bulk output line with some words to make it about eighty characters long ........"


def bulk(megabytes: float) -> str:
    lines = int(megabytes * 1_000_000 / (len(BULK_LINE) + 8))
    return "\n".join(f"{BULK_LINE} {i:06d}" for i in range(lines))


# -- a tiny HTML model ------------------------------------------------------------------

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


@dataclass
class Element:
    tag: str
    attrs: dict
    ancestors: tuple  # the open elements around it, outermost first
    section: str  # id of the h2 it follows ("" before the first)
    index: int  # position in document order
    text: list = field(default_factory=list)

    @property
    def classes(self) -> set[str]:
        return set((self.attrs.get("class") or "").split())

    def inside(self, tag: str, cls: str = "") -> bool:
        return any(a.tag == tag and (not cls or cls in a.classes) for a in self.ancestors)


class Doc(HTMLParser):
    """Elements in document order, the visible text of each h2 section, and the scripts."""

    def __init__(self, source: str):
        super().__init__(convert_charrefs=True)
        self.elements: list[Element] = []
        self.sections: dict[str, list[str]] = defaultdict(list)
        self.scripts: list[str] = []
        self.stack: list[Element] = []
        self.section = ""
        self.feed(source)
        self.close()

    def handle_starttag(self, tag, attrs):
        el = Element(tag, dict(attrs), tuple(self.stack), self.section, len(self.elements))
        self.elements.append(el)
        if tag == "h2" and el.attrs.get("id"):
            self.section = el.section = el.attrs["id"]
        if tag == "script":
            self.scripts.append("")
        if tag not in VOID:
            self.stack.append(el)

    def handle_startendtag(self, tag, attrs):
        self.elements.append(Element(tag, dict(attrs), tuple(self.stack), self.section, len(self.elements)))

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data):
        if any(e.tag == "script" for e in self.stack):
            self.scripts[-1] += data
            return
        if any(e.tag == "style" for e in self.stack):
            return
        self.sections[self.section].append(data)
        for e in self.stack:
            e.text.append(data)

    def text_of(self, section: str) -> str:
        return "".join(self.sections[section])

    @property
    def all_text(self) -> str:
        return "".join("".join(parts) for parts in self.sections.values())

    def find(self, tag: str, cls: str = "", **attrs) -> list[Element]:
        return [e for e in self.elements if e.tag == tag and (not cls or cls in e.classes)
                and all(e.attrs.get(k) == v for k, v in attrs.items())]


# -- a throw-away project ---------------------------------------------------------------

MKDOCS_ENV = dict(os.environ, NO_MKDOCS_2_WARNING="1")
LESSON_SOURCE = '''\
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from lessonkit import Lesson  # noqa: E402

# snippet: kernel
def kernel():
    s = "<script>alert(1)</script> </code></pre> ``` ````` {{ config }} {% raw %}"
    return s  # **bold** [link](http://x)
# end snippet


if __name__ == "__main__":
    lesson = Lesson("LESSON")
    sys.exit(lesson.finish())
'''


def png(width: int = 4, height: int = 3) -> bytes:
    """A tiny valid PNG, so the figure really loads in a browser."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    raw = b"".join(b"\x00" + bytes([200, 30, 30]) * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def toml_string(s: str) -> str:
    return json.dumps(s)  # a JSON string with \uXXXX escapes is a TOML basic string


@dataclass
class Project(conftest.Project):
    """conftest's throw-away project, with the pages and site a build needs."""

    @property
    def docs(self) -> Path:
        return self.root / "docs"

    @property
    def site(self) -> Path:
        return self.root / "site"

    def add_lesson(self, name: str, page: str, *, title: str = "", summary: str = "", toml: str = "",
                   source: str | None = None) -> Path:
        folder = self.code / name
        folder.mkdir(parents=True)
        main = name.replace("-", "_") + ".py"
        (folder / "lesson.toml").write_text(
            f"title = {toml_string(title or 'Lesson ' + name)}\norder = 1\nmain = \"{main}\"\n"
            f"page = \"lessons/{name}.md\"\nsummary = {toml_string(summary or 'a fake lesson')}\n"
            + textwrap.dedent(toml), encoding="utf-8")
        (folder / main).write_text(source if source is not None else LESSON_SOURCE.replace("LESSON", name),
                                   encoding="utf-8")
        (self.docs / "lessons").mkdir(parents=True, exist_ok=True)
        (self.docs / "lessons" / f"{name}.md").write_text(page, encoding="utf-8")
        return folder

    def main_file(self, name: str) -> Path:
        return self.code / name / (name.replace("-", "_") + ".py")

    def record(self, name: str, mode: str = "interpreter", key: str = "", **fields) -> Record:
        lesson = load_lesson(self.code / name)
        env = fields.pop("env", None) or Environment(python="3.11", torch="2.13", triton="3.9", platform="Linux",
                                                     device_name="CPU" if mode == "interpreter" else "Fake GPU")
        base = dict(lesson=name, mode=mode, key=key or ("interpreter" if mode == "interpreter" else "gpu-fake"),
                    outcome="passed", exit_code=0, started_utc="2026-01-02T03:04:05Z", wall_s=1.5,
                    command=f"python code/{name}/{lesson.main.name}", source_hash=lesson.source_hash(),
                    source_files={}, env=env)
        base.update(fields)
        return Record(**base)

    def write(self, record: Record, figures: dict[str, Path] | None = None) -> Path:
        return write_record(self.evidence, record, figures)

    def config(self) -> Path:
        """The real mkdocs.yml, with this project's docs, the real hook, no watch list and no nav."""
        config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
        config = config.replace("docs_dir: docs", f"docs_dir: {self.docs}")
        config = config.replace("  - tools/mkdocs_hooks.py", f"  - {TOOLS / 'mkdocs_hooks.py'}")
        config = re.sub(r"watch:\n(  - .*\n)+", "", config)
        config = re.sub(r"\nnav:\n(?:[ ]+.*\n?)+", "\n", config)
        path = self.root / "mkdocs.yml"
        path.write_text(config, encoding="utf-8")
        return path

    def build(self) -> subprocess.CompletedProcess:
        env = dict(MKDOCS_ENV, VT_CODE_DIR=str(self.code), VT_EVIDENCE_DIR=str(self.evidence))
        return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(self.config()),
                               "-d", str(self.site)], capture_output=True, text=True, env=env, cwd=self.root,
                              timeout=300)

    def verify_status(self) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(TOOLS / "verify.py"), "--status", "--code-dir", str(self.code),
                               "--evidence-dir", str(self.evidence)], capture_output=True, text=True,
                              cwd=self.root, timeout=120)

    def html(self, name: str) -> str:
        return (self.site / "lessons" / name / "index.html").read_text(encoding="utf-8")


def make_project(root: Path) -> Project:
    project = Project(root)
    for folder in (project.code, project.evidence, project.docs / "assets"):
        folder.mkdir(parents=True)
    shutil.copyfile(ROOT / "code" / "lessonkit.py", project.code / "lessonkit.py")
    shutil.copyfile(ROOT / "docs" / "assets" / "verified.css", project.docs / "assets" / "verified.css")
    (project.docs / "index.md").write_text("# Fake course\n\n::course\n", encoding="utf-8")
    (project.docs / "verification.md").write_text("# How verification works\n\nA stub.\n", encoding="utf-8")
    return project


HOSTILE_PAGE = """\
---
lesson: hostile
---

# Hostile evidence

::status

## Region

::snippet code/hostile/hostile.py kernel

## Course

::course

## Checks

::checks

## Benchmarks

::benchmarks

## Figures

::figures

## Recorded table

::table hostile-table

## Output

::output

<p id="after-output">After the output.</p>

## Status table

::status-table

## Benchmark table

::benchmark-table

<p id="page-end">End of the page.</p>
"""

UNSUPPORTED_PAGE = """\
---
lesson: unsupported
---

# Declined by design

::status

## Output

::output

<p id="page-end">End of the page.</p>
"""


def hostile_records(project: Project, figure: Path) -> None:
    """The interpreter passed, the GPU run failed: every string a run can record is hostile."""
    interp = project.record(
        "hostile", "interpreter",
        stdout=HOSTILE_BLOCK + "\n" + LONG_LINE + "\n" + bulk(5),
        stderr=HOSTILE_BLOCK + "\nTraceback-looking noise " + HOSTILE,
        stdout_omitted=0,
        checks=[Check("matches-torch", "pass", HOSTILE_LINE),
                Check(f"hostile-name {HOSTILE} **bold** | pipe |", "pass", "fine"),
                Check("long-message", "pass", LONG_LINE),
                Check("weird-status", "<b>maybe</b>", HOSTILE_LINE)],
        skipped_parts=[{"part": f"timing {HOSTILE}", "reason": HOSTILE_LINE}],
    )
    gpu_env = Environment(python="3.11", torch=f"2.13 {HOSTILE}", triton="3.9 **bold**", platform="Linux",
                          device_name=f'Fake GPU {HOSTILE} **bold** "quoted" `tick`', capability="9.0",
                          driver="{{ config }}", cuda="13.0 | table |")
    gpu = project.record(
        "hostile", "gpu", key="gpu-fake", outcome="failed", exit_code=1, env=gpu_env,
        reason=f"failed checks: {HOSTILE_LINE}",
        stdout=HOSTILE_BLOCK + "\n" + LONG_LINE,
        stderr=bulk(1),
        checks=[Check("matches-torch", "fail", HOSTILE_LINE), Check("long-message", "pass", LONG_LINE)],
        benchmarks=[Benchmark(name=f"bench {HOSTILE} | x |", measured=1.5, baseline=1.0,
                              unit=f"GB/s {HOSTILE}", ratio=1.5, threshold=1.0, baseline_name=HOSTILE_LINE,
                              met=True, note=HOSTILE_LINE)],
        tables=[Table(name="hostile-table", columns=[HOSTILE, "**bold**", "| pipe |"],
                      rows=[[HOSTILE_LINE, 1.25, None], ["```", "{{ config }}", LONG_LINE]],
                      caption=HOSTILE_LINE)],
        figures=[Figure(name="plot", file="gpu-fake/plot.png", caption=HOSTILE_LINE)],
    )
    project.write(interp)
    project.write(gpu, {"plot.png": figure})


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> tuple[Project, subprocess.CompletedProcess]:
    project = make_project(tmp_path_factory.mktemp("hostile"))
    project.add_lesson("hostile", HOSTILE_PAGE, title=f"Hostile {HOSTILE} **bold** [link](http://x)",
                       summary=HOSTILE_LINE + "\n# heading\n{{ config }}",
                       toml=f'prerequisites = [{toml_string(HOSTILE)}]\n')
    project.add_lesson("unsupported", UNSUPPORTED_PAGE, title="Unsupported",
                       toml=f'[interpreter]\nsupported = false\nreason = {toml_string(HOSTILE_LINE)}\n')
    figure = project.root / "plot.png"
    figure.write_bytes(png())
    hostile_records(project, figure)
    project.write(project.record("unsupported", "gpu", outcome="by-design", exit_code=3, reason=HOSTILE_LINE,
                                 stdout=HOSTILE_BLOCK))
    result = project.build()
    assert result.returncode == 0, result.stdout + result.stderr
    return project, result


@pytest.fixture(scope="module")
def hostile_doc(hostile) -> Doc:
    return Doc(hostile[0].html("hostile"))


# -- (a) no markup gets through ------------------------------------------------------------

def test_no_hostile_element_exists(hostile, hostile_doc):
    project, _ = hostile
    for page in ("hostile", "unsupported"):
        doc = hostile_doc if page == "hostile" else Doc(project.html(page))
        assert not [s for s in doc.scripts if "alert" in s], f"{page}: a script element carries the hostile text"
        # the page has exactly the theme's scripts: as many as a page with no evidence at all
        home = Doc((project.site / "index.html").read_text(encoding="utf-8"))
        assert len(doc.scripts) == len(home.scripts), \
            f"{page}: {len(doc.scripts)} scripts, the home page has {len(home.scripts)}"
        assert not doc.find("img", src="x"), f"{page}: the hostile <img> became an element"
        assert not [e for e in doc.elements if any(k.startswith("on") for k in e.attrs)], \
            f"{page}: an element carries an event-handler attribute"
        assert not doc.find("a", href="http://x"), f"{page}: hostile Markdown became a link"
        assert not [e for e in doc.elements if e.tag in ("strong", "b", "em") and "".join(e.text) == "bold"], \
            f"{page}: hostile Markdown became bold"
        assert not [e for e in doc.elements if e.tag in ("h1", "h2", "h3") and "heading" in "".join(e.text)], \
            f"{page}: hostile Markdown became a heading"


# -- (b) the text shows as text, where it belongs --------------------------------------------

def test_hostile_text_shows_literally_in_every_place(hostile_doc):
    doc = hostile_doc
    literal_line = html.unescape(text(HOSTILE_LINE))  # the line as a reader sees it: no ANSI, bell pictured
    assert HOSTILE in literal_line and "[31m" not in literal_line
    expected = {
        "": [f"failed checks: {literal_line}"],  # the status sentence, with the reason
        "region": ['s = "<script>alert(1)</script> </code></pre> ``` ````` {{ config }} {% raw %}"',
                   "# **bold** [link](http://x)"],
        "course": [f"Hostile {HOSTILE} **bold** [link](http://x)", "{{ config }}", "# heading", HOSTILE],
        "checks": [literal_line, f"hostile-name {HOSTILE} **bold** | pipe |", "<b>maybe</b>"],
        "benchmarks": [f"bench {HOSTILE} | x |", f"GB/s {HOSTILE}", literal_line],
        "figures": [literal_line],
        "recorded-table": [HOSTILE, "**bold**", "| pipe |", literal_line, "```", "{{ config }}"],
        "output": [line for line in clean_output(HOSTILE_BLOCK).split("\n")] + [
            'Fake GPU <script>alert(1)</script> **bold** "quoted" `tick`',  # the tab label, exactly
            f"torch 2.13 {HOSTILE}", "Not run here: timing <script>alert(1)</script>"],
        "status-table": [f"Hostile {HOSTILE} **bold** [link](http://x)", literal_line],
        "benchmark-table": [f"bench {HOSTILE} | x |"],
    }
    for section, snippets in expected.items():
        shown = doc.text_of(section)
        assert shown, f"no section #{section} in the page"
        for snippet in snippets:
            assert snippet in shown, f"#{section} does not show {snippet!r} as text"
    # the figure's alt text is the caption, as text
    imgs = [e for e in doc.find("img") if e.section == "figures"]
    assert len(imgs) == 1 and imgs[0].attrs.get("alt") == literal_line


def test_a_hostile_reason_for_an_unsupported_mode_shows_as_text(hostile):
    project, _ = hostile
    doc = Doc(project.html("unsupported"))
    literal_line = html.unescape(text(HOSTILE_LINE))
    notes = [e for e in doc.find("div", "admonition") if "note" in e.classes]
    assert len(notes) == 1 and literal_line in "".join(notes[0].text)
    status = doc.find("div", "vt-status")
    assert len(status) == 1 and f"The interpreter cannot run this lesson ({literal_line})" in "".join(status[0].text)
    assert literal_line in doc.text_of("output")


# -- (c) the layout survives -------------------------------------------------------------------

def test_the_layout_around_hostile_blocks_is_intact(hostile_doc):
    doc = hostile_doc
    content = [e for e in doc.elements if e.inside("article", "md-content__inner")]
    # headings: exactly the page's own
    assert [e.attrs.get("id") for e in content if e.tag == "h2"] == [
        "region", "course", "checks", "benchmarks", "figures", "recorded-table", "output", "status-table",
        "benchmark-table"]
    assert len([e for e in content if e.tag == "h1"]) == 1
    # one set of output tabs, with one tab per record
    tabbed = [e for e in content if e.tag == "div" and "tabbed-set" in e.classes]
    assert len(tabbed) == 1, f"{len(tabbed)} tabbed blocks"
    labels = [e for e in content if e.tag == "label" and e.inside("div", "tabbed-labels")]
    assert len(labels) == 2
    assert "".join(labels[0].text) == "Interpreter (CPU)"
    assert "".join(labels[1].text).startswith("GPU: Fake GPU <script>alert(1)</script>")
    # the admonitions: the status, and no hostile '!!! note'
    admonitions = [e for e in content if e.tag == "div" and "admonition" in e.classes]
    assert [sorted(e.classes) for e in admonitions] == [["admonition", "vt-failed", "vt-status"]]
    # the tables: checks, benchmarks, recorded table, status table, benchmark table (code tables aside)
    tables = [e for e in content if e.tag == "table" and "highlighttable" not in e.classes]
    assert [t.section for t in tables] == ["checks", "benchmarks", "recorded-table", "status-table",
                                           "benchmark-table"]
    check_rows = [e for e in content if e.tag == "tr" and e.section == "checks" and e.inside("tbody")]
    assert len(check_rows) == 4, "the checks table lost or gained rows"
    # what comes after the output is still a paragraph of the page, not swallowed by a code block
    for marker, section in (("after-output", "output"), ("page-end", "benchmark-table")):
        found = doc.find("p", id=marker)
        assert len(found) == 1, f"#{marker} is gone"
        assert found[0].section == section
        assert found[0].inside("article", "md-content__inner")
        assert not [a.tag for a in found[0].ancestors if a.tag in ("pre", "code", "table", "details", "label")
                    or "tabbed-set" in a.classes or "admonition" in a.classes], f"#{marker} is swallowed"
    footer = doc.find("footer", "md-footer")
    assert footer and footer[0].index > doc.find("p", id="page-end")[0].index, "the footer is missing"


# -- (d) terminal escapes are gone, (e) the page is bounded ------------------------------------------

def test_terminal_escapes_are_gone(hostile, hostile_doc):
    project, _ = hostile
    page = project.html("hostile")
    assert "\x1b" not in page
    assert "[31m" not in hostile_doc.all_text and "[0m" not in hostile_doc.all_text
    assert "window title" not in hostile_doc.all_text  # an OSC sequence is dropped whole
    assert "red text and  after" in hostile_doc.text_of("output")
    assert "progress 100%" in hostile_doc.text_of("output") and "progress 10%" not in hostile_doc.text_of("output")
    assert "\u2407" in hostile_doc.text_of("checks")  # the bell, as a control picture


def test_huge_output_is_bounded(hostile, hostile_doc):
    project, _ = hostile
    record_file = project.evidence / "hostile" / "interpreter.json"
    assert record_file.stat().st_size > 5_000_000, "the test record is not as big as it should be"
    page = (project.site / "lessons" / "hostile" / "index.html").read_bytes()
    assert len(page) < 2_000_000, f"the page is {len(page)} bytes"
    output = hostile_doc.text_of("output")
    assert "lines not shown; the evidence file has them" in output
    assert f"[... {len(LONG_LINE) - MAX_LINE} more characters]" in output
    assert LONG_LINE[:MAX_LINE + 1] not in output
    # check messages and table cells are bounded too
    assert LONG_LINE[:MAX_TEXT + 1] not in hostile_doc.all_text
    assert f"[... {len(LONG_LINE) - MAX_TEXT} more characters]" in hostile_doc.text_of("checks")
    assert f"[... {len(LONG_LINE) - MAX_TEXT} more characters]" in hostile_doc.text_of("recorded-table")
    # the whole evidence is still published, for anyone who wants it
    assert (project.site / "evidence" / "hostile" / "interpreter.json").stat().st_size == record_file.stat().st_size


def test_the_search_index_holds_no_markup(hostile):
    project, _ = hostile
    index = json.loads((project.site / "search" / "search_index.json").read_text(encoding="utf-8"))
    for doc in index["docs"]:
        for key in ("title", "text"):
            assert "<script" not in doc.get(key, "").lower(), f"search index {doc['location']}: raw <script>"


# -- the render functions themselves ----------------------------------------------------------------

@pytest.mark.parametrize("value", [*INLINE, HOSTILE_LINE, HOSTILE_BLOCK, "a\r\nb\x00c\x7f", 12.5, None])
def test_text_leaves_nothing_for_markdown_or_html(value):
    out = text(value)
    assert re.fullmatch(r"(?:&#\d+;|[^\x00-\x1f\x7f<>&`*_\[\]|{}#!=:\\\n])*", out), out
    # what the reader sees is the value, without terminal escapes, controls as pictures, one line
    seen = html.unescape(out)
    assert "\x1b" not in seen and "\n" not in seen
    if isinstance(value, str) and "\x1b" not in value and "\x07" not in value and "\r" not in value:
        assert seen == value.replace("\n", " ")
    # and Markdown leaves it alone: one paragraph whose text is the value
    rendered = markdown.markdown(out, extensions=["tables", "admonition", "attr_list", "pymdownx.superfences",
                                                  "pymdownx.tabbed", "pymdownx.inlinehilite"])
    assert Doc(rendered).all_text == seen


def test_text_is_bounded():
    out = html.unescape(text("x" * 5_000_000))
    assert out == "x" * MAX_TEXT + f" [... {5_000_000 - MAX_TEXT} more characters]"


def test_clean_output_strips_escapes_and_bounds_the_size():
    assert clean_output(f"{ANSI_RED}red{ANSI_RESET}\x1b[2K\x1b[1;32mgreen\x1b[m") == "redgreen"
    assert clean_output("\x1b]0;title\x07after") == "after"
    assert clean_output("a\r\nb\r\n") == "a\nb"
    assert clean_output("10%\r50%\r100%\nnext") == "100%\nnext"
    assert clean_output("bell\x07 nul\x00 del\x7f") == "bell\u2407 nul\u2400 del\u2421"
    assert clean_output("a\tb") == "a    b"
    assert clean_output("\ufffd") == "\ufffd"
    long = clean_output(LONG_LINE)
    assert long == "L" * MAX_LINE + f" [... {len(LONG_LINE) - MAX_LINE} more characters]"
    huge = bulk(5)
    out = clean_output(huge)
    lines = out.split("\n")
    assert len(lines) == MAX_LINES + 1
    assert lines[0] == huge.split("\n", 1)[0] and lines[-1] == huge.rsplit("\n", 1)[1]
    assert re.fullmatch(r"\[\.\.\. \d+ lines not shown; the evidence file has them \.\.\.\]", lines[MAX_LINES * 3 // 4])
    assert len(out) < MAX_LINES * (MAX_LINE + 40)
    assert len(clean_output((LONG_LINE + "\n") * 50)) < 50 * (MAX_LINE + 40)


@pytest.mark.parametrize("body", [HOSTILE_BLOCK, "```\n`````\n``````", "no ticks", "a `` b ``` c", "ends with ```"])
@pytest.mark.parametrize("indent", ["", "    "])
def test_code_block_keeps_any_body_inside_one_block(body, indent):
    block = code_block(body, indent=indent)
    fence = re.match(r"\s*(`+)", block).group(1)
    assert max((len(run) for run in re.findall("`+", body)), default=0) < len(fence)
    assert block.split("\n")[-1] == indent + fence
    source = f"Before.\n\n{block}\n\nAfter." if not indent else \
        f'=== "Tab"\n\n{block}\n\nAfter.'
    rendered = markdown.markdown(source, extensions=["pymdownx.superfences", "pymdownx.tabbed"])
    doc = Doc(rendered)
    codes = doc.find("code")
    assert len(codes) == 1, rendered
    # as Markdown reads any text: lines end at \r too, tabs become spaces
    assert "".join(codes[0].text).rstrip("\n") == body.replace("\r", "\n").expandtabs(4)
    assert doc.find("p") and "".join(doc.find("p")[-1].text) == "After."


def test_code_block_fence_carries_language_and_attributes():
    block = code_block("x = 1", "python", 'title="a.py" linenums="3"')
    assert block.split("\n")[0] == '```python title="a.py" linenums="3"'


# -- malformed evidence ----------------------------------------------------------------------------

PLAIN_PAGE = "---\nlesson: plain\n---\n\n# Plain\n\n::status\n\n::output\n\n::checks\n"


def plain_project(root: Path) -> Project:
    project = make_project(root)
    project.add_lesson("plain", PLAIN_PAGE)
    return project


def good_record(project: Project) -> dict:
    return json.loads(project.record("plain", checks=[Check("c", "pass", "ok")]).to_json())


def _drop(d: dict, key: str) -> dict:
    return {k: v for k, v in d.items() if k != key}


MALFORMED = {
    "truncated-json": (lambda good: json.dumps(good)[:200], "not valid JSON"),
    "missing-field": (lambda good: json.dumps(_drop(good, "outcome")), "missing field 'outcome'"),
    "format-99": (lambda good: json.dumps({**good, "format_version": 99}), "evidence format 99, newer than"),
    "unknown-outcome": (lambda good: json.dumps({**good, "outcome": "exploded"}), "unknown outcome 'exploded'"),
    "not-an-object": (lambda good: json.dumps([good]), "expected a JSON object, found list"),
    "format-0": (lambda good: json.dumps({**good, "format_version": 0}), "is too old to read; re-record it"),
    "no-format-version": (lambda good: json.dumps(_drop(good, "format_version")), "no format_version"),
    "env-not-an-object": (lambda good: json.dumps({**good, "env": "CPU"}), "env is str, expected dict"),
    "check-without-name": (lambda good: json.dumps({**good, "checks": [{"status": "pass"}]}), "malformed record"),
    "not-utf-8": (lambda good: b"\xff\xfe{}", "not UTF-8 text"),
}


@pytest.mark.parametrize("case", MALFORMED, ids=list(MALFORMED))
def test_malformed_evidence_fails_the_build_naming_the_file(case, tmp_path):
    make, message = MALFORMED[case]
    project = plain_project(tmp_path / "p")
    path = project.evidence / "plain" / "interpreter.json"
    path.parent.mkdir(parents=True)
    content = make(good_record(project))
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")

    result = project.build()
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert f"{path}" in output and message in output, output
    assert "Traceback" not in output, output

    status = project.verify_status()
    assert status.returncode == 2, status.stdout + status.stderr
    assert status.stderr.startswith(f"error: {path}"), status.stderr
    assert message in status.stderr and "Traceback" not in status.stderr, status.stderr


def test_a_record_without_optional_fields_still_reads_and_builds(tmp_path):
    project = plain_project(tmp_path / "p")
    path = project.evidence / "plain" / "interpreter.json"
    path.parent.mkdir(parents=True)
    good = good_record(project)
    for optional in ("tables", "figures", "benchmarks", "skipped_parts", "stderr", "stdout_omitted", "reason"):
        good.pop(optional)
    path.write_text(json.dumps(good), encoding="utf-8")
    record = read_record(path)
    assert record.tables == [] and record.figures == [] and record.checks[0].name == "c"
    result = project.build()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "VERIFIED" in Doc(project.html("plain")).all_text or "PARTIALLY VERIFIED" in project.html("plain")


def test_format_version_0_says_to_re_record(tmp_path):
    project = plain_project(tmp_path / "p")
    path = project.evidence / "plain" / "interpreter.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({**good_record(project), "format_version": 0}), encoding="utf-8")
    with pytest.raises(EvidenceError) as info:
        read_record(path)
    assert str(info.value) == f"{path}: evidence format 0 is too old to read; re-record it"


# -- region and page errors ------------------------------------------------------------------------

def test_an_unterminated_region_fails_the_build_with_file_and_line(tmp_path):
    project = make_project(tmp_path / "p")
    source = LESSON_SOURCE.replace("LESSON", "plain").replace("# end snippet\n", "")
    project.add_lesson("plain", PLAIN_PAGE + "\n::snippet code/plain/plain.py kernel\n", source=source)
    line = source.split("\n").index("# snippet: kernel") + 1
    result = project.build()
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert f"{project.main_file('plain')}:{line}: region 'kernel' is never closed" in output, output
    assert "Traceback" not in output, output


def test_a_hostile_snippet_argument_fails_with_the_page_line(tmp_path):
    project = make_project(tmp_path / "p")
    page = PLAIN_PAGE + "\n::snippet ../../etc/passwd kernel\n"
    project.add_lesson("plain", page)
    line = page.split("\n").index("::snippet ../../etc/passwd kernel") + 1
    result = project.build()
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert f"docs/lessons/plain.md:{line}: '::snippet' shows Python files under code/" in output, output
    assert "Traceback" not in output, output


# -- in a browser ---------------------------------------------------------------------------------------

def test_the_hostile_page_in_a_browser(hostile):
    from test_browser import VIEWPORT, chromium, open_page, screenshot, serve

    project, _ = hostile
    with chromium() as browser, serve(project.site) as base:
        context = browser.new_context(viewport=VIEWPORT)
        for name in ("hostile", "unsupported"):
            watched = open_page(context, base)
            page = watched.page
            page.goto(f"{base}lessons/{name}/")
            assert page.locator("script", has_text="alert").count() == 0
            # the GPU tab, then back: switching must not run anything either
            labels = page.locator(".tabbed-labels > label")
            for i in reversed(range(labels.count())):
                labels.nth(i).click()
            # long lines scroll inside their code block or table, never the page
            widths = page.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
            assert widths[0] == widths[1] == VIEWPORT["width"], f"{name}: the page scrolls sideways ({widths})"
            page.goto(f"{base}lessons/{name}/")
            screenshot(page, f"hostile-{name}")
            watched.assert_clean(f"hostile page {name}")
        # search results quote the hostile text: as text
        watched = open_page(context, base)
        page = watched.page
        page.goto(base)
        search = page.locator("input.md-search__input")
        search.click()
        search.type("hostile", delay=20)
        results = page.locator(".md-search-result__item")
        results.filter(has_text=HOSTILE).first.wait_for()
        assert page.locator(".md-search-result script, .md-search-result img").count() == 0
        page.wait_for_timeout(300)  # give a dialog the chance to open
        screenshot(page, "hostile-search")
        watched.assert_clean("search for hostile text")
        context.close()
