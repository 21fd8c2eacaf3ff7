"""The evidence format: records, their files, atomic writes and read errors that name the file."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import evidence
from conftest import PASSING, fake_record
from evidence import (
    FORMAT_VERSION,
    STREAM_LIMIT,
    Benchmark,
    EvidenceError,
    Figure,
    Table,
    bound_stream,
    gpu_key,
    lesson_records,
    read_record,
    record_from_dict,
    record_path,
    write_record,
)


@pytest.fixture
def lesson(project):
    project.add("good", PASSING)
    return project.lesson("good")


def full_record(lesson):
    rec = fake_record(lesson, "gpu", benchmarks=[
        Benchmark("bw", measured=3000.0, baseline=3100.0, unit="GB/s", ratio=3000 / 3100, threshold=0.9,
                  baseline_name="torch", met=True, stretch=1.0, stretch_met=False)])
    rec.tables = [Table("sweep", ["block", "ms"], [[64, 0.5], [128, None]], caption="a sweep")]
    rec.figures = [Figure("plot", "gpu-nvidia-h200/plot.png", caption="a plot")]
    rec.skipped_parts = [{"part": "timing", "reason": "no GPU"}]
    rec.stdout = "caf\u00e9 <b>\x1b[0m\n"
    return rec


# -- round trip ------------------------------------------------------------------------

def test_round_trip(project, lesson):
    rec = full_record(lesson)
    path = write_record(project.evidence, rec)
    assert path == project.evidence / "good" / "gpu-nvidia-h200.json"
    back = read_record(path)
    assert back == rec
    assert back.to_json() == path.read_text(encoding="utf-8")
    assert back.benchmarks[0].stretch_met is False and back.tables[0].rows[1] == [128, None]
    assert back.date == "2026-01-02"
    raw = json.loads(path.read_text(encoding="utf-8"))
    assert raw["format_version"] == FORMAT_VERSION
    assert raw["env"]["device_name"] == "NVIDIA H200"


def test_unknown_fields_are_ignored(project, lesson):
    raw = json.loads(full_record(lesson).to_json())
    raw["added_later"] = {"x": 1}
    raw["env"]["new_probe"] = "y"
    raw["checks"][0]["extra"] = True
    assert record_from_dict(raw) == full_record(lesson)


def test_record_path_and_gpu_keys(tmp_path):
    assert record_path(tmp_path, "a", "interpreter") == tmp_path / "a" / "interpreter.json"
    assert gpu_key("NVIDIA H200") == "gpu-nvidia-h200"
    assert gpu_key("NVIDIA GeForce RTX 4090") == "gpu-nvidia-geforce-rtx-4090"
    assert gpu_key("  NVIDIA A100-SXM4-80GB ") == "gpu-nvidia-a100-sxm4-80gb"
    assert gpu_key("") == "gpu-unknown" and gpu_key("!!!") == "gpu-unknown"
    for name in ("NVIDIA H200", "../../etc", "a/b\\c"):
        assert "/" not in gpu_key(name) and "." not in gpu_key(name) and "\\" not in gpu_key(name)


def test_lesson_records(project, lesson):
    assert lesson_records(project.evidence, "good") == []
    gpu = write_record(project.evidence, fake_record(lesson, "gpu"))
    write_record(project.evidence, fake_record(lesson, "gpu", device="NVIDIA A100"))
    write_record(project.evidence, fake_record(lesson, "interpreter"))
    keys = [r.key for r in lesson_records(project.evidence, "good")]
    assert keys == ["gpu-nvidia-a100", "gpu-nvidia-h200", "interpreter"]
    gpu.write_text("{")
    with pytest.raises(EvidenceError, match=str(gpu)):
        lesson_records(project.evidence, "good")


# -- bounded streams --------------------------------------------------------------------

def test_bound_stream_small_is_complete():
    assert bound_stream(b"hello\n") == ("hello\n", 0)
    assert bound_stream(b"x" * STREAM_LIMIT) == ("x" * STREAM_LIMIT, 0)


def test_bound_stream_keeps_head_and_tail():
    data = b"H" * 100 + b"m" * 10_000 + b"T" * 100
    text, omitted = bound_stream(data, limit=400)
    marker = f"\n[... {omitted} bytes omitted ...]\n"
    head, sep, tail = text.partition(marker)
    assert sep and head.startswith("H" * 100) and tail.endswith("T" * 100)
    assert len(head) + len(tail) + omitted == len(data)
    assert len(head) + len(tail) <= 400


def test_bound_stream_replaces_invalid_utf8():
    text, omitted = bound_stream(b"ok \xff\xfe \xe2\x9c\x93\n")
    assert (text, omitted) == ("ok \ufffd\ufffd \u2713\n", 0)


# -- read errors name the file ------------------------------------------------------------

def _good_raw(lesson) -> dict:
    return json.loads(fake_record(lesson, "interpreter").to_json())


def _without(key):
    def edit(raw):
        del raw[key]
        return json.dumps(raw)
    return edit


def _with(**changes):
    def edit(raw):
        raw.update(changes)
        return json.dumps(raw)
    return edit


BAD_FILES = {
    "truncated": (lambda raw: json.dumps(raw)[:150], "not valid JSON"),
    "empty": (lambda raw: "", "not valid JSON"),
    "missing-outcome": (_without("outcome"), "missing field 'outcome'"),
    "missing-env": (_without("env"), "missing field 'env'"),
    "missing-version": (_without("format_version"), "format_version"),
    "future-version": (_with(format_version=FORMAT_VERSION + 1), f"format {FORMAT_VERSION + 1}"),
    "ancient-version": (_with(format_version=0), "too old"),
    "list": (lambda raw: "[1, 2]", "expected a JSON object, found list"),
    "string": (lambda raw: '"a record"', "expected a JSON object, found str"),
    "null": (lambda raw: "null", "expected a JSON object, found NoneType"),
    "unknown-outcome": (_with(outcome="sort-of"), "unknown outcome 'sort-of'"),
    "env-not-object": (_with(env="CPU"), "env is str, expected dict"),
    "checks-not-objects": (_with(checks=["pass"]), "checks[0] must be an object, found str"),
    "check-missing-status": (_with(checks=[{"name": "x"}]), "status"),
    "wall-time-not-number": (_with(wall_s="abc"), "wall_s is str, expected int or float"),
    "start-not-text": (_with(started_utc=20261129), "started_utc is int, expected str"),
    "unknown-mode": (_with(mode="tpu"), "unknown mode 'tpu'"),
    "benchmark-ratio-text": (_with(benchmarks=[{"name": "b", "measured": 1.0, "baseline": 1.0, "unit": "x",
                                                 "ratio": "fast"}]),
                             "benchmarks[0].ratio is str, expected int or float"),
}


@pytest.mark.parametrize("kind", BAD_FILES)
def test_read_errors_name_the_file(project, lesson, kind):
    edit, expect = BAD_FILES[kind]
    path = project.evidence / "good" / "interpreter.json"
    path.parent.mkdir(parents=True)
    path.write_text(edit(_good_raw(lesson)), encoding="utf-8")
    with pytest.raises(EvidenceError) as info:
        read_record(path)
    message = str(info.value)
    assert message.startswith(f"{path}"), message
    assert expect in message


def test_not_utf8_record(project, lesson):
    path = project.evidence / "good" / "interpreter.json"
    path.parent.mkdir(parents=True)
    path.write_bytes(b'{"lesson": "caf\xe9"}')
    with pytest.raises(EvidenceError, match="not UTF-8"):
        read_record(path)


@pytest.mark.parametrize("kind", ["truncated", "missing-outcome", "future-version", "list"])
def test_status_on_a_bad_record_exits_2_naming_it(project, lesson, kind):
    edit, expect = BAD_FILES[kind]
    path = project.evidence / "good" / "interpreter.json"
    path.parent.mkdir(parents=True)
    path.write_text(edit(_good_raw(lesson)), encoding="utf-8")
    for args in (["--status"], ["--status", "--json"], ["--check"]):
        result = project.verify(*args)
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        assert result.stderr.startswith(f"error: {path}")
        assert expect in result.stderr
        assert "Traceback" not in result.stderr


# -- atomic writes -------------------------------------------------------------------------

def _listing(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*")}


@pytest.mark.parametrize("fail_at", ["fsync", "replace", "interrupt"])
def test_a_crash_mid_write_keeps_the_old_record(project, lesson, monkeypatch, fail_at):
    old = fake_record(lesson, "interpreter")
    path = write_record(project.evidence, old)
    old_bytes = path.read_bytes()
    before = _listing(project.evidence)

    def boom(*args, **kwargs):
        raise KeyboardInterrupt if fail_at == "interrupt" else OSError("disk full")

    monkeypatch.setattr(evidence.os, "replace" if fail_at == "replace" else "fsync", boom)
    new = fake_record(lesson, "interpreter", outcome="failed", reason="newer")
    with pytest.raises((OSError, KeyboardInterrupt)):
        write_record(project.evidence, new)
    monkeypatch.undo()
    assert path.read_bytes() == old_bytes
    assert read_record(path) == old
    assert _listing(project.evidence) == before  # no temporary file left behind


def test_a_crash_while_placing_figures_leaves_no_staging_folder(project, lesson, tmp_path, monkeypatch):
    png = tmp_path / "plot.png"
    png.write_bytes(b"\x89PNG new")
    old = fake_record(lesson, "interpreter")
    path = write_record(project.evidence, old, {"plot.png": png})
    old_bytes = path.read_bytes()
    real_replace = os.replace

    def replace(src, dst):
        if Path(dst).suffix != ".json":
            raise OSError("disk full")
        real_replace(src, dst)

    monkeypatch.setattr(evidence.os, "replace", replace)
    with pytest.raises(OSError):
        write_record(project.evidence, fake_record(lesson, "interpreter", outcome="failed"), {"plot.png": png})
    monkeypatch.undo()
    assert path.read_bytes() == old_bytes
    hidden = [p.name for p in (project.evidence / "good").iterdir() if p.name.startswith(".")]
    assert hidden == []


def test_atomic_write_text_replaces_whole(tmp_path):
    path = tmp_path / "r.json"
    path.write_text("old")
    evidence.atomic_write_text(path, "new \u2713")
    assert path.read_text(encoding="utf-8") == "new \u2713"
    assert _listing(tmp_path) == {"r.json"}


def test_figures_are_replaced_kept_or_removed(project, lesson, tmp_path):
    a, b = tmp_path / "a.png", tmp_path / "b.png"
    a.write_bytes(b"A")
    b.write_bytes(b"B")
    rec = fake_record(lesson, "interpreter")
    figs = project.evidence / "good" / "interpreter"
    write_record(project.evidence, rec, {"a.png": a, "b.png": b})
    assert _listing(figs) == {"a.png", "b.png"}
    write_record(project.evidence, rec, {"b.png": a})  # replaced: a.png is gone, b.png has new bytes
    assert _listing(figs) == {"b.png"} and (figs / "b.png").read_bytes() == b"A"
    write_record(project.evidence, rec)  # None: figures untouched
    assert _listing(figs) == {"b.png"}
    write_record(project.evidence, rec, {})  # a run without figures removes the old ones
    assert not figs.exists()
    assert _listing(project.evidence / "good") == {"interpreter.json"}
