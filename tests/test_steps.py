"""Issue 22: every output under the step that made it.

The kit records main()'s named steps (`with lesson.step(NAME):`, `if lesson.step(NAME, needs_gpu=...)`):
each step's own output, bounded, and the step of every check, table, benchmark and figure; a step the
interpreter skips is still recorded, with its reason. tools/lesson_source.py reads the steps from the source
without running it, and refuses a main() the notebook could not run step by step, at FILE:LINE. On a page,
`::step NAME` shows each recorded run's output of that step, and a name main() does not have fails the build
at the page's FILE:LINE. Before this issue none of it existed: every test here fails on the old kit (no
`step`), the old tools (no lesson_source, no `::step`) or the old records (no `steps`).
"""

from __future__ import annotations

import json
import sys

import pytest

from conftest import build_output
from verified_triton.core import kit
from verified_triton.site import lesson_source

Lesson = kit.kit.Lesson


@pytest.fixture
def recording(tmp_path, monkeypatch):
    """A Lesson whose results go to a file, as under verify; returns (lesson factory, results reader)."""
    path = tmp_path / "results.json"
    monkeypatch.setenv("VT_RESULTS", str(path))
    monkeypatch.setenv("VT_FIGURES", str(tmp_path / "figures"))
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    return lambda: json.loads(path.read_text())


# -- the kit -----------------------------------------------------------------------------------

@pytest.mark.unit
def test_a_step_keeps_what_it_printed_and_owns_its_results(recording, capsys):
    stdout = sys.stdout
    lesson = Lesson("steps")
    print("before any step")
    with lesson.step("first"):
        print("one")
        lesson.check("a", True, "fine")
    print("between the steps")
    if lesson.step("second"):
        print("two")
        lesson.table("t", ["c"], [[1]])
    lesson.skip("after", "outside")  # still inside "second": an if-step lasts until the next step or finish
    assert lesson.finish() == 0
    assert sys.stdout is stdout, "the kit gives sys.stdout back"
    results = recording()
    steps = {s["name"]: s for s in results["steps"]}
    assert list(steps) == ["first", "second"]
    assert steps["first"]["stdout"] == "one\n  check a: PASS (fine)\n"
    assert steps["second"]["stdout"].startswith("two\n") and "between" not in steps["second"]["stdout"]
    assert [(c["name"], c["step"]) for c in results["checks"]] == [("a", "first"), ("after", "second")]
    assert results["tables"][0]["step"] == "second"
    printed = capsys.readouterr().out
    assert "before any step" in printed and "== first ==" in printed and "one" in printed  # still printed


@pytest.mark.unit
def test_a_gpu_step_is_recorded_but_not_run_under_the_interpreter(recording, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    lesson = Lesson("steps")
    ran = []
    if lesson.step("benchmark", needs_gpu="timings need a GPU"):
        ran.append(True)
    with lesson.step("after"):
        lesson.check("b", True)
    lesson.finish()
    assert not ran
    results = recording()
    assert results["steps"][0] == {"name": "benchmark", "stdout": "", "stdout_omitted": 0,
                                   "not_run": "timings need a GPU", "raised": False}
    assert {"part": "step benchmark", "reason": "timings need a GPU"} in results["skipped_parts"]
    assert results["checks"][0]["step"] == "after"
    with pytest.raises(RuntimeError, match="needs a GPU: write it as `if lesson.step"):
        with lesson.step("wrong", needs_gpu="a with-block cannot be skipped"):
            pass


@pytest.mark.unit
def test_a_gpu_step_runs_on_a_gpu(recording):
    lesson = Lesson("steps")
    assert lesson.step("benchmark", needs_gpu="timings need a GPU")
    assert recording()["steps"][0]["not_run"] == ""


@pytest.mark.unit
@pytest.mark.parametrize("name", ["Check sizes", "", "a/b", "x" * 61, "-lead", "two--dashes"])
def test_step_names_are_region_like(recording, name):
    with pytest.raises(ValueError, match="lower-case letters, digits and '-'"):
        Lesson("steps").step(name)


@pytest.mark.unit
def test_a_step_started_twice_is_refused_when_recording(recording):
    lesson = Lesson("steps")
    lesson.step("once")
    with pytest.raises(ValueError, match="started twice"):
        lesson.step("once")


@pytest.mark.unit
def test_a_steps_output_is_bounded_head_and_tail(recording):
    lesson = Lesson("steps")
    with lesson.step("loud"):
        print("FIRST LINE")
        for i in range(20000):
            print(f"line {i:05d} " + "x" * 20)
        print("LAST LINE")
    step = recording()["steps"][0]
    assert len(step["stdout"]) <= kit.kit.STEP_OUTPUT_KEPT + 100
    assert step["stdout"].startswith("FIRST LINE") and step["stdout"].endswith("LAST LINE\n")
    assert step["stdout_omitted"] > 500_000 and f"[... {step['stdout_omitted']} characters omitted ...]" \
        in step["stdout"]


@pytest.mark.integration
def test_verify_records_steps_and_the_record_reads_them_back(project):
    project.add("stepped", """\
        def main():
            lesson = Lesson("stepped")
            with lesson.step("checks"):
                print("checking")
                lesson.check("one", True)
            if lesson.step("timing", needs_gpu="timings need a GPU"):
                print("timing")
            return lesson.finish()


        sys.exit(main())
    """)
    result = project.verify("--mode", "interpreter")
    assert result.returncode == 0, result.stdout + result.stderr
    record = project.record("stepped")
    assert [(s.name, s.stdout, s.not_run) for s in record.steps] == [
        ("checks", "checking\n  check one: PASS\n", ""), ("timing", "", "timings need a GPU")]
    assert record.checks[0].step == "checks"
    assert "== checks ==" in record.stdout  # the whole log names the steps too


@pytest.mark.integration
def test_the_run_summary_counts_the_steps_not_run_here(project):
    """Before: an interpreter run of fp16-matmul printed "0 skipped" although three steps were not run,
    in the kit's last line and in verify's summary (whose note was empty)."""
    project.add("stepped", """\
        def main():
            lesson = Lesson("stepped")
            with lesson.step("checks"):
                lesson.check("one", True)
                if not lesson.not_on_interpreter("fp8 reference", "the interpreter has no float8"):
                    print("fp8")
            if lesson.step("compiled-code", needs_gpu="the interpreter compiles no PTX"):
                print("ptx")
            if lesson.step("timing", needs_gpu="timings need a GPU"):
                print("timing")
            return lesson.finish()


        sys.exit(main())
    """)
    result = project.verify("--mode", "interpreter")
    assert result.returncode == 0, result.stdout + result.stderr
    said = "2 steps not run here (compiled-code, timing); 1 part not run here (fp8 reference)"
    assert f"stepped: 1 check passed, 0 failed, 0 skipped; {said}; 0 benchmarks" in project.record("stepped").stdout
    row = next(line for line in result.stdout.splitlines() if line.startswith("stepped "))
    assert row.split()[2] == "passed" and row.endswith(said), row


@pytest.mark.integration
def test_old_records_without_steps_still_read_and_bad_step_names_are_refused(project):
    from verified_triton.judge.evidence import EvidenceError, read_record

    project.add("plain", "lesson = Lesson('plain')\nlesson.check('x', True)\nsys.exit(lesson.finish())\n")
    assert project.verify("--mode", "interpreter").returncode == 0
    path = project.record_file("plain")
    raw = json.loads(path.read_text())
    del raw["steps"]
    for check in raw["checks"]:
        del check["step"]
    path.write_text(json.dumps(raw))
    assert read_record(path, project.evidence).steps == []  # a record from before steps existed
    for change, field in (({"steps": [{"name": "Bad Name"}]}, "steps[0].name"),
                          ({"steps": [{"name": "a"}, {"name": "a"}]}, "steps[1].name"),
                          ({"checks": [{"name": "x", "status": "pass", "step": "ghost"}]}, "checks[0].step")):
        path.write_text(json.dumps({**raw, **change}))
        with pytest.raises(EvidenceError, match=field.replace("[", r"\[").replace("]", r"\]")):
            read_record(path, project.evidence)


# -- reading the steps from the source --------------------------------------------------------------

SOURCE = '''\
"""A lesson."""
import sys


def check(lesson):
    lesson.check("x", True)


def main() -> int:
    lesson = Lesson("x")
    device = lesson.device()
    with lesson.step("first"):
        check(lesson)
    tile = 64  # belongs to the next step
    if lesson.step("second", needs_gpu="timings need a GPU"):
        print(tile)
    return lesson.finish()


if __name__ == "__main__":
    sys.exit(main())
'''


@pytest.mark.unit
def test_steps_are_read_from_main_without_running_it():
    source = lesson_source.parse(SOURCE, "code/x/x.py")
    steps = source.steps
    assert [(s.name, s.line, s.needs_gpu) for s in steps.steps] == [("first", 12, ""),
                                                                      ("second", 15, "timings need a GPU")]
    assert steps.start == 'lesson = Lesson("x")\ndevice = lesson.device()'
    assert steps.steps[0].code == 'with lesson.step("first"):\n    check(lesson)'
    assert steps.steps[1].code.startswith("tile = 64  # belongs to the next step\nif lesson.step(")
    assert steps.end == "exit_code = lesson.finish()  # the script ends with sys.exit(main())"
    assert {n.name: n.kind for n in source.nodes} == {"Expr": "docstring", "Import": "prelude", "check": "code",
                                                      "main": "main", "If": "guard"}
    assert source.closure(steps.steps[0].mentions) == {2}  # check()


@pytest.mark.unit
@pytest.mark.parametrize("body, line, message", [
    ("    if lesson.interpret:\n        return lesson.finish()\n", 6, "returns before its end"),
    ("    for i in range(2):\n        with lesson.step('loop'):\n            pass\n", 6, "statement of main() itself"),
    ("    name = 'x'\n    with lesson.step(name):\n        pass\n", 6, "string literal"),
    ("    with lesson.step('twice'):\n        pass\n    with lesson.step('twice'):\n        pass\n", 7,
     "again (first at line 5)"),
    ("    with lesson.step('Bad'):\n        pass\n", 5, "lower-case"),
])
def test_a_main_the_notebook_cannot_run_step_by_step_is_an_error_at_its_line(body, line, message):
    text = ("def main():\n    lesson = Lesson('x')\n    with lesson.step('ok'):\n        pass\n"
            + body + "    return lesson.finish()\n")
    with pytest.raises(lesson_source.SourceError) as exc:
        lesson_source.parse(text, "code/x/x.py")
    assert f"code/x/x.py:{line}:" in str(exc.value) and message in str(exc.value)


@pytest.mark.unit
def test_a_main_without_steps_is_read_as_it_is():
    source = lesson_source.parse("def main():\n    return 0\n", "code/x/x.py")
    assert source.steps is None and source.main is not None


# -- ::step on a page ----------------------------------------------------------------------------------

STEPPED = '''\
import sys
from pathlib import Path

# lessonkit.py sits beside this file in a download, one folder up in the repository.
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]
from lessonkit import Lesson  # noqa: E402


# snippet: kernel
def kernel():
    return 1
# end snippet


def main() -> int:
    lesson = Lesson("LESSON")
    with lesson.step("checks"):
        lesson.check("one", kernel() == 1)
    if lesson.step("timing", needs_gpu="timings need a GPU"):
        print("timed")
    return lesson.finish()


if __name__ == "__main__":
    sys.exit(main())
'''

STEPPED_PAGE = """\
---
lesson: LESSON
---

# Stepped

::snippet code/LESSON/LESSON_PY kernel

::step checks

## Timing

::step timing

## Output

::output
"""


def stepped(site_project, name: str = "stepped", page: str = STEPPED_PAGE):
    return site_project.add_lesson(name, page.replace("LESSON_PY", f"{name}.py").replace("LESSON", name),
                                   source=STEPPED.replace("LESSON", name))


def expand(site_project, name: str, markdown: str) -> str:
    from verified_triton.site import directives

    site = directives.Site.load(site_project.code, site_project.evidence)
    page = directives.Page(site, f"lessons/{name}.md", site.status(name))
    return directives.expand_page(markdown, page)


@pytest.mark.unit
def test_step_shows_each_records_output_of_that_step(site_project):
    from verified_triton.core.kit import Step

    stepped(site_project)
    site_project.write(site_project.make_record(
        "stepped", steps=[Step("checks", "  check one: PASS <b>bold</b>\n"),
                          Step("timing", "", 0, "timings need a GPU")]))
    site_project.write(site_project.make_record(
        "stepped", mode="gpu", steps=[Step("checks", "gpu checks ran\n"), Step("timing", "12.5 ms\n")]))
    checks = expand(site_project, "stepped", "::step checks")
    # "GPU": a lesson page names the GPU's model once, in its status line (issue 51)
    assert checks.index('=== "GPU"') < checks.index('=== "Interpreter (CPU)"') and "Fake GPU" not in checks
    assert "gpu checks ran" in checks and "  check one: PASS <b>bold</b>" in checks  # in code blocks: shown as is
    assert "12.5 ms" not in checks, "only this step's output"
    timing = expand(site_project, "stepped", "::step timing")
    assert "12.5 ms" in timing and "Not run here: timings need a GPU." in timing


@pytest.mark.unit
def test_a_record_from_before_steps_says_so(site_project):
    stepped(site_project)
    site_project.write(site_project.make_record("stepped", mode="gpu", stdout="the whole log\n"))
    out = expand(site_project, "stepped", "::step checks")
    assert "recorded before the kit kept its output step by step" in out and "the whole log" not in out


@pytest.mark.unit
def test_a_run_that_stopped_before_a_step_says_so(site_project):
    from verified_triton.core.kit import Step

    stepped(site_project)
    site_project.write(site_project.make_record("stepped", mode="gpu", outcome="by-design", exit_code=3,
                                                reason="needs compute capability 10.0"))
    site_project.write(site_project.make_record("stepped", outcome="failed", exit_code=1, reason="check one",
                                                steps=[Step("checks", "boom\n")]))
    out = expand(site_project, "stepped", "::step timing")
    assert "The run stopped by design before this step: needs compute capability 10.0." in out
    assert "The run stopped before this step (failed: check one)." in out
    assert "recorded before the kit kept" not in out


@pytest.mark.unit
def test_the_step_that_raised_shows_the_exception_once(site_project):
    """Before: the step whose exception ended the run showed "(the step printed nothing)"."""
    from verified_triton.core.kit import Step

    stepped(site_project)
    cause = "ZeroDivisionError at code/stepped/stepped.py:12 (division by zero)"
    site_project.write(site_project.make_record("stepped", outcome="failed", exit_code=1, reason=cause,
                                                steps=[Step("checks", "", raised=True)]))
    out = expand(site_project, "stepped", "::step checks")
    assert "(the step printed nothing)" not in out
    assert out.count("ZeroDivisionError") == 1 and "The run ended in this step: ZeroDivisionError at " in out
    assert "division by zero" in out
    site_project.write(site_project.make_record("stepped", outcome="failed", exit_code=1, reason=cause,
                                                steps=[Step("checks", "printed before it\n", raised=True)]))
    out = expand(site_project, "stepped", "::step checks")
    assert "printed before it" in out and out.count("ZeroDivisionError") == 1


@pytest.mark.unit
def test_a_passed_current_record_missing_the_step_is_an_error(site_project):
    from verified_triton.core.kit import Step
    from verified_triton.site import directives

    stepped(site_project)
    site_project.write(site_project.make_record("stepped", steps=[Step("checks", "")]))
    with pytest.raises(directives.PageError, match="has no step 'timing'.*re-record it"):
        expand(site_project, "stepped", "::step timing")


@pytest.mark.integration
def test_a_step_main_does_not_have_fails_the_build_at_the_page_line(site_project):
    stepped(site_project, page=STEPPED_PAGE.replace("::step timing", "::step timings"))
    result = site_project.build()
    output = build_output(result)
    assert result.returncode != 0
    assert "docs/lessons/stepped.md:13: '::step timings': main() in stepped.py has no step of that name " \
           "(steps: checks, timing)" in output, output
    assert "Traceback" not in output


@pytest.mark.integration
def test_steps_render_on_the_built_page(site_project):
    from verified_triton.core.kit import Step

    stepped(site_project)
    site_project.write(site_project.make_record("stepped", steps=[Step("checks", "checked here\n"),
                                                                  Step("timing", "", 0, "timings need a GPU")]))
    result = site_project.build()
    assert result.returncode == 0, build_output(result)
    html = site_project.html("stepped")
    timing = html[html.index('id="timing"'):html.index('id="output"')]
    assert "Not run here: timings need a GPU." in timing
    checks = html[:html.index('id="timing"')]
    assert "checked here" in checks and 'class="vt-step-label"' in checks
