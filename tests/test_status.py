"""status.judge: one badge and one sentence from a lesson's records and its current source."""

from __future__ import annotations

import pytest

from conftest import PASSING, bench, fake_record
from verified_triton.judge.evidence import write_record
from verified_triton.judge.status import FAILED, PARTIAL, STALE, STATUSES, UNVERIFIED, VERIFIED, Status, judge

pytestmark = pytest.mark.unit

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
    # gates, goals and stretch goals are counted apart: a miss is never a gate's unless it is one
    assert "all 3 gates met, the goal not met, 1 of 3 stretch goals met (1 within noise) on NVIDIA H200" \
        in st.summary
    assert "targets" not in st.summary


def test_a_gate_within_noise_passes_and_says_so(project, lesson):
    put(project, lesson, "interpreter")
    put(project, lesson, "gpu", benchmarks=[bench("gate", 0.99, 0.95, 1.03, threshold=1.0)])
    st = judge(lesson, project.evidence)
    assert st.status == VERIFIED
    assert "the gate within noise on NVIDIA H200" in st.summary


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


def test_verified_with_missed_stretch_goals_says_they_are_stretch_goals(project, lesson):
    """fused-attention read "VERIFIED ... 2 of 4 targets met": both gates were met, both misses stretch goals."""
    put(project, lesson, "interpreter")
    put(project, lesson, "gpu", benchmarks=[
        bench("full", 0.78, 0.77, 0.79, threshold=0.6, stretch=0.9, label="full"),
        bench("causal", 0.85, 0.84, 0.85, threshold=0.6, stretch=0.9, label="causal"),
    ])
    st = judge(lesson, project.evidence)
    assert st.status == VERIFIED
    assert st.summary.startswith("1 check passed, both gates met, 0 of 2 stretch goals met on NVIDIA H200")
    assert "full reached 0.78x against a 0.90x stretch goal (not met)" in st.sentence


def test_a_missed_goal_that_does_not_gate_is_not_counted_as_a_gate(project, lesson):
    """gluon-basics said "1 of 2 targets met" beside its own output's "0 below target": the kit counts the gates
    below target, the summary counted a goal that does not gate the run among them."""
    put(project, lesson, "interpreter")
    put(project, lesson, "gpu", benchmarks=[
        bench("step-3", 0.955, 0.954, 0.956, threshold=0.95, label="step 3"),
        bench("step-4", 0.927, 0.925, 0.928, threshold=0.95, gate=False, label="step 4"),
    ])
    st = judge(lesson, project.evidence)
    assert st.status == VERIFIED
    assert "the gate met, the goal not met on NVIDIA H200" in st.summary
    assert "step 4 reached 0.93x against a 0.95x goal (not met)" in st.sentence


@pytest.mark.parametrize("gates, want", [
    ([("met", True)] * 4, "all 4 gates met"),
    ([("met", True), ("within noise", True)], "1 of 2 gates met (1 within noise)"),
    ([("met", False), ("not met", False)], "1 of 2 goals met"),
])
def test_counts_read_as_words(project, lesson, gates, want):
    ratios = {"met": (2.0, 1.9, 2.1), "within noise": (1.0, 0.9, 1.1), "not met": (0.5, 0.4, 0.6)}
    put(project, lesson, "gpu", benchmarks=[bench(f"b{i}", *ratios[v], threshold=1.0, gate=gate)
                                            for i, (v, gate) in enumerate(gates)])
    assert f"{want} on NVIDIA H200" in judge(lesson, project.evidence).summary


GLUON_REASON = ("Gluon kernels do not run under TRITON_INTERPRET (Gluon compiles straight to GPU code); the CPU "
                "models ran above, the kernels run on the GPU only")


def test_partial_by_design_under_the_interpreter_says_so_in_plain_words(project, lesson):
    """A lesson whose kernels the interpreter cannot run (Gluon): the line says what the interpreter ran and that
    the GPU run passed, so PARTIALLY VERIFIED does not read as a defect."""
    put(project, lesson, "interpreter", "by-design", exit_code=3, reason=GLUON_REASON)
    put(project, lesson, "gpu", benchmarks=[bench("copy", 0.96, 0.955, 0.965, threshold=0.95)])
    st = judge(lesson, project.evidence)
    assert st.status == PARTIAL
    assert st.summary == ("1 check passed, the gate met on NVIDIA H200; 1 check passed under the interpreter, "
                          "then it stopped by design: Gluon kernels do not run under TRITON_INTERPRET")
    assert st.sentence.startswith(
        "By design, not a fault: the Triton 3.9.0 interpreter run ran what the interpreter can (1 check, passed) and "
        "stopped on 2026-01-02 before the rest (" + GLUON_REASON + "); the GPU run on NVIDIA H200 (Triton 3.9.0, "
        "torch 2.5.1) ran all of it and passed on 2026-01-02.")


def test_partial_by_design_on_a_gpu_too_old_says_which_gpu_it_needs(project, lesson):
    reason = "needs compute capability 10.0 or newer (tl.dot_scaled on Blackwell); this GPU is 9.0"
    put(project, lesson, "interpreter")
    put(project, lesson, "gpu", "by-design", exit_code=3, reason=reason, checks=[])
    st = judge(lesson, project.evidence)
    assert st.status == PARTIAL
    assert st.summary == ("declined by design on NVIDIA H200: needs compute capability 10.0 or newer; "
                          "1 check passed under the interpreter")
    assert st.sentence.startswith(
        "By design, not a fault: the GPU run on NVIDIA H200 (Triton 3.9.0, torch 2.5.1) declined on 2026-01-02 ("
        + reason + "), so no GPU has run the kernels yet; the Triton 3.9.0 interpreter run passed on 2026-01-02.")


def test_a_by_design_stop_beside_no_pass_is_not_called_by_design_partial(project, lesson):
    put(project, lesson, "interpreter", "by-design", exit_code=3, reason=GLUON_REASON)
    st = judge(lesson, project.evidence)
    assert st.status == UNVERIFIED and not st.sentence.startswith("By design")
