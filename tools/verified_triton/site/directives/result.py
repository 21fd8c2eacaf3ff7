"""::result NAME — one recorded benchmark in a sentence, where the prose says what a step bought.

    **step 3 vs device copy**: 4,020 GB/s, **0.96×** torch copy_ (95 % interval
    0.95–0.97; H200, date) · gate 0.95×: met

A step of a lesson ends with what it bought; the number comes from the
evidence, never typed. The value is the kernel's median in the benchmark's
unit, the ratio, interval and target verdicts those the ::benchmarks table
shows (that table can then fold: each result is shown once in the default
view), so prose never has to type a number or a verdict. From the
best record holding the benchmark (a current one before an older source's,
marked as such); a name that the current GPU record does not hold fails the
build, since every run of this source that could measure it has run.
"""

from __future__ import annotations

from verified_triton.core.kit import Benchmark
from verified_triton.judge.evidence import Record
from verified_triton.judge.status import LessonStatus
from verified_triton.site.directives import DirectiveError, Page, directive, notebook_form
from verified_triton.site.directives.benchmarks import target_cell
from verified_triton.site.directives.common import STALE_MARK, gpu_first, require_recorded
from verified_triton.site.door import Md, text
from verified_triton.site.render import interval, number, ratio


def find(st: LessonStatus, name: str) -> tuple[Record, Benchmark] | None:
    for record in gpu_first(st):
        for b in record.benchmarks:
            if b.name == name:
                return record, b
    return None


def sentence(st: LessonStatus, record: Record, b: Benchmark) -> Md:
    where = text(f"{record.env.device_name}, {record.date}")
    older = Md("") if st.is_current(record) else Md(" · {}").format(STALE_MARK)
    target = Md("") if b.threshold is None and b.stretch is None else \
        Md(" · ") + target_cell(b).replace(Md("<br>"), Md("; "))
    return Md("**{}**: {} {}, **{}** {} <small>(95 % interval {}; {}{})</small>{}").format(
        b.label, number(b.measured), b.unit, ratio(b.ratio), b.baseline_name, interval(b.ratio_low, b.ratio_high),
        where, older, target)


@directive("result", "one recorded benchmark in a sentence: the kernel's value, its ratio to the baseline and the "
                     "interval (what a step bought)", args=("NAME",))
def result(page: Page, name: str) -> Md:
    st = page.lesson
    found = find(st, name)
    if found is not None:
        return sentence(st, *found)
    require_recorded(st, "benchmark", name, lambda r: (b.name for b in r.benchmarks))
    return Md("_{}: measured by the GPU run, which has not been recorded for this source yet._").format(name)


@notebook_form("result")
def result_notebook(page: Page, name: str) -> Md:
    try:
        return result(page, name)
    except DirectiveError:
        return Md("")
