"""Issue 35: VERIFIED includes memory safety; the CPU side of `verify.py --mode sanitize`.

A lesson's steps run under compute-sanitizer's memcheck, synccheck, initcheck and racecheck, one
process each, with PyTorch's caching allocator off (record/sanitizer.py); one sanitize record per lesson
and GPU model holds each tool's run (judge/evidence.py); status.py judges it: memcheck and synccheck
errors in the lesson's kernels make it FAILED, naming the kernel and the line; every initcheck and
racecheck finding there is fixed or declared (`lesson.sanitizer_known`), and a declaration that matches
nothing is refused; once the course has memory checks, a lesson without a current one is not VERIFIED.

There is no GPU here: the tool is tests/fixtures/sanitize/fake_compute_sanitizer.py, which takes the real
command line, runs the lesson as a smoke run on the CPU and writes reports in the real format (the
examples below are copied from real logs; the notes in docs/verification.md name their sources). The
control, tests/fixtures/sanitize/code/oob-store, is a kernel whose mask lets it store past the end of its
tensor; its sanitize record in tests/fixtures/sanitize/evidence/ was recorded once on an H200 (compute-sanitizer
2025.3.1, the caching allocator off), and the tests judge it.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from conftest import REPO, Project, fake_record
from verified_triton.core import kit
from verified_triton.core.lessons import SANITIZE_TIMEOUTS, discover, load_lesson
from verified_triton.core.limits import LIMITS
from verified_triton.judge.evidence import (
    EvidenceError,
    SanitizerFinding,
    SanitizerLocation,
    SanitizerRun,
    SanitizerToolRun,
    record_from_json,
    sanitize_key,
    write_record,
)
from verified_triton.judge.status import FAILED, PARTIAL, VERIFIED, judge, judge_records
from verified_triton.record import sanitizer, sanitizer_command, sanitizer_log
from verified_triton.record.capture import Captured
from verified_triton.record.report import check_problems

FIXTURES = REPO / "tests" / "fixtures" / "sanitize"
FAKE = FIXTURES / "fake_compute_sanitizer.py"
CONTROL = FIXTURES / "code" / "oob-store"
TOOLS = kit.SANITIZER_TOOLS
H200 = "NVIDIA H200"


# -- the parser, on real logs ---------------------------------------------------------------------

# A Triton kernel under memcheck 2025 (Deep-Learning-Profiling-Tools/triton-viz#158).
TRITON_MEMCHECK = """\
========= COMPUTE-SANITIZER
========= Invalid __global__ read of size 16 bytes
=========     at matmul_kernel+0xec0 in matmul_triton2.py:43
=========     by thread (18,0,0) in block (0,0,0)
=========     Access to 0x74505bcccca0 is out of bounds
=========     and is 161 bytes after the nearest allocation at 0x74505bccc800 of size 1,024 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: run in repro.py:52
=========
========= ERROR SUMMARY: 1 error
"""
# Before 2023.3: `at 0xPC in FILE:LINE:FUNC` (sgl-project/sglang#2599); no offset (NVIDIA/cccl#8288);
# the manual's demo with a C++ signature and a device frame.
OLD_FORMS = """\
========= Invalid __global__ read of size 2 bytes
=========     at 0xda0 in /opt/sglang/fused_moe_triton/fused_moe.py:175:fused_moe_kernel
=========     by thread (0,0,0) in block (0,0,0)
=========     Address 0x763995f9f000 is out of bounds
=========
========= Invalid __shared__ write of size 16 bytes
=========     at cp_async_bulk_cp_mask in cp_async_bulk.h:236
=========
========= Invalid __global__ write of size 4 bytes
=========     at out_of_bounds_function()+0xb0 in memcheck_demo.cu:39
=========     by thread (0,0,0) in block (0,0,0)
=========     Address 0x87654320 is out of bounds
=========     Device Frame: out_of_bounds_kernel()+0x30 in memcheck_demo.cu:44
=========
========= Out-of-range shared or local address
=========     at 0xbd0 in /x/cutlass/arch/barrier.h:169:cutlass::arch::ClusterBarrier::init(const unsigned long *)
=========     by thread (0,0,0) in block (0,1,0)
=========
========= ERROR SUMMARY: 1,234 errors
========= ERROR SUMMARY: 1,230 errors were not printed. Use --print-limit option to adjust the number of printed errors
"""
# racecheck's analysis records, one race with two partners (NVIDIA/cudf#23900), and its summary.
RACECHECK = """\
========= Error: Race reported between Write access at calc_mini_block_pass(int)+0xd790 in delta_binary.cuh:324
=========     and Read access at calc_mini_block_pass(int)+0xd5c0 in delta_binary.cuh:312 [16 hazards]
=========     and Read access at calc_mini_block_pass(int)+0xd5e0 in delta_binary.cuh:312 [32 hazards]
=========
========= Warning: Race reported between Read access at sumKernel(int *, int *)+0x90 in block_error.cu:41
=========     and Write access at sumKernel(int *, int *)+0x100 in block_error.cu:51 [508 hazards]
=========
========= RACECHECK SUMMARY: 2 hazards displayed (1 error, 1 warning)
"""
# initcheck (the manual's memset_error sample) and synccheck (its divergence example).
INITCHECK = """\
========= Uninitialized __global__ memory read of size 4 bytes
=========     at vectorAdd(int *)+0x70 in /home/cuda/Initcheck/memset_error.cu:41
=========     by thread (31,0,0) in block (1,0,0)
=========     Address 0x7f3c7ec000fc
=========
========= ERROR SUMMARY: 1 error
"""
SYNCCHECK = """\
========= Barrier error detected. Divergent thread(s) in block.
=========     at [clone myKernel(int *, int *)] outlineSync()+0x11f0 in test.cu:42
=========     by thread (32,0,0) in block (0,0,0)
=========     Device Frame: myKernel(int *, int *)+0xe40 in test.cu:60
=========
========= ERROR SUMMARY: 1 error
"""


@pytest.mark.unit
def test_a_triton_kernels_memcheck_record_is_its_kernel_file_and_line():
    report = sanitizer_log.parse_log(TRITON_MEMCHECK)
    assert report.errors == 1 and report.has_summary and not report.unavailable
    [rec] = report.records
    assert (rec.kind, rec.message) == ("memory-access", "Invalid __global__ read of size 16 bytes")
    [at] = rec.locations
    assert (at.kernel, at.file, at.line) == ("matmul_kernel", "matmul_triton2.py", 43)
    assert "161 bytes after the nearest allocation" in rec.detail and "thread (18,0,0)" in rec.detail
    assert rec.host_frames == ["repro.py:52"]


@pytest.mark.unit
def test_older_location_forms_hardware_exceptions_and_counts_with_separators():
    report = sanitizer_log.parse_log(OLD_FORMS)
    places = [(r.kind, r.locations[0].kernel, r.locations[0].file, r.locations[0].line) for r in report.records]
    assert places == [
        ("memory-access", "fused_moe_kernel", "/opt/sglang/fused_moe_triton/fused_moe.py", 175),
        ("memory-access", "cp_async_bulk_cp_mask", "cp_async_bulk.h", 236),
        ("memory-access", "out_of_bounds_function", "memcheck_demo.cu", 39),
        ("hardware", "cutlass::arch::ClusterBarrier::init", "/x/cutlass/arch/barrier.h", 169),
    ]
    assert [(loc.kernel, loc.line, loc.access) for loc in report.records[2].locations[1:]] == [
        ("out_of_bounds_kernel", 44, "frame")]
    assert report.errors == 1234 and report.not_printed == 1230


@pytest.mark.unit
def test_a_race_is_one_record_with_every_access_and_the_summary_counts_singular_forms():
    report = sanitizer_log.parse_log(RACECHECK)
    first, second = report.records
    assert first.kind == "race" and first.severity == "Error" and first.hazards == 48
    assert [(loc.access, loc.kernel, loc.line) for loc in first.locations] == [
        ("Write", "calc_mini_block_pass", 324), ("Read", "calc_mini_block_pass", 312),
        ("Read", "calc_mini_block_pass", 312)]
    assert second.severity == "Warning" and second.hazards == 508
    assert [loc.kernel for loc in second.locations] == ["sumKernel", "sumKernel"]
    assert report.race == (2, 1, 1) and report.errors is None and report.has_summary


@pytest.mark.unit
def test_initcheck_and_synccheck_records():
    init = sanitizer_log.parse_log(INITCHECK)
    [rec] = init.records
    assert rec.kind == "uninitialized" and (rec.locations[0].kernel, rec.locations[0].line) == ("vectorAdd", 41)
    sync = sanitizer_log.parse_log(SYNCCHECK)
    [rec] = sync.records
    assert rec.kind == "barrier" and (rec.locations[0].kernel, rec.locations[0].line) == ("outlineSync", 42)
    assert sync.errors == 1


@pytest.mark.unit
def test_the_tools_own_lines_are_notes_and_an_api_error_is_no_kernels_finding():
    report = sanitizer_log.parse_log(
        "========= COMPUTE-SANITIZER\n"
        "========= Target application terminated before first instrumented API call\n"
        "========= Internal Sanitizer Error: The Sanitizer encountered an error while launching k_kernel and didn't "
        "track the launch. Errors might go undetected.\n"
        '========= Program hit cudaErrorIllegalAddress (error 700) due to "an illegal memory access was encountered"'
        " on CUDA API call to cudaDeviceSynchronize.\n"
        "=========     Saved host backtrace up to driver entry point at error\n"
        "=========         Host Frame: run in code/racy/racy.py:52\n"
        "=========\n"
        "========= Target application returned an error\n"
        "========= ERROR SUMMARY: 1 error\n")
    assert [r.kind for r in report.records] == ["api"] and report.records[0].host_frames == ["code/racy/racy.py:52"]
    assert report.app_error and report.incomplete.startswith("Internal Sanitizer Error")
    assert any("terminated before first instrumented API call" in note for note in report.notes)
    api = sanitizer.group_findings(report.records, lambda file: file.startswith("code/"))
    assert api[0].host_frame == "code/racy/racy.py:52"
    from verified_triton.judge.memory import finding_is_lessons
    assert not finding_is_lessons(api[0], {"code/racy/racy.py": "0" * 64}, frozenset({"k_kernel"}))


def run_captured(code: int | None = 0, timed_out: bool = False) -> Captured:
    return Captured(code, timed_out, "", "", 0, 0, 1.0)


@pytest.mark.unit
@pytest.mark.parametrize("log, state", [
    ("========= ERROR SUMMARY: 0 errors\n", "clean"),
    ("========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n", "clean"),
    (TRITON_MEMCHECK, "findings"),
    # No summary is never clean: the lesson's own output saying "0 errors" is not the tool's.
    ("ERROR SUMMARY: 0 errors\n========= Program hit cudaErrorLaunchFailure (error 719)\n", "inconclusive"),
    ("", "inconclusive"),
    ("========= COMPUTE-SANITIZER\n========= Error: Device not supported\n", "unavailable"),
    ("========= Internal Sanitizer Error: The Sanitizer encountered an error while launching k and didn't track "
     "the launch.\n========= ERROR SUMMARY: 0 errors\n", "incomplete"),
])
def test_a_tool_run_is_classified_failing_closed(log, state):
    got, _ = sanitizer.classify_tool(sanitizer_log.parse_log(log), run_captured(), 60, "")
    assert got == state
    assert sanitizer.classify_tool(sanitizer_log.parse_log(log), run_captured(None, True), 60, "")[0] == "timeout"


@pytest.mark.unit
def test_a_huge_log_is_read_bounded_and_its_summary_still_found(tmp_path):
    log = tmp_path / "memcheck.log"
    record = TRITON_MEMCHECK.split("========= ERROR SUMMARY")[0].replace("========= COMPUTE-SANITIZER\n", "")
    with open(log, "w") as f:
        for _ in range(LIMITS.sanitizer_log // len(record) + 2000):
            f.write(record)
        f.write("========= ERROR SUMMARY: 123,456 errors\n")
    text, missing, problem = sanitizer_log.read_log(log)
    assert not problem and missing > 0 and len(text) <= LIMITS.sanitizer_log + sanitizer_log.TAIL + 1
    report = sanitizer_log.parse_log(text)
    assert report.errors == 123456
    kept, omitted = sanitizer_log.kept_log(text)
    assert omitted > 0 and len(kept) <= LIMITS.sanitizer_log_kept + 100
    assert sanitizer_log.read_log(tmp_path / "none.log") == ("", 0, "")


@pytest.mark.unit
def test_the_command_line_has_the_options_a_bounded_complete_report_needs(tmp_path):
    memcheck = sanitizer_command.tool_options("memcheck", tmp_path / "m.log")
    race = sanitizer_command.tool_options("racecheck", tmp_path / "r.log")
    for options in (memcheck, race):
        pairs = dict(zip(options[::2], options[1::2], strict=False))
        assert pairs["--print-limit"] == str(LIMITS.sanitizer_print_limit)
        assert pairs["--strip-paths"] == "no" and pairs["--error-exitcode"] == str(sanitizer_command.ERROR_EXITCODE)
    assert "--padding" in memcheck and "--padding" not in race
    assert race[race.index("--racecheck-report") + 1] == "analysis"
    # Every kernel instrumented, by every tool (issue 47.9, 48): no kernel is skipped by name, so none of the
    # lesson's can be; findings are attributed afterwards (judge/memory.py)
    for tool in sanitizer.TOOLS:
        options = sanitizer_command.tool_options(tool, tmp_path / f"{tool}.log")
        assert not any("exclude" in o or "kernel-name" in o or "kns=" in o for o in options), (tool, options)
    env = sanitizer_command.sanitize_env({"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
                                  "TRITON_DISABLE_LINE_INFO": "1", "TRITON_INTERPRET": "1"}, "initcheck",
                                 tmp_path / "cache")
    assert env["PYTORCH_NO_CUDA_MEMORY_CACHING"] == "1" and env[kit.SANITIZE_ENV] == "initcheck"
    assert not {"PYTORCH_CUDA_ALLOC_CONF", "TRITON_DISABLE_LINE_INFO", "TRITON_INTERPRET"} & env.keys()


# -- the kit ------------------------------------------------------------------------------------

@pytest.fixture
def sanitized(monkeypatch, tmp_path):
    """A lesson under compute-sanitizer on a GPU (no interpreter), recording to results.json."""
    monkeypatch.delenv(kit.INTERPRET_ENV, raising=False)
    monkeypatch.delenv(kit.SMOKE_ENV, raising=False)
    monkeypatch.setenv(kit.SANITIZE_ENV, "memcheck")
    monkeypatch.setenv(kit.RESULTS_ENV, str(tmp_path / "results.json"))
    monkeypatch.chdir(tmp_path)
    return kit.kit.Lesson("sanitized")


@pytest.mark.unit
def test_under_the_sanitizer_every_step_runs_once_untimed_and_nothing_is_measured(sanitized, tmp_path):
    calls = []
    assert sanitized.step("gpu-checks", needs_gpu="Gluon needs a GPU", smoke=False)  # smoke=False is the CPU's
    assert sanitized.size(gpu=1 << 28, smoke=1000) == 1000
    t = kit.kit.bench_interleaved({"k": lambda: calls.append("k"), "b": lambda: calls.append("b")}, rounds=15)
    assert calls == ["k", "b"] and t.timed is False and "compute-sanitizer" in t.method
    assert math.isnan(kit.kit.bench_ms(lambda: calls.append("alone")))
    assert sanitized.benchmark("k-vs-b", "k vs b", t, "k", "b", threshold=1.0) is None
    sanitized.table("sweep", ["n"], [[1]])
    assert sanitized.not_under_sanitizer("peak memory", "memory statistics count nothing")
    assert sanitized.finish() == 0
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["sanitize"] == "memcheck" and results["benchmarks"] == [] and results["tables"] == []
    [check] = results["checks"]
    assert check["name"] == "sanitize-k-vs-b" and "under compute-sanitizer (memcheck), untimed" in check["message"]
    assert results["skipped_parts"] == [{"part": "peak memory",
                                         "reason": "under compute-sanitizer: memory statistics count nothing"}]


@pytest.mark.unit
def test_outside_the_sanitizer_nothing_changes(monkeypatch, tmp_path):
    monkeypatch.delenv(kit.SANITIZE_ENV, raising=False)
    monkeypatch.delenv(kit.INTERPRET_ENV, raising=False)
    monkeypatch.delenv(kit.RESULTS_ENV, raising=False)
    lesson = kit.kit.Lesson("plain")
    assert not lesson.untimed and lesson.size(gpu=1 << 28, smoke=1000) == 1 << 28
    assert not lesson.not_under_sanitizer("peak memory", "why")


KERNELS = '''\
import triton


@triton.jit
def helper(x):
    return x


# snippet: exchange
@triton.jit
def exchange_kernel(x_ptr):
    pass  # the store
    pass  # the load
# end snippet
'''


@pytest.mark.unit
def test_a_declaration_names_lines_by_number_range_region_or_function(sanitized, tmp_path):
    folder = tmp_path / "code" / "racy"
    folder.mkdir(parents=True)
    (folder / "kernels.py").write_text(KERNELS)
    sanitized._folder = folder
    known = sanitized.sanitizer_known("racecheck", "exchange_kernel",
                                      ["kernels.py:12", "kernels.py:12-13", "kernels.py:exchange",
                                       "kernels.py:exchange_kernel"], "the barrier orders the two")
    spans = [(s.file, s.first, s.last) for s in known.lines]
    assert spans == [("code/racy/kernels.py", 12, 12), ("code/racy/kernels.py", 12, 13),
                     ("code/racy/kernels.py", 10, 13), ("code/racy/kernels.py", 10, 13)]
    # An edit above moves a region and a function with their code; a line number stays where it was.
    (folder / "kernels.py").write_text("# a comment\n# another\n" + KERNELS)
    moved = sanitized.sanitizer_known("racecheck", "exchange_kernel", ["kernels.py:exchange"], "the barrier")
    assert [(s.first, s.last) for s in moved.lines] == [(12, 15)]
    assert len(sanitized.results.sanitizer_known) == 2


@pytest.mark.unit
@pytest.mark.parametrize("tool, kernel, where, why, message", [
    ("memcheck", "k", ["kernels.py:1"], "why", "only initcheck and racecheck"),
    ("racecheck", "not a name", ["kernels.py:1"], "why", "not a kernel name"),
    ("racecheck", "k", "kernels.py:1", "why", "a list"),
    ("racecheck", "k", ["kernels.py:1"], " ", "say why"),
    ("racecheck", "k", ["missing.py:1"], "why", "a source file of the lesson"),
    ("racecheck", "k", ["kernels.py:999"], "why", "has lines 1-"),
    ("racecheck", "k", ["kernels.py:nowhere"], "why", "no snippet region or function"),
    ("racecheck", "k", ["../../../etc/passwd:1"], "why", "a source file of the lesson"),
])
def test_a_declaration_that_cannot_be_checked_is_an_error_at_the_call(sanitized, tmp_path, tool, kernel, where,
                                                                      why, message):
    folder = tmp_path / "code" / "racy"
    folder.mkdir(parents=True)
    (folder / "kernels.py").write_text(KERNELS)
    sanitized._folder = folder
    with pytest.raises(ValueError, match=message):
        sanitized.sanitizer_known(tool, kernel, where, why)
    assert sanitized.results.sanitizer_known == []


# -- the judgement -------------------------------------------------------------------------------

def loc(file: str, line: int, kernel: str = "exchange_kernel", access: str = "") -> SanitizerLocation:
    return SanitizerLocation(kernel, file, line, access)


def finding(kind: str = "race", *places: SanitizerLocation, records: int = 1, hazards: int = 0,
            message: str = "") -> SanitizerFinding:
    return SanitizerFinding(kind, message or f"a {kind}", list(places), records, hazards,
                            "Error" if kind == "race" else "")


def tool_run(tool: str, *findings: SanitizerFinding, state: str = "", errors: int | None = None,
             **fields) -> SanitizerToolRun:
    counted = sum(f.records for f in findings) if errors is None else errors
    return SanitizerToolRun(tool=tool, state=state or ("findings" if findings or counted else "clean"),
                            command=f"compute-sanitizer --tool {tool} python code/x.py", exit_code=0,
                            app_outcome="passed", errors=counted, findings=list(findings), **fields)


def memory_record(lesson, *runs: SanitizerToolRun, known=(), **fields):
    by_tool = {r.tool: r for r in runs}
    runs = [by_tool.get(tool) or tool_run(tool) for tool in TOOLS]
    return fake_record(lesson, "sanitize", key=sanitize_key(H200),
                       sanitizer=SanitizerRun("2025.3.1.0 (build 36400806)", "smoke", runs, list(known)), **fields)


def declared(where: list[tuple[str, int, int]], kernel: str = "exchange_kernel", tool: str = "racecheck"):
    return kit.KnownFinding(tool, kernel, [f"{f}:{a}-{b}" for f, a, b in where],
                            [kit.SourceSpan(f, a, b) for f, a, b in where], "the barrier orders the two accesses")


@pytest.fixture
def lesson(project: Project):
    project.add("racy", "lesson = Lesson('racy')\nsys.exit(lesson.finish())\n")
    return project.lesson("racy")


def judged(lesson, *records, required: bool = True):
    both = [fake_record(lesson, "interpreter"), fake_record(lesson, "gpu")]
    return judge_records(lesson, [*both, *records], memory_required=required)


MAIN = "code/racy/racy.py"


@pytest.mark.unit
def test_memcheck_errors_in_the_lessons_kernel_fail_it_naming_the_kernel_and_the_line(lesson):
    oob = finding("memory-access", loc(MAIN, 41, "store_kernel"), records=26,
                  message="Invalid __global__ write of size 4 bytes")
    st = judged(lesson, memory_record(lesson, tool_run("memcheck", oob)))
    assert st.status == FAILED and st.memory.state == "failed"
    assert f"26 in store_kernel at {MAIN}:41 (Invalid __global__ write of size 4 bytes)" in st.sentence
    assert st.memory.line.startswith("memcheck: 26 errors in store_kernel; synccheck: 0 errors")


@pytest.mark.unit
def test_findings_in_library_kernels_are_counted_not_judged(lesson):
    cublas = finding("memory-access", loc("<site-packages>/torch/lib/libcublas.so", 0, "nvjet_sm90_gemm"), records=3)
    cudnn_race = finding("race", loc("", 0, "cudnn_sdpa_kernel", "Write"), loc("", 0, "cudnn_sdpa_kernel", "Read"))
    st = judged(lesson, memory_record(lesson, tool_run("memcheck", cublas), tool_run("racecheck", cudnn_race)))
    assert st.status == VERIFIED, st.sentence
    assert st.memory.line == ("memcheck: 0 errors (+3 outside the lesson's kernels); synccheck: 0 errors; "
                              "initcheck: clean; racecheck: clean (+1 outside the lesson's kernels)")


@pytest.mark.unit
def test_a_declared_race_is_explained_and_the_lesson_verified(lesson):
    race = finding("race", loc(MAIN, 275, access="Write"), loc(MAIN, 332, access="Read"), hazards=25)
    st = judged(lesson, memory_record(lesson, tool_run("racecheck", race),
                                      known=[declared([(MAIN, 270, 280), (MAIN, 330, 335)])]))
    assert st.status == VERIFIED, st.sentence
    assert st.memory.line == ("memcheck, synccheck: 0 errors; initcheck: clean; "
                              "racecheck: 1 race (25 hazards), explained")
    assert "found nothing unexplained in the lesson's kernels" in st.sentence


@pytest.mark.unit
def test_an_undeclared_finding_and_a_declaration_that_matches_nothing_keep_it_from_verified(lesson):
    race = finding("race", loc(MAIN, 275, access="Write"), loc(MAIN, 332, access="Read"), hazards=25)
    # The declaration covers only one of the two accesses: it matches nothing, and the race stays open.
    st = judged(lesson, memory_record(lesson, tool_run("racecheck", race), known=[declared([(MAIN, 270, 280)])]))
    assert st.status == PARTIAL
    assert f"racecheck reports a race in exchange_kernel at {MAIN}:275, {MAIN}:332, neither fixed nor declared" \
        in st.sentence
    assert "declares a racecheck finding in exchange_kernel" in st.sentence and "does not hold" in st.sentence
    assert st.memory.refused and st.memory.line.endswith("racecheck: 1 race (25 hazards), 1 unexplained")
    uninit = finding("uninitialized", loc(MAIN, 90, "tma_kernel"), message="Uninitialized __global__ memory read")
    st = judged(lesson, memory_record(lesson, tool_run("initcheck", uninit)))
    assert st.status == PARTIAL
    assert "initcheck reports Uninitialized __global__ memory read in tma_kernel" in st.sentence


@pytest.mark.unit
def test_a_declaration_of_another_kernel_or_tool_does_not_cover_a_finding(lesson):
    race = finding("race", loc(MAIN, 275, access="Write"), loc(MAIN, 276, access="Read"))
    for known in (declared([(MAIN, 270, 280)], kernel="other_kernel"), declared([(MAIN, 270, 280)], tool="initcheck")):
        st = judged(lesson, memory_record(lesson, tool_run("racecheck", race), known=[known]))
        assert st.status == PARTIAL and "neither fixed nor declared" in st.sentence


@pytest.mark.unit
@pytest.mark.parametrize("run, words", [
    (tool_run("racecheck", state="timeout", errors=0, reason="killed after the 60 s timeout"), "timed out"),
    (tool_run("initcheck", state="inconclusive", errors=0, reason="no summary line"), "no summary"),
    (tool_run("synccheck", state="not-run", errors=0, reason="memcheck found errors"), "not run"),
    (tool_run("memcheck", state="incomplete", errors=0, reason="Internal Sanitizer Error"), "0 errors (incomplete)"),
    (tool_run("memcheck", errors=500, not_printed=500), "0 errors, 500 not shown"),
])
def test_a_tool_that_did_not_see_everything_keeps_it_from_verified(lesson, run, words):
    st = judged(lesson, memory_record(lesson, run))
    assert st.status == PARTIAL and st.memory.state == "partial"
    assert f"{run.tool}: {words}" in st.memory.line


@pytest.mark.unit
def test_the_lessons_own_run_failing_under_the_tool_leaves_the_check_incomplete(lesson):
    st = judged(lesson, memory_record(lesson, outcome="failed", exit_code=1, reason="check result"))
    assert st.status == PARTIAL and "under memcheck the lesson's run failed (check result)" in st.sentence


@pytest.mark.unit
def test_once_the_course_checks_memory_a_lesson_without_a_current_check_is_not_verified(lesson):
    assert judged(lesson, required=False).status == VERIFIED
    assert "Memory safety was not checked" in judged(lesson, required=False).sentence
    st = judged(lesson, required=True)
    assert st.status == PARTIAL and st.modes["sanitize"].state == "none"
    assert "Memory safety not checked yet" in st.sentence
    assert "python3 tools/verify.py --lesson racy --mode sanitize --bundle racy-sanitize.tar.gz" in st.sentence
    old = memory_record(lesson, source_hash="0" * 64)
    st = judged(lesson, old, required=True)
    assert st.status == PARTIAL and st.modes["sanitize"].state == "stale" and st.stale_sanitize == [old]
    assert st.stale == []  # the interpreter's and the GPU's records are another list


@pytest.mark.unit
def test_the_course_checks_memory_from_its_first_sanitize_record_on(project: Project, lesson):
    project.add("other", "lesson = Lesson('other')\nsys.exit(lesson.finish())\n", order=2)
    other = project.lesson("other")
    for each in (lesson, other):
        for mode in ("interpreter", "gpu"):
            write_record(project.evidence, fake_record(each, mode))
    assert project.judge("other").status == VERIFIED
    write_record(project.evidence, memory_record(lesson))
    assert project.judge("racy").status == VERIFIED
    st = project.judge("other")
    assert st.status == PARTIAL and "Memory safety not checked yet" in st.sentence


@pytest.mark.unit
def test_a_stale_memory_check_is_a_check_problem_naming_the_file(project: Project, lesson):
    for mode in ("interpreter", "gpu"):
        write_record(project.evidence, fake_record(lesson, mode))
    write_record(project.evidence, memory_record(lesson, source_hash="1" * 64))
    st = project.judge("racy")
    assert st.modes["sanitize"].state == "stale"
    assert any("evidence/racy/sanitize-gpu-nvidia-h200.json is for another source" in p for p in check_problems([st]))


# -- the format's rules ------------------------------------------------------------------------------

def as_json(record) -> dict:
    return json.loads(record.to_json())


@pytest.mark.unit
@pytest.mark.parametrize("edit, message", [
    (lambda r: r.update(key="sanitize-gpu-nvidia-a100"), "names it 'sanitize-gpu-nvidia-h200'"),
    (lambda r: r.update(sanitizer=None), "a sanitize record holds its tools' runs"),
    (lambda r: r["sanitizer"]["runs"][0].update(state="clean", errors=3), "clean, but it has findings"),
    (lambda r: r["sanitizer"]["runs"].reverse(), "each tool once, in the order"),
    (lambda r: r["sanitizer"]["runs"][1].update(state="not-run", reason=""), "the reason why"),
    # what reaches a page and a sentence is bounded by the schema too, not only by the recorder
    (lambda r: r["sanitizer"]["runs"][0].update(state="findings", errors=1, findings=[{
        "kind": "other", "message": "x" * (LIMITS.sanitizer_text + 1)}]), "over the limit"),
    (lambda r: r["sanitizer"].update(known=[{"tool": "memcheck", "kernel": "k", "where": ["x.py:1"],
                                             "lines": [{"file": "code/x.py", "first": 1, "last": 1}],
                                             "why": "w"}]), "'memcheck' is not one of 'initcheck', 'racecheck'"),
])
def test_a_sanitize_record_that_breaks_the_rules_is_refused(lesson, edit, message):
    raw = as_json(memory_record(lesson))
    record_from_json(raw, "ok.json")
    edit(raw)
    with pytest.raises(EvidenceError, match=message):
        record_from_json(raw, "bad.json")


@pytest.mark.unit
def test_a_gpu_record_holds_no_sanitizer_runs(lesson):
    raw = as_json(fake_record(lesson, "gpu"))
    raw["sanitizer"] = as_json(memory_record(lesson))["sanitizer"]
    with pytest.raises(EvidenceError, match="only a sanitize record does"):
        record_from_json(raw, "gpu.json")


@pytest.mark.unit
def test_a_record_keeping_more_errors_than_it_counts_is_not_used(lesson):
    bad = memory_record(lesson, tool_run("memcheck", finding("memory-access", loc(MAIN, 3), records=9), errors=2))
    st = judged(lesson, bad)
    assert st.sanitize_records == [] and "9 records kept" in st.sentence


# -- the control ---------------------------------------------------------------------------------

def planted_line() -> int:
    lines = (CONTROL / "oob_store.py").read_text().splitlines()
    return next(n for n, line in enumerate(lines, start=1) if "# the store past the end" in line)


@pytest.mark.unit
def test_the_controls_record_is_judged_failed_naming_its_kernel_and_the_planted_line():
    """The committed record of the control, recorded on an H200 under compute-sanitizer 2025.3.1 with the
    caching allocator off (experiments/sanitize_probe.sh): memcheck saw the stores past the end."""
    [control] = discover(FIXTURES / "code")
    st = judge(control, FIXTURES / "evidence")
    assert st.problems == [] and len(st.sanitize_records) == 1, st.sentence
    record = st.sanitize_records[0]
    assert st.is_current(record), "the control changed: record it again (its docstring says how)"
    assert st.status == FAILED and st.memory.state == "failed"
    assert f"store_past_end_kernel at code/oob-store/oob_store.py:{planted_line()}" in st.sentence
    memcheck = record.sanitizer.runs[0]
    assert memcheck.tool == "memcheck" and memcheck.errors > 0 and "--padding 512" in memcheck.command
    assert [r.state for r in record.sanitizer.runs[1:]] == ["not-run"] * 3  # no point after memcheck errors
    assert record.env.device_name == "NVIDIA H200" and record.sanitizer.version.startswith("2025.3.1")


# -- verify.py --mode sanitize, with the fake tool ----------------------------------------------------

@pytest.fixture
def fake_tool(tmp_path) -> Path:
    path = tmp_path / "bin" / "compute-sanitizer"
    path.parent.mkdir()
    path.write_text(f"#!/bin/sh\nexec {sys.executable} {FAKE} \"$@\"\n")
    path.chmod(0o755)
    return path


def sanitize(project: Project, tool: Path, reports: Path | None = None, *args: str, **env):
    return project.verify("--mode", "sanitize", *args, timeout=300, VT_FAKE_GPUS=f"0:{H200}",
                          COMPUTE_SANITIZER=str(tool), FAKE_SANITIZER_REPORTS=str(reports or tool.parent),
                          FAKE_SANITIZER_CALLS=str(tool.parent / "calls.jsonl"), **env)


RACY = """\
    from lessonkit import bench_interleaved

    lesson = Lesson("racy")
    if lesson.step("exchange", needs_gpu="a GPU"):
        # snippet: exchange
        lesson.check("exchanged", True, "both halves swapped")
        # end snippet
        t = bench_interleaved({"k": lambda: None, "b": lambda: None})
        lesson.benchmark("k-vs-b", "k vs b", t, "k", "b")
        lesson.sanitizer_known("racecheck", "exchange_kernel", ["racy.py:exchange"], "the barrier orders them")
    sys.exit(lesson.finish())
"""
RACE_REPORT = """\
========= Error: Race reported between Write access at exchange_kernel+0x90 in {main}:{line:lesson.check("exchanged"}
=========     and Read access at exchange_kernel+0x100 in {main}:{line:lesson.check("exchanged"} [508 hazards]
=========
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
"""


def reports_dir(tmp_path: Path, **tools: str) -> Path:
    folder = tmp_path / "reports"
    folder.mkdir(exist_ok=True)
    for tool, text in tools.items():
        (folder / f"{tool}.txt").write_text(text)
    return folder


@pytest.mark.integration
def test_sanitize_mode_is_refused_without_a_gpu_or_without_the_tool(project: Project, lesson, fake_tool):
    no_gpu = project.verify("--mode", "sanitize", COMPUTE_SANITIZER=str(fake_tool))
    assert no_gpu.returncode == 2 and "--mode sanitize: no CUDA device found" in no_gpu.stderr
    no_tool = project.verify("--mode", "sanitize", VT_FAKE_GPUS=f"0:{H200}", COMPUTE_SANITIZER=str(fake_tool) + "x",
                             PATH="/nonexistent")
    assert no_tool.returncode == 2 and "compute-sanitizer not found" in no_tool.stderr
    assert project.files() == {}


@pytest.mark.integration
def test_each_tool_runs_the_lesson_with_the_allocator_off_and_a_declared_race_is_explained(project: Project,
                                                                                           fake_tool, tmp_path):
    project.add("racy", RACY)
    reports = reports_dir(tmp_path, racecheck=RACE_REPORT)
    run = sanitize(project, fake_tool, reports)
    assert run.returncode == 0, run.stdout + run.stderr
    for tool in TOOLS:  # progress per lesson and tool, with times, and a summary
        assert f"racy [sanitize] {tool}: " in run.stdout
    assert "memory check (compute-sanitizer)" in run.stdout and "sanitize: 1 lesson, " in run.stdout
    calls = [json.loads(line) for line in (fake_tool.parent / "calls.jsonl").read_text().splitlines()]
    # memcheck first, alone; then the other three at the same time (each call is logged when it ends)
    assert calls[0]["tool"] == "memcheck" and sorted(c["tool"] for c in calls) == sorted(TOOLS)
    assert all(c["start"] >= calls[0]["end"] for c in calls[1:])
    assert max(c["start"] for c in calls[1:]) < min(c["end"] for c in calls[1:]), "the three did not overlap"
    for call in calls:
        assert call["env"]["PYTORCH_NO_CUDA_MEMORY_CACHING"] == "1" and call["env"]["VT_SANITIZE"] == call["tool"]
        assert call["env"]["PYTORCH_CUDA_ALLOC_CONF"] is None and call["env"]["VT_PARENT_PID"] is None
        assert call["program"][-1] == str(project.main_file("racy"))
    assert len({c["env"]["TRITON_CACHE_DIR"] for c in calls}) == 1  # one Triton cache for the lesson's runs
    record = project.record("racy", sanitize_key(H200))
    assert record.mode == "sanitize" and record.sanitizer.version.startswith("0.0.0 (fake")
    assert [r.state for r in record.sanitizer.runs] == ["clean", "clean", "clean", "findings"]
    assert record.sanitizer.runs[3].command.startswith("compute-sanitizer --tool racecheck --log-file <scratch>/")
    [known] = record.sanitizer.known
    assert known.where == ["racy.py:exchange"] and known.lines[0].file == "code/racy/racy.py"
    for mode in ("interpreter", "gpu"):
        write_record(project.evidence, fake_record(project.lesson("racy"), mode))
    st = project.judge("racy")
    assert st.status == VERIFIED, st.sentence
    assert st.memory.line.endswith("racecheck: 1 race (508 hazards), explained")


@pytest.mark.integration
def test_memcheck_errors_stop_the_other_tools_and_fail_the_run(project: Project, fake_tool, tmp_path):
    project.add("racy", RACY)
    report = ("========= Invalid __global__ write of size 4 bytes\n"
              "=========     at exchange_kernel+0x10 in {main}:{line:lesson.check(\"exchanged\"}\n"
              "=========\n========= ERROR SUMMARY: 1 error\n")
    run = sanitize(project, fake_tool, reports_dir(tmp_path, memcheck=report))
    assert run.returncode == 1, run.stdout + run.stderr
    record = project.record("racy", sanitize_key(H200))
    assert [r.state for r in record.sanitizer.runs] == ["findings", "not-run", "not-run", "not-run"]
    assert record.sanitizer.runs[0].exit_code == sanitizer_command.ERROR_EXITCODE and record.exit_code == 0
    assert "new finding, memcheck: Invalid __global__ write of size 4 bytes in exchange_kernel" in run.stdout
    st = project.judge("racy")
    assert st.status == FAILED and "exchange_kernel at code/racy/racy.py:" in st.sentence


@pytest.mark.integration
def test_a_gpu_the_tool_cannot_check_is_said_and_nothing_is_recorded(project: Project, fake_tool, tmp_path):
    project.add("racy", RACY)
    run = sanitize(project, fake_tool, reports_dir(tmp_path, memcheck="UNSUPPORTED\n"))
    assert run.returncode == 2, run.stdout + run.stderr
    assert "Device not supported" in run.stdout and "nothing was recorded, and no lesson failed" in run.stderr
    assert project.files() == {}


@pytest.mark.integration
def test_sanitize_records_travel_in_bundles_and_a_new_finding_is_a_change(project: Project, fake_tool, tmp_path):
    project.add("racy", RACY)
    bundle = tmp_path / "san.tar.gz"
    assert sanitize(project, fake_tool, None, "--bundle", str(bundle)).returncode == 0
    with tarfile.open(bundle) as tar:
        assert tar.getnames() == ["racy/sanitize-gpu-nvidia-h200.json"]
    again = tmp_path / "again.tar.gz"
    run = sanitize(project, fake_tool, reports_dir(tmp_path, racecheck=RACE_REPORT), "--force", "--bundle", str(again))
    assert run.returncode == 0, run.stdout + run.stderr
    (project.evidence / "racy" / "sanitize-gpu-nvidia-h200.json").unlink()
    imported = project.verify("--import", str(bundle), "--expect-mode", "sanitize", "--expect-gpu", "h200")
    assert imported.returncode == 0, imported.stdout + imported.stderr
    held = project.verify("--import", str(again))
    assert held.returncode == 1 and "new finding, racecheck: Error: race between accesses in exchange_kernel" \
        in held.stderr
    taken = project.verify("--import", str(again), "--accept-changes")
    assert taken.returncode == 0 and "change: racy [sanitize-gpu-nvidia-h200] new finding" in taken.stdout
    wrong = project.verify("--import", str(again), "--expect-mode", "gpu")
    assert wrong.returncode == 1 and "a sanitize record, but the job that made this bundle records gpu only" \
        in wrong.stderr


@pytest.mark.integration
def test_check_and_publish_say_what_memory_check_is_missing_and_how_to_record_it(project: Project, lesson):
    project.add("other", "lesson = Lesson('other')\nsys.exit(lesson.finish())\n", order=2)
    for each in (lesson, project.lesson("other")):
        for mode in ("interpreter", "gpu"):
            write_record(project.evidence, fake_record(each, mode))
    write_record(project.evidence, memory_record(lesson))
    check = project.verify("--check")
    assert check.returncode == 0 and "1 still waits for a memory check (other)" in check.stdout
    publish = project.verify("--check", "--publish")
    assert publish.returncode == 1
    assert ("other: PARTIALLY VERIFIED, not by design: memory safety not checked yet" in publish.stderr
            and "python3 tools/verify.py --lesson other --mode sanitize --bundle other-sanitize.tar.gz"
            in publish.stderr)


@pytest.mark.unit
def test_the_lesson_toml_sanitize_table_picks_the_sizes_and_the_timeout(project: Project):
    project.add("sized", "lesson = Lesson('sized')\nsys.exit(lesson.finish())\n",
                toml='[gpu]\ntimeout = 90\n\n[sanitize]\nsize = "gpu"\n')
    lesson = project.lesson("sized")
    # each tool its own time, from the measured figures (core/lessons.py SANITIZE_TIMEOUTS), not the GPU run's
    assert lesson.sanitize.size == "gpu"
    assert {tool: lesson.sanitize.timeout(tool) for tool in TOOLS} == SANITIZE_TIMEOUTS
    project.add("every", "lesson = Lesson('every')\nsys.exit(lesson.finish())\n",
                toml='[sanitize]\ntimeout = 90\n\n[sanitize.timeouts]\nracecheck = 700\n', order=3)
    every = project.lesson("every")
    assert {tool: every.sanitize.timeout(tool) for tool in TOOLS} == {"memcheck": 90, "synccheck": 90,
                                                                     "initcheck": 90, "racecheck": 700}
    project.add("plain", "lesson = Lesson('plain')\nsys.exit(lesson.finish())\n", toml="[gpu]\ntimeout = 90\n")
    plain = load_lesson(project.code / "plain")
    assert plain.sanitize.size == "smoke" and "sanitize" not in plain.run_spec  # its hash is as before the table
    project.add("bad", "", toml='[sanitize]\nsize = "huge"\n')
    with pytest.raises(Exception, match="size"):
        project.lesson("bad")


@pytest.mark.integration
def test_a_gpu_or_interpreter_run_is_never_a_sanitizer_run_even_with_vt_sanitize_set(project: Project):
    project.add("good", """\
        lesson = Lesson("good")
        lesson.table("sizes", ["n"], [[1]])
        sys.exit(lesson.finish())
    """)
    run = project.verify("--mode", "interpreter", **{kit.SANITIZE_ENV: "memcheck"})
    assert run.returncode == 0, run.stderr
    record = project.record("good")
    assert [t.name for t in record.tables] == ["sizes"] and record.sanitizer is None


# -- the pages ------------------------------------------------------------------------------------

@pytest.mark.unit
def test_the_status_box_and_the_status_table_show_the_memory_check_escaped(project: Project, lesson):
    from verified_triton.site.directives import REGISTRY, Page, Site

    for mode in ("interpreter", "gpu"):
        write_record(project.evidence, fake_record(lesson, mode))
    race = finding("race", loc(MAIN, 5, access="Write"), loc(MAIN, 6, access="Read"), hazards=25,
                   message="Error: race <b>between</b> accesses")
    write_record(project.evidence, memory_record(lesson, tool_run("racecheck", race),
                                                 known=[declared([(MAIN, 1, 9)])]))
    site = Site.load(project.code, project.evidence)
    page = Page(site, "lessons/racy.md", site.status("racy"))
    box = REGISTRY["status"].render(page)
    assert '??? vt-memory-passed vt-memory "Memory check: memcheck, synccheck&#58; 0 errors' in box
    assert "racecheck&#58; 1 race (25 hazards), explained" in box
    assert "race &#60;b&#62;between&#60;/b&#62; accesses" in box and "<b>" not in box
    assert "declared harmless: the barrier orders the two accesses" in box
    table = REGISTRY["status-table"].render(Page(site, "status.md", None))
    assert "| Memory check |" in table.split("\n")[0] + " |"
    assert "compute-sanitizer 2025.3.1.0" in table


REAL = os.environ.get("VT_REAL_COMPUTE_SANITIZER", "")


@pytest.mark.unit
@pytest.mark.skipif(not REAL, reason="no real compute-sanitizer: set VT_REAL_COMPUTE_SANITIZER to one (pip download "
                                     "nvidia-cuda-sanitizer-api==13.0.85 holds nvidia/cu13/bin/compute-sanitizer)")
@pytest.mark.parametrize("tool", TOOLS)
def test_the_real_tool_accepts_every_option_and_says_when_it_cannot_run(tool, tmp_path):
    """Without a GPU the real tool runs nothing, but it parses the command line first: a misspelt option is
    rc 255 and `unrecognised option` on stderr. Measured with 2025.3.1 (the wheel above) on this machine."""
    version, problem = sanitizer_command.tool_version(REAL)
    assert not problem and version.startswith("20"), problem
    log = tmp_path / f"{tool}.log"
    run = subprocess.run([REAL, *sanitizer_command.tool_options(tool, log), sys.executable, "-c", "pass"],
                         capture_output=True, text=True, timeout=120)
    assert "unrecognised option" not in run.stderr, run.stderr
    report = sanitizer_log.parse_log(log.read_text())
    state, reason = sanitizer.classify_tool(report, run_captured(run.returncode), 120, "")
    assert state == "unavailable" and "compute-sanitizer could not run here" in reason  # no GPU: never "clean"


# -- issue 48: every kernel instrumented, the reproducer rule, one racecheck per GPU, per-tool timeouts ---------

KERNEL_LESSON = """\
    import triton


    @triton.jit
    def matmul_kernel(a_ptr):
        pass


    lesson = Lesson("mm")
    lesson.check("ran", True, "it ran")
    sys.exit(lesson.finish())
"""
REPRO = "import triton\n\n\n@triton.jit\ndef repro_kernel(a_ptr):\n    pass\n\n\nprint('the reproducer ran')\n"
NOT_APPLICABLE = """\
[[sanitize.not_applicable]]
tool = "racecheck"
kernels = ["matmul_kernel"]
reproducer = "racecheck_repro.py"
why = "racecheck 2025.3.1 fails to handle a hardware exception on this kind of kernel"
"""
CRASHED = ("========= Internal Sanitizer Error: The Sanitizer failed to handle a hardware exception.\n"
           "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n")


@pytest.mark.integration
def test_a_declared_reproducer_runs_under_its_tool_and_the_rule_holds_both_ways(project: Project, fake_tool,
                                                                                tmp_path):
    """The recording runs the reproducer under the same tool as the lesson; while it fails the same way the tool
    is not applicable to the kernels named, and once it stops failing (a fixed tool), the tool applies again."""
    project.add("mm", KERNEL_LESSON, toml=NOT_APPLICABLE, files={"racecheck_repro.py": REPRO})
    reports = reports_dir(tmp_path, racecheck=CRASHED)  # the lesson's run and the reproducer's alike
    run = sanitize(project, fake_tool, reports)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "mm [sanitize] racecheck, reproducer racecheck_repro.py: incomplete" in run.stdout
    calls = [json.loads(line) for line in (fake_tool.parent / "calls.jsonl").read_text().splitlines()]
    repro = [c for c in calls if c["program"][-1].endswith("racecheck_repro.py")]
    assert [c["tool"] for c in repro] == ["racecheck"] and repro[0]["options"]["racecheck-report"] == ["analysis"]
    for mode in ("interpreter", "gpu"):
        write_record(project.evidence, fake_record(project.lesson("mm"), mode))
    st = project.judge("mm")
    assert st.status == VERIFIED, st.sentence
    assert "racecheck is not applicable to matmul_kernel: its reproducer code/mm/racecheck_repro.py fails the same " \
           "way" in st.sentence
    [recorded] = project.record("mm", sanitize_key(H200)).sanitizer.reproducers
    assert (recorded.file, recorded.run.state) == ("code/mm/racecheck_repro.py", "incomplete")
    # the tool is fixed: the reproducer finishes clean, the lesson's run still does not
    (reports / "racecheck-racecheck_repro.txt").write_text(
        "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n")
    again = sanitize(project, fake_tool, reports, "--force")
    assert again.returncode == 0, again.stdout + again.stderr
    st = project.judge("mm")
    assert st.status == PARTIAL and "no longer fails the same way (finished (clean)), so racecheck applies to " \
                                    "matmul_kernel again" in st.sentence


@pytest.mark.integration
def test_one_racecheck_per_gpu_at_a_time_while_the_other_tools_share_it(project: Project, fake_tool, tmp_path):
    for order, name in enumerate(("one", "two", "three")):
        project.add(name, f"lesson = Lesson('{name}')\nsys.exit(lesson.finish())\n", order=order)
    slow = "SLEEP 1.5\n========= {summary}\n"
    reports = reports_dir(tmp_path, racecheck=slow.format(summary="RACECHECK SUMMARY: 0 hazards displayed (0 errors, "
                                                                  "0 warnings)"),
                          initcheck=slow.format(summary="ERROR SUMMARY: 0 errors"))
    run = sanitize(project, fake_tool, reports, "--jobs", "3")
    assert run.returncode == 0, run.stdout + run.stderr
    calls = [json.loads(line) for line in (fake_tool.parent / "calls.jsonl").read_text().splitlines()]

    def overlapping(tool: str) -> bool:
        spans = sorted((c["start"], c["end"]) for c in calls if c["tool"] == tool)
        return any(later[0] < earlier[1] for earlier, later in zip(spans, spans[1:], strict=False))

    assert len([c for c in calls if c["tool"] == "racecheck"]) == 3
    assert not overlapping("racecheck")
    assert overlapping("initcheck")  # the other tools may share the GPU (and did)


@pytest.mark.integration
def test_each_tool_has_its_own_time_limit(project: Project, fake_tool, tmp_path):
    project.add("slow", "lesson = Lesson('slow')\nsys.exit(lesson.finish())\n",
                toml="[sanitize.timeouts]\nracecheck = 2\n")
    reports = reports_dir(tmp_path, racecheck="SLEEP 20\n========= RACECHECK SUMMARY: 0 hazards displayed "
                                              "(0 errors, 0 warnings)\n")
    run = sanitize(project, fake_tool, reports)
    assert run.returncode == 0, run.stdout + run.stderr
    runs = {r.tool: r for r in project.record("slow", sanitize_key(H200)).sanitizer.runs}
    assert runs["racecheck"].state == "timeout" and runs["racecheck"].reason == "killed after the 2 s timeout"
    assert all(runs[tool].state == "clean" for tool in ("memcheck", "synccheck", "initcheck"))
