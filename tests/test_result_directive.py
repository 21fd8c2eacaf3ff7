"""::result NAME: one recorded benchmark in a sentence, where a step says what it bought (issue 33).

The value, the ratio and its interval come from the record, escaped; a result from an older source says
so; a name the current GPU record does not hold fails the build, and before any GPU record a placeholder
says the number is still to be measured.
"""

from __future__ import annotations

import html

import pytest

from conftest import PASSING, bench, fake_record
from test_render import page_of
from verified_triton.judge.evidence import write_record
from verified_triton.site import directives

pytestmark = pytest.mark.unit


def _page(project, *benchmarks, **fields):
    project.add("good", PASSING)
    write_record(project.evidence, fake_record(project.lesson("good"), "gpu", benchmarks=list(benchmarks), **fields))
    return page_of(project)


def test_a_result_reads_value_ratio_and_interval_from_the_record(project):
    page = _page(project, bench("step3", 0.96, 0.95, 0.97, unit="GB/s", label="step 3 vs device copy",
                                baseline_name="torch copy_"))
    out = html.unescape(directives.expand("result", "step3", page))
    assert out.startswith("**step 3 vs device copy**: 1.92 GB/s, **0.96×** torch copy_")
    assert "(95 % interval 0.95–0.97; NVIDIA H200, 2026-01-02)" in out
    assert "older source" not in out
    assert "gate" not in out  # no target, no verdict


def test_a_result_carries_its_targets_verdicts(project):
    page = _page(project, bench("b", 0.96, 0.955, 0.97, threshold=0.95, stretch=1.05))
    out = directives.expand("result", "b", page)
    assert out.endswith(" · gate 0.95×: :material-check: met; stretch 1.05×: **not met**")


def test_a_result_escapes_what_the_record_says(project):
    page = _page(project, bench("b", 1.1, label="<img src=x onerror=alert(1)>", baseline_name="*cuBLAS*"))
    out = directives.expand("result", "b", page)
    assert "<img" not in out and "*cuBLAS*" not in out and "&#60;img" in out


def test_a_result_of_an_older_source_is_marked(project):
    page = _page(project, bench("b", 1.1), source_hash="0" * 64)
    assert "⚠ older source" in directives.expand("result", "b", page)


def test_a_name_the_current_gpu_record_lacks_fails_the_build(project):
    page = _page(project, bench("b", 1.1))
    with pytest.raises(directives.DirectiveError, match=r"no recorded benchmark named 'typo'.*recorded benchmarks: b"):
        directives.expand("result", "typo", page)


def test_before_any_gpu_record_the_result_is_announced(project):
    project.add("good", PASSING)
    out = directives.expand("result", "b", page_of(project))
    assert "measured by the GPU run" in out
