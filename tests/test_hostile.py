"""Hostile input, class 1: markup through every evidence field that reaches a page.

A throw-away project (temp code/ with a fake lesson, temp evidence/ with hand-written
records, temp docs/ with a page using every directive) is built with the real hook,
pointed there by VT_CODE_DIR and VT_EVIDENCE_DIR. Nothing here touches the real site.
Every string a run or a bundle can record is hostile (HTML, Markdown, template braces,
terminal escapes): the built HTML must show it as text, keep its layout and drop
terminal escapes. Fields whose values become file names, keys or classes (a figure
file, a benchmark unit, a check status) are refused by the schema with a message
naming the file and the field, at build, status and import alike.

The other classes of issue 9 have a module each: test_hostile_paths (files from
outside the repository), test_hostile_sizes (unbounded reads), test_hostile_tracebacks,
test_hostile_silent (silent success), test_hostile_loss, test_hostile_invisible
(invisible characters), test_hostile_stale (old rows looking current) and
test_hostile_orphans (processes and temp folders left behind).
"""

from __future__ import annotations

import html
import io
import json
import re
import tarfile

import markdown
import pytest

from conftest import Doc, SiteProject, bench, build_output, figure_name, make_site_project, png, toml_string
from verified_triton.core.kit import Check, Figure, SkippedPart, Table
from verified_triton.judge.evidence import Environment, gpu_key, read_record
from verified_triton.site.render import MAX_LINE, MAX_LINES, MAX_TEXT, Md, clean_output, code_block, text

HOSTILE = "<script>alert(1)</script>"
# Things that mean something to HTML, Markdown, the extensions, MkDocs' templates or a terminal.
INLINE = [HOSTILE, "</code>", "</pre>", "**bold**", "[link](http://x)", "| table |", "{{ config }}", "{% raw %}",
          ":material-check:", "&amp;", "<img src=x onerror=alert(2)>", "`tick`"]
ANSI_RED, ANSI_RESET = "\x1b[31m", "\x1b[0m"
HOSTILE_LINE = " ".join(INLINE) + f" {ANSI_RED}red{ANSI_RESET} bell\x07"
# A name (no '/' allowed in names) that is still markup.
HOSTILE_NAME = "<img src=x onerror=alert(3)> **bold** | pipe |"
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
LONG_LINE = "L" * 20_000  # one output line, far past what a page shows of it
LONG_TEXT = "T" * (MAX_TEXT - 1)  # the longest text the schema allows in a message or cell
BULK_LINE = "bulk output line with some words to make it about eighty characters long ........"


def bulk(kilobytes: float) -> str:
    lines = int(kilobytes * 1000 / (len(BULK_LINE) + 8))
    return "\n".join(f"{BULK_LINE} {i:06d}" for i in range(lines))


LESSON_SOURCE = '''\
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]
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

HOSTILE_PAGE = """\
---
lesson: hostile
---

# Hostile evidence

::status

## Requirements

::requirements

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

SECTIONS = ["requirements", "region", "course", "checks", "benchmarks", "figures", "recorded-table", "output",
            "status-table", "benchmark-table"]


HOSTILE_DEVICE = f'Fake GPU {HOSTILE} **bold** "quoted" `tick`'
HOSTILE_KEY = gpu_key(HOSTILE_DEVICE)  # a GPU record's key is derived from its device name


def hostile_records(project: SiteProject) -> None:
    """The interpreter passed, the GPU run failed: every string a run can record is hostile."""
    interp = project.make_record(
        "hostile", "interpreter",
        stdout=HOSTILE_BLOCK + "\n" + LONG_LINE + "\n" + bulk(40),
        stderr=HOSTILE_BLOCK + "\nTraceback-looking noise " + HOSTILE,
        checks=[Check("matches-torch", "pass", HOSTILE_LINE),
                Check(HOSTILE_NAME, "pass", "fine"),
                Check("long-message", "pass", LONG_TEXT)],
        skipped_parts=[SkippedPart(f"timing {HOSTILE}", HOSTILE_LINE)],
    )
    gpu_env = Environment(python="3.11", torch=f"2.13 {HOSTILE}", triton="3.9 **bold**", platform="Linux",
                          device_name=HOSTILE_DEVICE, capability="9.0",
                          driver="{{ config }}", cuda="13.0 | table |")
    light, dark = png(), png(5, 3)
    light_name, dark_name = figure_name("plot", light), figure_name("plot-dark", dark)
    gpu = project.make_record(
        "hostile", "gpu", outcome="failed", exit_code=1, env=gpu_env,
        reason=f"failed checks: {HOSTILE_LINE}",
        stdout=HOSTILE_BLOCK + "\n" + LONG_LINE,
        stderr=bulk(50),
        checks=[Check("matches-torch", "fail", HOSTILE_LINE), Check("long-message", "pass", LONG_TEXT)],
        benchmarks=[bench(HOSTILE_NAME, 1.5, 1.4, 1.6, unit="GB/s", threshold=1.0, label=f"label {HOSTILE} | x |",
                          baseline_name=HOSTILE_LINE, note=HOSTILE_LINE)],
        tables=[Table(name="hostile-table", columns=[HOSTILE, "**bold**", "| pipe |"],
                      rows=[[HOSTILE_LINE, 1.25, None], ["```", "{{ config }}", LONG_TEXT]],
                      caption=HOSTILE_LINE)],
        figures=[Figure(name="plot", file=light_name, caption=HOSTILE_LINE, dark_file=dark_name)],
    )
    project.write(interp)
    project.write(gpu, {light_name: light, dark_name: dark})


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> SiteProject:
    project = make_site_project(tmp_path_factory.mktemp("hostile"))
    project.add_lesson("hostile", HOSTILE_PAGE, title=f"Hostile {HOSTILE} **bold** [link](http://x)",
                       summary=HOSTILE_LINE + "\n# heading\n{{ config }}",
                       source=LESSON_SOURCE.replace("LESSON", "hostile"))
    project.add_lesson("unsupported", UNSUPPORTED_PAGE, title="Unsupported", order=2,
                       toml=f'[interpreter]\nsupported = false\nreason = {toml_string(HOSTILE_LINE)}\n',
                       source=LESSON_SOURCE.replace("LESSON", "unsupported"))
    hostile_records(project)
    project.write(project.make_record("unsupported", "gpu", outcome="by-design", exit_code=3, reason=HOSTILE_LINE,
                                      stdout=HOSTILE_BLOCK))
    result = project.build()
    assert result.returncode == 0, build_output(result)
    return project


@pytest.fixture(scope="module")
def hostile_doc(hostile) -> Doc:
    return Doc(hostile.html("hostile"))


# -- (a) no markup gets through ------------------------------------------------------------

@pytest.mark.integration
def test_no_hostile_element_exists(hostile, hostile_doc):
    home = Doc((hostile.site / "index.html").read_text(encoding="utf-8"))
    for page in ("hostile", "unsupported"):
        doc = hostile_doc if page == "hostile" else Doc(hostile.html(page))
        assert not [s for s in doc.scripts if "alert" in s], f"{page}: a script element carries the hostile text"
        # the page has exactly the theme's scripts: as many as a page with no evidence at all
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

@pytest.mark.integration
def test_hostile_text_shows_literally_in_every_place(hostile_doc):
    doc = hostile_doc
    literal_line = html.unescape(text(HOSTILE_LINE))  # the line as a reader sees it: no ANSI, bell pictured
    assert HOSTILE in literal_line and "[31m" not in literal_line
    device = 'Fake GPU <script>alert(1)</script> **bold** "quoted" `tick`'
    expected = {
        "": [f"failed checks: {literal_line}"],  # the status sentence, with the reason
        "requirements": [device, f"2.13 {HOSTILE}", "3.9 **bold**"],
        "region": ['s = "<script>alert(1)</script> </code></pre> ``` ````` {{ config }} {% raw %}"',
                   "# **bold** [link](http://x)"],
        # the home page's map shows the summary's first 110 characters, cut at a word ("# heading" is past them)
        "course": [f"Hostile {HOSTILE} **bold** [link](http://x)", "{{ config }}", "{% raw %} …"],
        "checks": [literal_line, HOSTILE_NAME, LONG_TEXT, device],
        "benchmarks": [f"label {HOSTILE} | x |", literal_line, device, "GB/s"],  # label, note, baseline, machine
        "figures": [literal_line, device],
        "recorded-table": [HOSTILE, "**bold**", "| pipe |", literal_line, "```", "{{ config }}", LONG_TEXT],
        "output": [line for line in clean_output(HOSTILE_BLOCK).split("\n")] + [
            device,  # the tab label, exactly
            f"torch 2.13 {HOSTILE}", "driver {{ config }}", "CUDA 13.0 | table |",
            f"Not run here: timing {HOSTILE} ({literal_line})"],
        "status-table": [f"Hostile {HOSTILE} **bold** [link](http://x)", literal_line, device],
        "benchmark-table": [f"label {HOSTILE} | x |", device],
    }
    for section, snippets in expected.items():
        shown = doc.text_of(section)
        assert shown, f"no section #{section} in the page"
        for snippet in snippets:
            assert snippet in shown, f"#{section} does not show {snippet!r} as text"
    # the figure's alt text is the caption, as text, for both variants
    imgs = [e for e in doc.find("img") if e.section == "figures"]
    assert len(imgs) == 2 and all(img.attrs.get("alt") == literal_line for img in imgs)
    # the ratio chart's labels are text too (a list item's label, escaped)
    chart = [e for e in doc.elements if e.tag == "span" and "vt-label" in e.classes
             and e.inside("ol", "vt-ratio-chart") and "label" in "".join(e.text)]
    assert chart and "".join(chart[0].text).startswith("hostile: label <script>")


@pytest.mark.integration
def test_a_hostile_reason_for_an_unsupported_mode_shows_as_text(hostile):
    doc = Doc(hostile.html("unsupported"))
    literal_line = html.unescape(text(HOSTILE_LINE))
    notes = [e for e in doc.find("div", "admonition") if "note" in e.classes]
    assert len(notes) == 1 and literal_line in "".join(notes[0].text)  # no interpreter, and why
    status = doc.find("div", "vt-status")
    assert len(status) == 1 and f"The interpreter cannot run this lesson ({literal_line})" in "".join(status[0].text)
    assert literal_line in doc.text_of("output")


@pytest.mark.integration
def test_figures_are_published_under_their_record_and_nowhere_else(hostile, hostile_doc):
    srcs = [e.attrs["src"].split("#")[0] for e in hostile_doc.find("img") if e.section == "figures"]
    for src in srcs:
        assert re.fullmatch(rf"\.\./\.\./evidence/hostile/{HOSTILE_KEY}/plot(-dark)?-[0-9a-f]{{12}}\.png", src), src
        assert (hostile.site / "lessons" / "hostile" / src).resolve().read_bytes().startswith(b"\x89PNG")
    published = sorted(p.relative_to(hostile.site).as_posix() for p in (hostile.site / "evidence").rglob("*")
                       if p.is_file())
    assert published == sorted(["evidence/hostile/interpreter.json", f"evidence/hostile/{HOSTILE_KEY}.json",
                                "evidence/unsupported/gpu-fake-gpu.json"] + [s.removeprefix("../../") for s in srcs])


# -- (c) the layout survives -------------------------------------------------------------------

@pytest.mark.integration
def test_the_layout_around_hostile_blocks_is_intact(hostile_doc):
    doc = hostile_doc
    content = doc.content()
    # headings: exactly the page's own
    assert [e.attrs.get("id") for e in content if e.tag == "h2"] == SECTIONS
    assert len([e for e in content if e.tag == "h1"]) == 1
    assert not [e for e in content if e.tag in ("h3", "h4") and e.section != "benchmark-table"]
    # one set of output tabs, with one tab per record
    tabbed = [e for e in content if e.tag == "div" and "tabbed-set" in e.classes]
    assert len(tabbed) == 1, f"{len(tabbed)} tabbed blocks"
    labels = [e for e in content if e.tag == "label" and e.inside("div", "tabbed-labels")]
    assert len(labels) == 2
    assert "".join(labels[0].text).startswith("GPU: Fake GPU <script>alert(1)</script>")  # the GPU tab first
    assert "".join(labels[1].text) == "Interpreter (CPU)"
    # the admonitions: the status only (the requirements box is a details block); no hostile '!!! note'
    admonitions = [e for e in content if e.tag == "div" and "admonition" in e.classes]
    assert [sorted(e.classes) for e in admonitions] == [["admonition", "vt-failed", "vt-status"]]
    # the tables: requirements, checks, benchmarks, recorded table, status table, benchmark table
    tables = [e for e in content if e.tag == "table" and "highlighttable" not in e.classes]
    assert [t.section for t in tables] == ["requirements", "checks", "benchmarks", "recorded-table", "status-table",
                                           "benchmark-table"]
    check_rows = [e for e in content if e.tag == "tr" and e.section == "checks" and e.inside("tbody")]
    assert len(check_rows) == 3, "the checks table lost or gained rows"
    table_rows = [e for e in content if e.tag == "tr" and e.section == "recorded-table" and e.inside("tbody")]
    assert len(table_rows) == 2 and all(len([c for c in content if c.tag == "td" and row in c.ancestors]) == 3
                                        for row in table_rows), "a hostile cell split or joined the columns"
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

@pytest.mark.integration
def test_terminal_escapes_are_gone(hostile, hostile_doc):
    page = hostile.html("hostile")
    assert "\x1b" not in page
    assert "[31m" not in hostile_doc.all_text and "[0m" not in hostile_doc.all_text
    assert "window title" not in hostile_doc.all_text  # an OSC sequence is dropped whole
    assert "red text and  after" in hostile_doc.text_of("output")
    assert "progress 100%" in hostile_doc.text_of("output") and "progress 10%" not in hostile_doc.text_of("output")
    assert "\u2407" in hostile_doc.text_of("checks")  # the bell, as a control picture


@pytest.mark.integration
def test_long_output_is_bounded_on_the_page(hostile, hostile_doc):
    record_file = hostile.evidence / "hostile" / "interpreter.json"
    page = (hostile.site / "lessons" / "hostile" / "index.html").read_bytes()
    assert len(page) < 2_000_000, f"the page is {len(page)} bytes"
    output = hostile_doc.text_of("output")
    assert "lines not shown; the evidence file has them" in output
    assert f"[... {len(LONG_LINE) - MAX_LINE:,} more characters]" in output
    assert LONG_LINE[:MAX_LINE + 1] not in output
    # the whole evidence is still published, for anyone who wants it
    assert (hostile.site / "evidence" / "hostile" / "interpreter.json").read_bytes() == record_file.read_bytes()


@pytest.mark.integration
def test_the_search_index_holds_no_markup(hostile):
    index = json.loads((hostile.site / "search" / "search_index.json").read_text(encoding="utf-8"))
    for doc in index["docs"]:
        for key in ("title", "text"):
            assert "<script" not in doc.get(key, "").lower(), f"search index {doc['location']}: raw <script>"


# -- fields that become names, keys or classes are refused by the schema ------------------------

PLAIN_PAGE = "---\nlesson: plain\n---\n\n# Plain\n\n::status\n\n::output\n\n::checks\n\n::figures\n"


def plain_project(root) -> SiteProject:
    project = make_site_project(root)
    project.add_lesson("plain", PLAIN_PAGE)
    return project


def good_raw(project: SiteProject, mode: str = "interpreter") -> dict:
    return json.loads(project.make_record("plain", mode, checks=[Check("c", "pass", "ok")]).to_json())


def figure_raw(file: str, dark: str = "") -> dict:
    return {"name": "plot", "file": file, "caption": "c", "dark_file": dark}


def bench_raw(**changes) -> dict:
    return {**bench("b", 1.0, 0.9, 1.1).__dict__, **changes}


REFUSED = {
    "figure-file-attribute": ({"figures": [figure_raw('x.png" onerror="alert(1)')]}, "figures[0].file",
                              "is not a plain PNG file name"),
    "figure-file-path": ({"figures": [figure_raw("../../../etc/passwd.png")]}, "figures[0].file", "plain PNG"),
    "figure-file-not-png": ({"figures": [figure_raw("plot.svg")]}, "figures[0].file", "plain PNG"),
    "figure-dark-file": ({"figures": [figure_raw("a.png", "<b>.png")]}, "figures[0].dark_file", "plain PNG"),
    "figure-file-twice": ({"figures": [figure_raw("a.png", "a.png")]}, "figures[0].dark_file",
                          "names a file another figure names"),
    "benchmark-unit": ({"benchmarks": [bench_raw(unit=f"GB/s {HOSTILE}")]}, "benchmarks[0].unit",
                       "is not GB/s, TFLOP/s or ms"),
    "benchmark-verdict": ({"benchmarks": [bench_raw(verdict="<b>met</b>")]}, "benchmarks[0].verdict",
                          "is not one of"),
    "benchmark-name-slash": ({"benchmarks": [bench_raw(name="a</b>")]}, "benchmarks[0].name", "without '/'"),
    "check-status": ({"checks": [{"name": "c", "status": "<b>maybe</b>", "message": ""}]}, "checks[0].status",
                     "is not one of"),
    "key": ({"key": "gpu-x\" onload=\"alert(1)"}, "key", "is not a GPU key"),
    "lesson": ({"lesson": "<script>"}, "lesson", "is not a lesson name"),
}


@pytest.mark.integration
@pytest.mark.parametrize("case", REFUSED, ids=list(REFUSED))
def test_a_field_that_would_become_markup_is_refused_naming_it(case, tmp_path):
    changes, field, message = REFUSED[case]
    project = plain_project(tmp_path / "p")
    raw = {**good_raw(project, "gpu"), **changes}
    key = "gpu-fake-gpu"  # the key of its device, "Fake GPU"
    path = project.evidence / "plain" / f"{key}.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(raw), encoding="utf-8")

    result = project.build()
    output = build_output(result)
    assert result.returncode != 0, output
    assert f"{path}: {field}: " in output and message in output, output
    assert "Traceback" not in output
    status = project.verify("--status")
    assert status.returncode == 0 and f"{path}: {field}: " in status.stdout, status.stdout + status.stderr
    check = project.verify("--check")
    assert check.returncode == 1 and f"{path}: {field}: " in check.stderr and "Traceback" not in check.stderr

    # the same record in a bundle is refused, naming the member and the field
    bundle = tmp_path / "evil.tar.gz"
    with tarfile.open(bundle, "w:gz") as tar:
        data = json.dumps(raw).encode()
        info = tarfile.TarInfo(f"plain/{key}.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    path.unlink()
    imported = project.verify("--import", str(bundle))
    assert imported.returncode == 1, imported.stdout + imported.stderr
    assert f"{bundle}:plain/{key}.json: {field}: " in imported.stderr and "refused" in imported.stderr
    assert "Traceback" not in imported.stderr
    assert not path.exists()


@pytest.mark.integration
def test_a_hostile_prerequisite_is_an_error_not_markup(tmp_path):
    project = make_site_project(tmp_path / "p")
    project.add_lesson("plain", PLAIN_PAGE, toml=f"prerequisites = [{toml_string(HOSTILE)}]\n")
    result = project.build()
    assert result.returncode != 0
    assert f"prerequisite '{HOSTILE}' is not a lesson" in build_output(result)
    assert "Traceback" not in build_output(result)


@pytest.mark.integration
def test_a_record_without_optional_fields_still_reads_and_builds(tmp_path):
    project = plain_project(tmp_path / "p")
    path = project.evidence / "plain" / "interpreter.json"
    path.parent.mkdir(parents=True)
    good = good_raw(project)
    for optional in ("tables", "figures", "benchmarks", "skipped_parts", "stderr", "stdout_omitted", "reason",
                     "history"):
        good.pop(optional)
    path.write_text(json.dumps(good), encoding="utf-8")
    record = read_record(path)
    assert record.tables == [] and record.figures == [] and record.checks[0].name == "c"
    result = project.build()
    assert result.returncode == 0, build_output(result)
    assert "PARTIALLY VERIFIED" in Doc(project.html("plain")).all_text


# -- the render functions themselves ----------------------------------------------------------------

@pytest.mark.unit
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


@pytest.mark.unit
def test_text_is_bounded():
    out = html.unescape(text("x" * 5_000_000))
    assert out == "x" * MAX_TEXT + f" [... {5_000_000 - MAX_TEXT:,} more characters]"


@pytest.mark.unit
def test_clean_output_strips_escapes_and_bounds_the_size():
    assert clean_output(f"{ANSI_RED}red{ANSI_RESET}\x1b[2K\x1b[1;32mgreen\x1b[m") == "redgreen"
    assert clean_output("\x1b]0;title\x07after") == "after"
    assert clean_output("a\r\nb\r\n") == "a\nb"
    assert clean_output("10%\r50%\r100%\nnext") == "100%\nnext"
    assert clean_output("bell\x07 nul\x00 del\x7f") == "bell\u2407 nul\u2400 del\u2421"
    assert clean_output("a\tb") == "a    b"
    assert clean_output("\ufffd") == "\ufffd"
    long = clean_output(LONG_LINE)
    assert long == "L" * MAX_LINE + f" [... {len(LONG_LINE) - MAX_LINE:,} more characters]"
    huge = bulk(5000)
    out = clean_output(huge)
    lines = out.split("\n")
    assert len(lines) == MAX_LINES + 1
    assert lines[0] == huge.split("\n", 1)[0] and lines[-1] == huge.rsplit("\n", 1)[1]
    assert re.fullmatch(r"\[\.\.\. [\d,]+ lines not shown; the evidence file has them \.\.\.\]",
                        lines[MAX_LINES * 3 // 4])
    assert len(out) < MAX_LINES * (MAX_LINE + 40)
    assert len(clean_output((LONG_LINE + "\n") * 50)) < 50 * (MAX_LINE + 40)


@pytest.mark.unit
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


@pytest.mark.unit
def test_code_block_fence_carries_language_and_attributes():
    block = code_block("x = 1", "python", Md('title="a.py" linenums="3"'))  # attributes the code writes: Md
    assert block.split("\n")[0] == '```python title="a.py" linenums="3"'


# -- region and page errors ------------------------------------------------------------------------

@pytest.mark.integration
def test_an_unterminated_region_fails_the_build_with_file_and_line(tmp_path):
    project = make_site_project(tmp_path / "p")
    source = LESSON_SOURCE.replace("LESSON", "plain").replace("# end snippet\n", "")
    project.add_lesson("plain", PLAIN_PAGE + "\n::snippet code/plain/plain.py kernel\n", source=source)
    line = source.split("\n").index("# snippet: kernel") + 1
    result = project.build()
    output = build_output(result)
    assert result.returncode != 0
    assert f"{project.main_file('plain')}:{line}: region 'kernel' is never closed" in output, output
    assert "Traceback" not in output, output


@pytest.mark.integration
def test_a_hostile_snippet_argument_fails_with_the_page_line(tmp_path):
    project = make_site_project(tmp_path / "p")
    page = PLAIN_PAGE + "\n::snippet ../../etc/passwd kernel\n"
    project.add_lesson("plain", page)
    line = page.split("\n").index("::snippet ../../etc/passwd kernel") + 1
    result = project.build()
    output = build_output(result)
    assert result.returncode != 0
    assert f"docs/lessons/plain.md:{line}: '::snippet' shows Python files under code/" in output, output
    assert "Traceback" not in output, output


# -- in a browser ---------------------------------------------------------------------------------------

@pytest.mark.e2e
def test_the_hostile_page_in_a_browser(hostile):
    browser_tests = pytest.importorskip("test_browser", reason="the browser tests' module does not import",
                                        exc_type=ImportError)
    project = hostile
    with browser_tests.chromium() as browser, browser_tests.serve(project.site) as base:
        context = browser.new_context(viewport=browser_tests.VIEWPORT)
        for name in ("hostile", "unsupported"):
            watched = browser_tests.open_page(context, base)
            page = watched.page
            page.goto(f"{base}lessons/{name}/")
            assert page.locator("script", has_text="alert").count() == 0
            # the GPU tab, then back: switching must not run anything either
            labels = page.locator(".tabbed-labels > label")
            for i in reversed(range(labels.count())):
                labels.nth(i).click()
            # long lines scroll inside their code block or table, never the page
            widths = page.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
            assert widths[0] == widths[1] == browser_tests.VIEWPORT["width"], \
                f"{name}: the page scrolls sideways ({widths})"
            page.goto(f"{base}lessons/{name}/")
            browser_tests.screenshot(page, f"hostile-{name}")
            watched.assert_clean(f"hostile page {name}")
        # search results quote the hostile title: as text
        watched = browser_tests.open_page(context, base)
        page = watched.page
        page.goto(base)
        search = page.locator("input.md-search__input")
        search.click()
        search.type("hostile", delay=20)
        results = page.locator(".md-search-result__item")
        results.filter(has_text=HOSTILE).first.wait_for()
        assert page.locator(".md-search-result script, .md-search-result img").count() == 0
        page.wait_for_timeout(300)  # give a dialog the chance to open
        browser_tests.screenshot(page, "hostile-search")
        watched.assert_clean("search for hostile text")
        context.close()
