"""The exercises' proof, judged (judge/exercises.py) and folded into the badge (issue 50 item 4).

A record says what each attempt printed; the judge derives whether each declared mistake was caught (its check
failed and said the declared words), never reading a claim. A checker that lets a mistake through, a solution
that fails, a starter that passes, too few exercises or mistakes: FAILED. Exercises changed since their proof,
or never proven: the lesson is not VERIFIED and --check names it. The record is untrusted input: bounded, read
through the schema. The committed evidence of every converted lesson is judged passed.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from conftest import REPO, fake_record
from converted import CONVERTED
from verified_triton.core.lessons import discover, exercise_file_hashes, exercise_hash, load_lesson
from verified_triton.judge.exercises import (
    Attempt,
    ExerciseResult,
    ExercisesRecord,
    MistakeResult,
    ProofEnv,
    judge_exercises,
    record_path,
    write_exercises,
)
from verified_triton.judge.status import FAILED, PARTIAL, VERIFIED, judge, judge_records
from verified_triton.record.report import check_problems, status_json

pytestmark = pytest.mark.unit


@pytest.fixture
def lesson(project):
    folder = project.add("drill", 'lesson = Lesson("drill")\nsys.exit(lesson.finish())\n',
                         files={"exercises.py": "import practice\n", "solutions.py": "MISTAKES = {}\n"})
    assert (folder / "exercises.py").is_file()
    return load_lesson(folder)


def mistake(name: str, says: str = "never written", status: str = "failed", message: str = "") -> MistakeResult:
    return MistakeResult(name, "a", "b", says, status, message or f"out: {says} at 3 elements. Hint: h")


def exercise(name: str, **change) -> ExerciseResult:
    base = ExerciseResult(name, "a hint", "", Attempt("failed", "out: never written. Hint: h"), Attempt("passed"),
                          [mistake("no mask", "wrote past the end"), mistake("floor division")])
    return replace(base, **change)


def record(lesson, exercises=None, **change) -> ExercisesRecord:
    base = ExercisesRecord(lesson=lesson.name, outcome="completed", exit_code=0, reason="",
                           started_utc="2026-12-07T10:00:00Z", wall_s=3.0, command="proof",
                           source_hash=exercise_hash(lesson), source_files=exercise_file_hashes(lesson),
                           env=ProofEnv("3.11.7", "2.13.0", "3.9.0"),
                           exercises=exercises if exercises is not None else [exercise("one"), exercise("two")])
    return replace(base, **change)


def write_raw(project, lesson, raw: dict) -> None:
    path = record_path(project.evidence, lesson.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(raw))


def judged(project, lesson, rec):
    write_exercises(project.evidence, rec)
    return judge_exercises(lesson, project.evidence)


def test_a_proof_whose_checks_catch_every_declared_mistake_passes(project, lesson):
    st = judged(project, lesson, record(lesson))
    assert st.state == "passed", st.problems
    assert st.caught() == (4, 4)
    assert st.phrase == "the checks of its 2 exercises catch 4 of 4 listed mistakes (proven on 2026-12-07)"
    assert st.json()[0] == {"name": "one", "needs_gpu": "", "solution": "passed", "starter": "failed",
                            "mistakes": [{"name": "no mask", "caught": True,
                                          "message": "out: wrote past the end at 3 elements. Hint: h"},
                                         {"name": "floor division", "caught": True,
                                          "message": "out: never written at 3 elements. Hint: h"}]}


@pytest.mark.parametrize("what, change, says", [
    ("a mistake let through", {"mistakes": [mistake("no mask", status="passed", message=""), mistake("b")]},
     "the check lets the mistake 'no mask' through"),
    ("a mistake caught for the wrong reason", {"mistakes": [mistake("no mask", "wrote past the end",
                                                                    message="out: never written"), mistake("b")]},
     "it should fail saying 'wrote past the end'"),
    ("a declaration that cannot load", {"mistakes": [mistake("x", status="error", message="occurs 2 times"),
                                                     mistake("b")]}, "the check lets the mistake 'x' through"),
    ("a failing solution", {"solution": Attempt("failed", "wrong")}, "the solution fails its own check"),
    ("a passing starter", {"starter": Attempt("passed")}, "the starter passes its check"),
    ("one mistake only", {"mistakes": [mistake("b")]}, "declares 1 mistake(s); each declares at least 2"),
])
def test_a_checker_not_proven_is_a_failed_check_of_the_lesson(project, lesson, what, change, says):
    st = judged(project, lesson, record(lesson, [exercise("one", **change), exercise("two")]))
    assert st.state == "failed", what
    assert any(says in p for p in st.problems), st.problems


def test_a_caught_claim_is_never_read_from_the_record(project, lesson):
    raw = json.loads(record(lesson).to_json())
    raw["exercises"][0]["mistakes"][0]["caught"] = True
    write_raw(project, lesson, raw)
    st = judge_exercises(lesson, project.evidence)
    assert st.state == "none" and "unknown field 'caught'" in st.problems[0]


def test_fewer_than_two_exercises_under_the_interpreter_fail(project, lesson):
    gpu = exercise("gluon", needs_gpu="Gluon has no interpreter", starter=Attempt("needs a GPU", "Gluon"),
                   solution=Attempt("needs a GPU", "Gluon"),
                   mistakes=[mistake("a", status="needs a GPU"), mistake("b", status="needs a GPU")])
    st = judged(project, lesson, record(lesson, [gpu, exercise("one")]))
    assert st.state == "failed" and "1 exercise(s) run under the interpreter" in st.problems[0]
    st = judged(project, lesson, record(lesson, [gpu, exercise("one"), exercise("two")]))
    assert st.state == "passed" and st.caught() == (4, 4) and st.phrase.endswith("; gluon runs on a GPU only")
    assert st.json()[0]["mistakes"][0]["caught"] is None  # not proven here, neither caught nor missed


def test_a_proof_that_did_not_complete_fails(project, lesson):
    st = judged(project, lesson, record(lesson, [], outcome="failed", exit_code=1, reason="exit 1: SyntaxError"))
    assert st.state == "failed" and "exit 1: SyntaxError" in st.phrase


def test_changed_exercises_make_the_proof_stale_and_no_record_is_none(project, lesson):
    assert judge_exercises(lesson, project.evidence).state == "none"
    judged(project, lesson, record(lesson))
    (lesson.folder / "solutions.py").write_text("MISTAKES = {'one': []}\n")
    st = judge_exercises(lesson, project.evidence)
    assert st.state == "stale" and "code/drill/solutions.py" in st.problems[0]


@pytest.mark.parametrize("field, value, says", [
    ("exercises", [json.loads(json.dumps(exercise("x").__dict__, default=vars))] * 60, "over the limit of 50"),
    ("source_hash", "not a hash", "expected 64 hex digits"),
    ("started_utc", "yesterday", "expected YYYY-MM-DDTHH:MM:SSZ"),
    ("outcome", "passed", "not one of"),
])
def test_an_exercises_record_is_bounded_and_read_through_the_schema(project, lesson, field, value, says):
    raw = json.loads(record(lesson).to_json())
    raw[field] = value
    write_raw(project, lesson, raw)
    st = judge_exercises(lesson, project.evidence)
    assert st.state == "none" and says in st.problems[0], st.problems


def test_the_badge_reads_the_exercises_proof_as_the_interpreter_run(project, lesson):
    interp = fake_record(lesson, "interpreter")
    gpu = fake_record(lesson, "gpu")
    judged(project, lesson, record(lesson))
    passed = judge_exercises(lesson, project.evidence)
    assert judge_records(lesson, [interp, gpu], exercises=passed).status is VERIFIED
    stale = replace(passed, state="stale")
    st = judge_records(lesson, [interp, gpu], exercises=stale)
    assert st.status is PARTIAL and "its exercises changed since checked" in st.headline
    failed = judged(project, lesson, record(lesson, [exercise("one", starter=Attempt("passed")), exercise("two")]))
    st = judge_records(lesson, [interp, gpu], exercises=failed)
    assert st.status is FAILED and "the starter passes its check" in st.sentence
    assert st.modes["interpreter"].state == "passed", "the run itself stays as it was recorded"


def test_check_names_the_exercises_and_status_json_lists_them(project, lesson):
    judged(project, lesson, record(lesson, [exercise("one", solution=Attempt("failed", "x")), exercise("two")]))
    st = judge(lesson, project.evidence)
    assert st.problems == [], "exercises.json beside the run records is no run record"
    assert any("drill: exercises failed: exercise one: the solution fails its own check" in p
               for p in check_problems([st]))
    shown = status_json([st])[0]
    assert shown["exercises_state"] == "failed" and shown["exercises"][0]["solution"] == "failed"
    assert [m["caught"] for m in shown["exercises"][1]["mistakes"]] == [True, True]


@pytest.mark.parametrize("name", CONVERTED)
def test_every_converted_lessons_committed_proof_passes(name):
    lesson = next(x for x in discover(REPO / "code") if x.name == name)
    st = judge_exercises(lesson, REPO / "evidence")
    assert st.state == "passed", st.problems or st.phrase
    here = [e for e in st.exercises if not e.needs_gpu]
    assert len(here) >= 2 and all(len(e.mistakes) >= 2 and all(m.caught for m in e.mistakes) for e in here)
    assert all(e.starter == "failed" and e.solution == "passed" for e in here)
