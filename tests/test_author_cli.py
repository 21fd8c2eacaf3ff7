"""The command lines an author meets: the publish gate, verify's help and refusals, downloads.py -h,
what a failed run prints, and how rows this machine cannot run are folded."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import PASSING, REPO, fake_record
from verified_triton.judge.evidence import write_record

pytestmark = pytest.mark.integration

RAISES = """\
    lesson = Lesson("raises")
    lesson.check("before-the-crash", True)
    def deep():
        raise RuntimeError("boom in the benchmark code")
    deep()
"""


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=120, cwd=REPO)


# -- the publish gate ----------------------------------------------------------------------------------

def test_publish_gate_fails_without_gpu_evidence_and_plain_check_says_so_in_one_line(project):
    """Before: --check passed a lesson whose GPU run was never recorded, and there was no stricter gate."""
    project.add("good", PASSING)
    assert project.verify("--mode", "interpreter").returncode == 0
    check = project.verify("--check")
    assert check.returncode == 0, check.stderr
    lines = check.stdout.strip().splitlines()
    assert len(lines) == 1 and "1 still waits for a GPU run (good): --check --publish refuses it" in lines[0]

    gate = project.verify("--check", "--publish")
    assert gate.returncode == 1
    problem = gate.stderr.strip()
    assert problem.startswith("publish: good: PARTIALLY VERIFIED, not by design")
    assert "python3 tools/verify.py --lesson good --mode gpu --bundle good.tar.gz" in problem
    assert "--import good.tar.gz" in problem

    # a GPU run recorded and passed: publishable
    write_record(project.evidence, fake_record(project.lesson("good"), "gpu", "passed"))
    gate = project.verify("--check", "--publish")
    assert gate.returncode == 0, gate.stderr
    assert gate.stdout.strip() == "publish: the lesson is VERIFIED or PARTIALLY VERIFIED by design"


def test_publish_gate_accepts_a_gpu_run_declined_by_requires(project):
    project.add("good", PASSING, toml='[requires]\ncapability = "10.0"\n')
    assert project.verify("--mode", "interpreter").returncode == 0
    write_record(project.evidence, fake_record(project.lesson("good"), "gpu", "by-design", exit_code=3,
                                               reason="needs compute capability 10.0 or newer; this GPU is 9.0"))
    gate = project.verify("--check", "--publish")
    assert gate.returncode == 0, gate.stderr


def test_the_publish_gate_on_todays_course_refuses_what_the_badges_do_not_claim():
    """VERIFIED lessons pass the gate, STALE, FAILED and UNVERIFIED ones never do, and it passes only
    when it refuses none (today's course waits for GPU time: NOTES.md, evidence/awaiting-gpu.toml)."""
    gate = run("tools/verify.py", "--check", "--publish")
    statuses = {s["lesson"]: s["status"] for s in json.loads(run("tools/verify.py", "--status", "--json").stdout)}
    refused = {line.split(":")[1].strip() for line in gate.stderr.splitlines() if line.startswith("publish: ")}
    assert refused <= statuses.keys(), refused - statuses.keys()
    assert not {name for name in refused if statuses[name] == "VERIFIED"}
    assert {name for name, st in statuses.items() if st in ("STALE", "FAILED", "UNVERIFIED")} <= refused | {
        line.split(":")[1].strip() for line in gate.stderr.splitlines() if line.startswith("check: ")}
    assert gate.returncode == (1 if refused or "check: " in gate.stderr else 0), gate.stdout + gate.stderr
    if gate.returncode == 0:
        assert "are VERIFIED or PARTIALLY VERIFIED by design" in gate.stdout


# -- verify.py's command line --------------------------------------------------------------------------

def test_verify_help_has_every_option_modes_exit_codes_and_examples():
    """Before: --mode had no help, and --help had neither exit codes nor examples."""
    help_text = run("tools/verify.py", "--help").stdout
    lines = help_text.split("options:")[1].split("what it does")[0].splitlines()
    options = {}
    for i, line in enumerate(lines):  # an option's help follows it on its line, or on the next, indented
        if line.startswith("  -"):
            spec, _, same_line = line.strip().partition("  ")
            following = lines[i + 1] if i + 1 < len(lines) else ""
            options[spec.split()[0].rstrip(",")] = same_line.strip() or (
                following.strip() if following.startswith(" " * 6) else "")
    assert {"--lesson", "--mode", "--jobs", "--json", "--check", "--publish", "--import"} <= set(options)
    assert all(options.values()), [name for name, text in options.items() if not text]
    for section in ("modes (--mode):", "exit codes:", "examples:", "--check --publish"):
        assert section in help_text
    assert "  interpreter " in help_text and "  gpu " in help_text


@pytest.mark.parametrize("args, says", [
    (["--json"], "--json shapes the output of --status"),
    (["--publish"], "--publish is a stricter --check"),
    (["--check", "--force"], "--force applies to a run of the lessons, which --check does not start"),
    (["--status", "--compare"], "are separate jobs"),
    (["--import", "x.tar.gz", "--bundle", "y.tar.gz"], "--bundle applies to a run"),
])
def test_verify_refuses_options_it_would_ignore(args, says):
    """Before: --json without --status was silently ignored (and so were the others)."""
    result = run("tools/verify.py", *args)
    assert result.returncode == 2 and says in result.stderr and "usage: verify.py" in result.stderr


# -- what a run prints ---------------------------------------------------------------------------------

def test_a_failure_shows_the_tail_of_the_lessons_stderr_and_no_gpu_rows_fold(project):
    """Before: 'exit 1 (failed)' and no traceback; one 'not run: no CUDA device' row per lesson."""
    project.add("raises", RAISES)
    for i in range(3):
        project.add(f"good-{i}", PASSING.replace('"good"', f'"good-{i}"'), order=2 + i)
    result = project.verify("--jobs", "2")
    assert result.returncode == 1
    out = result.stdout
    tail = out.split("raises [interpreter] failed")[1]
    assert 'raise RuntimeError("boom in the benchmark code")' in tail and "RuntimeError: boom" in tail
    assert "in deep" in tail
    folded = [line for line in out.splitlines() if "not run: no CUDA device on this machine" in line]
    assert folded == ["4 lessons, gpu mode: not run: no CUDA device on this machine (record it on a GPU machine: "
                      "python3 tools/verify.py --mode gpu --bundle gpu.tar.gz, then --import gpu.tar.gz here)"]


DIVIDES = """\
    def divide(a, b):
        return a / b


    def main():
        lesson = Lesson("divides")
        with lesson.step("first"):
            lesson.check("before", True)
        with lesson.step("divide"):
            divide(1, 0)
        return lesson.finish()


    sys.exit(main())
"""

# A kit call misused: the kit raises, and the line to fix is the lesson's, not the kit's.
MISUSES_THE_KIT = """\
    lesson = Lesson("misuses")
    lesson.step("Not A Name")
"""

# Two checks fail, then the exception that explains them ends the run (a backward() misuse).
FAILS_THEN_RAISES = """\
    lesson = Lesson("backward")
    lesson.check("grad-q", False, "no gradient")
    lesson.check("grad-k", False, "no gradient")
    raise RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")
"""


def _line_of(project, name: str, text: str) -> int:
    return project.main_file(name).read_text(encoding="utf-8").splitlines().index(text) + 1


def test_a_failed_run_names_the_exception_and_the_lessons_line_once(project):
    """Before: 'failed in 1.5 s (exit 1 (failed))', the status sentence 'failed (exit 1: exit 1 (failed))';
    the exception was only in the stderr tail."""
    from verified_triton.judge.status import FAILED

    project.add("divides", DIVIDES)
    result = project.verify("--lesson", "divides", "--mode", "interpreter")
    assert result.returncode == 1
    line = _line_of(project, "divides", "    return a / b")
    cause = f"ZeroDivisionError at code/divides/divides.py:{line} (division by zero)"
    assert "divides [interpreter]: failed in " in result.stdout
    assert f" s: {cause}\n" in result.stdout, result.stdout  # the progress line
    row = next(r for r in result.stdout.splitlines() if r.startswith("divides ") and "interpreter " in r)
    assert row.endswith(cause), row  # the summary table's note
    record = project.record("divides")
    assert record.reason == cause
    assert [(s.name, s.raised) for s in record.steps] == [("first", False), ("divide", True)]
    st = project.judge("divides")
    assert st.status == FAILED and st.sentence.count(cause) == 1, st.sentence
    assert "exit 1: exit 1" not in st.sentence and "exit 1 (failed)" not in st.sentence


def test_an_exception_inside_the_kit_points_at_the_lessons_call(project):
    project.add("misuses", MISUSES_THE_KIT)
    assert project.verify("--lesson", "misuses", "--mode", "interpreter").returncode == 1
    line = _line_of(project, "misuses", 'lesson.step("Not A Name")')
    assert project.record("misuses").reason.startswith(
        f"ValueError at code/misuses/misuses.py:{line} (step 'Not A Name': use lower-case letters")


def test_failed_checks_and_the_exception_after_them_are_both_named(project):
    """Before: 'check grad-q, check grad-k', and no word of the exception that ended the run."""
    project.add("backward", FAILS_THEN_RAISES)
    assert project.verify("--lesson", "backward", "--mode", "interpreter").returncode == 1
    line = _line_of(project, "backward", 'raise RuntimeError("element 0 of tensors does not require grad and '
                                         'does not have a grad_fn")')
    assert project.record("backward").reason == (
        f"RuntimeError at code/backward/backward.py:{line} (element 0 of tensors does not require grad and "
        "does not have a grad_fn); before it failed: check grad-q, check grad-k")


# -- downloads.py --------------------------------------------------------------------------------------

def test_downloads_help_lists_its_subcommands():
    """Before: `downloads.py -h` printed only its title line, and exited 2."""
    result = run("tools/downloads.py", "-h")
    assert result.returncode == 0
    for sub in ("notebooks", "check", "build"):
        assert f"    {sub}" in result.stdout
    assert "exit codes" in result.stdout
    bad = run("tools/downloads.py", "notebook")
    assert bad.returncode == 2 and "invalid choice: 'notebook'" in bad.stderr
