"""::memory-check, the lesson's memory check (compute-sanitizer) in one line, its details folded under it.

The line is status.py's (`MemoryCheck.line`): "memcheck, synccheck: 0 errors; initcheck: clean;
racecheck: 2 races (25 hazards), each explained". The details say where and with what it ran, each
tool's command line and result, every finding in the lesson's kernels with the source line the tool
reports and, for a declared one, why the lesson says it is harmless; findings in library kernels are
counted. `::status` shows the same fold under the badge; the status page's table has the line.
"""

from __future__ import annotations

from verified_triton.core.numfmt import number
from verified_triton.judge.memory import MemoryCheck, ToolVerdict
from verified_triton.judge.status import LessonStatus
from verified_triton.site.directives import Page, directive, notebook_form
from verified_triton.site.door import Md, code
from verified_triton.site.render import admonition

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


def memory_fold(st: LessonStatus) -> Md:
    """The line as a folded admonition's title, the details inside."""
    title = Md("Memory check: {}").format(memory_line(st))
    css = {"passed": "vt-memory-passed", "failed": "vt-memory-failed"}.get(st.modes["sanitize"].state,
                                                                           "vt-memory")
    return admonition(f"{css} vt-memory", title, memory_details(st), folded=True)


def memory_details(st: LessonStatus) -> Md:
    check = st.memory
    if check is None:
        phrase = st.modes["sanitize"].phrase
        return Md("{}.").format(phrase[:1].upper() + phrase[1:])
    return Md("\n").join(_details(check))


def _details(check: MemoryCheck) -> list[Md]:
    record = check.record
    san = record.sanitizer
    sizes = "the smoke inputs (lesson.size)" if san.size == "smoke" else "the GPU run's inputs"
    out = [Md("compute-sanitizer {} on {}, {}, with PyTorch's caching allocator off, on {}; every step once, "
              "untimed.").format(san.version, record.env.device_name, record.date, sizes), Md("")]
    if check.problems:
        out += [Md("**What keeps it from passing:**"), Md("")] + [Md("- {}").format(p) for p in check.problems]
        out += [Md("")]
    if check.not_applicable:
        out += [Md("**Not applicable, by a reproducer the recording ran:**"), Md("")]
        out += [Md("- {}.").format(sentence[:1].upper() + sentence[1:]) for sentence in check.not_applicable]
        out += [Md("")]
    out += [Md("**Each tool:**"), Md("")]
    shown: set[int] = set()  # each declaration's explanation is said once, under the first finding it covers
    for verdict in check.tools:
        out += _tool(verdict, shown)
    for repro in san.reproducers:
        out.append(Md("- **{}**, reproducer {}: {}{}").format(
            repro.tool, code(repro.file), repro.run.state, Md(" ({})").format(repro.run.reason) if repro.run.reason
            else Md("")))
    unmatched = [known for known in record.sanitizer.known
                 if not any(j.known is known for t in check.tools for j in t.lessons)]
    for known in unmatched[:3]:  # the rest counted: the sentence says the same, bounded alike (judge/memory.py)
        out.append(Md("- Declared in the lesson but matched nothing: {} in {} at {}").format(
            known.tool, code(known.kernel), ", ".join(w[:80] for w in known.where[:3])))
    if len(unmatched) > 3:
        out.append(Md("- and {} more declarations that matched nothing").format(number(len(unmatched) - 3)))
    return out


def _tool(verdict: ToolVerdict, shown: set[int]) -> list[Md]:
    run = verdict.run
    head = Md("- **{}**: {}").format(verdict.tool, verdict.words)
    if run is not None and run.reason and run.state not in ("clean", "findings"):
        head += Md(" ({})").format(run.reason)
    out = [head]
    for judged in verdict.lessons:
        f = judged.finding
        places = [loc for loc in f.locations if loc.access != "frame"]
        where = ", ".join(f"{loc.access + ' ' if loc.access else ''}{loc.file}:{loc.line}" for loc in places[:4])
        count = f"{number(f.records)} record{'s' * (f.records != 1)}" + (
            f", {number(f.hazards)} hazard{'s' * (f.hazards != 1)}" if f.hazards else "")
        line = Md("    - {} at {}: {} ({})").format(code(f.kernel or "a kernel"), where or "no line", f.message, count)
        if judged.known is not None and id(judged.known) in shown:
            # Said once: a long explanation under each of the findings it covers multiplied a record many times
            # over on the page (issue 47.6); the bound is on what a field becomes after repetition.
            line += Md("; declared harmless (as above)")
        elif judged.known is not None:
            shown.add(id(judged.known))
            line += Md("; declared harmless: {}").format(judged.known.why)
        elif verdict.tool in ("initcheck", "racecheck"):
            line += Md("; **neither fixed nor declared**")
        out.append(line)
    if run is not None and run.command:
        out.append(Md("    - command: {}").format(code(run.command)))
    return out


@directive("memory-check", "the lesson's memory check under compute-sanitizer in one line, its details folded")
def memory_check(page: Page) -> Md:
    return memory_fold(page.lesson)


@notebook_form("memory-check")
def memory_check_notebook(page: Page) -> Md:
    return Md("Memory check (compute-sanitizer) when this notebook was made: {}.").format(memory_line(page.lesson))
