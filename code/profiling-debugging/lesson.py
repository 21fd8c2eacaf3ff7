"""Debugging and profiling, as the course records it: the tools at work.

A kernel goes wrong in three ways: it computes the wrong values, it touches
memory it does not own, or it is slow. Each has its own tools, and each tool
sees only part of the problem. This file plants one bug of each kind (the
buggy kernels are in specimens.py, the fixed ones in profiling_debugging.py,
the race checker's view in race_model.py) and finds it, through the course's
kit (lessonkit.py), which keeps the record:

1. a wrong row stride, found by stopping inside the kernel with the
   interpreter's debugger;
2. a store past the end of a tensor, which nothing reports until the right
   tool looks with PyTorch's caching allocator out of the way;
3. what a race checker cannot see in asynchronous code (a model);
4. vector loads that appear or vanish with what the compiler can prove, read
   from the PTX and SASS;
5. where a kernel's time goes: the clocks, Nsight Compute and Proton.

Run it:
    TRITON_INTERPRET=1 python lesson.py   # any machine: the CPU half
    python lesson.py                      # a CUDA GPU: the tools too
"""

import contextlib
import csv
import glob
import inspect
import io
import json
import math
import os
import pdb
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
import triton

# lessonkit.py sits beside this file in a download, one folder up in the repository.
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]
import profiling_debugging as fixed  # noqa: E402
from profiling_debugging import (  # noqa: E402
    EXTRA,
    copy_kernel,
    fill,
    fill_fixed,
    scale,
    scale_rows,
    strided_copy_kernel,
)
from race_model import races, ring  # noqa: E402
from specimens import MARK, fill_planted, scale_rows_buggy  # noqa: E402

from lessonkit import Lesson, bench_interleaved, bench_ms  # noqa: E402

SPECIMENS = HERE / "specimens.py"
# verify.py's sanitizer mode runs the whole lesson under compute-sanitizer and
# names the tool here. A child the lesson starts would then run under it too:
# the planted bug would be charged to the lesson, and two tools cannot share a
# process. So the parts that start a tool stand down.
SANITIZE_ENV = "VT_SANITIZE"


# == Children: one kernel in a process of its own ==================================


def local(text: str) -> str:
    """`text` with this folder's path cut off the files it names (specimens.py)."""
    return text.replace(str(HERE) + os.sep, "").replace(str(HERE.parent) + os.sep, "")


@dataclass
class Child:
    command: list[str]
    returncode: int | None  # None: killed at the timeout
    stdout: str
    stderr: str

    def marks(self) -> list[str]:
        """The lines specimens.py printed for the lesson, without the mark."""
        return [line.removeprefix(MARK).strip()
                for line in self.stdout.splitlines() if line.startswith(MARK)]

    def tail(self, chars: int = 600) -> str:
        text = local(self.stdout + "\n" + self.stderr).strip()
        return text if len(text) <= chars else "..." + text[-chars:]


def run_child(args: list[str], prefix: list[str] = (), env: dict | None = None,
              timeout: float = 300) -> Child:
    """python specimens.py ARGS, behind a tool's command line when `prefix`."""
    command = [*prefix, sys.executable, str(SPECIMENS), *args]
    child_env = {k: v for k, v in os.environ.items()
                 if k not in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")}
    for name, value in (env or {}).items():  # None: leave the variable out
        if value is None:
            child_env.pop(name, None)
        else:
            child_env[name] = value
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=child_env,
                              timeout=timeout, cwd=HERE, errors="replace")
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if exc.stdout else ""
        return Child(command, None, out, f"killed after {timeout:g} s")
    return Child(command, done.returncode, done.stdout, done.stderr)


def read_log(path: str, limit: int = 1 << 20) -> str:
    """A tool's report file, at most `limit` bytes of it; "" if it wrote none."""
    if not os.path.exists(path):
        return ""
    with open(path, "rb") as f:
        return f.read(limit).decode(errors="replace")


def exit_status(code: int | None) -> str:
    """-11 -> '-11 (killed by SIGSEGV)': a negative status is the signal's number."""
    if code is None:
        return "none (killed at the timeout)"
    if code < 0:
        try:
            return f"{code} (killed by {signal.Signals(-code).name})"
        except ValueError:
            return f"{code} (killed by signal {-code})"
    return str(code)


def under_a_sanitizer(lesson: Lesson, part: str) -> bool:
    """True (and a skip recorded) when this run is itself under compute-sanitizer."""
    tool = os.environ.get(SANITIZE_ENV, "")
    if tool:
        lesson.skip(part, f"this run is itself under compute-sanitizer ({tool}); "
                    "a second tool, or a planted bug, in a child would be charged "
                    "to the lesson")
    return bool(tool)


# == Step 1: a wrong answer ==========================================================


def padded_rows(rows: int, cols: int, pad: int, device: str) -> torch.Tensor:
    """A rows x cols view of a wider matrix: the rows are cols + pad apart."""
    return torch.randn(rows, cols + pad, device=device)[:, :cols]


def wrong_stride(lesson: Lesson, device: str) -> None:
    # snippet: wrong-stride
    # A matrix whose rows are padded: 100 columns, stored 160 apart. The
    # buggy kernel steps through memory 100 at a time, so row 0 is right and
    # every later row reads a window that starts too early. That predicts
    # the wrong output exactly: row r is elements r*100 .. r*100+99 of the
    # underlying storage, scaled.
    torch.manual_seed(1)
    x = padded_rows(5, 100, 60, device)
    s = torch.rand(5, device=device) + 0.5
    want = x * s[:, None]
    got = scale(scale_rows_buggy, x, s)
    storage = x.as_strided((x.shape[0] * x.stride(0),), (1,))
    predicted = torch.stack([storage[r * 100:r * 100 + 100] for r in range(5)])
    predicted = predicted * s[:, None]
    rows_wrong = [not torch.equal(got[r], want[r]) for r in range(5)]
    # end snippet
    lesson.check("buggy-output-is-the-predicted-shift", torch.equal(got, predicted),
                 "row r holds storage[r*100 : r*100+100] * s[r], bit for bit",
                 why="the bug is understood only if its wrong output is predicted")
    lesson.check("buggy-rows-wrong-exactly-after-row-0",
                 rows_wrong == [False, True, True, True, True],
                 f"rows that differ from x * s: {rows_wrong}")
    fixed = scale(scale_rows, x, s)
    lesson.check("fixed-kernel-matches", torch.equal(fixed, want),
                 "x_row_stride in the offsets: equal to torch's x * s, bit for bit")


# snippet: pdb-session
class TypedPdb(pdb.Pdb):
    """pdb reading its commands from a string, and echoing each one as if typed."""

    def precmd(self, line):
        print(line.rstrip(), file=self.stdout)
        return line


def scripted_breakpoint(commands: str):
    """A sys.breakpointhook that answers every (Pdb) prompt from `commands`."""

    def hook(*args, **kwargs):
        debugger = TypedPdb(stdin=io.StringIO(commands), stdout=sys.stdout)
        debugger.use_rawinput = False
        debugger.set_trace(sys._getframe(1))  # the frame that called breakpoint()

    return hook


def debug_in_the_interpreter(device: str) -> str:
    x = padded_rows(3, 6, 6, device)  # 3 rows of 6 columns, stored 12 apart
    saved, sys.breakpointhook = sys.breakpointhook, scripted_breakpoint(
        "p row\np offs\np x_row_stride\nc\n")
    session = io.StringIO()
    try:
        with contextlib.redirect_stdout(session):
            scale(scale_rows_buggy, x, torch.ones(3, device=device), PAUSE=True)
    finally:
        sys.breakpointhook = saved
    return local(session.getvalue())  # pdb names files by their full path


# end snippet


def first_numbers(text: str, after: str) -> list[list[int]]:
    """The integers of the first line after each line that ends with `after`."""
    lines = text.splitlines()
    return [[int(v) for v in re.findall(r"-?\d+", lines[i + 1].split("dtype")[0])]
            for i, line in enumerate(lines[:-1]) if line.endswith(after)]


def printed_offsets(text: str, program: int) -> list[int]:
    """The offsets tl.device_print("offs", ...) printed for one program.

    The interpreter prints a program's whole block on one line,
    "(1, 0, 0)  offs:  [ 6  7 ...]"; a GPU prints one element per line,
    "pid (1, 0, 0) idx (  0) offs: 6". Either way the values follow "offs:".
    """
    found = []
    for line in text.splitlines():
        if f"({program}, 0, 0)" in line and "offs:" in line:
            found += [int(v) for v in re.findall(r"-?\d+", line.split("offs:", 1)[1])]
    return found


def debugger(lesson: Lesson, device: str) -> None:
    if lesson.interpret:
        session = debug_in_the_interpreter(device)
        print(session.rstrip())
        rows = first_numbers(session, "p row")
        offs = first_numbers(session, "p offs")
        strides = first_numbers(session, "p x_row_stride")
        lesson.check("pdb-stopped-in-every-program", [r for (r,) in rows] == [0, 1, 2],
                     f"breakpoint() stopped in programs {[r for (r,) in rows]}")
        lesson.check("pdb-shows-the-wrong-offsets",
                     [o[:1] for o in offs] == [[0], [6], [12]]
                     and strides[:1] == [[12]],
                     "row r's offsets start at r * 6 (n_cols), but the rows are "
                     f"{strides[0] if strides else '?'} apart",
                     why="the debugger shows the bug: offs uses n_cols as the stride")
    else:
        lesson.skip("pdb-in-the-kernel", "a compiled kernel has no Python frame to "
                    "stop in; breakpoint() works under TRITON_INTERPRET=1")
    # snippet: device-print
    # The prints work in both: the interpreter prints each program's block,
    # a GPU every element of it (keep the grid tiny). A child process runs
    # the kernel so that a GPU's printf output can be read back, and compiles
    # it afresh: a kernel loaded from Triton's cache was compiled earlier, and
    # its static_print has nothing to say.
    child = run_child(["print"], env={"TRITON_ALWAYS_COMPILE": "1"})
    # end snippet
    print(local("\n".join(child.stdout.splitlines()[:30])))
    row_1 = printed_offsets(child.stdout, 1)
    lesson.check("device-print-shows-row-1-at-6",
                 child.returncode == 0 and bool(row_1) and min(row_1) == 6,
                 f"program 1 printed offsets from {min(row_1) if row_1 else '?'} "
                 f"({child.marks()[-1] if child.marks() else child.tail(300)})")
    lesson.check("static-print-shows-block", re.search(r"BLOCK = 8\b", child.stdout)
                 is not None, "tl.static_print printed the constexpr BLOCK = 8")


# == Step 2: memory nobody checks =====================================================


def out_of_bounds(lesson: Lesson, device: str) -> None:
    # snippet: guard
    # The store past the end, into memory the lesson owns: a 1000-element
    # view at the start of a larger buffer, as PyTorch's caching allocator
    # places a small tensor inside a larger segment. Nothing raises.
    buffer = torch.zeros(1000 + 4 * EXTRA, device=device)
    out = buffer[:1000]
    try:
        fill(fill_planted, out, 1.0)
        raised = ""
    except Exception as exc:  # noqa: BLE001 - a checker that catches it would raise
        raised = f"{type(exc).__name__}: {str(exc)[:200]}"
    written_past = (buffer[1000:] != 0).nonzero().flatten().tolist()
    # end snippet
    lesson.check("planted-store-raises-nothing", not raised,
                 raised or "the launch returned and nothing was raised",
                 why="the point of this step: a bad store is silent")
    lesson.check("planted-store-wrote-64-past-the-end",
                 written_past == list(range(EXTRA)),
                 f"{len(written_past)} elements written after the tensor's end, "
                 f"exactly the {EXTRA} the mask let through")
    buffer.zero_()
    fill(fill_fixed, out, 1.0)
    lesson.check("fixed-store-stays-inside", int((buffer[1000:] != 0).sum()) == 0,
                 "mask offs < n: nothing written past the end")
    if under_a_sanitizer(lesson, "plain-tensor-store"):
        return
    # snippet: neighbours
    # The same store on a plain tensor, in a child: eight tensors of 1000
    # floats side by side, the planted fill on the fourth.
    child = run_child(["store", "planted"])
    # end snippet
    marks = child.marks()
    for mark in marks:
        print(f"  the child: {mark}")
    last = child.stderr.strip().splitlines()[-1:] if child.stderr.strip() else []
    print(f"  its exit status: {exit_status(child.returncode)}"
          + (f"; its last words on stderr: {local(last[0])[:200]}" if last else ""))
    ok, said = store_was_silent(child, lesson.interpret)
    lesson.check("plain-tensor-store-raises-nothing", ok, said,
                 why="whatever broke, broke later and elsewhere")


def store_was_silent(child: Child, interpret: bool) -> tuple[bool, str]:
    """Whether the planted store in a plain tensor went by without an error naming
    it: the launch returned, or (under the interpreter, whose eight tensors sit
    among its own objects on the CPU's heap) the corrupted child was killed by a
    signal with no Python error."""
    if child.marks()[:1] == ["launched"]:
        return True, "the launch returned without an error"
    killed = (child.returncode or 0) < 0 and "Traceback" not in child.stderr
    return interpret and killed, (f"exit status {exit_status(child.returncode)}, "
                                  f"{'no' if killed else 'a'} Python error")


def asserts(lesson: Lesson, device: str) -> None:
    if under_a_sanitizer(lesson, "asserts"):
        return
    # snippet: assert-runs
    # Each asserting fill in a child of its own, with TRITON_DEBUG=1 (without
    # it a GPU compiles the assertions out). On a GPU a failed assertion
    # stops the kernel and leaves the process's CUDA context unusable.
    results = {how: run_child(["assert", how], env={"TRITON_DEBUG": "1"})
               for how in ("device", "block", "scalar")}
    if not lesson.interpret:  # and once without: nothing should fire
        results["device, no TRITON_DEBUG"] = run_child(["assert", "device"],
                                                       env={"TRITON_DEBUG": None})
    # end snippet
    fired = {}
    for how, child in results.items():
        marks = child.marks()
        fired[how] = child.returncode != 0 or any(m.startswith("raised") for m in marks)
        said = marks[-1] if marks else child.tail(300)
        named = "store past the end" in child.stdout + child.stderr
        print(f"  {how}: {'fired' if fired[how] else 'silent'}"
              f"{' (names the message)' if named else ''}: {said}")
    if lesson.interpret:
        lesson.check("interpreter-ignores-device-assert", not fired["device"],
                     "tl.device_assert is compiled out of the interpreter, "
                     "TRITON_DEBUG=1 or not", why="measured: the store went through")
        lesson.check("interpreter-assert-on-a-block-passes", not fired["block"],
                     "the truth value of a whole block is always True there")
        lesson.check("interpreter-assert-on-a-scalar-fires", fired["scalar"],
                     "a reduced condition is a plain Python bool: assert raises")
    else:
        for how in ("device", "block", "scalar"):
            named = "store past the end" in results[how].stdout + results[how].stderr
            lesson.check(f"gpu-{how}-assert-fires", fired[how] and named,
                         "TRITON_DEBUG=1: the kernel stops at the first program "
                         "past the end, with the assertion's message")
        lesson.check("gpu-no-assert-without-triton-debug",
                     not fired["device, no TRITON_DEBUG"],
                     "without TRITON_DEBUG=1 the assertion is compiled out and the "
                     "store goes through")


# -- compute-sanitizer: finding the binary, reading its report -----------------------


def find_tool(name: str, variable: str, *patterns: str) -> str | None:
    """$VARIABLE, then PATH, then the usual install folders (the newest first)."""
    given = os.environ.get(variable)
    if given and os.access(given, os.X_OK):
        return given
    found = shutil.which(name)
    if found:
        return found
    for pattern in patterns:
        for path in sorted(glob.glob(pattern), reverse=True):
            if os.access(path, os.X_OK):
                return path
    return None


def find_compute_sanitizer() -> str | None:
    return find_tool("compute-sanitizer", "COMPUTE_SANITIZER",
                     "/usr/local/cuda/bin/compute-sanitizer",
                     "/usr/local/cuda-*/bin/compute-sanitizer")


@dataclass
class Access:
    """One memcheck record: 'Invalid __global__ write of size 4 bytes' and where."""

    what: str  # "Invalid __global__ write"
    size: int
    kernel: str = ""
    file: str = ""
    line: int = 0


@dataclass
class MemcheckReport:
    errors: int | None  # from "ERROR SUMMARY: N errors"; None: no summary
    accesses: list[Access] = field(default_factory=list)
    refused: str = ""  # the tool could not run here, and why


# snippet: read-report
PREFIX = re.compile(r"^=+ ?(?P<rest>.*)$")
RECORD = re.compile(r"^(?P<what>(?:Potential )?[Ii]nvalid __\w+__ \S+) of size "
                    r"(?P<size>[\d,]+) bytes?$")
AT = re.compile(r"^\s+at (?P<where>.+)$")
SUMMARY = re.compile(r"^ERROR SUMMARY: (?P<n>[\d,]+) errors?$")
REFUSALS = ("Device not supported", "unrecognised option", "No attachable process",
            "Target application terminated before first instrumented API call",
            "couldn't find exit code")


def number(text: str) -> int:
    return int(text.replace(",", ""))  # "1,024": the tools group thousands


def split_location(where: str) -> tuple[str, str, int]:
    """'fill_planted+0x1b0 in /x/specimens.py:84' -> (kernel, file, line).

    Older versions wrote '0x1b0 in /x/specimens.py:84:fill_planted'.
    """
    head, _, tail = where.rpartition(" in ")
    found = re.fullmatch(r"(.+):(\d+)", tail)
    if found and not re.fullmatch(r"(.+):(\d+):(.+)", tail):
        kernel = re.sub(r"(\+0x[0-9a-fA-F]+|\(\)|:0x[0-9a-fA-F]+)+$", "", head)
        return kernel, found.group(1), int(found.group(2))
    old = re.fullmatch(r"(.+?):(\d+):(.+)", tail)
    if old:
        return old.group(3), old.group(1), int(old.group(2))
    return head, "", 0


def read_memcheck(log: str) -> MemcheckReport:
    """What memcheck's text report says: the error count and each bad access."""
    report = MemcheckReport(errors=None)
    current = None
    for raw in log.splitlines():
        prefixed = PREFIX.match(raw)
        if not prefixed:
            continue  # the application's own output
        rest = prefixed.group("rest")
        if record := RECORD.match(rest):
            current = Access(record.group("what"), number(record.group("size")))
            report.accesses.append(current)
        elif (at := AT.match(rest)) and current is not None and not current.file:
            current.kernel, path, current.line = split_location(at.group("where"))
            current.file = os.path.basename(path)
        elif summary := SUMMARY.match(rest.strip()):
            # one summary per process the tool followed: add them up
            report.errors = (report.errors or 0) + number(summary.group("n"))
    if report.errors is None:
        report.refused = next((r for r in REFUSALS if r in log), "")
    return report


# end snippet


def store_line(kernel) -> int:
    """The source line of the tl.store in a @triton.jit kernel."""
    lines, first = inspect.getsourcelines(kernel.fn)
    return first + next(i for i, line in enumerate(lines) if "tl.store(" in line)


def memcheck(tool: str, which: str, cached: bool, folder: str) -> tuple[Child, str]:
    # snippet: memcheck-run
    # The child with the planted (or fixed) store, under memcheck. The report
    # goes to a file of its own, apart from the child's output. With
    # PYTORCH_NO_CUDA_MEMORY_CACHING=1 every tensor is its own cudaMalloc,
    # whose bounds the tool knows; with the caching allocator, a tensor is a
    # slice of a larger block and a store past its end stays inside that.
    log = os.path.join(folder, f"memcheck-{which}-{'on' if cached else 'off'}.log")
    prefix = [tool, "--tool", "memcheck", "--log-file", log, "--print-limit", "100",
              "--show-backtrace", "no"]
    env = {"PYTORCH_NO_CUDA_MEMORY_CACHING": None if cached else "1"}
    child = run_child(["store", which], prefix=prefix, env=env)
    # end snippet
    return child, read_log(log)


def compute_sanitizer(lesson: Lesson, device: str) -> None:
    if device != "cuda":
        lesson.skip("memcheck", "compute-sanitizer watches GPU kernels; this run has "
                    "no GPU (a smoke run reaches this line and stops)")
        return
    if under_a_sanitizer(lesson, "memcheck"):
        return
    tool = find_compute_sanitizer()
    if tool is None:
        lesson.skip("memcheck", "compute-sanitizer was not found ($COMPUTE_SANITIZER, "
                    "PATH, /usr/local/cuda*/bin); it comes with the CUDA toolkit")
        return
    try:
        version = subprocess.run([tool, "--version"], capture_output=True, text=True,
                                 timeout=60).stdout.strip().splitlines()
    except (OSError, subprocess.SubprocessError) as exc:
        version = [f"--version failed: {exc}"]
    print(f"  compute-sanitizer: {version[-1] if version else 'version unknown'}")
    line = store_line(fill_planted)
    runs = {}
    with tempfile.TemporaryDirectory() as folder:
        for which, cached in (("planted", True), ("planted", False), ("fixed", False)):
            child, log = memcheck(tool, which, cached, folder)
            report = read_memcheck(log)
            label = f"{which}, caching allocator {'on' if cached else 'off'}"
            print(f"\n  {label}: exit {child.returncode}, "
                  f"{'no summary' if report.errors is None else report.errors} "
                  f"errors; the child said {child.marks()}")
            for access in report.accesses[:3]:
                print(f"    {access.what} of {access.size} bytes at "
                      f"{access.kernel} {access.file}:{access.line}")
            if report.errors is None:
                why = report.refused or "it ended without its ERROR SUMMARY line"
                lesson.skip("memcheck", f"compute-sanitizer could not check here "
                            f"({why}; exit {child.returncode}): {child.tail(300)} "
                            f"| {log[-300:]}")
                return
            runs[(which, cached)] = report
    hidden = runs[("planted", True)]
    lesson.check("memcheck-misses-it-with-the-caching-allocator", hidden.errors == 0,
                 f"{hidden.errors} errors: the store stayed inside the allocator's "
                 "block")
    found = runs[("planted", False)]
    at_store = [a for a in found.accesses if a.what == "Invalid __global__ write"
                and a.kernel == "fill_planted" and a.file == "specimens.py"
                and a.line == line]
    lesson.check("memcheck-finds-it-without-caching",
                 found.errors > 0 and len(at_store) == len(found.accesses) > 0,
                 f"{found.errors} errors; {len(at_store)} of the "
                 f"{len(found.accesses)} printed are writes by fill_planted at "
                 f"specimens.py:{line}, its tl.store")
    fixed = runs[("fixed", False)]
    lesson.check("memcheck-clean-after-the-fix", fixed.errors == 0,
                 f"{fixed.errors} errors with mask offs < n")


# == Step 3: what a race checker sees =================================================


def race_model(lesson: Lesson, device: str) -> None:
    # snippet: race-checks
    stages, tiles = 3, 12
    truth = races(ring(stages, tiles))
    bug = races(ring(stages, tiles, release_early=True))
    blind_to_barriers = races(ring(stages, tiles, sees_mbarriers=False))
    blind_to_copies = races(ring(stages, tiles, release_early=True, sees_copies=False))
    # end snippet
    print(f"  the ring as written: {len(truth)} unordered pairs")
    print(f"  the slot released before it is read: {len(bug)}, e.g. "
          + ", ".join(f"tile {a.tile} read / tile {b.tile} written"
                      for a, b in bug[:2]))
    print("  a checker blind to mbarriers, on the correct ring: "
          f"{len(blind_to_barriers)}")
    print(f"  a checker blind to the copy engine, on the bug: {len(blind_to_copies)}")
    lesson.check("ring-ordered-by-its-mbarriers", not truth,
                 "every write and read of a slot is ordered by ready/empty")
    reused = all(a.kind == "read" and b.kind == "write" and b.tile == a.tile + stages
                 for a, b in bug)
    lesson.check("early-release-races-on-every-reuse",
                 len(bug) == tiles - stages and reused,
                 f"{len(bug)} races, each between a tile's read and the copy of the "
                 f"tile {stages} later into the same slot", why="a real hazard: fix it")
    lesson.check("blind-to-mbarriers-reports-false-races",
                 len(blind_to_barriers) > 0,
                 f"{len(blind_to_barriers)} pairs on the correct ring",
                 why="ordered by a synchronization the checker does not model")
    lesson.check("blind-to-copies-misses-the-bug", not blind_to_copies,
                 "0 pairs: the copy engine's writes are nobody's accesses",
                 why="a clean report on async code is weak evidence")


# == Step 4: what the kernel compiled to ===============================================


TARGET = ("cuda", 90, 32)  # an H100 or H200: Hopper, 32 threads a warp


def jit_signature(kernel, args: dict) -> tuple[dict, dict, dict]:
    """The signature, constants and attributes the JIT would specialize on.

    Triton's launcher marks a pointer aligned to 16 bytes and an integer
    divisible by 16 as such ("tt.divisibility"), and makes an integer equal
    to 1 a constant; the compiler reasons from these facts.
    """
    types = {torch.float32: "fp32", torch.float16: "fp16", torch.int32: "i32"}
    constexprs = {p.name for p in kernel.params if p.is_constexpr}
    signature, constants, attrs = {}, {}, {}
    for i, name in enumerate(kernel.arg_names):
        value = args[name]
        aligned = False
        if isinstance(value, torch.Tensor):
            signature[name] = "*" + types[value.dtype]
            aligned = value.data_ptr() % 16 == 0
        elif name in constexprs or value == 1:
            signature[name], constants[name] = "constexpr", value
        elif isinstance(value, int):
            signature[name], aligned = "i32", value % 16 == 0
        else:
            signature[name] = "fp32"
        if aligned:
            attrs[(i,)] = [["tt.divisibility", 16]]
    return signature, constants, attrs


# snippet: compile-without-gpu
def compile_for_hopper(kernel, args: dict, target=None):
    """triton.compile for a Hopper GPU (sm_90) as the JIT would: no GPU needed."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.runtime.jit import JITFunction

    # Under TRITON_INTERPRET=1, @triton.jit made an interpreted function:
    # a JITFunction of the same Python function is what compiles.
    jit = kernel if isinstance(kernel, JITFunction) else JITFunction(kernel.fn)
    signature, constants, attrs = jit_signature(jit, args)
    source = ASTSource(jit, signature, constants, attrs)
    return triton.compile(source, target=target or GPUTarget(*TARGET))


# end snippet


def compiled(kernel, grid, device: str, args: dict):
    """The compiled kernel: launched on a GPU, compiled for Hopper without one."""
    if device == "cuda":
        return kernel[grid](*args.values())  # a launch returns what it ran
    return compile_for_hopper(kernel, args)


def cuobjdump(cubin: bytes, *flags: str) -> str:
    """cuobjdump (shipped with Triton's NVIDIA backend) on a cubin."""
    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    if not tool.exists():
        tool = Path(shutil.which("cuobjdump") or tool)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "kernel.cubin"
        path.write_bytes(cubin)
        done = subprocess.run([str(tool), *flags, str(path)], capture_output=True,
                              text=True, timeout=120)
    if done.returncode != 0:
        why = done.stderr.strip()[:300]
        raise RuntimeError(f"{tool.name} {' '.join(flags)}: {why}")
    return done.stdout


# snippet: facts
def facts(kernel) -> dict:
    """What one compiled kernel says about its loads, registers and memory."""
    ptx = re.findall(r"\bld\.global\S*", kernel.asm["ptx"])
    sass = re.findall(r"\bLDG\.\S+", cuobjdump(kernel.asm["cubin"], "-sass"))
    usage = cuobjdump(kernel.asm["cubin"], "-res-usage")
    regs, local = re.search(r"REG:(\d+)", usage), re.search(r"LOCAL:(\d+)", usage)
    return {
        "ptx_16_byte": sum(".v4." in op for op in ptx),
        "ptx_4_byte": sum(op.endswith(".b32") and ".v" not in op for op in ptx),
        "sass_128": sum(".128" in op for op in sass),
        "sass_other": sum(".128" not in op for op in sass),
        "registers": int(regs.group(1)) if regs else None,
        "local_bytes": int(local.group(1)) if local else None,  # spills live here
        "shared_bytes": kernel.metadata.shared,
    }


# end snippet


def copies(device: str) -> list[tuple[str, object, tuple, dict, bool]]:
    """(what, kernel, grid, arguments, whether its loads should be 16 bytes wide)."""
    x = torch.rand(2 * 4100, device=device)
    out = torch.empty_like(x)
    block = fixed.COPY_BLOCK
    return [
        ("copy, n = 4096", copy_kernel, (4,),
         dict(x_ptr=x, out_ptr=out, n=4096, BLOCK=block), True),
        ("copy, n = 4100", copy_kernel, (5,),
         dict(x_ptr=x, out_ptr=out, n=4100, BLOCK=block), False),
        ("strided, stride = 2", strided_copy_kernel, (4,),
         dict(x_ptr=x, out_ptr=out, n=4096, stride=2, BLOCK=block), False),
    ]


def excerpt(text: str, pattern: str, lines: int = 2) -> str:
    """The first lines matching `pattern`, without SASS's address and encoding."""
    found = [re.sub(r"/\*[0-9a-fx]+\*/|\s+/\* 0x[0-9a-f]+ \*/", "", line).strip()
             for line in text.splitlines() if re.search(pattern, line)]
    return "\n    ".join(re.sub(r"\s{2,}", " ", line)[:120] for line in found[:lines])


def compiled_code(lesson: Lesson, device: str) -> None:
    lesson.expect_warning("TRITON_DEFAULT_FP_FUSION is unset",
                          "Triton 3.9 says, the first time it compiles, that its "
                          "default for fused multiply-adds changes in 3.10; these "
                          "copies do no arithmetic")
    try:
        kernels = [(what, compiled(kernel, grid, device, args), vector)
                   for what, kernel, grid, args, vector in copies(device)]
    except Exception as exc:  # noqa: BLE001 - an old Triton, or no NVIDIA backend
        lesson.skip("compiled-code", f"this Triton could not compile for sm_90 here "
                    f"({type(exc).__name__}: {str(exc)[:200]})")
        return
    first = kernels[0][1]
    print("  TTIR, the load:\n    " + excerpt(first.asm["ttir"], r"tt\.load"))
    print("  TTGIR, the layout:\n    " + excerpt(first.asm["ttgir"], r"#blocked\d* ="))
    print("  PTX, the loads:\n    " + excerpt(first.asm["ptx"], r"ld\.global"))
    sass = cuobjdump(first.asm["cubin"], "-sass")
    print("  SASS, the loads:\n    " + excerpt(sass, r"\bLDG\b"))
    rows = []
    for what, kernel, vector in kernels:
        f = facts(kernel)
        rows.append([what, f["ptx_16_byte"], f["ptx_4_byte"], f["sass_128"],
                     f["sass_other"], f["registers"], f["local_bytes"],
                     f["shared_bytes"]])
        wide = f["ptx_16_byte"] > 0 and f["sass_128"] > 0 and f["ptx_4_byte"] == 0
        narrow = f["ptx_16_byte"] == f["sass_128"] == 0 and f["ptx_4_byte"] > 0
        lesson.check(f"loads-{'vector' if vector else 'scalar'}-{_slug(what)}",
                     wide if vector else narrow,
                     f"{f['ptx_16_byte']} 16-byte and {f['ptx_4_byte']} 4-byte "
                     f"loads in the PTX; {f['sass_128']} LDG.E.128 in the SASS")
        if device == "cuda":
            same = (f["registers"] == kernel.n_regs
                    and f["local_bytes"] == 4 * kernel.n_spills)
            lesson.check(f"res-usage-matches-driver-{_slug(what)}", same,
                         f"cuobjdump REG {f['registers']}, LOCAL {f['local_bytes']} B; "
                         f"the driver's n_regs {kernel.n_regs}, n_spills "
                         f"{kernel.n_spills}")
    if device == "cuda":  # the interpreter run's way of compiling, against the JIT's
        target = triton.runtime.driver.active.get_current_target()
        for (what, kernel, _), (_, fn, _, args, _) in zip(kernels, copies(device),
                                                           strict=True):
            cpu_way = compile_for_hopper(fn, args, target)
            loads = re.findall(r"ld\.global\S*", cpu_way.asm["ptx"])
            lesson.check(f"compile-matches-launch-{_slug(what)}",
                         loads == re.findall(r"ld\.global\S*", kernel.asm["ptx"]),
                         f"{len(loads)} loads, the same as the launch's PTX",
                         why="the interpreter run's table shows what a GPU runs")
    where = "as launched on this GPU" if device == "cuda" else "compiled for sm_90 here"
    lesson.table("compiled", ["kernel", "PTX 16-byte loads", "PTX 4-byte loads",
                              "SASS LDG.E.128", "other SASS loads",
                              "registers / thread", "local memory bytes",
                              "shared memory bytes"], rows,
                 f"The three copies {where} (static counts; BLOCK = 1024, 4 warps). "
                 "Local memory holds what spills from registers.")


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


# == Step 5: where the time goes =======================================================


def clocks(lesson: Lesson, device: str) -> None:
    # snippet: clocks
    # Three clocks on one copy of 2^28 floats (1 GiB read, 1 GiB written).
    n = lesson.size(gpu=1 << 28, smoke=4096)
    x = torch.rand(n, device=device)
    out = torch.empty_like(x)
    fixed.copy(x, out)  # compile first: a first call also pays for that
    torch.cuda.synchronize()
    start = time.perf_counter()
    fixed.copy(x, out)  # returns once the launch is queued
    launch_ms = (time.perf_counter() - start) * 1e3
    torch.cuda.synchronize()
    start = time.perf_counter()
    fixed.copy(x, out)
    torch.cuda.synchronize()  # waits for the kernel, and adds its own latency
    synced_ms = (time.perf_counter() - start) * 1e3
    kernel_ms = bench_ms(lambda: fixed.copy(x, out))  # do_bench's median
    # end snippet
    # snippet: rounds
    # The course's way: the kernel and a baseline take turns, round after
    # round, in one process, and each round's pair gives one sample of their
    # ratio. A device-to-device copy moves the same 8 bytes an element. Each
    # call is timed on its own, as in vector-add: captured in a CUDA graph, a
    # copy of 1 GiB becomes a copy-engine transfer, slower than a kernel's.
    lesson.predict("copy-vs-torch-copy-2^28-fp32", 1.0,
                   "both only move the same 8 bytes an element", 0.05)
    rounds = bench_interleaved({"copy_kernel": lambda: fixed.copy(x, out),
                                "torch copy": lambda: out.copy_(x)}, method="events")
    # end snippet
    lesson.benchmark("copy-vs-torch-copy-2^28-fp32", "copy_kernel vs out.copy_(x), "
                     "2²⁸ fp32", rounds, "copy_kernel", "torch copy", unit="GB/s",
                     work=2 * n * 4, baseline_name="device-to-device copy")
    if not math.isfinite(kernel_ms):
        lesson.skip("launch-is-not-the-kernel", "a smoke run times nothing")
        return
    gbps = 2 * n * 4 / (kernel_ms * 1e-3) / 1e9
    lesson.check("launch-is-not-the-kernel", launch_ms < 0.25 * kernel_ms,
                 f"the unsynchronized wall clock saw {launch_ms:.3f} ms of a "
                 f"{kernel_ms:.3f} ms kernel", why="a launch is asynchronous")
    lesson.table("clocks", ["clock", "ms"], [
        ["time.perf_counter around the launch", round(launch_ms, 4)],
        ["time.perf_counter with torch.cuda.synchronize", round(synced_ms, 4)],
        ["triton.testing.do_bench, median", round(kernel_ms, 4)],
    ], f"One copy of 2²⁸ fp32 ({gbps:,.0f} GB/s by do_bench's median).")


def find_ncu() -> str | None:
    return find_tool("ncu", "NCU", "/opt/nvidia/nsight-compute/*/ncu",
                     "/usr/local/cuda/bin/ncu", "/usr/local/cuda-*/bin/ncu")


# snippet: read-ncu
UNITS = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "Tbyte": 1e12,
         "nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3, "second": 1, "%": 1}


def read_ncu_csv(text: str) -> dict[str, tuple[float, str]]:
    """{metric name: (value, unit)} from `ncu --csv --page details` (one kernel).

    ncu's own messages (==PROF==, ==WARNING==) come before the table; its
    header names the columns. Numbers may carry thousands separators.
    """
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        return {}
    metrics = {}
    for row in csv.DictReader(lines[start:]):
        name, unit = row.get("Metric Name") or "", row.get("Metric Unit") or ""
        try:
            value = float((row.get("Metric Value") or "").replace(",", ""))
        except ValueError:
            continue
        metrics[name] = (value * UNITS.get(unit, 1), "" if unit in UNITS else unit)
    return metrics


# end snippet


def nsight_compute(lesson: Lesson, device: str) -> None:
    # The prediction, from the bytes: a copy does nothing but move them, so
    # DRAM should be as busy as a streaming copy can keep it, about 90 % of
    # its peak on an HBM GPU.
    lesson.predict("copy-dram-throughput", 90.0, "a copy only moves bytes: DRAM "
                   "as busy as streaming can keep HBM, about 90 % of its peak",
                   0.15, quantity="value", unit="% of peak")
    if device != "cuda":
        lesson.skip("nsight-compute", "Nsight Compute profiles GPU kernels; this run "
                    "has no GPU")
        return
    if under_a_sanitizer(lesson, "nsight-compute"):
        return
    ncu = find_ncu()
    if ncu is None:
        lesson.skip("nsight-compute", "ncu was not found ($NCU, PATH, "
                    "/opt/nvidia/nsight-compute, /usr/local/cuda*/bin)")
        return
    n = 1 << 26
    with tempfile.TemporaryDirectory() as folder:
        log = os.path.join(folder, "ncu.csv")
        # snippet: ncu-run
        # One launch of one kernel, the second (the first compiled it), with
        # the Speed Of Light section and two counters, as CSV.
        prefix = [ncu, "--target-processes", "all", "--clock-control", "none",
                  "--kernel-name", "regex:^copy_kernel$", "--launch-skip", "1",
                  "--launch-count", "1", "--section", "SpeedOfLight",
                  "--metrics", "dram__bytes_read.sum,dram__bytes_write.sum",
                  "--csv", "--page", "details", "--print-units", "base",
                  "--log-file", log]
        child = run_child(["copy", str(n)], prefix=prefix)
        # end snippet
        text = read_log(log)
    metrics = read_ncu_csv(text)
    if not metrics:
        lesson.skip("nsight-compute", f"ncu could not profile here (exit "
                    f"{child.returncode}): {(text or child.tail(400))[-400:]}")
        return
    for name in ("Duration", "DRAM Throughput", "Memory Throughput",
                 "Compute (SM) Throughput", "dram__bytes_read.sum",
                 "dram__bytes_write.sum"):
        if name in metrics:
            value, unit = metrics[name]
            print(f"  {name}: {value:,.6g} {unit}")
    dram = metrics.get("DRAM Throughput")
    read = metrics.get("dram__bytes_read.sum")
    lesson.check("ncu-report-read", dram is not None and read is not None,
                 f"DRAM Throughput and dram__bytes_read.sum among {len(metrics)} "
                 "metrics", why="the parser found what the rest of the step reads")
    if dram is None or read is None:
        return
    lesson.check("ncu-dram-reads-are-the-input", abs(read[0] / (4 * n) - 1) < 0.05,
                 f"{read[0]:,.0f} bytes read from DRAM for {4 * n:,} bytes of input",
                 why="the L2 starts empty under ncu, so every input byte comes "
                 "from DRAM once")
    lesson.measured("copy-dram-throughput", dram[0])


def hatchet_kernels(node, name: str) -> list[dict]:
    """The metrics of every leaf frame called `name` in a Proton .hatchet tree.

    The file is JSON: frames, each with its name, its metrics and its
    children; a kernel's launches are a leaf under the scope it ran in.
    """
    found = []
    if isinstance(node, list):
        for item in node:
            found += hatchet_kernels(item, name)
    elif isinstance(node, dict):
        children = node.get("children") or []
        if not children and (node.get("frame") or {}).get("name") == name:
            found.append(node.get("metrics") or {})
        found += hatchet_kernels(children, name)
    return found


def proton(lesson: Lesson, device: str) -> None:
    if device != "cuda":
        lesson.skip("proton", "Proton profiles GPU kernels; this run has no GPU")
        return
    if under_a_sanitizer(lesson, "proton"):
        return
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "copy.hatchet")
        # snippet: proton-run
        # proton.start(...) / proton.finalize() around ten copies, in a child
        # (specimens.py proton); the profile is a JSON tree of frames.
        child = run_child(["proton", path, str(1 << 26)])
        # end snippet
        written = sorted(Path(folder).glob("*.hatchet"))  # Proton adds the suffix
        tree = None
        if child.returncode == 0 and written:
            try:
                tree = json.loads(read_log(str(written[0]), 1 << 22))
            except ValueError as exc:
                child.stderr += f"\n{written[0].name} is not JSON: {exc}"
    if tree is None:
        lesson.skip("proton", f"Proton did not run here (exit {child.returncode}): "
                    f"{child.tail(400)}")
        return
    frames = hatchet_kernels(tree, "copy_kernel")
    count = sum(int(m.get("count", 0)) for m in frames)
    time_ns = sum(float(v) for m in frames for k, v in m.items()
                  if k.startswith("time") and isinstance(v, (int, float)))
    print(f"  copy_kernel: {count} launches, {time_ns / 1e6:.3f} ms in all "
          f"({[k for m in frames[:1] for k in m]})")
    lesson.check("proton-counted-ten-launches", count == 10,
                 f"{count} launches of copy_kernel in the profile")


def main() -> int:
    lesson = Lesson("profiling-debugging")
    device = lesson.device()
    with lesson.step("wrong-stride"):
        wrong_stride(lesson, device)
    with lesson.step("debugger"):
        debugger(lesson, device)
    with lesson.step("out-of-bounds"):
        out_of_bounds(lesson, device)
    with lesson.step("asserts"):
        asserts(lesson, device)
    if lesson.step("compute-sanitizer", needs_gpu="compute-sanitizer watches GPU "
                   "kernels"):
        compute_sanitizer(lesson, device)
    with lesson.step("race-model"):
        race_model(lesson, device)
    with lesson.step("compiled-code"):
        compiled_code(lesson, device)
    if lesson.step("clocks", needs_gpu="timings need a GPU"):
        clocks(lesson, device)
    if lesson.step("nsight-compute", needs_gpu="Nsight Compute profiles GPU kernels"):
        nsight_compute(lesson, device)
    if lesson.step("proton", needs_gpu="Proton profiles GPU kernels"):
        proton(lesson, device)
    return lesson.finish()


if __name__ == "__main__":
    sys.exit(main())
