"""The reading path's folds (issue 32 item 2): what a lesson page shows by default, and what it folds on purpose.

A directive line may end with flags (`::table NAME folded`): `folded` puts a check list, a step's output, a
table, the benchmarks or the whole output one click away, behind a line computed from the evidence where
there is one to say ("19 checks passed on NVIDIA H200 and 15 under the interpreter"). Without the flag every
directive shows what it showed before; a failed check never folds away.
"""

from __future__ import annotations

from html import unescape

import markdown
import pytest

from conftest import bench
from test_render import EXTENSIONS
from test_steps import expand, stepped
from verified_triton.core.kit import Check, Step, Table
from verified_triton.site import directives

pytestmark = pytest.mark.unit


def recorded(site_project, gpu_checks=("pass", "pass", "pass"), interp_checks=("pass", "pass")):
    """The stepped lesson with a GPU and an interpreter run: checks in the step `checks`, a table, benchmarks."""
    stepped(site_project)
    table = Table("sweep", ["n", "GB/s"], [[1024, 12.5], [2048, 25.0]],
                  caption="Square FP16 matmuls, do_bench medians; the same rounds as the benchmarks")
    for mode, statuses in (("gpu", gpu_checks), ("interpreter", interp_checks)):
        failed = "fail" in statuses
        site_project.write(site_project.make_record(
            "stepped", mode=mode, outcome="failed" if failed else "passed", exit_code=1 if failed else 0,
            checks=[Check(f"c{i}", s, f"message {i}", step="checks") for i, s in enumerate(statuses)],
            steps=[Step("checks", "  check c0: PASS (tolerance derived from fp16)\n"),
                   Step("timing", "12.5 ms\n")],
            tables=[table] if mode == "gpu" else [],
            benchmarks=[bench("a", 0.8, 0.79, 0.81, threshold=0.6, stretch=0.9, label="a"),
                        bench("b", 0.85, 0.84, 0.86, threshold=0.6, stretch=0.9, label="b")] if mode == "gpu"
            else []))


def html_of(md: str) -> str:
    return unescape(markdown.markdown(md, extensions=[*EXTENSIONS, "pymdownx.tabbed"]))


def folded_part(html: str) -> tuple[str, str]:
    """(what shows, what is folded) of one expanded directive."""
    shown, _, folded = html.partition("<details")
    return shown, folded


def test_checks_folded_is_one_line_of_counts_with_the_authors_words(site_project):
    recorded(site_project)
    md = expand(site_project, "stepped", "::checks folded\n    float64 reference, tolerances from fp16's roundoff\n")
    shown, folded = folded_part(html_of(md))
    assert ("<strong>3 checks passed</strong> on Fake GPU and 2 under the interpreter (float64 reference, "
            "tolerances from fp16's roundoff).") in shown
    assert "c0" not in shown and all(f"c{i}" in folded for i in range(3))
    assert folded.count("<details") == 0, "the tables inside the fold do not fold again"


def test_checks_folded_never_folds_a_failure_away(site_project):
    recorded(site_project, gpu_checks=("pass", "fail", "pass"))
    shown, folded = folded_part(html_of(expand(site_project, "stepped", "::checks folded")))
    assert "<strong>2 of 3 checks passed</strong> on Fake GPU (1 failed) and 2 under the interpreter." in shown
    assert "Failed or skipped:" in shown and "c1" in shown


def test_checks_without_the_flag_are_as_they_were(site_project):
    recorded(site_project)
    md = expand(site_project, "stepped", "::checks")
    assert "???" not in md and "checks passed" not in md and "<code>c2</code>" in md


def test_a_step_folded_says_what_its_checks_came_to_and_folds_its_output(site_project):
    recorded(site_project, gpu_checks=("pass", "fail", "pass"))
    shown, folded = folded_part(html_of(expand(site_project, "stepped", "::step checks folded")))
    # the GPU is "the GPU": a lesson page names its model once, in the status line (issue 51)
    assert "<strong>2 of 3 checks passed</strong> in this step on the GPU and 2 under the interpreter." in shown
    assert "Failed: <code>c1</code>." in shown
    assert "tolerance derived from fp16" in folded and "tolerance derived from fp16" not in shown
    assert "What the step <code>checks</code> printed, in each run" in folded


def test_a_step_without_checks_folds_under_its_title_only(site_project):
    recorded(site_project)
    shown, folded = folded_part(html_of(expand(site_project, "stepped", "::step timing folded")))
    assert "checks passed" not in shown and "12.5 ms" in folded


def test_a_table_folds_under_its_captions_first_clause(site_project):
    recorded(site_project)
    md = expand(site_project, "stepped", "::table sweep folded")
    assert md.startswith('??? abstract "Table&#58; Square FP16 matmuls, do&#95;bench medians"')
    assert "12.5" in md
    assert "???" not in expand(site_project, "stepped", "::table sweep")


def test_benchmarks_folded_state_their_verdicts_in_one_line(site_project):
    recorded(site_project)
    shown, folded = folded_part(html_of(expand(site_project, "stepped", "::benchmarks folded")))
    # a current GPU run's machine is the status line's to name (issue 51: the GPU named once a page)
    assert "<strong>2 benchmarks</strong>: both gates met, 0 of 2 stretch goals met." in shown
    assert "Fake GPU" not in shown
    assert "0.80×" in folded and "0.80×" not in shown


def test_the_output_folds_one_click_away(site_project):
    recorded(site_project)
    md = expand(site_project, "stepped", "::output folded")
    assert md.startswith('??? abstract "What each run printed')
    assert '    === "GPU&#58; Fake GPU"' in md


@pytest.mark.parametrize("line, said", [
    ("::table sweep open", "'::table' takes 1 argument(s) then, if wanted, folded: ::table NAME [folded]; "
                           "got 'sweep open'"),
    ("::table sweep folded folded", "got 'sweep folded folded'"),
    ("::status folded", "'::status' takes no argument(s): ::status; got 'folded'"),
    ("::table", "'::table' takes 1 argument(s) then, if wanted, folded: ::table NAME [folded]"),
])
def test_a_flag_it_does_not_take_is_refused_naming_what_it_takes(site_project, line, said):
    recorded(site_project)
    with pytest.raises(directives.PageError) as info:
        expand(site_project, "stepped", line)
    assert said in str(info.value.error)


def test_words_under_checks_without_the_flag_are_refused(site_project):
    recorded(site_project)
    with pytest.raises(directives.PageError) as info:
        expand(site_project, "stepped", "::checks\n    some words\n")
    assert "only when folded" in str(info.value.error)


def test_the_directive_table_shows_the_flags():
    usage = {d.name: d.usage for d in directives.REGISTRY.values()}
    for name in ("checks", "step", "table", "benchmarks", "output"):
        assert "[folded]" in usage[name], usage[name]
