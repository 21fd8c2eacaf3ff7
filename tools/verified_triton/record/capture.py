"""Run one child process with a time limit and keep a bounded copy of what it printed.

One job: start the process in its own process group, drain both pipes into
head-and-tail buffers (megabytes of output cost little), kill the whole
group at the limit, and never leave it behind: the child is started with a
parent-death signal (Linux), and a signal that stops verify kills every
group still running first.

Under a tool such as compute-sanitizer (`prefix`), the tool is the child:
PREFIX_LAUNCHER gives it the parent-death signal and becomes it, and the tool
starts the lesson through LAUNCHER without VT_PARENT_PID (its parent is the
tool, not verify), so the lesson dies with the tool and the tool with verify.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

from verified_triton.core.limits import LIMITS

# Started as `python -c LAUNCHER main.py`: ask the kernel to kill this process when
# its parent dies (even by SIGKILL), then become the lesson. Linux only; elsewhere a no-op.
LAUNCHER = (
    "import ctypes, os, signal, sys\n"
    "try:\n"
    "    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG\n"
    "    if os.getppid() != int(os.environ.pop('VT_PARENT_PID', os.getppid())):\n"
    "        sys.exit(137)  # the parent died before the line above took effect\n"
    "except (OSError, AttributeError):\n"
    "    pass\n"
    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])\n"
)

# Started as `python -c PREFIX_LAUNCHER tool args...`: the same signal, then become the tool.
PREFIX_LAUNCHER = (
    "import ctypes, os, signal, sys\n"
    "try:\n"
    "    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG\n"
    "    if os.getppid() != int(os.environ.pop('VT_PARENT_PID', os.getppid())):\n"
    "        sys.exit(137)\n"
    "except (OSError, AttributeError):\n"
    "    pass\n"
    "os.execv(sys.argv[1], sys.argv[1:])\n"
)

_running: set[int] = set()
_lock = threading.Lock()


class BoundedReader(threading.Thread):
    """Drain a pipe, keeping the first and last bytes only."""

    def __init__(self, pipe, limit: int = LIMITS.stream_kept):
        super().__init__(daemon=True)
        self.pipe, self.head_limit, self.tail_limit = pipe, limit * 3 // 4, limit // 4
        self.head = bytearray()
        self.tail: collections.deque[bytes] = collections.deque()
        self.tail_size = self.total = 0

    def run(self) -> None:
        for chunk in iter(lambda: self.pipe.read(8192), b""):
            self.total += len(chunk)
            room = self.head_limit - len(self.head)
            if room > 0:
                self.head += chunk[:room]
                chunk = chunk[room:]
            if chunk:
                self.tail.append(chunk)
                self.tail_size += len(chunk)
                while self.tail_size - len(self.tail[0]) >= self.tail_limit:
                    self.tail_size -= len(self.tail.popleft())

    def text(self) -> tuple[str, int]:
        tail = b"".join(self.tail)[-self.tail_limit:] if self.tail else b""
        omitted = self.total - len(self.head) - len(tail)
        data = bytes(self.head)
        if omitted > 0:
            data += f"\n[... {omitted} bytes omitted ...]\n".encode()
        return (data + tail).decode("utf-8", errors="replace"), max(omitted, 0)


@dataclass
class Captured:
    exit_code: int | None  # None when it was killed at the time limit
    timed_out: bool
    stdout: str
    stderr: str
    stdout_omitted: int
    stderr_omitted: int
    wall_s: float


def run_bounded(script: str, cwd, env: dict, timeout: float, prefix: list[str] | None = None) -> Captured:
    """Run `python script` in `cwd` with `env`; kill its process group after `timeout` seconds.

    With `prefix` (a tool's path and options) the tool runs `python script` instead: `prefix + [python,
    -c, LAUNCHER, script]`, the tool itself started by PREFIX_LAUNCHER.
    """
    t0 = time.monotonic()
    env = {**env, "VT_PARENT_PID": str(os.getpid())}
    command = [sys.executable, "-c", LAUNCHER, script]
    if prefix:
        command = [sys.executable, "-c", PREFIX_LAUNCHER, *prefix, *command]
    proc = subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    with _lock:
        _running.add(proc.pid)
    readers = [BoundedReader(proc.stdout), BoundedReader(proc.stderr)]
    for reader in readers:
        reader.start()
    timed_out = False
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        kill_group(proc.pid)
        proc.wait()
    finally:
        kill_group(proc.pid)  # anything the lesson left running would hold the pipes open and the GPU
        with _lock:
            _running.discard(proc.pid)
    for reader in readers:
        reader.join(timeout=10)
    (stdout, out_cut), (stderr, err_cut) = readers[0].text(), readers[1].text()
    return Captured(None if timed_out else proc.returncode, timed_out, stdout, stderr, out_cut, err_cut,
                    time.monotonic() - t0)


def kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def kill_all_on_signals() -> None:
    """On SIGTERM, SIGINT or SIGHUP: kill every lesson still running, then die of the same signal."""
    def handler(signum, frame):
        with _lock:
            for pid in list(_running):
                kill_group(pid)
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        try:
            signal.signal(sig, handler)
        except (ValueError, OSError):  # not the main thread, or not on this platform
            pass
