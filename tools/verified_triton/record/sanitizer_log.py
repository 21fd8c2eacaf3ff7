"""compute-sanitizer's text log, read bounded and parsed into records, summary counts and the tool's lines.

One job, the second of the memory check's three (the command line in sanitizer_command.py, this, and the
record in sanitizer.py): every line that starts with the tool's prefix, per the formats in
docs/verification.md; anything else in a log is the lesson's output, and ignored. The log is read through
no link, its head up to LIMITS.sanitizer_log and its tail (where the summaries are) always.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from verified_triton.core.limits import LIMITS
from verified_triton.judge.evidence import INCOMPLETE_MARKERS, SanitizerLocation

TAIL = 64 * 1024  # the last bytes of a log always read, wherever the head stopped: the summaries are there
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
# It looked, but not at everything: what it says stays, with this said (the evidence format's markers).
INCOMPLETE = INCOMPLETE_MARKERS


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
