"""The notebook's side of lessonkit.py: what a lesson's notebook needs that `python lesson.py` does not.

This file is not imported by the tools. site/notebook.py packs it into every notebook's kit cell, which
writes it beside the notebook (with lessonkit.py and lesson.toml) and calls `install`. It runs in the
notebook's kernel (IPython), on the reader's machine, with the standard library only.

- `%%module NAME` on a cell's first line runs the cell inside the lesson's module NAME (its kernels, say,
  from NAME.py beside the notebook), not in the notebook's own namespace: the lesson's later cells call
  NAME.f, or an f they imported from it, and so run what the cell defines, as the reader edited it.
- The kit stops a run with sys.exit (a decline by design, or a machine that cannot run the lesson), after
  printing why in one sentence. In a notebook that would be IPython's red `SystemExit: 3` and its "To
  exit: use 'exit'" warning. Here the stop ends its cell quietly: at the lesson's end (every step of
  main() has started) that is all; before it, the cell is marked failed without a traceback, so that
  Run all stops there instead of running cells that need what never ran.
"""

from __future__ import annotations

import ast
import importlib
import linecache
import sys

STEPS: list[str] = []  # main()'s steps, in order: a stop after all of them started is the lesson's end
STOPPED: set[str] = set()  # {"stopped"} once the kit stopped the cell running now (its last expression is skipped)
_CELLS: dict[str, int] = {}  # module name -> cells run in it so far (for their file names)


class LessonStopped(Exception):
    """The kit stopped the lesson before its end; its sentence is above. Run all stops at this cell."""


def install(shell, steps: list[str]) -> None:
    """Register `%%module`, catch the kit's stop in every cell; idempotent (the kit cell may run again)."""
    STEPS[:] = steps
    shell.register_magic_function(_module_magic(shell), "cell", "module")
    shell.ast_transformers[:] = [t for t in shell.ast_transformers if not isinstance(t, CatchStop)]
    shell.ast_transformers.append(CatchStop())
    shell.set_custom_exc((LessonStopped,), _quiet)


def _quiet(shell, etype, value, tb, tb_offset=None):
    """LessonStopped's handler: nothing more to show, the kit said why."""
    return None


class CatchStop(ast.NodeTransformer):
    """Every cell's statements inside `try: ... except SystemExit as e: stopped(e)` (see `wrap`)."""

    def visit_Module(self, tree: ast.Module) -> ast.Module:
        return wrap(tree)


_WRAPPER = """\
try:
    __import__("lessonkit_notebook").STOPPED.clear()
except SystemExit as _lessonkit_stop:
    __import__("lessonkit_notebook").stopped(_lessonkit_stop)
"""
_RUNNING = 'not __import__("lessonkit_notebook").STOPPED'


def wrap(tree: ast.Module) -> ast.Module:
    """The cell's statements inside the stop's catch. A trailing expression stays outside, so the cell still
    shows its value, but is not evaluated after a stop; `from __future__` imports stay first."""
    body = list(tree.body)
    head = []
    while body and isinstance(body[0], ast.ImportFrom) and body[0].module == "__future__":
        head.append(body.pop(0))
    tail = body.pop() if body and isinstance(body[-1], ast.Expr) else None
    if not body:
        return tree
    catch = ast.parse(_WRAPPER).body[0]
    for node in ast.walk(catch):  # the wrapper's own nodes only: the cell's keep their lines
        ast.copy_location(node, body[0])
    catch.body[1:] = body
    if tail is not None:  # `value if not STOPPED else None`: still the expression IPython shows
        last = tail
        tail = ast.Expr(ast.IfExp(test=ast.parse(_RUNNING, mode="eval").body, body=last.value,
                                  orelse=ast.Constant(None)))
        for node in (tail, tail.value, *ast.walk(tail.value.test), tail.value.orelse):
            ast.copy_location(node, last)
    tree.body = [*head, catch, *([tail] if tail is not None else [])]
    return ast.fix_missing_locations(tree)


def stopped(stop: SystemExit) -> None:
    """The kit's sys.exit, caught in a cell: quiet at the lesson's end, Run all stopped before it."""
    lesson = kit_lesson(stop.__traceback__)
    if lesson is None:
        raise stop  # not the kit's stop (the reader's own sys.exit): IPython shows it as always
    STOPPED.add("stopped")
    if stop.code in (0, None):
        return
    started = [step.name for step in lesson.results.steps]
    if all(name in started for name in STEPS):
        return  # the lesson's end: the kit's sentence is its last word
    raise LessonStopped(stop.code) from None


def kit_lesson(tb):
    """The lessonkit Lesson whose method called sys.exit, from the traceback's frames; else None."""
    found = None
    while tb is not None:
        owner = tb.tb_frame.f_locals.get("self")
        if type(owner).__name__ == "Lesson" and type(owner).__module__ == "lessonkit":
            found = owner
        tb = tb.tb_next
    return found


def _module_magic(shell):
    def module(line: str, cell: str) -> None:
        """%%module NAME: run this cell inside the lesson's module NAME (NAME.py beside the notebook)."""
        name = line.strip()
        if not name.isidentifier():
            raise ValueError(f"%%module takes a module's name, not {line.strip()!r}")
        run_in_module(name, cell, shell.user_ns)

    return module


def run_in_module(name: str, cell: str, user_ns: dict) -> None:
    """Run `cell` in module `name` (imported first if it is not yet); what the notebook had imported from it
    and the cell redefines is rebound in the notebook too."""
    target = sys.modules.get(name) or importlib.import_module(name)
    _CELLS[name] = _CELLS.get(name, 0) + 1
    # A file name of its own, in linecache: Triton reads a kernel's source back through inspect, and a
    # traceback shows the cell's lines. Not the module's file: an edited kernel must compile as edited.
    filename = f"<{name}.py, notebook cell {_CELLS[name]}>"
    linecache.cache[filename] = (len(cell), None, cell.splitlines(keepends=True), filename)
    before = dict(vars(target))
    exec(compile(wrap(ast.parse(cell, filename)), filename, "exec"), vars(target))
    for key, value in vars(target).items():
        old = before.get(key)
        if old is None or old is value:
            continue
        for alias, bound in list(user_ns.items()):  # `from NAME import f` (as g) in the notebook
            if bound is old:
                user_ns[alias] = value
