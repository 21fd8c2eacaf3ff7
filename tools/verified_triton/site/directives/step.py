"""::step NAME — what one named step of main() printed, in each recorded run, under the section that shows it.

The step is read from the lesson's main() (`with lesson.step(NAME):` or `if lesson.step(NAME, ...)`), so a
name main() does not have fails the build at the page's FILE:LINE, naming the steps it has. Each record
shows the step's own output in a tab (the GPU first, as `::output` does); a step the interpreter skips
says why; a run recorded before the kit kept output per step says so and points to the whole log.
"""

from __future__ import annotations

from verified_triton.judge.evidence import Record
from verified_triton.judge.status import LessonStatus
from verified_triton.site import lesson_source
from verified_triton.site.directives import DirectiveError, Page, directive
from verified_triton.site.directives.common import gpu_first, mode_label, stale_note, where
from verified_triton.site.directives.output import OUTPUT_ATTRS
from verified_triton.site.render import clean_output, code, code_block, indent_block, text


@directive("step", "what one named step of main() printed in each recorded run, in tabs, under the section "
                   "that shows its code", args=("NAME",))
def step(page: Page, name: str) -> str:
    st = page.lesson
    try:
        lesson_source.read(st.lesson, page.site.code_dir).step(name)
    except lesson_source.SourceError as exc:
        raise DirectiveError(str(exc)) from None
    records = gpu_first(st)
    if not records:
        return f"_What the step {code(name)} prints appears here once the lesson has been run._"
    out = [f'<p class="vt-step-label">Output of the step {code(name)}</p>', ""]
    for record in records:
        label = text(mode_label(record)) + ("" if st.is_current(record) else " (older source)")
        out += [f'=== "{label}"', "", indent_block(_record_body(st, record, name), "    "), ""]
    return "\n".join(out).rstrip() + "\n"


def _record_body(st: LessonStatus, record: Record, name: str) -> str:
    body = [f"<small>{where(record)}</small>", ""]
    if not record.steps and record.outcome == "passed":  # a kit that kept no steps made it
        body.append("This run was recorded before the kit kept its output step by step: its whole output is "
                    "under *What the runs recorded*, at the end of the page.")
        return "\n".join(body)
    note = stale_note(st, record)
    if note:
        body += [note, ""]
    found = next((s for s in record.steps if s.name == name), None)
    if found is None:
        if st.is_current(record) and record.outcome == "passed":
            raise DirectiveError(f"the {record.mode} record of lesson '{st.lesson.name}' passed on the current "
                                 f"source but has no step '{name}' (recorded steps: "
                                 f"{', '.join(s.name for s in record.steps)}); re-record it")
        body.append(_missing(st, record))
    elif found.not_run:
        body.append(f"Not run here: {text(found.not_run)}.")
    else:
        printed = clean_output(found.stdout)
        if printed or not found.raised:
            body.append(code_block(printed or "(the step printed nothing)", "", OUTPUT_ATTRS))
        failed = [c for c in record.checks if c.step == name and c.status == "fail"]
        if failed:
            body += ["", "Failed in this step: " + ", ".join(code(c.name) for c in failed) + "."]
        if found.raised:  # the record's reason names the exception and the lesson's line
            body += ["", f"The run ended in this step: {text(record.reason) or 'an exception (see the log)'}."]
    return "\n".join(body)


def _missing(st: LessonStatus, record: Record) -> str:
    if not st.is_current(record):
        return "The older source had no step of this name."
    if record.outcome == "by-design":
        return f"The run stopped by design before this step: {text(record.reason)}."
    return f"The run stopped before this step ({text(record.outcome)}: {text(record.reason) or 'see the log'})."
