"""Run it yourself (issue 12): every lesson's archive and notebook, as a reader gets them from the built site.

The site is built once (module fixture). Then, for every lesson: the zip from
site/downloads/ is unpacked into an empty folder and run under the
interpreter; the notebook from site/notebooks/ validates as nbformat 4 and
runs top to bottom in a fresh kernel (nbclient, ipykernel) under the
interpreter with no error output, no traceback and no stray value, a decline
by design being one sentence (issue 34); the committed copy Colab opens
equals the built one; the requirements box states what lesson.toml and the
evidence say. tests/test_notebooks.py reads and renders the notebooks.
"""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import nbformat
import pytest

from conftest import REPO
from converted import not_converted
from verified_triton.core.lessons import discover
from verified_triton.judge.status import judge
from verified_triton.site import siteconfig, sources

LESSONS = discover(REPO / "code")
NAMES = [lesson.name for lesson in LESSONS]
OLDER = not_converted(NAMES)  # notebooks that run the lesson file step by step (tests/converted.py)


@pytest.fixture
def built(real_site) -> Path:
    """The run's one build of the real site (conftest.py)."""
    return real_site


def interpreter_env() -> dict:
    env = dict(os.environ, TRITON_INTERPRET="1", MPLBACKEND="Agg", PYTHONDONTWRITEBYTECODE="1")
    for key in ("VT_RESULTS", "VT_FIGURES", "CUDA_VISIBLE_DEVICES"):
        env.pop(key, None)
    env["CUDA_VISIBLE_DEVICES"] = ""
    return env


@pytest.mark.e2e
@pytest.mark.parametrize("name", NAMES)
def test_the_archive_runs_alone_in_an_empty_folder_and_agrees_with_the_committed_record(built, tmp_path, name):
    """The reader's run of the zip is also the course's fresh interpreter run (what `verify --compare` did
    apart, running every lesson a second time): the zip holds the repository's very sources, and what the run
    prints, its outcome and every check's status, is what the committed interpreter record holds."""
    lesson = next(x for x in LESSONS if x.name == name)
    with zipfile.ZipFile(built / "downloads" / f"{name}.zip") as zf:
        names = zf.namelist()
        assert all(n.startswith(f"{name}/") and ".." not in n for n in names), names
        assert {f"{name}/lessonkit.py", f"{name}/lesson.toml", f"{name}/README.md",
                f"{name}/{lesson.main.name}"} <= set(names)
        shipped = {n: zf.read(f"{name}/{n}") for n in sources.lesson_files(lesson, REPO / "code")}
        assert shipped == sources.lesson_files(lesson, REPO / "code"), "the zip's sources are not the repository's"
        zf.extractall(tmp_path)
    folder = tmp_path / name
    readme = (folder / "README.md").read_text()
    assert f"TRITON_INTERPRET=1 python {lesson.main.name}" in readme
    run = subprocess.run([sys.executable, lesson.main.name], cwd=folder, env=interpreter_env(),
                         capture_output=True, text=True, timeout=600)
    # As the committed interpreter record ran: 0 (passed), or 3 when the lesson declines the
    # interpreter by design after its CPU-side checks (a Gluon lesson), with the same reason.
    record = judge(lesson, REPO / "evidence").modes["interpreter"].record
    expected = 3 if record is not None and record.outcome == "by-design" else 0
    assert run.returncode == expected, (run.stdout[-2000:], run.stderr[-2000:])
    if expected == 3:
        assert record.reason in run.stdout + run.stderr and "FAILED" not in run.stderr
    assert "PASS" in run.stdout
    if record is not None and lesson.modes["interpreter"].supported:  # as verify --compare compares
        fresh = {check: status.lower() for check, status in
                 re.findall(r"^  check (\S+): (PASS|FAIL|SKIP)\b", run.stdout, re.M)}
        assert fresh == {c.name: c.status for c in record.checks}, "checks differ from the committed record"


@pytest.mark.e2e
@pytest.mark.parametrize("name", OLDER)
def test_the_notebook_is_valid_and_runs_top_to_bottom(built, tmp_path, name, monkeypatch):
    """Title first, a short setup, the kit in a collapsed cell; it runs to its end with no error shown."""
    from nbclient import NotebookClient

    nb = nbformat.read(built / "notebooks" / f"{name}.ipynb", as_version=4)
    nbformat.validate(nb)
    title, setup = nb.cells[:2]
    assert title.cell_type == "markdown" and title.source.startswith("# "), "the title comes first"
    assert setup.cell_type == "code" and setup.id == "setup" and len(setup.source.split("\n")) <= 16
    kit = next(c for c in nb.cells if c.id == "kit")
    assert kit.metadata.get("cellView") == "form" and kit.metadata["jupyter"]["source_hidden"] is True
    assert "lessonkit.py" in kit.source and "lesson.toml" in kit.source
    assert not any("%%writefile" in c.source for c in nb.cells), "no wall of kit code"
    for key, value in {"TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": "", "MPLBACKEND": "Agg"}.items():
        monkeypatch.setenv(key, value)  # the kernel inherits them
    client = NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}})
    lesson = lesson_of(name)
    st = judge(lesson, REPO / "evidence")
    record = next((r for r in st.current if r.mode == "interpreter"), None)
    ran = st.modes["interpreter"].record  # the newest interpreter run, for this source or an older one
    if not lesson.modes["interpreter"].supported:  # the setup says so; running further is not the point
        nb.cells = nb.cells[:2]
        client.execute()
        assert "the lesson cannot run here, nor under the interpreter" in nb.cells[1].outputs[0]["text"]
        return
    client.execute()  # raises CellExecutionError on any failing cell: a decline by design is no failure
    outputs = [(c.id, o) for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    shown = "\n".join(o.get("text", "") + str(o.get("data", "")) for _, o in outputs)
    assert not [o for _, o in outputs if o.output_type == "error"], "an error shown"
    for what in ("Traceback", "SystemExit", "To exit: use"):
        assert what not in shown, f"{what!r} shown"
    assert not kit.outputs, f"the kit cell shows {kit.outputs}"  # no stray value (a write's return value)
    finish = next(c for c in nb.cells if c.id == "finish")
    if ran is not None and ran.outcome == "by-design":  # declined under the interpreter: one sentence
        assert [(o.output_type, o.get("name"), o.get("text")) for o in finish.outputs] == \
            [("stream", "stderr", f"declined by design: {ran.reason}\n")], finish.outputs
    else:
        assert "PASS" in "".join(o.get("text", "") for o in finish.outputs)
    printed = "".join(o.get("text", "") for _, o in outputs)
    if record is not None:  # the same checks as the script, by name
        reached = set(re.findall(r"^  check (\S+): (?:PASS|FAIL|SKIP)", printed, re.M))
        assert reached == {c.name for c in record.checks}


def lesson_of(name: str):
    return next(x for x in LESSONS if x.name == name)


def headings(markdown: str) -> list[str]:
    """The page's headings (## and ###), outside fenced code."""
    out, fence = [], False
    for line in markdown.split("\n"):
        if line.lstrip().startswith(("```", "~~~")):
            fence = not fence
        elif not fence and re.match(r"^#{2,3} ", line):
            out.append(line)
    return out


def page_directives(lesson) -> list[tuple[str, str, int]]:
    """(kind, arg, index of the heading above it or -1) of every ::snippet of the lesson file and ::step."""
    page = (REPO / "docs" / lesson.page).read_text(encoding="utf-8")
    rel = re.escape(f"code/{lesson.name}/{lesson.main.name}")
    out, heading, fence = [], -1, False
    for line in page.split("\n"):
        if line.lstrip().startswith(("```", "~~~")):
            fence = not fence
        if fence:
            continue
        if re.match(r"^#{2,3} ", line):
            heading += 1
        match = re.match(rf"^\s*::(snippet) {rel} (\S+)\s*$", line) or re.match(r"^\s*::(step) (\S+)\s*$", line)
        if match:
            out.append((match.group(1), match.group(2), heading))
    return out


@pytest.mark.integration
@pytest.mark.parametrize("name", OLDER)
def test_the_notebook_alternates_the_pages_prose_with_its_code_in_page_order(built, name):
    """Prose and code alternate as on the page; each step's cell sits in its section, in main()'s order."""
    from verified_triton.site.lesson_source import read

    lesson = lesson_of(name)
    nb = nbformat.read(built / "notebooks" / f"{name}.ipynb", as_version=4)
    for a, b in zip(nb.cells, nb.cells[1:], strict=False):  # a step's recorded output folds under its cell
        assert not (a.cell_type == b.cell_type == "markdown") or a.id.startswith("recorded-"), \
            f"{a.id}, {b.id}: two Markdown cells in a row: prose and code alternate"
    assert nb.cells[1].id == "setup" and "kit" in [c.id for c in nb.cells]
    page = (REPO / "docs" / lesson.page).read_text(encoding="utf-8")
    prose = [(i, c.source) for i, c in enumerate(nb.cells) if c.cell_type == "markdown"]
    found = []  # the index of the cell that holds each heading of the page
    for heading in headings(page):
        where = [i for i, text in prose if heading in text.split("\n")]
        assert len(where) == 1, f"{heading!r} is in {len(where)} Markdown cells"
        found.append(where[0])
    assert found == sorted(found), "the page's sections keep their order"
    ids = [c.id for c in nb.cells]
    placed = [arg for kind, arg, _ in page_directives(lesson) if kind == "step"]
    assert placed == [s.name for s in read(lesson, REPO / "code").steps.steps], "every step once, in main()'s order"
    assert [i for i in ids if i.startswith("step-")] == [f"step-{s}" for s in placed]
    for kind, arg, heading in page_directives(lesson):
        cell = f"{kind if kind == 'step' else 'region'}-{arg}"
        if cell not in ids:
            assert kind == "snippet"  # a region already in an earlier cell: the prose points to it
            continue
        at = ids.index(cell)
        if heading >= 0:  # below its section's heading
            assert found[heading] < at, (cell, heading)
        if kind == "step" and heading + 1 < len(found):  # and above the next one
            assert at < found[heading + 1], cell


@pytest.mark.integration
@pytest.mark.parametrize("name", OLDER)
def test_no_marker_and_no_code_twice(built, name):
    from verified_triton.site.snippets import MARKER_LIKE

    lesson = lesson_of(name)
    nb = nbformat.read(built / "notebooks" / f"{name}.ipynb", as_version=4)
    for cell in nb.cells:
        assert not [ln for ln in cell.source.split("\n") if MARKER_LIKE.match(ln)], cell.id
    cells = [c.source for c in nb.cells if c.cell_type == "code" and c.id != "kit"]  # the kit is not lesson code
    code = [c for c in cells if not c.startswith("%%module ")]  # the main file's; a module's cells run in it
    source = lesson.main.read_text(encoding="utf-8")
    for definition in re.findall(r"^(?:def|class) (\w+)", source, re.M):
        count = sum(bool(re.search(rf"^(?:def|class) {definition}\b", c, re.M)) for c in code)
        assert count == (0 if definition == "main" else 1), f"{definition} is defined in {count} code cells"
    for module in (p for p in lesson.source_files() if p.parent == lesson.folder and p.suffix == ".py"
                   and p != lesson.main):
        own = [c for c in cells if c.startswith(f"%%module {module.stem}\n")]
        for definition in re.findall(r"^(?:def|class) (\w+)", module.read_text(encoding="utf-8"), re.M):
            count = sum(bool(re.search(rf"^(?:def|class) {definition}\b", c, re.M)) for c in own)
            assert count <= 1, f"{module.name}: {definition} is defined in {count} code cells"
    for step in re.findall(r"lesson\.step\(\s*\"([a-z0-9-]+)\"", source):
        assert sum(f'lesson.step("{step}"' in c for c in code) == 1, step


def rendered(markdown: str) -> str:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").render(markdown)


@pytest.mark.integration
@pytest.mark.parametrize("name", NAMES)
def test_every_markdown_cell_renders_without_literal_fences_and_keeps_its_maths(built, name):
    """What Jupyter, Colab and GitHub show: CommonMark. A fence left in a code block shows its backticks."""
    nb = nbformat.read(built / "notebooks" / f"{name}.ipynb", as_version=4)
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        out = rendered(cell.source)
        assert "```" not in out and "~~~" not in out, f"{cell.id}: a fence shows as text"
        assert out.count("<details") == out.count("</details>"), cell.id
        outside_code = re.sub(r"<(pre|code)\b.*?</\1>", " ", out, flags=re.S)
        text = html.unescape(re.sub(r"<[^>]+>", "", outside_code))
        source_text = re.sub(r"`+[^`]*`+", " ", re.sub(r"```.*?```", " ", cell.source, flags=re.S))
        for maths in re.findall(r"\$[^$\n]+\$", source_text):
            flat = re.sub(r"[\\\s]", "", maths)
            assert flat in re.sub(r"[\\\s]", "", text), f"{cell.id}: {maths} does not reach the page as maths"


@pytest.mark.unit
def test_a_solution_becomes_a_details_block_with_its_fence_and_maths_intact():
    from verified_triton.site.notebook import for_jupyter

    page = textwrap.dedent("""\
        1. **A question** about $x^2$.

            ??? success "Solution (checked by the lesson)"

                ```python
                y = x * x
                ```

                Because $x^2 = x \\cdot x$.

        2. **Next.**
        """)
    out = for_jupyter(page)
    assert "    <details><summary>Solution (checked by the lesson)</summary>" in out
    html_ = rendered(out)
    assert "<details><summary>Solution (checked by the lesson)</summary>" in html_
    assert '<code class="language-python">y = x * x' in html_ and "```" not in html_
    assert "<p>Because $x^2 = x \\cdot x$.</p>" in html_ and html_.index("</details>") < html_.index("Next")


@pytest.mark.integration
@pytest.mark.parametrize("name", NAMES)
def test_the_committed_notebook_is_the_built_one(built, name):
    """Colab opens notebooks/<lesson>.ipynb from the repository: it must be what the site builds."""
    committed = REPO / "notebooks" / f"{name}.ipynb"
    assert committed.exists(), "run: python tools/downloads.py notebooks"
    assert committed.read_bytes() == (built / "notebooks" / f"{name}.ipynb").read_bytes(), \
        "run: python tools/downloads.py notebooks"


@pytest.mark.unit
def test_colab_links_take_colabs_github_form():
    lesson = LESSONS[0]
    url = siteconfig.colab_url("https://github.com/someone/verified-triton", "main", lesson)
    assert url == (f"https://colab.research.google.com/github/someone/verified-triton/blob/main/notebooks/"
                   f"{lesson.name}.ipynb")
    assert siteconfig.colab_url("https://github.com/someone/verified-triton.git/", "main", lesson) == url
    for bad in ("", "https://gitlab.com/a/b", "javascript:alert(1)", "https://github.com/a/b/c",
                'https://github.com/a/b"onmouseover="x'):
        assert siteconfig.colab_url(bad, "main", lesson) == ""
    assert siteconfig.colab_url("https://github.com/a/b", "main;rm", lesson) == ""


@pytest.mark.integration
def test_without_a_repository_no_colab_link_is_shown(built):
    page = (built / "lessons" / LESSONS[0].name / "index.html").read_text()
    assert "colab.research.google.com" not in page


@pytest.mark.integration
@pytest.mark.parametrize("name", NAMES)
def test_the_requirements_box_matches_lesson_toml_and_the_evidence(built, name):
    lesson = next(x for x in LESSONS if x.name == name)
    page = html.unescape(re.sub(r"<[^>]+>", " ", (built / "lessons" / name / "index.html").read_text()))
    box = page[page.index("Run it yourself"):]
    box = re.sub(r"\s+", " ", box)[:4000]
    if lesson.requires.capability:
        assert f"compute capability {lesson.requires.capability} or newer" in box
    if lesson.requires.triton:
        assert f"Triton: {lesson.requires.triton} or newer" in box
    st = judge(lesson, REPO / "evidence")
    for record in st.records:
        env = record.env
        assert env.triton in box and env.torch in box and record.date in box
        assert f"{record.wall_s:.0f} s" in box
    assert f"TRITON_INTERPRET=1 python {lesson.main.name}" in box
    assert ("Without a GPU, install torch's CPU build first: pip install torch --index-url "
            "https://download.pytorch.org/whl/cpu , then") in box
    assert "Download the lesson (zip)" in box and "Jupyter notebook" in box


@pytest.mark.unit
def test_the_install_line_gives_a_reader_without_a_gpu_torchs_cpu_build():
    """Before: the box said only `pip install torch triton numpy matplotlib`, which on Linux pulls the CUDA
    build, gigabytes a CPU cannot use; the zip's README already installed the CPU build first."""
    from verified_triton.site.directives.requirements import _commands
    from verified_triton.site.requirements import requirements

    lesson = LESSONS[0]
    box = html.unescape(re.sub(r"<[^>]+>", "", str(_commands(requirements(lesson, judge(lesson, REPO / "evidence"))))))
    assert "Install, with a GPU: pip install torch triton numpy matplotlib" in box
    assert ("Without a GPU, install torch's CPU build first: pip install torch --index-url "
            "https://download.pytorch.org/whl/cpu, then pip install triton numpy matplotlib") in box
    assert f"TRITON_INTERPRET=1 python {lesson.main.name} (CPU, checks only)" in box


@pytest.mark.integration
@pytest.mark.parametrize("capability, able, unable", [
    ("", ["T4 (7.5)", "L4 (8.9)", "A100 (8.0)", "H100 (9.0)"], []),
    ("8.0", ["L4 (8.9)", "A100 (8.0)", "H100 (9.0)"], ["T4 (7.5)"]),
    ("9.0", ["H100 (9.0)"], ["T4 (7.5)", "L4 (8.9)", "A100 (8.0)"]),
    ("10.0", [], ["T4 (7.5)", "L4 (8.9)", "A100 (8.0)", "H100 (9.0)"]),
])
def test_the_first_cells_say_which_colab_gpus_run_it_and_the_setup_falls_back_in_words(
        site_project, capability, able, unable):
    from verified_triton.site import notebook

    site_project.add_lesson("gpu-need", toml=f'[requires]\ncapability = "{capability}"\n' if capability else "")
    lesson = site_project.lesson("gpu-need")
    line = notebook.colab_line(lesson)
    if not unable:
        assert "any of its GPUs runs it" in line
    elif able:
        assert f"choose {', '.join(able[:-1]) + ' or ' if len(able) > 1 else ''}{able[-1]}" in line
        assert all(gpu in line for gpu in unable) and "the kernels run on the CPU through Triton's interpreter" in line
    else:
        assert f"none of its GPUs, {', '.join(unable)}, has the compute capability {capability}" in line
    setup = notebook.setup_code(lesson)
    need = tuple(int(x) for x in capability.split(".")) if capability else (0, 0)
    assert f"torch.cuda.get_device_capability() >= {need!r}" in setup
    if capability != "8.0":
        return
    # Without a GPU the setup chooses the interpreter and says so in a sentence.
    shown = setup + "\nprint('TRITON_INTERPRET =', os.environ.get('TRITON_INTERPRET'))"
    run = subprocess.run([sys.executable, "-c", shown], capture_output=True, text=True,
                         env=interpreter_env() | {"TRITON_INTERPRET": ""}, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "No GPU here: the kernels run on the CPU through Triton's interpreter; the checks run, nothing is timed." \
        in run.stdout and "TRITON_INTERPRET = 1" in run.stdout


STEPPED = textwrap.dedent("""\
    import sys
    from pathlib import Path

    # lessonkit.py sits beside this file in a download, one folder up in the repository.
    HERE = Path(__file__).resolve().parent
    sys.path[:0] = [str(HERE), str(HERE.parent)]
    from lessonkit import Lesson  # noqa: E402


    def helper():
        return 2


    # snippet: kernel
    def kernel():
        return helper()
    # end snippet


    def main() -> int:
        lesson = Lesson("stepped")
        with lesson.step("checks"):
            lesson.check("two", kernel() == 2)
        if lesson.step("timing", needs_gpu="timings need a GPU"):
            print("timed")
        return lesson.finish()


    if __name__ == "__main__":
        sys.exit(main())
    """)
PAGE = "---\nlesson: stepped\n---\n\n# Stepped\n\nWhy.\n\n{body}\n"


def stepped_notebook(site_project, body: str):
    from verified_triton.site import directives, notebook

    site_project.add_lesson("stepped", PAGE.format(body=body), source=STEPPED)
    site = directives.Site.load(site_project.code, site_project.evidence)
    return notebook, site, site.lessons[0]


@pytest.mark.unit
def test_under_a_step_cell_the_recorded_gpu_output_is_folded_in_markdown_with_gpu_date_and_versions(site_project):
    from verified_triton.core.kit import Step
    from verified_triton.judge.evidence import Environment

    body = "::snippet code/stepped/stepped.py kernel\n\n::step checks\n\n## Timing\n\n::step timing"
    notebook, site, lesson = stepped_notebook(site_project, body)
    cells = notebook.build(lesson, site, site_project.docs).cells
    assert not any(c.id.startswith("recorded-") for c in cells), "nothing recorded, nothing shown"
    env = Environment(python="3.12.3", torch="2.11.0", triton="3.6.0", device_name="NVIDIA H200", capability="9.0",
                      cuda="13.0")
    site_project.write(site_project.make_record("stepped", mode="gpu", key="gpu-nvidia-h200", env=env,
                                                stdout="the whole log\n",
                                                steps=[Step("checks", "  check two: PASS\n"),
                                                       Step("timing", "timed\n")]))
    site = type(site).load(site_project.code, site_project.evidence)
    cells = notebook.build(lesson, site, site_project.docs).cells
    by_id = {c.id: c for c in cells}
    ids = [c.id for c in cells]
    assert not any(c.get("outputs") for c in cells), "the reader's run fills the step's cell; nothing is replaced"
    for step, printed in (("checks", "  check two: PASS"), ("timing", "timed")):
        under = cells[ids.index(f"step-{step}") + 1]
        assert under.id == f"recorded-{step}" and under.cell_type == "markdown"
        assert under.source.startswith("<details><summary>Recorded on NVIDIA H200, 2026-01-02</summary>\n\n"
                                       "Triton 3.6.0, torch 2.11.0, Python 3.12.3, CUDA 13.0, compute capability "
                                       "9.0.\n\n```text\n"), under.source
        assert f"\n{printed}\n```\n\n</details>" in under.source
    assert "timed" not in by_id["recorded-checks"].source
    assert "the whole log" in by_id["recorded-run"].source and "<details>" in by_id["recorded-run"].source
    assert "under each step, folded, is what the recorded GPU run printed there" in cells[0].source
    # Code the page does not show (helper) goes into a collapsed cell before the first cell that needs it; the
    # kit cell comes where the notebook first needs it: after the kernel, which needs nothing of it.
    assert ids.index("region-kernel") < ids.index("kit") < ids.index("hidden") < ids.index("step-checks")
    assert "def helper" in by_id["hidden"].source and by_id["hidden"].metadata["cellView"] == "form"
    assert by_id["region-kernel"].source.startswith("def kernel():")


JOINED = textwrap.dedent("""\
    import sys
    from pathlib import Path

    # lessonkit.py sits beside this file in a download, one folder up in the repository.
    HERE = Path(__file__).resolve().parent
    sys.path[:0] = [str(HERE), str(HERE.parent)]
    from lessonkit import Lesson  # noqa: E402


    # snippet: one
    def one():
        return 1
    # end snippet


    # snippet: two
    def two():
        return 2
    # end snippet


    def main() -> int:
        lesson = Lesson("joined")
        with lesson.step("first"):
            lesson.check("one", one() == 1)
        with lesson.step("second"):
            lesson.check("two", two() == 2)
        return lesson.finish()


    if __name__ == "__main__":
        sys.exit(main())
    """)


@pytest.mark.unit
@pytest.mark.parametrize("between, joined", [("", True), ("Why it returns 2.\n\n", False)])
def test_a_step_right_under_the_code_it_runs_is_one_cell_with_it(site_project, between, joined):
    """The page shows the code and runs it, nothing between: one cell defines and runs it; prose between: two."""
    from verified_triton.site import directives, notebook

    body = f"::snippet code/joined/joined.py one\n\n::step first\n\n## Two\n\n::snippet code/joined/joined.py two\n\n" \
           f"{between}::step second"
    site_project.add_lesson("joined", PAGE.replace("stepped", "joined").format(body=body), source=JOINED)
    site = directives.Site.load(site_project.code, site_project.evidence)
    cells = notebook.build(site.lessons[0], site, site_project.docs).cells
    by_id = {c.id: c for c in cells}
    assert "region-one" in by_id, "the first step comes after the lesson's start: not joined"
    if joined:
        assert "region-two" not in by_id
        assert by_id["step-second"].source == 'def two():\n    return 2\n\n\nwith lesson.step("second"):\n' \
                                             '    lesson.check("two", two() == 2)'
    else:
        assert by_id["region-two"].source == "def two():\n    return 2"
        assert by_id["step-second"].source.startswith('with lesson.step("second"):')


KIT_IMPORT = "from lessonkit import Lesson  # noqa: E402"
MODULE_LESSON = JOINED.replace("joined", "moduled").replace(KIT_IMPORT, f"{KIT_IMPORT}\nimport kernels  # noqa: E402") \
    .replace("one() == 1", "kernels.one() == 1")
KERNELS = textwrap.dedent("""\
    \"\"\"The lesson's kernels (its own module).\"\"\"

    SCALE = 1


    # snippet: one
    def one():
        return SCALE
    # end snippet
    """)


@pytest.mark.unit
def test_a_region_of_the_lessons_own_module_is_a_module_cell_after_the_kit_where_the_page_shows_it(site_project):
    from verified_triton.site import directives, notebook

    body = "::snippet code/moduled/kernels.py one\n\n::snippet code/moduled/moduled.py two\n\n::step first\n\n" \
           "::step second\n\n::snippet code/moduled/kernels.py one"
    folder = site_project.add_lesson("moduled", PAGE.replace("stepped", "moduled").format(body=body),
                                     source=MODULE_LESSON)
    (folder / "kernels.py").write_text(KERNELS, encoding="utf-8")
    site = directives.Site.load(site_project.code, site_project.evidence)
    cells = notebook.build(site.lessons[0], site, site_project.docs).cells
    ids = [c.id for c in cells]
    module = cells[ids.index("module-kernels-one")]
    assert module.source == ("%%module kernels\n# kernels.py, lines 7-8, run inside kernels: the lesson's cells "
                             "below use what you edit here\ndef one():\n    return SCALE")
    assert ids.index("kit") < ids.index("module-kernels-one") < ids.index("step-first"), "%%module is the kit's"
    assert "SCALE = 1" not in "".join(c.source for c in cells if c.id != "kit"), "the rest stays in the file"
    assert any("*The code shown here on the page, lines 7–8 of <code>kernels.py</code>, is part of the "
               "<code>kernels.py</code> cell above that defines <code>one</code>.*" in c.source for c in cells)


@pytest.mark.unit
def test_a_record_from_before_steps_leaves_the_step_cells_empty_and_says_where_the_log_is(site_project):
    body = "::snippet code/stepped/stepped.py kernel\n\n::step checks\n\n::step timing"
    notebook, site, lesson = stepped_notebook(site_project, body)
    site_project.write(site_project.make_record("stepped", mode="gpu", stdout="the whole log\n"))
    site = type(site).load(site_project.code, site_project.evidence)
    cells = notebook.build(lesson, site, site_project.docs).cells
    assert not any(c.get("outputs") for c in cells)
    assert "before the kit kept its output step by step: its whole output is at the end" in cells[0].source
    assert "the whole log" in cells[-1].source


@pytest.mark.unit
def test_a_lesson_the_interpreter_cannot_run_still_makes_a_notebook_that_says_so(site_project):
    from verified_triton.site import directives, notebook

    site_project.add_lesson("gpu-only", PAGE.replace("stepped", "gpu-only").format(
        body="::snippet code/gpu-only/gpu_only.py kernel\n\n::step checks\n\n::step timing"),
        source=STEPPED.replace("stepped", "gpu-only"),
        toml='[requires]\ncapability = "10.0"\n[interpreter]\nsupported = false\nreason = "Gluon needs a GPU"\n')
    site = directives.Site.load(site_project.code, site_project.evidence)
    cells = notebook.build(site.lessons[0], site, site_project.docs).cells
    assert "there, the lesson cannot run here, nor under the interpreter (Gluon needs a GPU)." \
        in cells[0].source
    assert "the lesson cannot run here, nor under the interpreter (Gluon needs a GPU)." in cells[1].source
    assert "TRITON_INTERPRET" not in cells[1].source.split("else:")[1], "no fallback to an interpreter it cannot use"


@pytest.mark.unit
def test_a_gpu_run_declined_by_design_gives_no_step_output_and_the_title_says_why(site_project):
    body = "::snippet code/stepped/stepped.py kernel\n\n::step checks\n\n::step timing"
    notebook, site, lesson = stepped_notebook(site_project, body)
    site_project.write(site_project.make_record("stepped", mode="gpu", outcome="by-design", exit_code=3,
                                                reason="needs compute capability 10.0"))
    site = type(site).load(site_project.code, site_project.evidence)
    cells = notebook.build(lesson, site, site_project.docs).cells
    assert not any(c.get("outputs") for c in cells)
    assert "stopped by design: needs compute capability 10.0." in cells[0].source


@pytest.mark.unit
@pytest.mark.parametrize("body, line, message", [
    ("::step checks\n\n::snippet code/stepped/stepped.py kernel\n\n::step timing", 9,
     "'::step checks' runs kernel (code/stepped/stepped.py:15), which the page shows below it (line 11)"),
    ("::snippet code/stepped/stepped.py kernel\n\n::step timing\n\n::step checks", 11,
     "'::step timing' comes before step 'checks' here, but main() runs 'checks' first"),
    ("::snippet code/stepped/stepped.py kernel\n\n::step checks", 11,
     "step 'timing' of main() (code/stepped/stepped.py:24) is not placed on the page"),
    ("::snippet code/stepped/stepped.py kernel\n\n::step checks\n\n::step checks", 13,
     "'::step checks' is placed twice"),
    ("::step nope", 9, "main() in stepped.py has no step of that name (steps: checks, timing)"),
])
def test_a_step_the_notebook_cannot_place_is_an_error_at_the_pages_line(site_project, body, line, message):
    from verified_triton.site import directives

    notebook, site, lesson = stepped_notebook(site_project, body)
    with pytest.raises(directives.PageError) as exc:
        notebook.build(lesson, site, site_project.docs)
    assert exc.value.line == line and message in str(exc.value.error), (exc.value.line, str(exc.value.error))
