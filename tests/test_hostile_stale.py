"""Hostile input, class 8: old rows that look current.

After the lesson's source changes, everything shown from a record of the old
source (checks, benchmarks, tables, figures, output, the status and
benchmark tables, the requirements box) carries the "older source" marker in
the built HTML, and nothing from a current record does.
"""

from __future__ import annotations

import pytest

from conftest import Doc, bench, build_output, figure_name, make_site_project, png
from verified_triton.core.kit import Check, Figure, Table
from verified_triton.judge.evidence import Environment
from verified_triton.site.directives.common import STALE_MARK

pytestmark = pytest.mark.integration

PAGE = """\
---
lesson: plain
---

# Plain

::status

## Requirements

::requirements

## Checks

::checks

## Benchmarks

::benchmarks

## Figures

::figure plot

## Recorded table

::table sweep

## Output

::output

## Status table

::status-table

## Benchmark table

::benchmark-table
"""


@pytest.fixture(scope="module")
def builds(tmp_path_factory) -> dict[str, Doc]:
    """The same page built twice: with current records, then after an edit of the lesson's source."""
    site = make_site_project(tmp_path_factory.mktemp("stale") / "repo")
    site.add_lesson("plain", PAGE)
    data = png()
    name = figure_name("plot", data)
    gpu = site.make_record(
        "plain", "gpu",
        env=Environment(python="3.11", torch="2.13", triton="3.9", platform="Linux", device_name="Fake GPU"),
        checks=[Check("first", "pass", "m1"), Check("second", "pass", "m2")],
        benchmarks=[bench("speed", 1.2, 1.1, 1.3, threshold=1.0, label="speed")],
        tables=[Table("sweep", ["n", "ms"], [[1, 0.5], [2, 0.7]])],
        figures=[Figure("plot", name, "the plot")])
    site.write(gpu, {name: data})
    site.write(site.make_record("plain", checks=[Check("first", "pass", "m1")]))
    docs = {}
    for when in ("current", "edited"):
        if when == "edited":
            main = site.code / "plain" / "plain.py"
            main.write_text(main.read_text() + "\n# an edit after the runs\n")
        result = site.build()
        assert result.returncode == 0, build_output(result)
        docs[when] = Doc(site.html("plain"))
    return docs


SECTIONS = ["requirements", "checks", "benchmarks", "figures", "recorded-table", "output", "status-table",
            "benchmark-table"]


def test_nothing_is_marked_while_the_records_are_current(builds):
    doc = builds["current"]
    for section in SECTIONS:
        assert doc.text_of(section), section
        assert "older source" not in doc.text_of(section), section


@pytest.mark.parametrize("section", SECTIONS)
def test_every_part_of_the_page_from_an_old_record_is_marked(builds, section):
    assert STALE_MARK in builds["edited"].text_of(section) or "(older source)" in builds["edited"].text_of(section)


def test_each_check_cell_and_column_is_marked(builds):
    doc = builds["edited"]
    content = doc.content()
    headers = ["".join(e.text) for e in content if e.tag == "th" and e.section == "checks"]
    assert headers[0] == "Check" and all(STALE_MARK in h for h in headers[1:]) and len(headers) == 3
    cells = ["".join(e.text) for e in content if e.tag == "td" and e.section == "checks"]
    runs = [c for c in cells if "pass" in c or "not run" in c]
    assert runs and all(c.startswith(f"{STALE_MARK}: ") or c == "not run" for c in runs), runs


@pytest.mark.parametrize("section", ["benchmarks", "figures", "recorded-table"])
def test_tables_and_figures_of_an_old_record_sit_in_a_marked_box(builds, section):
    doc = builds["edited"]
    boxes = [e for e in doc.content() if e.tag == "div" and "vt-stale" in e.classes and e.section == section]
    assert len(boxes) == 1, section
    inside = {e.tag for e in doc.content() if boxes[0] in e.ancestors}
    assert ("table" in inside) if section != "figures" else ("img" in inside)
    title = [e for e in doc.content() if boxes[0] in e.ancestors and "admonition-title" in e.classes]
    assert title and "".join(title[0].text) == STALE_MARK


def test_the_status_says_what_the_marker_means(builds):
    doc = builds["edited"]
    status = doc.find("div", "vt-status")
    text = "".join(status[0].text)
    assert "STALE" in text and f"Rows and figures from a run of an older source are marked {STALE_MARK}" in text


def test_output_tabs_are_labelled(builds):
    labels = ["".join(e.text) for e in builds["edited"].content() if e.tag == "label"
              and e.inside("div", "tabbed-labels")]
    assert labels == ["GPU: Fake GPU (older source)", "Interpreter (CPU) (older source)"]
