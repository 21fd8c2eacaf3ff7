"""Every converted lesson (tests/converted.py), run as a learner runs it, on a CPU (issues 49 and 50).

- the kernels module alone, under the interpreter: a tl lesson's checks pass; a Gluon one says it needs a GPU,
  exit 0;
- the exercises' proof, freshly, in one process per lesson (record/exercises.py): the starter fails, the solution
  passes, every declared mistake is caught, saying what it declares;
- the notebook, top to bottom in a fresh kernel (nbclient): no error; each check cell prints its one line (the
  starter fails); with each solution pasted into its starter cell, each check passes;
- the zip, unpacked into an empty folder, as its README says: the kernels module, the exercises (exit 1 while
  one fails, one line each, no traceback), --solutions (exit 0) and lesson.py.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import zipfile

import nbformat
import pytest

from conftest import REPO
from converted import CONVERTED
from verified_triton.core.lessons import discover, kernels_module
from verified_triton.judge.exercises import judge_exercises
from verified_triton.judge.status import judge
from verified_triton.record.exercises import prove_lesson
from verified_triton.site import directives, downloads
from verified_triton.site.snippets import extract
from verified_triton.site.tutorial import exercise_names

pytestmark = pytest.mark.e2e

LESSONS = {lesson.name: lesson for lesson in discover(REPO / "code")}


def cpu_env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VT_", "TRITON_"))}
    return env | {"TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": "", "MPLBACKEND": "Agg",
                  "PYTHONDONTWRITEBYTECODE": "1"}


def run(folder, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=folder, env=cpu_env(), capture_output=True, text=True,
                          timeout=600)


def is_gluon(name: str) -> bool:
    return "gluon" in kernels_module(LESSONS[name]).read_text(encoding="utf-8")


@pytest.mark.parametrize("name", CONVERTED)
def test_the_kernels_module_runs_alone_under_the_interpreter(name):
    lesson = LESSONS[name]
    done = run(lesson.folder, kernels_module(lesson).name)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    if is_gluon(name):
        assert "run on a GPU only" in done.stdout
    else:
        # the self-check says what it matched: bit for bit (vector-add), or float64 within a tolerance (a matmul)
        # or bit for bit / within a tolerance of float64 (dropout, gelu-libdevice, softmax-fp32-matmul)
        said = re.search(r"\b(match(es)?|bit for bit|within [0-9.e-]+ of)\b", done.stdout)
        assert said and "Traceback" not in done.stderr, done.stdout


@pytest.mark.parametrize("name", CONVERTED)
def test_freshly_the_starter_fails_the_solution_passes_and_every_mistake_is_caught(name, tmp_path):
    lesson = LESSONS[name]
    result = prove_lesson(lesson, tmp_path)
    assert result.record.outcome == "completed", result.record.reason + result.record.stderr
    st = judge_exercises(lesson, tmp_path)
    assert st.state == "passed", st.problems
    for exercise in (e for e in st.exercises if not e.needs_gpu):
        assert (exercise.starter, exercise.solution) == ("failed", "passed"), exercise.name
        assert len(exercise.mistakes) >= 2 and all(m.caught for m in exercise.mistakes), exercise.name


def execute(nb, folder):
    folder.mkdir()
    from nbclient import NotebookClient

    old = {k: os.environ.get(k) for k in ("TRITON_INTERPRET", "CUDA_VISIBLE_DEVICES", "MPLBACKEND")}
    os.environ.update(TRITON_INTERPRET="1", CUDA_VISIBLE_DEVICES="", MPLBACKEND="Agg")  # the kernel inherits them
    try:
        NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(folder)}}).execute()
    finally:
        for k, v in old.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    shown = "".join(o.get("text", "") + str(o.get("data", "")) for o in outputs)
    assert "Traceback" not in shown
    return {c.id: "".join(o.get("text", "") for o in c.get("outputs", [])) for c in nb.cells if c.cell_type == "code"}


@pytest.mark.parametrize("name", CONVERTED)
def test_the_notebook_runs_on_a_cpu_and_its_checks_pass_once_the_solutions_are_in(name, tmp_path):
    lesson = LESSONS[name]
    nb = nbformat.read(REPO / "notebooks" / f"{name}.ipynb", as_version=4)
    nbformat.validate(nb)
    printed = execute(nb, tmp_path / "starters")
    gpu_only = {e.name for e in judge(lesson, REPO / "evidence").exercises.exercises if e.needs_gpu}
    names = exercise_names(lesson, REPO / "docs")
    for exercise in names:
        said = "needs a GPU" if exercise in gpu_only else "failed"
        assert printed[f"check-{exercise}"].startswith(f"{exercise}: {said}"), printed[f"check-{exercise}"]
    for cell in nb.cells:  # the reader's answers: each starter cell replaced by the solution
        if cell.id.startswith("starter-"):
            answer = cell.id.removeprefix("starter-")
            cell.source = extract(lesson.folder / "solutions.py", answer, REPO / "code").text
    printed = execute(nb, tmp_path / "solutions")
    for exercise in names:
        said = "needs a GPU" if exercise in gpu_only else "passed"
        assert printed[f"check-{exercise}"].startswith(f"{exercise}: {said}"), printed[f"check-{exercise}"]


@pytest.mark.parametrize("name", CONVERTED)
def test_the_zip_runs_as_its_readme_says(name, tmp_path):
    lesson = LESSONS[name]
    site = directives.Site.load(REPO / "code", REPO / "evidence")
    with zipfile.ZipFile(io.BytesIO(downloads.archive(lesson, site))) as zf:
        zf.extractall(tmp_path)
    folder = tmp_path / name
    readme = (folder / "README.md").read_text()
    commands = re.findall(r"^    TRITON_INTERPRET=1 python (\S+)$", readme, re.M)
    assert commands == [kernels_module(lesson).name, "exercises.py", "lesson.py"], commands
    alone = run(folder, commands[0])
    assert alone.returncode == 0, alone.stderr[-2000:]
    starters = run(folder, "exercises.py")
    lines = starters.stdout.strip().split("\n")
    assert starters.returncode == 1 and "Traceback" not in starters.stdout + starters.stderr
    assert [ln.split(":")[0] for ln in lines] == exercise_names(lesson, REPO / "docs")
    solutions = run(folder, "exercises.py", "--solutions")
    assert solutions.returncode == 0 and ": failed" not in solutions.stdout, solutions.stdout
    verified = run(folder, "lesson.py")
    assert verified.returncode == (3 if is_gluon(name) else 0), verified.stdout[-2000:] + verified.stderr[-2000:]
    assert "PASS" in verified.stdout or "declined by design" in verified.stderr
