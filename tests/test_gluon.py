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
from verified_triton.core.lessons import load_lesson
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


@pytest.mark.integration
def test_a_decline_after_real_checks_is_current_evidence(project):
    record, check = _recorded(project, CPU_CHECKS_THEN_DECLINE)
    assert record.outcome == "by-design" and [c.name for c in record.checks] == ["scheduler-model"]
    assert check.returncode == 0, check.stderr
    assert project.judge("gluon-like").status.label == "PARTIALLY VERIFIED"


@pytest.mark.integration
def test_an_empty_decline_is_not_enough(project):
    record, check = _recorded(project, NO_CHECKS_THEN_DECLINE)
    assert record.outcome == "by-design" and record.checks == []
    assert check.returncode == 1
    assert "gluon-like: interpreter mode is by-design" in check.stderr


@pytest.mark.integration
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


@pytest.mark.e2e  # each Gluon lesson's CPU half, run whole
@pytest.mark.parametrize("name", ["gluon-basics", "gluon-matmul", "gluon-attention",
                                  "gluon-attention-backward"])
def test_the_cpu_half_runs_without_gluon(name):
    main = load_lesson(REPO / "code" / name).main  # the verified run (lesson.py once converted)
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


@pytest.mark.unit
def test_one_token_share_counts_argument_lists():
    exploded = "gl.warp_specialize(\n    [\n        (\n            _consumer,\n            (\n" \
               "                o_desc,\n                q_smem,\n            ),\n        ),\n    ],\n)\n"
    assert one_token_share(exploded) == (10, 11)
    assert one_token_share("ring = (k_bufs, v_bufs)\ngl.warp_specialize([(_consumer, (io, ring))], [4], [240])\n") \
        == (0, 2)


@pytest.mark.unit
@pytest.mark.parametrize("page", GLUON_PAGES)
def test_the_shown_kernels_read_as_code(page):
    """Issue 33: a shown region is at most a quarter one-token lines (argument lists grouped by role)."""
    regions = shown_regions(page)
    assert regions, f"no ::snippet on {page}"
    for path, name in regions:
        one, lines = one_token_share(extract(REPO / path, name, REPO).text)
        assert one <= lines / 4, f"{page}: {path} {name}: {one} of {lines} lines are one token"


def _sass_facts():
    import importlib.util
    spec = importlib.util.spec_from_file_location("sass_facts", REPO / "code" / "gluon-basics" / "sass_facts.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# One step of a compiled attention loop, as Triton's cuobjdump prints it (control codes, a tab, the instruction):
# the two products' issue, the wait for the first, part of a row max, the wait for the second, exponentials.
HOISTED = """\
Function:attn_fwd_ws_kernel
\tWARPGROUP.ARRIVE ;
\tHGMMA.64x128x16.F32 R24, gdesc[UR12], RZ, !UPT, gsb0 ;
\tWARPGROUP.ARRIVE ;
\tHGMMA.64x64x16.F32 R88, R120, gdesc[UR8].tnspB, R88, gsb0 ;
\tBAR.SYNC.DEFER_BLOCKING 0x2, 0x80 ;
\tWARPGROUP.DEPBAR.LE gsb0, 0x1 ;
\tFMNMX R9, R24, R25, !PT ;
\tWARPGROUP.DEPBAR.LE gsb0, 0x0 ;
\tFFMA R8, R24, UR36, -R205 ;
\tMUFU.EX2 R8, R8 ;
\tMUFU.EX2 R121, R25 ;
\tWARPGROUP.ARRIVE ;
\tMUFU.EX2 R9, R9 ;
"""


@pytest.mark.unit
def test_the_sass_count_sees_a_hoisted_wait_and_stops_at_the_next_issue():
    """The exponentials after the wait for the second product are not under it; the next issue ends the step."""
    facts = _sass_facts()
    assert facts.exps_under_product(HOISTED) == (0, 2)
    overlapped = HOISTED.replace("\tWARPGROUP.DEPBAR.LE gsb0, 0x0 ;\n", "").replace(
        "\tMUFU.EX2 R121, R25 ;\n", "\tMUFU.EX2 R121, R25 ;\n\tWARPGROUP.DEPBAR.LE gsb0, 0x0 ;\n")
    assert facts.exps_under_product(overlapped) == (2, 2)
    never_waited = HOISTED.replace("\tWARPGROUP.DEPBAR.LE gsb0, 0x0 ;\n", "")
    assert facts.exps_under_product(never_waited) == (2, 2)


@pytest.mark.unit
def test_the_sass_count_says_nothing_without_a_depth_one_wait():
    facts = _sass_facts()
    assert facts.exps_under_product(HOISTED.replace("gsb0, 0x1", "gsb0, 0x0")) is None
    assert facts.exps_under_product("") is None


@pytest.mark.unit
def test_registers_named_counts_from_r0_and_skips_uniform_registers():
    facts = _sass_facts()
    assert facts.registers_named(HOISTED) == 206  # R205 is the highest; UR36 is a uniform register
    assert facts.registers_named("\tEXIT ;\n") is None


def _current_gpu_tables(lesson_name: str, table: str) -> list[list]:
    """The rows of `table` in every GPU record of the lesson made for its current source; while
    evidence/awaiting-gpu.toml acknowledges that the lesson waits for the GPU run of its source now (a change
    recorded where no GPU was, the kit's say), in its newest GPU records."""
    import json

    from verified_triton.core.lessons import load_lesson
    from verified_triton.record.awaiting import load_awaiting

    current = load_lesson(REPO / "code" / lesson_name).source_hash()
    entry = load_awaiting(REPO / "evidence").get(lesson_name)
    waits = entry is not None and entry.source_hash == current
    rows = []
    for path in sorted((REPO / "evidence" / lesson_name).glob("gpu-*.json")):
        record = json.loads(path.read_text())
        if record["source_hash"] != current and not waits:
            continue
        rows += [row for t in record["tables"] if t["name"] == table for row in t["rows"]]
    return rows


def _counts(cell: str) -> tuple[int, int]:
    under, total = cell.split(" of ")
    return int(under), int(total)


@pytest.mark.unit
def test_the_forward_pages_sass_claims_hold_in_its_evidence():
    """gluon-attention's page says ptxas waits for P V before the softmax (none of a step's exponentials run while
    P V is in flight) and that the consumers' code names more registers than the launch's 168, up to 240. A
    recording that shows otherwise fails here until the page is rewritten."""
    rows = _current_gpu_tables("gluon-attention", "compiled")
    assert rows, "no current GPU record of gluon-attention holds the compiled table"
    for row in rows:
        under, total = _counts(row[-1])
        assert under == 0 and total >= 64, row
        assert row[2] == 168 and 168 < row[3] <= 240, row


@pytest.mark.unit
def test_the_backward_pages_sass_claims_hold_in_its_evidence():
    """gluon-attention-backward's page says every exponential runs under dP in the causal kernels (the mask's branch
    keeps the wait below them) and most run after dP has retired in the full kernels."""
    rows = _current_gpu_tables("gluon-attention-backward", "compiled")
    assert {(row[0], row[1], row[2]) for row in rows} >= {(k, d, m) for k in ("dkdv", "dq") for d in (64, 128)
                                                          for m in ("causal", "full")}
    for row in rows:
        under, total = _counts(row[-1])
        if row[2] == "causal":
            assert under == total, row
        else:
            assert under < total / 2, row
