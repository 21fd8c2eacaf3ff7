"""Hostile input, issue 20, class 10: nothing lost to a machine that cannot run.

verify checks, before running a mode, that this Python can do what the mode needs (numpy, torch, Triton and
its interpreter; for the GPU mode a device torch sees). A mode that cannot run says why and which command
sets it up, exits 2 and writes nothing. A run that fails because of its environment (torch, Triton or numpy
missing, an import error outside the lesson, exit 2) never replaces a current passing record; a run with other
torch or Triton versions than the current passing record's never turns it into a failure without --force.
Status sentences read well whatever a record's versions say. Written before the fix: a Python without torch
replaced every passing interpreter record with FAILED ("the lesson wrote no results").
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import PASSING, VERIFY, Project, base_env, fake_record
from verified_triton.judge.evidence import write_record

USES_TORCH = """\
    lesson = Lesson("torchy")
    import torch  # noqa: E402  (what every real lesson does, here after the kit's first save)

    flag = (Path(__file__).parent / "flag.txt").read_text().strip()
    lesson.check("flag", flag == "ok", f"flag is {flag}")
    sys.exit(lesson.finish())
"""


def shim(tmp_path: Path, body: str) -> str:
    """A folder holding a package named torch, to put first on PYTHONPATH."""
    folder = tmp_path / "shim"
    (folder / "torch").mkdir(parents=True)
    (folder / "torch" / "__init__.py").write_text(textwrap.dedent(body), encoding="utf-8")
    return str(folder)


NO_TORCH = 'raise ImportError("No module named torch here (a shim standing in for a Python without torch)")\n'
BROKEN_IN_RUNS = """\
    import os
    if os.environ.get("VT_RESULTS"):  # only when a lesson runs: what verify's own check cannot see
        raise ImportError("libcudart.so.13: cannot open shared object file: No such file or directory")
    __version__ = "0.0+shim"
"""


@pytest.fixture
def recorded(project: Project) -> Project:
    project.add("good", PASSING)
    project.add("torchy", USES_TORCH, order=2, files={"flag.txt": "ok\n"})
    result = project.verify("--mode", "interpreter")
    assert result.returncode == 0, result.stdout + result.stderr
    assert project.judge("good").modes["interpreter"].state == "passed"
    return project


def bare_python(tmp_path: Path) -> str:
    """A virtual environment with nothing installed: what `dev.sh serve` makes, as far as verify can tell."""
    venv = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    return str(venv / "bin" / "python")


def run_with(project: Project, python: str, *args: str, **env: str) -> subprocess.CompletedProcess:
    command = [python, str(VERIFY), "--code-dir", str(project.code), "--evidence-dir", str(project.evidence), *args]
    return subprocess.run(command, capture_output=True, text=True, env=base_env(**env), timeout=300,
                          cwd=project.root)


@pytest.mark.integration
@pytest.mark.parametrize("how", ["bare-venv", "torch-shim"])
def test_a_python_without_torch_exits_2_and_writes_nothing(recorded, tmp_path, how):
    before = recorded.files()
    if how == "bare-venv":
        result = run_with(recorded, bare_python(tmp_path))  # the plain command, every mode
    else:
        result = recorded.verify("--force", PYTHONPATH=shim(tmp_path, NO_TORCH))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "the interpreter mode cannot run here" in result.stderr and "torch" in result.stderr
    assert "bash tools/dev.sh author" in result.stderr and "Traceback" not in result.stderr
    assert recorded.files() == before  # byte for byte


@pytest.mark.integration
def test_an_environment_failure_never_replaces_a_passing_record(recorded, tmp_path):
    before = recorded.files()
    result = recorded.verify("--force", "--lesson", "torchy", PYTHONPATH=shim(tmp_path, BROKEN_IN_RUNS))
    assert result.returncode != 0, result.stdout + result.stderr
    assert "libcudart" in result.stdout and "not recorded" in result.stdout, result.stdout
    assert recorded.files() == before
    assert recorded.judge("torchy").modes["interpreter"].state == "passed"


@pytest.mark.integration
def test_a_lesson_s_own_import_error_is_recorded(recorded):
    main = recorded.main_file("torchy")
    main.write_text(main.read_text().replace("import torch  #", "import torch_typo  #"))
    result = recorded.verify("--lesson", "torchy")
    assert result.returncode == 1
    rec = recorded.record("torchy")
    assert rec.outcome == "failed" and "torch_typo" in rec.stderr


@pytest.mark.integration
def test_other_versions_never_silently_turn_a_pass_into_a_failure(recorded):
    lesson = recorded.lesson("torchy")
    old = recorded.record("torchy")
    old.env.torch, old.env.triton = "2.5.1", "3.4.0"  # as if recorded with other versions
    write_record(recorded.evidence, old)
    before = recorded.files()
    (lesson.folder / "flag.txt").write_text("bad\n")  # not a source file: the record stays current
    result = recorded.verify("--lesson", "torchy")  # other versions: it is run again
    assert result.returncode == 1, result.stdout + result.stderr
    assert "not recorded" in result.stdout and "--force" in result.stdout and "2.5.1" in result.stdout
    assert recorded.files() == before
    forced = recorded.verify("--lesson", "torchy", "--force")
    assert forced.returncode == 1 and recorded.record("torchy").outcome == "failed"


@pytest.mark.unit
def test_status_sentences_read_well_whatever_the_versions_say(project):
    project.add("good", PASSING)
    lesson = project.lesson("good")
    rec = fake_record(lesson, "interpreter", "failed", exit_code=1, reason="check result")
    rec.env.triton, rec.env.torch = "not installed", ""
    write_record(project.evidence, rec)
    gpu = fake_record(lesson, "gpu", "failed", exit_code=1, reason="check result")
    gpu.env.triton, gpu.env.torch = "", "not installed"
    write_record(project.evidence, gpu)
    sentence = project.judge("good").sentence
    assert "The interpreter run (Triton not installed) failed" in sentence, sentence
    assert "the GPU run on NVIDIA H200 (torch not installed) failed" in sentence, sentence
    assert "Triton not installed interpreter" not in sentence and "Triton ," not in sentence
    assert "()" not in sentence and "  " not in sentence
