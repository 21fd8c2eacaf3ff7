"""The home page's course (::course-start, ::course-needs, ::course) and ::status-table (every lesson's state).

The home page is for a learner: the first lesson one tap away, what each part of the course needs (from each
lesson's lesson.toml `[requires]` and site/requirements.py's Colab GPUs, never typed), and the course as a map,
one heading per `part` in the one lesson order and one line per lesson with its badge.
"""

from __future__ import annotations

from verified_triton.core.numfmt import seconds
from verified_triton.judge.status import LessonStatus
from verified_triton.site.directives import Page, directive
from verified_triton.site.directives.memory import memory_line
from verified_triton.site.door import Md, text, url
from verified_triton.site.record_page import LINK_WORDS, record_uri
from verified_triton.site.render import admonition, badge, md_table
from verified_triton.site.requirements import COLAB_GPUS, version_tuple

FREE_COLAB_GPU = "T4"  # the GPU Colab's free tier gives a notebook
SUMMARY_CHARS = 110  # a lesson's line on the map: its summary up to here (at a word), the rest is on its page


def numbered(page: Page) -> list[tuple[int, LessonStatus]]:
    """(number, status) of every lesson, in the course's one order, numbered from 1."""
    return list(enumerate(page.site.statuses.values(), start=1))


def parts(page: Page) -> list[tuple[str, list[tuple[int, LessonStatus]]]]:
    """Consecutive lessons of one lesson.toml `part`, in course order (a part's lessons are kept together:
    hooks.course_nav refuses a course that splits one)."""
    out: list[tuple[str, list[tuple[int, LessonStatus]]]] = []
    for number, st in numbered(page):
        if out and out[-1][0] == st.lesson.part:
            out[-1][1].append((number, st))
        else:
            out.append((st.lesson.part, [(number, st)]))
    return out


@directive("course-start", "a button to the course's first lesson, titled from its lesson.toml", needs_lesson=False)
def course_start(page: Page) -> Md:
    lessons = numbered(page)
    if not lessons:
        return Md("_No lessons yet._")
    first = lessons[0][1].lesson
    return Md("[Start with lesson 1: {}]({}){{ .md-button .md-button--primary }}").format(
        first.title, url(page.root + first.page))


@directive("course", "the course as a map: a heading per part, a line per lesson (badge, shortened summary)",
           needs_lesson=False)
def course(page: Page) -> Md:
    out = []
    for part, lessons in parts(page):
        if part:
            out += [Md("### {}").format(part), Md("")]
        out += [lesson_line(page, number, st) for number, st in lessons] + [Md("")]
    return Md("\n").join(out).rstrip() if out else Md("_No lessons yet._")


def lesson_line(page: Page, number: int, st: LessonStatus) -> Md:
    """'- **6** [Title](page) badge' over the lesson's summary, shortened (a list item of two lines)."""
    return Md('- **{}** {} <small class="vt-map-badge">{}</small>  \n  {}').format(
        number, link(page, st.lesson), badge(st.status, st.by_design), short_summary(st.lesson.summary))


def short_summary(summary: str, limit: int = SUMMARY_CHARS) -> str:
    """What the lesson teaches, for one line: the summary before its first '; ' (the lessons' summaries name
    what they measure against after it), cut at a word past `limit` characters, the cut marked."""
    said = " ".join(summary.split()).split("; ")[0].rstrip(" .;:,")
    if len(said) <= limit:
        return said
    cut = said[:limit]
    cut = cut[:cut.rfind(", ")] if cut.rfind(", ") > limit // 2 else cut.rsplit(" ", 1)[0]
    return cut.rstrip(" ,;:") + " …"


@directive("course-needs", "what each part needs: the interpreter, the GPU's compute capability, Colab's free GPU",
           needs_lesson=False)
def course_needs(page: Page) -> Md:
    rows = []
    for part, lessons in parts(page):
        rows.append([Md("{} <small>({})</small>").format(part or "Lessons", spans([n for n, _ in lessons])),
                     interpreter_cell(lessons), gpu_cell(lessons), text(free_colab_cell(lessons))])
    if not rows:
        return Md("_No lessons yet._")
    free = dict(COLAB_GPUS)[FREE_COLAB_GPU]
    return md_table(["Part (lessons)", "Under the interpreter (any machine, no GPU)", "On a GPU: compute capability",
                     Md("On Colab's free {} ({}.{})").format(FREE_COLAB_GPU, *free)], rows)


def interpreter_cell(lessons: list[tuple[int, LessonStatus]]) -> Md:
    """Which lessons run all their checks under the interpreter, and which only a part (a run that stopped by
    design, as the latest interpreter record says) or none (lesson.toml: not supported)."""
    partly, not_at_all = [], []
    for number, st in lessons:
        if not st.lesson.modes["interpreter"].supported:
            not_at_all.append(number)
            continue
        runs = sorted((r for r in st.records if r.mode == "interpreter"), key=lambda r: r.started_utc)
        if runs and runs[-1].outcome == "by-design":
            partly.append(number)
    if not partly and not not_at_all:
        return text("every lesson")
    said = []
    if partly:
        said.append(f"{spans(partly)}: the checks that need no GPU; the kernels run on the GPU only")
    if not_at_all:
        said.append(f"{spans(not_at_all)}: none (the lesson runs on a GPU only)")
    return text("; ".join(said))


def gpu_cell(lessons: list[tuple[int, LessonStatus]]) -> Md:
    """The compute capability each lesson's [requires] states, grouped: '7.0 or newer' for the whole part, or
    '7.0+: 7–9 · 9.0+: 11, 12'."""
    by_need: dict[str, list[int]] = {}
    for number, st in lessons:
        by_need.setdefault(st.lesson.requires.capability, []).append(number)
    if len(by_need) == 1:
        (need,) = by_need
        return text(f"{need} or newer" if need else "not stated by the lessons")
    ordered = sorted(by_need.items(), key=lambda item: version_tuple(item[0]) if item[0] else (99,))
    return Md(" · ").join(text(f"{need}+: {spans(numbers)}" if need else f"not stated: {spans(numbers)}")
                          for need, numbers in ordered)


def free_colab_cell(lessons: list[tuple[int, LessonStatus]]) -> str:
    """The lessons whose [requires] capability Colab's free GPU meets ('all', 'none', '7–9')."""
    free = dict(COLAB_GPUS)[FREE_COLAB_GPU]
    runs = [n for n, st in lessons if st.lesson.requires.capability
            and version_tuple(st.lesson.requires.capability) <= free]
    return "all" if len(runs) == len(lessons) else "none" if not runs else spans(runs)


def spans(numbers: list[int]) -> str:
    """1, 2, 3, 5 -> '1–3, 5'."""
    out: list[list[int]] = []
    for n in numbers:
        if out and n == out[-1][-1] + 1:
            out[-1].append(n)
        else:
            out.append([n])
    return ", ".join(f"{run[0]}–{run[-1]}" if len(run) > 2 else ", ".join(map(str, run)) for run in out)


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
    """The memory check's line, with where and when it ran (its details are in the lesson's record)."""
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
    rows = [[link(page, st.lesson) + Md("<br><small>[{}]({})</small>").format(
                 LINK_WORDS, url(page.root + record_uri(st.lesson))),
             badge(st.status, st.by_design), text(st.summary),
             mode_cell(st, "interpreter"), mode_cell(st, "gpu"), memory_cell(st)] for st in statuses]
    table = md_table(["Lesson", "Status", "What was verified", "Interpreter run", "GPU run", "Memory check"], rows)
    sentences = Md("\n").join(Md("- **{}**: {}").format(st.lesson.title, st.sentence) for st in statuses)
    return Md("{}\n\n{}").format(table, admonition("abstract", "Why each lesson has its badge, in full", sentences,
                                                     folded=True))
