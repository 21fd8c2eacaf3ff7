"""Issue 48 items 2 and 3's data: the status line above a lesson (LessonStatus.headline) and whether a
PARTIALLY VERIFIED is so only by design (LessonStatus.by_design), both from the one judgement (judge/status.py).

The headline is at most HEADLINE_WORDS words (the page appends the link to the record, and the visible line
stays within 30), in a learner's words: no tool names, no gate or stretch vocabulary, the GPU named at most
once, what a run did not reach only as a short reason. It is held on every lesson's real evidence and on
records whose device names and counts are as hostile as the schema allows.
"""

from __future__ import annotations

import itertools
import re
import textwrap
from pathlib import Path

import pytest

from conftest import PASSING, REPO, bench, fake_record
from verified_triton.core import kit
from verified_triton.core.lessons import discover
from verified_triton.judge.evidence import (
    SanitizerFinding,
    SanitizerLocation,
    SanitizerRun,
    SanitizerToolRun,
    sanitize_key,
)
from verified_triton.judge.status import FAILED, HEADLINE_WORDS, PARTIAL, VERIFIED, judge, judge_records
from verified_triton.record.awaiting import load_awaiting

pytestmark = pytest.mark.unit

OLD = "0" * 64
# What the line must never say: the tools' names and the benchmark vocabulary of the record.
FORBIDDEN = re.compile(r"(?i)compute-sanitizer|memcheck|synccheck|initcheck|racecheck|sanitiz|\bgates?\b|stretch|"
                       r"TRITON_INTERPRET|cuBLAS")
GLUON_MAIN = "from kernels import copy_kernel  # noqa: F401\n" + textwrap.dedent(PASSING)
GLUON = """\
from triton.experimental import gluon


@gluon.jit
def copy_kernel(x_ptr):
    pass
"""


def words(line: str) -> int:
    return len(line.split())


def assert_learners_line(line: str) -> None:
    assert words(line) <= HEADLINE_WORDS, (words(line), line)
    assert not FORBIDDEN.search(line), line
    assert line[:1].isupper() and line.endswith(".") and "\n" not in line


# -- every lesson of the course ------------------------------------------------------------------

COURSE = discover(REPO / "code")


@pytest.mark.parametrize("lesson", COURSE, ids=[lesson.name for lesson in COURSE])
def test_every_lessons_line_is_short_plain_and_names_its_gpu_once(lesson):
    st = judge(lesson, REPO / "evidence")
    assert_learners_line(st.headline)
    gpus = {r.env.device_name for r in st.current if r.mode == "gpu"}
    for name in gpus:
        model = name.split()[1]  # "NVIDIA H200" -> H200, "NVIDIA H100 80GB HBM3" -> H100
        assert st.headline.count(model) <= 1 and "NVIDIA" not in st.headline
    assert st.headline.startswith({VERIFIED: "Verified:", FAILED: "Failed:"}.get(
        st.status, "Partly verified by design:" if st.by_design else "Partly verified:" if st.status is PARTIAL
        else ""))
    assert st.by_design <= (st.status is PARTIAL)
    if st.by_design:  # the reason is said, and it is a stop by design, never a missing piece of evidence
        assert "no Blackwell GPU yet" in st.headline or "Gluon has no interpreter" in st.headline
        assert not re.search(r"missing|incomplete|out of date|unexplained", st.headline), st.headline


def test_the_course_tells_a_partial_by_design_from_one_that_lacks_evidence():
    statuses = {lesson.name: judge(lesson, REPO / "evidence") for lesson in COURSE}
    # block-scaled-matmul declines below Blackwell: by design, with the reason in words.
    blocked = statuses["block-scaled-matmul"]
    entry = load_awaiting(REPO / "evidence").get("block-scaled-matmul")
    if entry is None or entry.source_hash != blocked.source_hash:  # its GPU run is of this source
        assert blocked.by_design and blocked.headline.endswith("no Blackwell GPU yet.")
    else:  # it waits for the GPU run of a changed source (evidence/awaiting-gpu.toml): said, not by design
        assert not blocked.by_design and "the GPU run is out of date" in blocked.headline
    for st in statuses.values():
        if st.status is PARTIAL and st.memory is not None and st.memory.state == "partial":
            assert not st.by_design and "the memory check" in st.headline, st.headline


# -- each case, on a fake lesson ------------------------------------------------------------------

@pytest.fixture
def lesson(project):
    project.add("good", PASSING)
    return project.lesson("good")


def memory(lesson, state: str = "clean", outcome: str = "passed", key: str = sanitize_key("NVIDIA H200"), **fields):
    """A sanitize record on an H200 whose four tools ended `state` (findings: one undeclared race in a lesson
    kernel; errors: a memcheck error in one)."""
    runs = []
    for tool in kit.SANITIZER_TOOLS:
        run = SanitizerToolRun(tool=tool, state="clean", command=f"tool {tool}", exit_code=0, app_outcome=outcome)
        if state == "incomplete" and tool == "racecheck":
            run.state, run.reason = "incomplete", "Internal Sanitizer Error"
        if state == "timeout" and tool == "initcheck":
            run.state, run.reason, run.exit_code = "timeout", "killed after the 60 s timeout", None
        if (state, tool) in (("findings", "racecheck"), ("errors", "memcheck")):
            where = SanitizerLocation("copy_kernel", "code/good/good.py", 3, "Write")
            kind = "race" if tool == "racecheck" else "memory-access"
            run.state, run.errors = "findings", 1
            run.findings = [SanitizerFinding(kind, f"a {kind}", [where], 1, 0, "Error" if kind == "race" else "")]
        runs.append(run)
    return fake_record(lesson, "sanitize", outcome, key=key,
                       sanitizer=SanitizerRun("2025.3.1.0", "smoke", runs, []), **fields)


def test_a_verified_lesson_says_where_when_and_how_many_checks_passed(lesson):
    both = [fake_record(lesson, "interpreter", started="2026-12-02T00:00:00Z"),
            fake_record(lesson, "gpu", started="2026-12-03T00:00:00Z")]
    st = judge_records(lesson, both)
    assert st.status is VERIFIED and not st.by_design
    assert st.headline == "Verified: ran on an H200 and under the interpreter, December 2026; both checks passed."
    st = judge_records(lesson, [*both, memory(lesson, started="2027-01-05T00:00:00Z")], memory_required=True)
    assert st.headline == ("Verified: ran on an H200 and under the interpreter, January 2027; both checks and the "
                           "memory check passed.")


@pytest.mark.parametrize("memory_state, reason", [
    ("incomplete", "the memory check is incomplete"),
    ("timeout", "the memory check is incomplete"),
    ("findings", "the memory check found something unexplained"),
    (None, "the memory check is missing"),
    ("old", "the memory check is out of date"),
])
def test_a_memory_check_that_lacks_evidence_is_a_short_reason_and_no_design(lesson, memory_state, reason):
    records = [fake_record(lesson, "interpreter"), fake_record(lesson, "gpu")]
    if memory_state == "old":
        records.append(memory(lesson, source_hash=OLD))
    elif memory_state is not None:
        records.append(memory(lesson, memory_state))
    st = judge_records(lesson, records, memory_required=True)
    assert st.status is PARTIAL and not st.by_design
    assert st.headline == (f"Partly verified: ran on an H200 and under the interpreter, January 2026; both checks "
                           f"passed; {reason}.")


def test_memory_errors_fail_the_lesson_in_plain_words(lesson):
    st = judge_records(lesson, [fake_record(lesson, "interpreter"), fake_record(lesson, "gpu"),
                                memory(lesson, "errors")], memory_required=True)
    assert st.status is FAILED and not st.by_design
    assert st.headline == ("Failed: ran on an H200 and under the interpreter, January 2026; both checks passed; "
                           "the memory check found errors.")


@pytest.mark.parametrize("outcome, exit_code, line", [
    # its failed check is counted with the interpreter's passed one
    ("failed", 1, "Failed: ran under the interpreter, January 2026; 1 of 2 checks failed."),
    ("timeout", None, "Failed: ran under the interpreter, January 2026; 1 of 2 checks failed; the run on an H100 "
                      "ran out of time."),
    ("crashed", -11, "Failed: ran under the interpreter, January 2026; 1 of 2 checks failed; the run on an H100 "
                     "crashed."),
    ("crashed-after-checks", -11, "Failed: ran under the interpreter, January 2026; 2 checks passed; the run on an "
                                  "H100 crashed."),
])
def test_a_failed_gpu_run_is_named_once_with_what_went_wrong(lesson, outcome, exit_code, line):
    passing = outcome.endswith("-after-checks")  # its checks passed before it crashed: not "all" of them
    outcome = outcome.removesuffix("-after-checks")
    gpu = fake_record(lesson, "gpu", outcome, exit_code=exit_code, device="NVIDIA H100 80GB HBM3",
                      reason="check result failed" if outcome == "failed" else "",
                      **({"checks": [kit.Check("c", "pass", "m")]} if passing else {}))
    st = judge_records(lesson, [fake_record(lesson, "interpreter"), gpu])
    assert st.status is FAILED and st.headline == line


def test_a_gate_missed_is_a_required_speed_target_and_a_goal_missed_is_a_speed_goal(lesson):
    missed_gate = fake_record(lesson, "gpu", "failed", exit_code=1, reason="gate b not met",
                              benchmarks=[bench("b", 0.5, threshold=1.0)], checks=[kit.Check("c", "pass", "m")])
    st = judge_records(lesson, [fake_record(lesson, "interpreter"), missed_gate])
    assert st.status is FAILED and st.headline.endswith(
        "both checks passed; the run on an H200 missed a required speed target.")
    goals = fake_record(lesson, "gpu", benchmarks=[bench("a", 0.5, threshold=1.0, gate=False),
                                                   bench("b", 1.5, threshold=1.0, stretch=2.0)])
    st = judge_records(lesson, [fake_record(lesson, "interpreter"), goals])
    assert st.status is VERIFIED and st.headline.endswith("both checks passed; 2 speed goals unmet.")
    assert_learners_line(st.headline)


def test_a_gluon_lesson_stopped_by_the_interpreter_is_partial_by_design(project):
    project.add("glu", GLUON_MAIN, files={"kernels.py": GLUON})
    lesson = project.lesson("glu")
    interp = fake_record(lesson, "interpreter", "by-design", exit_code=3, reason="Gluon kernels do not run here")
    st = judge_records(lesson, [interp, fake_record(lesson, "gpu"), memory(lesson)], memory_required=True)
    assert st.status is PARTIAL and st.by_design
    assert st.headline == ("Partly verified by design: ran on an H200 and under the interpreter, January 2026; both "
                           "checks and the memory check passed; Gluon has no interpreter.")
    # ...but not while its memory check is incomplete: that partial lacks evidence
    st = judge_records(lesson, [interp, fake_record(lesson, "gpu"), memory(lesson, "incomplete")],
                       memory_required=True)
    assert st.status is PARTIAL and not st.by_design
    assert st.headline.endswith("Gluon has no interpreter; the memory check is incomplete.")
    # a stop by design that ran no check is no verification of anything
    empty = fake_record(lesson, "interpreter", "by-design", exit_code=3, reason="stopped", checks=[])
    assert not judge_records(lesson, [empty, fake_record(lesson, "gpu")]).by_design


def test_a_gpu_below_the_lessons_capability_is_partial_by_design_naming_the_architecture(project):
    project.add("mx", PASSING, toml='[requires]\ncapability = "10.0"\nwhy = "tcgen05"\n')
    lesson = project.lesson("mx")
    declined = fake_record(lesson, "gpu", "by-design", exit_code=3, reason="needs compute capability 10.0")
    st = judge_records(lesson, [fake_record(lesson, "interpreter"), declined], memory_required=True)
    assert st.status is PARTIAL and st.by_design
    assert st.headline == ("Partly verified by design: ran under the interpreter, January 2026; 1 check passed; "
                           "no Blackwell GPU yet.")


@pytest.mark.parametrize("interp, gpu, line", [
    ("passed", None, "Partly verified: ran under the interpreter, January 2026; 1 check passed; a GPU run is "
                     "missing."),
    (None, "passed", "Partly verified: ran on an H200, January 2026; 1 check passed; an interpreter run is "
                     "missing."),
    ("passed", "old", "Partly verified: ran under the interpreter, January 2026; 1 check passed; the GPU run is "
                      "out of date."),
    ("old", "old", "Out of date: the lesson changed after its runs of January 2026; they need repeating."),
    (None, None, "Not verified yet: nothing has been recorded for this version; a GPU run is missing; an "
                 "interpreter run is missing."),
    ("failed", "failed", "Failed: no run passed for this version, January 2026; 2 of 2 checks failed."),
])
def test_missing_and_stale_runs(lesson, interp, gpu, line):
    records = [fake_record(lesson, mode, "failed" if state == "failed" else "passed", exit_code=int(state == "failed"),
                           source_hash=OLD if state == "old" else None)
               for mode, state in (("interpreter", interp), ("gpu", gpu)) if state is not None]
    st = judge_records(lesson, records)
    assert st.headline == line and not st.by_design


# -- hostile records ------------------------------------------------------------------------------

HOSTILE_DEVICES = [
    "NVIDIA H200",
    "x " * 29 + "x",  # 30 words in a 60-character name
    "memcheck racecheck compute-sanitizer gate stretch",
    "NVIDIA GeForce RTX 4090 24GB PCIe",
    "\u202e\u200b" * 30,
    "",
]
STATES = [None, "passed", "failed", "timeout", "crashed", "by-design", "old"]
EXITS = {"passed": 0, "failed": 1, "timeout": None, "crashed": -11, "by-design": 3, "old": 0}


def run_record(lesson, mode: str, state: str, device: str):
    outcome = "passed" if state == "old" else state
    checks = [kit.Check(f"c{i}", "fail" if outcome == "failed" and i == 0 else "pass", "m") for i in range(999)]
    return fake_record(lesson, mode, outcome, exit_code=EXITS[state], device=device,
                       source_hash=OLD if state == "old" else None, checks=checks,
                       reason="stopped by design " * 20 if outcome == "by-design" else "r " * 200,
                       benchmarks=[bench(f"b{i}", 0.5, threshold=1.0, gate=False, stretch=2.0)
                                   for i in range(5)] if outcome == "passed" and mode == "gpu" else [])


@pytest.mark.parametrize("device", HOSTILE_DEVICES, ids=range(len(HOSTILE_DEVICES)))
def test_every_combination_of_runs_memory_checks_and_hostile_devices_stays_within_the_bound(project, device):
    project.add("hostile", GLUON_MAIN, toml='[requires]\ncapability = "9.0"\nwhy = "x"\n', files={"kernels.py": GLUON})
    lesson = project.lesson("hostile")
    seen = set()
    for interp, gpu, mem in itertools.product(STATES, STATES, [None, "clean", "errors", "findings", "incomplete",
                                                                "old"]):
        records = [run_record(lesson, mode, state, device) for mode, state in (("interpreter", interp), ("gpu", gpu))
                   if state is not None]
        if mem is not None:
            records.append(memory(lesson, "clean" if mem == "old" else mem, source_hash=OLD if mem == "old" else None,
                                  env=fake_record(lesson, "gpu", device=device).env,
                                  key=sanitize_key(device)))
        st = judge_records(lesson, records, problems=["a.json: bad", "b.json: bad"], memory_required=True)
        assert_learners_line(st.headline)
        assert st.by_design <= (st.status is PARTIAL)
        seen.add(st.status)
    assert len(seen) == 5  # every badge was reached


def test_the_gpu_is_said_in_two_short_words_at_most(lesson):
    for device, said in [("NVIDIA H100 80GB HBM3", "an H100"), ("NVIDIA A100-SXM4-80GB", "an A100"),
                         ("NVIDIA GeForce RTX 4090", "an RTX 4090"), ("NVIDIA B200", "a B200"),
                         ("Tesla T4", "a T4"), ("NVIDIA L40S", "an L40S"), ("memcheck gate", "a GPU")]:
        st = judge_records(lesson, [fake_record(lesson, "interpreter"), fake_record(lesson, "gpu", device=device)])
        assert f"ran on {said} and under" in st.headline, (device, st.headline)


def test_the_line_is_in_the_status_json(project, lesson):
    for mode in ("interpreter", "gpu"):
        from verified_triton.judge.evidence import write_record

        write_record(project.evidence, fake_record(lesson, mode))
    from verified_triton.record.report import status_json

    [out] = status_json([judge(lesson, Path(project.evidence))])
    assert out["headline"].startswith("Verified: ran on an H200") and out["by_design"] is False


def test_the_publish_gate_refuses_exactly_the_partials_not_by_design(project):
    """One gate: `verify.py --check --publish` takes VERIFIED and PARTIALLY VERIFIED by design (the judgement's
    flag), and refuses every other PARTIALLY VERIFIED, whatever made it partial."""
    from verified_triton.author.verify import publish_problems

    project.add("hostile", GLUON_MAIN, toml='[requires]\ncapability = "9.0"\nwhy = "x"\n', files={"kernels.py": GLUON})
    lesson = project.lesson("hostile")
    partial = 0
    for interp, gpu, mem in itertools.product(STATES, STATES, [None, "clean", "findings", "incomplete", "old"]):
        records = [run_record(lesson, mode, state, "NVIDIA H200")
                   for mode, state in (("interpreter", interp), ("gpu", gpu)) if state is not None]
        if mem is not None:
            records.append(memory(lesson, "clean" if mem == "old" else mem, source_hash=OLD if mem == "old" else None))
        st = judge_records(lesson, records, memory_required=True)
        refused = publish_problems([st])
        assert bool(refused) == (st.status is PARTIAL and not st.by_design), (interp, gpu, mem, refused)
        partial += st.status is PARTIAL
    assert partial > 10
