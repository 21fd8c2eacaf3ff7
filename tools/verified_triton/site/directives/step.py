"""::step NAME — what one named step of main() printed, in each recorded run, under the section that shows it.

The step is read from the lesson's main() (`with lesson.step(NAME):` or `if lesson.step(NAME, ...)`), so a
name main() does not have fails the build at the page's FILE:LINE, naming the steps it has. Each record
shows the step's own output in a tab (the GPU first, as `::output` does); a step the interpreter skips
says why; a run recorded before the kit kept output per step says so and points to the whole log.

`::step NAME folded` is the reading path's form: one line, what the step's checks came to in each run
("19 checks passed in this step on NVIDIA H200 and 15 under the interpreter"), its failed checks named, and
what it printed folded under it.
"""

from __future__ import annotations

from verified_triton.judge.evidence import Record
from verified_triton.judge.status import LessonStatus
from verified_triton.site import lesson_source
from verified_triton.site.directives import DirectiveError, Page, directive
from verified_triton.site.directives.common import STALE_MARK, gpu_first, short_label, stale_note, where
from verified_triton.site.directives.output import OUTPUT_ATTRS
from verified_triton.site.door import Md, clean_output, code, code_block, indent, text
from verified_triton.site.render import admonition


@directive("step", "what one named step of main() printed in each recorded run, in tabs (folded: its "
                   "checks' counts)", args=("NAME",),
           flags=("folded",))
def step(page: Page, name: str, flags: frozenset[str] = frozenset()) -> Md:
    shown = step_markdown(page, name)
    records = gpu_first(page.lesson)
    if "folded" not in flags or not records:
        return shown
    line = step_line(page.lesson, records, name)
    title = Md("What the step {} printed, in each run").format(code(name))
    return Md("{}\n\n{}").format(line, admonition("abstract", title, shown, folded=True)) if line else \
        admonition("abstract", title, shown, folded=True)


def step_line(st: LessonStatus, records: list[Record], name: str) -> Md:
    """What the step's checks came to in each run, its failures named; "" when it made no checks."""
    parts, failed = [], []
    for r in records:
        mine = [c for c in r.checks if c.step == name]
        if not mine:
            continue
        passed = sum(c.status == "pass" for c in mine)
        count = str(passed) if passed == len(mine) else f"{passed} of {len(mine)}"
        where = "under the interpreter" if r.mode == "interpreter" else "on the GPU"
        older = "" if st.is_current(r) else f" ({STALE_MARK})"
        if not parts:
            count = Md("**{} {} passed** in this step").format(count, "check" if len(mine) == 1 else "checks")
        parts.append(Md("{} {}{}").format(count, where, older))
        failed += [c.name for c in mine if c.status == "fail" and c.name not in failed]
    if not parts:
        return Md("")
    line = Md(", ").join(parts[:-1]) + (Md(" and ") if len(parts) > 1 else Md("")) + parts[-1] + Md(".")
    if failed:
        line += Md(" Failed: {}.").format(Md(", ").join(code(n) for n in failed))
    return line


def step_markdown(page: Page, name: str) -> Md:
    st = page.lesson
    try:
        lesson_source.read(st.lesson, page.site.code_dir).step(name)
    except lesson_source.SourceError as exc:
        raise DirectiveError(str(exc)) from None
    records = gpu_first(st)
    if not records:
        return Md("_What the step {} prints appears here once the lesson has been run._").format(code(name))
    out = [Md('<p class="vt-step-label">Output of the step {}</p>').format(code(name)), Md("")]
    for record in records:
        label = text(short_label(record, records)) + ("" if st.is_current(record) else " (older source)")
        out += [Md('=== "{}"').format(label), Md(""), indent(_record_body(st, record, name), "    "), Md("")]
    return Md("\n").join(out).rstrip() + Md("\n")


def _record_body(st: LessonStatus, record: Record, name: str) -> Md:
    # The machine and date are the status line's; a run of an older source says its own.
    body = [] if st.is_current(record) else [Md("<small>{}</small>").format(where(record)), Md("")]
    if not record.steps and record.outcome == "passed":  # a kit that kept no steps made it
        body.append(Md("This run was recorded before the kit kept its output step by step: its whole output is "
                       "in the lesson's record, under *What each run printed*."))
        return Md("\n").join(body)
    note = stale_note(st, record)
    if note:
        body += [note, Md("")]
    found = next((s for s in record.steps if s.name == name), None)
    if found is None:
        if st.is_current(record) and record.outcome == "passed":
            raise DirectiveError(f"the {record.mode} record of lesson '{st.lesson.name}' passed on the current "
                                 f"source but has no step '{name}' (recorded steps: "
                                 f"{', '.join(s.name for s in record.steps)}); re-record it")
        body.append(_missing(st, record))
    elif found.not_run:
        body.append(Md("Not run here: {}.").format(found.not_run))
    else:
        printed = clean_output(found.stdout)
        if printed or not found.raised:
            body.append(code_block(printed or "(the step printed nothing)", "", OUTPUT_ATTRS))
        failed = [c for c in record.checks if c.step == name and c.status == "fail"]
        if failed:
            body += [Md(""), Md("Failed in this step: {}.").format(Md(", ").join(code(c.name) for c in failed))]
        if found.raised:  # the record's reason names the exception and the lesson's line
            ended = record.reason or "an exception (see the log)"
            body += [Md(""), Md("The run ended in this step: {}.").format(ended)]
    return Md("\n").join(body)


def _missing(st: LessonStatus, record: Record) -> Md:
    if not st.is_current(record):
        return Md("The older source had no step of this name.")
    if record.outcome == "by-design":
        return Md("The run stopped by design before this step: {}.").format(record.reason)
    return Md("The run stopped before this step ({}: {}).").format(record.outcome, record.reason or "see the log")
