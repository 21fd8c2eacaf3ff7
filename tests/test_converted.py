"""Every converted lesson (tests/converted.py) has the structure of issues 49 and 50, read without running it.

- its kernels module, code/<lesson>/<name_snake>.py, imports no course kit, and lesson.py (lesson.toml's main)
  imports it;
- exercises.py poses at least two exercises, each a starter region and a check-NAME region, in the order the
  page's Practice section poses them, and solutions.py answers each (a region of the same name) and declares at
  least two mistakes for each, each `find` text once above MISTAKES;
- its page cuts at least half of its snippet regions from the kernels module, exercises.py and solutions.py
  (an `::exercise` line shows two: the starter and the solution), and ends with its Practice section;
- its notebook is the tutorial: no kit, no code line over 1,000 characters, no cell over 150 lines, the first
  kernel within the first quarter of the code, a starter cell, a check cell and a folded solution for every
  exercise, practice.py in readable %%writefile cells, and a last cell that links the record and says how to
  run lesson.py;
- its zip carries the kernels module, lesson.py, exercises.py, solutions.py and practice.py, with a README that
  names them in that order.
tests/test_converted_runs.py runs them.
"""

from __future__ import annotations

import ast
import io
import re
import zipfile

import nbformat
import pytest

from conftest import REPO
from converted import CONVERTED
from verified_triton.core.lessons import discover, kernels_module, kernels_module_imports
from verified_triton.site import directives, downloads
from verified_triton.site.directives.exercise import posed
from verified_triton.site.snippets import extract
from verified_triton.site.tutorial import MAX_CELL, MAX_LINE, exercise_names

pytestmark = pytest.mark.unit

LESSONS = {lesson.name: lesson for lesson in discover(REPO / "code")}
KERNEL = re.compile(r"^\s*@(?:triton|gluon)\.jit\b", re.M)


def lesson_of(name):
    return LESSONS[name]


def imported(path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module.split(".")[0])
    return names


def mistakes(name) -> dict[str, list[tuple[str, str]]]:
    """MISTAKES of solutions.py, read without running it: exercise -> [(name, find)]."""
    path = lesson_of(name).folder / "solutions.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    table = next(n.value for n in tree.body if isinstance(n, ast.Assign) and n.targets[0].id == "MISTAKES")
    out = {}
    for key, items in zip(table.keys, table.values, strict=True):
        out[key.value] = [(call.args[0].value, next(k.value.value for k in call.keywords if k.arg == "find"))
                          for call in items.elts]
    return out


@pytest.mark.parametrize("name", CONVERTED)
def test_the_kernels_module_imports_no_kit_and_the_verified_run_imports_it(name):
    lesson = lesson_of(name)
    kernels = kernels_module(lesson)
    assert kernels is not None and lesson.main.name == "lesson.py", "lesson.toml: main = \"lesson.py\""
    assert "lessonkit" not in imported(kernels)
    assert kernels.stem in imported(lesson.main) and kernels in lesson.source_files()
    assert "lessonkit" not in imported(lesson.folder / "exercises.py") | imported(lesson.folder / "solutions.py")


@pytest.mark.parametrize("name", CONVERTED)
def test_the_exercises_are_posed_in_the_pages_order_answered_and_their_mistakes_declared(name):
    lesson = lesson_of(name)
    ex = [e.name for e in posed(lesson.folder / "exercises.py", REPO / "code")]
    assert ex == exercise_names(lesson, REPO / "docs"), "the page's ::exercise lines, in exercises.py's order"
    assert len([e for e in posed(lesson.folder / "exercises.py", REPO / "code") if not e.needs_gpu]) >= 2
    declared = mistakes(name)
    solutions = (lesson.folder / "solutions.py").read_text(encoding="utf-8").partition("\nMISTAKES = ")[0]
    for exercise in ex:
        extract(lesson.folder / "exercises.py", exercise, REPO / "code")
        extract(lesson.folder / "exercises.py", f"check-{exercise}", REPO / "code")
        extract(lesson.folder / "solutions.py", exercise, REPO / "code")
        assert len(declared.get(exercise, [])) >= 2, f"{exercise}: at least two mistakes"
        for mistake, find in declared[exercise]:
            assert solutions.count(find) == 1, f"{exercise}, {mistake}: {find!r} once above MISTAKES"


def page_regions(name) -> list[str]:
    """The file of every region the page cuts: ::snippet FILE REGION, and ::exercise's two (starter, solution)."""
    page = (REPO / "docs" / lesson_of(name).page).read_text(encoding="utf-8")
    files = re.findall(r"^\s*::snippet code/\S+/(\S+\.py) \S+\s*$", page, re.M)
    return files + ["exercises.py", "solutions.py"] * len(re.findall(r"^::exercise \S+\s*$", page, re.M))


@pytest.mark.parametrize("name", CONVERTED)
def test_the_page_cuts_at_least_half_its_regions_from_the_kernels_module_and_the_exercises(name):
    own = {kernels_module(lesson_of(name)).name, "exercises.py", "solutions.py"}
    files = page_regions(name)
    assert sum(f in own for f in files) * 2 >= len(files), files
    page = (REPO / "docs" / lesson_of(name).page).read_text(encoding="utf-8")
    headings = re.findall(r"^## (.+)$", page, re.M)
    assert "Practice" in headings and "Try this" not in headings
    assert headings.index("Practice") >= len(headings) - 2, "the Practice section ends the lesson"


def committed(name):
    return nbformat.read(REPO / "notebooks" / f"{name}.ipynb", as_version=4)


@pytest.mark.parametrize("name", CONVERTED)
def test_the_notebook_is_the_tutorial_within_the_numbers(name):
    nb = committed(name)
    code = [c for c in nb.cells if c.cell_type == "code"]
    lines = [ln for c in code for ln in c.source.split("\n")]
    assert all(len(ln) <= MAX_LINE for ln in lines), "no code line over 1,000 characters"
    assert all(len(c.source.split("\n")) <= MAX_CELL for c in nb.cells), "no cell over 150 lines"
    assert not any("lessonkit" in c.source or c.source.startswith("%%module") for c in code), "no kit"
    first = next(i for i, ln in enumerate(lines) if KERNEL.match(ln))
    assert first <= len(lines) / 4, f"the first kernel at code line {first} of {len(lines)}"
    written = [c for c in code if c.source.startswith("%%writefile")]
    assert any(c.source.startswith("%%writefile practice.py") for c in written)
    assert all(c.metadata.get("jupyter", {}).get("source_hidden") for c in written), "collapsed, still readable"
    ids = [c.id for c in nb.cells]
    for exercise in exercise_names(lesson_of(name), REPO / "docs"):
        starter, check, solution = (ids.index(f"{kind}-{exercise}") for kind in ("starter", "check", "solution"))
        assert starter < check < solution, exercise
        assert nb.cells[check].source.rstrip().endswith(f"practice.report({exercise!r})")
        assert nb.cells[solution].source.startswith("<details><summary>Solution")
    last = nb.cells[-1]
    assert last.cell_type == "markdown" and f"lessons/{name}/record/" in last.source
    assert "python lesson.py" in last.source and "zip" in last.source


@pytest.mark.parametrize("name", CONVERTED)
def test_every_module_the_kernels_module_imports_is_written_before_its_self_check(name):
    """gluon-attention-backward's kernels module imports the tl backward (inside a function, through `uses`):
    its notebook's self-check failed on a GPU for want of attention_backward.py beside the notebook."""
    cells = [c for c in committed(name).cells if c.cell_type == "code"]
    check = next(i for i, c in enumerate(cells) if "the kernels module's own check" in c.source)
    written = {c.source.split("\n", 1)[0].split()[-1] for c in cells[:check] if c.source.startswith("%%writefile")}
    needed = {p.name for p in kernels_module_imports(lesson_of(name))}
    assert needed <= written, f"written before the self-check: {sorted(written)}; needed: {sorted(needed)}"


def test_the_kernels_modules_imports_are_found_inside_functions_too():
    """The one lesson whose kernels module imports another's: found, so the test above can fail."""
    assert [p.name for p in kernels_module_imports(lesson_of("gluon-attention-backward"))] == ["attention_backward.py"]


@pytest.mark.parametrize("name", CONVERTED)
def test_every_kernel_of_the_kernels_module_the_page_shows_is_a_code_cell(name):
    lesson = lesson_of(name)
    source = kernels_module(lesson).read_text(encoding="utf-8")
    code = [c.source for c in committed(name).cells if c.cell_type == "code"]
    for match in KERNEL.finditer(source):
        definition = re.search(r"^\s*def (\w+)", source[match.end():], re.M).group(1)
        assert sum(bool(re.search(rf"^def {definition}\b", c, re.M)) for c in code) == 1, definition


@pytest.fixture(scope="module")
def site():
    return directives.Site.load(REPO / "code", REPO / "evidence")


@pytest.mark.parametrize("name", CONVERTED)
def test_the_zip_carries_the_exercises_and_its_readme_reads_in_order(site, name):
    lesson = lesson_of(name)
    with zipfile.ZipFile(io.BytesIO(downloads.archive(lesson, site))) as zf:
        files = {n.removeprefix(f"{name}/") for n in zf.namelist()}
        readme = zf.read(f"{name}/README.md").decode()
    kernels = kernels_module(lesson).name
    assert {kernels, "lesson.py", "exercises.py", "solutions.py", "practice.py", "lessonkit.py"} <= files
    at = [readme.index(f"python {kernels}"), readme.index("python exercises.py"),
          readme.index("TRITON_INTERPRET=1 python lesson.py")]
    assert at == sorted(at), "the kernels module first, then the exercises, then the verified run"
