"""::memory-check, the lesson's memory check (compute-sanitizer) in one line, its details folded under it.

The line is status.py's (`MemoryCheck.line`): "memcheck, synccheck: 0 errors; initcheck: clean;
racecheck: 2 races (25 hazards), each explained". The details say where and with what it ran, each
tool's command line and result, every finding in the lesson's kernels with the source line the tool
reports and, for a declared one, why the lesson says it is harmless; findings in library kernels are
counted. `::status` shows the same fold under the badge; the status page's table has the line.
"""

from __future__ import annotations

from verified_triton.judge.status import LessonStatus, MemoryCheck, ToolVerdict
from verified_triton.site.directives import Page, directive, notebook_form
from verified_triton.site.render import admonition, code, text

NOT_CHECKED = {
    "none": "not checked yet",
    "stale": "recorded for an older source",
    "not-required": "not checked",
    "not-supported": "not run for this lesson",
}


def memory_line(st: LessonStatus) -> str:
    """The compact line, as plain text (escape it where it is shown)."""
    if st.memory is not None:
        return st.memory.line
    state = st.modes["sanitize"]
    return NOT_CHECKED.get(state.state, state.state)


def memory_fold(st: LessonStatus) -> str:
    """The line as a folded admonition's title, the details inside."""
    title = f"Memory check: {text(memory_line(st))}"
    css = {"passed": "vt-memory-passed", "failed": "vt-memory-failed"}.get(st.modes["sanitize"].state,
                                                                           "vt-memory")
    return admonition(f"{css} vt-memory", title, memory_details(st), folded=True)


def memory_details(st: LessonStatus) -> str:
    check = st.memory
    if check is None:
        return text(st.modes["sanitize"].phrase[:1].upper() + st.modes["sanitize"].phrase[1:]) + "."
    return "\n".join(_details(check))


def _details(check: MemoryCheck) -> list[str]:
    record = check.record
    san = record.sanitizer
    sizes = "the smoke inputs (lesson.size)" if san.size == "smoke" else "the GPU run's inputs"
    out = [f"compute-sanitizer {text(san.version)} on {text(record.env.device_name)}, {text(record.date)}, "
           f"with PyTorch's caching allocator off, on {sizes}; every step once, untimed.", ""]
    if check.problems:
        out += ["**What keeps it from passing:**", ""] + [f"- {text(p)}" for p in check.problems] + [""]
    out += ["**Each tool:**", ""]
    for verdict in check.tools:
        out += _tool(verdict)
    for known in record.sanitizer.known:
        if not any(j.known is known for t in check.tools for j in t.lessons):
            out.append(f"- Declared in the lesson but matched nothing: {text(known.tool)} in {code(known.kernel)} at "
                       f"{text(', '.join(known.where))}")
    return out


def _tool(verdict: ToolVerdict) -> list[str]:
    run = verdict.run
    head = f"- **{text(verdict.tool)}**: {text(verdict.words)}"
    if run is not None and run.reason and run.state not in ("clean", "findings"):
        head += f" ({text(run.reason)})"
    out = [head]
    for judged in verdict.lessons:
        f = judged.finding
        places = [loc for loc in f.locations if loc.access != "frame"]
        where = ", ".join(f"{loc.access + ' ' if loc.access else ''}{loc.file}:{loc.line}" for loc in places[:4])
        count = f"{f.records:,} record{'s' * (f.records != 1)}" + (f", {f.hazards:,} hazards" if f.hazards else "")
        line = (f"    - {code(f.kernel or 'a kernel')} at {text(where or 'no line')}: {text(f.message)} "
                f"({text(count)})")
        if judged.known is not None:
            line += f"; declared harmless: {text(judged.known.why)}"
        elif verdict.tool in ("initcheck", "racecheck"):
            line += "; **neither fixed nor declared**"
        out.append(line)
    if run is not None and run.command:
        out.append(f"    - command: {code(run.command)}")
    return out


@directive("memory-check", "the lesson's memory check under compute-sanitizer in one line, its details folded")
def memory_check(page: Page) -> str:
    return memory_fold(page.lesson)


@notebook_form("memory-check")
def memory_check_notebook(page: Page) -> str:
    return f"Memory check (compute-sanitizer) when this notebook was made: {text(memory_line(page.lesson))}."
