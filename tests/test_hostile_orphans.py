"""Hostile input, class 9: orphans, processes and temp folders a killed verify leaves behind.

A lesson is started with a parent-death signal, so `kill -9` of verify.py
takes the lesson with it (it would otherwise hold the GPU); a SIGTERM kills
every lesson's process group first. The temp folder of a killed verify
(`vt-verify-<pid>-*`) is removed by the next run, and only when its pid is
gone. (Timeouts killing the whole process group: tests/test_verify.py.)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import VERIFY, Project, base_env

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(sys.platform != "linux", reason="the parent-death signal is Linux's")]

SLEEPER = """\
    import time

    lesson = Lesson("sleeper")
    Path(os.environ["VT_TEST_PIDFILE"]).write_text(str(os.getpid()))
    time.sleep(120)
"""
QUICK = "lesson = Lesson('quick')\nsys.exit(lesson.finish())\n"


def gone(pid: int, wait: float = 10.0) -> bool:
    """True once `pid` has exited (a zombie waiting for its reaper counts as exited)."""
    deadline = time.monotonic() + wait
    while True:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


@pytest.fixture
def started(project: Project, tmp_path):
    """verify.py running the sleeping lesson, with its own TMPDIR; yields (verify process, lesson pid, tmpdir)."""
    project.add("sleeper", SLEEPER)
    project.add("quick", QUICK, order=2)
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    pidfile = tmp_path / "lesson.pid"
    env = base_env(TMPDIR=str(tmpdir), VT_TEST_PIDFILE=str(pidfile))
    verify = subprocess.Popen([sys.executable, str(VERIFY), "--code-dir", str(project.code), "--evidence-dir",
                               str(project.evidence), "--lesson", "sleeper", "--mode", "interpreter"],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not pidfile.exists() or not pidfile.read_text():
        assert verify.poll() is None, "verify ended before the lesson started"
        assert time.monotonic() < deadline, "the lesson never started"
        time.sleep(0.05)
    lesson_pid = int(pidfile.read_text())
    yield verify, lesson_pid, tmpdir
    for pid in (verify.pid, lesson_pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    verify.wait(timeout=10)


def temp_folders(tmpdir: Path, pid: int) -> list[Path]:
    return sorted(tmpdir.glob(f"vt-verify-{pid}-*"))


def test_kill_9_of_verify_takes_the_lesson_with_it_and_the_next_run_sweeps_its_folder(project, started):
    verify, lesson_pid, tmpdir = started
    assert temp_folders(tmpdir, verify.pid), "verify made no temp folder for the run"
    verify.kill()  # SIGKILL: no handler runs, no finally block
    verify.wait(timeout=10)
    assert gone(lesson_pid), "the lesson outlived verify (no parent-death signal)"
    assert temp_folders(tmpdir, verify.pid), "the killed verify's temp folder should still be there"
    # a live verify's folder is left alone; a link that looks like one is not followed
    alive = tmpdir / f"vt-verify-{os.getpid()}-other-x"
    alive.mkdir()
    outside = tmpdir.parent / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    (tmpdir / "vt-verify-999999999-link").symlink_to(outside)
    result = project.verify("--lesson", "quick", "--mode", "interpreter", TMPDIR=str(tmpdir))
    assert result.returncode == 0, result.stdout + result.stderr
    assert temp_folders(tmpdir, verify.pid) == [], "the next run did not sweep the dead verify's folder"
    assert alive.is_dir() and (outside / "keep.txt").read_text() == "keep"
    assert sorted(p.name for p in tmpdir.iterdir()) == sorted([alive.name, "vt-verify-999999999-link"])


def test_sigterm_to_verify_kills_the_running_lesson(started):
    verify, lesson_pid, _ = started
    verify.send_signal(signal.SIGTERM)
    assert verify.wait(timeout=20) == -signal.SIGTERM  # it dies of the signal it was sent
    assert gone(lesson_pid)


def test_sweep_orphans_in_process(tmp_path, monkeypatch):
    import tempfile

    from verified_triton.record.runner import TEMP_PREFIX, sweep_orphans

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    (tmp_path / f"{TEMP_PREFIX}{dead}-lesson-abc").mkdir()
    (tmp_path / f"{TEMP_PREFIX}{os.getpid()}-lesson-abc").mkdir()
    (tmp_path / f"{TEMP_PREFIX}notapid-x").mkdir()
    removed = sweep_orphans()
    assert [p.name for p in removed] == [f"{TEMP_PREFIX}{dead}-lesson-abc"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([f"{TEMP_PREFIX}{os.getpid()}-lesson-abc",
                                                                 f"{TEMP_PREFIX}notapid-x"])
