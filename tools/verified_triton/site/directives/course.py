"""::course (the lessons in order, with badges) and ::status-table (every lesson's state)."""

from __future__ import annotations

from verified_triton.core.numfmt import seconds
from verified_triton.judge.status import LessonStatus
from verified_triton.site.directives import Page, directive
from verified_triton.site.directives.memory import memory_line
from verified_triton.site.door import Md, text, url
from verified_triton.site.render import badge, md_table


@directive("course", "the lessons in course order, with badges, summaries and prerequisites", needs_lesson=False)
def course(page: Page) -> Md:
    statuses = page.site.statuses
    out = []
    for number, st in enumerate(statuses.values(), start=1):
        lesson = st.lesson
        prereq = Md(", ").join(link(page, statuses[p].lesson) for p in lesson.prerequisites if p in statuses)
        out.append(Md("{}. **{}** {}  \n    {}").format(number, link(page, lesson), badge(st.status), lesson.summary)
                   + (Md("  \n    <small>Builds on: {}</small>").format(prereq) if prereq else ""))
    return Md("\n").join(out) or Md("_No lessons yet._")


def link(page: Page, lesson) -> Md:
    """A link to a lesson's page, titled with its title."""
    return Md("[{}]({})").format(lesson.title, url(page.root + lesson.page))


def mode_cell(st: LessonStatus, mode: str) -> Md:
    state = st.modes[mode]
    rec = state.record
    if rec is None:
        return text("not recorded" if state.state == "none" else state.state)
    env = rec.env
    machine = env.device_name if mode == "gpu" else "CPU"
    current = "" if st.is_current(rec) else ", ⚠ older source"
    return text(f"{rec.outcome}{current}, {rec.date}, {machine}, Triton {env.triton}, torch {env.torch}, "
                f"{seconds(rec.wall_s)}")


def memory_cell(st: LessonStatus) -> str:
    """The memory check's line, with where and when it ran (its details fold under the lesson's badge)."""
    rec = st.modes["sanitize"].record
    if rec is None or rec.sanitizer is None:
        return text(memory_line(st))
    current = "" if st.is_current(rec) else ", ⚠ older source"
    return text(f"{memory_line(st)} ({rec.env.device_name}, compute-sanitizer {rec.sanitizer.version.split(' ')[0]}, "
                f"{rec.date}{current})")


@directive("status-table", "every lesson's status, summary, and the date, machine and versions of each run",
           needs_lesson=False)
def status_table(page: Page) -> Md:
    statuses = page.site.statuses.values()
    rows = [[link(page, st.lesson), badge(st.status), text(st.summary),
             mode_cell(st, "interpreter"), mode_cell(st, "gpu"), memory_cell(st)] for st in statuses]
    table = md_table(["Lesson", "Status", "What was verified", "Interpreter run", "GPU run", "Memory check"], rows)
    sentences = Md("\n").join(Md("- **{}**: {}").format(st.lesson.title, st.sentence) for st in statuses)
    return Md("{}\n\n{}").format(table, sentences)
