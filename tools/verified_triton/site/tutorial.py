"""A converted lesson's notebook is its tutorial: the page's prose, the kernels' code, the plain checks, the exercises.

One job: from the page, the kernels module (code/<lesson>/<name_snake>.py), exercises.py, solutions.py and the
evidence, the notebook that "Open in Colab" opens for a lesson that has a kernels module beside its lesson.py
(core/lessons.py: kernels_module). Read top to bottom it is the lesson as Triton's tutorials are written:

    title       the page's title, summary and opening, its status line; how to run it
    setup       Triton present? a GPU, or the interpreter (said in one sentence); the kernels module's imports
    the page    section by section: the prose (its figures and results as the page shows them), then the code
                it discusses: a `::snippet` of the kernels module becomes the code cell that defines it, where
                the page shows it; code of the kernels module the page does not show goes, collapsed, just
                before the first cell that needs it. Snippets of other files (lesson.py's benchmark, a model)
                are shown as code in the prose, not run: the notebook runs the kernels, not the record.
    self-check  the kernels module's own check (its `if __name__ == "__main__":` body), after what it calls
    practice    at the first `::exercise`: practice.py and the modules the exercises import, written beside the
                notebook in readable %%writefile cells (split to stay short), then each exercise: its hint,
                a starter cell (region NAME of exercises.py), a check cell (region check-NAME, then
                `practice.report(NAME)`) and its solution folded (region NAME of solutions.py)
    the record  the last cell: where the lesson's record is, and how to run lesson.py, the verified run, from
                the lesson's zip

The verified run is not in the notebook: no kit, no blob, no `::step` output. What the page shows only as the
record's (`::step`, `::checks`, `::output`, `::releases`, `::memory-check`) is left out, with a section or
folded block it leaves empty. Limits the tests hold: no code line over MAX_LINE characters, no cell over
MAX_CELL lines, the first kernel within the first quarter of the code.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

from verified_triton.core.lessons import Lesson, kernels_module, kernels_module_imports
from verified_triton.core.limits import LIMITS
from verified_triton.core.safefs import read_text
from verified_triton.site import directives, lesson_source
from verified_triton.site import page as page_model
from verified_triton.site.directives.exercise import STARTERS, find_posed, proof_line, verdict
from verified_triton.site.door import PlainMd, html_text, page_markdown, plain_code, plain_code_block
from verified_triton.site.notebook import Cell, for_jupyter, prelude_text, read_page, setup_cell
from verified_triton.site.snippets import END, START, extract

MAX_CELL = 150  # lines of one cell
MAX_LINE = 1000  # characters of one code line
RECORD_ONLY = frozenset({"step", "checks", "output", "releases", "memory-check"})  # the record's, not the tutorial's
HEADING = re.compile(r"^(#{1,6})\s")


def _rows(lines: list[str], first_line: int = 1) -> list[page_model.Row]:
    """The page model's rows of these page lines (one a line), which directives take a body known."""
    return list(directives.parse("\n".join(lines), first_line, front_matter=False).rows())


def _command(row: page_model.Row) -> page_model.Command | None:
    """The directive a row's line is (not a line of its body), or None."""
    return row.part if isinstance(row.part, page_model.Command) and row.opens else None

def applies(lesson: Lesson) -> bool:
    """Whether the lesson's notebook is a tutorial (it has a kernels module beside lesson.py)."""
    return kernels_module(lesson) is not None


class Source:
    """One Python file whose top-level statements the notebook places as cells, each once, each after what it
    needs when it runs (lesson_source's nodes, read the same way as the old notebooks read a lesson file)."""

    def __init__(self, path: Path, code_dir: Path):
        self.path = path
        rel = f"code/{path.relative_to(code_dir).as_posix()}"
        self.src = lesson_source.parse(read_text(path, LIMITS.source_file, code_dir), rel)
        self.placed: set[int] = set()

    def region_nodes(self, name: str, code_dir: Path) -> list[int]:
        region = extract(self.path, name, code_dir)
        return self.src.nodes_in(region.start, region.end)

    def code_of(self, indices) -> str:
        text = self.src.owned_text(sorted(indices))
        lines = [ln for ln in text.split("\n") if not (START.match(ln) or END.match(ln))]
        return re.sub(r"\n{3,}", "\n\n\n", "\n".join(lines)).strip("\n")

    def needed(self, indices, skip=frozenset()) -> list[int]:
        """The unplaced code nodes that `indices` need when they run (or are called), transitively."""
        names = frozenset().union(*(self.src.nodes[i].mentions for i in indices)) if indices else frozenset()
        return sorted(i for i in self.src.closure(names) if i not in self.placed and i not in indices
                      and self.src.nodes[i].kind == "code" and i not in skip)

    def kind(self, kind: str) -> list[int]:
        return [n.index for n in self.src.nodes if n.kind == kind]


class Tutorial:
    def __init__(self, lesson: Lesson, site: directives.Site, docs_dir: Path):
        self.lesson, self.site, self.docs_dir = lesson, site, docs_dir
        self.code_dir = site.code_dir
        self.page = directives.Page(site, lesson.page, site.status(lesson.name), notebook=True)
        self.kernels = Source(kernels_module(lesson), self.code_dir)
        self.rel_kernels = f"code/{lesson.name}/{self.kernels.path.name}"
        self.exercises = Source(lesson.folder / STARTERS, self.code_dir) if (lesson.folder / STARTERS).is_file() \
            else None
        self.cells: list[Cell] = []
        self.ids: dict[str, int] = {}
        self.practice_ready = False
        self.checked = False  # the kernels module's self-check placed
        self.written: set[Path] = set()  # the local modules written beside the notebook so far

    # -- cells

    def cell_id(self, base: str) -> str:
        n = self.ids.get(base, 0)
        self.ids[base] = n + 1
        return base if n == 0 else f"{base}-{n + 1}"

    def code(self, source: str, base: str, hidden: bool = False) -> None:
        """A code cell, split between statements where it would pass MAX_CELL lines."""
        for chunk in _chunks(source, MAX_CELL):
            self.cells.append(Cell("code", chunk, self.cell_id(base), hidden=hidden))

    def markdown(self, markdown: str, base: str = "prose", join: bool = True) -> None:
        """A Markdown cell; joined to the one before when nothing comes between (prose and code alternate)."""
        if not markdown.strip():
            return
        used = {n: d for n, d in self.page.attachments.items() if f"attachment:{n}" in markdown}
        last = self.cells[-1] if self.cells else None
        if join and last is not None and last.kind == "markdown" and last.id.startswith("prose"):
            last.source = f"{last.source}\n\n{markdown}"
            last.attachments.update(used)
            return
        self.cells.append(Cell("markdown", markdown, self.cell_id(base), attachments=used))

    def place(self, source: Source, indices: list[int], base: str, why: str = "needed by the next cell") -> None:
        """Cells for `indices` of `source`: first, collapsed, what they need that no cell placed yet."""
        new = [i for i in indices if i not in source.placed]
        if not new:
            return
        before = source.needed(new)
        if before:
            source.placed.update(before)
            names = ", ".join(source.src.nodes[i].name for i in before)
            self.code(f"# @title Not shown on the page, {why}: {names}\n{source.code_of(before)}", "hidden",
                      hidden=True)
        source.placed.update(new)
        self.code(source.code_of(new), base)
        if source is self.kernels and not self.checked and self.guard_ready():
            self.self_check()

    # -- the page

    def prose(self, lines: list[str], first_line: int) -> None:
        chunk = "\n".join(self.shown(row) for row in _rows(_without_record_only(lines)))
        if chunk.strip():
            self.markdown(for_jupyter(directives.expand_page(chunk, self.page, first_line)))

    def shown(self, row: page_model.Row) -> str:
        """`::snippet FILE REGION` of another file than the kernels module (lesson.py's benchmark, a model): its
        code in the prose as a fenced block, titled with its lines, not run (the notebook runs the kernels)."""
        command = _command(row)
        args = command.args.split() if command else []
        if not command or command.name != "snippet" or len(args) != 2 or args[0] == self.rel_kernels:
            return row.text
        path = self.code_dir / args[0].removeprefix("code/")
        region = extract(path, args[1], self.code_dir)
        why = "the verified run" if path.name == "lesson.py" else "a module the lesson uses"
        head = f"# {path.name}, lines {region.start}-{region.end} (shown, not run here: {why})"
        block = str(plain_code_block(f"{head}\n{region.text.rstrip()}", "python"))
        return "\n".join(command.indent + ln if ln else ln for ln in block.split("\n"))

    def split_long_prose(self) -> None:
        """Markdown cells over MAX_CELL lines, split between paragraphs (outside fences and folded blocks)."""
        out = []
        for cell in self.cells:
            if cell.kind != "markdown" or len(cell.source.split("\n")) <= MAX_CELL:
                out.append(cell)
                continue
            for i, part in enumerate(_paragraph_chunks(cell.source, MAX_CELL)):
                used = {n: d for n, d in cell.attachments.items() if f"attachment:{n}" in part}
                out.append(Cell("markdown", part, cell.id if i == 0 else self.cell_id(f"{cell.id}-more"),
                                attachments=used))
        self.cells = out

    def plan(self) -> list[Cell]:
        model = read_page(self.lesson, self.docs_dir)
        lines, first_line = model.body.split("\n"), model.first_line
        title_at = next((i for i, ln in enumerate(lines) if ln.strip()), 0)
        title = lines[title_at] if lines[title_at].startswith("# ") else f"# {self.lesson.title}"
        opening_end = next((i for i, ln in enumerate(lines) if i > title_at and HEADING.match(ln)), len(lines))
        self.head(title, lines[title_at + 1:opening_end], first_line + title_at + 1)
        self.walk(lines, opening_end, first_line)
        self.self_check()
        self.markdown(str(self.record_cell()), "run-the-record", join=False)
        self.split_long_prose()
        return self.cells

    def head(self, title: str, opening: list[str], first_line: int) -> None:
        intro = [page_markdown(title, plain=True), PlainMd(""),
                 PlainMd("*{}*").format(self.lesson.summary) if self.lesson.summary else PlainMd("")]
        lines = _without_record_only(opening)
        later = [i for i, row in enumerate(_rows(lines)) if (c := _command(row)) and not c.indent
                 and c.name in ("status", "requirements")]  # after the opening, as in the older notebooks
        expanded = for_jupyter(directives.expand_page("\n".join("" if i in later else ln
                                                                for i, ln in enumerate(lines)), self.page, first_line))
        status = [for_jupyter(directives.expand_page(lines[i], self.page, first_line + i)) for i in later]
        how = PlainMd("**Run the cells in order.** {}").format(self.where_it_runs())
        parts = ("\n".join(str(x) for x in intro), expanded, *status, str(how))
        self.markdown("\n\n".join(p for p in parts if p.strip()), "title")
        self.code(self.setup(), "setup")
        imports = [i for i in self.kernels.kind("prelude")]
        self.kernels.placed.update(imports + self.kernels.kind("docstring"))
        if imports:
            self.code(f"# The kernels module's imports ({self.kernels.path.name})\n"
                      f"{prelude_text(self.kernels.src, imports)}", "imports")

    def where_it_runs(self) -> PlainMd:
        need = self.lesson.requires.capability
        if not self.lesson.modes["interpreter"].supported or "gluon" in self.kernels.src.text:
            gpu = PlainMd("a GPU of compute capability {} or newer").format(need) if need else PlainMd("a GPU")
            return PlainMd("The kernels are Gluon, which has no interpreter: they run on {}. Without one, the cells "
                           "that define them still run, and the models and the exercises on them run on the "
                           "CPU.").format(gpu)
        return PlainMd("With a GPU the kernels run on it; without one, the setup below runs them on the CPU through "
                       "Triton's interpreter (TRITON_INTERPRET=1), slower, and the same.")

    def setup(self) -> str:
        need = self.lesson.requires.capability
        need_tuple = tuple(int(x) for x in need.split(".")) if need else (0, 0)
        gluon = "gluon" in self.kernels.src.text
        cpu = ("the models and the exercises on them run on the CPU; the Gluon kernels need the GPU" if gluon
               else "Triton's interpreter runs the kernels on the CPU")
        return setup_cell("where the kernels run", need_tuple, "the kernels run on this GPU.", [
            '    os.environ["TRITON_INTERPRET"] = "1"',
            f'    print(f"{{gpu}} is below compute capability {need or "the lesson needs"}:" if gpu else '
            f'"No GPU here:", "{cpu}.")',
        ])

    def walk(self, lines: list[str], start: int, first_line: int) -> None:
        prose: list[str] = []
        prose_first = first_line + start
        for row in _rows(lines[start:], first_line + start):
            line, number = row.text, row.number
            command = _command(row)
            name = command.name if command else ""
            args = command.args.split() if command else []
            top = command is not None and not command.indent
            if top and name == "snippet" and len(args) == 2 and args[0] == self.rel_kernels:
                self.prose(prose, prose_first)
                prose, prose_first = [], number + 1
                try:
                    self.place(self.kernels, self.kernels.region_nodes(args[1], self.code_dir), f"code-{args[1]}")
                except Exception as exc:  # a missing region: the page's line
                    raise directives.PageError(number, exc) from None
                continue
            if top and name == "exercise" and args:
                self.prose(prose, prose_first)
                prose, prose_first = [], number + 1
                try:
                    self.exercise(args[0])
                except directives.PageError:
                    raise
                except Exception as exc:
                    raise directives.PageError(number, exc) from None
                continue
            prose.append(line)
        self.prose(prose, prose_first)

    # -- the kernels module's own check

    def guard_ready(self) -> bool:
        """Whether every name the kernels module's `if __name__ == "__main__":` body calls is defined above."""
        guard = next((n for n in self.kernels.src.nodes if n.kind == "guard"), None)
        if guard is None:
            return False
        return not [i for i in self.kernels.src.needed_by(guard.mentions) if i not in self.kernels.placed]

    def self_check(self) -> None:
        if self.checked:
            return
        self.checked = True
        guard = next((n for n in self.kernels.src.nodes if n.kind == "guard"), None)
        rest = [n.index for n in self.kernels.src.nodes if n.kind == "code" and n.index not in self.kernels.placed]
        if rest:  # what the self-check calls, and whatever else the module defines: collapsed
            self.place(self.kernels, rest, "kernels-rest")
        if guard is not None:
            self.write_beside(kernels_module_imports(self.lesson), PlainMd(
                "The kernels module's check imports {}, written beside this notebook by the cells below (run them; "
                "they are collapsed)."), "kernels-files")
            body = textwrap.dedent("\n".join(self.kernels.src.lines[guard.first:guard.end])).strip("\n")
            self.code(f"# What `python {self.kernels.path.name}` runs: the kernels module's own check\n{body}",
                      "self-check")

    # -- practice

    def practice_setup(self) -> None:
        """practice.py and the modules the exercises import, written beside the notebook; then their imports."""
        if self.practice_ready:
            return
        self.practice_ready = True
        self.self_check()  # the tutorial's own check comes before the reader's
        self.write_beside(self.written_modules(), PlainMd(
            "The exercises' checks use {}, written beside this notebook by the cells below (run them; they are "
            "collapsed)."), "practice-files")
        ex = self.exercises
        kept = [i for i in ex.kind("prelude") if not self.drop_import(ex.src.nodes[i], ex)]
        imports = {i for i in kept if ex.src.nodes[i].name in ("Import", "ImportFrom")}
        used = frozenset().union(*(n.mentions for n in ex.src.nodes if n.kind == "code"
                                   or n.index in kept and n.index not in imports))
        kept = [i for i in kept if not ex.src.nodes[i].binds or ex.src.nodes[i].binds & used]
        ex.placed.update(ex.kind("prelude") + ex.kind("docstring"))
        if kept:
            self.code(f"# The exercises' imports\n{prelude_text(ex.src, kept)}", "practice-imports")

    def write_beside(self, paths: list[Path], words: PlainMd, cell: str) -> None:
        """Each of `paths` not written yet, in readable collapsed %%writefile cells (split to stay short), after a
        sentence (`words`, with {} for the files' names) saying which and why."""
        paths = [p for p in paths if p not in self.written]
        if not paths:
            return
        self.written.update(paths)
        self.markdown(str(words.format(
            PlainMd(", ").join(PlainMd("`{}`").format(plain_code(p.name)) for p in paths))), cell)
        for path in paths:
            source = read_text(path, LIMITS.source_file, self.code_dir).rstrip("\n")
            for i, chunk in enumerate(_chunks(source, MAX_CELL - 2)):
                head = f"%%writefile {'-a ' if i else ''}{path.name}"
                self.cells.append(Cell("code", f"{head}\n{chunk}" + ("\n" if i else ""),
                                       self.cell_id(f"file-{path.stem}"), hidden=True))

    def written_modules(self) -> list[Path]:
        """The local modules exercises.py and solutions.py import (practice.py, the models), not the kernels
        module (its code is in the cells above), in the order a module needs them written."""
        from verified_triton.core.lessons import exercise_files

        skip = {self.lesson.folder / STARTERS, self.lesson.folder / "solutions.py", self.kernels.path}
        return [p for p in exercise_files(self.lesson) if p not in skip]

    def drop_import(self, node, source: Source) -> bool:
        """An import of the exercises' that the notebook has no use for: the path set-up for practice.py (it is
        beside the notebook), or the kernels module's names (they are the cells above)."""
        code = source.code_of([node.index])
        stem = self.kernels.path.stem
        return "sys.path" in code or re.search(rf"^\s*(from\s+{stem}\s+import|import\s+{stem}\b)", code, re.M) \
            is not None

    def exercise(self, name: str) -> None:
        if self.exercises is None:
            raise directives.DirectiveError(f"'::exercise {name}': {self.lesson.name} has no {STARTERS}")
        self.practice_setup()
        posed = find_posed(self.page, name)
        ex = self.exercises
        gpu = PlainMd(" It needs a GPU ({}): on a CPU its check says so.").format(posed.needs_gpu) \
            if posed.needs_gpu else PlainMd("")
        self.markdown(str(PlainMd("**Your turn.** Fill in the code cell below, then run the check under it.{} "
                                  "**Hint**, if you need it: {}").format(gpu, posed.hint)), "exercise")
        self.place(ex, ex.region_nodes(name, self.code_dir), f"starter-{name}", "used by the exercise")
        check = ex.region_nodes(f"check-{name}", self.code_dir)
        needed = ex.needed(check)
        if needed:
            ex.placed.update(needed)
            self.code(f"# @title Used by the check: {', '.join(ex.src.nodes[i].name for i in needed)}\n"
                      f"{ex.code_of(needed)}", "hidden", hidden=True)
        ex.placed.update(check)
        self.code(f"{ex.code_of(check)}\n\n\npractice.report({name!r})", f"check-{name}")
        self.markdown(str(self.solution(name)), f"solution-{name}")

    def solution(self, name: str) -> PlainMd:
        state = self.page.lesson.exercises if self.page.lesson is not None else None
        found = verdict(state, name)
        title, warning = proof_line(state, found, PlainMd)
        region = extract(self.lesson.folder / "solutions.py", name, self.code_dir)
        listed = PlainMd("")
        if found is not None and found.mistakes:
            listed = PlainMd("\n\nThe listed mistakes, each a small edit of this solution: {}.").format(
                PlainMd("; ").join(PlainMd("{} (it says “{}”)").format(m.name, m.says) for m in found.mistakes))
        # The summary is raw HTML, where Markdown reads nothing: its words are HTML-escaped as well.
        fold = PlainMd("<details><summary>{}</summary>\n\n{}{}\n\n</details>").format(
            html_text(str(title)), plain_code_block(region.text.rstrip("\n"), "python"), listed)
        return PlainMd("{}\n\n{}").format(warning, fold) if warning else fold

    def record_cell(self) -> PlainMd:
        name = self.lesson.name
        return PlainMd(
            "## The verified run\n\nThis notebook is the tutorial; the course's verified run of this lesson is "
            "`lesson.py`, in the lesson's zip (the page's \"Run it yourself\" box): its checks, benchmarks and "
            "figures, recorded as the lesson's record, on the course's site at `lessons/{}/record/`. To run it "
            "yourself, unpack the zip and, in its folder:\n\n{}").format(
            plain_code(name), plain_code_block("TRITON_INTERPRET=1 python lesson.py   # any machine: the checks\n"
                                            "python lesson.py                      # a GPU: checks and benchmarks",
                                            "bash"))


def _without_record_only(lines: list[str]) -> list[str]:
    """The page's lines without the record's directives (with their bodies and the blank lines after them), then
    without the folded blocks and the sections that leaves empty."""
    out: list[str] = []
    dropping = False
    for row in _rows(lines):
        if isinstance(row.part, page_model.Command) and row.part.name in RECORD_ONLY:
            dropping = True
            continue
        if dropping and not row.text.strip():
            continue
        dropping = False
        out.append(row.text)
    return _drop_empty(out)


def _drop_empty(lines: list[str]) -> list[str]:
    """Folded blocks with nothing left in their body, and headings with nothing under them before the next."""
    while True:
        rows = _rows(lines)
        empty = next((i for i, row in enumerate(rows) if _is_empty(rows, i)), None)
        if empty is None:
            return lines
        del lines[empty]


def _is_empty(rows: list[page_model.Row], i: int) -> bool:
    """Whether rows[i] opens an admonition with a blank body, or is a heading with nothing under it."""
    row = rows[i]
    block = row.part if isinstance(row.part, page_model.Block) and not row.part.tab else None
    heading = HEADING.match(row.text) if isinstance(row.part, page_model.Text) else None
    if block is None and heading is None:
        return False
    for later in rows[i + 1:]:
        if heading and isinstance(later.part, page_model.Text) and (deeper := HEADING.match(later.text)) \
                and len(deeper.group(1)) <= len(heading.group(1)):
            return True
        if block and later.text.strip() and block not in later.part.within:
            return True
        if later.text.strip():
            return False
    return True


def _paragraph_chunks(markdown: str, limit: int) -> list[str]:
    """`markdown` in pieces of at most `limit` lines, cut at a blank line outside a fence or a <details> block,
    before a line that starts a paragraph or a heading (not an indented one)."""
    lines = markdown.split("\n")
    try:
        rows = list(page_model.parse(markdown, front_matter=False).rows())
    except page_model.PageFormatError as exc:
        raise ValueError(f"the notebook's Markdown, line {exc.line}: {exc.message}") from None
    cuts, depth = [], 0
    for i, row in enumerate(rows):
        line, inside = row.text, isinstance(row.part, page_model.Fence)
        if not inside:
            depth += line.count("<details") - line.count("</details>")
        if not line.strip() and not inside and depth == 0 and i + 1 < len(lines) and lines[i + 1][:1] not in (
                "", " ", "\t"):
            cuts.append(i)
    out, start = [], 0
    while len(lines) - start > limit:
        cut = max((c for c in cuts if start < c <= start + limit), default=start + limit)
        out.append("\n".join(lines[start:cut]).strip("\n"))
        start = cut + 1
    out.append("\n".join(lines[start:]).strip("\n"))
    return [part for part in out if part.strip()]


def _chunks(source: str, limit: int) -> list[str]:
    """`source` in pieces of at most `limit` lines, cut at a blank line before a top-level statement."""
    lines = source.split("\n")
    if len(lines) <= limit:
        return [source]
    out, start = [], 0
    while len(lines) - start > limit:
        cut = max((i for i in range(start + 1, start + limit)
                   if not lines[i - 1].strip() and lines[i][:1] not in ("", " ", "\t", ")", "]", "}")), default=None)
        if cut is None:
            cut = start + limit
        out.append("\n".join(lines[start:cut]).rstrip("\n"))
        start = cut
    out.append("\n".join(lines[start:]).rstrip("\n"))
    return [c for c in out if c.strip()]


def plan(lesson: Lesson, site: directives.Site, docs_dir: Path) -> list[Cell]:
    return Tutorial(lesson, site, docs_dir).plan()


def exercise_names(lesson: Lesson, docs_dir: Path) -> list[str]:
    """The exercises the page poses, in its order (for the tests and the scaffold)."""
    page = directives.parse(read_text(docs_dir / lesson.page, LIMITS.source_file, docs_dir))
    return [c.args for c in page.commands() if c.name == "exercise" and not c.indent and len(c.args.split()) == 1]

