"""Notebooks that teach in every renderer (issue 34): what a reader sees and runs, read without Jupyter's help.

- The notebook's side of the kit (site/lessonkit_notebook.py), in a real IPython shell: a `%%module NAME`
  cell runs inside module NAME, so the lesson's later cells (and what the notebook imported from it) use
  what it defines, a Triton kernel as edited; the kit's stop ends its cell without IPython's SystemExit and
  "To exit" warning: quietly at the lesson's end, failed (so Run all stops) before it; a reader's own
  sys.exit is left to IPython; a cell keeps its line numbers and shows its last value.
- Every committed notebook read with nbformat alone (no collapse metadata honoured): no code cell over
  MAX_CODE_LINES, no output saved; the title, the page's opening and then the setup come first; the kit
  cell is collapsed, short, one line of packed files whose SHA-256 lines are the repository's files'
  and which unpack to exactly those bytes; every kernel the page shows is a code cell (Gluon's too, in a
  `%%module` cell); under every step, a folded Markdown cell of what the recorded GPU run printed there.
- Rendered by nbconvert's HTML exporter in Chromium (skipped without it, as tests/test_browser.py is):
  the lesson's first code starts within the first 15 % of the page at 1440 px, and the title and the
  opening's first words on the first screen at 1440x900 and 390x844.
The notebooks are run top to bottom under the interpreter by tests/test_downloads.py.
"""

from __future__ import annotations

import hashlib
import html
import json
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest

from conftest import KIT, REPO
from converted import not_converted
from verified_triton.core.lessons import discover
from verified_triton.judge.status import judge
from verified_triton.site import notebook
from verified_triton.site.directives.common import gpu_first

LESSONS = discover(REPO / "code")
NAMES = [lesson.name for lesson in LESSONS]
OLDER = not_converted(NAMES)  # notebooks that run the lesson file step by step (tests/converted.py)
HARNESS = REPO / "tools" / "verified_triton" / "site" / "lessonkit_notebook.py"
KERNEL = re.compile(r"^\s*@(?:triton|gluon)\.jit\b", re.M)


def committed(name: str):
    return nbformat.read(REPO / "notebooks" / f"{name}.ipynb", as_version=4)


# -- the notebook's side of the kit, in IPython ----------------------------------------------

SHELL = textwrap.dedent("""\
    import contextlib, io, json, sys
    from IPython.core.interactiveshell import InteractiveShell
    shell = InteractiveShell.instance()
    shell.run_cell("import lessonkit_notebook; lessonkit_notebook.install(get_ipython(), steps=%(steps)r)")
    results = []
    for cell in json.loads(sys.stdin.read()):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            result = shell.run_cell(cell)
        error = result.error_in_exec or result.error_before_exec
        results.append({"ok": result.success, "error": type(error).__name__ if error else "",
                        "stdout": out.getvalue(), "stderr": err.getvalue()})
    print(json.dumps(results))
    """)


def run_cells(folder: Path, cells: list[str], steps: list[str] = (), **env: str) -> list[dict]:
    """Run `cells` one by one in a fresh IPython shell in `folder`, the harness installed as the kit cell does."""
    shutil.copyfile(HARNESS, folder / HARNESS.name)
    script = SHELL % {"steps": list(steps)}
    import os

    environment = {k: v for k, v in os.environ.items() if not k.startswith(("VT_", "TRITON_"))} | env
    done = subprocess.run([sys.executable, "-c", script], input=json.dumps(cells), capture_output=True, text=True,
                          cwd=folder, env=environment, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.integration
def test_a_module_cell_runs_inside_its_module_and_the_later_cells_use_what_it_defines(tmp_path):
    (tmp_path / "kernels.py").write_text("def f():\n    return 1\n\n\ndef g():\n    return f() * 10\n")
    out = run_cells(tmp_path, [
        "import kernels\nfrom kernels import f as alias, g",
        "%%module kernels\ndef f():\n    return 2",
        "print(kernels.g(), g(), alias(), 'f' in globals())",
    ])
    assert all(r["ok"] for r in out), out
    assert out[2]["stdout"] == "20 20 2 False\n", "the module's g calls the new f; the alias is rebound; no leak"


@pytest.mark.integration
def test_a_triton_kernel_edited_in_a_module_cell_is_the_kernel_that_runs(tmp_path):
    (tmp_path / "kernels.py").write_text(textwrap.dedent("""\
        import triton
        import triton.language as tl


        @triton.jit
        def bump(x_ptr, n, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)


        def run(x):
            bump[(1,)](x, x.numel(), BLOCK=16)
            return x
        """))
    edited = textwrap.dedent("""\
        %%module kernels
        @triton.jit
        def bump(x_ptr, n, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 10, mask=offs < n)
        """)
    out = run_cells(tmp_path, ["import torch, kernels", "print(kernels.run(torch.zeros(3)).tolist())", edited,
                               "print(kernels.run(torch.zeros(3)).tolist())"], TRITON_INTERPRET="1")
    assert all(r["ok"] for r in out), out
    assert (out[1]["stdout"], out[3]["stdout"]) == ("[1.0, 1.0, 1.0]\n", "[10.0, 10.0, 10.0]\n")


def kit_folder(tmp_path: Path) -> Path:
    shutil.copyfile(KIT, tmp_path / "lessonkit.py")
    (tmp_path / "lesson.toml").write_text('[requires]\ntriton = "3.0"\n')
    return tmp_path


@pytest.mark.integration
def test_the_kits_decline_at_the_lessons_end_is_one_sentence_and_no_traceback(tmp_path):
    out = run_cells(kit_folder(tmp_path), [
        "from lessonkit import Lesson\nlesson = Lesson('t')",
        "with lesson.step('a'):\n    print('ran a')",
        "lesson.decline('the kernels run on the GPU only')\nexit_code = lesson.finish()\n'never shown'",
        "print('a later cell runs')",
    ], steps=["a"])
    end = out[2]
    assert end["ok"] and end["error"] == "", end
    assert end["stderr"] == "declined by design: the kernels run on the GPU only\n" and end["stdout"] == "", end
    assert "SystemExit" not in json.dumps(out) and "To exit" not in json.dumps(out)
    assert out[3]["stdout"] == "a later cell runs\n"


@pytest.mark.integration
def test_a_stop_before_the_lessons_end_fails_its_cell_quietly_so_run_all_stops_there(tmp_path):
    out = run_cells(kit_folder(tmp_path), [
        "from lessonkit import Lesson\nlesson = Lesson('t')",
        "lesson.decline('needs compute capability 9.0 or newer; this GPU is 7.5')\nprint('not reached')",
    ], steps=["a", "b"])
    stop = out[1]
    assert not stop["ok"] and stop["error"] == "LessonStopped", stop
    assert stop["stdout"] == "" and stop["stderr"] == \
        "declined by design: needs compute capability 9.0 or newer; this GPU is 7.5\n", stop


@pytest.mark.integration
def test_the_readers_own_sys_exit_is_left_to_ipython(tmp_path):
    out = run_cells(tmp_path, ["import sys\nsys.exit(4)"])
    assert not out[0]["ok"] and out[0]["error"] == "SystemExit"


@pytest.mark.integration
def test_a_cell_keeps_its_line_numbers_its_future_imports_and_its_last_value(tmp_path):
    out = run_cells(tmp_path, ["x = 1\n\nraise ValueError('on line 3')",
                               "from __future__ import annotations\ndef f(a: Undefined) -> int:\n    return 2\nf(0)",
                               "y = 3\ny * 2"])
    traceback = re.sub(r"\x1b\[[0-9;]*m", "", out[0]["stdout"])  # IPython's colours
    assert out[0]["error"] == "ValueError" and re.search(r"----> 3 raise ValueError", traceback), traceback
    assert out[1]["ok"] and "Out[" in out[1]["stdout"] and out[1]["stdout"].rstrip().endswith("2"), out[1]
    assert out[2]["ok"] and out[2]["stdout"].rstrip().endswith("6"), out[2]


@pytest.mark.integration
@pytest.mark.parametrize("name, says", [
    # every lesson's notebook is the tutorial (site/tutorial.py): the kernels, or the models, run here
    ("reductions-scans", "No GPU here: Triton's interpreter runs the kernels on the CPU.\n"),
    ("vector-add", "No GPU here: Triton's interpreter runs the kernels on the CPU.\n"),
    ("layer-norm", "No GPU here: Triton's interpreter runs the kernels on the CPU.\n"),
    ("gluon-basics", "No GPU here: the models and the exercises on them run on the CPU; the Gluon kernels need "
                     "the GPU.\n"),
    ("gluon-matmul", "No GPU here: the models and the exercises on them run on the CPU; the Gluon kernels need "
                     "the GPU.\n"),
])
def test_the_setup_says_what_runs_where_from_the_lessons_own_steps(name, says, tmp_path):
    """Without a GPU: which steps run on the CPU and which need the GPU, and why (their needs_gpu reasons)."""
    import os

    setup = committed(name).cells[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VT_", "TRITON_"))} | {"CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run([sys.executable, "-c", setup.source + "\nprint(os.environ['TRITON_INTERPRET'])"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout == says + "1\n"


# -- every committed notebook, read with nbformat alone -----------------------------------------------

@pytest.mark.unit
@pytest.mark.parametrize("name", NAMES)
def test_no_code_cell_is_a_wall_and_none_carries_output(name):
    nb = committed(name)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        lines = cell.source.split("\n")
        assert len(lines) <= notebook.MAX_CODE_LINES, f"{cell.id}: {len(lines)} lines"
        assert not cell.outputs, f"{cell.id}: a committed output would be replaced by the reader's run"


def opening_words(lesson, rendered: bool = False) -> str:
    """The first words of the page's first paragraph of prose after its title (not a directive), as its
    Markdown has them, or `rendered` as a reader reads them."""
    page = (REPO / "docs" / lesson.page).read_text(encoding="utf-8")
    body = re.sub(r"\A---\n.*?\n---\n", "", page, flags=re.S)
    for block in re.split(r"\n\s*\n", body):
        block = block.strip()
        if block and not block.startswith(("#", "::", "!!!", "???", "|", "<")):
            from markdown_it import MarkdownIt

            if rendered:
                block = html.unescape(re.sub(r"<[^>]+>", "", MarkdownIt("commonmark").render(block)))
            return " ".join(block.split()[:6])
    raise AssertionError(f"{lesson.page}: no opening paragraph")


@pytest.mark.unit
@pytest.mark.parametrize("name", NAMES)
def test_the_title_and_the_pages_opening_come_first_then_the_setup_then_the_lesson(name):
    lesson = next(x for x in LESSONS if x.name == name)
    nb = committed(name)
    title, setup = nb.cells[:2]
    assert title.cell_type == "markdown" and title.source.startswith("# "), "the title first"
    flat = " ".join(title.source.split())
    assert opening_words(lesson) in flat, "the page's opening is in the title cell"
    assert flat.index(opening_words(lesson)) < flat.find("on the site when this notebook was made"), \
        "the opening before the status"
    assert setup.cell_type == "code" and setup.id == "setup" and len(setup.source.split("\n")) <= 16
    head = [c.id for c in nb.cells[2:5] if c.id in ("imports", "kit")]
    first_lesson_code = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code"
                             and c.id not in ("setup", "imports", "kit"))
    assert first_lesson_code <= 2 + len(head) + 1, "nothing but the imports and the kit between setup and lesson"


@pytest.mark.unit
@pytest.mark.parametrize("name", OLDER)
def test_the_kit_cell_is_collapsed_one_packed_line_and_unpacks_the_repositorys_files(name, tmp_path):
    lesson = next(x for x in LESSONS if x.name == name)
    nb = committed(name)
    kit = next(c for c in nb.cells if c.id == "kit")
    assert kit.metadata.get("cellView") == "form" and kit.metadata["jupyter"]["source_hidden"] is True
    lines = kit.source.split("\n")
    long = [ln for ln in lines if len(ln) > 1000]
    assert len(long) == 1 and long[0].startswith('KIT = "'), "the files are one line"
    assert len(lines) - len(long) <= 45, "no wall of kit code around it"
    own = lines[:lines.index(next(ln for ln in lines if ln.startswith("import lessonkit_notebook")))]
    exec(compile("\n".join(own), f"{name}: the kit cell", "exec"), {"__name__": "kit"})  # writes into the cwd
    expected = {p.name: p for p in lesson.source_files() if p != lesson.main}
    for file_name, path in expected.items():
        data = path.read_bytes()
        assert f"{file_name!r}: {hashlib.sha256(data).hexdigest()!r}," in kit.source, file_name
        assert Path(file_name).read_bytes() == data, f"{file_name} is not the repository's file"
    assert Path(HARNESS.name).read_bytes() == HARNESS.read_bytes()


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the kit cell writes beside "the notebook": here


def page_kernels(lesson) -> list[tuple[str, str]]:
    """(file, def line) of every kernel in a region the page shows of the lesson's main file or its own modules."""
    from verified_triton.site.snippets import extract

    page = (REPO / "docs" / lesson.page).read_text(encoding="utf-8")
    found = []
    for rel, region_name in re.findall(r"^\s*::snippet (code/\S+\.py) (\S+)\s*$", page, re.M):
        path = REPO / rel
        if path.parent != lesson.folder:
            continue
        text = extract(path, region_name).text
        for match in KERNEL.finditer(text):
            rest = text[match.end():]
            found.append((path.name, re.search(r"^\s*def \w+", rest, re.M).group().strip()))
    return found


@pytest.mark.unit
@pytest.mark.parametrize("name", OLDER)
def test_every_kernel_the_page_shows_is_a_code_cell_the_reader_runs(name):
    lesson = next(x for x in LESSONS if x.name == name)
    nb = committed(name)
    code = [c.source for c in nb.cells if c.cell_type == "code" and c.id != "kit"]
    for file_name, definition in page_kernels(lesson):
        # A module's kernel runs inside its module (a `%%module NAME` cell): the lesson calls it there.
        own = f"%%module {Path(file_name).stem}\n" if file_name != lesson.main.name else None
        cells = [c for c in code if re.search(rf"^{re.escape(definition)}\b", c, re.M)
                 and (c.startswith(own) if own else not c.startswith("%%module"))]
        assert cells, f"{file_name}: {definition} is in no code cell"


@pytest.mark.unit
@pytest.mark.parametrize("name", OLDER)
def test_under_every_step_is_what_the_recorded_gpu_run_printed_folded_in_markdown(name):
    lesson = next(x for x in LESSONS if x.name == name)
    gpu = [r for r in gpu_first(judge(lesson, REPO / "evidence")) if r.mode == "gpu"]
    record = gpu[0] if gpu else None
    nb = committed(name)
    steps = [i for i, c in enumerate(nb.cells) if c.id.startswith("step-")]
    assert steps
    if record is None or record.outcome == "by-design" or not record.steps:
        assert not any(c.id.startswith("recorded-") and c.id != "recorded-run" for c in nb.cells)
        return
    for i in steps:
        under = nb.cells[i + 1]
        step = nb.cells[i].id.removeprefix("step-")
        assert under.cell_type == "markdown" and under.id == f"recorded-{step}", (nb.cells[i].id, under.id)
        assert under.source.startswith(f"<details><summary>Recorded on {record.env.device_name}, {record.date}")
        assert under.source.rstrip().endswith("</details>")


# -- rendered by nbconvert, in Chromium ------------------------------------------------------------------

@pytest.fixture(scope="module")
def browser():
    from test_browser import chromium

    with chromium() as launched:
        yield launched


@pytest.mark.e2e
@pytest.mark.parametrize("name", NAMES)
def test_rendered_by_nbconvert_the_lesson_starts_on_the_first_screen(browser, name, tmp_path):
    from nbconvert import HTMLExporter

    lesson = next(x for x in LESSONS if x.name == name)
    html, _ = HTMLExporter().from_notebook_node(committed(name))
    page_file = tmp_path / f"{name}.html"
    page_file.write_text(html, encoding="utf-8")
    words = opening_words(lesson, rendered=True).split()[:3]
    for viewport in ({"width": 1440, "height": 900}, {"width": 390, "height": 844}):
        page = browser.new_page(viewport=viewport)
        try:
            page.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file:")
                       else route.abort())  # nbconvert's page asks the web for MathJax and fonts: offline
            page.goto(page_file.as_uri())
            got = page.evaluate("""(words) => {
                const top = el => el ? el.getBoundingClientRect().top + window.scrollY : -1;
                const cells = [...document.querySelectorAll('.jp-Cell')];
                const code = cells.find(c => c.classList.contains('jp-CodeCell')
                    && !['cell-id=setup', 'cell-id=imports', 'cell-id=kit'].includes(c.id));
                const title = document.querySelector('h1');
                const para = [...cells[0].querySelectorAll('p')].find(p => p.innerText.includes(words));
                const kit = document.getElementById('cell-id=kit');
                return {code: top(code), title: top(title), opening: top(para),
                        kit: kit ? kit.getBoundingClientRect().height : 0,
                        height: document.documentElement.scrollHeight};
            }""", " ".join(words))
        finally:
            page.close()
        assert 0 <= got["title"] < viewport["height"] and 0 <= got["opening"] < viewport["height"], got
        assert got["kit"] <= 900, f"the kit cell is {got['kit']} px tall"
        if viewport["width"] == 1440:
            assert 0 < got["code"] <= 0.15 * got["height"], \
                f"the lesson's first code at {got['code']} px of {got['height']}"
