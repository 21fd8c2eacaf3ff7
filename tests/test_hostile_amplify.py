"""Hostile input, issue 20, class 6: no amplification.

A record's numbers may be as wide as the schema allows (|x| up to 1e300), its
text may be all characters that escaping makes longer, its rows as many and as
small as the limits allow. Every number that reaches a page, the search index,
a notebook, an SVG or a README is written with bounded width (tools/numfmt.py),
and what one record adds to any one generated file stays within
LIMITS.amplification times its size (plus LIMITS.amplification_allowance for the
markup of its bounded number of rows), measured here on a built site with the
worst records of each kind. Written before the fix: a 300 KB record of numbers
made a 4.5 MB page, search index and notebook.
"""

from __future__ import annotations

import io
import json
import re
import zipfile

import pytest

from conftest import FAKE_PNG, bench, build_output, figure_name, make_site_project
from verified_triton.core.kit import Check, Figure, Table
from verified_triton.core.limits import LIMITS
from verified_triton.judge.evidence import HistoryPoint

HUGE = -9.99e299
WORST = ["-9.99e299", "9.99e299", "1e-300", "-1e-300", "0", "1.5", "123456.789", "2**53", "-(2**53)"]
ESCAPED = "{|}~"  # each becomes a six-character reference (&#123;) on a page

PAGE = """\
---
lesson: LESSON
---

# LESSON

::status

## Requirements

::requirements

## Checks

::checks

## Benchmarks

::benchmarks

## Figures

::figures

## Table

::table t

## Output

::output
"""


@pytest.mark.unit
@pytest.mark.parametrize("value", WORST)
def test_every_number_has_a_bounded_width(value):
    from verified_triton.core import numfmt
    from verified_triton.site import render

    x = eval(value)  # noqa: S307 - the test's own literals
    shown = [numfmt.number(x), render.number(x), numfmt.number(float(x)), numfmt.fixed(float(x)),
             numfmt.fixed(float(x), 0), numfmt.fixed(float(x), 3), numfmt.seconds(float(x)),
             render.ratio(float(x)).rstrip("×"), *render.interval(float(x), float(x)).split("–")]
    assert all(len(s) <= numfmt.WIDEST for s in shown), shown


def numbers_record(site):
    """The widest numbers the schema allows where numbers are shown: a full table, benchmarks with their
    targets and history (sparklines, the ratio chart), the wall time."""
    benches = [bench(f"b{i}", 9.99e299, threshold=HUGE, stretch=HUGE, samples=1, label="l") for i in range(3)]
    point = HistoryPoint("2025-12-01T00:00:00Z", "a" * 64, "3", 9.99e299, HUGE, 9.99e299)
    rows = [[HUGE] * LIMITS.table_columns for _ in range(LIMITS.table_rows)]
    return site.make_record("numbers", "gpu", tables=[Table("t", ["c"] * LIMITS.table_columns, rows)],
                            benchmarks=benches, history={b.name: [point] * LIMITS.history for b in benches},
                            wall_s=9.99e299)


FIGURES: dict[str, bytes] = {}  # file name -> bytes, each named by its content as verify names it


def figure(stem: str) -> str:
    data = FAKE_PNG + stem.encode()
    FIGURES[figure_name(stem, data)] = data
    return figure_name(stem, data)


def escapes_record(site):
    """Text that escaping lengthens most, where a record's text is shown more than once: failed checks
    (outside their fold and in it), figure captions (alt text of both variants and the caption), benchmark
    labels (the tables and the ratio chart), output."""
    long = ESCAPED * (LIMITS.string // len(ESCAPED))
    figures = [Figure(f"f{i}", figure(f"p{i}"), long, figure(f"p{i}-dark")) for i in range(8)]
    return site.make_record(
        "escapes", "gpu", outcome="failed", exit_code=1, reason=long,
        checks=[Check(f"c{i}", "fail", long) for i in range(16)],
        benchmarks=[bench(f"b{i}", 1.0, label=long, samples=1) for i in range(16)],
        tables=[Table("t", ["a"], [[long]], caption=long)],
        figures=figures, stdout=("<" * 999 + "\n") * 16)


def repeated_record(site):
    """Short fields a page repeats: the machine (every caption, tab, header), table headers (above and inside
    a fold), as long as the schema allows, with as many figures and rows as it allows."""
    from verified_triton.judge.evidence import Environment

    most = ESCAPED * (LIMITS.environment // len(ESCAPED))
    env = Environment(python=most, torch=most, triton=most, platform=most, device_name=most, capability=most,
                      driver=most, cuda=most)
    long = ESCAPED * (LIMITS.string // len(ESCAPED))
    columns = LIMITS.table_columns
    figures = [Figure(f"f{i}", figure(f"p{i}"), "c") for i in range(LIMITS.figures_per_record)]
    return site.make_record(
        "repeated", "gpu", env=env, checks=[Check("c", "pass", "")], figures=figures,
        benchmarks=[bench("b", 1.0, label="b", samples=1)],
        tables=[Table("t", [long] * columns, [[None] * columns for _ in range(LIMITS.rows_shown + 1)])])


def rows_record(site):
    """As many rows as the limits allow, each as small as it can be."""
    return site.make_record(
        "rows", "gpu", outcome="failed", exit_code=1,
        checks=[Check(f"{i}", "fail" if i % 2 else "skip", "") for i in range(LIMITS.checks)],
        tables=[Table("t", ["a"] * LIMITS.table_columns,
                      [[None] * LIMITS.table_columns for _ in range(LIMITS.table_rows)])])


@pytest.fixture(scope="module")
def amplified(tmp_path_factory):
    site = make_site_project(tmp_path_factory.mktemp("amplify") / "site")
    (site.docs / "benchmarks.md").write_text("# Benchmarks\n\n::benchmark-table\n", encoding="utf-8")
    (site.docs / "status.md").write_text("# Status\n\n::status-table\n", encoding="utf-8")
    sizes = {}
    for order, (name, make) in enumerate((("plain", None), ("numbers", numbers_record), ("escapes", escapes_record),
                                          ("repeated", repeated_record), ("rows", rows_record))):
        site.add_lesson(name, PAGE.replace("LESSON", name), order=order)
        record = make(site) if make else site.make_record(name, "gpu", tables=[Table("t", ["a"], [[1]])])
        path = site.write(record, {file: FIGURES[file] for fig in record.figures for file in (fig.file, fig.dark_file)
                                   if file})
        sizes[name] = path.stat().st_size
    result = site.build()
    assert result.returncode == 0, build_output(result)
    return site, sizes


def generated(site, name: str) -> dict[str, int]:
    """Bytes of each file generated for lesson `name`: its page, its search entries, its notebook, its README."""
    index = json.loads((site.site / "search" / "search_index.json").read_text(encoding="utf-8"))
    entries = [d for d in index["docs"] if d["location"].startswith(f"lessons/{name}/")]
    with zipfile.ZipFile(io.BytesIO((site.site / "downloads" / f"{name}.zip").read_bytes())) as zf:
        readme = len(zf.read(f"{name}/README.md"))
    return {"page": (site.site / "lessons" / name / "index.html").stat().st_size,
            "search index": len(json.dumps(entries, ensure_ascii=False).encode()),
            "notebook": (site.site / "notebooks" / f"{name}.ipynb").stat().st_size, "README": readme}


@pytest.mark.integration
@pytest.mark.parametrize("name", ["numbers", "escapes", "repeated", "rows"])
def test_what_one_record_adds_to_a_generated_file_is_bounded(amplified, name):
    site, sizes = amplified
    plain, worst = generated(site, "plain"), generated(site, name)
    bound = LIMITS.amplification * sizes[name] + LIMITS.amplification_allowance
    for what, size in worst.items():
        added = size - plain[what]
        print(f"{name}: record {sizes[name]:,} bytes -> {what} +{added:,} bytes ({added / sizes[name]:.2f}x)")
        assert added <= bound, f"{name}: {what} grew by {added:,} bytes for a record of {sizes[name]:,}"


@pytest.mark.integration
def test_the_course_wide_pages_are_bounded_too(amplified):
    site, sizes = amplified
    total = sum(sizes.values())
    bound = LIMITS.amplification * total + 3 * LIMITS.amplification_allowance
    for page in ("benchmarks", "status"):
        size = (site.site / page / "index.html").stat().st_size
        print(f"{page}: {size:,} bytes for {total:,} bytes of records ({size / total:.2f}x)")
        assert size <= bound, f"{page}: {size:,} bytes"


@pytest.mark.integration
def test_no_wide_number_reaches_any_generated_file(amplified):
    site, _ = amplified
    for path in [*site.site.rglob("*.html"), site.site / "search" / "search_index.json",
                 *site.site.rglob("*.ipynb")]:
        wide = re.search(r"[0-9][0-9,.]{20,}", path.read_text(encoding="utf-8"))
        assert wide is None, f"{path}: {wide.group()[:40]}..."
