"""The evidence format: one JSON record per lesson, per mode, per GPU model.

One job: define the record, write it so that a crash never leaves a record
pointing at figures it did not write, and read it back through the schema.
`verify.py` writes records, `status.py` judges them and the directives show
them; this module is the only place that knows the layout:

    evidence/<lesson>/<key>.json          key = "interpreter", "gpu-<gpu-slug>" or "sanitize-gpu-<gpu-slug>"
    evidence/<lesson>/<key>/<name>-<sha>.png   figures that run saved

A sanitize record (mode "sanitize") is the lesson's run under compute-sanitizer
on one GPU model: its top-level fields are the lesson's own run under
memcheck, and `sanitizer` holds each tool's run (its command line, exit code,
summary counts, findings and a bounded copy of its log) and the findings the
lesson declared harmless (record/sanitizer.py writes it, memory.py judges it).

A figure's file name carries the first 12 hex digits of its SHA-256, so a new
recording never overwrites a file an older record names, and the name is
checked against the bytes wherever a figure is written or read: a file whose
bytes do not match its name is replaced by the right bytes when a record
naming it is written, and refused when it is read for the site or a bundle.
The JSON is written last, atomically: it is the moment a recording takes
effect. Figures no record names any more are removed after that, never before.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

from verified_triton.core import schema
from verified_triton.core.kit import (
    DECLARABLE_TOOLS,
    SANITIZER_TOOLS,
    STEP_NAME,
    UNITS,
    Benchmark,
    Check,
    Figure,
    FilteredWarning,
    KnownFinding,
    Prediction,
    SkippedPart,
    Step,
    Table,
)
from verified_triton.core.limits import LIMITS
from verified_triton.core.safefs import UnsafePathError, read_bytes, walk_files

FORMAT_VERSION = 2
OUTCOMES = ("passed", "failed", "timeout", "crashed", "by-design")
FAILED_OUTCOMES = ("failed", "timeout", "crashed")
MODES = ("interpreter", "gpu", "sanitize")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
EXERCISES_RECORD = "exercises.json"  # beside the records: the exercises' proof (judge/exercises.py), no run record
SANITIZE_KEY = re.compile(r"\Asanitize-gpu-[a-z0-9]+(?:-[a-z0-9]+)*\Z")
# What became of one tool's run: its summary said nothing (clean) or something (findings); it
# stopped short of seeing everything (incomplete: an internal error, dropped hazards); no summary
# (inconclusive: never read as clean); killed at the time limit; the tool could not check this GPU
# (unavailable); or it was not started (not-run, with the reason).
TOOL_STATES = ("clean", "findings", "incomplete", "inconclusive", "timeout", "unavailable", "not-run")
UNFINISHED = ("incomplete", "inconclusive", "timeout")  # a tool that ran but did not see everything
# What a tool says when it looked, but not at everything (its own words, in a tool run's reason): how a run
# "fails the same way" as its reproducer is told (failure_kind).
INCOMPLETE_MARKERS = ("Internal Sanitizer Error", "didn't track the launch",
                      "Detected overflow of tracked cuda::barrier", "racecheck-num-hazards")
FINDING_KINDS = ("memory-access", "uninitialized", "race", "barrier", "hardware", "api", "malloc", "leak", "other")


class EvidenceError(Exception):
    """An evidence file that cannot be used, naming the file (and field) at fault."""


@dataclass
class Environment:
    python: str = ""
    torch: str = ""
    triton: str = ""
    platform: str = ""
    device_name: str = ""  # "CPU" for interpreter runs
    capability: str = ""
    driver: str = ""
    cuda: str = ""
    baselines: dict[str, str] = field(default_factory=dict)  # optional baseline libraries: pip name -> version


@dataclass
class HistoryPoint:
    """An earlier recording of one benchmark (same lesson, mode and GPU model)."""

    started_utc: str
    source_hash: str
    triton: str
    ratio: float
    ratio_low: float
    ratio_high: float


@dataclass
class SanitizerLocation:
    """One place a report names: the function there, and its source file and line."""

    kernel: str  # the function ("" when the report names none)
    file: str  # code/<lesson>/x.py for the project's files, scrubbed otherwise (<site-packages>/...); "" unknown
    line: int = 0  # 0 when unknown
    access: str = ""  # a race's access (Read, Write) or memcheck's direction (read, write, atomic)


@dataclass
class SanitizerFinding:
    """Report records of one tool with the same kind, message and places, counted as one finding."""

    kind: Literal["memory-access", "uninitialized", "race", "barrier", "hardware", "api", "malloc", "leak",
                  "other"]
    message: str  # the record's first line: "Invalid __global__ write of size 4 bytes"
    locations: list[SanitizerLocation] = field(default_factory=list)  # the faulting place; a race's accesses
    records: int = 1  # report records with this key
    hazards: int = 0  # racecheck: the sum of their [N hazards]
    severity: str = ""  # racecheck: Error or Warning
    detail: str = ""  # the first record's thread, block, address and nearest allocation
    host_frame: str = ""  # the first host frame in the project's files: the Python line that launched it

    @property
    def kernel(self) -> str:
        return next((loc.kernel for loc in self.locations if loc.kernel), "")


@dataclass
class SanitizerToolRun:
    """One compute-sanitizer tool over the whole lesson, in its own process."""

    tool: Literal["memcheck", "synccheck", "initcheck", "racecheck"]
    state: Literal["clean", "findings", "incomplete", "inconclusive", "timeout", "unavailable", "not-run"]
    reason: str = ""  # why it is not clean or findings, in words
    command: str = ""  # the exact command line (this machine's paths scrubbed)
    exit_code: int | None = None  # compute-sanitizer's; None when killed at the time limit
    wall_s: float = 0.0
    app_outcome: str = ""  # the lesson's own run under this tool, as runner.classify says ("" not run)
    app_reason: str = ""
    errors: int = 0  # the summaries' count (ERROR SUMMARY; racecheck: the errors of RACECHECK SUMMARY)
    warnings: int = 0  # racecheck's warnings
    not_printed: int = 0  # records past --print-limit: counted in `errors`, not in the log
    findings: list[SanitizerFinding] = field(default_factory=list)  # the lesson's kernels' first
    findings_omitted: int = 0  # distinct findings past LIMITS.sanitizer_findings
    notes: list[str] = field(default_factory=list)  # the tool's own lines worth knowing (internal errors...)
    log: str = ""  # the log, head and tail, scrubbed
    log_omitted: int = 0  # bytes cut from its middle


@dataclass
class SanitizerReproducer:
    """A tool the lesson declares unable to finish or analyse some of its kernels ([[sanitize.not_applicable]]),
    and its minimal reproducer run under that tool, as the recording ran it."""

    tool: Literal["memcheck", "synccheck", "initcheck", "racecheck"]
    kernels: list[str]  # the lesson's kernels it names, exactly
    file: str  # code/<lesson>/<reproducer>.py
    why: str
    run: SanitizerToolRun  # the reproducer under the tool


@dataclass
class SanitizerRun:
    """What a sanitize record adds: the tool, each run, and the lesson's declarations."""

    version: str  # compute-sanitizer --version's version line
    size: Literal["smoke", "gpu"]  # the inputs lesson.size() picked ([sanitize] size)
    runs: list[SanitizerToolRun] = field(default_factory=list)  # in SANITIZER_TOOLS order
    known: list[KnownFinding] = field(default_factory=list)  # lesson.sanitizer_known, as the kit recorded it
    reproducers: list[SanitizerReproducer] = field(default_factory=list)  # added in round 4: older records have none


def failure_kind(run: SanitizerToolRun) -> str:
    """How a tool run did not finish, for telling whether two runs fail the same way: its state, and for an
    incomplete one the tool's own words that said so ('' for a run that finished)."""
    if run.state not in UNFINISHED:
        return ""
    marker = next((m for m in INCOMPLETE_MARKERS if m in run.reason), "") if run.state == "incomplete" else ""
    return f"{run.state}: {marker}" if marker else run.state


@dataclass
class Record:
    lesson: str
    mode: str  # one of MODES
    key: str  # file stem: interpreter | gpu-<slug>
    outcome: str  # one of OUTCOMES
    exit_code: int | None
    started_utc: str  # ISO 8601, seconds, with Z
    wall_s: float
    command: str
    source_hash: str
    source_files: dict[str, str]  # relative path -> sha256
    env: Environment
    stdout: str = ""
    stderr: str = ""
    stdout_omitted: int = 0  # bytes cut from the middle, 0 when complete
    stderr_omitted: int = 0
    reason: str = ""  # why it failed, timed out or declined, in words
    checks: list[Check] = field(default_factory=list)
    benchmarks: list[Benchmark] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    skipped_parts: list[SkippedPart] = field(default_factory=list)  # parts the interpreter cannot run
    history: dict[str, list[HistoryPoint]] = field(default_factory=dict)  # benchmark name -> earlier results
    steps: list[Step] = field(default_factory=list)  # main()'s named steps, in order, with what each printed
    format_version: int = FORMAT_VERSION
    predictions: list[Prediction] = field(default_factory=list)  # what the lesson expected before it measured
    filtered_warnings: list[FilteredWarning] = field(default_factory=list)  # expected warnings, counted
    sanitizer: SanitizerRun | None = None  # mode "sanitize" only

    @property
    def date(self) -> str:
        return self.started_utc[:10]

    @property
    def failed(self) -> bool:
        return self.outcome in FAILED_OUTCOMES

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, ensure_ascii=False, allow_nan=False) + "\n"


def gpu_key(device_name: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", device_name.lower()).strip("-")[:60].strip("-") or "unknown"
    return f"gpu-{slug}"


def sanitize_key(device_name: str) -> str:
    """The key of a record under compute-sanitizer, beside the GPU record of the same model."""
    return f"sanitize-{gpu_key(device_name)}"


# -- reading -------------------------------------------------------------------

def parse_json(data: bytes, where: str):
    """JSON that refuses NaN and infinities (Python's json would accept them)."""
    def refuse(name: str):
        raise ValueError(f"{name} is not allowed")
    try:
        return json.loads(data.decode("utf-8"), parse_constant=refuse)
    except UnicodeDecodeError:
        raise EvidenceError(f"{where}: not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise EvidenceError(f"{where}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    except (ValueError, RecursionError) as exc:
        raise EvidenceError(f"{where}: not valid JSON ({exc})") from None


def json_object(raw, where: str) -> dict:
    """`raw` if it is a JSON object; EvidenceError naming `where` otherwise."""
    if not isinstance(raw, dict):
        raise EvidenceError(f"{where}: expected a JSON object, found {type(raw).__name__}")
    return raw


def load_checked(cls, raw: dict, where: str, rules):
    """An instance of `cls` from a JSON object: the schema, then its value `rules`; EvidenceError naming `where`
    and the field."""
    try:
        value = schema.load(cls, raw)
        rules(value)
    except schema.SchemaError as exc:
        raise EvidenceError(f"{where}: {exc}; re-record it") from None
    return value


def read_json(path: Path, limit: int, root: Path | None = None):
    """A JSON file's content, read bounded and through no link, or EvidenceError naming it."""
    try:
        data = read_bytes(path, limit, root)
    except UnsafePathError as exc:
        raise EvidenceError(str(exc)) from None
    return parse_json(data, str(path))


def record_from_json(raw, where: str) -> Record:
    """A Record from parsed JSON: the schema, then the value rules; EvidenceError naming `where` and the field."""
    raw = json_object(raw, where)
    version = raw.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise EvidenceError(f"{where}: no format_version; not an evidence record (re-record it)")
    if version > FORMAT_VERSION:
        raise EvidenceError(f"{where}: written in evidence format {version}, newer than the {FORMAT_VERSION} "
                            "this checkout reads; update the tools")
    if version < FORMAT_VERSION:
        raw = _upgrade(raw, version, where)
    return load_checked(Record, raw, where, _value_rules)


def read_record(path: Path, root: Path | None = None) -> Record:
    """Read one record from disk, bounded and through no link, or raise EvidenceError."""
    return record_from_json(read_json(path, LIMITS.record_json, root), str(path))


STAMP_RULE = "expected YYYY-MM-DDTHH:MM:SSZ (a real UTC date and time in ASCII digits, nothing after the Z)"


def _value_rules(r: Record) -> None:
    req = schema.require
    req(schema.LESSON_NAME.match(r.lesson) is not None, "lesson", f"{r.lesson[:60]!r} is not a lesson name")
    req(r.mode in MODES, "mode", f"{r.mode[:30]!r} is not one of {', '.join(MODES)}")
    req(r.outcome in OUTCOMES, "outcome", f"{r.outcome[:30]!r} is not one of {', '.join(OUTCOMES)}")
    if r.mode == "interpreter":
        req(r.key == "interpreter", "key", "an interpreter record's key is 'interpreter'")
    elif r.mode == "sanitize":
        req(SANITIZE_KEY.match(r.key) is not None and len(r.key) <= 73, "key",
            f"{r.key[:80]!r} is not a sanitize key (sanitize-gpu-<slug>)")
        req(r.key == sanitize_key(r.env.device_name), "key", f"{r.key!r}, but its device "
            f"{r.env.device_name[:60]!r} names it {sanitize_key(r.env.device_name)!r} (a key is derived, never "
            "chosen)")
    else:
        req(schema.GPU_KEY.match(r.key) is not None and len(r.key) <= 64, "key",
            f"{r.key[:60]!r} is not a GPU key (gpu-<slug>)")
        req(r.key == gpu_key(r.env.device_name), "key", f"{r.key!r}, but its device {r.env.device_name[:60]!r} "
            f"names it {gpu_key(r.env.device_name)!r} (a GPU record's key is derived, never chosen)")
    req((r.mode == "sanitize") == (r.sanitizer is not None), "sanitizer",
        "a sanitize record holds its tools' runs, and only a sanitize record does")
    if r.sanitizer is not None:
        _sanitizer_rules(r.sanitizer)
    req(schema.utc_stamp(r.started_utc) is not None, "started_utc", STAMP_RULE)
    req(schema.SHA256.match(r.source_hash) is not None, "source_hash", "expected 64 hex digits")
    for rel, sha in r.source_files.items():
        req(schema.REL_PATH.match(rel) is not None, "source_files", f"{rel[:60]!r} is not a relative path")
        req(schema.SHA256.match(sha) is not None, f"source_files.{rel[:60]}", "expected 64 hex digits")
    req(r.wall_s >= 0, "wall_s", "negative")
    for package, version in r.env.baselines.items():
        req(schema.PACKAGE.match(package) is not None and schema.PACKAGE.match(version) is not None,
            f"env.baselines.{package[:60]}", "expected a package name and its version ([A-Za-z0-9._+-])")
    for i, check in enumerate(r.checks):
        _name_rule(check.name, f"checks[{i}].name")
    for i, b in enumerate(r.benchmarks):
        where = f"benchmarks[{i}]"
        _name_rule(b.name, f"{where}.name")
        req(b.unit in UNITS, f"{where}.unit", f"{b.unit[:20]!r} is not {', '.join(UNITS[:-1])} or {UNITS[-1]}")
        req(b.samples >= 1, f"{where}.samples", "at least one round")
        req(b.ratio_low <= b.ratio <= b.ratio_high, f"{where}.ratio", "outside its own interval")
    for i, table in enumerate(r.tables):
        _name_rule(table.name, f"tables[{i}].name")
    names = set()
    for i, fig in enumerate(r.figures):
        where = f"figures[{i}]"
        _name_rule(fig.name, f"{where}.name")
        for attr in ("file", "dark_file"):
            value = getattr(fig, attr)
            if attr == "dark_file" and not value:
                continue
            req(schema.FIGURE_FILE.match(value) is not None, f"{where}.{attr}",
                f"{value[:60]!r} is not a plain PNG file name ([A-Za-z0-9._-], ending .png)")
            req(value not in names, f"{where}.{attr}", "names a file another figure names")
            names.add(value)
    seen = set()
    for i, p in enumerate(r.predictions):
        where = f"predictions[{i}]"
        _name_rule(p.name, f"{where}.name")
        req(p.name not in seen, f"{where}.name", "a second prediction of that name")
        seen.add(p.name)
        req(p.value != 0, f"{where}.value", "a prediction of 0 has no relative gap")
        req(0 < p.tolerance < 10, f"{where}.tolerance", "a relative tolerance, above 0")
        req((p.quantity == "value") == (not p.of), f"{where}.of",
            "names the benchmark predicted, except for quantity 'value'")
    _step_rules(r)
    for name, points in r.history.items():
        _name_rule(name, f"history.{name[:60]}")
        for j, p in enumerate(points):
            req(schema.utc_stamp(p.started_utc) is not None, f"history.{name[:60]}[{j}].started_utc", STAMP_RULE)


def _sanitizer_rules(s: SanitizerRun) -> None:
    """Each tool once, in order; counts not negative; a state its counts bear out; declarations that
    name a tool that may be declared and lines that exist."""
    req = schema.require
    tools = [run.tool for run in s.runs]
    req(tools == [t for t in SANITIZER_TOOLS if t in tools], "sanitizer.runs",
        f"each tool once, in the order {', '.join(SANITIZER_TOOLS)}")
    for i, run in enumerate(s.runs):
        where = f"sanitizer.runs[{i}]"
        for name in ("errors", "warnings", "not_printed", "findings_omitted", "log_omitted"):
            req(getattr(run, name) >= 0, f"{where}.{name}", "negative")
        req(run.wall_s >= 0, f"{where}.wall_s", "negative")
        req(run.app_outcome in ("", *OUTCOMES), f"{where}.app_outcome",
            f"{run.app_outcome[:30]!r} is not one of {', '.join(OUTCOMES)} (or empty: not run)")
        found = bool(run.findings) or run.errors > 0 or run.warnings > 0 or run.findings_omitted > 0
        if run.state == "clean":
            req(not found and run.not_printed == 0, f"{where}.state", "clean, but it has findings or counts")
        elif run.state == "findings":
            req(found, f"{where}.state", "findings, but it holds none and counts none")
        elif run.state in ("not-run", "unavailable"):
            req(not found and run.reason != "", f"{where}.state", f"{run.state}: no findings, and the reason why")
        for j, f in enumerate(run.findings):
            at = f"{where}.findings[{j}]"
            req(f.records >= 1 and f.hazards >= 0, f"{at}.records", "at least one record, hazards not negative")
            for k, loc in enumerate(f.locations):
                req(loc.line >= 0, f"{at}.locations[{k}].line", "negative")
                req(loc.file.isprintable() and loc.kernel.isprintable(), f"{at}.locations[{k}]",
                    "a file and a kernel are printable text")
    for i, repro in enumerate(s.reproducers):
        where = f"sanitizer.reproducers[{i}]"
        req(repro.run.tool == repro.tool, f"{where}.run.tool", "the reproducer runs under the tool it declares")
        req(bool(repro.kernels) and all(k.isidentifier() for k in repro.kernels), f"{where}.kernels",
            "the lesson's kernels, by name")
        req(schema.REL_PATH.match(repro.file) is not None and repro.file.endswith(".py"), f"{where}.file",
            "a relative path to a .py file")
        req(bool(repro.why.strip()), f"{where}.why", "says why")
    for i, known in enumerate(s.known):
        where = f"sanitizer.known[{i}]"
        req(known.tool in DECLARABLE_TOOLS, f"{where}.tool", f"only {' and '.join(DECLARABLE_TOOLS)} findings are "
            "declared")
        req(known.kernel.isidentifier(), f"{where}.kernel", "a kernel's name")
        req(bool(known.lines) and bool(known.why.strip()), where, "names the lines and says why")
        for j, span in enumerate(known.lines):
            req(schema.REL_PATH.match(span.file) is not None and 1 <= span.first <= span.last,
                f"{where}.lines[{j}]", "a relative path and lines first <= last, from 1")


def _step_rules(r: Record) -> None:
    """Steps have a page's `::step NAME` names, once each; every result names a recorded step or none."""
    names = set()
    for i, step in enumerate(r.steps):
        schema.require(STEP_NAME.match(step.name) is not None, f"steps[{i}].name",
                       f"{step.name[:60]!r} is not a step name (lower-case letters, digits and '-')")
        schema.require(step.name not in names, f"steps[{i}].name", f"step {step.name!r} recorded twice")
        names.add(step.name)
    for kind in ("checks", "benchmarks", "tables", "figures"):
        for i, item in enumerate(getattr(r, kind)):
            schema.require(not item.step or item.step in names, f"{kind}[{i}].step",
                           f"{item.step[:60]!r} is not a recorded step")


def _name_rule(name: str, where: str) -> None:
    schema.require(bool(name) and name.isprintable() and "/" not in name, where,
                   "a name is printable text without '/'")


def _upgrade(raw: dict, version: int, where: str) -> dict:
    """Bring a format 1 record to format 2 (benchmarks gained intervals; figures lost their folder prefix)."""
    if version != 1:
        raise EvidenceError(f"{where}: evidence format {version} is too old to read; re-record it")
    raw = dict(raw)
    benches = []
    for b in raw.get("benchmarks") or []:
        if not isinstance(b, dict):
            benches.append(b)
            continue
        ratio = b.get("ratio")
        benches.append({
            "name": b.get("name"), "label": b.get("name"), "unit": b.get("unit"), "measured": b.get("measured"),
            "baseline": b.get("baseline"), "baseline_name": b.get("baseline_name", ""), "ratio": ratio,
            "ratio_low": ratio, "ratio_high": ratio, "samples": 1, "threshold": b.get("threshold"),
            "gate": b.get("gate", True), "verdict": _old_verdict(b.get("met")), "stretch": b.get("stretch"),
            "stretch_verdict": _old_verdict(b.get("stretch_met")), "note": b.get("note", ""),
            "method": "format 1: one median, no interval"})
    raw["benchmarks"] = benches
    figures = []
    for f in raw.get("figures") or []:
        if isinstance(f, dict) and isinstance(f.get("file"), str):
            f = {**f, "file": f["file"].rsplit("/", 1)[-1]}
        figures.append(f)
    raw["figures"] = figures
    raw["skipped_parts"] = [{"part": p.get("part", ""), "reason": p.get("reason", "")} if isinstance(p, dict) else p
                            for p in raw.get("skipped_parts") or []]
    raw["format_version"] = FORMAT_VERSION
    return raw


def _old_verdict(met):
    return None if met is None else ("met" if met else "not met")


# -- files -----------------------------------------------------------------------

def record_path(evidence_dir: Path, lesson: str, key: str) -> Path:
    return evidence_dir / lesson / f"{key}.json"


def figures_dir(evidence_dir: Path, lesson: str, key: str) -> Path:
    return evidence_dir / lesson / key


def figure_files(record: Record) -> list[str]:
    """Every file the record's figures name: each light variant, then its dark one when there is one."""
    return [file for fig in record.figures for file in (fig.file, fig.dark_file) if file]


def figure_path(evidence_dir: Path, record: Record, file: str) -> Path:
    return figures_dir(evidence_dir, record.lesson, record.key) / file


def read_figure(evidence_dir: Path, record: Record, file: str) -> bytes:
    """A figure's bytes, checked: a plain file in its record's folder, within the size limit, a PNG."""
    path = figure_path(evidence_dir, record, file)
    try:
        data = read_bytes(path, LIMITS.figure, evidence_dir)
    except UnsafePathError as exc:
        raise EvidenceError(f"{record_path(evidence_dir, record.lesson, record.key)}: figure {file}: {exc}") from None
    if not data.startswith(PNG_MAGIC):
        raise EvidenceError(f"{path}: not a PNG file (wrong magic bytes)")
    mismatch = figure_mismatch(file, data)
    if mismatch:
        raise EvidenceError(f"{path}: {mismatch}; the file was changed after it was recorded, so it is not "
                            "published (import or record the lesson again)")
    return data


def hashed_name(stem: str, data: bytes) -> str:
    """name-<12 hex>.png: a name that changes whenever the picture does."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip(".-")[:100] or "figure"
    return f"{stem}-{_sha12(data)}.png"


FIGURE_HASH = re.compile(r"-(?P<sha>[0-9a-f]{12})\.png\Z")


def _sha12(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:12]


def figure_mismatch(file: str, data: bytes) -> str:
    """Why `data` is not the figure `file` names ('' when its name carries the hash of these very bytes)."""
    match = FIGURE_HASH.search(file)
    if match is None:
        return "its name carries no content hash (<name>-<12 hex digits of its SHA-256>.png)"
    if match["sha"] != _sha12(data):
        return f"its bytes hash to {_sha12(data)}, which does not match the {match['sha']} its name carries"
    return ""


def write_record(evidence_dir: Path, record: Record, figure_data: dict[str, bytes] | None = None) -> Path:
    """Write a record with its figures: figures first (new names only), the JSON last, old figures after.

    `figure_data` maps each file name the record's figures use to its bytes.
    A crash at any point leaves the previous record whole and its figures
    in place, or the new one whole.
    """
    figure_data = figure_data or {}
    wanted = set(figure_files(record))
    missing = wanted - figure_data.keys()
    if missing:
        raise EvidenceError(f"{record.lesson}/{record.key}: no bytes for figure(s) {', '.join(sorted(missing))}")
    for name in sorted(wanted):
        mismatch = figure_mismatch(name, figure_data[name])
        if mismatch:
            raise EvidenceError(f"{record.lesson}/{record.key}: figure {name}: {mismatch}")
    check_writable(evidence_dir, record.lesson, record.key, wanted)
    path = record_path(evidence_dir, record.lesson, record.key)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig_dir = figures_dir(evidence_dir, record.lesson, record.key)
    if wanted:
        fig_dir.mkdir(exist_ok=True)
    for name in sorted(wanted):  # a file in place with other bytes than its name says was planted: replaced
        target = fig_dir / name
        if not (target.is_file() and _same_bytes(target, figure_data[name])):
            atomic_write_bytes(target, figure_data[name])
    atomic_write_text(path, record.to_json())
    if fig_dir.is_dir() and not fig_dir.is_symlink():
        for old in fig_dir.iterdir():
            if old.name not in wanted and old.suffix == ".png" and old.is_file() and not old.is_symlink():
                old.unlink()
        if not any(fig_dir.iterdir()):
            fig_dir.rmdir()
    return path


def _same_bytes(path: Path, data: bytes) -> bool:
    """Whether the file at `path` (a plain file: check_writable) holds exactly `data`, read bounded."""
    try:
        with open(path, "rb") as f:
            return f.read(len(data) + 1) == data
    except OSError:
        return False


def check_writable(evidence_dir: Path, lesson: str, key: str, files=()) -> None:
    """EvidenceError unless a record and its figures can be written without passing a link or special file.

    A link under evidence/ (the lesson's folder, the figures folder, the record or a figure in place) would
    make a write land outside the repository; what does not exist yet is fine.
    """
    root = Path(evidence_dir)
    targets = [record_path(root, lesson, key)] + [figures_dir(root, lesson, key) / f for f in sorted(files)]
    for target in targets:
        check_plain_path(root, target)


def check_plain_path(root: Path, target: Path) -> None:
    """EvidenceError unless every folder from `root` down to `target`, and `target` itself, is plain (no link,
    hard link or special file) where it exists."""
    here = root
    for part in target.relative_to(root).parts:
        here = here / part
        try:
            info = os.lstat(here)
        except FileNotFoundError:
            return
        mode = info.st_mode
        plain = stat.S_ISREG(mode) and info.st_nlink == 1 if here == target else stat.S_ISDIR(mode)
        if not plain:
            kind = "file" if here == target else "folder"
            raise EvidenceError(f"{here}: not a plain {kind} (a link, hard link or special file); evidence is "
                                "never written through one")


def atomic_write_bytes(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; evidence is for every reader
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def lesson_records(evidence_dir: Path, lesson: str) -> tuple[list[Record], list[str]]:
    """Every readable record of one lesson, and a message for each file that is not usable."""
    folder = evidence_dir / lesson
    try:
        files = walk_files(folder, skip=lambda name: name.startswith("."))
    except UnsafePathError as exc:
        return [], [str(exc)]
    paths = [path for path in files if path.parent == folder and path.suffix == ".json"
             and path.name != EXERCISES_RECORD]  # the exercises' proof is no run record (judge/exercises.py)
    return read_each(paths, lambda path: read_record(path, evidence_dir),
                     lambda record, path: "" if (record.lesson, f"{record.key}.json") == (lesson, path.name)
                     else f"{record.lesson}/{record.key}")


def read_each(paths: list[Path], read, filed_as) -> tuple[list, list[str]]:
    """Each file read with `read`; (the records, a message for each file that is not usable: unreadable, or
    holding another record than its name says, which `filed_as(record, path)` names, '' when it is this one)."""
    records, problems = [], []
    for path in paths:
        try:
            record = read(path)
        except EvidenceError as exc:
            problems.append(str(exc))
            continue
        other = filed_as(record, path)
        if other:
            problems.append(f"{path}: holds the record of {other}, not of this file; re-record it")
            continue
        records.append(record)
    return records, problems
