"""status.judge: one badge and one sentence from a lesson's records and its current source."""

from __future__ import annotations

import pytest

from conftest import PASSING, fake_record
from evidence import Benchmark, write_record
from status import FAILED, PARTIAL, STALE, STATUSES, UNVERIFIED, VERIFIED, judge

OLD = "0" * 64  # the hash of some earlier source


@pytest.fixture
def lesson(project):
    project.add("good", PASSING)
    return project.lesson("good")


def put(project, lesson, mode, outcome="passed", **kw):
    write_record(project.evidence, fake_record(lesson, mode, outcome, **kw))


# (interpreter record, GPU record) -> status; None = no record, "old-..." = for an older source.
CASES = [
    (None, None, UNVERIFIED),
    ("passed", None, PARTIAL),
    (None, "passed", PARTIAL),
    ("passed", "passed", VERIFIED),
    ("passed", "failed", FAILED),
    ("failed", "passed", FAILED),
    ("timeout", "passed", FAILED),
    ("passed", "crashed", FAILED),
    ("old-passed", None, STALE),
    ("old-passed", "old-passed", STALE),
    ("old-failed", None, STALE),  # an old failure is not a current one
    ("old-passed", "passed", PARTIAL),
    ("passed", "old-passed", PARTIAL),
    ("old-passed", "failed", FAILED),
    ("by-design", None, UNVERIFIED),
    ("by-design", "passed", PARTIAL),
    ("passed", "by-design", PARTIAL),
]


@pytest.mark.parametrize("interp, gpu, expected", CASES, ids=[f"{i}-{g}" for i, g, _ in CASES])
def test_status_rules(project, lesson, interp, gpu, expected):
    for mode, state in (("interpreter", interp), ("gpu", gpu)):
        if state is None:
            continue
        old = state.startswith("old-")
        outcome = state.removeprefix("old-")
        put(project, lesson, mode, outcome, source_hash=OLD if old else None,
            exit_code=None if outcome == "timeout" else (0 if outcome == "passed" else 1),
            reason="by design" if outcome == "by-design" else "")
    st = judge(lesson, project.evidence)
    assert st.status == expected
    assert st.status in STATUSES
    assert st.sentence.startswith(f"{expected}: ") and st.sentence.endswith(".")


def test_unsupported_interpreter_is_set_aside(project):
    project.add("tma", PASSING, toml='[interpreter]\nsupported = false\nreason = "TMA needs a GPU"\n')
    lesson = project.lesson("tma")
    st = judge(lesson, project.evidence)
    assert st.status == UNVERIFIED and "TMA needs a GPU" in st.sentence
    put(project, lesson, "gpu")
    st = judge(lesson, project.evidence)
    assert st.status == VERIFIED
    assert st.modes["interpreter"].state == "not-supported"
    put(project, lesson, "gpu", "failed", device="NVIDIA A100")
    assert judge(lesson, project.evidence).status == FAILED


def test_a_failure_on_any_gpu_model_fails_the_lesson(project, lesson):
    put(project, lesson, "interpreter")
    put(project, lesson, "gpu", device="NVIDIA H200", started="2026-03-01T00:00:00Z")
    put(project, lesson, "gpu", "failed", device="NVIDIA A100", started="2026-01-01T00:00:00Z", reason="too slow")
    st = judge(lesson, project.evidence)
    assert st.status == FAILED
    assert "NVIDIA A100" in st.sentence and "too slow" in st.sentence


def test_sentences_say_what_happened(project, lesson):
    put(project, lesson, "interpreter", "timeout", exit_code=None, wall_s=301.2)
    put(project, lesson, "gpu", "crashed", exit_code=-11, reason="killed by signal SIGSEGV")
    st = judge(lesson, project.evidence)
    assert "interpreter run timed out after 301 s on 2026-01-02" in st.sentence
    assert "GPU run on NVIDIA H200" in st.sentence and "crashed (killed by signal SIGSEGV)" in st.sentence


def test_stale_sentence_names_the_date(project, lesson):
    put(project, lesson, "interpreter", source_hash=OLD, started="2025-12-24T10:00:00Z")
    st = judge(lesson, project.evidence)
    assert st.status == STALE
    assert "recorded on 2025-12-24 was for an older source" in st.sentence
    assert "GPU run has not been recorded" in st.sentence
    assert st.current_records == [] and len(st.records) == 1


def test_newest_current_pass_is_the_one_reported(project, lesson):
    put(project, lesson, "gpu", device="NVIDIA H100", started="2026-01-01T00:00:00Z")
    put(project, lesson, "gpu", device="NVIDIA H200", started="2026-02-01T00:00:00Z")
    st = judge(lesson, project.evidence)
    assert st.modes["gpu"].record.env.device_name == "NVIDIA H200"
    assert "2026-02-01" in st.sentence


def test_goals_that_do_not_gate_are_reported_when_missed(project, lesson):
    put(project, lesson, "interpreter")
    put(project, lesson, "gpu", benchmarks=[
        Benchmark("vs-cublas", measured=80, baseline=100, unit="TFLOP/s", ratio=0.8, threshold=0.9,
                  gate=False, met=False),
        Benchmark("vs-torch", measured=120, baseline=100, unit="TFLOP/s", ratio=1.2, threshold=1.0,
                  met=True, stretch=1.5, stretch_met=False),
        Benchmark("met-all", measured=2, baseline=1, unit="x", ratio=2.0, threshold=1.0, met=True,
                  stretch=1.5, stretch_met=True),
    ])
    st = judge(lesson, project.evidence)
    assert st.status == VERIFIED
    assert "vs-cublas reached 0.80x against a 0.90x goal" in st.sentence
    assert "vs-torch reached 1.20x against a 1.50x stretch goal" in st.sentence
    assert "met-all" not in st.sentence


def test_missed_goals_of_stale_records_are_not_reported(project, lesson):
    put(project, lesson, "gpu", source_hash=OLD, benchmarks=[
        Benchmark("vs-cublas", measured=80, baseline=100, unit="TFLOP/s", ratio=0.8, threshold=0.9,
                  gate=False, met=False)])
    st = judge(lesson, project.evidence)
    assert st.status == STALE and "vs-cublas" not in st.sentence


def test_status_output_in_a_terminal_carries_no_escape_codes():
    import verify

    assert verify.terminal_safe("red \x1b[31mtext\x1b[0m\tand a bell\x07") == \
        "red \\x1b[31mtext\\x1b[0m\\x09and a bell\\x07"
    assert verify.terminal_safe("plain text, unicode ✓") == "plain text, unicode ✓"
