"""A lesson as a Jupyter notebook: the page, runnable, in every renderer (Colab, JupyterLab, GitHub, nbconvert).

One job: from the lesson's page, its source and its evidence, the notebook that "Open in Colab" opens.
The first screen in every renderer is the lesson's: its title, its opening, its first code.

    title           the page's title and summary, its opening, then its ::status line and its
                    ::requirements (folded), then how to run it: which of Colab's GPUs run it, what runs
                    without one, where the recorded output is
    setup, imports  Triton present? a GPU that can run the lesson, or what runs on the CPU, said in words
                    taken from main()'s steps (a step that needs a GPU says why); then the lesson file's
                    imports, collapsed (Colab's form view, JupyterLab's hidden input)
    the page        section by section: the prose, then the code it discusses. A `::snippet` of the
                    lesson file becomes the code cell that defines what the region shows, where the page
                    shows it; a `::snippet` of one of the lesson's own modules (its Gluon kernels, say)
                    becomes a `%%module NAME` cell, which runs inside that module, so the lesson's later
                    cells use the kernel as the reader edits it. A `::step NAME` becomes the cell that
                    runs that step of main() (joined to the code cell right above it when the page puts
                    nothing between them), and under it, folded, what the recorded GPU run printed there
                    ("Recorded on NVIDIA H200, <date>"): a Markdown cell, which running the step leaves
                    alone. Lesson code the page does not show goes into collapsed cells just before the
                    first cell that needs it; main()'s start (the Lesson, its device) and the kit too.
    finish          main()'s end (`exit_code = lesson.finish()`); then the recorded GPU run's whole output,
                    folded

The kit is not pasted. One collapsed cell, placed where the notebook first needs the kit (with the
setup when the lesson's first code does), holds lessonkit.py, lesson.toml, the files of the lessons it
`uses`, its own modules and lessonkit_notebook.py (the notebook's side of the kit: `%%module`, and the
kit's stop without a traceback) as one line, zlib-compressed and base85-encoded, with each file's SHA-256
on a line of its own (the repository's file has the same); it writes them beside the notebook, checked,
then runs the lesson file's own lines that import the kit. One line, because no renderer wraps a code
line: Colab and JupyterLab collapse the cell, GitHub's viewer and nbconvert show a dozen short lines and
one that runs off to the right, never a wall. The notebook fetches nothing: the committed notebook
cannot name the commit it is committed in (CI's `downloads.py check` rebuilds it at its own commit), a
fetch by branch would need this copy whenever the branch has moved on, and the notebook must run offline
(CI runs every one); with no repo_url configured, as in this repository's mkdocs.yml, there is nothing to
fetch from at all. The SHA-256 lines are what a reader compares with `sha256sum code/lessonkit.py`.

Text from lesson.toml and the evidence reaches the notebook's own Markdown cells as door.PlainMd (shown as
the characters it is; inside a raw-HTML summary, door.html_text first), the directives' forms as door.Md.
No evidence reaches a code cell; the step names and reasons the setup prints (code/ text) are
door.clean_output text written as JSON string literals. No code appears twice in the cells and no
`# snippet:` marker reaches a cell. Material's admonitions become Markdown that Jupyter, JupyterLab, Colab
and GitHub render alike (a folded one, such as a solution, a `<details>` block). The notebook runs top to
bottom, through the same steps as `python <lesson>.py`; no code cell is longer than MAX_CODE_LINES. What
cannot be placed (a step the page does not place, places out of order, or places above the code it runs)
is an error naming the page's FILE:LINE. Cells are made with nbformat's own constructors.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import textwrap
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from verified_triton.core.lessons import Lesson
from verified_triton.core.limits import LIMITS
from verified_triton.core.numfmt import seconds
from verified_triton.core.safefs import read_bytes, read_text
from verified_triton.judge.evidence import Record
from verified_triton.site import directives, lesson_source, siteconfig, sources
from verified_triton.site import page as page_model
from verified_triton.site.directives.common import gpu_first
from verified_triton.site.door import (
    Md,
    PlainMd,
    clean_output,
    code,
    html_text,
    page_markdown,
    plain_code_block,
    url,
)
from verified_triton.site.requirements import COLAB_GPUS, INSTALL, version_tuple
from verified_triton.site.snippets import END, START, extract

IMPORT_LINE = "HERE = Path(__file__).resolve().parent"
NOTEBOOK_IMPORT = "HERE = Path.cwd()  # in a notebook: the lines above wrote lessonkit.py here"
HIDDEN = {"cellView": "form", "jupyter": {"source_hidden": True}}  # collapsed in Colab and JupyterLab
HARNESS = Path(__file__).with_name("lessonkit_notebook.py")  # the notebook's side of the kit
MAX_CODE_LINES = 300  # no code cell is longer: a longer run of code the page does not show is split


# -- the first cells --------------------------------------------------------------------

def gpu_steps(source: lesson_source.LessonSource | None) -> list[lesson_source.StepCode]:
    """main()'s steps that need a GPU (`if lesson.step(NAME, needs_gpu=REASON):`), in order."""
    steps = source.steps.steps if source is not None and source.steps is not None else []
    return [s for s in steps if s.needs_gpu]


def without_gpu(lesson: Lesson, source: lesson_source.LessonSource | None) -> str:
    """What runs without a GPU (or below the capability), from main()'s steps: plain text, one sentence."""
    interp = lesson.modes["interpreter"]
    if not interp.supported:
        return f"the lesson cannot run here, nor under the interpreter ({interp.reason})."
    need = gpu_steps(source)
    if not need:
        return "the kernels run on the CPU through Triton's interpreter; the checks run, nothing is timed."
    cpu = [s.name for s in source.steps.steps if not s.needs_gpu]
    reasons = "; ".join(dict.fromkeys(s.needs_gpu for s in need))
    gpu = lesson.requires.capability
    where = f"a GPU of compute capability {gpu} or newer" if gpu else "a GPU"
    ran = (f"the {_steps(cpu)} {'runs' if len(cpu) == 1 else 'run'} on the CPU (a Triton kernel through Triton's "
           "interpreter), " if cpu else "no step runs on the CPU; ")
    return f"{ran}the {_steps([s.name for s in need])} only on {where} ({reasons})."


def _steps(names: list[str]) -> str:
    return ("step " if len(names) == 1 else "steps ") + _either(names, "and")


def colab_line(lesson: Lesson, source: lesson_source.LessonSource | None = None) -> PlainMd:
    """Which of Colab's GPUs run the lesson's GPU half, from [requires] capability; what runs without one."""
    need = lesson.requires.capability
    every = ", ".join(f"{name} ({cc[0]}.{cc[1]})" for name, cc in COLAB_GPUS)
    able = [f"{name} ({cc[0]}.{cc[1]})" for name, cc in COLAB_GPUS if not need or cc >= version_tuple(need)]
    unable = [f"{name} ({cc[0]}.{cc[1]})" for name, cc in COLAB_GPUS if need and cc < version_tuple(need)]
    fallback = PlainMd("{}").format(without_gpu(lesson, source))
    if not need or len(able) == len(COLAB_GPUS):
        return PlainMd("**On Colab:** any of its GPUs runs it: {}. Without a GPU, {}").format(every, fallback)
    if able:
        return PlainMd("**On Colab:** choose {} (Runtime › Change runtime type): the lesson needs compute capability "
                       "{} or newer. On {}, or without a GPU, {}").format(_either(able), need, _either(unable),
                                                                         fallback)
    return PlainMd("**On Colab:** none of its GPUs, {}, has the compute capability {} this lesson needs; there, "
                   "{}").format(every, need, fallback)


def _either(names: list[str], word: str = "or") -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} {word} {names[-1]}"


def setup_code(lesson: Lesson, source: lesson_source.LessonSource | None = None) -> str:
    """Triton present, and what runs where, said in one sentence."""
    need = lesson.requires.capability
    need_tuple = tuple(version_tuple(need)) if need else (0, 0)
    why = f"compute capability {need}" if need else "a CUDA GPU"
    # The step names and reasons come from code/: clean text, written as Python literals, a line each.
    words = textwrap.wrap(clean_output(without_gpu(lesson, source)), 104, break_long_words=False,
                          break_on_hyphens=False)
    said = [f"          {json.dumps(chunk + (' ' if i < len(words) - 1 else ''), ensure_ascii=False)}"
            for i, chunk in enumerate(words)]  # a JSON string is a Python literal: one quote style throughout
    interp = lesson.modes["interpreter"]
    fallback = ['    os.environ["TRITON_INTERPRET"] = "1"'] if interp.supported else []
    return setup_cell("what runs where", need_tuple, "the lesson checks and times its kernels on this GPU.", [
        *fallback,
        f'    print(f"{{gpu}} is below the {why} this lesson needs:" if gpu else "No GPU here:",',
        *said[:-1], said[-1] + ")",
    ])


def setup_cell(what: str, need: tuple, on_gpu: str, otherwise: list[str]) -> str:
    """The first code cell (the notebook's and the tutorial's): Triton installed when missing; on a GPU of compute
    capability `need` or newer (and no TRITON_INTERPRET=1), `on_gpu` printed; else the code lines `otherwise`."""
    return "\n".join([
        f"# Setup: Triton, and {what}. Elsewhere than Colab: {INSTALL}",
        "import importlib.util, os, subprocess, sys",
        'if importlib.util.find_spec("triton") is None:',
        '    subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", "triton"])',
        "import torch",
        'gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else ""',
        f'if gpu and torch.cuda.get_device_capability() >= {need!r} '
        'and os.environ.get("TRITON_INTERPRET") != "1":',
        f'    print(f"{{gpu}}: {on_gpu}")',
        "else:",
        *otherwise,
    ])


def kit_files(lesson: Lesson, site: directives.Site) -> dict[str, bytes]:
    """What the kit cell writes beside the notebook: the archive's files but the main file (the cells are
    it), each as it is in the repository, and the notebook's side of the kit."""
    files = sources.lesson_files(lesson, site.code_dir)
    files.pop(lesson.main.name)
    files[HARNESS.name] = read_bytes(HARNESS, LIMITS.source_file, HARNESS.parent)
    for name in files:
        if name.startswith(("/", ".")) or ".." in name.split("/"):
            raise ValueError(f"{lesson.folder}: the kit cell cannot write {name!r} beside the notebook")
    return files


def kit_code(files: dict[str, bytes], steps: list[str]) -> str:
    """The kit cell's own lines: write the kit's files beside the notebook, each checked against its SHA-256.

    The files are one line: JSON {name: text}, compressed by zlib's deflate at level 9 (its output has
    not changed across zlib's releases, so `downloads.py check` agrees on any machine with a stock zlib)
    and base85-encoded (no quote and no backslash to escape).
    """
    texts = {name: files[name].decode("utf-8") for name in sorted(files)}
    packed = base64.b85encode(zlib.compress(json.dumps(texts, ensure_ascii=False).encode(), 9)).decode()
    sha = "".join(f"\n    {name!r}: {hashlib.sha256(files[name]).hexdigest()!r}," for name in sorted(files))
    return "\n".join([
        "# @title The lesson kit: lessonkit.py and lesson.toml, written beside the notebook (collapsed: run it)",
        "# The lesson's files but the one this notebook is, packed on one line (zlib, base85), each checked",
        "# against its SHA-256: the repository's file has the same.",
        "import base64, hashlib, json, pathlib, zlib",
        f"KIT_SHA256 = {{{sha}\n}}",
        f'KIT = "{packed}"',
        "for _name, _text in json.loads(zlib.decompress(base64.b85decode(KIT))).items():",
        "    if hashlib.sha256(_text.encode()).hexdigest() != KIT_SHA256.get(_name):",
        '        raise ValueError(f"{_name}: the copy in this notebook is damaged; download the notebook again")',
        "    pathlib.Path(_name).parent.mkdir(parents=True, exist_ok=True)",
        "    pathlib.Path(_name).write_bytes(_text.encode())",
        "import lessonkit_notebook  # %%module NAME, and the kit's stop without a traceback",
        f"lessonkit_notebook.install(get_ipython(), steps={steps!r})",
    ])


# -- the page, cell by cell ----------------------------------------------------------------

ATTRS = re.compile(r"\{\s*[.#:][^}]*\}")
EMOJI = re.compile(r":(?:material|octicons|fontawesome)-[a-z0-9-]+:\s?")


def for_jupyter(markdown: str) -> str:
    """Material's admonitions and tabs as Markdown every notebook viewer renders.

    A folded admonition (`???`, a solution) becomes a `<details>` block; an open one or a tab, its title
    in bold. Bodies lose the four spaces the block added, so a list item keeps its content and a fence
    inside stays a fence (not an indented block that would show its backticks).
    """
    try:
        rows = list(page_model.parse(markdown, front_matter=False).rows())
    except page_model.PageFormatError as exc:
        raise ValueError(f"the notebook's Markdown, line {exc.line}: {exc.message}") from None
    out: list[str] = []
    shown: list[page_model.Block] = []  # the blocks open at the line before
    for row in rows:
        line, within = row.text, row.part.within
        kept = 0
        while kept < min(len(shown), len(within)) and shown[kept] is within[kept]:
            kept += 1
        while len(shown) > kept:  # the blocks that ended before this line
            _close(out, shown.pop(), len(shown), trailing=True)
        cut = 4 * len(within)
        body_line = line[cut:] if line[:cut].strip() == "" else line.lstrip(" ")
        part = row.part
        if isinstance(part, page_model.Fence):
            out.append(body_line)
        elif isinstance(part, page_model.Block):
            at = " " * (len(body_line) - len(body_line.lstrip(" \t")))
            title = part.title
            if title is None and not part.tab:
                title = part.kind.replace("-", " ").capitalize()
            if part.folded:
                opening = "<details open>" if part.marker.endswith("+") else "<details>"
                out += [f"{at}{opening}<summary>{title}</summary>", ""]
            else:
                out += [f"{at}**{title}**" if title else "", ""]
            shown.append(part)
        else:
            out.append(EMOJI.sub("", ATTRS.sub("", body_line)))
    while shown:
        _close(out, shown.pop(), len(shown), trailing=False)
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip("\n")


def _close(out: list[str], block: page_model.Block, depth: int, trailing: bool) -> None:
    """The end of a fold: its </details>, at the indent its opening line had in the notebook."""
    if block.folded:
        indent = " " * max(0, page_model.columns(block.text) - 4 * depth)
        out += ["", f"{indent}</details>"] + ([""] if trailing else [])


@dataclass
class Cell:
    kind: str  # "markdown" or "code"
    source: str
    id: str
    hidden: bool = False
    attachments: dict[str, bytes] = field(default_factory=dict)


@dataclass
class Waiting:
    """A shown cell that needs, when it runs, code the page shows further down."""

    cell: Cell
    nodes: list[int]
    on: set[int]


@dataclass
class Module:
    """One of the lesson's own modules (attention_kernels.py beside the main file): its cells are `%%module NAME`."""

    name: str  # what the main file imports
    path: Path
    source: lesson_source.LessonSource
    placed: set[int] = field(default_factory=set)


@dataclass
class Head:
    """The notebook's first cells: the title's Markdown around the page's opening, then setup, kit, imports."""

    intro: PlainMd  # the title and the summary
    outro: PlainMd  # how to run it: Colab, what runs without a GPU, where the recorded output is
    cells: list[Cell]


class Planner:
    """Walks the page once, in order, and decides every cell."""

    def __init__(self, lesson: Lesson, site: directives.Site, page: directives.Page,
                 source: lesson_source.LessonSource, shown_at: dict[int, int], record: Record | None,
                 modules: dict[str, Module]):
        self.lesson, self.site, self.page, self.source = lesson, site, page, source
        self.shown_at, self.record, self.modules = shown_at, record, modules
        self.head: Head | None = None  # made into cells by the first prose: the title cell holds the opening
        self.cells: list[Cell] = []
        self.pending: list[Cell] = []  # code cells waiting for the end of the block that named them
        self.placed: set[int] = set()  # nodes in a cell, or in one waiting
        self.defined: set[int] = set()  # nodes in a cell already made
        self.waiting: list[Waiting] = []
        self.steps_placed: list[str] = []
        self.started = False
        self.joinable: Cell | None = None  # the region cell just made, which an adjacent ::step may join
        self.ids: dict[str, int] = {}
        imports, self.kit_nodes = split_prelude(source, shown_at)
        self.kit_cell: Cell | None = None  # made where first needed (kit_code): the lesson's kit import with it
        self.head_end: int | None = None  # where the head's cells end in self.cells
        self.code_placed = False  # a cell of lesson code made yet: else the kit cell joins the head
        for i in imports + [n.index for n in source.nodes if n.kind == "docstring"]:
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
        later: list[str] = []  # in the title cell, the status and the requirements come after the opening
        parts = list(directives.parse("\n".join(lines), first_line, front_matter=False).parts)
        if self.head is not None:
            for at, part in enumerate(parts):
                if isinstance(part, page_model.Command) and not part.indent and part.name in ("status", "requirements"):
                    later.append(for_jupyter(directives.expand_parts([part], self.page)))
                    parts[at] = page_model.Text(part.line, "", part.within)  # the other lines keep their numbers
        markdown = ""
        if any(line.strip() for part in parts for line in part.lines):
            markdown = for_jupyter(directives.expand_parts(parts, self.page))
        if self.head is not None:  # the page's opening: the title cell, then the cells every run needs first
            markdown = "\n\n".join(part for part in (str(self.head.intro), markdown, *later, str(self.head.outro))
                                   if part.strip())
        if markdown.strip():
            used = {n: d for n, d in self.page.attachments.items() if f"attachment:{n}" in markdown}
            self.cells.append(Cell("markdown", markdown, self.cell_id("prose" if self.head is None else "title"),
                                   attachments=used))
        if self.head is not None:
            self.cells += self.head.cells
            self.head_end = len(self.cells)
            self.head = None
        self.cells += self.pending
        self.pending = []

    # -- code the page shows

    def snippet(self, rel: str, region_name: str, line: int, folded_title: str | None) -> str:
        """Place the code cell of a region; returns what stays in the prose where the directive was."""
        if rel in self.modules:
            return self.module_snippet(self.modules[rel], region_name)
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
        self.joinable = None if cell.hidden else cell
        return Md("")

    def module_snippet(self, module: Module, region_name: str) -> Md:
        """A region of one of the lesson's modules: a `%%module NAME` cell, run inside that module.

        The module itself is imported from its file beside the notebook (the kit cell wrote it), as the
        script imports it; the cell redefines what the region shows, so what the reader edits is what runs.
        Code the page does not show stays in the file: nothing of it is pasted.
        """
        region = extract(module.path, region_name, self.site.code_dir)
        nodes = module.source.nodes_in(region.start, region.end)
        new = [i for i in nodes if i not in module.placed]
        span = Md("lines {}–{} of {}").format(region.start, region.end, code(module.path.name))
        if not new:
            return Md("*The code shown here on the page, {}, is part of the {} cell above that defines {}.*").format(
                span, code(module.path.name), Md(", ").join(code(module.source.nodes[i].name) for i in nodes))
        module.placed.update(new)
        self.emit_kit()  # %%module is the kit's: its cell comes first
        head = (f"%%module {module.name}\n# {module.path.name}, lines {region.start}-{region.end}, run inside "
                f"{module.name}: the lesson's cells below use what you edit here")
        self.pending.append(Cell("code", f"{head}\n{self.code_of(new, module.source)}",
                                 self.cell_id(f"module-{module.name}-{region_name}")))
        self.code_placed = True
        self.joinable = None
        return Md("")

    def code_of(self, indices: list[int], source: lesson_source.LessonSource | None = None) -> str:
        """The lines the nodes own, without marker lines."""
        text_ = (source or self.source).owned_text(indices)
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
        """Collapsed cells of code the page does not show, none longer than MAX_CODE_LINES (a longer run
        is split between definitions)."""
        indices = sorted(i for i in indices if i not in self.placed)
        if set(indices) & set(self.kit_nodes):  # the kit's import, with the kit cell that makes it work
            self.emit_kit()
            indices = [i for i in indices if i not in self.kit_nodes]
        if not indices:
            return
        self.placed.update(indices)
        group: list[int] = []
        for i in indices:
            if group and len(self.code_of(group + [i]).split("\n")) + 1 > MAX_CODE_LINES:
                self._emit_hidden_group(group, why)
                group = []
            group.append(i)
        self._emit_hidden_group(group, why)

    def _emit_hidden_group(self, indices: list[int], why: str) -> None:
        names = ", ".join(self.source.nodes[i].name for i in indices)
        source = f"# @title Not shown on the page, {why}: {names}\n{self.code_of(indices)}"
        self.emit(Cell("code", source, self.cell_id("hidden"), hidden=True), indices)
        self.joinable = None

    def emit_kit(self) -> None:
        """The kit cell, where the notebook first needs the kit: it writes the kit's files beside the notebook,
        then runs the lesson file's own lines that import it (and what of its imports needs them)."""
        if self.kit_cell is not None:
            return
        steps = [s.name for s in self.source.steps.steps] if self.source.steps is not None else []
        imports = prelude_text(self.source, self.kit_nodes).replace(IMPORT_LINE, NOTEBOOK_IMPORT)
        self.kit_cell = Cell("code", f"{kit_code(kit_files(self.lesson, self.site), steps)}\n\n{imports}", "kit",
                             hidden=True)
        self.placed.update(self.kit_nodes)
        if not self.code_placed and self.head_end is not None:  # the lesson's first code needs it: the head's
            self.cells.insert(self.head_end, self.kit_cell)
            self.defined.update(self.kit_nodes)
        else:
            self.emit(self.kit_cell, self.kit_nodes)
        self.joinable = None

    def emit(self, cell: Cell, indices: list[int]) -> None:
        self.code_placed = True
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
        joinable, self.joinable = self.joinable, None
        made = len(self.cells) + len(self.pending)
        self.require_for_run(mentions, line, f"'::step {name}'")
        if not self.started:
            self.started = True
            self.pending.append(Cell("code", f"# @title main() begins: the Lesson, and where it runs (collapsed)\n"
                                             f"{steps.start}", "start", hidden=True))
        self.steps_placed.append(name)
        last = (self.pending or self.cells)[-1] if self.pending or self.cells else None
        if joinable is not None and last is joinable and len(self.cells) + len(self.pending) == made:
            # The page shows the code and runs it, nothing between: one cell defines and runs it.
            joinable.source = f"{joinable.source}\n\n\n{step.code}"
            joinable.id = self.cell_id(f"step-{name}")
        else:
            self.pending.append(Cell("code", step.code, self.cell_id(f"step-{name}")))
        recorded = self.recorded(name)
        if recorded is not None:
            self.pending.append(recorded)

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

    def recorded(self, name: str) -> Cell | None:
        """What the recorded GPU run printed in this step: a folded Markdown cell under the step's cell, which
        running the step does not replace ("Recorded on NVIDIA H200, 2026-12-01")."""
        record = self.record
        if record is None or record.outcome == "by-design" or not record.steps:
            return None
        env = record.env
        found = next((s for s in record.steps if s.name == name), None)
        if found is None:
            body = PlainMd("The recorded run stopped before this step ({}: {}).").format(
                record.outcome, record.reason or "see its whole output at the end")
        elif found.not_run:
            body = PlainMd("Not run there: {}.").format(found.not_run)
        else:
            body = plain_code_block(clean_output(found.stdout) or "(the step printed nothing)")
        # The summary is raw HTML, where Markdown reads nothing: its fields are HTML-escaped first.
        summary = PlainMd("<details><summary>Recorded on {}, {}{}</summary>").format(
            html_text(env.device_name), html_text(record.date),
            PlainMd("") if self.current else PlainMd(" (an older version of this lesson's source)"))
        versions = PlainMd("Triton {}, torch {}, Python {}{}{}.").format(
            env.triton, env.torch, env.python, PlainMd(", CUDA {}").format(env.cuda) if env.cuda else PlainMd(""),
            PlainMd(", compute capability {}").format(env.capability) if env.capability else PlainMd(""))
        source = PlainMd("\n\n").join([summary, versions, body, PlainMd("</details>")])
        return Cell("markdown", str(source), self.cell_id(f"recorded-{name}"))

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
        self.emit_kit()  # a lesson that never needed it before its end
        steps = self.source.steps
        if steps is not None:
            missing = [s for s in steps.steps if s.name not in self.steps_placed]
            if missing:
                s = missing[0]
                raise self.error(last_line, f"step '{s.name}' of main() ({self.source.where(s.line)}) is not placed "
                                            f"on the page: add '::step {s.name}' under the section that shows its code")
            self.require_for_run(steps.end_mentions, last_line, "the end of main()")
            self.emit_rest()
            self.pending.append(Cell("code", steps.end, "finish"))
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
            self.pending.append(Cell("code", "exit_code = main()  # the script ends with sys.exit(main())",
                                     "finish"))
        self.cells += self.pending
        self.pending = []


def read_page(lesson: Lesson, docs_dir: Path) -> page_model.PageModel:
    """The lesson's page, as the page model reads it."""
    return directives.parse(read_text(docs_dir / lesson.page, LIMITS.source_file, docs_dir))


def main_file_rel(lesson: Lesson, site: directives.Site) -> str:
    return f"code/{lesson.main.relative_to(site.code_dir).as_posix()}"


def prelude(source: lesson_source.LessonSource, shown_at: dict[int, int]) -> list[int]:
    """The statements before the first definition (the imports) that the page does not show."""
    return [n.index for n in source.nodes if n.kind == "prelude" and n.index not in shown_at]


def prelude_text(source: lesson_source.LessonSource, indices: list[int]) -> str:
    """Prelude statements as a cell, no marker lines: runs of them next to each other in the file as the file
    has them; where the notebook took a statement out from between two imports, they stay one under the other."""
    runs: list[list] = []  # [first node, last node, lines]
    for i in sorted(indices):
        node = source.nodes[i]
        lines = source.lines[node.owns_from - 1:node.end]
        if runs and node.owns_from == runs[-1][1].end + 1:
            runs[-1][1] = node
            runs[-1][2] += lines
        else:
            runs.append([node, node, list(lines)])
    out, previous = [], None
    for first, last, lines in runs:
        if previous is not None:
            out.append("\n" if {previous.name, first.name} <= {"Import", "ImportFrom"} else "\n\n")
        out.append("\n".join(ln for ln in lines if not (START.match(ln) or END.match(ln))).strip("\n"))
        previous = last
    return "".join(out)


def split_prelude(source: lesson_source.LessonSource, shown_at: dict[int, int]) -> tuple[list[int], list[int]]:
    """(the imports cell's statements, the kit import's): the prelude without, and with, the kit.

    The kit import is the lesson file's `HERE = Path(__file__)...` line through its `from lessonkit import`,
    every later prelude statement that needs a name they bind, and every import only they use (`sys` and
    `Path`, often); it runs in the kit cell, which the notebook places where it first needs the kit, so
    the lesson's first code comes before it.
    """
    nodes = prelude(source, shown_at)
    here = next((i for i in nodes if source.lines[source.nodes[i].first - 1].strip() == IMPORT_LINE), None)
    kit = next((i for i in nodes if source.nodes[i].kind == "prelude"
                and re.match(r"\s*from\s+lessonkit\s+import\b", source.lines[source.nodes[i].first - 1])), None)
    if here is None or kit is None or kit < here:
        raise ValueError(f"{source.path}: the kit is imported with the line {IMPORT_LINE!r}, then "
                         "`from lessonkit import ...`")
    group = [i for i in nodes if here <= i <= kit]
    bound = {name for i in group for name in source.nodes[i].binds}
    for i in (i for i in nodes if i > kit):  # later statements that use what the kit lines bound
        if source.nodes[i].mentions & bound:
            group.append(i)
            bound |= source.nodes[i].binds
    used = {name for i in group for name in source.nodes[i].mentions}
    runs = [n for n in source.nodes if n.kind in ("prelude", "code", "main") and n.index not in group]
    for i in (i for i in nodes if i < here):  # an import only the kit lines use goes with them
        names = source.nodes[i].binds
        if names and names <= used and not any(n.mentions & names for n in runs if n.index != i):
            group.append(i)
    return [i for i in nodes if i not in group], sorted(group)


def lesson_modules(lesson: Lesson, site: directives.Site) -> dict[str, Module]:
    """code/<lesson>/<name>.py -> Module, for every module of the lesson's own folder the main file imports
    (not the kit, not another lesson's file it `uses`): the page's regions of them become `%%module` cells."""
    modules = {}
    for path in lesson.source_files():
        if path.suffix != ".py" or path == lesson.main or path.parent != lesson.folder or not path.stem.isidentifier():
            continue
        rel = f"code/{path.relative_to(site.code_dir).as_posix()}"
        try:
            text = read_text(path, LIMITS.source_file, site.code_dir)
            parsed = lesson_source.parse(text, rel)
        except (lesson_source.SourceError, OSError) as exc:
            raise ValueError(str(exc)) from None
        modules[rel] = Module(path.stem, path, parsed)
    return modules


def shown_nodes(rows: list[page_model.Row], lesson: Lesson, rel_main: str,
                source: lesson_source.LessonSource) -> dict[int, int]:
    """node index -> the page line of the first `::snippet` of the lesson file that shows it."""
    shown: dict[int, int] = {}
    for row in rows:
        command = row.part if isinstance(row.part, page_model.Command) and row.opens else None
        if command is None or command.name != "snippet":
            continue
        args = command.args.split()
        if len(args) == 2 and args[0] == rel_main:
            try:
                region = extract(lesson.main, args[1])
            except Exception:
                continue  # the walk reports it, at its line
            for i in source.nodes_in(region.start, region.end):
                shown.setdefault(i, row.number)
    return shown


HEADING = re.compile(r"^#{1,6}\s")


def plan(lesson: Lesson, site: directives.Site, docs_dir: Path) -> list[Cell]:
    model = read_page(lesson, docs_dir)
    first_line = model.first_line
    page = directives.Page(site, lesson.page, site.status(lesson.name), notebook=True)
    try:
        source = lesson_source.read(lesson, site.code_dir)
    except lesson_source.SourceError as exc:
        raise ValueError(str(exc)) from None
    rel_main = main_file_rel(lesson, site)
    rows = list(model.rows())
    title_at = next((i for i, row in enumerate(rows) if row.text.strip()), None)
    title = None
    if title_at is not None and rows[title_at].text.startswith("# "):
        title = rows[title_at].text
        rows[title_at] = page_model.Row(rows[title_at].number, "", rows[title_at].part)
    st = site.status(lesson.name)
    gpu = [r for r in gpu_first(st) if r.mode == "gpu"] if st else []
    shown_at = shown_nodes(rows, lesson, rel_main, source)
    planner = Planner(lesson, site, page, source, shown_at, gpu[0] if gpu else None, lesson_modules(lesson, site))
    planner.head = head(lesson, site, title, planner.record, source, split_prelude(source, shown_at)[0])
    prose: list[str] = []
    prose_first = first_line
    for row in rows:
        number, line = row.number, row.text
        inside = isinstance(row.part, page_model.Fence)
        indent = len(line) - len(line.lstrip(" "))
        if not inside and line.strip() and indent == 0 and (planner.pending or
                                                             planner.head is not None and HEADING.match(line)):
            planner.prose(prose, prose_first)  # the opening ends at the first heading: the setup comes first
            prose, prose_first = [], number
        if inside:
            prose.append(line)
            planner.joinable = None
            continue
        command = row.part if isinstance(row.part, page_model.Command) and row.opens else None
        name = command.name if command else ""
        args = command.args.split() if command else []
        folded_title = next(((b.title or "Solution") for b in reversed(row.part.within) if b.folded), None)
        kept = None
        if name == "snippet" and len(args) == 2 and (args[0] == rel_main or args[0] in planner.modules):
            try:
                kept = planner.snippet(args[0], args[1], number, folded_title)
            except directives.PageError:
                raise
            except Exception as exc:
                raise directives.PageError(number, exc) from None
        elif name == "step" and args:  # `::step NAME` or `::step NAME folded`: the notebook runs the step either way
            if indent:  # a step inside a block (a list item, an admonition) joins no code cell
                planner.joinable = None
            planner.step(args[0], number)
            kept = ""
        elif line.strip():
            planner.joinable = None  # prose between the code and its step: two cells
        if kept is None:
            prose.append(line)
            continue
        prose.append(command.indent + kept if kept else "")
        if indent == 0 and planner.pending:
            planner.prose(prose, prose_first)
            prose, prose_first = [], number + 1
    planner.prose(prose, prose_first)
    planner.finish(max((row.number for row in rows if row.text.strip()), default=first_line))
    planner.cells += recorded_run_cells(lesson, site, planner.record)
    return planner.cells


def head(lesson: Lesson, site: directives.Site, title: str | None, record: Record | None,
         source: lesson_source.LessonSource, prelude_nodes: list[int]) -> Head:
    """The title cell's own words (around the page's opening), and the setup, kit and imports cells."""
    heading = page_markdown(title, plain=True) if title else PlainMd("# {}").format(lesson.title)
    blank = PlainMd("")
    intro = [heading, blank, PlainMd("*{}*").format(lesson.summary) if lesson.summary else blank]
    if record is None:
        recorded = PlainMd("no GPU run has been recorded for this lesson yet.")
    elif record.outcome == "by-design":
        recorded = PlainMd("the recorded GPU run ({}, {}) stopped by design: {}.").format(
            record.env.device_name, record.date, record.reason)
    elif record.steps:
        recorded = PlainMd("under each step, folded, is what the recorded GPU run printed there ({}, {}).").format(
            record.env.device_name, record.date)
    else:
        recorded = PlainMd("the recorded GPU run ({}, {}) was made before the kit kept its output step by step: its "
                           "whole output is at the end.").format(record.env.device_name, record.date)
    # One paragraph: the first screen is the lesson's (its title, its opening, its first code).
    outro = [PlainMd("{} Run the cells in order; {}").format(colab_line(lesson, source), recorded)]
    colab = siteconfig.colab_url(site.repo_url, site.branch, lesson)
    if colab:
        outro += [blank, PlainMd("[Open in Colab]({})").format(url(colab, plain=True))]
    imports = prelude_text(source, prelude_nodes)
    cells = [Cell("code", setup_code(lesson, source), "setup")]
    if imports.strip():
        cells.append(Cell("code", f"# @title Imports (collapsed)\n{imports.strip()}", "imports", hidden=True))
    return Head(PlainMd("\n").join(intro), PlainMd("\n").join(outro), cells)


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


def build(lesson: Lesson, site: directives.Site, docs_dir: Path, plan=None):
    """The notebook (nbformat's NotebookNode); `plan` decides its cells (default: this module's, the page run
    step by step; a converted lesson's tutorial: site/tutorial.py)."""
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

    cells = []
    for cell in (plan or globals()["plan"])(lesson, site, docs_dir):
        if cell.kind == "markdown":
            made = new_markdown_cell(cell.source)
            if cell.attachments:
                made["attachments"] = {n: {"image/png": base64.b64encode(d).decode()}
                                       for n, d in cell.attachments.items()}
        else:
            made = new_code_cell(cell.source)
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
