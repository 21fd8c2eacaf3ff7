"""status.judge: one badge and one sentence from a lesson's records and its current source."""

from __future__ import annotations

import pytest

from conftest import PASSING, bench, fake_record
from verified_triton.judge.evidence import write_record
from verified_triton.judge.status import FAILED, PARTIAL, STALE, STATUSES, UNVERIFIED, VERIFIED, Status, judge

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
            exit_code={"timeout": None, "passed": 0, "crashed": -11, "by-design": 3}.get(outcome, 1),
            reason="by design" if outcome == "by-design" else "")
    st = judge(lesson, project.evidence)
    assert st.status == expected
    assert st.status in STATUSES
    assert st.sentence[0].isupper() and st.sentence.endswith(".")
    assert expected.label not in st.sentence  # the badge is the status; the sentence says why
    # every record is kept, current or not, and each is judged once
    assert len(st.current) + len(st.stale) == len(st.records)
    assert all(st.is_current(r) for r in st.current) and not any(st.is_current(r) for r in st.stale)


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
    assert st.current == [] and len(st.records) == 1 and st.stale == st.records
    assert st.summary == "nothing verified on the current source"


def test_newest_current_pass_is_the_one_reported(project, lesson):
    put(project, lesson, "gpu", device="NVIDIA H100", started="2026-01-01T00:00:00Z")
    put(project, lesson, "gpu", device="NVIDIA H200", started="2026-02-01T00:00:00Z")
    st = judge(lesson, project.evidence)
    assert st.modes["gpu"].record.env.device_name == "NVIDIA H200"
    assert "2026-02-01" in st.sentence


def test_goals_that_do_not_gate_are_reported_when_missed(project, lesson):
    put(project, lesson, "interpreter")
    put(project, lesson, "gpu", benchmarks=[
        bench("vs-cublas", 0.8, 0.78, 0.82, threshold=0.9, gate=False, label="vs cuBLAS"),
        bench("vs-torch", 1.2, 1.15, 1.25, threshold=1.0, stretch=1.5, label="vs torch"),
        bench("close", 0.99, 0.97, 1.02, threshold=0.9, stretch=1.0, label="close call"),
        bench("met-all", 2.0, 1.9, 2.1, threshold=1.0, stretch=1.5, label="met all"),
    ])
    st = judge(lesson, project.evidence)
    assert st.status == VERIFIED
    assert "vs cuBLAS reached 0.80x against a 0.90x goal (not met)" in st.sentence
    assert "vs torch reached 1.20x against a 1.50x stretch goal (not met)" in st.sentence
    assert "close call reached 0.99x against a 1.00x stretch goal (within noise)" in st.sentence
    assert "met all" not in st.sentence
    assert "4 of 7 targets met (1 within noise) on NVIDIA H200" in st.summary


def test_a_gate_within_noise_passes_and_says_so(project, lesson):
    put(project, lesson, "interpreter")
    put(project, lesson, "gpu", benchmarks=[bench("gate", 0.99, 0.95, 1.03, threshold=1.0)])
    st = judge(lesson, project.evidence)
    assert st.status == VERIFIED
    assert "0 of 1 targets met (1 within noise)" in st.summary


def test_missed_goals_of_stale_records_are_not_reported(project, lesson):
    put(project, lesson, "gpu", source_hash=OLD, benchmarks=[bench("vs-cublas", 0.8, threshold=0.9, gate=False)])
    st = judge(lesson, project.evidence)
    assert st.status == STALE and "vs-cublas" not in st.sentence


def test_unusable_evidence_is_named_in_the_sentence(project, lesson):
    put(project, lesson, "interpreter")
    bad = project.record_file("good", "gpu-nvidia-h200")
    bad.write_text("{}")
    st = judge(lesson, project.evidence)
    assert st.status == PARTIAL
    assert len(st.problems) == 1 and st.problems[0].startswith(str(bad))
    assert "1 evidence file(s) could not be used" in st.sentence and str(bad) in st.sentence


def test_the_badges_carry_their_label_css_and_meaning():
    assert [s.label for s in Status] == ["VERIFIED", "PARTIALLY VERIFIED", "FAILED", "STALE", "UNVERIFIED"]
    assert len({s.css for s in Status}) == len(Status) and all(s.css.startswith("vt-") for s in Status)
    assert all(s.meaning for s in Status) and str(PARTIAL) == "PARTIALLY VERIFIED"


def test_status_output_in_a_terminal_carries_no_escape_codes():
    from verified_triton.record.report import terminal_safe

    assert terminal_safe("red \x1b[31mtext\x1b[0m\tand a bell\x07") == \
        "red \\x1b[31mtext\\x1b[0m\\x09and a bell\\x07"
    assert terminal_safe("plain text, unicode ✓") == "plain text, unicode ✓"
    assert terminal_safe("bidi \u202e here") == "bidi \\u202e here"
