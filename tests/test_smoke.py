"""Issue 26, Build 6: benchmark code runs on a CPU, so a typo in it fails before any GPU time is spent.

A smoke run (VT_SMOKE=1 under TRITON_INTERPRET=1; `verify.py --smoke`; tools/smoke.py) runs every step of a
lesson's main(), the GPU's too, on tiny inputs, each benchmarked function once, untimed. Every lesson of the
course runs through as one; a step with nothing a CPU can run says so in main() (`smoke=False` or a reason)
and is recorded as not run; nothing measured reaches the results. A typo in a benchmark fails the smoke run
at the lesson's FILE:LINE, where the interpreter run that verify records passes (the benchmark step never
ran there): the test shows both, so it fails without the smoke run. Nothing of a smoke run is ever evidence:
verify records none, even with VT_SMOKE=1 in its environment. The kit's side is in tests/test_kit.py.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys

import pytest

from conftest import KIT, REPO, base_env
from verified_triton.core.lessons import discover
from verified_triton.record.smoke import smoke_run

LESSONS = {lesson.name: lesson for lesson in discover(REPO / "code")}


def gpu_steps(lesson) -> dict[str, bool]:
    """Each step of main() that needs a GPU -> whether a smoke run runs it (no `smoke=` saying otherwise)."""
    tree = ast.parse(lesson.main.read_text(encoding="utf-8"))
    main = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "main")
    steps = {}
    for call in ast.walk(main):
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "step":
            keywords = {k.arg: k.value for k in call.keywords}
            if "needs_gpu" in keywords:
                smoke = keywords.get("smoke")
                steps[call.args[0].value] = smoke is None or (isinstance(smoke, ast.Constant) and smoke.value is True)
    return steps


@pytest.mark.e2e
@pytest.mark.parametrize("name", LESSONS)
def test_every_lesson_runs_its_gpu_steps_on_the_cpu_and_measures_nothing(smoke_runs, name):
    run = smoke_runs[name]
    assert run.ok, run.line()
    results = run.results
    assert results.smoke
    # What a smoke run cannot have measured is not in its results.
    assert results.benchmarks == [] and results.tables == [] and results.figures == []
    assert all(p.measured is None for p in results.predictions)
    # Every step that needs a GPU ran, unless main() says why a CPU cannot run it.
    recorded = {s.name: s.not_run for s in results.steps}
    expected = gpu_steps(LESSONS[name])
    assert expected, "every lesson has a step that needs a GPU"
    for step, runs in expected.items():
        assert step in recorded, f"{name}: step {step} was never reached"
        assert (recorded[step] == "") == runs, f"{name}: step {step}: {recorded[step] or 'ran'}"
    ran = [c for c in results.checks if c.name.startswith("smoke-")]
    if any(expected.values()):  # the benchmarks' code ran: one check each, every one passed
        assert ran and all(c.status == "pass" and "each ran once on tiny inputs, untimed" in c.message for c in ran)
    else:  # every GPU step keeps out (Gluon, float8): the reason is on record
        assert not ran and all(recorded[s] for s in expected)


BROKEN = '"torch": lambda: x + y,'  # in vector-add's lesson.py, its benchmark; a typo makes it x + yy


def copy_of_vector_add(root):
    (root / "code").mkdir(parents=True)
    shutil.copyfile(KIT, root / "code" / "lessonkit.py")
    shutil.copytree(REPO / "code" / "vector-add", root / "code" / "vector-add")
    return root / "code" / "vector-add" / "lesson.py"


@pytest.mark.e2e
def test_a_typo_in_benchmark_code_fails_the_smoke_run_at_the_lessons_file_and_line(tmp_path):
    main = copy_of_vector_add(tmp_path)
    text = main.read_text(encoding="utf-8")
    assert text.count(BROKEN) == 1
    main.write_text(text.replace(BROKEN, BROKEN.replace("x + y", "x + yy")), encoding="utf-8")
    line = text[:text.index(BROKEN)].count("\n") + 1
    # The interpreter run verify records never runs the benchmark step: the typo passes it.
    plain = subprocess.run([sys.executable, main.name], cwd=main.parent, capture_output=True, text=True,
                           env=base_env(TRITON_INTERPRET="1", MPLBACKEND="Agg"), timeout=300)
    assert plain.returncode == 0, plain.stderr[-2000:]
    [lesson] = discover(tmp_path / "code")
    run = smoke_run(lesson)
    assert run.outcome == "failed"
    assert run.where == f"code/vector-add/lesson.py:{line}"
    assert run.error == "NameError: name 'yy' is not defined"
    assert run.line() == ("smoke vector-add: FAILED at code/vector-add/lesson.py:"
                          f"{line}: NameError: name 'yy' is not defined")


SMOKED = """\
    lesson = Lesson("{name}")
    lesson.device()
    if lesson.step("benchmark", needs_gpu="timings need a GPU"):
        print("smoke run:", lesson.smoke)
        {body}
    sys.exit(lesson.finish())
"""


def fake_kit_lesson(project, name: str, body: str) -> None:
    project.add(name, SMOKED.format(name=name, body=body), files={})


@pytest.mark.integration
def test_verify_smoke_names_each_failure_at_its_line_and_records_nothing(project):
    fake_kit_lesson(project, "good", 'lesson.check("fine", True)')
    fake_kit_lesson(project, "bad", "lesson.check('fine', Tru)")
    line = project.main_file("bad").read_text().splitlines().index("    lesson.check('fine', Tru)") + 1
    before = project.files()
    result = project.verify("--smoke", timeout=300)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "smoke good: passed" in result.stdout
    assert f"smoke bad: FAILED at code/bad/bad.py:{line}: NameError: name 'Tru' is not defined" in result.stdout
    assert "smoke: 1 of 2 lessons" in result.stdout
    assert project.files() == before == {}  # a smoke run is no evidence


@pytest.mark.integration
def test_verify_never_records_a_smoke_run_even_with_vt_smoke_set(project):
    fake_kit_lesson(project, "good", 'lesson.check("fine", True)')
    result = project.verify("--mode", "interpreter", timeout=300, VT_SMOKE="1")
    assert result.returncode == 0, result.stdout + result.stderr
    record = project.record("good")
    assert [(s.name, s.not_run) for s in record.steps] == [("benchmark", "timings need a GPU")]
    assert "smoke run:" not in record.stdout


@pytest.mark.integration
@pytest.mark.parametrize("args", [["--smoke", "--check"], ["--smoke", "--force"], ["--smoke", "--compare"]])
def test_smoke_is_a_job_of_its_own(project, args):
    result = project.verify(*args)
    assert result.returncode == 2 and "--smoke" in result.stderr


@pytest.mark.unit
def test_the_guide_says_how_to_run_a_smoke_run_and_how_a_lesson_takes_part():
    guide = (REPO / "docs" / "writing-a-lesson.md").read_text(encoding="utf-8")
    for phrase in ("verify.py --smoke", "lesson.size(gpu=", "smoke=False", "not_on_interpreter"):
        assert phrase in guide, phrase
