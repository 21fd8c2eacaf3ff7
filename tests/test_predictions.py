"""Predictions are measured: the kit records them before the measurement, the record carries them, and
the page shows predicted, measured and the gap; a miss without the author's explanation fails the build.

Also the evidence around them that helps a reader: expected warnings counted instead of printed,
a one-line `why` for a check, GPU-only checks grouped under one line, and the timing method said by
the record, not by prose.
"""

from __future__ import annotations

import ast
import re
import textwrap
from html import unescape

import markdown
import pytest

from conftest import REPO, bench, build_output, fake_record
from verified_triton.core.kit import Check, FilteredWarning, Prediction, prediction_outcome
from verified_triton.core.lessons import discover
from verified_triton.judge.evidence import EvidenceError, record_from_json, write_record
from verified_triton.judge.status import judge
from verified_triton.site import directives
from verified_triton.site.directives.checks import checks
from verified_triton.site.directives.output import output
from verified_triton.site.directives.predictions import prediction

GPU = dict(VT_FAKE_GPUS="0:NVIDIA H200")
EXTENSIONS = ["tables", "admonition", "pymdownx.details", "pymdownx.superfences", "attr_list", "md_in_html"]


def page_of(project, name: str = "good") -> directives.Page:
    lessons = discover(project.code)
    statuses = {lesson.name: judge(lesson, project.evidence) for lesson in lessons}
    site = directives.Site(project.code, project.evidence, lessons, statuses)
    return directives.Page(site, f"lessons/{name}.md", statuses.get(name))


def predicted_record(project, ratio: float, *, predictions=None, current: bool = True, **fields):
    """A GPU record of lesson 'good' with benchmark 'speed' at `ratio` and a prediction of 1.6 for it."""
    lesson = project.lesson("good")
    rec = fake_record(lesson, "gpu", benchmarks=[bench("speed", ratio, ratio * 0.98, ratio * 1.02,
                                                       label="kernel vs torch")],
                      source_hash=None if current else "0" * 64, **fields)
    rec.predictions = predictions if predictions is not None else [
        Prediction("speed", 1.6, "bytes: 8 passes over 5", 0.15, "speed")]
    write_record(project.evidence, rec)
    return rec


# -- the kit -------------------------------------------------------------------------------------------

PREDICTS = """\
    lesson = Lesson("good")
    lesson.predict("speed", 1.6, "bytes: (6 + 2) / (3 + 2) passes", 0.15)
    lesson.predict("speed-ms", 1.5, "3 passes at a copy's rate", 0.15, of="speed", quantity="kernel")
    lesson.predict("peak", 3.0, "three tensors of the logits' size", 0.1, quantity="value", unit="x")
    lesson.benchmark("speed", "kernel vs torch", timings([1.55] * 15, [3.1] * 15), "kernel", "baseline")
    lesson.measured("peak", 3.02)
    for bad in (lambda: lesson.predict("speed", 2.0, "again", 0.1),
                lambda: lesson.predict("late", 2.0, "after the fact", 0.1, of="speed"),
                lambda: lesson.predict("zero", 0.0, "nothing", 0.1),
                lambda: lesson.predict("no-basis", 1.0, " ", 0.1),
                lambda: lesson.measured("speed", 1.0)):
        try:
            bad()
        except ValueError as exc:
            print("refused:", exc)
    sys.exit(lesson.finish())
"""


@pytest.mark.integration
def test_the_kit_records_predictions_before_the_measurement_and_the_record_carries_them(project):
    project.add("good", PREDICTS)
    result = project.verify("--mode", "gpu", "--force", **GPU)
    assert result.returncode == 0, result.stdout + result.stderr
    rec = project.record("good", "gpu-nvidia-h200")
    by_name = {p.name: p for p in rec.predictions}
    assert list(by_name) == ["speed", "speed-ms", "peak"]
    assert by_name["speed"].of == "speed" and by_name["speed"].quantity == "ratio"
    assert by_name["speed-ms"].unit == "ms"  # the benchmark's unit, filled in when it was recorded
    assert by_name["peak"].measured == pytest.approx(3.02) and by_name["peak"].of == ""
    # The lesson's output says how each fared, as it was measured.
    assert "prediction speed: predicted 1.60x, measured 2.00x: +25% (missed, tolerance 15%)" in rec.stdout
    assert "prediction speed-ms: predicted 1.5 ms, measured 1.55 ms: +3% (held" in rec.stdout
    # made twice, made after its benchmark, a value of 0, no basis, a measurement of a ratio prediction
    assert rec.stdout.count("refused:") == 5
    assert "benchmark speed is already measured; predict before measuring" in rec.stdout


@pytest.mark.unit
@pytest.mark.parametrize("quantity, measured, expect", [
    ("ratio", None, (2.0, 0.25, False)),
    ("kernel", None, (3.0, 0.875, False)),
    ("value", 1.7, (1.7, 0.0625, True)),
])
def test_prediction_outcome(quantity, measured, expect):
    b = bench("b", 2.0, 1.9, 2.1)
    b.measured = 3.0
    p = Prediction("p", 1.6, "m", 0.15, "" if quantity == "value" else "b", quantity, measured=measured)
    outcome = prediction_outcome(p, [b])
    assert (outcome.measured, round(outcome.gap, 4), outcome.held) == expect
    assert prediction_outcome(Prediction("q", 1.0, "m", 0.1, "other"), [b]) is None  # not measured


@pytest.mark.unit
def test_the_record_refuses_a_bad_prediction(project):
    project.add("good", "lesson = Lesson('good')\n")
    rec = predicted_record(project, 2.0)
    raw = __import__("json").loads(rec.to_json())
    raw["predictions"][0]["tolerance"] = 0
    with pytest.raises(EvidenceError, match=r"predictions\[0\]\.tolerance"):
        record_from_json(raw, "gpu.json")
    raw["predictions"][0].update(tolerance=0.1, of="")
    with pytest.raises(EvidenceError, match=r"predictions\[0\]\.of"):
        record_from_json(raw, "gpu.json")


# -- the page --------------------------------------------------------------------------------------------

@pytest.mark.unit
def test_a_prediction_that_held_shows_predicted_measured_and_the_gap(project):
    project.add("good", "lesson = Lesson('good')\n")
    predicted_record(project, 1.7)
    md = prediction(page_of(project), "speed")
    assert md.startswith('!!! success "Prediction speed"')
    html = unescape(markdown.markdown(md, extensions=EXTENSIONS))
    assert "<strong>1.60×</strong>" in html and "<strong>1.70×</strong>" in html and "(1.67–1.73)" in html
    assert "+6 %: held" in html and "±15 %" in html
    assert "Predicts the ratio of kernel vs torch. Model: bytes: 8 passes over 5" in html


@pytest.mark.unit
def test_a_miss_without_an_explanation_fails_with_what_to_do(project):
    project.add("good", "lesson = Lesson('good')\n")
    predicted_record(project, 2.02)
    with pytest.raises(directives.DirectiveError) as err:
        prediction(page_of(project), "speed")
    message = str(err.value)
    assert "prediction 'speed' missed: predicted 1.60×, measured 2.02× (+26 %, tolerance ±15 %)" in message
    assert "indent the author's explanation under the directive line" in message


@pytest.mark.unit
def test_a_miss_with_an_explanation_shows_it(project):
    project.add("good", "lesson = Lesson('good')\n")
    predicted_record(project, 2.02)
    md = prediction(page_of(project), "speed", body="PyTorch reads each row *three* times.")
    assert md.startswith('!!! warning "Prediction speed"')
    assert "**Why the model is off.** PyTorch reads each row *three* times." in md
    assert "+26 %: **missed**" in md


@pytest.mark.unit
def test_the_benchmarks_page_lists_every_lessons_predictions(project):
    from verified_triton.site.directives.predictions import prediction_table

    project.add("good", "lesson = Lesson('good')\n")
    assert "No predictions recorded yet" in prediction_table(page_of(project))
    predicted_record(project, 2.02)
    html = unescape(markdown.markdown(prediction_table(page_of(project)), extensions=EXTENSIONS))
    assert '<a href="../lessons/good.md">Fake lesson good</a>' in html
    assert "<code>speed</code>" in html and "bytes: 8 passes over 5" in html
    assert "<strong>2.02×</strong>" in html and "+26 %: <strong>missed</strong>" in html


@pytest.mark.unit
def test_an_explanation_is_shown_only_for_a_miss(project):
    project.add("good", "lesson = Lesson('good')\n")
    predicted_record(project, 1.6)
    assert "Why the model is off" not in prediction(page_of(project), "speed", body="It was off.")


@pytest.mark.unit
def test_an_older_record_is_shown_marked_and_its_miss_does_not_fail(project):
    project.add("good", "lesson = Lesson('good')\n")
    predicted_record(project, 2.02, current=False)
    md = prediction(page_of(project), "speed")
    assert md.startswith('!!! vt-stale "⚠ older source: Prediction speed"') and "**missed**" in md


@pytest.mark.unit
def test_not_measured_yet_until_a_gpu_run_of_this_source_holds_it(project):
    project.add("good", "lesson = Lesson('good')\n")
    write_record(project.evidence, fake_record(project.lesson("good"), "interpreter"))
    md = prediction(page_of(project), "speed")
    assert md.startswith('!!! note "Prediction speed"') and "Not measured yet" in md


@pytest.mark.unit
def test_a_name_the_current_gpu_run_does_not_hold_is_a_typo(project):
    project.add("good", "lesson = Lesson('good')\n")
    predicted_record(project, 1.6)
    with pytest.raises(directives.DirectiveError, match=r"no recorded prediction named 'sped'.*speed"):
        prediction(page_of(project), "sped")


@pytest.mark.unit
def test_every_recorded_prediction_must_be_on_the_page(project):
    project.add("good", "lesson = Lesson('good')\n")
    predicted_record(project, 1.6, predictions=[Prediction("speed", 1.6, "bytes", 0.15, "speed"),
                                                Prediction("hidden", 1.0, "bytes", 0.15, "speed")])
    page = page_of(project)
    with pytest.raises(directives.PageError) as err:
        directives.expand_page("# Page\n\n::prediction speed\n", page)
    assert "holds prediction(s) hidden that the page does not show" in str(err.value.error)


@pytest.mark.unit
def test_a_directive_body_is_the_indented_lines_under_it(project):
    project.add("good", "lesson = Lesson('good')\n")
    predicted_record(project, 2.02)
    page = page_of(project)
    text = textwrap.dedent("""\
        Before.

        ::prediction speed
            The model counts six passes;

              PyTorch makes nine.

        After, not part of it.
        """)
    out = directives.expand_page(text, page)
    assert "**Why the model is off.** The model counts six passes;\n\n      PyTorch makes nine." in out
    assert out.rstrip().endswith("After, not part of it.")
    assert "\n    The model counts" not in out  # consumed, not left as an indented code block


@pytest.mark.integration
def test_a_miss_without_explanation_fails_the_site_build(site_project):
    site = site_project
    site.add_lesson("good", page="---\nlesson: good\n---\n\n# Good\n\nThe model.\n\n::prediction speed\n")
    predicted_record(site, 2.02)
    result = site.build()
    assert result.returncode != 0
    assert re.search(r"lessons/good\.md:9: prediction 'speed' missed", build_output(result)), build_output(result)
    page = (site.docs / "lessons" / "good.md")
    page.write_text(page.read_text() + "    The baseline reads each row three times.\n")
    result = site.build()
    assert result.returncode == 0, build_output(result)
    assert "Why the model is off." in site.html("good") and "reads each row three times" in site.html("good")


# -- the lessons' own predictions --------------------------------------------------------------------------

def pattern(node: ast.expr) -> str | None:
    """A regular expression for a literal or f-string argument; None for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return re.escape(node.value)
    if isinstance(node, ast.JoinedStr):
        return "".join(re.escape(part.value) if isinstance(part, ast.Constant) else ".+" for part in node.values)
    return None


def lesson_predictions():
    for lesson in discover(REPO / "code"):
        tree = ast.parse(lesson.main.read_text(encoding="utf-8"))
        for call in ast.walk(tree):
            if isinstance(call, ast.Call) and getattr(call.func, "attr", "") == "predict":
                kw = {k.arg: k.value for k in call.keywords}
                name = pattern(call.args[0])
                of = pattern(kw["of"]) if "of" in kw else name
                quantity = kw["quantity"].value if "quantity" in kw else "ratio"
                yield lesson, name, of, quantity


@pytest.mark.unit
def test_at_least_twelve_lessons_predict_and_their_pages_show_every_prediction():
    """Every lesson.predict names a benchmark the lesson records and appears on its page, and back."""
    found: dict[str, list[str]] = {}
    for lesson, name, of, quantity in lesson_predictions():
        assert name is not None, f"{lesson.main}: a prediction's name must be written out"
        found.setdefault(lesson.name, []).append(name)
        page = (REPO / "docs" / lesson.page).read_text(encoding="utf-8")
        shown = re.findall(r"^[ \t]*::prediction (\S+)$", page, re.M)
        assert any(re.fullmatch(name, s) for s in shown), f"{lesson.page} does not show prediction {name}"
        gpu_runs = [r for r in judge(lesson, REPO / "evidence").records if r.mode == "gpu" and r.outcome == "passed"]
        if quantity != "value" and gpu_runs:  # the benchmark it predicts, by the names the GPU records have used
            recorded = {b.name for r in gpu_runs for b in r.benchmarks}  # (none before its first GPU run)
            assert any(re.fullmatch(of, b) for b in recorded), f"{lesson.name}: no benchmark matches {of}"
    for lesson in discover(REPO / "code"):
        page = (REPO / "docs" / lesson.page).read_text(encoding="utf-8")
        for shown in re.findall(r"^[ \t]*::prediction (\S+)$", page, re.M):
            assert any(re.fullmatch(n, shown) for n in found.get(lesson.name, [])), \
                f"{lesson.page} shows {shown}, which {lesson.main.name} never predicts"
    assert len(found) >= 12, sorted(found)


# -- evidence that helps ------------------------------------------------------------------------------------

WARNS = """\
    import warnings
    lesson = Lesson("good")
    lesson.expect_warning("no current CUDA context", "autograd's thread starts without one; harmless")
    for _ in range(3):
        warnings.warn("Attempting to run cuBLAS, but there was no current CUDA context!")
    warnings.warn("something the lesson did not expect")
    lesson.check("exercise-deterministic", True, "atomic: False", why="two kernels repeat dQ bit for bit")
    sys.exit(lesson.finish())
"""


@pytest.mark.integration
def test_expected_warnings_are_counted_not_dropped_and_others_still_show(project):
    project.add("good", WARNS)
    result = project.verify("--mode", "interpreter", "--force")
    assert result.returncode == 0, result.stdout + result.stderr
    rec = project.record("good")
    assert rec.filtered_warnings == [FilteredWarning(
        "no current CUDA context", "autograd's thread starts without one; harmless", 3,
        "UserWarning: Attempting to run cuBLAS, but there was no current CUDA context!")]
    assert "no current CUDA context" not in rec.stderr
    assert "something the lesson did not expect" in rec.stderr
    assert "expected warning filtered 3 time(s)" in rec.stdout
    assert rec.checks[0].why == "two kernels repeat dQ bit for bit"
    md = output(page_of(project))
    assert "Expected warnings the lesson counted instead of printing (3 in all" in md
    assert "3 times: <code>UserWarning&#58; Attempting to run cuBLAS" in md
    assert "autograd&#39;s thread starts without one; harmless" in md
    assert "two kernels repeat dQ bit for bit" in checks(page_of(project))


@pytest.mark.unit
def test_checks_only_one_run_made_are_one_line_with_their_count(project):
    project.add("good", "lesson = Lesson('good')\n")
    lesson = project.lesson("good")
    shared = [Check("exercise", "pass", "both")]
    # A failed check: the record says so (outcome failed, exit 1), or the judgement finds it contradicts itself
    gpu = fake_record(lesson, "gpu", "failed", exit_code=1, reason="check gpu-broken",
                      checks=shared + [Check(f"gpu-{i}", "pass", f"formula {i}") for i in range(90)]
                      + [Check("gpu-broken", "fail", "worst at (0, 1)")])
    interp = fake_record(lesson, "interpreter", checks=shared + [Check(f"small-{i}", "pass", "f") for i in range(28)])
    write_record(project.evidence, gpu)
    write_record(project.evidence, interp)
    md = checks(page_of(project))
    html = unescape(markdown.markdown(md, extensions=EXTENSIONS))
    shown, _, _ = html.partition("<details")
    assert "<strong>91 checks on the GPU only</strong> (not run under the interpreter): GPU: NVIDIA H200: " \
           "90 pass, 1 fail." in html
    assert "<strong>28 checks under the interpreter only</strong> (not run on the GPU)" in html
    assert "gpu-broken" in shown and "gpu-3" not in shown  # the failure stands outside the fold
    assert md.count("not run") == 2  # the two summary lines, no column of "not run" cells
    assert "<code>exercise</code>" in shown


@pytest.mark.unit
def test_the_benchmarks_table_says_how_the_run_timed_it(project):
    from verified_triton.site.directives.benchmarks import benchmarks

    project.add("good", "lesson = Lesson('good')\n")
    graph = "15 interleaved rounds, each a CUDA-graph replay of 10 ms of calls, timed with CUDA events, " \
            "after 0.3 s of warm-up"
    a, b = bench("a"), bench("b")
    a.method = b.method = graph
    c = bench("c")
    c.method = "15 interleaved rounds, each a do_bench median over 10 ms (L2 flushed between calls)"
    write_record(project.evidence, fake_record(project.lesson("good"), "gpu", benchmarks=[a, b, c]))
    md = benchmarks(page_of(project))
    assert f"timing, as recorded: {graph}" in str(md).replace("&#58;", ":")  # Md.replace would escape the ':'
    assert "timed: 15 interleaved rounds, each a do&#95;bench median" in md  # the row timed otherwise


# -- recorded text cannot pull files into a page ----------------------------------------------------------

@pytest.mark.integration
def test_recorded_snippet_markers_show_as_written(site_project):
    site = site_project
    (site.docs / "includes").mkdir()
    (site.docs / "includes" / "abbreviations.md").write_text("*[SECRET]: not to be included. Taught in: x.\n")
    site.add_lesson("good")
    stdout = '--8<-- "includes/abbreviations.md"\n-8<-\nincludes/abbreviations.md\n-8<-\nx --8<-- [start:a] y\n'
    site.write(site.make_record("good", stdout=stdout))
    result = site.build()
    assert result.returncode == 0, build_output(result)
    html = site.html("good")
    assert "not to be included" not in html
    for line in ('--8&lt;-- "includes/abbreviations.md"', "x --8&lt;-- [start:a] y"):
        assert line in html.replace("&quot;", '"'), line
