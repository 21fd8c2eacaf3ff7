"""A lesson file read the way its notebook and its page's `::step` lines need it.

One job: parse a lesson's main file once into
- its top-level statements (`Node`), each with the lines it owns (the comments above it included), the
  names it binds, the names it needs when it runs (a definition: its decorators, defaults and
  annotations) and every name it mentions (what calling it may need);
- its `main()` as the kit's named steps (`Steps`): what main does before the first step, each
  `with lesson.step(NAME):` or `if lesson.step(NAME, needs_gpu=...):` statement with its code, and how
  main ends (`return lesson.finish()`).

A main() that names steps must run them straight through: no other return, no step inside another
block, every name a literal. Anything else is a `SourceError` naming FILE:LINE, so an author learns at
build time what the notebook and the page could not place. A main() without steps is read too (the
notebook then runs main() whole, as before steps existed).
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass
from pathlib import Path

from verified_triton.core.kit import STEP_NAME
from verified_triton.core.limits import LIMITS
from verified_triton.core.safefs import UnsafePathError, read_text

DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


class SourceError(Exception):
    """A lesson file whose main() the notebook or a page cannot read; the message names FILE:LINE."""


@dataclass
class Node:
    index: int
    first: int  # first line of the statement itself, decorators included (1-based)
    end: int  # its last line
    owns_from: int  # the first line it owns: the comments and blank lines above it belong to it
    binds: frozenset[str]
    needs_now: frozenset[str]  # names read when the statement runs (for a definition: decorators, defaults)
    mentions: frozenset[str]  # every name read anywhere inside it
    kind: str  # "docstring", "prelude", "main", "guard" or "code"
    name: str  # a definition's name, else the statement's type

    def overlaps(self, start: int, end: int) -> bool:
        return not (self.end < start or self.first > end)


@dataclass
class StepCode:
    name: str
    line: int  # the line of the `with` or `if` statement
    needs_gpu: str  # why the interpreter skips it ("" when it runs everywhere)
    code: str  # the statement (and main's statements just before it that belong to no step), dedented
    mentions: frozenset[str]


@dataclass
class Steps:
    """main() as the notebook runs it: a start, the steps in order, an end."""

    start: str  # the statements before the first step (the Lesson, the device), dedented
    start_mentions: frozenset[str]
    steps: list[StepCode]
    end: str  # the statements after the last step, then `exit_code = <what main returns>`
    end_mentions: frozenset[str]

    def named(self, name: str) -> StepCode | None:
        return next((s for s in self.steps if s.name == name), None)


@dataclass
class LessonSource:
    path: Path  # for messages
    text: str
    lines: list[str]
    nodes: list[Node]
    binders: dict[str, list[int]]  # name -> indices of the nodes that bind it
    main: Node | None
    steps: Steps | None  # None: main() names no steps

    def where(self, line: int) -> str:
        return f"{self.path}:{line}"

    def step(self, name: str) -> StepCode:
        """main()'s step `name`, or SourceError saying which steps main() has (for `::step NAME`)."""
        if self.steps is None:
            raise SourceError(f"'::step {name}': main() in {self.path.name} names no steps; wrap its calls in "
                              "`with lesson.step(NAME):` (code/lessonkit.py)")
        found = self.steps.named(name)
        if found is None:
            raise SourceError(f"'::step {name}': main() in {self.path.name} has no step of that name (steps: "
                              f"{', '.join(s.name for s in self.steps.steps)})")
        return found

    def owned_text(self, indices: list[int]) -> str:
        """The lines the given (consecutive or not) nodes own, in source order."""
        groups: list[list[str]] = []
        previous: Node | None = None
        for i in sorted(indices):
            node = self.nodes[i]
            if previous is None or node.owns_from != previous.end + 1:
                groups.append([])  # not next to the one before: a group of its own
            groups[-1] += self.lines[node.owns_from - 1:node.end]
            previous = node
        chunks = ["\n".join(group).strip("\n") for group in groups]
        return "\n\n\n".join(c for c in chunks if c.strip())

    def nodes_in(self, start: int, end: int) -> list[int]:
        """The nodes whose statements overlap lines start..end."""
        return [n.index for n in self.nodes if n.overlaps(start, end)]

    def needed_by(self, names: frozenset[str], exclude: int | None = None) -> set[int]:
        return {i for name in names for i in self.binders.get(name, ()) if i != exclude}

    def closure(self, names: frozenset[str]) -> set[int]:
        """Every node that code mentioning `names` may need when it runs: the binders, and theirs, on and on."""
        seen: set[int] = set()
        todo = list(self.needed_by(names))
        while todo:
            i = todo.pop()
            if i in seen or self.nodes[i].kind in ("main", "guard", "docstring"):
                continue
            seen.add(i)
            todo.extend(self.needed_by(self.nodes[i].mentions, exclude=i))
        return seen


def parse(text: str, path: Path | str) -> LessonSource:
    path = Path(path)
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        raise SourceError(f"{path}:{exc.lineno}: {exc.msg}") from None
    lines = text.split("\n")
    future_annotations = any(isinstance(n, ast.ImportFrom) and n.module == "__future__"
                             and any(a.name == "annotations" for a in n.names) for n in tree.body)
    nodes: list[Node] = []
    first_definition = next((i for i, n in enumerate(tree.body) if isinstance(n, DEFINITIONS) or _is_guard(n)),
                            len(tree.body))
    previous_end = 0
    for i, stmt in enumerate(tree.body):
        first = min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", [])])
        if i == 0 and isinstance(stmt, ast.Expr) and isinstance(getattr(stmt, "value", None), ast.Constant) \
                and isinstance(stmt.value.value, str):
            kind = "docstring"
        elif _is_guard(stmt):
            kind = "guard"
        elif isinstance(stmt, ast.FunctionDef) and stmt.name == "main":
            kind = "main"
        elif i < first_definition:
            kind = "prelude"
        else:
            kind = "code"
        nodes.append(Node(i, first, stmt.end_lineno, previous_end + 1, frozenset(_binds(stmt)),
                          frozenset(_needs_now(stmt, future_annotations)), frozenset(_mentions(stmt)), kind,
                          getattr(stmt, "name", type(stmt).__name__)))
        previous_end = stmt.end_lineno
    binders: dict[str, list[int]] = {}
    for node in nodes:
        for name in node.binds:
            binders.setdefault(name, []).append(node.index)
    main = next((n for n in nodes if n.kind == "main"), None)
    source = LessonSource(path, text, lines, nodes, binders, main, None)
    if main is not None:
        source.steps = _read_main(source, tree.body[main.index])
    return source


def _is_guard(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.If) and "__main__" in ast.unparse(stmt.test)


def _loads(nodes) -> set[str]:
    return {n.id for node in nodes if node is not None for n in ast.walk(node)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _mentions(stmt: ast.stmt) -> set[str]:
    return _loads([stmt])


def _needs_now(stmt: ast.stmt, future_annotations: bool) -> set[str]:
    """Names a statement reads when it runs. A function's body runs later, when it is called."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        args = stmt.args
        now = [*stmt.decorator_list, *args.defaults, *args.kw_defaults]
        if not future_annotations:
            now += [a.annotation for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg,
                                           args.kwarg) if a is not None] + [stmt.returns]
        return _loads(now)
    if isinstance(stmt, ast.ClassDef):
        names = _loads([*stmt.decorator_list, *stmt.bases, *(k.value for k in stmt.keywords)])
        for inner in stmt.body:  # a class body runs when the class is defined
            names |= _needs_now(inner, future_annotations)
        return names
    return _mentions(stmt)


def _binds(stmt: ast.stmt) -> set[str]:
    """Names a top-level statement binds (inside if/try/with/for too, not inside functions)."""
    if isinstance(stmt, DEFINITIONS):
        return {stmt.name}
    names: set[str] = set()
    todo: list[ast.AST] = [stmt]
    while todo:
        node = todo.pop()
        if isinstance(node, DEFINITIONS):
            names.add(node.name)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name != "*"}
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        todo.extend(ast.iter_child_nodes(node))
    return names


# -- main() as steps ------------------------------------------------------------------

def _step_call(expr: ast.expr | None) -> ast.Call | None:
    """`X.step(...)`, as a `with` item or an `if` test, else None."""
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "step":
        return expr
    return None


def _statement_step(stmt: ast.stmt) -> ast.Call | None:
    if isinstance(stmt, ast.With) and len(stmt.items) == 1:
        return _step_call(stmt.items[0].context_expr)
    if isinstance(stmt, ast.If) and not stmt.orelse:
        return _step_call(stmt.test)
    return None


def _literal(source: LessonSource, call: ast.Call, what: str, node: ast.expr | None) -> str:
    if node is None:
        return ""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    raise SourceError(f"{source.where(call.lineno)}: the {what} of a step is a string literal, so the page "
                      "and the notebook can read it without running the lesson")


def _read_main(source: LessonSource, main: ast.FunctionDef) -> Steps | None:
    calls = [n for n in ast.walk(main) if _step_call(n) is not None]
    if not calls:
        return None
    body = main.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # main's docstring
    top = {id(call): stmt for stmt in body if (call := _statement_step(stmt)) is not None}
    for call in calls:
        if id(call) not in top:
            raise SourceError(f"{source.where(call.lineno)}: a step is a statement of main() itself, "
                              "`with lesson.step(NAME):` or `if lesson.step(NAME, needs_gpu=...):`, "
                              "not part of another statement")
    for node in ast.walk(main):
        if isinstance(node, ast.Return) and (not body or node is not _final_return(body)) \
                and _scope_is(main, node):
            raise SourceError(f"{source.where(node.lineno)}: main() returns before its end; with steps it runs "
                              "straight through (a step that needs a GPU is "
                              "`if lesson.step(NAME, needs_gpu=REASON):`, which the interpreter skips)")
    final = _final_return(body)
    if final is None or final.value is None:
        raise SourceError(f"{source.where(main.end_lineno)}: main() ends with `return lesson.finish()`")

    def code(stmts: list[ast.stmt], previous_end: int) -> tuple[str, frozenset[str]]:
        if not stmts:
            return "", frozenset()
        lines = source.lines[previous_end:stmts[-1].end_lineno]
        return textwrap.dedent("\n".join(lines)).strip("\n"), frozenset(_loads(stmts))

    steps: list[StepCode] = []
    names: dict[str, int] = {}  # step -> its line, for the error on a name used twice
    pending: list[ast.stmt] = []
    start_stmts: list[ast.stmt] | None = None
    previous_end = (body[0].lineno - 1) if body else main.lineno
    chunk_start = previous_end
    for stmt in body[:-1]:
        call = _statement_step(stmt)
        if call is None:
            pending.append(stmt)
            continue
        if start_stmts is None:
            start_stmts, pending = pending, []
            start_code = code(start_stmts, chunk_start)
            chunk_start = start_stmts[-1].end_lineno if start_stmts else chunk_start
        name = _literal(source, call, "name", call.args[0] if call.args else None)
        gpu = next((k.value for k in call.keywords if k.arg == "needs_gpu"), None)
        needs_gpu = _literal(source, call, "needs_gpu reason", gpu)
        if not STEP_NAME.match(name):
            raise SourceError(f"{source.where(call.lineno)}: step {name!r}: use lower-case letters, digits and '-'")
        if name in names:
            raise SourceError(f"{source.where(call.lineno)}: step {name!r} again (first at line {names[name]})")
        names[name] = stmt.lineno
        text, mentions = code([*pending, stmt], chunk_start)
        steps.append(StepCode(name, stmt.lineno, needs_gpu, text, mentions))
        pending = []
        chunk_start = stmt.end_lineno
    end_text, end_mentions = code(pending, chunk_start)
    returned = ast.get_source_segment(source.text, final.value)
    end_line = f"exit_code = {returned}  # the script ends with sys.exit(main())"
    end_text = f"{end_text}\n{end_line}" if end_text else end_line
    start_text, start_mentions = start_code
    return Steps(start_text, start_mentions, steps, end_text,
                 frozenset(end_mentions | _loads([final.value])))


def _final_return(body: list[ast.stmt]) -> ast.Return | None:
    return body[-1] if body and isinstance(body[-1], ast.Return) else None


def _scope_is(main: ast.FunctionDef, target: ast.AST) -> bool:
    """True when `target` belongs to main() itself, not to a function or class defined inside it."""
    todo: list[ast.AST] = list(ast.iter_child_nodes(main))
    while todo:
        node = todo.pop()
        if node is target:
            return True
        if isinstance(node, (*DEFINITIONS, ast.Lambda)):
            continue
        todo.extend(ast.iter_child_nodes(node))
    return False


_READ: dict[tuple[str, str], LessonSource] = {}


def read(lesson, code_dir: Path) -> LessonSource:
    """The lesson's main file, read through safefs and parsed once per content (a page asks once per step)."""
    try:
        text = read_text(lesson.main, LIMITS.source_file, code_dir)
    except UnsafePathError as exc:
        raise SourceError(str(exc)) from None
    rel = f"code/{lesson.main.relative_to(code_dir).as_posix()}"
    key = (rel, text)
    if key not in _READ:
        if len(_READ) > 4096:  # a long `mkdocs serve` session: forget old versions (a course of hundreds of
            # lessons keeps every lesson's: its pages and its notebooks ask for each again)
            _READ.clear()
        _READ[key] = parse(text, rel)
    return _READ[key]
