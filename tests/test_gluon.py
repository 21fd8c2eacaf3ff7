"""The Gluon on Hopper lessons' way of being verified (issue 27).

A Gluon lesson's interpreter run checks what a CPU can and then declines by
design. That record counts as current, usable evidence for `verify --check`
only when it holds real checks that all passed, and a decline never hides a
check that failed before it. The real lessons' CPU halves run without Gluon.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from conftest import REPO, base_env, fake_record
from verified_triton.judge.evidence import write_record
from verified_triton.site.snippets import extract

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


@pytest.mark.parametrize("name", ["gluon-basics", "gluon-matmul", "gluon-attention",
                                  "gluon-attention-backward"])
def test_the_cpu_half_runs_without_gluon(name):
    main = REPO / "code" / name / (name.replace("-", "_") + ".py")
    run = subprocess.run([sys.executable, "-c", BLOCK_GLUON, str(main)], capture_output=True,
                         text=True, timeout=300, env=base_env(TRITON_INTERPRET="1"), cwd=REPO)
    assert run.returncode == 3, run.stdout[-2000:] + run.stderr[-2000:]
    assert "declined by design: Gluon kernels do not run under TRITON_INTERPRET" in run.stderr
    assert run.stdout.count(": PASS") >= 10 and ": FAIL" not in run.stdout + run.stderr


# A line that is one name or only brackets, once its trailing comma or colon is dropped: `q_desc,`, `),`.
ONE_TOKEN = re.compile(r"^(?:[\w.]+|[()\[\]{}]+)$")
GLUON_PAGES = ["gluon-basics", "gluon-matmul", "gluon-attention", "gluon-attention-backward"]


def one_token_share(text: str) -> tuple[int, int]:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return sum(bool(ONE_TOKEN.match(line.rstrip(",:"))) for line in lines), len(lines)


def shown_regions(page: str) -> list[tuple[str, str]]:
    """(path, region) of every ::snippet directive on a Gluon page."""
    text = (REPO / "docs" / "lessons" / f"{page}.md").read_text()
    return re.findall(r"^\s*::snippet (code/\S+\.py) (\S+)\s*$", text, re.M)


def test_one_token_share_counts_argument_lists():
    exploded = "gl.warp_specialize(\n    [\n        (\n            _consumer,\n            (\n" \
               "                o_desc,\n                q_smem,\n            ),\n        ),\n    ],\n)\n"
    assert one_token_share(exploded) == (10, 11)
    assert one_token_share("ring = (k_bufs, v_bufs)\ngl.warp_specialize([(_consumer, (io, ring))], [4], [240])\n") \
        == (0, 2)


@pytest.mark.parametrize("page", GLUON_PAGES)
def test_the_shown_kernels_read_as_code(page):
    """Issue 33: a shown region is at most a quarter one-token lines (argument lists grouped by role)."""
    regions = shown_regions(page)
    assert regions, f"no ::snippet on {page}"
    for path, name in regions:
        one, lines = one_token_share(extract(REPO / path, name, REPO).text)
        assert one <= lines / 4, f"{page}: {path} {name}: {one} of {lines} lines are one token"
