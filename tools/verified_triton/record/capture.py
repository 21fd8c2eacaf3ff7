"""Run one child process with a time limit and keep a bounded copy of what it printed.

One job: start the process in its own process group, drain both pipes into
head-and-tail buffers (megabytes of output cost little), kill the whole
group at the limit, and never leave it behind: the child is started with a
parent-death signal (Linux), and a signal that stops verify kills every
group still running first. A process the lesson started in a session (and
so a group) of its own (`setsid`, `start_new_session=True`) escapes a group
kill: every run marks its environment with a token of its own (RUN_TOKEN),
which each descendant inherits, and when the run ends every process still
carrying that token is killed too (found through /proc, on Linux).

Under a tool such as compute-sanitizer (`prefix`), the tool is the child:
PREFIX_LAUNCHER gives it the parent-death signal and becomes it, and the tool
starts the lesson through LAUNCHER without VT_PARENT_PID (its parent is the
tool, not verify), so the lesson dies with the tool and the tool with verify.
"""

from __future__ import annotations

import collections
import os
import secrets
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

RUN_TOKEN = "VT_RUN_TOKEN"  # in the environment of each run and of everything it starts: which run it belongs to
_running: dict[int, str] = {}  # process group -> its run's token
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
    token = secrets.token_hex(16)
    env = {**env, "VT_PARENT_PID": str(os.getpid()), RUN_TOKEN: token}
    command = [sys.executable, "-c", LAUNCHER, script]
    if prefix:
        command = [sys.executable, "-c", PREFIX_LAUNCHER, *prefix, *command]
    proc = subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    readers = [BoundedReader(proc.stdout), BoundedReader(proc.stderr)]
    timed_out = _supervise(proc, readers, timeout, token)
    (stdout, out_cut), (stderr, err_cut) = readers[0].text(), readers[1].text()
    return Captured(None if timed_out else proc.returncode, timed_out, stdout, stderr, out_cut, err_cut,
                    time.monotonic() - t0)


class LimitedReader(threading.Thread):
    """Drain a pipe, keeping at most `limit` bytes; past them, call `over` once (and keep nothing more)."""

    def __init__(self, pipe, limit: int, over):
        super().__init__(daemon=True)
        self.pipe, self.limit, self.over = pipe, limit, over
        self.data = bytearray()
        self.too_long = False

    def run(self) -> None:
        for chunk in iter(lambda: self.pipe.read(65536), b""):
            if self.too_long:
                continue
            if len(self.data) + len(chunk) > self.limit:
                self.too_long = True
                self.data.clear()
                self.over()
                continue
            self.data += chunk


@dataclass
class Output:
    exit_code: int | None  # None when it was killed at the time limit or for printing too much
    timed_out: bool
    too_long: bool  # it printed more than the limit on either stream, and was killed
    stdout: bytes
    stderr: bytes


def run_command(argv: list[str], timeout: float, limit: int) -> Output:
    """Run a command (a tool such as gh, not a lesson) with both streams read bounded while reading: past
    `limit` bytes on either, it is killed and nothing it printed is kept; after `timeout` seconds, killed."""
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    readers = [LimitedReader(proc.stdout, limit, lambda: kill_group(proc.pid)),
               LimitedReader(proc.stderr, limit, lambda: kill_group(proc.pid))]
    timed_out = _supervise(proc, readers, timeout)
    too_long = any(r.too_long for r in readers)
    code = None if timed_out or too_long else proc.returncode
    return Output(code, timed_out, too_long, bytes(readers[0].data), bytes(readers[1].data))


def _supervise(proc: subprocess.Popen, readers: list[threading.Thread], timeout: float, token: str = "") -> bool:
    """Watch a started process: known to the signal handlers while it runs, its pipes drained by `readers`,
    waited for at most `timeout` seconds, then its process group killed (anything it left running would hold
    the pipes open, and the GPU) and, with a `token`, every process marked with it (in a session of its own
    too). Whether it ran out of time."""
    with _lock:
        _running[proc.pid] = token
    for reader in readers:
        reader.start()
    timed_out = False
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        kill_group(proc.pid)
        if token:
            kill_marked(token)
        proc.wait()
        with _lock:
            _running.pop(proc.pid, None)
    for reader in readers:
        reader.join(timeout=10)
    return timed_out


def kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def marked(token: str) -> list[int]:
    """The processes whose environment carries this run's token (Linux: /proc; elsewhere none are found)."""
    mark = f"{RUN_TOKEN}={token}".encode()
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                environ = f.read(1 << 20)
        except OSError:  # gone meanwhile, or another user's
            continue
        if mark in environ.split(b"\0"):
            found.append(int(entry))
    return found


def kill_marked(token: str, rounds: int = 20) -> None:
    """Kill every process carrying the token, again while any still do (one may have been forking)."""
    for _ in range(rounds):
        pids = marked(token)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.01)


def kill_all_on_signals() -> None:
    """On SIGTERM, SIGINT or SIGHUP: kill every lesson still running, then die of the same signal."""
    def handler(signum, frame):
        with _lock:
            for pid, token in list(_running.items()):
                kill_group(pid)
                if token:
                    kill_marked(token)
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        try:
            signal.signal(sig, handler)
        except (ValueError, OSError):  # not the main thread, or not on this platform
            pass
