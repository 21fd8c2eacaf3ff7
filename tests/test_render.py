"""Rendering choices that are not about hostile input, and the directive registry.

Folding long tables, ratios with their intervals, the ratio chart and the
history sparklines; the registry (`tools/directives/`): every module in the
package registers its directives, the unknown-directive error and the
`::directives` table come from it, and a new module is picked up by itself.
"""

from __future__ import annotations

import html
import pkgutil
import re
import shutil
import subprocess
import sys
import textwrap

import markdown
import pytest

from conftest import KIT, PASSING, TOOLS, bench, fake_record
from verified_triton.core.kit import Check
from verified_triton.core.lessons import discover
from verified_triton.core.limits import LIMITS
from verified_triton.judge.evidence import HistoryPoint, write_record
from verified_triton.judge.status import judge
from verified_triton.site import directives
from verified_triton.site.directives.benchmarks import benchmark_table, ratio_chart, record_rows, sparkline
from verified_triton.site.directives.checks import checks
from verified_triton.site.render import COLLAPSE_ROWS_OVER, bounded_rows, text

EXTENSIONS = ["tables", "admonition", "pymdownx.details", "pymdownx.superfences", "attr_list", "md_in_html"]


def page_of(project, name: str | None = "good", src: str = "lessons/good.md") -> directives.Page:
    """What the hook hands a directive: the site's lessons and judgements, and this page's lesson."""
    lessons = discover(project.code)
    statuses = {lesson.name: judge(lesson, project.evidence) for lesson in lessons}
    site = directives.Site(project.code, project.evidence, lessons, statuses)
    return directives.Page(site, src, statuses.get(name) if name else None)


def lesson_with_checks(project, statuses: list[str]) -> directives.Page:
    project.add("good", PASSING)
    record = fake_record(project.lesson("good"), "gpu")
    record.checks = [Check(f"check-{i:02d}", status, f"message {i}") for i, status in enumerate(statuses)]
    if "fail" in statuses:  # a run with a failed check did not pass (status.py re-derives the outcome)
        record.outcome, record.exit_code = "failed", 1
    write_record(project.evidence, record)
    return page_of(project)


# -- checks ------------------------------------------------------------------------------------

@pytest.mark.unit
def test_a_short_checks_table_is_shown_whole(project):
    md = checks(lesson_with_checks(project, ["pass"] * COLLAPSE_ROWS_OVER))
    assert "???" not in md
    assert md.count("\n| <code>check-") == COLLAPSE_ROWS_OVER


@pytest.mark.unit
def test_a_long_checks_table_folds_but_never_hides_a_failure(project):
    statuses = ["pass"] * 20
    statuses[7], statuses[15] = "fail", "skip"
    html = markdown.markdown(checks(lesson_with_checks(project, statuses)), extensions=EXTENSIONS)
    summary, _, folded = html.partition("<details")
    assert "22 checks" not in summary and "<strong>20 checks</strong>" in summary
    assert "18 pass, 1 fail, 1 skip" in summary
    # the failed and the skipped check stand outside the fold; the fold has all twenty
    assert "check-07" in summary and "check-15" in summary and "check-03" not in summary
    assert all(f"check-{i:02d}" in folded for i in range(20))


@pytest.mark.unit
def test_rows_past_the_limit_fold_then_are_cut():
    rows = [[str(i)] for i in range(LIMITS.rows_shown * 4 + 7)]
    md = bounded_rows(["n"], rows)
    html = markdown.markdown(md, extensions=EXTENSIONS)
    shown, _, folded = html.partition("<details")
    assert shown.count("<tr>") == LIMITS.rows_shown + 1  # and the header
    assert f"{LIMITS.rows_shown * 3} more rows" in folded
    assert "<td>399</td>" in folded and "<td>400</td>" not in html
    assert "7 more rows are in the evidence file and not shown here" in html
    assert bounded_rows(["n"], rows[:3]).count("\n") == 4  # a short table is just a table


# -- benchmarks --------------------------------------------------------------------------------

class SimpleRecord:
    """What the benchmark rows read of a record."""

    def __init__(self, benchmarks):
        self.benchmarks = benchmarks


@pytest.mark.unit
def test_ratios_show_two_decimals_and_their_interval():
    rec_bench = bench("b", 1.0002, 0.9871, 1.0123, unit="GB/s", threshold=0.95)
    row = record_rows(SimpleRecord([rec_bench]))[0]
    assert "**1.00×** <small>(0.99–1.01)</small>" in row


@pytest.mark.unit
@pytest.mark.parametrize("b, expect", [
    (bench("g", 1.1, 1.05, 1.2, threshold=1.0), "gate 1.00×: :material-check: met"),
    (bench("g", 0.99, 0.95, 1.03, threshold=1.0), "gate 1.00×: ≈ within noise"),
    (bench("g", 0.8, 0.75, 0.85, threshold=1.0), "gate 1.00×: **not met**"),
    (bench("g", 0.8, 0.75, 0.85, threshold=1.0, gate=False), "goal 1.00×: **not met**"),
    (bench("g", 1.1, 1.05, 1.2, threshold=1.0, stretch=1.15), "<br>stretch 1.15×: ≈ within noise"),
    (bench("g", 1.1), "informational"),
])
def test_each_verdict_is_shown_with_its_kind_of_target(b, expect):
    assert expect in record_rows(SimpleRecord([b]))[0][-1]


@pytest.mark.unit
def test_the_ratio_chart_escapes_labels_and_colours_by_verdict():
    met = bench("ok", 1.02, 1.0, 1.05, threshold=0.9)
    missed = bench("short", 0.8, 0.78, 0.82, threshold=0.6, stretch=0.9)
    noise = bench("close", 0.9, 0.85, 0.95, threshold=0.9)
    info = bench("info", 7.5, 7.0, 8.0)
    svg = ratio_chart([("<script>alert(1)</script>", met), ("b", missed), ("c", noise), ("d", info)])
    assert "<script>" not in svg and "&lt;script&gt;alert(1)&lt;/script&gt;" in svg
    for cls in ("vt-bar-met", "vt-bar-missed", "vt-bar-noise", "vt-bar-info"):
        assert svg.count(f'class="{cls}"') == 1, cls
    assert svg.count('class="vt-err"') == 4  # every bar carries its interval
    assert "7.50× ›" in svg  # past the clip, the value is still printed
    assert ratio_chart([]) == ""


def fake_record_like(started: str):
    class R:
        date = started[:10]
    return R()


@pytest.mark.unit
def test_a_sparkline_shows_each_recording_with_its_interval():
    b = bench("b", 1.2, 1.1, 1.3)
    rec = fake_record_like("2026-03-01T00:00:00Z")
    assert sparkline([], rec, b) == "<small>first recording</small>"
    points = [HistoryPoint(f"2026-0{m}-01T00:00:00Z", "a" * 64, "3.9", 1.0, 0.9, 1.1) for m in (1, 2)]
    svg = sparkline(points, rec, b)
    assert svg.count("<circle") == 3 and svg.count("<line") == 3
    assert svg.count('class="vt-spark-now"') == 2  # the newest: its dot and its interval
    assert "2026-01-01: 1.00× (0.90–1.10); 2026-02-01: 1.00× (0.90–1.10); 2026-03-01: 1.20× (1.10–1.30)" in svg


@pytest.mark.unit
def test_the_benchmark_table_shows_history_per_benchmark(project):
    project.add("good", PASSING)
    rec = fake_record(project.lesson("good"), "gpu", benchmarks=[bench("b", 1.2, 1.1, 1.3, threshold=1.0)])
    rec.history = {"b": [HistoryPoint("2025-12-01T00:00:00Z", "a" * 64, "3.9", 1.0, 0.9, 1.1)]}
    write_record(project.evidence, rec)
    md = benchmark_table(page_of(project, None, "benchmarks.md"))
    assert html.unescape(md).startswith("### NVIDIA H200 · Triton 3.9.0 · torch 2.5.1")
    assert 'class="vt-ratio-chart"' in md and 'class="vt-spark"' in md
    assert "2025-12-01: 1.00×" in md


@pytest.mark.unit
def test_folded_benchmarks_leave_a_current_gpu_run_machine_to_the_status_line(project):
    """The GPU is named once on a lesson page, in its status line (issue 51): the folded table's verdict line
    names the machine only for a run of an older source."""
    project.add("good", PASSING)
    write_record(project.evidence, fake_record(project.lesson("good"), "gpu",
                                               benchmarks=[bench("b", 1.2, 1.1, 1.3, threshold=1.0)]))
    md = directives.benchmarks.benchmarks(page_of(project), frozenset({"folded"}))
    line = str(md).split("\n\n")[0]
    assert line.startswith("**1 benchmark**: ") and "H200" not in line
    write_record(project.evidence, fake_record(project.lesson("good"), "gpu", source_hash="b" * 64,
                                               benchmarks=[bench("b", 1.2, 1.1, 1.3, threshold=1.0)]))
    line = str(directives.benchmarks.benchmarks(page_of(project), frozenset({"folded"}))).split("\n\n")[0]
    assert line.startswith("**1 benchmark** on NVIDIA H200 (")


# -- the directive registry ----------------------------------------------------------------------

@pytest.mark.unit
def test_every_module_of_the_package_registers_its_directives():
    modules = {m.name for m in pkgutil.iter_modules(directives.__path__)}
    registered = {d.render.__module__.rsplit(".", 1)[-1] for d in directives.REGISTRY.values()}
    assert registered == modules - {"common"}, "a module that registers nothing, or one never imported"
    assert {"snippet", "status", "output", "checks", "benchmarks", "benchmark-table", "figure", "figures", "table",
            "course", "status-table", "requirements", "badges", "directives", "limits"} <= set(directives.REGISTRY)
    for d in directives.REGISTRY.values():
        assert re.fullmatch(r"[a-z][a-z-]*", d.name) and d.help and d.usage.startswith(f"::{d.name}")


@pytest.mark.unit
def test_an_unknown_directive_lists_the_registry(project):
    with pytest.raises(directives.DirectiveError) as info:
        directives.expand("snippets", "code/x.py kernel", page_of(project, None))
    message = str(info.value)
    assert message.startswith("unknown directive '::snippets' (known: ")
    for name in directives.REGISTRY:
        assert f"::{name}" in message


@pytest.mark.unit
def test_arguments_and_the_page_lesson_are_checked(project):
    page = page_of(project, None)
    with pytest.raises(directives.DirectiveError,
                       match=r"'::table' takes 1 argument\(s\) then, if wanted, folded: ::table NAME \[folded\]"):
        directives.expand("table", "", page)
    with pytest.raises(directives.DirectiveError, match="'::status' takes no argument"):
        directives.expand("status", "extra", page)
    with pytest.raises(directives.DirectiveError, match="needs the page's front matter"):
        directives.expand("checks", "", page)


@pytest.mark.unit
def test_the_directives_directive_renders_every_registered_directive(project):
    table = directives.expand("directives", "", page_of(project, None))
    rows = [line for line in table.split("\n")[2:] if line.startswith("| ")]
    assert len(rows) == len(directives.REGISTRY)
    for d in directives.REGISTRY.values():
        assert any(row.startswith(f"| <code>{text('::' + d.name)}") for row in rows), d.name


@pytest.mark.integration
def test_a_new_directive_module_is_picked_up(tmp_path):
    """Adding a directive is adding one module: the registry, the error and the table all see it."""
    tools = tmp_path / "tools"
    shutil.copytree(TOOLS, tools, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "code").mkdir()
    shutil.copyfile(KIT, tmp_path / "code" / "lessonkit.py")
    (tools / "verified_triton" / "site" / "directives" / "hello.py").write_text(textwrap.dedent('''\
        """::hello NAME — a greeting (a test module)."""

        from verified_triton.site.directives import Page, directive
        from verified_triton.site.door import Md


        @directive("hello", "greets NAME", args=("NAME",), needs_lesson=False)
        def hello(page: Page, name: str) -> Md:
            return Md("Hello, {}!").format(name)
    '''), encoding="utf-8")
    probe = textwrap.dedent(f'''\
        import sys
        sys.path.insert(0, {str(tools)!r})
        from verified_triton.site import directives
        page = directives.Page(directives.Site(None, None, [], {{}}), "x.md", None)
        print(directives.expand("hello", "world", page))
        print("hello" in directives.expand("directives", "", page))
        try:
            directives.expand("nope", "", page)
        except directives.DirectiveError as exc:
            print("::hello" in str(exc))
    ''')
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:3] == ["Hello, world!", "True", "True"]
