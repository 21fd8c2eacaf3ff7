"""::prediction NAME (one prediction, beside its prose) and ::prediction-table (every lesson's).

A lesson says what it expects before it measures (`lesson.predict`): a value,
the model it comes from and a relative tolerance. The page shows the
prediction, the GPU run's measurement and the gap. A measurement outside the
tolerance is a miss, and a miss needs the author's explanation, written
under the directive line, indented:

    ::prediction fused-vs-torch
        PyTorch's side moves more than the six passes the model counts: ...

Without it the build fails, naming the page and line. Only a current GPU
record judges: the interpreter times nothing, and an older source's record
is shown for reference. Every prediction the current GPU record holds must
appear on its page, so no miss goes unseen.
"""

from __future__ import annotations

from dataclasses import dataclass

from verified_triton.core.kit import Prediction, PredictionOutcome, prediction_outcome
from verified_triton.judge.evidence import Record
from verified_triton.judge.status import LessonStatus
from verified_triton.site.directives import DirectiveError, Page, directive, notebook_form, page_check
from verified_triton.site.directives.common import STALE_MARK, gpu_first, require_recorded, stale_note, where
from verified_triton.site.door import Md, code, page_markdown, text, url
from verified_triton.site.render import admonition, interval, md_table, number, percent, ratio


@dataclass
class Found:
    record: Record
    prediction: Prediction
    outcome: PredictionOutcome | None  # None: not measured by this record


def find(st: LessonStatus, name: str) -> Found | None:
    """The best record holding prediction `name`: current before stale, GPU before interpreter."""
    for record in gpu_first(st):
        for p in record.predictions:
            if p.name == name:
                outcome = prediction_outcome(p, record.benchmarks) if record.mode == "gpu" else None
                return Found(record, p, outcome)
    return None


def unit_of(found: Found) -> str:
    p = found.prediction
    if p.quantity == "ratio":
        return "×"
    bench = next((b for b in found.record.benchmarks if b.name == p.of), None)
    return p.unit or (bench.unit if bench else "")


def value(x: float, unit: str) -> Md:
    """A ratio with two decimals, as the benchmarks table shows ratios; anything else to 3 digits (numfmt:
    bounded width); the unit escaped."""
    if unit == "×":
        return ratio(x)
    return Md("{} {}").format(number(x), unit) if unit else number(x)


def what(found: Found) -> Md:
    """What is predicted, in words: the benchmark's ratio or kernel, or the lesson's own quantity."""
    p = found.prediction
    bench = next((b for b in found.record.benchmarks if b.name == p.of), None)
    label = text(bench.label) if bench else code(p.of)
    if p.quantity == "ratio":
        return Md("the ratio of {}").format(label)
    if p.quantity == "kernel":
        return Md("the kernel's own median in {}").format(label)
    return Md("{}, measured by the lesson").format(code(p.name))


def gap_cell(outcome: PredictionOutcome, tolerance: float) -> Md:
    verdict = Md("held") if outcome.held else Md("**missed**")
    return Md("{} %: {} <small>(tolerance ±{} %)</small>").format(percent(outcome.gap, signed=True), verdict,
                                                                 percent(tolerance))


def measured_cell(outcome: PredictionOutcome, unit: str) -> Md:
    cell = Md("**{}**").format(value(outcome.measured, unit))
    if outcome.low is not None and outcome.high is not None:
        cell += Md(" <small>({})</small>").format(interval(outcome.low, outcome.high))
    return cell


def must_explain(st: LessonStatus, found: Found) -> bool:
    return found.outcome is not None and not found.outcome.held and st.is_current(found.record)


def prediction_block(page: Page, name: str, body: str) -> tuple[str, Md, Md]:
    """(admonition kind, title, body) for one prediction; DirectiveError for a typo or an unexplained miss."""
    st = page.lesson
    found = find(st, name)
    title = Md("Prediction {}").format(name)
    if found is None:
        require_recorded(st, "prediction", name, lambda r: (p.name for p in r.predictions),
                         ran=lambda r: r.mode == "gpu" and r.outcome == "passed",
                         hint=f"; the lesson makes it with lesson.predict('{name}', ...)")
        return ("note", title, Md("Not measured yet: the GPU run that makes this prediction and measures it "
                                  "has not been recorded for this source."))
    p, outcome = found.prediction, found.outcome
    unit = unit_of(found)
    predicted = Md("**{}**").format(value(p.value, unit))
    if outcome is None:
        why = ("under the interpreter nothing is timed" if found.record.mode == "interpreter"
               else "the recorded run did not reach the measurement")
        row = [predicted, Md("not measured: {}").format(why), "-"]
    else:
        row = [predicted, measured_cell(outcome, unit), gap_cell(outcome, p.tolerance)]
    lines = [md_table(["Predicted", "Measured", "Gap"], [row]), Md(""),
             Md("Predicts {}. Model: {}").format(what(found), p.basis), Md(""),
             Md("<small>{}</small>").format(where(found.record))]
    kind = "info" if outcome is None else "success" if outcome.held else "warning"
    if must_explain(st, found):
        if not body.strip():
            raise DirectiveError(
                f"prediction '{name}' missed: predicted {value(p.value, unit)}, measured "
                f"{value(outcome.measured, unit)} ({percent(outcome.gap, signed=True)} %, tolerance "
                f"±{percent(p.tolerance)} %) "
                f"in the GPU record of {found.record.date}. Explain the miss on the page: indent the author's "
                f"explanation under the directive line (4 spaces), saying where the model is off")
        lines += [Md(""), Md("**Why the model is off.** {}").format(page_markdown(body))]
    elif outcome is not None and not outcome.held and body.strip():
        lines += [Md(""), Md("**Why the model is off.** {}").format(page_markdown(body))]
    note = stale_note(st, found.record)
    if note:
        lines = [note, Md("")] + lines
        kind, title = "vt-stale", Md("{}: {}").format(STALE_MARK, title)
    return kind, title, Md("\n").join(lines)


@directive("prediction", "one prediction the lesson made (lesson.predict): predicted, measured, the gap; "
                         "a miss needs the explanation indented under the line", args=("NAME",), body=True)
def prediction(page: Page, name: str, body: str = "") -> Md:
    page.shown.add(f"prediction:{name}")
    kind, title, block = prediction_block(page, name, body)
    return admonition(kind, title, block)


@notebook_form("prediction")
def prediction_notebook(page: Page, name: str, body: str = "") -> Md:
    try:
        _, title, block = prediction_block(page, name, body)
    except DirectiveError:
        return Md("")
    return Md("**{}**\n\n{}").format(title, block)


@page_check
def every_prediction_shown(page: Page) -> str:
    """A prediction the current GPU run recorded but the page never shows could hide a miss."""
    st = page.lesson
    if st is None:
        return ""
    recorded = {p.name: None for r in st.current if r.mode == "gpu" for p in r.predictions}
    missing = [name for name in recorded if f"prediction:{name}" not in page.shown]
    if not missing:
        return ""
    return (f"the GPU record of '{st.lesson.name}' holds prediction(s) {', '.join(missing)} that the page does "
            f"not show: add '::prediction NAME' where the prose discusses each")


@directive("prediction-table", "every lesson's predictions with the GPU run's measurement and the gap",
           needs_lesson=False)
def prediction_table(page: Page) -> Md:
    rows = []
    for st in page.site.statuses.values():
        link = Md("[{}]({})").format(st.lesson.title.split(":")[0], url(page.root + st.lesson.page))
        names = {p.name: None for r in gpu_first(st) for p in r.predictions}
        for name in names:
            found = find(st, name)
            p, outcome = found.prediction, found.outcome
            unit = unit_of(found)
            mark = Md("") if st.is_current(found.record) else Md(" <small>({})</small>").format(STALE_MARK)
            rows.append([link, code(name) + mark, text(p.basis), value(p.value, unit),
                         "not measured" if outcome is None else measured_cell(outcome, unit),
                         "-" if outcome is None else gap_cell(outcome, p.tolerance)])
            link = Md("")
    if not rows:
        return Md("_No predictions recorded yet: they are made and measured by the GPU runs._")
    return md_table(["Lesson", "Prediction", "Model", "Predicted", "Measured", "Gap"], rows,
                    [Md("---"), Md("---"), Md("---"), Md("---:"), Md("---:"), Md("---")])
