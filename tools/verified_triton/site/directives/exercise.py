"""::exercise NAME — one exercise of the lesson's Practice section, from exercises.py, solutions.py and the proof.

What a learner needs, in order: the starter (region NAME of exercises.py: the function or kernel with its
hole, and the docstring that poses it), the command that checks an attempt, the hint (the `hint=` of the
exercise's `@practice.exercise("NAME", hint=...)` in exercises.py), and, folded, the solution (region NAME of
solutions.py) with the line the evidence gives: "its check catches N of N listed mistakes", each mistake named.
A check the proof found wanting is said outside the fold. The notebook makes of the same line a starter cell,
a check cell and the folded solution (site/tutorial.py).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from verified_triton.core.limits import LIMITS
from verified_triton.core.safefs import read_text
from verified_triton.judge.exercises import ExercisesState, ExerciseVerdict
from verified_triton.site.directives import DirectiveError, Page, directive
from verified_triton.site.directives.snippet import snippet
from verified_triton.site.door import Md, code, indent, text

STARTERS, SOLUTIONS = "exercises.py", "solutions.py"


@dataclass
class Posed:
    """An exercise as exercises.py registers it: `@practice.exercise(NAME, hint=..., needs_gpu=...)`."""

    name: str
    hint: str
    needs_gpu: str
    check: str  # the name of its check function
    line: int


def posed(path: Path, code_dir: Path) -> list[Posed]:
    """Every exercise exercises.py registers, in its order; DirectiveError for one the page cannot read."""
    source = read_text(path, LIMITS.source_file, code_dir)
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise DirectiveError(f"{path}:{exc.lineno}: {exc.msg}") from None
    found = []
    for node in tree.body:
        for deco in getattr(node, "decorator_list", []):
            if isinstance(deco, ast.Call) and getattr(deco.func, "attr", "") == "exercise":
                words = {k.arg: k.value for k in deco.keywords}
                values = [deco.args[0] if deco.args else words.get("name"), words.get("hint"),
                          words.get("needs_gpu")]
                if not all(v is None or isinstance(v, ast.Constant) and isinstance(v.value, str) for v in values) \
                        or values[0] is None or values[1] is None:
                    raise DirectiveError(f"{path}:{deco.lineno}: @practice.exercise(NAME, hint=...) takes string "
                                         "literals, so the page can read them without running the lesson")
                name, hint, gpu = (v.value if v is not None else "" for v in values)
                found.append(Posed(name, hint, gpu, node.name, deco.lineno))
    return found


def find_posed(page: Page, name: str) -> Posed:
    lesson = page.lesson.lesson
    path = lesson.folder / STARTERS
    if not path.is_file():
        raise DirectiveError(f"'::exercise {name}': {lesson.name} has no {STARTERS}")
    exercises = posed(path, page.site.code_dir)
    found = next((e for e in exercises if e.name == name), None)
    if found is None:
        raise DirectiveError(f"'::exercise {name}': {STARTERS} poses no exercise of that name (it poses: "
                             f"{', '.join(e.name for e in exercises) or 'none'})")
    return found


def verdict(state: ExercisesState | None, name: str) -> ExerciseVerdict | None:
    if state is None or state.state not in ("passed", "failed"):
        return None
    return next((e for e in state.exercises if e.name == name), None)


def command(name: str, gpu: str) -> Md:
    if gpu:
        return Md("Check it on a GPU (it needs one: {}), in the lesson's folder: {}").format(
            text(gpu), code(f"python exercises.py --only {name}"))
    return Md("Check it in the lesson's folder (or its zip): {}, on any machine; on a GPU, {}.").format(
        code(f"TRITON_INTERPRET=1 python exercises.py --only {name}"), code(f"python exercises.py --only {name}"))


def proof_line(state: ExercisesState | None, found: ExerciseVerdict | None, kind: type = Md) -> tuple:
    """(the fold's title, a warning to show outside it, or kind("")), from the judged proof; `kind` is the
    door's type of the page: Md on the site, PlainMd in a notebook (fields go in through its escape)."""
    if found is None:
        stale = state is not None and state.state == "stale"
        return (kind("Solution (its check is proven for an earlier version)") if stale
                else kind("Solution (its check is not proven yet)")), kind("")
    if found.needs_gpu:
        return kind("Solution (its check and its {} listed mistakes run on a GPU only)").format(
            len(found.mistakes)), kind("")
    caught = sum(m.caught for m in found.mistakes)
    title = kind("Solution; its check catches {} of {} listed mistakes").format(caught, len(found.mistakes))
    wrong = []
    if found.solution != "passed":
        wrong.append(kind("the solution fails its own check"))
    if found.starter == "passed":
        wrong.append(kind("the starter passes its check"))
    wrong += [kind("the mistake {} gets through").format(m.name[:120]) for m in found.mistakes if not m.caught]
    if not wrong:
        return title, kind("")
    if kind is Md:
        return title, Md("!!! failure \"This exercise's check is not proven\"\n\n    {}.").format(Md("; ").join(wrong))
    return title, kind("**This exercise's check is not proven:** {}.").format(kind("; ").join(wrong))


@directive("exercise", "one exercise of the Practice section: the starter from exercises.py, the command, the hint "
           "and, folded, the solution from solutions.py with how many listed mistakes its check catches",
           args=("NAME",))
def exercise(page: Page, name: str) -> Md:
    ex = find_posed(page, name)
    rel = f"code/{page.lesson.lesson.name}"
    state = page.lesson.exercises
    found = verdict(state, name)
    title, warning = proof_line(state, found)
    solution = snippet(page, f"{rel}/{SOLUTIONS}", name)
    mistakes = Md("")
    if found is not None and found.mistakes:
        named = Md(", ").join(Md("{} (it says \u201c{}\u201d)").format(text(m.name, 120), text(m.says, 120))
                              for m in found.mistakes)
        mistakes = Md("\n\nThe listed mistakes, each a small edit of this solution: {}.").format(named)
    block = Md('??? success "{}"\n\n{}').format(title, indent(solution + mistakes, "    "))
    parts = [snippet(page, f"{rel}/{STARTERS}", name), command(name, ex.needs_gpu),
             Md("**Hint.** {}").format(text(ex.hint)), *([warning] if warning else []), block]
    return Md("\n\n").join(parts)
