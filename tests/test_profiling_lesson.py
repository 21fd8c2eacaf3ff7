"""The profiling lesson's readers of tool reports, on text in the tools' real formats.

code/profiling-debugging/lesson.py runs compute-sanitizer, Nsight Compute and
Proton on a GPU and reads what they write. No GPU runs here, so these tests hold the readers
against reports in the formats the tools print: memcheck records and summaries as compute-sanitizer
2023.3 to 2025.x writes them (and the older `at 0xPC in FILE:LINE:FUNC`), ncu's `--csv --page details`
table behind its ==PROF== lines, tl.device_print's two formats (the interpreter's and a GPU's,
as Triton's own tests spell it) and a Proton .hatchet tree. A report the reader cannot use must come
out as "no summary" or "refused", never as a clean run.
"""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest

from conftest import REPO

LESSON = REPO / "code" / "profiling-debugging" / "lesson.py"


@pytest.fixture(scope="module")
def pd():
    spec = importlib.util.spec_from_file_location("profiling_debugging_under_test", LESSON)
    module = importlib.util.module_from_spec(spec)
    saved = list(sys.path)
    try:
        spec.loader.exec_module(module)  # its own lines put code/ and its folder on sys.path
    finally:
        sys.path[:] = saved
    return module


# The lesson's planted store as memcheck 2025.x reports it (PC offset after the kernel's name,
# the file's base name, the thousands separators of sizes), with the child's own output mixed in.
PLANTED = """\
========= COMPUTE-SANITIZER
specimen: launched
========= Invalid __global__ write of size 4 bytes
=========     at fill_planted+0x1b0 in specimens.py:84
=========     by thread (232,0,0) in block (3,0,0)
=========     Access to 0x7f3c7ec00fa0 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f3c7ec00000 of size 4,000 bytes
=========
========= Invalid __global__ write of size 4 bytes
=========     at fill_planted+0x1b0 in specimens.py:84
=========     by thread (233,0,0) in block (3,0,0)
=========     Access to 0x7f3c7ec00fa4 is out of bounds
=========     and is 5 bytes after the nearest allocation at 0x7f3c7ec00000 of size 4,000 bytes
=========
========= Program hit cudaErrorLaunchFailure (error 719) due to "unspecified launch failure" on CUDA API call to cuStreamSynchronize.
=========
Traceback (most recent call last):
RuntimeError: CUDA error: unspecified launch failure
========= Target application returned an error
========= ERROR SUMMARY: 1,026 errors
========= ERROR SUMMARY: 926 errors were not printed. Use --print-limit option to adjust the number of printed errors
"""  # noqa: E501 - the tool's lines, as it prints them

# compute-sanitizer's manual (a debug build): "Address", a device frame and host frames.
MANUAL = """\
========= Invalid __global__ write of size 4 bytes
=========     at out_of_bounds_function()+0xb0 in memcheck_demo.cu:39
=========     by thread (0,0,0) in block (0,0,0)
=========     Address 0x87654320 is out of bounds
=========     and is 137,179,965,340,896 bytes before the nearest allocation at 0x7cc43a800000 of size 1,024 bytes
=========     Device Frame: out_of_bounds_kernel()+0x30 in memcheck_demo.cu:44
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: run_out_of_bounds() [0xadb6] in memcheck_demo
=========         Host Frame: main [0xae66] in memcheck_demo
=========
========= ERROR SUMMARY: 1 error
"""

# A Triton kernel before compute-sanitizer 2023.3 (sglang#2599): PC first, the function last.
OLD = """\
========= Invalid __global__ read of size 2 bytes
=========     at 0xda0 in /opt/sgl/fused_moe_triton/fused_moe.py:175:fused_moe_kernel
=========     by thread (0,0,0) in block (9,0,0)
=========     Address 0x763995f9f000 is out of bounds
=========
========= ERROR SUMMARY: 1 error
"""


@pytest.mark.unit
def test_memcheck_reads_the_planted_store_record_by_record(pd):
    report = pd.read_memcheck(PLANTED)
    assert report.errors == 1026  # the summary's count, not the two records printed
    assert [(a.what, a.size, a.kernel, a.file, a.line) for a in report.accesses] == [
        ("Invalid __global__ write", 4, "fill_planted", "specimens.py", 84)] * 2
    assert report.refused == ""


@pytest.mark.unit
def test_memcheck_reads_the_manuals_and_the_old_location_formats(pd):
    manual = pd.read_memcheck(MANUAL)
    assert manual.errors == 1
    assert [(a.kernel, a.file, a.line) for a in manual.accesses] == [
        ("out_of_bounds_function", "memcheck_demo.cu", 39)]  # the faulting line, not a frame
    old = pd.read_memcheck(OLD)
    assert [(a.what, a.size, a.kernel, a.file, a.line) for a in old.accesses] == [
        ("Invalid __global__ read", 2, "fused_moe_kernel", "fused_moe.py", 175)]


@pytest.mark.unit
def test_a_clean_run_is_zero_errors_and_no_summary_is_not_clean(pd):
    clean = pd.read_memcheck("========= COMPUTE-SANITIZER\nspecimen: launched\n"
                             "========= ERROR SUMMARY: 0 errors\n")
    assert (clean.errors, clean.accesses, clean.refused) == (0, [], "")
    cut = pd.read_memcheck(PLANTED.split("========= Target")[0])  # killed before its summary
    assert cut.errors is None and len(cut.accesses) == 2


@pytest.mark.unit
def test_every_process_summary_counts(pd):
    """compute-sanitizer follows child processes and ends each with its own summary."""
    two = "========= ERROR SUMMARY: 0 errors\n" + PLANTED
    assert pd.read_memcheck(two).errors == 1026
    assert pd.read_memcheck(MANUAL + MANUAL).errors == 2


@pytest.mark.unit
@pytest.mark.parametrize("log, why", [
    ("========= COMPUTE-SANITIZER\n========= Error: Device not supported\n", "Device not supported"),
    ("========= Error: Target application terminated before first instrumented API call\n",
     "Target application terminated before first instrumented API call"),
    ("", ""),
])
def test_a_tool_that_could_not_run_is_refused_not_clean(pd, log, why):
    report = pd.read_memcheck(log)
    assert report.errors is None and report.refused == why


@pytest.mark.unit
@pytest.mark.parametrize("where, parsed", [
    ("fill_planted+0x1b0 in specimens.py:84", ("fill_planted", "specimens.py", 84)),
    ("fill_planted+0x1b0 in /home/u/code/profiling-debugging/specimens.py:84",
     ("fill_planted", "/home/u/code/profiling-debugging/specimens.py", 84)),
    ("unaligned_kernel():0x160 in memcheck_demo.cu:6", ("unaligned_kernel", "memcheck_demo.cu", 6)),
    ("0xda0 in /opt/x/fused_moe.py:175:fused_moe_kernel", ("fused_moe_kernel", "/opt/x/fused_moe.py", 175)),
    ("cp_async_bulk_cp_mask in cp_async_bulk.h:236", ("cp_async_bulk_cp_mask", "cp_async_bulk.h", 236)),
])
def test_split_location(pd, where, parsed):
    assert pd.split_location(where) == parsed


NCU = """\
==PROF== Connected to process 4242 (/usr/bin/python3.12)
==PROF== Profiling "copy_kernel" - 0: 0%....50%....100% - 9 passes
specimen: copied 67108864 floats: True
==PROF== Disconnected from process 4242
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value","Rule Name","Rule Type","Rule Description","Estimated Speedup Type","Estimated Speedup"
"0","4242","python3.12","127.0.0.1","copy_kernel","1","7","(128, 1, 1)","(65536, 1, 1)","0","9.0","GPU Speed Of Light Throughput","DRAM Frequency","hz","2,619,000,000","","","","",""
"0","4242","python3.12","127.0.0.1","copy_kernel","1","7","(128, 1, 1)","(65536, 1, 1)","0","9.0","GPU Speed Of Light Throughput","Duration","nsecond","130,048","","","","",""
"0","4242","python3.12","127.0.0.1","copy_kernel","1","7","(128, 1, 1)","(65536, 1, 1)","0","9.0","GPU Speed Of Light Throughput","DRAM Throughput","%","91.37","","","","",""
"0","4242","python3.12","127.0.0.1","copy_kernel","1","7","(128, 1, 1)","(65536, 1, 1)","0","9.0","GPU Speed Of Light Throughput","Memory Throughput","%","91.37","","","","",""
"0","4242","python3.12","127.0.0.1","copy_kernel","1","7","(128, 1, 1)","(65536, 1, 1)","0","9.0","Command line profiler metrics","dram__bytes_read.sum","Mbyte","268.44","","","","",""
"0","4242","python3.12","127.0.0.1","copy_kernel","1","7","(128, 1, 1)","(65536, 1, 1)","0","9.0","Command line profiler metrics","dram__bytes_write.sum","byte","261,095,424","","","","",""
"0","4242","python3.12","127.0.0.1","copy_kernel","1","7","(128, 1, 1)","(65536, 1, 1)","0","9.0","GPU Speed Of Light Throughput","","","n/a","SOLBottleneck","OPT","This kernel exhibits good performance","",""
"""  # noqa: E501 - ncu's rows, as it prints them


@pytest.mark.unit
def test_ncu_csv_after_its_messages_in_base_units(pd):
    metrics = pd.read_ncu_csv(NCU)
    assert metrics["DRAM Throughput"] == (91.37, "")
    assert metrics["Duration"][0] == pytest.approx(130_048e-9)
    assert metrics["dram__bytes_read.sum"][0] == pytest.approx(268.44e6)
    assert metrics["dram__bytes_write.sum"] == (261_095_424, "")
    assert metrics["DRAM Frequency"] == (2_619_000_000, "hz")  # a unit it does not scale is kept


@pytest.mark.unit
def test_ncu_without_a_table_reads_as_nothing(pd):
    refused = "==PROF== Connected to process 1\n==ERROR== ERR_NVGPUCTRPERM - The user does not have permission\n"
    assert pd.read_ncu_csv(refused) == {}


@pytest.mark.unit
def test_device_print_offsets_in_the_interpreters_and_a_gpus_format(pd):
    interpreter = "(0, 0, 0)  offs:  [0 1 2 3 4 5 6 7]\n(1, 0, 0)  offs:  [ 6  7  8  9 10 11 12 13]\n"
    gpu = "".join(f"pid (1, 0, 0) idx ({i:3}) offs: {6 + i}\n" for i in range(8))
    gpu += "pid (0, 0, 0) idx (  0) offs: 0\n"
    assert pd.printed_offsets(interpreter, 1) == list(range(6, 14))
    assert pd.printed_offsets(gpu, 1) == list(range(6, 14))
    assert pd.printed_offsets(gpu, 2) == []


@pytest.mark.unit
def test_hatchet_leaves_of_one_kernel(pd):
    tree = [{"frame": {"name": "ROOT", "type": "function"}, "metrics": {"count": 0, "time (ns)": 0},
             "children": [
                 {"frame": {"name": "copy_kernel", "type": "function"}, "metrics": {"count": 7},
                  "children": [{"frame": {"name": "copy_kernel", "type": "function"},
                                "metrics": {"count": 7, "time (ns)": 700}, "children": []}]},
                 {"frame": {"name": "copy_kernel", "type": "function"},
                  "metrics": {"count": 3, "time (ns)": 300}, "children": []},
                 {"frame": {"name": "other", "type": "function"}, "metrics": {"count": 5}, "children": []}]},
            {"CUDA": {"0": {"arch": "90", "num_sms": 132}}}]
    leaves = pd.hatchet_kernels(tree, "copy_kernel")
    assert sum(m["count"] for m in leaves) == 10  # the scope above a leaf is not counted twice


# -- The GPU steps' own code, with stand-ins for the tools ----------------------------------------
# Neither compute-sanitizer nor ncu runs here. A stand-in that takes the same command line and writes
# its report where the lesson asks runs the step's code from finding the tool to its checks.

class Recorder:
    """What a step told the kit, in order."""

    interpret = False

    def __init__(self):
        self.calls = []

    def check(self, name, ok, message="", why=""):
        self.calls.append(("check", name, bool(ok), message))

    def skip(self, name, reason):
        self.calls.append(("skip", name, reason))

    def predict(self, name, *args, **kwargs):
        self.calls.append(("predict", name))

    def measured(self, name, value):
        self.calls.append(("measured", name, value))

    def table(self, name, *args, **kwargs):
        self.calls.append(("table", name))

    def outcomes(self, kind="check"):
        return {c[1]: c[2] for c in self.calls if c[0] == kind}


FAKE_SANITIZER = '''\
#!{python}
import os, sys
args = sys.argv[1:]
if args == ["--version"]:
    print("Compute Sanitizer Version 2025.3.1.0 (a stand-in)")
    sys.exit(0)
log = args[args.index("--log-file") + 1]
which = args[-1]
uncached = os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING") == "1"
print("specimen: launched")
with open(log, "w") as f:
    f.write("========= COMPUTE-SANITIZER\\n")
    if which == "planted" and uncached:
        for thread in (232, 233):
            f.write("========= Invalid __global__ write of size 4 bytes\\n"
                    "=========     at fill_planted+0x1b0 in " + os.environ["FAKE_AT"] + "\\n"
                    "=========     by thread (%d,0,0) in block (3,0,0)\\n=========\\n" % thread)
        f.write("========= ERROR SUMMARY: 26 errors\\n")
    elif os.environ.get("FAKE_REFUSE"):
        f.write("========= Error: Device not supported\\n")
    else:
        f.write("========= ERROR SUMMARY: 0 errors\\n")
'''


@pytest.fixture
def fake_sanitizer(tmp_path, monkeypatch):
    tool = tmp_path / "compute-sanitizer"
    tool.write_text(FAKE_SANITIZER.format(python=sys.executable))
    tool.chmod(0o755)
    monkeypatch.setenv("COMPUTE_SANITIZER", str(tool))
    monkeypatch.delenv("VT_SANITIZE", raising=False)
    return tool


@pytest.mark.integration
def test_the_memcheck_step_from_the_tool_to_its_checks(pd, fake_sanitizer, monkeypatch):
    monkeypatch.setenv("FAKE_AT", f"specimens.py:{pd.store_line(pd.fill_planted)}")
    lesson = Recorder()
    pd.compute_sanitizer(lesson, "cuda")
    assert lesson.outcomes() == {"memcheck-misses-it-with-the-caching-allocator": True,
                                 "memcheck-finds-it-without-caching": True,
                                 "memcheck-clean-after-the-fix": True}


@pytest.mark.integration
def test_the_memcheck_step_fails_when_the_report_names_another_line(pd, fake_sanitizer, monkeypatch):
    monkeypatch.setenv("FAKE_AT", f"specimens.py:{pd.store_line(pd.fill_planted) - 1}")
    lesson = Recorder()
    pd.compute_sanitizer(lesson, "cuda")
    assert lesson.outcomes()["memcheck-finds-it-without-caching"] is False


@pytest.mark.integration
def test_a_tool_that_refuses_the_device_skips_the_step_with_its_words(pd, fake_sanitizer, monkeypatch):
    monkeypatch.setenv("FAKE_REFUSE", "1")
    monkeypatch.setenv("FAKE_AT", "specimens.py:1")
    lesson = Recorder()
    pd.compute_sanitizer(lesson, "cuda")
    assert [c[0] for c in lesson.calls] == ["skip"]
    assert "Device not supported" in lesson.calls[0][2]


@pytest.mark.unit
def test_no_tool_or_a_run_under_a_sanitizer_skips(pd, monkeypatch, tmp_path):
    monkeypatch.setenv("COMPUTE_SANITIZER", str(tmp_path / "absent"))
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(pd.glob, "glob", lambda pattern: [])
    lesson = Recorder()
    pd.compute_sanitizer(lesson, "cuda")
    assert lesson.calls[0][:2] == ("skip", "memcheck") and "not found" in lesson.calls[0][2]
    monkeypatch.setenv("VT_SANITIZE", "memcheck")
    lesson = Recorder()
    pd.compute_sanitizer(lesson, "cuda")
    assert "itself under compute-sanitizer" in lesson.calls[0][2]


FAKE_NCU = '''\
#!{python}
import sys
args = sys.argv[1:]
log = args[args.index("--log-file") + 1]
n = int(args[-1])
with open(log, "w") as f:
    f.write({csv!r}.replace("READ", str(4 * n)))
'''

NCU_TABLE = NCU.replace('"Mbyte","268.44"', '"byte","READ"')


@pytest.mark.integration
def test_the_nsight_compute_step_from_the_tool_to_its_measurement(pd, tmp_path, monkeypatch):
    tool = tmp_path / "ncu"
    tool.write_text(FAKE_NCU.format(python=sys.executable, csv=NCU_TABLE))
    tool.chmod(0o755)
    monkeypatch.setenv("NCU", str(tool))
    monkeypatch.delenv("VT_SANITIZE", raising=False)
    lesson = Recorder()
    pd.nsight_compute(lesson, "cuda")
    assert lesson.outcomes() == {"ncu-report-read": True, "ncu-dram-reads-are-the-input": True}
    assert ("measured", "copy-dram-throughput", 91.37) in lesson.calls


@pytest.mark.unit
def test_the_proton_step_reads_the_tree_its_child_wrote(pd, monkeypatch):
    tree = [{"frame": {"name": "ROOT", "type": "function"}, "metrics": {}, "children": [
        {"frame": {"name": "copy_kernel", "type": "function"},
         "metrics": {"count": 10, "time (ns)": 1_300_000}, "children": []}]}, {"CUDA": {}}]

    def child(args, prefix=(), env=None, timeout=300):
        assert args[0] == "proton"
        from pathlib import Path
        Path(args[1]).write_text(json.dumps(tree))  # where Proton writes NAME.hatchet
        return pd.Child(args, 0, "specimen: profiled 10 copies\n", "")

    monkeypatch.setattr(pd, "run_child", child)
    monkeypatch.delenv("VT_SANITIZE", raising=False)
    lesson = Recorder()
    pd.proton(lesson, "cuda")
    assert lesson.outcomes() == {"proton-counted-ten-launches": True}
    monkeypatch.setattr(pd, "run_child", lambda *a, **k: pd.Child(["proton"], 1, "", "ImportError: libcupti"))
    lesson = Recorder()
    pd.proton(lesson, "cuda")
    assert lesson.calls[0][:2] == ("skip", "proton") and "libcupti" in lesson.calls[0][2]


@pytest.mark.unit
def test_the_assert_step_on_a_gpu_wants_each_assertion_to_fire_with_its_message(pd, monkeypatch):
    fired = pd.Child([], 1, "specimen: raised RuntimeError: CUDA error: device-side assert triggered\n",
                     "specimens.py:121: fill_device_assert: block: [3,0,0], thread: [104,0,0] "
                     "Assertion `store past the end` failed.\n")
    silent = pd.Child([], 0, "specimen: no assertion fired; 64 written past the end\n", "")

    def child(args, prefix=(), env=None, timeout=300):
        return fired if env == {"TRITON_DEBUG": "1"} else silent

    monkeypatch.setattr(pd, "run_child", child)
    monkeypatch.delenv("VT_SANITIZE", raising=False)
    lesson = Recorder()
    pd.asserts(lesson, "cuda")
    assert lesson.outcomes() == {"gpu-device-assert-fires": True, "gpu-block-assert-fires": True,
                                 "gpu-scalar-assert-fires": True, "gpu-no-assert-without-triton-debug": True}
    monkeypatch.setattr(pd, "run_child", lambda *a, **k: silent)  # a Triton that dropped the assertion
    lesson = Recorder()
    pd.asserts(lesson, "cuda")
    assert not lesson.outcomes()["gpu-device-assert-fires"]


@pytest.mark.unit
@pytest.mark.parametrize("interpret, child, passes", [
    (False, ("specimen: launched\n", "", 0), True),
    (True, ("specimen: launched\n", "", -11), True),
    (True, ("", "Fatal Python error: Segmentation fault\n", -11), True),  # killed in the launch
    (True, ("", "Traceback (most recent call last):\nIndexError: out of bounds\n", 1), False),
    (True, ("", "Traceback (most recent call last):\n", -6), False),  # a Python error named it
    (False, ("", "", -11), False),  # on a GPU the launch itself must return
])
def test_the_plain_tensor_store_is_silent_when_no_python_error_names_it(pd, interpret, child, passes):
    """Under the interpreter the planted store may corrupt the child's heap and kill it during the launch; a
    death by a signal with no traceback is still silence. A Python error, or a GPU child that never said
    'launched', is not."""
    stdout, stderr, code = child
    ok, said = pd.store_was_silent(pd.Child(["store", "planted"], code, stdout, stderr), interpret)
    assert ok is passes, said


# -- the race checker's model (race_model.py), which the lesson and the exercises drive ------------------

@pytest.fixture(scope="module")
def race_model(pd):
    return sys.modules["race_model"]


@pytest.mark.unit
def test_the_race_model_tells_the_bug_and_the_checkers_blind_spots(race_model):
    ring, races = race_model.ring, race_model.races
    assert races(ring(3, 12)) == []
    bug = races(ring(3, 12, release_early=True))
    assert len(bug) == 9 and all(b.tile == a.tile + 3 for a, b in bug)
    assert races(ring(3, 12, sees_mbarriers=False))  # false races on the correct ring
    assert races(ring(3, 12, release_early=True, sees_copies=False)) == []  # the real one unseen


@pytest.mark.unit
def test_a_second_arrival_does_not_hide_an_early_release(race_model):
    """The empty barrier expects one arrival: the first completes the phase and lets the producer refill the
    slot, so arriving again after the read does not order the read before the next copy."""
    r = race_model.Ring(2)
    for t in range(6):
        race_model.producer(r, t)
        r.wait_ready(t % 2, t)
        r.arrive_empty(t % 2, t)
        r.read(t % 2, t)
        r.arrive_empty(t % 2, t)
    assert race_model.races(r.events)


@pytest.mark.unit
def test_a_slot_never_released_is_a_deadlock(race_model):
    r = race_model.Ring(2)
    with pytest.raises(race_model.Deadlock, match="tile 0's slot was never released"):
        for t in range(3):
            race_model.producer(r, t)
            r.wait_ready(t % 2, t)
            r.read(t % 2, t)
