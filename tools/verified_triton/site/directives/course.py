"""::course (the lessons in order, with badges) and ::status-table (every lesson's state)."""

from __future__ import annotations

from verified_triton.core.numfmt import seconds
from verified_triton.judge.status import LessonStatus
from verified_triton.site.directives import Page, directive
from verified_triton.site.render import badge, md_table, text


@directive("course", "the lessons in course order, with badges, summaries and prerequisites", needs_lesson=False)
def course(page: Page) -> str:
    statuses = page.site.statuses
    out = []
    for number, st in enumerate(statuses.values(), start=1):
        lesson = st.lesson
        prereq = ", ".join(f"[{text(statuses[p].lesson.title)}]({page.root}{statuses[p].lesson.page})"
                           for p in lesson.prerequisites if p in statuses)
        out.append(f"{number}. **[{text(lesson.title)}]({page.root}{lesson.page})** {badge(st.status)}  \n"
                   f"    {text(lesson.summary)}"
                   + (f"  \n    <small>Builds on: {prereq}</small>" if prereq else ""))
    return "\n".join(out) or "_No lessons yet._"


def mode_cell(st: LessonStatus, mode: str) -> str:
    state = st.modes[mode]
    rec = state.record
    if rec is None:
        return text("not recorded" if state.state == "none" else state.state)
    env = rec.env
    machine = env.device_name if mode == "gpu" else "CPU"
    current = "" if st.is_current(rec) else ", ⚠ older source"
    return text(f"{rec.outcome}{current}, {rec.date}, {machine}, Triton {env.triton}, torch {env.torch}, "
                f"{seconds(rec.wall_s)}")


@directive("status-table", "every lesson's status, summary, and the date, machine and versions of each run",
           needs_lesson=False)
def status_table(page: Page) -> str:
    statuses = page.site.statuses.values()
    rows = [[f"[{text(st.lesson.title)}]({page.root}{st.lesson.page})", badge(st.status), text(st.summary),
             mode_cell(st, "interpreter"), mode_cell(st, "gpu")] for st in statuses]
    table = md_table(["Lesson", "Status", "What was verified", "Interpreter run", "GPU run"], rows)
    sentences = "\n".join(f"- **{text(st.lesson.title)}**: {text(st.sentence)}" for st in statuses)
    return f"{table}\n\n{sentences}"
