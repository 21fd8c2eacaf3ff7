"""Rendering choices that are not about hostile input: folding long check tables, ratios, the chart."""

from __future__ import annotations

import markdown

from conftest import PASSING, fake_record
from evidence import Benchmark, Check
from render import COLLAPSE_CHECKS_OVER, benchmark_rows, checks_table, ratio_chart
from status import judge

EXTENSIONS = ["tables", "admonition", "pymdownx.details", "pymdownx.superfences", "attr_list"]


def lesson_with_checks(project, statuses: list[str]):
    project.add("good", PASSING)
    lesson = project.lesson("good")
    record = fake_record(lesson, "gpu")
    record.checks = [Check(f"check-{i:02d}", status, f"message {i}") for i, status in enumerate(statuses)]
    from evidence import write_record

    write_record(project.evidence, record)
    return judge(lesson, project.evidence)


def test_a_short_checks_table_is_shown_whole(project):
    md = checks_table(lesson_with_checks(project, ["pass"] * COLLAPSE_CHECKS_OVER))
    assert "???" not in md
    assert md.count("\n| <code>check&#45;") == COLLAPSE_CHECKS_OVER


def test_a_long_checks_table_folds_but_never_hides_a_failure(project):
    statuses = ["pass"] * 20
    statuses[7], statuses[15] = "fail", "skip"
    html = markdown.markdown(checks_table(lesson_with_checks(project, statuses)), extensions=EXTENSIONS)
    summary, _, folded = html.partition("<details")
    assert "22 checks" not in summary and "<strong>20 checks</strong>" in summary
    assert "18 pass, 1 fail, 1 skip" in summary
    # the failed and the skipped check stand outside the fold; the fold has all twenty
    assert "check&#45;07" in summary and "check&#45;15" in summary and "check&#45;03" not in summary
    assert all(f"check&#45;{i:02d}" in folded for i in range(20))


def test_ratios_show_two_decimals(project):
    project.add("good", PASSING)
    lesson = project.lesson("good")
    b = Benchmark("b", measured=4347.0, baseline=4346.0, unit="GB/s", ratio=1.0002, threshold=0.95, met=True)
    record = fake_record(lesson, "gpu", benchmarks=[b])
    row = benchmark_rows([record])[0]
    assert "**1.00x**" in row


def test_the_ratio_chart_escapes_labels_and_marks_misses():
    met = Benchmark("ok", 1.0, 1.0, "x", ratio=1.02, threshold=0.9, met=True)
    missed = Benchmark("short", 1.0, 1.0, "x", ratio=0.8, threshold=0.6, met=True, stretch=0.9, stretch_met=False)
    info = Benchmark("info", 1.0, 1.0, "x", ratio=7.5)
    svg = ratio_chart([("<script>alert(1)</script>", met), ("b", missed), ("c", info)])
    assert "<script>" not in svg and "&lt;script&gt;alert(1)&lt;/script&gt;" in svg
    assert svg.count('class="vt-bar-met"') == 1 and svg.count('class="vt-bar-missed"') == 1
    assert svg.count('class="vt-bar-info"') == 1
    assert "7.50x ›" in svg  # past the clip, the value is still printed
    assert ratio_chart([]) == ""
