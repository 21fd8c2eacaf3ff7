"""One strict schema for everything read from evidence/ or a bundle.

One job: turn parsed JSON into the dataclasses that describe it, or refuse it
with an error naming the field. The shapes are the dataclasses themselves
(the kit's results in code/lessonkit.py, the record around them in
evidence.py): their type hints give each field's type, `Literal` its allowed
values. This module adds what a type cannot say: how long a string or list
may be (from limits.py) and the rules for values that become file names,
keys and hashes. Unknown fields, wrong types, NaN and infinities are errors.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import re
import types
import typing
from functools import cache

from verified_triton.core.limits import LIMITS
from verified_triton.core.numfmt import exact


class SchemaError(Exception):
    """A value that breaks the schema; `where` is its field path, e.g. benchmarks[2].ratio."""

    def __init__(self, where: str, message: str):
        self.where, self.message = where, message
        super().__init__(f"{where or 'the record'}: {message}")


# Lengths of lists and strings, by (class name, field name) (a string also by its field name alone); everything
# else uses LIMITS.string.
LIST_LIMITS = {
    ("Record", "checks"): LIMITS.checks, ("Record", "benchmarks"): LIMITS.benchmarks,
    ("Record", "tables"): LIMITS.tables, ("Record", "figures"): LIMITS.figures_per_record,
    ("Record", "skipped_parts"): 100, ("Record", "source_files"): 200, ("Record", "history"): LIMITS.benchmarks,
    ("Table", "rows"): LIMITS.table_rows, ("Table", "columns"): LIMITS.table_columns,
    ("Table", "rows[]"): LIMITS.table_columns,
    ("Benchmark", "kernel_ms"): LIMITS.samples, ("Benchmark", "baseline_ms"): LIMITS.samples,
    ("Record", "history[]"): LIMITS.history,
    ("Record", "predictions"): LIMITS.benchmarks, ("Results", "predictions"): LIMITS.benchmarks,
    ("Record", "filtered_warnings"): 50, ("Results", "filtered_warnings"): 50,
    ("Environment", "baselines"): 20, ("Device", "baselines"): 20,
    ("SanitizerRun", "runs"): 4, ("SanitizerRun", "known"): 100, ("Results", "sanitizer_known"): 100,
    ("SanitizerToolRun", "findings"): LIMITS.sanitizer_findings, ("SanitizerToolRun", "notes"): 20,
    ("SanitizerFinding", "locations"): 16, ("KnownFinding", "where"): 20, ("KnownFinding", "lines"): 20,
    ("SanitizerRun", "reproducers"): 4, ("SanitizerReproducer", "kernels"): 20,
    ("ExercisesRecord", "exercises"): LIMITS.exercises, ("ExerciseResult", "mistakes"): LIMITS.exercises,
    ("ExercisesRecord", "source_files"): 200, ("ExercisesProof", "exercises"): LIMITS.exercises,
    ("ExercisesProof", "unknown_mistakes"): LIMITS.exercises,
}
STRING_LIMITS = {
    "name": LIMITS.name, "stdout": LIMITS.stream_kept + 200, "stderr": LIMITS.stream_kept + 200,
    "log": LIMITS.sanitizer_log_kept + 200,  # a compute-sanitizer log, head and tail
    # a compute-sanitizer finding's parts, shown on a page and in a sentence (record/sanitizer_log.py cuts them)
    ("SanitizerFinding", "message"): LIMITS.sanitizer_text, ("SanitizerFinding", "detail"): LIMITS.sanitizer_text,
    ("SanitizerFinding", "host_frame"): LIMITS.sanitizer_text, ("SanitizerLocation", "file"): LIMITS.sanitizer_text,
    ("SanitizerLocation", "kernel"): LIMITS.name, ("SanitizerLocation", "access"): 20,
    ("SanitizerToolRun", "notes[]"): LIMITS.sanitizer_text, ("SanitizerRun", "version"): LIMITS.environment,
    ("KnownFinding", "kernel"): LIMITS.name,
    # what a run was recorded with: repeated on every row, caption and tab of a page, so kept short
    **dict.fromkeys(("python", "torch", "triton", "platform", "device_name", "capability", "driver", "cuda"),
                    LIMITS.environment),
}

# Whole strings only: \A and \Z (a "$" would also match before a trailing newline, and "x.png\n" is no
# file name), ASCII digits only (\d also matches full-width and other scripts' digits).
FIGURE_FILE = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,150}\.png\Z")
LESSON_NAME = re.compile(r"\A[a-z0-9][a-z0-9-]{0,63}\Z")
GPU_KEY = re.compile(r"\Agpu-[a-z0-9]+(?:-[a-z0-9]+)*\Z")
SHA256 = re.compile(r"\A[0-9a-f]{64}\Z")
UTC_STAMP = re.compile(r"\A[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z\Z")
PACKAGE = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._+-]{0,63}\Z")  # a package name, or its version
REL_PATH = re.compile(r"\A(?!/)(?!.*(?:^|/)\.\.?(?:/|\Z))[A-Za-z0-9._/-]{1,200}\Z")
UTC_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def utc_stamp(text: str) -> datetime.datetime | None:
    """The moment `text` names, if it is strict RFC 3339 UTC (ASCII digits, a real calendar date and time,
    'Z' and nothing after it); None otherwise."""
    if not UTC_STAMP.match(text):
        return None
    try:
        return datetime.datetime.strptime(text, UTC_FORMAT).replace(tzinfo=datetime.UTC)
    except ValueError:  # 2026-02-30, 25:00, a leap second
        return None


def load(cls, data, where: str = ""):
    """An instance of dataclass `cls` from JSON data, or SchemaError."""
    return _validator(cls, (cls.__name__, ""))(data, where)


@cache
def _validator(tp, owner: tuple[str, str]):
    """A function (data, where) -> value for type `tp`, built once per type and field.

    Building the checks once, instead of asking `typing` about every value,
    keeps reading hundreds of records well under a second.
    """
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        return _dataclass_validator(tp)
    if origin is typing.Literal:
        allowed = typing.get_args(tp)
        shown = ", ".join(repr(a) for a in allowed)

        def literal(data, where):
            if data not in allowed:
                raise SchemaError(where, f"{_show(data)} is not one of {shown}")
            return data
        return literal
    if origin in (typing.Union, types.UnionType):
        options = [_validator(o, owner) for o in typing.get_args(tp) if o is not type(None)]
        nullable = type(None) in typing.get_args(tp)

        def union(data, where):
            if data is None and nullable:
                return None
            errors = []
            for option in options:
                try:
                    return option(data, where)
                except SchemaError as exc:
                    errors.append(exc.message)
            raise SchemaError(where, " or ".join(errors))
        return union
    if origin in (list, dict):
        return _container_validator(tp, origin, owner)
    if tp is str:
        limit = STRING_LIMITS.get(owner, STRING_LIMITS.get(owner[1], LIMITS.string))
        return _exact(str, "text", lambda d: len(d) <= limit,
                      lambda d: f"{exact(len(d))} characters, over the limit of {exact(limit)}")
    if tp is bool:
        return _exact(bool, "true or false")
    if tp is int:
        return _exact(int, "a whole number", lambda d: abs(d) <= 2**53, lambda d: "number out of range")
    if tp is float:
        def finite(data, where):
            if type(data) is float:
                if not math.isfinite(data) or abs(data) > 1e300:
                    raise SchemaError(where, f"{data!r} is not a finite number")
                return data
            if type(data) is int and abs(data) <= 2**53:
                return float(data)
            raise SchemaError(where, f"expected a number, found {_type(data)}")
        return finite
    raise TypeError(f"unsupported type {tp!r} in the schema")  # a bug in the dataclasses, not the data


def _exact(kind: type, words: str, ok=None, why=None):
    """A value of exactly `kind` (a bool is no int here), passing `ok` when given."""
    def scalar(data, where):
        if type(data) is not kind:
            raise SchemaError(where, f"expected {words}, found {_type(data)}")
        if ok is not None and not ok(data):
            raise SchemaError(where, why(data))
        return data
    return scalar


def _container_validator(tp, origin, owner: tuple[str, str]):
    """A list or a str-keyed object: its type, its length (LIST_LIMITS), then every item."""
    args = typing.get_args(tp)
    item = _validator(args[-1], (owner[0], owner[1] + "[]"))
    key = _validator(args[0], ("", "name")) if origin is dict else None
    limit = LIST_LIMITS.get(owner, 1000)
    wanted = "a list" if origin is list else "an object"

    def container(data, where):
        if not isinstance(data, origin):
            raise SchemaError(where, f"expected {wanted}, found {_type(data)}")
        if len(data) > limit:
            raise SchemaError(where, f"{exact(len(data))} items, over the limit of {exact(limit)}")
        if key is None:
            return [item(x, f"{where}[{i}]") for i, x in enumerate(data)]
        return {key(k, f"{where}.<key>"): item(v, f"{where}.{_short(k)}") for k, v in data.items()}
    return container


def _dataclass_validator(cls):
    hints = typing.get_type_hints(cls)
    fields = [(f.name, f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
              for f in dataclasses.fields(cls)]
    known = {name for name, _ in fields}
    checks = {name: _validator(hints[name], (cls.__name__, name)) for name, _ in fields}

    def instance(data, where):
        if not isinstance(data, dict):
            raise SchemaError(where, f"expected an object, found {_type(data)}")
        for k in data:
            if k not in known:
                raise SchemaError(where, f"unknown field {_short(k)!r} in {cls.__name__}")
        values = {}
        for name, required in fields:
            if name not in data:
                if required:
                    raise SchemaError(f"{where}.{name}" if where else name, "missing")
                continue
            values[name] = checks[name](data[name], f"{where}.{name}" if where else name)
        return cls(**values)
    return instance


def _type(data) -> str:
    return {dict: "an object", list: "a list", str: "text", bool: "true/false", type(None): "null",
            int: "a number", float: "a number"}.get(type(data), type(data).__name__)


def _show(data) -> str:
    return repr(data)[:60]


def _short(key) -> str:
    return str(key)[:60]


def require(ok: bool, where: str, message: str) -> None:
    """A value rule: raise SchemaError at `where` unless `ok`."""
    if not ok:
        raise SchemaError(where, message)
