"""code/practice.py, the exercises' checker, and the proof's loading of a declared mistake (issue 50 items 2-4).

What a check must see that a plain comparison would not: an element never written (outputs start as NaN), a
write past either end or between the rows of a strided view (guard bands of POISON), and the worst wrong
element, named; an exception in the learner's code reported as their mistake, with its line, never as a
traceback; a mistake declared as an edit of solutions.py loaded as a module of its own (the edit made once,
above MISTAKES), and refused when its text is not found exactly once.
"""

from __future__ import annotations

import importlib.util
import sys
import textwrap

import pytest
import torch

from conftest import REPO

pytestmark = pytest.mark.unit

sys.path.insert(0, str(REPO / "code"))
import practice  # noqa: E402

PROOF = REPO / "tools" / "verified_triton" / "record" / "exercise_proof.py"


def wrong(fn) -> str:
    with pytest.raises(practice.Wrong) as caught:
        fn()
    return str(caught.value)


def test_a_guarded_buffer_is_a_view_between_poisoned_bands():
    data = torch.arange(10.0)
    view = practice.guarded(data)
    assert torch.equal(view, data) and view._base is not None
    base = view._base
    start = view.storage_offset()
    assert start >= 10 and (base[:start] == practice.POISON).all()
    assert (base[start + 10:] == practice.POISON).all() and len(base) - start - 10 >= 10


def test_a_strided_buffer_has_poison_between_its_rows():
    view = practice.guarded(torch.ones(3, 4), gap=2)
    assert view.shape == (3, 4) and view.stride() == (6, 1) and not view.is_contiguous()
    gaps = view._base[view.storage_offset():].view(-1)[:18].view(3, 6)[:, 4:]
    assert (gaps == practice.POISON).all()


def test_an_output_never_written_is_named_by_its_elements():
    out = practice.output(10)
    out[:7] = 1.0
    said = wrong(lambda: practice.expect("out", out, torch.ones(10), case="n = 10"))
    # A NaN the kernel computed looks the same: the message says both (l1's row-softmax, issue 50)
    assert said == ("out (n = 10): never written at 3 of 10 elements, out[7] to out[9] "
                    "(still NaN, or a NaN computed there)")


def test_a_write_past_the_end_or_between_rows_is_caught():
    out = practice.output(10)
    out[:] = 1.0
    out._base[out.storage_offset() + 10] = 1.0  # one past the end
    assert "wrote past the end: 1 element(s) after its end changed" in \
        wrong(lambda: practice.expect("out", out, torch.ones(10)))
    grid = practice.output(2, 3, gap=1)
    grid[:] = 0.0
    grid._base[grid.storage_offset() + 3] = 0.0  # the gap after row 0
    assert "1 element(s) between its rows changed" in wrong(lambda: practice.expect("grid", grid, torch.zeros(2, 3)))


def test_an_inputs_band_copied_into_an_outputs_band_is_caught():
    """A copy kernel one lane too wide reads x's band and writes it one past out's end: with one poison for
    inputs and outputs, the output's band looked untouched (l2's report); the two poisons differ."""
    x = practice.guarded(torch.ones(10))
    out = practice.output(10)
    out[:] = 1.0
    out._base[out.storage_offset() + 10] = x._base[x.storage_offset() + 10]  # x[10], out[10]: both bands
    said = wrong(lambda: practice.expect("out", out, torch.ones(10)))
    assert "1 element(s) after its end changed" in said and "read past an input's end" in said, said


def test_a_wrong_value_names_the_worst_element_expected_against_got():
    out = practice.output(2, 3)
    out[:] = torch.tensor([[0.0, 1.0, 2.0], [3.0, 9.0, 5.0]])
    said = wrong(lambda: practice.expect("out", out, torch.arange(6.0).view(2, 3)))
    assert said == "out: wrong at 1 of 6 elements; the worst, out[1, 1]: expected 4, got 9"
    practice.expect("out", out, torch.tensor([[0.0, 1.0, 2.0], [3.0, 9.5, 5.0]]), atol=0.5)  # within tolerance


def test_an_answer_passes_fails_with_its_hint_or_waits_for_a_gpu():
    ex = practice.Exercise("t", lambda m: m.answer(), "the hint")
    ok = type(sys)("ok")
    ok.answer = lambda: None
    assert practice.attempt(ex, ok) == ("passed", "")
    bad = type(sys)("bad")

    def answer():
        raise practice.Wrong("out: wrong")
    bad.answer = answer
    assert practice.attempt(ex, bad) == ("failed", "out: wrong. Hint: the hint")
    gpu = practice.Exercise("g", lambda m: None, "h", needs_gpu="Gluon has no interpreter")
    assert practice.attempt(gpu, ok) == (("passed", "") if practice.ON_GPU else
                                         ("needs a GPU", "Gluon has no interpreter"))


def test_an_exception_in_the_answer_is_its_mistake_with_its_line_and_no_traceback(tmp_path, capsys):
    path = tmp_path / "answers.py"
    path.write_text("def answer():\n    x = 1\n    return x / 0\n")
    spec = importlib.util.spec_from_file_location("answers", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    ex = practice.Exercise("t", lambda m: m.answer(), "divide by something")
    status, message = practice.attempt(ex, module)
    assert status == "failed"
    assert message == "your code raised ZeroDivisionError at answers.py:3: division by zero. Hint: divide by something"
    practice.CHECKS["t"] = ex
    try:
        assert practice.said("t", module) == "failed"
    finally:
        del practice.CHECKS["t"]
    out = capsys.readouterr()
    assert out.out.startswith("t: failed: your code raised ZeroDivisionError") and "Traceback" not in out.out + out.err


def load_proof():
    spec = importlib.util.spec_from_file_location("exercise_proof", PROOF)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SOLUTIONS = textwrap.dedent('''\
    def answer():
        return 1 + 1


    MISTAKES = {"t": []}  # the declarations quote the text: "return 1 + 1"
    ''')


def test_a_mistake_loads_as_a_module_of_its_own_with_its_edit_made_above_the_declarations(tmp_path):
    proof = load_proof()
    path = tmp_path / "solutions.py"
    path.write_text(SOLUTIONS)
    mutant = proof.mutant(practice, path, practice.Mistake("off by one", "1 + 1", "1 + 2", "wrong"))
    assert mutant.answer() == 3 and mutant.__name__.startswith("solutions_mistake_")
    assert path.read_text() == SOLUTIONS, "solutions.py itself is left as it is"
    with pytest.raises(practice.Wrong, match="'1 \\+ 9' occurs 0 times in solutions.py above MISTAKES, not once"):
        proof.mutant(practice, path, practice.Mistake("absent", "1 + 9", "1", "x"))
    path.write_text("def answer():\n    return 1\n\n\ndef other():\n    return 2\n\n\nMISTAKES = {}\n")
    with pytest.raises(practice.Wrong, match="'return' occurs 2 times"):
        proof.mutant(practice, path, practice.Mistake("ambiguous", "return", "pass", "x"))
