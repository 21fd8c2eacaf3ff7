"""Run a lesson under compute-sanitizer and write what its four tools found (verify.py --mode sanitize).

One job, in three steps kept apart: the command line (where the tool is, its version, the options of
each tool, the environment: PyTorch's caching allocator off, line info on, one Triton cache per
lesson); the parser (the tool's text log, read bounded, into records, summary counts and the tool's own
lines, per the formats in docs/verification.md); and the record (each tool's run classified, its
findings grouped by kernel and source line, the lesson's kernels first, bounded by core/limits.py).

Each lesson runs once per tool, memcheck first: racecheck, synccheck and initcheck check no memory
accesses, so after memcheck finds errors in the lesson's kernels they are not run; otherwise those three
run at the same time (independent processes, each its own log). The lesson runs as
the kit's untimed run on the GPU (VT_SANITIZE=<tool>): every step, each benchmarked function once.
A tool that cannot check this machine's GPU ("Device not supported") is never recorded as the
lesson's failure: nothing is written, and the run says why. Which findings are the lesson's, and what
they make of its badge, is judge/status.py's job; this module only records.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from verified_triton.core import kit, schema
from verified_triton.core.lessons import Lesson, combined_hash
from verified_triton.core.limits import LIMITS
from verified_triton.judge.evidence import (
    Record,
    SanitizerFinding,
    SanitizerLocation,
    SanitizerRun,
    SanitizerToolRun,
    record_path,
    sanitize_key,
    write_record,
)
from verified_triton.judge.memory import finding_is_lessons, judge_memory, lesson_kernels
from verified_triton.record.capture import Captured, run_bounded
from verified_triton.record.changes import carry_history, finding_changes
from verified_triton.record.machine import Machine
from verified_triton.record.report import terminal_safe
from verified_triton.record.runner import (
    TEMP_PREFIX,
    RunResult,
    _environment,
    _kept,
    _previous,
    classify,
    environment_failure,
    read_results,
)
from verified_triton.record.scrub import scrub_record, scrubber

TOOLS = kit.SANITIZER_TOOLS
ERROR_EXITCODE = 86  # the tool's exit when the lesson exited 0 but it found errors: no kit code, no 124/137/255
# Library kernels that racecheck and synccheck skip: cuBLAS(Lt) on Hopper (nvjet, xmma), CUTLASS, cuDNN. Their
# hazards and barrier reports are not the lesson's and can run to millions (cuDNN's attention backward: 71,480
# synccheck records past the print limit, which left the check incomplete; its barriers overflow the tool's
# table). memcheck and initcheck still check them (an initcheck report in a library can be the lesson's bug:
# a library reading an output the lesson never wrote), and their findings are counted apart from the lesson's.
LIBRARY_KERNELS = ("nvjet", "cublas", "cutlass", "cudnn", "xmma")
SKIPS_LIBRARIES = ("racecheck", "synccheck")
VERSION_TIMEOUT_S = 60
TAIL = 64 * 1024  # the last bytes of a log always read, wherever the head stopped: the summaries are there


# == the command line ===============================================================================

def find_tool() -> str | None:
    """compute-sanitizer: $COMPUTE_SANITIZER, PATH, /usr/local/cuda/bin, then /usr/local/cuda-*/bin (newest)."""
    given = os.environ.get("COMPUTE_SANITIZER")
    if given:
        return str(Path(given).absolute()) if Path(given).is_file() else None
    found = shutil.which("compute-sanitizer")
    if found:
        return str(Path(found).absolute())
    for candidate in ["/usr/local/cuda/bin/compute-sanitizer",
                      *sorted(glob.glob("/usr/local/cuda-*/bin/compute-sanitizer"), reverse=True)]:
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def tool_version(binary: str) -> tuple[str, str]:
    """(its version, e.g. '2025.3.1.0 (build 36400806)', or '' and why it could not be read)."""
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, timeout=VERSION_TIMEOUT_S,
                             stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return "", f"{binary} --version could not be run ({exc})"
    text = out.stdout[:8192].decode("utf-8", "replace")
    match = re.search(r"Version\s+([0-9][^\r\n]{0,80})", text)  # "2025.3.1.0 (build 36400806)"
    if out.returncode != 0 or not match:
        tail = (text + out.stderr[:2000].decode("utf-8", "replace")).strip().splitlines()[-1:]
        return "", f"{binary} --version exited {out.returncode} without a version ({' '.join(tail)[:200]})"
    return match.group(1).strip(), ""


def tool_options(tool: str, log: Path) -> list[str]:
    """The options of one tool's run: a log of its own, bounded, full paths, every process, the lesson's
    later kernels still run after an error in one, and the tool's exit code told apart from the lesson's."""
    options = ["--tool", tool, "--log-file", str(log), "--print-limit", str(LIMITS.sanitizer_print_limit),
               "--strip-paths", "no", "--show-backtrace", "yes", "--num-callers-host", "12",
               "--error-exitcode", str(ERROR_EXITCODE), "--launch-timeout", "120", "--require-cuda-init", "no",
               "--destroy-on-device-error", "kernel", "--target-processes", "all"]
    if tool == "memcheck":
        options += ["--padding", "512"]  # a guard after every allocation: an overflow cannot land in the next
    if tool == "racecheck":
        options += ["--racecheck-report", "analysis"]  # one record per race, not one per byte
    if tool in SKIPS_LIBRARIES:
        for name in LIBRARY_KERNELS:
            options += ["--kernel-name-exclude", f"kns={name}"]
    return options


def sanitize_env(base: dict[str, str], tool: str, triton_cache: Path) -> dict[str, str]:
    """The lesson's environment under a tool: the caching allocator off (it hides an access past a tensor's
    end inside its own segments), no allocator configuration (expandable segments give false reports),
    Triton's line info on, one Triton cache for the lesson's four runs."""
    env = dict(base)
    for name in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "TRITON_DISABLE_LINE_INFO",
                 "TRITON_CACHE_AUTOTUNING", kit.INTERPRET_ENV, kit.SMOKE_ENV):
        env.pop(name, None)
    env.update({"PYTORCH_NO_CUDA_MEMORY_CACHING": "1", "TRITON_CACHE_DIR": str(triton_cache),
                kit.SANITIZE_ENV: tool})
    return env


def shown_command(binary: str, options: list[str], script: str, scratch: Path) -> str:
    """The command line as a person would type it: the launcher left out, the run's scratch folder (its
    log file) written <scratch>."""
    shown = [Path(binary).name if binary.endswith("/compute-sanitizer") else binary,
             *(option.replace(str(scratch), "<scratch>") for option in options), "python", script]
    return " ".join(part if re.fullmatch(r"[\w@%+=:,./<>-]+", part) else repr(part) for part in shown)


# == the parser =====================================================================================

PREFIX = "========="
SUMMARY = re.compile(r"^ERROR SUMMARY: (?P<n>[\d,]+) errors?$")
NOT_PRINTED = re.compile(r"^(?:ERROR SUMMARY: )?(?P<n>[\d,]+) errors? were not printed")
RACE_SUMMARY = re.compile(r"^RACECHECK SUMMARY: (?P<n>[\d,]+) hazards? displayed \((?P<e>[\d,]+) errors?, "
                          r"(?P<w>[\d,]+) warnings?\)$")
LEAK_SUMMARY = re.compile(r"^LEAK SUMMARY: ")
FIRST_LINES = [  # a record's first line, tried in this order
    ("memory-access", re.compile(r"^(?:Potential )?[Ii]nvalid (?P<space>__\w+__) (?P<dir>\S+) of size [\d,]+ bytes?")),
    ("uninitialized", re.compile(r"^Uninitialized (?P<space>__\w+__) memory read of size [\d,]+ bytes?")),
    ("uninitialized", re.compile(r"^Unused __\w+__ memory in allocation")),
    ("uninitialized", re.compile(r"^Host API (?:uninitialized memory access|memory access error)")),
    ("barrier", re.compile(r"^(?:Barrier error detected|Warpgroup MMA sequence error detected)")),
    ("race", re.compile(r"^(?P<sev>[A-Za-z]+): Race reported between (?P<dir>Read|Write) access at (?P<loc>.+?)"
                        r"(?: \[(?P<n>[\d,]+) hazards?\])?$")),
    ("race", re.compile(r"^(?P<sev>[A-Za-z]+):\s*(?:\([^)]*\) )?Potential (?:WAW|WAR|RAW) hazard detected at")),
    ("api", re.compile(r"^(?:Program hit |CUDA API Error)")),
    ("malloc", re.compile(r"^Malloc/Free error encountered")),
    ("leak", re.compile(r"^Leaked [\d,]+ bytes")),
]
INTERNAL = re.compile(r"^Internal Sanitizer Error: (?P<what>.+)$")
APP_ERROR = re.compile(r"^Target application returned an error$")
TARGET = re.compile(r"^(?:Error: )?Target application ")  # "... terminated before first instrumented API call"
TOOL_ERROR = re.compile(r"^Error: (?P<what>.+)$")  # after the race pattern, which also starts "Error:"
COMPUTE_SANITIZER = re.compile(r"^COMPUTE-SANITIZER\b")
AND_ACCESS = re.compile(r"^and (?P<dir>Read|Write) access at (?P<loc>.+?)(?: \[(?P<n>[\d,]+) hazards?\])?$")
THREAD_ACCESS = re.compile(r"^(?P<dir>Read|Write) Thread \([^)]*\) at (?P<loc>.+)$")
AT = re.compile(r"^at (?P<loc>.+)$")
DEVICE_FRAME = re.compile(r"^Device Frame:\s*(?P<loc>.+)$")
HOST_FRAME = re.compile(r"^Host Frame:\s*(?P<loc>.+)$")
DETAIL = re.compile(r"^(?:by thread|Address|Access to|and is|Not written|[0-9]+% of allocation)")
# The tool could not look at this machine's GPU, or was not given a usable command line: no verdict.
UNAVAILABLE = ("Device not supported", "unrecognised option", "unrecognized option", "No attachable process",
               "couldn't find exit code")
# It looked, but not at everything: what it says stays, with this said.
INCOMPLETE = ("Internal Sanitizer Error", "didn't track the launch", "Detected overflow of tracked cuda::barrier",
              "racecheck-num-hazards")


@dataclass
class ParsedRecord:
    kind: str
    message: str
    locations: list[SanitizerLocation] = field(default_factory=list)
    hazards: int = 0
    severity: str = ""
    detail: str = ""
    host_frames: list[str] = field(default_factory=list)  # "file:line" of each host frame, in order


@dataclass
class Report:
    """One tool's log, parsed."""

    records: list[ParsedRecord] = field(default_factory=list)
    errors: int | None = None  # the sum of its ERROR SUMMARY lines; None when there is none
    race: tuple[int, int, int] | None = None  # RACECHECK SUMMARY: (displayed, errors, warnings), summed
    not_printed: int = 0
    notes: list[str] = field(default_factory=list)
    unavailable: str = ""  # the line saying the tool could not run here
    incomplete: str = ""  # the line saying it did not see everything
    app_error: bool = False  # "Target application returned an error"

    @property
    def has_summary(self) -> bool:
        return self.errors is not None or self.race is not None


def _number(text: str | None) -> int:
    return int(text.replace(",", "")) if text else 0


def split_location(where: str) -> SanitizerLocation:
    """'kernel+0xec0 in code/x/y.py:43' (and older forms: '0xda0 in path:175:kernel', 'f() in file:12',
    'f()+0x30 in file:44', a bare '0x...') as the function, the file and the line."""
    where = where.strip()
    head, sep, tail = where.rpartition(" in ")
    func, file, line = where, "", 0
    if sep:
        plain = re.fullmatch(r"(?P<file>.+):(?P<line>[0-9]+)", tail)
        old = re.fullmatch(r"(?P<file>.+?):(?P<line>[0-9]+):(?P<func>.+)", tail)
        if plain:
            func, file, line = head, plain["file"], int(plain["line"])
        elif old and re.fullmatch(r"0x[0-9a-fA-F]+", head.strip()):
            func, file, line = old["func"], old["file"], int(old["line"])
        else:
            func, file = head, tail
    func = re.sub(r"(?:\+0x[0-9a-fA-F]+|\(\):0x[0-9a-fA-F]+|\s*\[0x[0-9a-fA-F]+\])$", "", func.strip())
    func = re.sub(r"^\[clone [^\]]*\]\s*", "", func)
    func = re.sub(r"\(.*\)$", "", func).strip()  # a C++ signature: the name is what a filter and a reader use
    if re.fullmatch(r"0x[0-9a-fA-F]+", func):
        func = ""
    return SanitizerLocation(kernel=func[:LIMITS.name], file=file[:LIMITS.sanitizer_text], line=line)


def parse_log(text: str) -> Report:
    """Every line that starts with the prefix: records (a first line, its detail lines), summaries, and
    the tool's own lines. Anything else is the lesson's output, and ignored."""
    report = Report()
    current: ParsedRecord | None = None
    for raw in text.splitlines():
        if not raw.startswith(PREFIX):
            continue
        rest = raw[len(PREFIX):]
        body = rest.strip()
        indent = len(rest) - len(rest.lstrip(" "))
        if not body:
            current = None  # a bare prefix ends a record
            continue
        if _summary_line(report, body):
            current = None
            continue
        if indent >= 2 and current is not None:
            _detail_line(current, body)
            continue
        if indent >= 2:
            continue
        current = _first_line(report, body)
    return report


def _summary_line(report: Report, body: str) -> bool:
    not_printed = NOT_PRINTED.match(body)
    if not_printed:
        report.not_printed += _number(not_printed["n"])
        return True
    summary = SUMMARY.match(body)
    if summary:
        report.errors = (report.errors or 0) + _number(summary["n"])
        return True
    race = RACE_SUMMARY.match(body)
    if race:
        old = report.race or (0, 0, 0)
        report.race = (old[0] + _number(race["n"]), old[1] + _number(race["e"]), old[2] + _number(race["w"]))
        return True
    return bool(LEAK_SUMMARY.match(body))


def _first_line(report: Report, body: str) -> ParsedRecord | None:
    for marker in UNAVAILABLE:
        if marker in body and not report.unavailable:
            report.unavailable = body[:LIMITS.sanitizer_text]
    for marker in INCOMPLETE:
        if marker in body and not report.incomplete:
            report.incomplete = body[:LIMITS.sanitizer_text]
    for kind, pattern in FIRST_LINES:
        match = pattern.match(body)
        if not match:
            continue
        record = ParsedRecord(kind, body[:LIMITS.sanitizer_text])
        groups = match.groupdict()
        if kind == "race":
            record.severity = groups.get("sev", "").capitalize()
            record.message = f"{record.severity}: race between accesses" if groups.get("loc") else record.message
            if groups.get("loc"):
                loc = split_location(groups["loc"])
                record.locations.append(replace(loc, access=groups["dir"]))
                record.hazards += _number(groups.get("n"))
        elif kind == "memory-access":
            record.message = re.sub(r" of size ([\d,]+) bytes?", r" of size \1 bytes", body)[:LIMITS.sanitizer_text]
        report.records.append(record)
        return record
    if APP_ERROR.match(body):
        report.app_error = True
        return None
    if TARGET.match(body):
        _note(report, body)
        return None
    if COMPUTE_SANITIZER.match(body):
        return None
    if INTERNAL.match(body) or TOOL_ERROR.match(body) or report.unavailable == body[:LIMITS.sanitizer_text]:
        _note(report, body)
        return None
    if body.startswith(("Warning:", "WARNING:")):
        _note(report, body)
        return None
    # Any other first line is a finding of its own: a hardware exception ("Illegal instruction",
    # "Out-of-range shared or local address") or a kind this parser does not know yet.
    record = ParsedRecord("hardware" if _hardware(body) else "other", body[:LIMITS.sanitizer_text])
    report.records.append(record)
    return record


def _hardware(body: str) -> bool:
    return bool(re.search(r"(?i)illegal|misaligned|out-of-range|stack overflow|address", body))


def _note(report: Report, body: str) -> None:
    if len(report.notes) < 20 and body[:LIMITS.sanitizer_text] not in report.notes:
        report.notes.append(body[:LIMITS.sanitizer_text])


def _detail_line(record: ParsedRecord, body: str) -> None:
    partner = AND_ACCESS.match(body)
    if partner:
        if len(record.locations) < 16:
            record.locations.append(replace(split_location(partner["loc"]), access=partner["dir"]))
        record.hazards += _number(partner["n"])
        return
    thread = THREAD_ACCESS.match(body)
    if thread:
        if len(record.locations) < 16:
            record.locations.append(replace(split_location(thread["loc"]), access=thread["dir"]))
        return
    at = AT.match(body)
    if at and not any(loc.access != "frame" for loc in record.locations):
        record.locations.insert(0, split_location(at["loc"]))
        return
    device = DEVICE_FRAME.match(body)
    if device:
        if len(record.locations) < 16:
            record.locations.append(replace(split_location(device["loc"]), access="frame"))
        return
    host = HOST_FRAME.match(body)
    if host:
        loc = split_location(host["loc"])
        if loc.file and len(record.host_frames) < 12:
            frame = f"{loc.file}:{loc.line}" if loc.line else loc.file
            record.host_frames.append(frame[-LIMITS.sanitizer_text:])
        return
    if DETAIL.match(body) and len(record.detail) < LIMITS.sanitizer_text:
        record.detail = (f"{record.detail}; {body}" if record.detail else body)[:LIMITS.sanitizer_text]


def read_log(path: Path) -> tuple[str, int, str]:
    """(the text to parse, the bytes not read, a problem) of a log: its head up to LIMITS.sanitizer_log and
    its last TAIL bytes, never more, never through a link."""
    try:
        if path.is_symlink() or not path.is_file():
            return "", 0, "" if not path.exists() else f"{path.name}: not a plain file"
        size = path.stat().st_size
        with open(path, "rb") as f:
            head = f.read(LIMITS.sanitizer_log)
            tail = b""
            if size > len(head):
                f.seek(max(len(head), size - TAIL))
                tail = f.read(TAIL)
    except OSError as exc:
        return "", 0, f"{path.name}: {exc.strerror}"
    missing = max(0, size - len(head) - len(tail))
    cut = head.rsplit(b"\n", 1)[0] if tail else head  # no half line at the cut
    text = cut.decode("utf-8", "replace")
    if tail:
        text += "\n" + tail.split(b"\n", 1)[-1].decode("utf-8", "replace")
    return text, missing, ""


def kept_log(text: str) -> tuple[str, int]:
    """The log as the record keeps it: its head and tail within LIMITS.sanitizer_log_kept characters."""
    limit = LIMITS.sanitizer_log_kept
    if len(text) <= limit:
        return text, 0
    head, tail = text[: limit * 3 // 4], text[-(limit // 4):]
    omitted = len(text) - len(head) - len(tail)
    return f"{head}\n[... {omitted} characters omitted ...]\n{tail}", omitted


# == one tool's run ==================================================================================

def classify_tool(report: Report, run: Captured, limit: float, stderr_problem: str) -> tuple[str, str]:
    """(state, reason) of one tool's run, failing closed: no summary is never clean."""
    if run.timed_out:
        return "timeout", f"killed after the {limit:.0f} s timeout"
    if report.unavailable or stderr_problem:
        return "unavailable", f"compute-sanitizer could not run here: {report.unavailable or stderr_problem}"
    if not report.has_summary:
        return "inconclusive", (f"no summary line in its log (exit {run.exit_code}); a run without one is "
                                "never read as clean")
    if report.incomplete:
        return "incomplete", f"the tool says it did not see everything: {report.incomplete}"
    race = report.race or (0, 0, 0)
    if (report.errors or 0) + race[1] + race[2] == 0 and not report.records:
        return "clean", ""
    return "findings", ""


def group_findings(records: list[ParsedRecord], project_file) -> list[SanitizerFinding]:
    """Report records with the same kind, message and places as one finding, counted."""
    found: dict[tuple, SanitizerFinding] = {}
    for rec in records:
        places = tuple((loc.access, loc.kernel, loc.file, loc.line) for loc in rec.locations if loc.access != "frame")
        key = (rec.kind, rec.message, places, rec.severity)
        if key in found:
            found[key].records += 1
            found[key].hazards += rec.hazards
            continue
        host = next((frame for frame in rec.host_frames if project_file(frame.rsplit(":", 1)[0])), "")
        found[key] = SanitizerFinding(rec.kind, rec.message, list(rec.locations), 1, rec.hazards, rec.severity,
                                      rec.detail, host)
    return list(found.values())


def tool_run(lesson: Lesson, tool: str, binary: str, work: Path, base_env: dict[str, str], limit: float,
             source_files: dict[str, str], scrub) -> tuple[SanitizerToolRun, Captured, kit.Results | None, str]:
    """Run the lesson under one tool; (its run, what the lesson printed, its results, why they are missing)."""
    log, results_file = work / f"{tool}.log", work / f"results-{tool}.json"
    env = sanitize_env({**base_env, kit.RESULTS_ENV: str(results_file), kit.FIGURES_ENV: str(work / "figures")},
                       tool, work / "triton-cache")
    options = tool_options(tool, log)
    captured = run_bounded(str(lesson.main), lesson.folder, env, limit, prefix=[binary, *options])
    results, problem = read_results(results_file)
    text, missing, log_problem = read_log(log)
    text = scrub(text)
    report = parse_log(text)
    if missing and not report.incomplete:  # what the middle of the log said is not known
        report.incomplete = f"its log passed {LIMITS.sanitizer_log:,} bytes: {missing:,} bytes of it were not read"
    stderr_problem = next((line.strip()[:LIMITS.sanitizer_text] for line in captured.stderr.splitlines()
                           if any(marker in line for marker in UNAVAILABLE[:3])), "")
    state, reason = classify_tool(report, captured, limit, stderr_problem)
    if log_problem and state != "timeout":
        reason = f"{reason}; {log_problem}" if reason else log_problem
    app = _app_run(captured, report)
    app_outcome, app_reason = ("", "") if state == "unavailable" else classify(lesson, "gpu", app, limit, results,
                                                                               problem)
    kernels = lesson_kernels(lesson)

    def project_file(file: str) -> bool:
        return file in source_files or file.startswith("code/")

    findings = group_findings(report.records, project_file)
    findings.sort(key=lambda f: not finding_is_lessons(f, source_files, kernels))  # the lesson's first (stable)
    kept, omitted = findings[:LIMITS.sanitizer_findings], max(0, len(findings) - LIMITS.sanitizer_findings)
    race = report.race or (0, 0, 0)
    stored, log_omitted = kept_log(text)
    notes = list(report.notes)
    if report.not_printed:
        notes.insert(0, f"{report.not_printed:,} records were not printed (over --print-limit "
                        f"{LIMITS.sanitizer_print_limit}); the summary counts them")
    run = SanitizerToolRun(
        tool=tool, state=state, reason=reason[:LIMITS.string], command=scrub(shown_command(
            binary, options, lesson.relative(lesson.main), work)),
        exit_code=None if captured.timed_out else captured.exit_code, wall_s=round(captured.wall_s, 2),
        app_outcome=app_outcome, app_reason=scrub(app_reason)[:LIMITS.string],
        errors=(report.errors or 0) + race[1], warnings=race[2], not_printed=report.not_printed,
        findings=kept if state != "unavailable" else [], findings_omitted=omitted if state != "unavailable" else 0,
        notes=notes[:20], log=stored, log_omitted=log_omitted)
    if state == "unavailable":
        run.errors = run.warnings = run.not_printed = 0
    return run, app, results, problem


def _app_run(captured: Captured, report: Report) -> Captured:
    """The lesson's own run as runner.classify reads it: the tool's exit code for errors found after the
    lesson exited 0 is the lesson's 0."""
    if captured.exit_code == ERROR_EXITCODE:
        return replace(captured, exit_code=kit.EXIT_PASSED)
    return captured


def not_run(tool: str, reason: str) -> SanitizerToolRun:
    return SanitizerToolRun(tool=tool, state="not-run", reason=reason)


# == one lesson ======================================================================================

def run_sanitize_lesson(lesson: Lesson, mode: str, machine: Machine, evidence_dir: Path, timeout: float | None,
                        gpu: int | None = None, force: bool = False, report=print) -> RunResult:
    """The lesson under each tool in turn, and its sanitize record (plan.execute calls it as run_lesson).

    Nothing is written when memcheck could not run (the tool cannot check this GPU), nor when the
    record here is a complete one for this source and this run is not (a timeout, no summary), unless
    `force`: a run never erases better evidence than it makes.
    """
    spec = lesson.sanitize
    limit = timeout or spec.timeout
    device = machine.gpu(gpu)
    binary = find_tool()
    if binary is None:
        return RunResult(lesson, mode, None, "not run: compute-sanitizer not found", gpu=gpu, written=False)
    version, problem = tool_version(binary)
    if problem:
        return RunResult(lesson, mode, None, f"not run: {problem}", gpu=gpu, written=False)
    work = Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{os.getpid()}-{lesson.name}-sanitize-"))
    try:
        base = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONIOENCODING="utf-8", MPLBACKEND="Agg")
        if device is not None and gpu is not None:
            base["CUDA_VISIBLE_DEVICES"] = str(device.index)
        scrub = scrubber(lesson.root)
        started = datetime.now(UTC)
        source_files = lesson.source_file_hashes()
        kernels = lesson_kernels(lesson)
        def one_tool(tool: str) -> SanitizerToolRun:
            t0 = time.monotonic()
            run, captured, results, problem = tool_run(lesson, tool, binary, work, base, limit, source_files, scrub)
            report(f"    {lesson.name} [sanitize] {tool}: {_progress(run, source_files, kernels)} "
                   f"in {time.monotonic() - t0:.1f} s")
            if tool == "memcheck":
                first.append((captured, results, problem))
            return run

        first: list[tuple[Captured, kit.Results | None, str]] = []
        memcheck = one_tool(TOOLS[0])
        if memcheck.state == "unavailable":
            return RunResult(lesson, mode, None, f"not recorded: {memcheck.reason}", gpu=gpu, written=False)
        stop = _stop_after_memcheck(memcheck, source_files, kernels)
        # The other tools are independent processes with logs of their own: they run at the same time, so a
        # lesson's check takes its slowest tool's time, not the sum (each is still bounded by `limit`).
        rest = TOOLS[1:]
        if stop:
            others = [not_run(tool, stop) for tool in rest]
        else:
            with ThreadPoolExecutor(max_workers=len(rest)) as pool:
                others = list(pool.map(one_tool, rest))
        runs = [memcheck, *others]
        captured, results, problem = first[0]
        app = _app_run(captured, Report())
        outcome, reason = classify(lesson, "gpu", app, limit, results, problem)
        environment = environment_failure(app.exit_code, captured.stderr, lesson.root)
        if outcome == "failed" and environment and app.exit_code != kit.EXIT_CANNOT_RUN:
            reason = f"this machine could not run it ({environment})"
        env_now = _environment("sanitize", machine, device, results)
        record = Record(
            lesson=lesson.name, mode="sanitize", key=sanitize_key(env_now.device_name), outcome=outcome,
            exit_code=app.exit_code, started_utc=started.strftime(schema.UTC_FORMAT),
            wall_s=round(runs[0].wall_s + max((r.wall_s for r in runs[1:]), default=0.0), 2), command=runs[0].command,
            source_hash=combined_hash(source_files), source_files=source_files, env=env_now,
            stdout=captured.stdout, stderr=captured.stderr, stdout_omitted=captured.stdout_omitted,
            stderr_omitted=captured.stderr_omitted, reason=reason[:LIMITS.string],
            checks=results.checks if results else [], skipped_parts=results.skipped_parts if results else [],
            steps=results.steps if results else [], filtered_warnings=results.filtered_warnings if results else [],
            sanitizer=SanitizerRun(version=version, size="gpu" if spec.size == "gpu" else "smoke", runs=runs,
                                   known=list(results.sanitizer_known) if results else []),
        )
        scrub_record(record, scrub)
        path = record_path(evidence_dir, lesson.name, record.key)
        previous = _previous(path, evidence_dir)
        kept = _kept(lesson, record, previous, environment, force) or _less_complete(record, previous, force)
        if kept:
            return RunResult(lesson, mode, record, kept, gpu=gpu, written=False)
        carry_history(record, previous)
        write_record(evidence_dir, record)
        return RunResult(lesson, mode, record, gpu=gpu, changes=tuple(finding_changes(record, previous)))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _progress(run: SanitizerToolRun, source_files: dict[str, str], kernels: frozenset[str]) -> str:
    if run.state in ("clean", "not-run"):
        return run.state if run.state == "clean" else f"not run ({terminal_safe(run.reason)})"
    mine = [f for f in run.findings if finding_is_lessons(f, source_files, kernels)]
    counts = f"{run.errors:,} errors" + (f", {run.warnings:,} warnings" if run.warnings else "")
    text = f"{run.state}, {counts}, {len(mine)} finding(s) in the lesson's kernels"
    if mine:
        where = mine[0].locations[0] if mine[0].locations else None
        text += f" (first: {mine[0].kernel or 'a kernel'}" + (f" at {where.file}:{where.line}" if where and where.file
                                                               else "") + ")"
    return text + (f"; {terminal_safe(run.reason)}" if run.reason else "")


def _stop_after_memcheck(run: SanitizerToolRun, source_files: dict[str, str], kernels: frozenset[str]) -> str:
    """Why the other tools are not run after this memcheck run ('' when they are)."""
    if run.app_outcome == "by-design":
        return "the lesson declined by design under memcheck"
    if run.state == "timeout":
        return ("memcheck timed out, and the other tools are no faster; give [sanitize] timeout more time, or the "
                "lesson smaller inputs there")
    if any(finding_is_lessons(f, source_files, kernels) for f in run.findings if f.kind != "api"):
        return ("memcheck found errors in the lesson's kernels; racecheck, synccheck and initcheck check no memory "
                "accesses, so they run once those are fixed")
    return ""


COMPLETE = ("clean", "findings")


def _less_complete(new: Record, previous: Record | None, force: bool) -> str:
    """Why `new` must not replace `previous`: a record of the same source whose every tool ran to its summary,
    against one where some did not."""
    if force or previous is None or previous.sanitizer is None or previous.source_hash != new.source_hash:
        return ""
    if all(r.state in COMPLETE for r in previous.sanitizer.runs) and len(previous.sanitizer.runs) == len(TOOLS):
        short = [f"{r.tool} {r.state}" for r in new.sanitizer.runs if r.state not in COMPLETE and r.state != "not-run"]
        if short:
            return (f"not recorded: this run did not complete ({', '.join(short)}); the record here ({previous.date}) "
                    "saw everything and stays. Run again with --force to record it anyway")
    return ""


# == the summary ======================================================================================

def print_sanitize_summary(results: list[RunResult], lessons: dict[str, Lesson]) -> None:
    """One line per lesson (its memory check, judged), then the tools' time and what needs a look."""
    results = sorted(results, key=lambda r: (r.lesson.order, r.lesson.name))
    ran = [r for r in results if r.mode == "sanitize" and r.record is not None and r.record.sanitizer]
    if not ran and not any(r.mode == "sanitize" for r in results):
        return
    print("\nmemory check (compute-sanitizer)")
    per_tool: dict[str, float] = {}
    for r in ran:
        check = judge_memory(lessons[r.lesson.name], r.record)
        note = "" if r.written else f"  [{terminal_safe(r.skipped)}]"
        print(f"{r.lesson.name:<30} {check.state:<10} {terminal_safe(check.line)}{note}")
        for tool_run_ in r.record.sanitizer.runs:
            per_tool[tool_run_.tool] = per_tool.get(tool_run_.tool, 0.0) + tool_run_.wall_s
    for r in results:
        if r.mode == "sanitize" and r.record is None:
            print(f"{r.lesson.name:<30} {'-':<10} {terminal_safe(r.skipped)}")
    if per_tool:
        total = sum(per_tool.values())
        print(f"sanitize: {len(ran)} lesson{'s' * (len(ran) != 1)}, {total:.0f} s of tool runs ("
              + ", ".join(f"{tool} {per_tool[tool]:.0f} s" for tool in TOOLS if tool in per_tool) + ")")
