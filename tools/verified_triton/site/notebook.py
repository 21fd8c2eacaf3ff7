"""A lesson as a Jupyter notebook: the page, runnable.

One job: from the lesson's page, its source and its evidence, the notebook that "Open in Colab" opens.

    title           the page's title, what the lesson needs and which of Colab's GPUs run it
    setup           Triton present? a GPU that can run the lesson, or Triton's interpreter, said in words
    kit, imports    collapsed cells (Colab's form view, JupyterLab's hidden input): lessonkit.py and
                    lesson.toml written beside the notebook, then the lesson file's imports
    the page        section by section: the prose, then the code it discusses. A `::snippet` of the
                    lesson file becomes the code cell that defines what the region shows, where the page
                    shows it; a `::step NAME` becomes the cell that runs that step of main(), carrying
                    what the recorded GPU run printed in it. Lesson code the page does not show goes
                    into collapsed cells just before the first cell that needs it.
    finish          `exit_code = lesson.finish()`; then the recorded GPU run's whole output, folded

Text from lesson.toml and the evidence reaches the notebook's own Markdown cells as door.PlainMd (shown
as the characters it is), the directives' forms as door.Md, and a stream output through clean_output.
No code appears twice and no `# snippet:` marker reaches a cell. Material's admonitions become Markdown
that Jupyter, JupyterLab, Colab and GitHub render alike (a folded one, such as a solution, a
`<details>` block). The notebook runs top to bottom, through the same steps as `python <lesson>.py`.
What cannot be placed (a step the page does not place, places out of order, or places above the code
it runs) is an error naming the page's FILE:LINE. Cells are made with nbformat's own constructors.
"""

from __future__ import annotations

import ast
import base64
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from verified_triton.core.lessons import Lesson
from verified_triton.core.limits import LIMITS
from verified_triton.core.numfmt import seconds
from verified_triton.core.safefs import read_text
from verified_triton.judge.evidence import Record
from verified_triton.site import directives, lesson_source, siteconfig, sources
from verified_triton.site.directives.common import gpu_first
from verified_triton.site.door import (
    Md,
    PlainMd,
    clean_output,
    code,
    page_markdown,
    plain_code_block,
    url,
)
from verified_triton.site.requirements import COLAB_GPUS, INSTALL, version_tuple
from verified_triton.site.snippets import END, MARKER_LIKE, START, extract

IMPORT_LINE = "HERE = Path(__file__).resolve().parent"
NOTEBOOK_IMPORT = "HERE = Path.cwd()  # in a notebook: lessonkit.py was written here by the cell above"
HIDDEN = {"cellView": "form", "jupyter": {"source_hidden": True}}  # collapsed in Colab and JupyterLab


# -- the first cells --------------------------------------------------------------------

def colab_line(lesson: Lesson) -> PlainMd:
    """Which of Colab's GPUs run the lesson's GPU half, from [requires] capability."""
    need = lesson.requires.capability
    every = ", ".join(f"{name} ({cc[0]}.{cc[1]})" for name, cc in COLAB_GPUS)
    able = [f"{name} ({cc[0]}.{cc[1]})" for name, cc in COLAB_GPUS if not need or cc >= version_tuple(need)]
    unable = [f"{name} ({cc[0]}.{cc[1]})" for name, cc in COLAB_GPUS if need and cc < version_tuple(need)]
    interp = lesson.modes["interpreter"]
    fallback = (PlainMd("the setup below falls back to Triton's interpreter on the CPU: the checks run, nothing is "
                        "timed") if interp.supported else
                PlainMd("the lesson cannot run (nor under the interpreter: {})").format(interp.reason))
    if not need or len(able) == len(COLAB_GPUS):
        return PlainMd("**On Colab:** any of its GPUs runs it: {}. Without a GPU, {}.").format(every, fallback)
    if able:
        return PlainMd("**On Colab:** choose {} (Runtime › Change runtime type): the lesson needs compute capability "
                       "{} or newer. On {}, or without a GPU, {}.").format(_either(able), need, _either(unable),
                                                                          fallback)
    return PlainMd("**On Colab:** none of its GPUs, {}, has the compute capability {} this lesson needs; there, "
                   "{}.").format(every, need, fallback)


def _either(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def setup_code(lesson: Lesson) -> str:
    """Triton present, and where the kernels run, said in one sentence."""
    need = lesson.requires.capability
    need_tuple = tuple(version_tuple(need)) if need else (0, 0)
    why = f"compute capability {need}" if need else "a CUDA GPU"
    interp = lesson.modes["interpreter"]
    if interp.supported:
        fallback = ['    os.environ["TRITON_INTERPRET"] = "1"',
                    f'    print((f"{{gpu}} is below the {why} this lesson needs" if gpu else "No GPU here")',
                    '          + ": the kernels run on the CPU through Triton\'s interpreter;"',
                    '          " the checks run, nothing is timed.")']
    else:
        cannot = f": the lesson cannot run here, nor under the interpreter ({interp.reason})."
        fallback = [f'    print((f"{{gpu}} is below the {why} this lesson needs" if gpu else "No GPU here")',
                    f'          + {cannot!r})']
    return "\n".join([
        f"# Setup: Triton, and where the kernels run. Elsewhere than Colab: {INSTALL}",
        "import importlib.util, os, subprocess, sys",
        'if importlib.util.find_spec("triton") is None:',
        '    subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", "triton"])',
        "import torch",
        'gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else ""',
        f'if gpu and torch.cuda.get_device_capability() >= {need_tuple!r} '
        'and os.environ.get("TRITON_INTERPRET") != "1":',
        '    print(f"{gpu}: the lesson checks and times its kernels on this GPU.")',
        "else:",
        *fallback,
    ])


def python_string(value: str) -> str:
    """A Python literal of `value` that reads as the text itself when it can (a raw triple-quoted string)."""
    literal = f"r'''{value}'''"
    try:
        if ast.literal_eval(literal) == value:
            return literal
    except (SyntaxError, ValueError):
        pass
    return repr(value)


def kit_code(files: dict[str, bytes]) -> str:
    """The kit, lesson.toml and any other local module, written beside the notebook by one collapsed cell."""
    lines = ["# @title The lesson kit and lesson.toml (collapsed: run it; no need to read it)",
             "# lessonkit.py is the small kit the lesson reports its checks and benchmarks through;",
             "# lesson.toml says what the lesson needs. This cell writes them beside the notebook.",
             "from pathlib import Path", ""]
    for name in sorted(files):
        content = files[name].decode("utf-8")
        if name.endswith(".py"):  # a local module's snippet markers are the page's business, not the reader's
            content = "\n".join(ln for ln in content.split("\n") if not MARKER_LIKE.match(ln))
        lines.append(f"Path({name!r}).write_text({python_string(content)}, encoding='utf-8')")
    return "\n".join(lines)


# -- the page, cell by cell ----------------------------------------------------------------

ADMONITION = re.compile(r'^(?P<indent>[ \t]*)(?P<marker>!!!|\?\?\?\+?)\s+(?P<kind>[\w-]+)?[\w -]*?'
                        r'(?:\s*"(?P<title>[^"]*)")?\s*$')
TAB = re.compile(r'^(?P<indent>[ \t]*)===\+?\s+"(?P<title>[^"]*)"\s*$')
ATTRS = re.compile(r"\{\s*[.#:][^}]*\}")
EMOJI = re.compile(r":(?:material|octicons|fontawesome)-[a-z0-9-]+:\s?")


def for_jupyter(markdown: str) -> str:
    """Material's admonitions and tabs as Markdown every notebook viewer renders.

    A folded admonition (`???`, a solution) becomes a `<details>` block; an open one or a tab, its title
    in bold. Bodies lose the four spaces the block added, so a list item keeps its content and a fence
    inside stays a fence (not an indented block that would show its backticks).
    """
    out: list[str] = []
    stack: list[tuple[int, bool]] = []  # per open block: its body's indent on the page, folded?
    fence: str | None = None
    for line in markdown.split("\n"):
        indent = len(line) - len(line.lstrip(" "))
        if line.strip() and fence is None:
            while stack and indent < stack[-1][0]:
                body, folded = stack.pop()
                if folded:
                    out += ["", " " * max(0, body - 4 - 4 * len(stack)) + "</details>", ""]
        cut = 4 * len(stack)
        body_line = line[cut:] if line[:cut].strip() == "" else line.lstrip(" ")
        if fence is not None:
            out.append(body_line)
            if body_line.strip().startswith(fence):
                fence = None
            continue
        opened = re.match(r"^\s*(`{3,}|~{3,})", body_line)
        if opened:
            fence = opened.group(1)
            out.append(body_line)
            continue
        match = ADMONITION.match(body_line) or TAB.match(body_line)
        if match:
            at = " " * len(match.group("indent"))
            title = match.group("title")
            marker = match.groupdict().get("marker")
            if title is None and marker:
                title = (match.group("kind") or "").replace("-", " ").capitalize()
            if marker and marker.startswith("???"):
                opening = "<details open>" if marker.endswith("+") else "<details>"
                out += [f"{at}{opening}<summary>{title}</summary>", ""]
                stack.append((indent + 4, True))
            else:
                out += [f"{at}**{title}**" if title else "", ""]
                stack.append((indent + 4, False))
            continue
        out.append(EMOJI.sub("", ATTRS.sub("", body_line)))
    while stack:
        body, folded = stack.pop()
        if folded:
            out += ["", " " * max(0, body - 4 - 4 * len(stack)) + "</details>"]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip("\n")


@dataclass
class Cell:
    kind: str  # "markdown" or "code"
    source: str
    id: str
    hidden: bool = False
    outputs: list = field(default_factory=list)
    attachments: dict[str, bytes] = field(default_factory=dict)


@dataclass
class Waiting:
    """A shown cell that needs, when it runs, code the page shows further down."""

    cell: Cell
    nodes: list[int]
    on: set[int]


class Planner:
    """Walks the page once, in order, and decides every cell."""

    def __init__(self, lesson: Lesson, site: directives.Site, page: directives.Page,
                 source: lesson_source.LessonSource, shown_at: dict[int, int], record: Record | None):
        self.lesson, self.site, self.page, self.source = lesson, site, page, source
        self.shown_at, self.record = shown_at, record
        self.cells: list[Cell] = []
        self.pending: list[Cell] = []  # code cells waiting for the end of the block that named them
        self.placed: set[int] = set()  # nodes in a cell, or in one waiting
        self.defined: set[int] = set()  # nodes in a cell already made
        self.waiting: list[Waiting] = []
        self.steps_placed: list[str] = []
        self.started = False
        self.ids: dict[str, int] = {}
        for i in prelude(source, shown_at) + [n.index for n in source.nodes if n.kind == "docstring"]:
            self.placed.add(i)
            self.defined.add(i)

    # -- naming and errors

    def cell_id(self, base: str) -> str:
        n = self.ids.get(base, 0)
        self.ids[base] = n + 1
        return base if n == 0 else f"{base}-{n + 1}"

    def error(self, line: int, message: str) -> directives.PageError:
        return directives.PageError(line, directives.DirectiveError(message))

    def names(self, indices) -> str:
        return ", ".join(f"`{self.source.nodes[i].name}`" for i in sorted(indices))

    # -- prose

    def prose(self, lines: list[str], first_line: int) -> None:
        chunk = "\n".join(lines)
        if chunk.strip():
            expanded = directives.expand_page(chunk, self.page, first_line)
            markdown = for_jupyter(expanded)
            if markdown.strip():
                used = {n: d for n, d in self.page.attachments.items() if f"attachment:{n}" in markdown}
                self.cells.append(Cell("markdown", markdown, self.cell_id("prose"), attachments=used))
        self.cells += self.pending
        self.pending = []

    # -- code the page shows

    def snippet(self, rel: str, region_name: str, line: int, folded_title: str | None) -> str:
        """Place the code cell of a region; returns what stays in the prose where the directive was."""
        region = extract(self.lesson.main, region_name, self.site.code_dir)
        nodes = self.source.nodes_in(region.start, region.end)
        if any(self.source.nodes[i].kind == "main" for i in nodes):
            raise self.error(line, f"region '{region_name}' lies inside main(), which the notebook runs as its "
                                   "steps (::step NAME); show the function a step calls instead")
        new = [i for i in nodes if i not in self.placed]
        span = Md("lines {}–{} of {}").format(region.start, region.end, code(self.lesson.main.name))
        if not new:
            where = "above" if all(i in self.defined for i in nodes) else "further down"
            return Md("*The code shown here on the page, {}, is part of the cell {} that defines {}.*").format(
                span, where, Md(", ").join(code(self.source.nodes[i].name) for i in nodes))
        title = f"# @title {folded_title}: {', '.join(self.source.nodes[i].name for i in new)}" \
            if folded_title is not None else ""
        cell = Cell("code", "\n".join(filter(None, [title, self.code_of(new)])), self.cell_id(f"region-{region_name}"),
                    hidden=folded_title is not None)
        self.placed.update(new)
        hidden, later = self.needs_now(new)
        if later:
            self.waiting.append(Waiting(cell, new, later))
            return Md("*The code of this part, {}, runs further down, after {}, which it uses as it is "
                      "defined.*").format(span, Md(", ").join(code(self.source.nodes[i].name) for i in sorted(later)))
        self.emit_hidden(hidden, "needed by the code below")
        self.emit(cell, new)
        return Md("")

    def code_of(self, indices: list[int]) -> str:
        """The lines the nodes own, without marker lines; the kit import made to work in a notebook."""
        text_ = self.source.owned_text(indices)
        lines = [ln for ln in text_.split("\n") if not (START.match(ln) or END.match(ln))]
        return re.sub(r"\n{3,}", "\n\n\n", "\n".join(lines)).strip("\n")

    def needs_now(self, indices: list[int]) -> tuple[set[int], set[int]]:
        """(hidden nodes to define first, shown nodes not yet defined) for code that runs as it is defined."""
        hidden, later = set(), set()
        todo = list(indices)
        while todo:
            i = todo.pop()
            for j in self.source.needed_by(self.source.nodes[i].needs_now, exclude=i):
                if j in self.defined or j in hidden or j in indices or self.source.nodes[j].kind in ("main", "guard"):
                    continue
                if j in self.shown_at or j in self.placed:
                    later.add(j)
                else:
                    hidden.add(j)
                    todo.append(j)
        return hidden, later

    def emit_hidden(self, indices: set[int], why: str) -> None:
        indices = sorted(i for i in indices if i not in self.placed)
        if not indices:
            return
        self.placed.update(indices)
        names = ", ".join(self.source.nodes[i].name for i in indices)
        source = f"# @title Not shown on the page, {why}: {names}\n{self.code_of(indices)}"
        self.emit(Cell("code", source, self.cell_id("hidden"), hidden=True), indices)

    def emit(self, cell: Cell, indices: list[int]) -> None:
        self.pending.append(cell)
        self.defined.update(indices)
        for wait in list(self.waiting):  # cells that were waiting for these
            if wait.on <= self.defined:
                self.waiting.remove(wait)
                hidden, later = self.needs_now(wait.nodes)
                if later:
                    self.waiting.append(Waiting(wait.cell, wait.nodes, later))
                    continue
                self.emit_hidden(hidden, "needed by the code below")
                self.emit(wait.cell, wait.nodes)

    # -- the steps of main()

    def step(self, name: str, line: int) -> None:
        steps = self.source.steps
        where = self.source.where
        try:
            step = self.source.step(name)
        except lesson_source.SourceError as exc:
            raise self.error(line, str(exc)) from None
        if name in self.steps_placed:
            raise self.error(line, f"'::step {name}' is placed twice on the page")
        expected = steps.steps[len(self.steps_placed)]
        if expected.name != name:
            raise self.error(line, f"'::step {name}' comes before step '{expected.name}' here, but main() runs "
                                   f"'{expected.name}' first ({where(expected.line)}): the page and main() keep "
                                   "one order, so the notebook runs what the script runs")
        mentions = step.mentions | (steps.start_mentions if not self.started else frozenset())
        self.require_for_run(mentions, line, f"'::step {name}'")
        if not self.started:
            self.started = True
            self.pending.append(Cell("code", steps.start, "start"))
        self.steps_placed.append(name)
        self.pending.append(Cell("code", step.code, self.cell_id(f"step-{name}"), outputs=self.outputs(name)))

    def require_for_run(self, mentions: frozenset[str], line: int, what: str) -> None:
        """Define every node code that mentions these names may call; shown code must already be above."""
        needed = self.source.closure(mentions)
        missing = sorted(i for i in needed if i not in self.defined)
        shown_later = [i for i in missing if i in self.shown_at or i in self.placed]
        if shown_later:
            i = shown_later[0]
            node = self.source.nodes[i]
            at = f"line {self.shown_at[i]}" if i in self.shown_at else "further down"
            raise self.error(line, f"{what} runs {node.name} ({self.source.where(node.first)}), which the page "
                                   f"shows below it ({at}): place {what} after it")
        hidden = set(missing)
        for i in list(hidden):  # and what they need as they are defined
            more, _ = self.needs_now([i])
            hidden |= more
        self.emit_hidden(hidden, "used by the next cell")

    def outputs(self, name: str) -> list:
        """What the recorded GPU run printed in this step, labelled, as the cell's output."""
        from nbformat.v4 import new_output

        record = self.record
        if record is None or record.outcome == "by-design" or not record.steps:
            return []
        env = record.env
        # A stream output is text, not Markdown, but Jupyter draws its terminal colours: every field
        # from the record through clean_output, as the step's own output is.
        label = clean_output(
            f"[Recorded on {env.device_name}"
            + (f" (compute capability {env.capability})" if env.capability else "") + ", "
            f"{record.started_utc.replace('T', ' ').replace('Z', ' UTC')}: Triton {env.triton}, torch "
            f"{env.torch}, Python {env.python}"
            + (f", CUDA {env.cuda}" if env.cuda else "")
            + ("" if self.current else "; for an older version of this lesson's source")
            + ". Running the cell replaces it.]")
        found = next((s for s in record.steps if s.name == name), None)
        if found is None:
            body = clean_output(f"(the recorded run stopped before this step: {record.outcome}, "
                                f"{record.reason or 'see its log'})")
        elif found.not_run:
            body = clean_output(f"(not run there: {found.not_run})")
        else:
            body = clean_output(found.stdout) or "(the step printed nothing)"
        return [new_output("stream", name="stdout", text=f"{label}\n{body}\n")]

    @property
    def current(self) -> bool:
        st = self.page.lesson
        return self.record is not None and st is not None and st.is_current(self.record)

    # -- the end

    def emit_rest(self) -> None:
        """The lesson file's code no cell has placed yet, in collapsed cells."""
        rest = {n.index for n in self.source.nodes if n.kind == "code" and n.index not in self.placed}
        self.emit_hidden(rest, "the rest of the lesson file")

    def finish(self, last_line: int) -> None:
        if self.waiting:
            wait = self.waiting[0]
            raise self.error(last_line, f"the code of {self.names(wait.nodes)} needs {self.names(wait.on)} as it "
                                        "is defined, and the page never shows it before")
        steps = self.source.steps
        if steps is not None:
            missing = [s for s in steps.steps if s.name not in self.steps_placed]
            if missing:
                s = missing[0]
                raise self.error(last_line, f"step '{s.name}' of main() ({self.source.where(s.line)}) is not placed "
                                            f"on the page: add '::step {s.name}' under the section that shows its code")
            self.require_for_run(steps.end_mentions, last_line, "the end of main()")
            self.emit_rest()
            self.pending.append(Cell("code", steps.end + "\nprint('exit code', exit_code)\n"
                                     "assert exit_code == 0, exit_code", "finish"))
        elif self.source.main is None:  # no main(): what the file runs as a script, as it is
            guard = next((n for n in self.source.nodes if n.kind == "guard"), None)
            self.emit_rest()
            if guard is not None:
                body = "\n".join(self.source.lines[guard.first:guard.end])  # below the `if __name__` line
                self.pending.append(Cell("code", textwrap.dedent(body).strip("\n"), "finish"))
        else:  # main() without steps: defined whole, then run, as before steps existed
            main = self.source.main
            self.require_for_run(main.mentions, last_line, "main()")
            self.emit_rest()
            self.pending.append(Cell("code", f"# @title main(), which runs the lesson\n{self.code_of([main.index])}",
                                     "main", hidden=True))
            self.pending.append(Cell("code", "exit_code = main()  # the script ends with sys.exit(main())\n"
                                     "print('exit code', exit_code)\nassert exit_code == 0, exit_code", "finish"))
        self.cells += self.pending
        self.pending = []


def page_body(lesson: Lesson, docs_dir: Path) -> tuple[str, int]:
    """The page without its front matter, and the page line its first line has."""
    page_text = read_text(docs_dir / lesson.page, LIMITS.source_file, docs_dir)
    body = re.sub(r"\A---\n.*?\n---\n", "", page_text, count=1, flags=re.S)
    return body, 1 + page_text.count("\n") - body.count("\n")


def main_file_rel(lesson: Lesson, site: directives.Site) -> str:
    return f"code/{lesson.main.relative_to(site.code_dir).as_posix()}"


def prelude(source: lesson_source.LessonSource, shown_at: dict[int, int]) -> list[int]:
    """The statements before the first definition (the imports) that the page does not show."""
    return [n.index for n in source.nodes if n.kind == "prelude" and n.index not in shown_at]


def shown_nodes(lines: list[str], first_line: int, lesson: Lesson, rel_main: str,
                source: lesson_source.LessonSource) -> dict[int, int]:
    """node index -> the page line of the first `::snippet` of the lesson file that shows it."""
    shown: dict[int, int] = {}
    fence = None
    for number, line in enumerate(lines, start=first_line):
        fence, inside = _fence(line, fence)
        if inside:
            continue
        match = directives.LINE.match(line)
        if not match or match.group("name") != "snippet":
            continue
        args = (match.group("args") or "").split()
        if len(args) == 2 and args[0] == rel_main:
            try:
                region = extract(lesson.main, args[1])
            except Exception:
                continue  # the walk reports it, at its line
            for i in source.nodes_in(region.start, region.end):
                shown.setdefault(i, number)
    return shown


def _fence(line: str, fence: str | None) -> tuple[str | None, bool]:
    """(the open fence after this line, whether this line is inside or opens/closes a fence)."""
    opened = directives.FENCE.match(line)
    if fence is not None:
        if opened and opened.group("fence")[0] == fence[0] and len(opened.group("fence")) >= len(fence) \
                and not line.strip()[len(opened.group("fence")):].strip():
            return None, True
        return fence, True
    if opened:
        return opened.group("fence"), True
    return None, False


def plan(lesson: Lesson, site: directives.Site, docs_dir: Path) -> list[Cell]:
    body, first_line = page_body(lesson, docs_dir)
    page = directives.Page(site, lesson.page, site.status(lesson.name), notebook=True)
    try:
        source = lesson_source.read(lesson, site.code_dir)
    except lesson_source.SourceError as exc:
        raise ValueError(str(exc)) from None
    rel_main = main_file_rel(lesson, site)
    lines = body.split("\n")
    title_at = next((i for i, ln in enumerate(lines) if ln.strip()), None)
    title = None
    if title_at is not None and lines[title_at].startswith("# "):
        title = lines[title_at]
        lines[title_at] = ""
    st = site.status(lesson.name)
    gpu = [r for r in gpu_first(st) if r.mode == "gpu"] if st else []
    shown_at = shown_nodes(lines, first_line, lesson, rel_main, source)
    planner = Planner(lesson, site, page, source, shown_at, gpu[0] if gpu else None)
    planner.cells += title_cells(lesson, site, title, planner.record, source, prelude(source, shown_at))
    prose: list[str] = []
    prose_first = first_line
    fence = None
    blocks: list[tuple[int, str | None]] = []  # open admonitions: indent, title when folded
    for number, line in enumerate(lines, start=first_line):
        fence, inside = _fence(line, fence)
        indent = len(line) - len(line.lstrip(" "))
        if not inside and line.strip() and indent == 0 and planner.pending:
            planner.prose(prose, prose_first)
            prose, prose_first = [], number
        if inside:
            prose.append(line)
            continue
        if line.strip():
            while blocks and indent <= blocks[-1][0]:
                blocks.pop()
        marker = ADMONITION.match(line)
        if marker:
            folded = marker.group("marker").startswith("???")
            blocks.append((indent, (marker.group("title") or "Solution") if folded else None))
        match = directives.LINE.match(line)
        name = match.group("name") if match else ""
        args = (match.group("args") or "").split() if match else []
        folded_title = next((t for _, t in reversed(blocks) if t is not None), None)
        kept = None
        if name == "snippet" and len(args) == 2 and args[0] == rel_main:
            try:
                kept = planner.snippet(args[0], args[1], number, folded_title)
            except directives.PageError:
                raise
            except Exception as exc:
                raise directives.PageError(number, exc) from None
        elif name == "step" and args:  # `::step NAME` or `::step NAME folded`: the notebook runs the step either way
            planner.step(args[0], number)
            kept = ""
        if kept is None:
            prose.append(line)
            continue
        prose.append(match.group("indent") + kept if kept else "")
        if indent == 0 and planner.pending:
            planner.prose(prose, prose_first)
            prose, prose_first = [], number + 1
    planner.prose(prose, prose_first)
    planner.finish(first_line + max((i for i, ln in enumerate(lines) if ln.strip()), default=0))
    planner.cells += recorded_run_cells(lesson, site, planner.record)
    return planner.cells


def title_cells(lesson: Lesson, site: directives.Site, title: str | None, record: Record | None,
                source: lesson_source.LessonSource, prelude_nodes: list[int]) -> list[Cell]:
    heading = page_markdown(title, plain=True) if title else PlainMd("# {}").format(lesson.title)
    if record is None:
        recorded = PlainMd("No GPU run has been recorded for this lesson yet.")
    elif record.outcome == "by-design":
        recorded = PlainMd("The recorded GPU run ({}, {}) stopped by design: {}.").format(
            record.env.device_name, record.date, record.reason)
    elif record.steps:
        recorded = PlainMd("Under each cell that runs a step of the lesson is what the recorded GPU run printed there "
                           "({}, {}); running the cell replaces it.").format(record.env.device_name, record.date)
    else:
        recorded = PlainMd("The recorded GPU run ({}, {}) was made before the kit kept its output step by step: its "
                           "whole output is at the end.").format(record.env.device_name, record.date)
    blank = PlainMd("")
    intro = [heading, blank, PlainMd("*{}*").format(lesson.summary) if lesson.summary else blank, blank,
             colab_line(lesson), blank,
             PlainMd("This notebook is the lesson's page, runnable: each section's prose is followed by the code it "
                     "discusses, and the lesson code the page does not show sits in collapsed cells, placed before it "
                     "is needed. {} Run the cells in order, top to bottom.").format(recorded)]
    colab = siteconfig.colab_url(site.repo_url, site.branch, lesson)
    if colab:
        intro += [blank, PlainMd("[Open in Colab]({})").format(url(colab, plain=True))]
    files = sources.lesson_files(lesson, site.code_dir)
    files.pop(lesson.main.name)
    imports = "\n".join(ln for ln in source.owned_text(prelude_nodes).split("\n")
                        if not (START.match(ln) or END.match(ln)))
    imports = imports.replace(IMPORT_LINE, NOTEBOOK_IMPORT)
    if NOTEBOOK_IMPORT not in imports:
        raise ValueError(f"{lesson.main.name}: the kit is not imported with the line {IMPORT_LINE!r}")
    return [Cell("markdown", re.sub(r"\n{3,}", "\n\n", PlainMd("\n").join(intro)), "title"),
            Cell("code", setup_code(lesson), "setup"),
            Cell("code", kit_code(files), "kit", hidden=True),
            Cell("code", f"# @title Imports (collapsed)\n{imports.strip()}", "imports", hidden=True)]


def recorded_run_cells(lesson: Lesson, site: directives.Site, record: Record | None) -> list[Cell]:
    """The recorded GPU run's whole output, folded, at the end."""
    if record is None:
        return []
    st = site.status(lesson.name)
    env = record.env
    older = PlainMd("") if st.is_current(record) else PlainMd(" (⚠ for an older version of the source)")
    body = PlainMd("## The recorded GPU run{}\n\n{}, {}, Triton {}, torch {}, {}, {}.\n\n"
                   "<details><summary>Its whole output</summary>\n\n{}\n\n</details>").format(
        older, env.device_name, record.started_utc.replace("T", " "), env.triton, env.torch, seconds(record.wall_s),
        record.outcome, plain_code_block(clean_output(record.stdout) or "(nothing)"))
    return [Cell("markdown", body, "recorded-run")]


def build(lesson: Lesson, site: directives.Site, docs_dir: Path):
    """The notebook (nbformat's NotebookNode)."""
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

    cells = []
    for cell in plan(lesson, site, docs_dir):
        if cell.kind == "markdown":
            made = new_markdown_cell(cell.source)
            if cell.attachments:
                made["attachments"] = {n: {"image/png": base64.b64encode(d).decode()}
                                       for n, d in cell.attachments.items()}
        else:
            made = new_code_cell(cell.source, outputs=cell.outputs)
            if cell.hidden:
                made.metadata.update(HIDDEN)
        made["id"] = cell.id  # fixed ids: the same lesson makes the same notebook
        cells.append(made)
    nb = new_notebook(cells=cells, metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "language_info": {"name": "python"},
        "accelerator": "GPU",
        "colab": {"provenance": [], "toc_visible": True},
    })
    nb.metadata["title"] = lesson.title
    return nb
