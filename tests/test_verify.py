"""tools/verify.py end to end, on throw-away projects of fake lessons (no GPU, no Triton kernels)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import tarfile
import time
from pathlib import Path

import pytest

from conftest import PASSING, Project, fake_record, figure_name, make_project
from verified_triton.core.kit import Check
from verified_triton.core.limits import LIMITS
from verified_triton.judge.evidence import write_record
from verified_triton.judge.status import FAILED, PARTIAL, STALE, UNVERIFIED, VERIFIED

STREAM_LIMIT = LIMITS.stream_kept

# -- fake lessons -------------------------------------------------------------------------

FAILS_A_CHECK = """\
    lesson = Lesson("fails")
    lesson.check("right", True, "fine")
    lesson.check("wrong", 1 + 1 == 3, "arithmetic is broken")
    sys.exit(lesson.finish())
"""

RAISES = """\
    lesson = Lesson("raises")
    lesson.check("before-the-crash", True)
    raise RuntimeError("boom in the kernel")
"""

KILLS_ITSELF = """\
    import signal

    print("about to die", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
"""

HUGE_OUTPUT = """\
    lesson = Lesson("huge")
    out = sys.stdout.buffer
    out.write(b"HEAD-START\\n")
    block = b"0123456789abcdef" * 4096
    for _ in range(80):
        out.write(block)
    out.write(b"\\nTAIL-END\\n")
    sys.stderr.buffer.write(b"E" * 3_000_000 + b"\\nERR-END\\n")
"""
HUGE_STDOUT_BYTES = len(b"HEAD-START\n") + 80 * 16 * 4096 + len(b"\nTAIL-END\n")
HUGE_STDERR_BYTES = 3_000_000 + len(b"\nERR-END\n")

NOT_UTF8 = r"""
    lesson = Lesson("not-utf8")
    sys.stdout.buffer.write(b"before \xff\xfe end\n")
    sys.stdout.buffer.write("caf\u00e9 \u2713\n".encode("utf-8"))
    sys.stderr.buffer.write(b"\xc3\x28 bad continuation\n")
"""

MARKUP = r"""
    lesson = Lesson("markup")
    print("<script>alert(1)</script>")
    print("\x1b[31mred\x1b[0m & <b>bold</b> \"quoted\"")
"""

DECLINES = """\
    lesson = Lesson("declines")
    lesson.check("reachable", True)
    lesson.decline("needs a GPU with tensor cores")
    lesson.check("unreachable", False)
"""

EXITS_1 = """\
    print("the interpreter cannot do this")
    sys.exit(1)
"""
EXPECTED_EXIT_TOML = """\
    [interpreter.expected_exits]
    "1" = "capability gate: the interpreter has no tensor cores"
"""

EXITS_3_WITHOUT_KIT = """\
    sys.exit(3)
"""

CANNOT_RUN = """\
    lesson = Lesson("cannot-run")
    print("no CUDA device found", file=sys.stderr)
    sys.exit(2)
"""

NO_KIT = """\
    print("I never create a Lesson")
"""

EXIT_0_DESPITE_FAILURE = """\
    lesson = Lesson("liar")
    lesson.check("wrong", False, "but exits 0 anyway")
    sys.exit(0)
"""

ZOO = {
    "good": (PASSING, True, ""),
    "fails": (FAILS_A_CHECK, True, ""),
    "raises": (RAISES, True, ""),
    "killed": (KILLS_ITSELF, False, ""),
    "huge": (HUGE_OUTPUT, True, ""),
    "not-utf8": (NOT_UTF8, True, ""),
    "markup": (MARKUP, True, ""),
    "declines": (DECLINES, True, ""),
    "expected-exit": (EXITS_1, False, EXPECTED_EXIT_TOML),
    "exit3-no-kit": (EXITS_3_WITHOUT_KIT, False, ""),
    "cannot-run": (CANNOT_RUN, True, ""),
    "liar": (EXIT_0_DESPITE_FAILURE, True, ""),
    "no-kit": (NO_KIT, False, ""),
}


@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    """One project with every kind of fake lesson, verified once (all modes, on this CPU machine)."""
    project = make_project(tmp_path_factory.mktemp("zoo") / "project")
    for order, (name, (body, kit, toml)) in enumerate(ZOO.items()):
        project.add(name, body, kit=kit, toml=toml, order=order)
    result = project.verify("--jobs", "4")
    return project, result


def record_json(project: Project, name: str) -> dict:
    """The record as plain JSON, read as strict UTF-8."""
    return json.loads(project.record_file(name).read_bytes().decode("utf-8"))


@pytest.mark.integration
def test_zoo_run_exit_code_and_summary(zoo):
    project, result = zoo
    assert result.returncode == 1, result.stderr  # some lessons failed
    assert "Traceback" not in result.stderr
    for name in ZOO:
        assert f"{name} [interpreter]:" in result.stdout
        assert project.record_file(name).is_file(), name
        # No GPU here: nothing is written for the GPU mode.
        assert sorted(p.name for p in (project.evidence / name).glob("*.json")) == ["interpreter.json"]
    assert "not run: no CUDA device on this machine" in result.stdout


@pytest.mark.integration
def test_passing_lesson(zoo):
    project, _ = zoo
    rec = project.record("good")
    assert (rec.outcome, rec.exit_code, rec.mode, rec.key) == ("passed", 0, "interpreter", "interpreter")
    assert [(c.name, c.status) for c in rec.checks] == [
        ("arithmetic", "pass"), ("interpreter-env", "pass"), ("timing", "skip")]
    assert rec.tables[0].name == "sizes" and rec.tables[0].rows == [[1, "yes"], [1000, "yes"]]
    assert rec.tables[0].caption == "sizes tried"
    # the figure is renamed by its content hash, inside the record's own folder
    assert [(f.name, f.file, f.caption, f.dark_file) for f in rec.figures] == [
        ("plot", figure_name("plot"), "a plot", "")]
    figure = project.evidence / "good" / "interpreter" / figure_name("plot")
    assert figure.read_bytes().startswith(b"\x89PNG")
    assert rec.source_hash == project.lesson("good").source_hash()
    assert set(rec.source_files) == {"code/good/good.py", "code/good/lesson.toml", "code/lessonkit.py"}
    assert rec.command == "TRITON_INTERPRET=1 python code/good/good.py"
    assert rec.env.device_name == "CPU" and rec.env.python == ".".join(map(str, sys.version_info[:3]))
    assert rec.started_utc.endswith("Z") and len(rec.started_utc) == 20
    assert "PASS" in rec.stdout and rec.stderr == ""
    assert 0 < rec.wall_s < 60

    st = project.judge("good")
    assert st.status == PARTIAL
    assert st.sentence.startswith("The Triton ") and "interpreter run passed" in st.sentence
    assert "GPU run has not been recorded" in st.sentence
    assert st.summary == "2 checks passed under the interpreter"


@pytest.mark.integration
def test_failing_check(zoo):
    project, _ = zoo
    rec = project.record("fails")
    assert (rec.outcome, rec.exit_code) == ("failed", 1)
    assert {c.name: c.status for c in rec.checks} == {"right": "pass", "wrong": "fail"}
    assert rec.reason == "check wrong"
    assert "FAILED check wrong" in rec.stderr
    st = project.judge("fails")
    assert st.status == FAILED and "failed on 2" in st.sentence and "with exit 1: check wrong" in st.sentence


@pytest.mark.integration
def test_exception_is_a_failure_that_keeps_earlier_results(zoo):
    project, _ = zoo
    rec = project.record("raises")
    assert (rec.outcome, rec.exit_code) == ("failed", 1)
    assert [(c.name, c.status) for c in rec.checks] == [("before-the-crash", "pass")]
    assert "RuntimeError: boom in the kernel" in rec.stderr
    assert project.judge("raises").status == FAILED


@pytest.mark.integration
def test_killed_by_a_signal_is_a_crash(zoo):
    project, _ = zoo
    rec = project.record("killed")
    assert (rec.outcome, rec.exit_code) == ("crashed", -signal.SIGKILL)
    assert "SIGKILL" in rec.reason
    assert rec.stdout == "about to die\n"
    st = project.judge("killed")
    assert st.status == FAILED and "crashed" in st.sentence and "SIGKILL" in st.sentence


@pytest.mark.integration
def test_huge_output_is_bounded_head_and_tail(zoo):
    project, _ = zoo
    rec = project.record("huge")
    assert rec.outcome == "passed"  # exit 0 and the kit's results: nothing failed
    for text, omitted, total, head, tail in (
            (rec.stdout, rec.stdout_omitted, HUGE_STDOUT_BYTES, "HEAD-START\n", "\nTAIL-END\n"),
            (rec.stderr, rec.stderr_omitted, HUGE_STDERR_BYTES, "EEEE", "E\nERR-END\n")):
        assert omitted > total - STREAM_LIMIT - 1  # almost all of it was dropped...
        marker = f"\n[... {omitted} bytes omitted ...]\n"
        assert text.count(marker) == 1
        kept = text.replace(marker, "")
        assert len(kept.encode()) + omitted == total  # ...and the count is exact
        assert len(kept.encode()) <= STREAM_LIMIT
        assert len(kept.encode()) >= STREAM_LIMIT // 2  # the head and tail really are kept
        assert text.startswith(head) and text.endswith(tail)
    assert project.record_file("huge").stat().st_size < 4 * STREAM_LIMIT


@pytest.mark.integration
def test_invalid_utf8_is_replaced_and_the_record_is_valid_json(zoo):
    project, _ = zoo
    raw = record_json(project, "not-utf8")  # strict UTF-8 decode and JSON parse
    assert raw["stdout"] == "before \ufffd\ufffd end\ncaf\u00e9 \u2713\n"
    assert raw["stderr"] == "\ufffd( bad continuation\n"
    assert project.record("not-utf8").outcome == "passed"


@pytest.mark.integration
def test_markup_and_ansi_are_recorded_verbatim(zoo):
    project, _ = zoo
    raw = record_json(project, "markup")
    assert raw["stdout"] == '<script>alert(1)</script>\n\x1b[31mred\x1b[0m & <b>bold</b> "quoted"\n'
    text = project.record_file("markup").read_text(encoding="utf-8")
    assert "<script>alert(1)</script>" in text  # escaping for HTML is the renderer's job
    assert "\x1b" not in text  # but the JSON itself escapes control characters


@pytest.mark.integration
def test_decline_by_design(zoo):
    project, result = zoo
    rec = project.record("declines")
    assert (rec.outcome, rec.exit_code) == ("by-design", 3)
    assert rec.reason == "needs a GPU with tensor cores"
    assert [c.name for c in rec.checks] == ["reachable"]
    st = project.judge("declines")
    assert st.status == UNVERIFIED  # stopping by design is neither a pass nor a failure
    assert "stopped by design (needs a GPU with tensor cores)" in st.sentence
    assert "declines [interpreter]: by-design" in result.stdout


@pytest.mark.integration
def test_expected_exit_declared_in_lesson_toml(zoo):
    project, _ = zoo
    assert project.lesson("expected-exit").modes["interpreter"].expected_exits == {
        1: "capability gate: the interpreter has no tensor cores"}
    rec = project.record("expected-exit")
    assert (rec.outcome, rec.exit_code) == ("by-design", 1)
    assert rec.reason == "capability gate: the interpreter has no tensor cores"
    assert project.judge("expected-exit").status != FAILED


@pytest.mark.integration
def test_exit_3_without_the_kit_is_not_by_design(zoo):
    project, _ = zoo
    rec = project.record("exit3-no-kit")
    assert (rec.outcome, rec.exit_code) == ("failed", 3)


@pytest.mark.integration
def test_exit_2_cannot_run_is_a_failure(zoo):
    project, _ = zoo
    rec = project.record("cannot-run")
    assert (rec.outcome, rec.exit_code) == ("failed", 2)
    assert rec.reason == "the lesson could not run on this machine (no CUDA device found)"


@pytest.mark.integration
def test_a_lesson_that_never_uses_the_kit_fails_with_the_reason(zoo):
    project, _ = zoo
    rec = project.record("no-kit")
    assert (rec.outcome, rec.exit_code) == ("failed", 0)
    assert "wrote no results" in rec.reason and rec.stdout == "I never create a Lesson\n"


@pytest.mark.integration
def test_exit_0_with_a_failed_check_is_a_failure(zoo):
    project, _ = zoo
    rec = project.record("liar")
    assert (rec.outcome, rec.exit_code) == ("failed", 0)
    assert "wrong" in rec.reason and "exit 0" in rec.reason


@pytest.mark.integration
def test_status_of_the_zoo_and_check(zoo):
    project, _ = zoo
    result = project.verify("--status")
    assert result.returncode == 0, result.stderr
    lines = {line.split()[0]: line for line in result.stdout.splitlines() if not line.startswith(" ")}
    assert set(lines) == set(ZOO)
    assert "PARTIALLY VERIFIED" in lines["good"] and "FAILED" in lines["fails"]
    check = project.verify("--check")
    assert check.returncode == 1
    for name in ("fails", "raises", "killed", "declines", "cannot-run", "liar", "no-kit"):
        assert f"check: {name}: " in check.stderr


@pytest.mark.integration
def test_status_json_shape(zoo):
    project, _ = zoo
    result = project.verify("--status", "--json", "--lesson", "good", "--lesson", "fails")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert isinstance(data, list) and [d["lesson"] for d in data] == ["good", "fails"]
    good = data[0]
    assert good["status"] == PARTIAL.label == "PARTIALLY VERIFIED"
    assert good["sentence"] == project.judge("good").sentence and good["problems"] == []
    assert good["summary"] == "2 checks passed under the interpreter"
    assert good["title"] == "Fake lesson good"
    assert good["source_hash"] == project.lesson("good").source_hash()
    assert set(good["modes"]) == {"interpreter", "gpu", "sanitize"}  # sanitize: the memory check (issue 35)
    assert good["modes"]["sanitize"]["state"] == "not-required" and good["memory_check"] is None
    interp, gpu = good["modes"]["interpreter"], good["modes"]["gpu"]
    keys = {"state", "outcome", "date", "source_hash", "current", "environment"}
    assert keys <= set(interp) and keys <= set(gpu)
    rec = project.record("good")
    assert interp["state"] == "passed" and interp["outcome"] == "passed" and interp["current"] is True
    assert interp["date"].startswith(rec.date) and interp["source_hash"] == rec.source_hash
    assert interp["environment"]["device_name"] == "CPU" and interp["environment"]["triton"] == rec.env.triton
    assert gpu["state"] == "none" and gpu["outcome"] is None and gpu["environment"] is None
    assert data[1]["status"] == FAILED.label and data[1]["modes"]["interpreter"]["outcome"] == "failed"


@pytest.mark.integration
def test_unverified_without_evidence(project):
    project.add("fresh", PASSING)
    st = project.judge("fresh")
    assert st.status == UNVERIFIED
    assert "interpreter run has not been recorded" in st.sentence
    result = project.verify("--check")
    assert result.returncode == 1 and "fresh: UNVERIFIED" in result.stderr


# -- timeouts and the process group ---------------------------------------------------------

HANGS = """\
    import subprocess
    import time

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    Path(os.environ["VT_TEST_PIDFILE"]).write_text(f"{os.getpid()} {child.pid}")
    print("hanging", flush=True)
    time.sleep(120)
"""

LEAVES_A_CHILD = """\
    import subprocess

    lesson = Lesson("orphan")
    # The child inherits stdout and stderr and outlives the lesson.
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    Path(os.environ["VT_TEST_PIDFILE"]).write_text(f"{os.getpid()} {child.pid}")
    print("done, but my child lives on", flush=True)
"""


def _gone(pid: int, wait: float = 5.0) -> bool:
    """True once `pid` has exited (a zombie waiting for a reaper counts as exited)."""
    deadline = time.monotonic() + wait
    while True:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except (FileNotFoundError, ProcessLookupError):
            return True
        if stat.rsplit(")", 1)[1].split()[0] in ("Z", "X"):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


def _pids(pidfile: Path) -> list[int]:
    return [int(p) for p in pidfile.read_text().split()]


def _cleanup(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


needs_proc = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")


@pytest.mark.integration
@needs_proc
def test_timeout_kills_the_whole_process_group(project, tmp_path):
    project.add("hangs", HANGS, kit=False)
    pidfile = tmp_path / "pids"
    t0 = time.monotonic()
    result = project.verify("--timeout", "1.5", VT_TEST_PIDFILE=str(pidfile))
    elapsed = time.monotonic() - t0
    pids = _pids(pidfile)
    try:
        assert result.returncode == 1, result.stderr
        assert elapsed < 30
        rec = project.record("hangs")
        assert rec.outcome == "timeout" and rec.exit_code is None
        assert "timeout" in rec.reason
        assert 1.4 <= rec.wall_s < 30
        assert rec.stdout == "hanging\n"  # output before the kill is kept
        for pid in pids:  # the lesson and the child it started
            assert _gone(pid), f"process {pid} survived the timeout"
        st = project.judge("hangs")
        assert st.status == FAILED and "timed out after" in st.sentence
    finally:
        _cleanup(pids)


@pytest.mark.integration
@needs_proc
def test_timeout_from_lesson_toml(project, tmp_path):
    project.add("hangs", HANGS, kit=False, toml="[interpreter]\ntimeout = 1\n")
    assert project.lesson("hangs").modes["interpreter"].timeout == 1.0
    pidfile = tmp_path / "pids"
    result = project.verify(VT_TEST_PIDFILE=str(pidfile))
    pids = _pids(pidfile)
    try:
        assert result.returncode == 1
        rec = project.record("hangs")
        assert rec.outcome == "timeout" and "1 s timeout" in rec.reason
        assert all(_gone(pid) for pid in pids)
    finally:
        _cleanup(pids)


@pytest.mark.integration
@needs_proc
def test_a_child_left_behind_is_killed_and_does_not_stall_verify(project, tmp_path):
    project.add("orphan", LEAVES_A_CHILD)
    pidfile = tmp_path / "pids"
    t0 = time.monotonic()
    result = project.verify(VT_TEST_PIDFILE=str(pidfile))
    elapsed = time.monotonic() - t0
    pids = _pids(pidfile)
    try:
        assert result.returncode == 0, result.stderr
        assert project.record("orphan").stdout == "done, but my child lives on\n"
        assert all(_gone(pid) for pid in pids), "a process of the lesson outlived verify"
        assert elapsed < 8, f"verify waited {elapsed:.1f} s for a child holding its pipes"
    finally:
        _cleanup(pids)


# -- stale evidence -----------------------------------------------------------------------

@pytest.mark.integration
def test_editing_the_main_file_makes_the_evidence_stale(project):
    project.add("good", PASSING)
    assert project.verify().returncode == 0
    check = project.verify("--check")  # a current interpreter pass (PARTIALLY VERIFIED) is current
    assert check.returncode == 0 and "the lesson has current, usable evidence" in check.stdout
    main = project.main_file("good")
    main.write_text(main.read_text() + "\n# an edit\n")
    st = project.judge("good")
    assert st.status == STALE
    assert "older source" in st.sentence
    result = project.verify("--check")
    assert result.returncode == 1
    assert "good: STALE" in result.stderr
    assert "evidence/good/interpreter.json" in result.stderr
    assert "code/good/good.py" in result.stderr  # the file that changed


@pytest.mark.integration
def test_editing_a_local_import_makes_the_evidence_stale(project):
    project.add("good", PASSING)
    write_record(project.evidence, fake_record(project.lesson("good"), "gpu"))
    assert project.verify().returncode == 0
    assert project.judge("good").status == VERIFIED
    assert project.verify("--check").returncode == 0
    kit = project.code / "lessonkit.py"
    kit.write_text(kit.read_text() + "\n# a kit edit\n")
    assert project.judge("good").status == STALE
    result = project.verify("--check")
    assert result.returncode == 1
    assert "code/lessonkit.py" in result.stderr
    assert "code/good/good.py" not in result.stderr  # only the file that changed is named


@pytest.mark.integration
def test_one_mode_current_and_the_other_stale_is_partial(project):
    project.add("good", PASSING)
    assert project.verify().returncode == 0
    old_hash = project.lesson("good").source_hash()
    main = project.main_file("good")
    main.write_text(main.read_text() + "\n# an edit\n")
    # A GPU run of the edited source passed; the interpreter record is for the old one.
    write_record(project.evidence, fake_record(project.lesson("good"), "gpu"))
    assert project.lesson("good").source_hash() != old_hash
    st = project.judge("good")
    assert st.status == PARTIAL
    assert st.modes["interpreter"].state == "stale" and st.modes["gpu"].state == "passed"
    result = project.verify("--check")
    assert result.returncode == 1
    assert "evidence/good/interpreter.json is for another source" in result.stderr
    assert "code/good/good.py" in result.stderr


@pytest.mark.integration
def test_edit_that_is_not_a_source_file_does_not_make_it_stale(project):
    folder = project.add("good", PASSING)
    assert project.verify().returncode == 0
    (folder / "notes.txt").write_text("not imported by the lesson")
    assert project.judge("good").status == PARTIAL
    result = project.verify()
    assert "up to date" in result.stdout


@pytest.mark.integration
def test_an_edited_lesson_is_re_run(project):
    project.add("good", PASSING)
    project.verify()
    first = project.record("good")
    main = project.main_file("good")
    main.write_text(main.read_text() + "\n# an edit\n")
    result = project.verify()
    assert "good [interpreter]: passed" in result.stdout
    second = project.record("good")
    assert second.source_hash != first.source_hash
    assert second.source_hash == project.lesson("good").source_hash()


# -- no-op runs ---------------------------------------------------------------------------

@pytest.mark.integration
def test_second_run_is_a_fast_no_op(project):
    project.add("good", PASSING)
    project.add("other", PASSING.replace('"good"', '"other"'), order=2)
    assert project.verify().returncode == 0
    files = [project.record_file("good"), project.record_file("other"),
             project.evidence / "good" / "interpreter" / figure_name("plot")]
    before = [(f.read_bytes(), f.stat().st_mtime_ns) for f in files]
    t0 = time.monotonic()
    result = project.verify()
    elapsed = time.monotonic() - t0
    assert result.returncode == 0, result.stderr
    assert ": running" not in result.stdout
    assert result.stdout.count("up to date") == 2
    assert [(f.read_bytes(), f.stat().st_mtime_ns) for f in files] == before
    assert elapsed < 3, f"a no-op verify took {elapsed:.2f} s"


@pytest.mark.integration
def test_force_re_runs(project):
    project.add("good", PASSING)
    project.verify()
    before = project.record_file("good").stat().st_mtime_ns
    time.sleep(0.01)
    result = project.verify("--force")
    assert "good [interpreter]: passed" in result.stdout
    assert project.record_file("good").stat().st_mtime_ns != before


@pytest.mark.integration
def test_a_corrupt_record_is_re_run_not_trusted(project):
    project.add("good", PASSING)
    project.verify()
    path = project.record_file("good")
    path.write_text(path.read_text()[:100])
    result = project.verify()
    assert result.returncode == 0, result.stderr
    assert "good [interpreter]: passed" in result.stdout
    assert project.record("good").outcome == "passed"


@pytest.mark.integration
def test_a_record_from_another_triton_is_re_run(project):
    project.add("good", PASSING)
    project.verify()
    rec = project.record("good")
    rec.env.triton = "0.0.1"
    write_record(project.evidence, rec, {figure_name("plot"): (project.evidence / "good" / "interpreter" /
                                                                figure_name("plot")).read_bytes()})
    result = project.verify()
    assert "good [interpreter]: passed" in result.stdout
    assert project.record("good").env.triton != "0.0.1"


# -- GPU evidence on a machine without a GPU ----------------------------------------------------

@pytest.mark.integration
def test_cpu_run_keeps_gpu_evidence(project):
    project.add("good", PASSING)
    gpu = fake_record(project.lesson("good"), "gpu")
    gpu_path = write_record(project.evidence, gpu)
    assert gpu_path == project.record_file("good", "gpu-nvidia-h200")
    gpu_bytes, gpu_mtime = gpu_path.read_bytes(), gpu_path.stat().st_mtime_ns

    result = project.verify("--force")
    assert result.returncode == 0, result.stderr
    assert "not run: no CUDA device" in result.stdout
    assert gpu_path.read_bytes() == gpu_bytes and gpu_path.stat().st_mtime_ns == gpu_mtime
    st = project.judge("good")
    assert st.status == VERIFIED
    assert "NVIDIA H200" in st.sentence and "interpreter run passed" in st.sentence
    assert project.verify("--check").returncode == 0


@pytest.mark.integration
def test_gpu_mode_on_cpu_runs_nothing_and_says_so(project, tmp_path):
    project.add("good", PASSING)
    result = project.verify("--mode", "gpu", "--bundle", str(tmp_path / "gpu.tar.gz"))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "error: --mode gpu: no CUDA device found" in result.stderr
    assert "no bundle was written" in result.stderr and "Traceback" not in result.stderr
    assert not (project.evidence / "good").exists() and not (tmp_path / "gpu.tar.gz").exists()


@pytest.mark.integration
def test_unsupported_interpreter_mode_is_not_run(project):
    project.add("gpu-only", "sys.exit(1)\n", kit=False,
                toml='[interpreter]\nsupported = false\nreason = "uses TMA descriptors"\n')
    result = project.verify()
    assert result.returncode == 0, result.stderr
    assert "not supported: uses TMA descriptors" in result.stdout
    assert not project.record_file("gpu-only").exists()
    write_record(project.evidence, fake_record(project.lesson("gpu-only"), "gpu"))
    st = project.judge("gpu-only")
    assert st.status == VERIFIED and "uses TMA descriptors" in st.sentence


# -- bundles --------------------------------------------------------------------------

@pytest.mark.integration
def test_bundle_round_trip(project, tmp_path):
    project.add("good", PASSING)
    project.add("fails", FAILS_A_CHECK, order=2)
    write_record(project.evidence, fake_record(project.lesson("good"), "gpu"))
    bundle = tmp_path / "evidence.tar.gz"
    result = project.verify("--mode", "interpreter", "--bundle", str(bundle))
    assert result.returncode == 1  # "fails" failed; the bundle is still written
    assert bundle.is_file()
    with tarfile.open(bundle) as tar:
        names = sorted(tar.getnames())
    # Only what this machine recorded: no GPU record from a CPU machine.
    assert names == ["fails/interpreter.json", "good/interpreter.json", f"good/interpreter/{figure_name('plot')}"]

    other = make_project(tmp_path / "other")
    shutil.copytree(project.code, other.code, dirs_exist_ok=True)
    result = other.verify("--import", str(bundle))
    assert result.returncode == 0, result.stderr
    assert "imported good interpreter" in result.stdout
    for name in ("good", "fails"):
        assert other.record(name) == project.record(name)
        assert other.record_file(name).read_bytes() == project.record_file(name).read_bytes()
    figure = Path("good", "interpreter", figure_name("plot"))
    assert (other.evidence / figure).read_bytes() == (project.evidence / figure).read_bytes()
    assert other.judge("good").status == PARTIAL


@pytest.mark.integration
def test_import_is_refused_when_the_source_differs(project, tmp_path):
    project.add("good", PASSING)
    bundle = tmp_path / "evidence.tar.gz"
    assert project.verify("--bundle", str(bundle)).returncode == 0

    other = make_project(tmp_path / "other")
    shutil.copytree(project.code, other.code, dirs_exist_ok=True)
    main = other.main_file("good")
    main.write_text(main.read_text() + "\n# edited here\n")
    result = other.verify("--import", str(bundle))
    assert result.returncode == 1
    assert "good/interpreter.json: recorded for source" in result.stderr and "refused" in result.stderr
    assert "code/good/good.py" in result.stderr
    assert not other.record_file("good").exists()


@pytest.mark.integration
def test_import_refuses_unknown_lessons(project, tmp_path):
    project.add("good", PASSING)
    bundle = tmp_path / "evidence.tar.gz"
    project.verify("--bundle", str(bundle))
    other = make_project(tmp_path / "other")
    other.add("unrelated", PASSING)
    result = other.verify("--import", str(bundle))
    assert result.returncode == 1
    assert "no lesson 'good'" in result.stderr
    assert not (other.evidence / "good").exists()


def _bundle_of(path: Path, members: dict[str, bytes]) -> None:
    import io

    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


@pytest.mark.integration
@pytest.mark.parametrize("mode, key", [("gpu", ".."), ("gpu", "."), ("gpu", "interpreter"),
                                       ("interpreter", "gpu-nvidia-h200"), ("gpu", "GPU-X")])
def test_import_refuses_a_misnamed_key(project, tmp_path, mode, key):
    project.add("good", PASSING)
    project.add("other", PASSING.replace('"good"', '"other"'), order=2)
    assert project.verify().returncode == 0
    keep = {p: p.read_bytes() for p in project.evidence.rglob("*") if p.is_file()}
    rec = fake_record(project.lesson("good"), mode, key=key)
    rec.figures = []
    bundle = tmp_path / "evil.tar.gz"
    _bundle_of(bundle, {f"good/{key}.json": rec.to_json().encode()})
    result = project.verify("--import", str(bundle))
    assert result.returncode == 1
    assert "refused" in result.stderr
    assert {p: p.read_bytes() for p in project.evidence.rglob("*") if p.is_file()} == keep


@pytest.mark.integration
@pytest.mark.parametrize("content", [b"not a tar file at all", b"", b"\x1f\x8b\x08 truncated gzip"])
def test_import_of_an_unreadable_bundle_is_an_error_not_a_traceback(project, tmp_path, content):
    project.add("good", PASSING)
    bundle = tmp_path / "broken.tar.gz"
    bundle.write_bytes(content)
    result = project.verify("--import", str(bundle))
    assert result.returncode == 1
    assert f"refused: {bundle}: not a readable bundle, or truncated" in result.stderr
    assert "Traceback" not in result.stderr
    missing = project.verify("--import", str(tmp_path / "missing.tar.gz"))
    assert missing.returncode == 1 and f"{tmp_path / 'missing.tar.gz'}: cannot be read" in missing.stderr
    assert "Traceback" not in missing.stderr
    assert project.files() == {}


@pytest.mark.integration
def test_import_refuses_a_record_of_a_newer_format(project, tmp_path):
    project.add("good", PASSING)
    raw = json.loads(fake_record(project.lesson("good"), "gpu").to_json())
    raw["format_version"] += 1
    bundle = tmp_path / "future.tar.gz"
    _bundle_of(bundle, {"good/gpu-nvidia-h200.json": json.dumps(raw).encode()})
    result = project.verify("--import", str(bundle))
    assert result.returncode == 1
    assert "good/gpu-nvidia-h200.json: written in evidence format" in result.stderr
    assert not project.record_file("good", "gpu-nvidia-h200").exists()
    assert project.verify("--status").returncode == 0  # nothing unreadable was written


@pytest.mark.integration
def test_import_reports_an_unreadable_record(project, tmp_path):
    project.add("good", PASSING)
    bundle = tmp_path / "bad.tar.gz"
    _bundle_of(bundle, {"good/interpreter.json": b"{ truncated"})
    result = project.verify("--import", str(bundle))
    assert result.returncode == 1
    assert "good/interpreter.json" in result.stderr and "not valid JSON" in result.stderr
    assert not project.record_file("good").exists()


# -- compare, selection and parallel runs ------------------------------------------------------

FLAG = """\
    lesson = Lesson("flag")
    flag = (Path(__file__).parent / "flag.txt").read_text().strip()
    lesson.check("flag", flag == "ok", f"flag is {flag}")
    sys.exit(lesson.finish())
"""


@pytest.mark.integration
def test_compare_agrees_then_disagrees(project):
    folder = project.add("flag", FLAG, files={"flag.txt": "ok\n"})
    assert project.verify().returncode == 0
    committed = project.record_file("flag").read_bytes()
    result = project.verify("--compare")
    assert result.returncode == 0, result.stderr
    assert "agree" in result.stdout
    (folder / "flag.txt").write_text("bad\n")  # not a source file: the hash stays the same
    result = project.verify("--compare")
    assert result.returncode == 1
    assert "committed outcome passed, fresh run failed" in result.stderr
    assert "flag pass -> fail" in result.stderr
    assert project.record_file("flag").read_bytes() == committed  # compare never writes evidence


@pytest.mark.integration
def test_compare_without_a_record(project):
    project.add("good", PASSING)
    result = project.verify("--compare")
    assert result.returncode == 1
    assert "no committed record" in result.stderr
    assert not project.record_file("good").exists()


@pytest.mark.integration
def test_lesson_selection(project):
    project.add("good", PASSING)
    project.add("fails", FAILS_A_CHECK, order=2)
    result = project.verify("--lesson", "good")
    assert result.returncode == 0
    assert project.record_file("good").exists() and not project.record_file("fails").exists()
    unknown = project.verify("--lesson", "nope")
    assert unknown.returncode == 2
    assert "unknown lesson(s): nope" in unknown.stderr and "good" in unknown.stderr


SLEEPS = """\
    import time

    lesson = Lesson(Path(__file__).stem)
    stamps = Path(os.environ["VT_TEST_STAMPS"])
    start = time.time()
    time.sleep(1.0)
    (stamps / Path(__file__).stem).write_text(f"{start} {time.time()}")
    sys.exit(lesson.finish())
"""


@pytest.mark.integration
def test_jobs_run_lessons_concurrently(project, tmp_path):
    stamps = tmp_path / "stamps"
    stamps.mkdir()
    project.add("sleep-a", SLEEPS)
    project.add("sleep-b", SLEEPS, order=2)
    t0 = time.monotonic()
    result = project.verify("--jobs", "2", VT_TEST_STAMPS=str(stamps))
    elapsed = time.monotonic() - t0
    assert result.returncode == 0, result.stderr
    spans = [tuple(map(float, p.read_text().split())) for p in sorted(stamps.iterdir())]
    assert len(spans) == 2
    assert max(s for s, _ in spans) < min(e for _, e in spans), f"the runs did not overlap: {spans}"
    assert elapsed < 10


# -- lesson declaration errors -----------------------------------------------------------

@pytest.mark.integration
@pytest.mark.parametrize("toml, expect", [
    ('title = "x"\nmain = "x.py"\n', "missing field 'page'"),
    ('title = "x"\nmain = "nope.py"\npage = "p.md"\n', "main = 'nope.py' is not a .py file"),
    ('title = "x\nmain = "x.py"\n', "lesson.toml"),
    ('title = "x"\nmain = "x.py"\npage = "p.md"\n[interpreter.expected_exits]\n"one" = "why"\n', "expected_exits"),
])
def test_bad_lesson_toml_is_an_error_naming_it(project, toml, expect):
    folder = project.code / "broken"
    folder.mkdir()
    (folder / "x.py").write_text("print('hi')\n")
    (folder / "lesson.toml").write_text(toml)
    for args in ([], ["--status"]):
        result = project.verify(*args)
        assert result.returncode == 2
        assert result.stderr.startswith("error: ")
        assert str(folder / "lesson.toml") in result.stderr and expect in result.stderr
        assert "Traceback" not in result.stderr


@pytest.mark.integration
def test_syntax_error_in_a_lesson_names_file_and_line(project):
    folder = project.add("broken", "x = (\n", kit=False)
    assert project.verify("--status").returncode == 0  # found without parsing: the run reports it
    result = project.verify("--mode", "interpreter")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    record = project.record("broken")
    assert record.outcome == "failed"
    # the path as the repository names it: no path of the recording machine is kept (tools/scrub.py)
    assert f'File "{folder.relative_to(project.root).as_posix()}/broken.py", line 5' in record.stderr
    assert "SyntaxError" in record.stderr


# -- pieces, called directly ------------------------------------------------------------

@pytest.mark.unit
def test_bounded_reader_keeps_head_and_tail():
    import threading

    from verified_triton.record.capture import BoundedReader

    read, write = os.pipe()
    data = bytes(range(256)) * 2000  # 512000 bytes
    with os.fdopen(read, "rb", buffering=0) as pipe:
        reader = BoundedReader(pipe, limit=1000)
        reader.start()

        def feed():
            with os.fdopen(write, "wb") as w:
                for i in range(0, len(data), 777):
                    w.write(data[i:i + 777])

        writer = threading.Thread(target=feed)
        writer.start()
        writer.join()
        reader.join(timeout=10)
    text, omitted = reader.text()
    assert omitted == len(data) - 1000
    head, _, tail = text.partition(f"\n[... {omitted} bytes omitted ...]\n")
    assert head == data[:750].decode("utf-8", errors="replace")
    assert tail == data[-250:].decode("utf-8", errors="replace")


@pytest.mark.unit
@pytest.mark.parametrize("data, expect", [
    (b"short\n", "short\n"),
    (b"x" * 1000, "x" * 1000),
    (b"ok \xff\xfe \xe2\x9c\x93\n", "ok \ufffd\ufffd \u2713\n"),
])
def test_bounded_reader_small_output_is_complete(data, expect):
    import io

    from verified_triton.record.capture import BoundedReader

    reader = BoundedReader(io.BytesIO(data), limit=1000)
    reader.run()
    assert reader.text() == (expect, 0)


def _captured(code, timed_out=False, stderr=""):
    from verified_triton.record.capture import Captured

    return Captured(code, timed_out, "", stderr, 0, 0, 1.0)


@pytest.mark.unit
def test_classify_outcomes(project):
    from verified_triton.core import kit
    from verified_triton.record.runner import classify

    project.add("good", PASSING)
    lesson = project.lesson("good")
    results = kit.Results("good", "interpreter", checks=[kit.Check("a", "pass")])
    assert classify(lesson, "interpreter", _captured(-signal.SIGSEGV), 10, results, "") == (
        "crashed", "killed by signal SIGSEGV")
    outcome, reason = classify(lesson, "interpreter", _captured(-40), 10, results, "")  # a real-time signal
    assert outcome == "crashed" and "40" in reason
    assert classify(lesson, "interpreter", _captured(None, True), 7, results, "") == (
        "timeout", "killed after the 7 s timeout")
    assert classify(lesson, "interpreter", _captured(0), 10, results, "") == ("passed", "")
    assert classify(lesson, "interpreter", _captured(0), 10, None, "no results") == ("failed", "no results")
    assert classify(lesson, "interpreter", _captured(7), 10, results, "") == (
        "failed", "exit 7 (an exit code the kit never uses)")
    failing = kit.Results("good", "interpreter", checks=[kit.Check("a", "fail")])
    assert classify(lesson, "interpreter", _captured(0), 10, failing, "") == (
        "failed", "exit 0 despite failures: check a")
    declined = kit.Results("good", "interpreter", declined="a gate")
    assert classify(lesson, "interpreter", _captured(3), 10, declined, "") == ("by-design", "a gate")


@pytest.mark.integration
def test_run_lesson_round_trips_a_record_in_process(project):
    from verified_triton.record.machine import this_machine
    from verified_triton.record.runner import run_lesson

    project.add("good", PASSING)
    result = run_lesson(project.lesson("good"), "interpreter", this_machine(), project.evidence, timeout=60)
    assert result.record == project.record("good")
    assert result.record.checks[0] == Check("arithmetic", "pass", "one plus one")
    assert result.changes == () and result.skipped == ""


@pytest.mark.integration
def test_malformed_results_from_a_lesson_fail_its_run_not_verify(project):
    """A lesson that writes nonsense where the kit's results go: a failed record with the reason, no traceback."""
    project.add("garbage", """\
        path = os.environ["VT_RESULTS"]
        Path(path).write_text('{"lesson": "garbage", "mode": "interpreter", "checks": [{"name": 5, "status": "pass"}]}')
        sys.exit(0)
    """, kit=False)
    run = project.verify("--lesson", "garbage", "--mode", "interpreter")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "Traceback" not in run.stderr
    record = project.record("garbage")
    assert record.outcome == "failed"
    assert "results file is malformed" in record.reason and "checks[0].name: expected text" in record.reason
    assert record.checks == [] and record.benchmarks == []
