"""The evidence format: one JSON record per lesson, per mode, per GPU model.

One job: define the record, write it atomically, and read it back with errors
that name the file. `verify.py` writes records, `status.py` judges them and
`render.py` shows them; this module is the only place that knows the layout:

    evidence/<lesson>/<key>.json     key = "interpreter" or "gpu-<gpu-slug>"
    evidence/<lesson>/<key>/*.png    figures that run saved
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path

FORMAT_VERSION = 1
OUTCOMES = ("passed", "failed", "timeout", "crashed", "by-design")
STREAM_LIMIT = 64 * 1024  # bytes of stdout/stderr kept per run (head and tail)


class EvidenceError(Exception):
    """An evidence file that cannot be read, naming the file and the problem."""


@dataclass
class Check:
    name: str
    status: str  # pass | fail | skip
    message: str = ""


@dataclass
class Benchmark:
    name: str
    measured: float
    baseline: float
    unit: str
    ratio: float
    threshold: float | None = None
    baseline_name: str = ""
    higher_is_better: bool = True
    gate: bool = True
    met: bool | None = None
    note: str = ""
    stretch: float | None = None  # a higher goal that never gates
    stretch_met: bool | None = None


@dataclass
class Table:
    name: str
    columns: list[str]
    rows: list[list]
    caption: str = ""


@dataclass
class Figure:
    name: str
    file: str  # path relative to the evidence folder
    caption: str = ""


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


@dataclass
class Record:
    lesson: str
    mode: str  # interpreter | gpu
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
    skipped_parts: list[dict] = field(default_factory=list)  # parts the interpreter cannot run
    format_version: int = FORMAT_VERSION

    @property
    def date(self) -> str:
        return self.started_utc[:10]

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, ensure_ascii=False, sort_keys=False) + "\n"


def gpu_key(device_name: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", device_name.lower()).strip("-") or "unknown"
    return f"gpu-{slug}"


def bound_stream(data: bytes, limit: int = STREAM_LIMIT) -> tuple[str, int]:
    """Decode captured bytes (invalid UTF-8 becomes U+FFFD) and keep head and tail within `limit`."""
    omitted = 0
    if len(data) > limit:
        head, tail = data[: limit * 3 // 4], data[-(limit // 4):]
        omitted = len(data) - len(head) - len(tail)
        data = head + f"\n[... {omitted} bytes omitted ...]\n".encode() + tail
    return data.decode("utf-8", errors="replace"), omitted


# -- files ---------------------------------------------------------------------

def record_path(evidence_dir: Path, lesson: str, key: str) -> Path:
    return evidence_dir / lesson / f"{key}.json"


def figures_dir(evidence_dir: Path, lesson: str, key: str) -> Path:
    return evidence_dir / lesson / key


def write_record(evidence_dir: Path, record: Record, figure_files: dict[str, Path] | None = None) -> Path:
    """Write a record and replace its figures; a crash midway leaves the old record whole."""
    path = record_path(evidence_dir, record.lesson, record.key)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig_dir = figures_dir(evidence_dir, record.lesson, record.key)
    if figure_files is not None:
        staging = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{record.key}-"))
        staging.chmod(0o755)
        try:
            for name, src in figure_files.items():
                shutil.copyfile(src, staging / name)
            if fig_dir.exists():
                shutil.rmtree(fig_dir)
            if figure_files:
                os.replace(staging, fig_dir)
        finally:
            shutil.rmtree(staging, ignore_errors=True)  # gone already once moved into place
    atomic_write_text(path, record.to_json())
    return path


def atomic_write_text(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; evidence is for every reader
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def read_record(path: Path) -> Record:
    """Read one record, or raise EvidenceError naming the file and what is wrong."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise EvidenceError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg}); "
                            f"re-record it with tools/verify.py --force") from None
    except UnicodeDecodeError:
        raise EvidenceError(f"{path}: not UTF-8 text") from None
    except OSError as exc:
        raise EvidenceError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if not isinstance(raw, dict):
        raise EvidenceError(f"{path}: expected a JSON object, found {type(raw).__name__}")
    version = raw.get("format_version")
    if not isinstance(version, int):
        raise EvidenceError(f"{path}: no format_version; this is not an evidence record "
                            f"(or predates versioning): re-record it")
    if version > FORMAT_VERSION:
        raise EvidenceError(f"{path}: written in evidence format {version}, newer than the "
                            f"{FORMAT_VERSION} this checkout reads; update the tools")
    raw = _upgrade(raw, version, path)
    try:
        return record_from_dict(raw)
    except (KeyError, TypeError, ValueError) as exc:
        raise EvidenceError(f"{path}: malformed record ({_describe(exc)}); re-record it") from None


def _upgrade(raw: dict, version: int, path: Path) -> dict:
    """Bring an older record to the current format (format 1 is the first; nothing older exists)."""
    if version < 1:
        raise EvidenceError(f"{path}: evidence format {version} is too old to read; re-record it")
    return raw


def _describe(exc: Exception) -> str:
    if isinstance(exc, KeyError):
        return f"missing field {exc.args[0]!r}"
    return str(exc)


def _build(cls, data: dict):
    if not isinstance(data, dict):
        raise TypeError(f"{cls.__name__} must be an object, found {type(data).__name__}")
    names = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in data.items() if k in names})


_NUMBER = (int, float)
_OPTIONAL_NUMBER = (int, float, type(None))
# The types the site and the status rules compute with; anything else in a
# record is carried along untouched.
_RECORD_TYPES = {
    "lesson": str, "mode": str, "key": str, "outcome": str, "exit_code": (int, type(None)),
    "started_utc": str, "wall_s": _NUMBER, "command": str, "source_hash": str, "source_files": dict,
    "env": dict, "stdout": str, "stderr": str, "stdout_omitted": int, "stderr_omitted": int, "reason": str,
    "checks": list, "benchmarks": list, "tables": list, "figures": list, "skipped_parts": list,
}
_PART_TYPES = {
    Environment: {f.name: str for f in fields(Environment)},
    Check: {"name": str, "status": str, "message": str},
    Benchmark: {"name": str, "measured": _NUMBER, "baseline": _NUMBER, "unit": str, "ratio": _NUMBER,
                "threshold": _OPTIONAL_NUMBER, "baseline_name": str, "stretch": _OPTIONAL_NUMBER},
    Table: {"name": str, "columns": list, "rows": list, "caption": str},
    Figure: {"name": str, "file": str, "caption": str},
}


def _check_types(data: dict, types: dict, where: str) -> None:
    for name, expected in types.items():
        if name in data and not isinstance(data[name], expected):
            wanted = " or ".join(t.__name__ for t in (expected if isinstance(expected, tuple) else (expected,)))
            raise TypeError(f"{where}{name} is {type(data[name]).__name__}, expected {wanted}")


def _part(cls, data, where: str):
    if not isinstance(data, dict):
        raise TypeError(f"{where} must be an object, found {type(data).__name__}")
    _check_types(data, _PART_TYPES[cls], f"{where}.")
    for f in fields(cls):
        if f.default is MISSING and f.default_factory is MISSING and f.name not in data:
            raise KeyError(f"{where}.{f.name}")
    return _build(cls, data)


def record_from_dict(raw: dict) -> Record:
    required = [f.name for f in fields(Record) if f.default is MISSING and f.default_factory is MISSING]
    for name in required:
        if name not in raw:
            raise KeyError(name)
    _check_types(raw, _RECORD_TYPES, "")
    if raw["outcome"] not in OUTCOMES:
        raise ValueError(f"unknown outcome {raw['outcome']!r}")
    if raw["mode"] not in ("interpreter", "gpu"):
        raise ValueError(f"unknown mode {raw['mode']!r}")
    record = _build(Record, raw)
    record.env = _part(Environment, raw["env"], "env")
    record.checks = [_part(Check, c, f"checks[{i}]") for i, c in enumerate(raw.get("checks", []))]
    record.benchmarks = [_part(Benchmark, b, f"benchmarks[{i}]") for i, b in enumerate(raw.get("benchmarks", []))]
    record.tables = [_part(Table, t, f"tables[{i}]") for i, t in enumerate(raw.get("tables", []))]
    record.figures = [_part(Figure, f, f"figures[{i}]") for i, f in enumerate(raw.get("figures", []))]
    return record


def lesson_records(evidence_dir: Path, lesson: str) -> list[Record]:
    """Every record of one lesson; unreadable files raise EvidenceError."""
    folder = evidence_dir / lesson
    if not folder.is_dir():
        return []
    return [read_record(path) for path in sorted(folder.glob("*.json"))]
