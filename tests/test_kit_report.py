"""The kit's report and figure plumbing that lesson files repeated (issue 49 item 2).

`lesson.compiled_table` is the compiled-code table thirteen lessons built by hand (registers, shared memory and
what the PTX holds); `lesson.rates` the table and figure of each timed function's rate (median with its
interval, every round) that the Gluon lessons drew by hand. Both are checked here on stand-ins for a compiled
kernel and for timings, as a GPU run would call them.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from verified_triton.core import kit

pytestmark = pytest.mark.unit

PTX = """
    ld.global.v4.b32 {%r1, %r2, %r3, %r4}, [%rd1];
    ld.global.v4.b32 {%r5, %r6, %r7, %r8}, [%rd2];
    mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r9], %r10;
    setmaxnreg.dec.sync.aligned.u32 24;
    setmaxnreg.inc.sync.aligned.u32 240;
    setmaxnreg.inc.sync.aligned.u32 240;
"""


@pytest.fixture
def lesson(monkeypatch, tmp_path):
    monkeypatch.delenv(kit.INTERPRET_ENV, raising=False)
    monkeypatch.delenv(kit.SMOKE_ENV, raising=False)
    monkeypatch.setenv(kit.RESULTS_ENV, str(tmp_path / "results.json"))
    monkeypatch.setenv(kit.FIGURES_ENV, str(tmp_path / "figures"))
    monkeypatch.chdir(tmp_path)
    return kit.kit.Lesson("report-test")


def results(tmp_path) -> dict:
    return json.loads((tmp_path / "results.json").read_text())


def test_a_ptx_fact_is_a_count_or_with_a_group_the_values_it_takes():
    assert kit.kit.ptx_fact(PTX, r"ld\.global\.v4") == 2
    assert kit.kit.ptx_fact(PTX, r"setmaxnreg\.\w+\.sync\.aligned\.u32\s+(\d+)") == "24 240"
    assert kit.kit.ptx_fact(PTX, r"cp\.async\.bulk") == 0 and kit.kit.ptx_fact(PTX, r"st\.(\w+)") == ""


def test_the_compiled_table_holds_registers_shared_memory_and_the_ptx_facts(lesson, tmp_path):
    compiled = SimpleNamespace(asm={"ptx": PTX}, n_regs=40, n_spills=0, metadata=SimpleNamespace(shared=66560))
    lesson.compiled_table("compiled", {"step 4": compiled}, {
        "16-byte loads": r"ld\.global\.v4", "mbarrier waits": r"mbarrier\.try_wait",
        "setmaxnreg": r"setmaxnreg\.\w+\.sync\.aligned\.u32\s+(\d+)"}, "What the compiler made")
    [table] = results(tmp_path)["tables"]
    assert table["columns"] == ["kernel", "registers / thread", "spilled registers", "shared memory KiB",
                                "16-byte loads", "mbarrier waits", "setmaxnreg"]
    assert table["rows"] == [["step 4", 40, 0, 65.0, 2, 1, "24 240"]] and table["caption"] == "What the compiler made"


def test_rates_records_a_table_and_a_figure_of_each_functions_rate(lesson, tmp_path):
    ms = kit.kit.Timings({"ring": [1.0, 1.1, 0.9, 1.0, 1.05], "copy": [0.9, 1.0, 0.95, 0.92, 0.91]})
    lesson.rates("bandwidth", "Bandwidth, 1 GB moved", ms, 2e9, labels={"ring": "step 3"}, line=1800.0)
    got = results(tmp_path)
    [table] = got["tables"]
    assert table["columns"] == ["kernel", "ms (median)", "GB/s"]
    assert table["rows"] == [["step 3", 1.0, 2000.0], ["copy", 0.92, 2174.0]]  # the kit keeps 4 significant digits
    [figure] = got["figures"]
    assert figure["name"] == "bandwidth" and figure["caption"] == "Bandwidth, 1 GB moved"
    assert (tmp_path / "figures" / figure["file"]).is_file() and (tmp_path / "figures" / figure["dark_file"]).is_file()


def test_rates_in_a_smoke_run_draw_but_record_nothing(monkeypatch, tmp_path):
    monkeypatch.setenv(kit.INTERPRET_ENV, "1")
    monkeypatch.setenv(kit.SMOKE_ENV, "1")
    monkeypatch.setenv(kit.RESULTS_ENV, str(tmp_path / "results.json"))
    monkeypatch.chdir(tmp_path)
    smoke = kit.kit.Lesson("smoke-test")
    ms = kit.kit.bench_interleaved({"ring": lambda: None, "copy": lambda: None})
    smoke.rates("bandwidth", "untimed", ms, 2e9, line=None)
    assert results(tmp_path)["tables"] == [] and results(tmp_path)["figures"] == []


def test_the_summary_line_counts_one_check_and_one_benchmark_in_the_singular(lesson, capsys):
    """'report-test: 1 check passed, ...; 0 benchmarks': the kit's own line said '1 checks passed' (issue 46)."""
    lesson.check("only", True, "the one check")
    lesson.finish()
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("report-test:"))
    assert line.startswith("report-test: 1 check passed, 0 failed, 0 skipped;"), line
    assert "0 benchmarks, 0 below target" in line, line
