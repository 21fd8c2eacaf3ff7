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
import math
import re
import types
import typing
from functools import cache

from limits import LIMITS


class SchemaError(Exception):
    """A value that breaks the schema; `where` is its field path, e.g. benchmarks[2].ratio."""

    def __init__(self, where: str, message: str):
        self.where, self.message = where, message
        super().__init__(f"{where or 'the record'}: {message}")


# Lengths of lists and strings, by (class name, field name); everything else uses LIMITS.string.
LIST_LIMITS = {
    ("Record", "checks"): LIMITS.checks, ("Record", "benchmarks"): LIMITS.benchmarks,
    ("Record", "tables"): LIMITS.tables, ("Record", "figures"): LIMITS.figures_per_record,
    ("Record", "skipped_parts"): 100, ("Record", "source_files"): 200, ("Record", "history"): LIMITS.benchmarks,
    ("Table", "rows"): LIMITS.table_rows, ("Table", "columns"): LIMITS.table_columns,
    ("Table", "rows[]"): LIMITS.table_columns,
    ("Benchmark", "kernel_ms"): LIMITS.samples, ("Benchmark", "baseline_ms"): LIMITS.samples,
    ("Record", "history[]"): LIMITS.history,
}
STRING_LIMITS = {
    "name": LIMITS.name, "stdout": LIMITS.stream_kept + 200, "stderr": LIMITS.stream_kept + 200,
}

FIGURE_FILE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,150}\.png$")
LESSON_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
GPU_KEY = re.compile(r"^gpu-[a-z0-9]+(?:-[a-z0-9]+)*$")
SHA256 = re.compile(r"^[0-9a-f]{64}$")
UTC_STAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")
REL_PATH = re.compile(r"^(?!/)(?!.*(?:^|/)\.\.?(?:/|$))[A-Za-z0-9._/-]{1,200}$")


def load(cls, data, where: str = ""):
    """An instance of dataclass `cls` from JSON data, or SchemaError."""
    return _value(cls, data, where, (cls.__name__, ""))


@cache
def _hints(cls) -> dict:
    return typing.get_type_hints(cls)


def _value(tp, data, where: str, owner: tuple[str, str]):
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        return _dataclass(tp, data, where)
    if origin is typing.Literal:
        if data not in typing.get_args(tp):
            allowed = ", ".join(repr(a) for a in typing.get_args(tp))
            raise SchemaError(where, f"{_show(data)} is not one of {allowed}")
        return data
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(tp)
        if data is None and type(None) in options:
            return None
        errors = []
        for option in options:
            if option is type(None):
                continue
            try:
                return _value(option, data, where, owner)
            except SchemaError as exc:
                errors.append(exc.message)
        raise SchemaError(where, " or ".join(errors))
    if origin is list:
        (item,) = typing.get_args(tp)
        if not isinstance(data, list):
            raise SchemaError(where, f"expected a list, found {_type(data)}")
        _bound_list(data, where, owner)
        inner = (owner[0], owner[1] + "[]")
        return [_value(item, x, f"{where}[{i}]", inner) for i, x in enumerate(data)]
    if origin is dict:
        key_tp, item = typing.get_args(tp)
        if not isinstance(data, dict):
            raise SchemaError(where, f"expected an object, found {_type(data)}")
        _bound_list(data, where, owner)
        inner = (owner[0], owner[1] + "[]")
        return {_value(key_tp, k, f"{where}.<key>", ("", "name")): _value(item, v, f"{where}.{_short(k)}", inner)
                for k, v in data.items()}
    if tp is str:
        if not isinstance(data, str):
            raise SchemaError(where, f"expected text, found {_type(data)}")
        limit = STRING_LIMITS.get(owner[1], LIMITS.string)
        if len(data) > limit:
            raise SchemaError(where, f"{len(data):,} characters, over the limit of {limit:,}")
        return data
    if tp is bool:
        if not isinstance(data, bool):
            raise SchemaError(where, f"expected true or false, found {_type(data)}")
        return data
    if tp is int:
        if isinstance(data, bool) or not isinstance(data, int):
            raise SchemaError(where, f"expected a whole number, found {_type(data)}")
        if abs(data) > 2**53:
            raise SchemaError(where, "number out of range")
        return data
    if tp is float:
        if isinstance(data, bool) or not isinstance(data, (int, float)):
            raise SchemaError(where, f"expected a number, found {_type(data)}")
        if not math.isfinite(data) or abs(data) > 1e300:
            raise SchemaError(where, f"{data!r} is not a finite number")
        return float(data)
    raise SchemaError(where, f"unsupported type {tp!r} in the schema")  # a bug in the dataclasses, not the data


def _dataclass(cls, data, where: str):
    if not isinstance(data, dict):
        raise SchemaError(where, f"expected an object, found {_type(data)}")
    hints = _hints(cls)
    known = {f.name: f for f in dataclasses.fields(cls)}
    unknown = [k for k in data if k not in known]
    if unknown:
        raise SchemaError(where, f"unknown field {_short(unknown[0])!r} in {cls.__name__}")
    values = {}
    for name, f in known.items():
        path = f"{where}.{name}" if where else name
        if name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise SchemaError(path, "missing")
            continue
        values[name] = _value(hints[name], data[name], path, (cls.__name__, name))
    return cls(**values)


def _bound_list(data, where: str, owner: tuple[str, str]) -> None:
    limit = LIST_LIMITS.get(owner, 1000)
    if len(data) > limit:
        raise SchemaError(where, f"{len(data):,} items, over the limit of {limit:,}")


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
