"""The Gluon on Hopper lessons' way of being verified (issue 27).

A Gluon lesson's interpreter run checks what a CPU can and then declines by
design. That record counts as current, usable evidence for `verify --check`
only when it holds real checks that all passed, and a decline never hides a
check that failed before it. The real lessons' CPU halves run without Gluon.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import REPO, base_env, fake_record
from verified_triton.judge.evidence import write_record

CPU_CHECKS_THEN_DECLINE = """\
    lesson = Lesson("gluon-like")
    lesson.check("scheduler-model", True, "every tile once")
    lesson.decline("Gluon kernels do not run under TRITON_INTERPRET")
"""

NO_CHECKS_THEN_DECLINE = """\
    lesson = Lesson("gluon-like")
    lesson.decline("Gluon kernels do not run under TRITON_INTERPRET")
"""

FAILED_CHECK_THEN_DECLINE = """\
    lesson = Lesson("gluon-like")
    lesson.check("ring-model", False, "a tile was overwritten")
    lesson.decline("Gluon kernels do not run under TRITON_INTERPRET")
"""


def _recorded(project, body):
    project.add("gluon-like", body)
    run = project.verify("--mode", "interpreter", "--lesson", "gluon-like")
    assert "Traceback" not in run.stderr
    lesson = project.lesson("gluon-like")
    write_record(project.evidence, fake_record(lesson, "gpu", "passed"))
    return project.record("gluon-like"), project.verify("--check")


def test_a_decline_after_real_checks_is_current_evidence(project):
    record, check = _recorded(project, CPU_CHECKS_THEN_DECLINE)
    assert record.outcome == "by-design" and [c.name for c in record.checks] == ["scheduler-model"]
    assert check.returncode == 0, check.stderr
    assert project.judge("gluon-like").status.label == "PARTIALLY VERIFIED"


def test_an_empty_decline_is_not_enough(project):
    record, check = _recorded(project, NO_CHECKS_THEN_DECLINE)
    assert record.outcome == "by-design" and record.checks == []
    assert check.returncode == 1
    assert "gluon-like: interpreter mode is by-design" in check.stderr


def test_a_decline_never_hides_a_failed_check(project):
    record, check = _recorded(project, FAILED_CHECK_THEN_DECLINE)
    assert record.outcome == "failed"
    assert record.reason.startswith("check ring-model (then declined:")
    assert check.returncode == 1
    assert project.judge("gluon-like").status.label == "FAILED"


BLOCK_GLUON = (
    "import sys, runpy\n"
    "sys.modules['triton.experimental.gluon'] = None  # any import of Gluon now fails\n"
    "sys.argv = [sys.argv[1]]\n"
    "runpy.run_path(sys.argv[0], run_name='__main__')\n"
)


@pytest.mark.parametrize("name", ["gluon-basics", "gluon-matmul", "gluon-attention"])
def test_the_cpu_half_runs_without_gluon(name):
    main = REPO / "code" / name / (name.replace("-", "_") + ".py")
    run = subprocess.run([sys.executable, "-c", BLOCK_GLUON, str(main)], capture_output=True,
                         text=True, timeout=300, env=base_env(TRITON_INTERPRET="1"), cwd=REPO)
    assert run.returncode == 3, run.stdout[-2000:] + run.stderr[-2000:]
    assert "declined by design: Gluon kernels do not run under TRITON_INTERPRET" in run.stderr
    assert run.stdout.count(": PASS") >= 10 and ": FAIL" not in run.stdout + run.stderr
