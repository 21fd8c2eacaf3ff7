"""Run it yourself (issue 12): every lesson's archive and notebook, as a reader gets them from the built site.

The site is built once (module fixture). Then, for every lesson: the zip from
site/downloads/ is unpacked into an empty folder and run under the
interpreter; the notebook from site/notebooks/ validates as nbformat 4 and
runs top to bottom in a fresh kernel (nbclient, ipykernel) under the
interpreter; the committed copy Colab opens equals the built one; the
requirements box states what lesson.toml and the evidence say.
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
from verified_triton.core.lessons import discover
from verified_triton.judge.status import judge
from verified_triton.site import siteconfig

LESSONS = discover(REPO / "code")
NAMES = [lesson.name for lesson in LESSONS]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    site = tmp_path_factory.mktemp("site")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(site)], cwd=REPO,
                          capture_output=True, text=True, env=env, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return site


def interpreter_env() -> dict:
    env = dict(os.environ, TRITON_INTERPRET="1", MPLBACKEND="Agg", PYTHONDONTWRITEBYTECODE="1")
    for key in ("VT_RESULTS", "VT_FIGURES", "CUDA_VISIBLE_DEVICES"):
        env.pop(key, None)
    env["CUDA_VISIBLE_DEVICES"] = ""
    return env


@pytest.mark.parametrize("name", NAMES)
def test_the_archive_runs_alone_in_an_empty_folder(built, tmp_path, name):
    lesson = next(x for x in LESSONS if x.name == name)
    with zipfile.ZipFile(built / "downloads" / f"{name}.zip") as zf:
        names = zf.namelist()
        assert all(n.startswith(f"{name}/") and ".." not in n for n in names), names
        assert {f"{name}/lessonkit.py", f"{name}/lesson.toml", f"{name}/README.md",
                f"{name}/{lesson.main.name}"} <= set(names)
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


@pytest.mark.parametrize("name", NAMES)
def test_the_notebook_is_valid_and_runs_top_to_bottom(built, tmp_path, name, monkeypatch):
    """Title first, a short setup, the kit in a collapsed cell; it runs and reaches the script's checks."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.read(built / "notebooks" / f"{name}.ipynb", as_version=4)
    nbformat.validate(nb)
    title, setup, kit = nb.cells[:3]
    assert title.cell_type == "markdown" and title.source.startswith("# "), "the title comes first"
    assert setup.cell_type == "code" and setup.id == "setup" and len(setup.source.split("\n")) <= 16
    assert kit.metadata.get("cellView") == "form" and kit.metadata["jupyter"]["source_hidden"] is True
    assert "lessonkit.py" in kit.source and "lesson.toml" in kit.source
    assert not any("%%writefile" in c.source for c in nb.cells), "no wall of kit code"
    for key, value in {"TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": "", "MPLBACKEND": "Agg"}.items():
        monkeypatch.setenv(key, value)  # the kernel inherits them
    client = NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}})
    lesson = lesson_of(name)
    record = next((r for r in judge(lesson, REPO / "evidence").current if r.mode == "interpreter"), None)
    if not lesson.modes["interpreter"].supported:  # the setup says so; running further is not the point
        nb.cells = nb.cells[:2]
        client.execute()
        assert "the lesson cannot run here, nor under the interpreter" in nb.cells[1].outputs[0]["text"]
        return
    if record is not None and record.outcome == "by-design":  # declined under the interpreter: the run stops
        with pytest.raises(CellExecutionError) as stopped:
            client.execute()
        assert stopped.value.ename == "SystemExit" and stopped.value.evalue == "3"
        return
    client.execute()  # raises CellExecutionError on any failing cell
    printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "exit code 0" in printed
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


@pytest.mark.parametrize("name", NAMES)
def test_the_notebook_alternates_the_pages_prose_with_its_code_in_page_order(built, name):
    """Prose and code alternate as on the page; each step's cell sits in its section, in main()'s order."""
    from verified_triton.site.lesson_source import read

    lesson = lesson_of(name)
    nb = nbformat.read(built / "notebooks" / f"{name}.ipynb", as_version=4)
    kinds = [c.cell_type for c in nb.cells]
    assert all(not (a == b == "markdown") for a, b in zip(kinds, kinds[1:], strict=False)), \
        "two Markdown cells in a row: prose and code alternate"
    assert [c.id for c in nb.cells[1:4]] == ["setup", "kit", "imports"]
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


@pytest.mark.parametrize("name", NAMES)
def test_no_marker_and_no_code_twice(built, name):
    from verified_triton.site.snippets import MARKER_LIKE

    lesson = lesson_of(name)
    nb = nbformat.read(built / "notebooks" / f"{name}.ipynb", as_version=4)
    for cell in nb.cells:
        assert not [ln for ln in cell.source.split("\n") if MARKER_LIKE.match(ln)], cell.id
    code = [c.source for c in nb.cells if c.cell_type == "code" and c.id != "kit"]  # the kit is not lesson code
    source = lesson.main.read_text(encoding="utf-8")
    for definition in re.findall(r"^(?:def|class) (\w+)", source, re.M):
        count = sum(bool(re.search(rf"^(?:def|class) {definition}\b", c, re.M)) for c in code)
        assert count == (0 if definition == "main" else 1), f"{definition} is defined in {count} code cells"
    for step in re.findall(r"lesson\.step\(\s*\"([a-z0-9-]+)\"", source):
        assert sum(f'lesson.step("{step}"' in c for c in code) == 1, step


def rendered(markdown: str) -> str:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").render(markdown)


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


@pytest.mark.parametrize("name", NAMES)
def test_the_committed_notebook_is_the_built_one(built, name):
    """Colab opens notebooks/<lesson>.ipynb from the repository: it must be what the site builds."""
    committed = REPO / "notebooks" / f"{name}.ipynb"
    assert committed.exists(), "run: python tools/downloads.py notebooks"
    assert committed.read_bytes() == (built / "notebooks" / f"{name}.ipynb").read_bytes(), \
        "run: python tools/downloads.py notebooks"


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


def test_without_a_repository_no_colab_link_is_shown(built):
    page = (built / "lessons" / LESSONS[0].name / "index.html").read_text()
    assert "colab.research.google.com" not in page


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
    assert "Download the lesson (zip)" in box and "Jupyter notebook" in box


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
        assert all(gpu in line for gpu in unable) and "falls back to Triton's interpreter" in line
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


def test_a_step_cell_carries_the_recorded_gpu_output_marked_with_gpu_date_and_versions(site_project):
    from verified_triton.core.kit import Step
    from verified_triton.judge.evidence import Environment

    body = "::snippet code/stepped/stepped.py kernel\n\n::step checks\n\n## Timing\n\n::step timing"
    notebook, site, lesson = stepped_notebook(site_project, body)
    cells = {c.id: c for c in notebook.build(lesson, site, site_project.docs).cells}
    assert not cells["step-checks"].outputs, "nothing recorded, nothing shown"
    env = Environment(python="3.12.3", torch="2.11.0", triton="3.6.0", device_name="NVIDIA H200", capability="9.0",
                      cuda="13.0")
    site_project.write(site_project.make_record("stepped", mode="gpu", key="gpu-nvidia-h200", env=env,
                                                stdout="the whole log\n",
                                                steps=[Step("checks", "  check two: PASS\n"),
                                                       Step("timing", "timed\n")]))
    site = type(site).load(site_project.code, site_project.evidence)
    cells = notebook.build(lesson, site, site_project.docs).cells
    by_id = {c.id: c for c in cells}
    out = by_id["step-checks"].outputs[0]
    assert out.output_type == "stream" and out.name == "stdout"
    assert out.text.startswith("[Recorded on NVIDIA H200 (compute capability 9.0), 2026-01-02 03:04:05 UTC: "
                               "Triton 3.6.0, torch 2.11.0, Python 3.12.3, CUDA 13.0. Running the cell replaces it.]")
    assert out.text.endswith("  check two: PASS\n") and "timed" not in out.text
    assert by_id["step-timing"].outputs[0].text.endswith("timed\n")
    assert "the whole log" in by_id["recorded-run"].source and "<details>" in by_id["recorded-run"].source
    assert "Under each cell that runs a step" in cells[0].source
    # Code the page does not show (helper) goes into a collapsed cell before the first cell that needs it.
    ids = [c.id for c in cells]
    assert ids.index("hidden") < ids.index("step-checks") and "def helper" in by_id["hidden"].source
    assert by_id["hidden"].metadata["cellView"] == "form"
    assert by_id["region-kernel"].source.startswith("def kernel():")


def test_a_record_from_before_steps_leaves_the_step_cells_empty_and_says_where_the_log_is(site_project):
    body = "::snippet code/stepped/stepped.py kernel\n\n::step checks\n\n::step timing"
    notebook, site, lesson = stepped_notebook(site_project, body)
    site_project.write(site_project.make_record("stepped", mode="gpu", stdout="the whole log\n"))
    site = type(site).load(site_project.code, site_project.evidence)
    cells = notebook.build(lesson, site, site_project.docs).cells
    assert not any(c.get("outputs") for c in cells)
    assert "before the kit kept its output step by step: its whole output is at the end" in cells[0].source
    assert "the whole log" in cells[-1].source


def test_a_lesson_the_interpreter_cannot_run_still_makes_a_notebook_that_says_so(site_project):
    from verified_triton.site import directives, notebook

    site_project.add_lesson("gpu-only", PAGE.replace("stepped", "gpu-only").format(
        body="::snippet code/gpu-only/gpu_only.py kernel\n\n::step checks\n\n::step timing"),
        source=STEPPED.replace("stepped", "gpu-only"),
        toml='[requires]\ncapability = "10.0"\n[interpreter]\nsupported = false\nreason = "Gluon needs a GPU"\n')
    site = directives.Site.load(site_project.code, site_project.evidence)
    cells = notebook.build(site.lessons[0], site, site_project.docs).cells
    assert "the lesson cannot run (nor under the interpreter: Gluon needs a GPU)" in cells[0].source
    assert "the lesson cannot run here, nor under the interpreter (Gluon needs a GPU)." in cells[1].source
    assert "TRITON_INTERPRET" not in cells[1].source.split("else:")[1], "no fallback to an interpreter it cannot use"


def test_a_gpu_run_declined_by_design_gives_no_step_output_and_the_title_says_why(site_project):
    body = "::snippet code/stepped/stepped.py kernel\n\n::step checks\n\n::step timing"
    notebook, site, lesson = stepped_notebook(site_project, body)
    site_project.write(site_project.make_record("stepped", mode="gpu", outcome="by-design", exit_code=3,
                                                reason="needs compute capability 10.0"))
    site = type(site).load(site_project.code, site_project.evidence)
    cells = notebook.build(lesson, site, site_project.docs).cells
    assert not any(c.get("outputs") for c in cells)
    assert "stopped by design: needs compute capability 10.0." in cells[0].source


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
