"""The evidence format: records, their files, the schema, atomic writes and read errors that name the file."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import FAKE_PNG, PASSING, bench, fake_record
from verified_triton.core.kit import Figure, SkippedPart, Table
from verified_triton.core.limits import LIMITS
from verified_triton.judge import evidence
from verified_triton.judge.evidence import (
    FORMAT_VERSION,
    EvidenceError,
    HistoryPoint,
    gpu_key,
    hashed_name,
    lesson_records,
    read_record,
    record_from_json,
    record_path,
    write_record,
)


@pytest.fixture
def lesson(project):
    project.add("good", PASSING)
    return project.lesson("good")


PLOT = hashed_name("plot", FAKE_PNG)


def full_record(lesson):
    rec = fake_record(lesson, "gpu", benchmarks=[
        bench("bw", 0.97, 0.95, 1.01, unit="GB/s", threshold=0.9, stretch=1.0, label="bandwidth")])
    rec.tables = [Table("sweep", ["block", "ms"], [[64, 0.5], [128, None]], caption="a sweep")]
    rec.figures = [Figure("plot", PLOT, caption="a plot")]
    rec.skipped_parts = [SkippedPart("timing", "no GPU")]
    rec.history = {"bw": [HistoryPoint("2025-12-01T00:00:00Z", "a" * 64, "3.8.0", 0.9, 0.88, 0.92)]}
    rec.stdout = "caf\u00e9 <b>\x1b[0m\n"
    return rec


# -- round trip ------------------------------------------------------------------------

@pytest.mark.unit
def test_round_trip(project, lesson):
    rec = full_record(lesson)
    path = write_record(project.evidence, rec, {PLOT: FAKE_PNG})
    assert path == project.evidence / "good" / "gpu-nvidia-h200.json"
    back = read_record(path, project.evidence)
    assert back == rec
    assert back.to_json() == path.read_text(encoding="utf-8")
    b = back.benchmarks[0]
    assert (b.verdict, b.stretch_verdict) == ("met", "within noise")
    assert back.tables[0].rows[1] == [128, None]
    assert back.date == "2026-01-02"
    assert (project.evidence / "good" / "gpu-nvidia-h200" / PLOT).read_bytes() == FAKE_PNG
    raw = json.loads(path.read_text(encoding="utf-8"))
    assert raw["format_version"] == FORMAT_VERSION
    assert raw["env"]["device_name"] == "NVIDIA H200"


@pytest.mark.unit
def test_unknown_fields_are_refused_naming_them(project, lesson):
    raw = json.loads(full_record(lesson).to_json())
    assert record_from_json(raw, "r.json") == full_record(lesson)
    for edit, where in ((lambda r: r.update(added_later=1), "'added_later'"),
                        (lambda r: r["env"].update(new_probe="y"), "env: unknown field 'new_probe'"),
                        (lambda r: r["checks"][0].update(extra=True), "checks[0]: unknown field 'extra'")):
        changed = json.loads(json.dumps(raw))
        edit(changed)
        with pytest.raises(EvidenceError) as info:
            record_from_json(changed, "r.json")
        assert str(info.value).startswith("r.json: ") and where in str(info.value)


@pytest.mark.unit
def test_record_path_and_gpu_keys(tmp_path):
    assert record_path(tmp_path, "a", "interpreter") == tmp_path / "a" / "interpreter.json"
    assert gpu_key("NVIDIA H200") == "gpu-nvidia-h200"
    assert gpu_key("NVIDIA GeForce RTX 4090") == "gpu-nvidia-geforce-rtx-4090"
    assert gpu_key("  NVIDIA A100-SXM4-80GB ") == "gpu-nvidia-a100-sxm4-80gb"
    assert gpu_key("") == "gpu-unknown" and gpu_key("!!!") == "gpu-unknown"
    for name in ("NVIDIA H200", "../../etc", "a/b\\c", "<script>"):
        assert "/" not in gpu_key(name) and "." not in gpu_key(name) and "\\" not in gpu_key(name)
        assert "<" not in gpu_key(name)


@pytest.mark.unit
def test_figure_names_carry_their_content_hash():
    assert hashed_name("plot", FAKE_PNG) == hashed_name("plot", FAKE_PNG)
    assert hashed_name("plot", FAKE_PNG) != hashed_name("plot", FAKE_PNG + b"x")
    assert hashed_name("plot", FAKE_PNG).startswith("plot-") and PLOT.endswith(".png")
    assert hashed_name("../../a b<c>", FAKE_PNG).startswith("a-b-c-")
    assert hashed_name("...", FAKE_PNG).startswith("figure-")


@pytest.mark.unit
def test_lesson_records(project, lesson):
    assert lesson_records(project.evidence, "good") == ([], [])
    gpu = write_record(project.evidence, fake_record(lesson, "gpu"))
    write_record(project.evidence, fake_record(lesson, "gpu", device="NVIDIA A100"))
    write_record(project.evidence, fake_record(lesson, "interpreter"))
    records, problems = lesson_records(project.evidence, "good")
    assert [r.key for r in records] == ["gpu-nvidia-a100", "gpu-nvidia-h200", "interpreter"] and problems == []
    gpu.write_text("{")
    records, problems = lesson_records(project.evidence, "good")
    assert [r.key for r in records] == ["gpu-nvidia-a100", "interpreter"]
    assert len(problems) == 1 and problems[0].startswith(f"{gpu}:") and "not valid JSON" in problems[0]


@pytest.mark.unit
def test_a_record_in_the_wrong_file_is_not_used(project, lesson):
    write_record(project.evidence, fake_record(lesson, "gpu"))
    src = project.record_file("good", "gpu-nvidia-h200")
    wrong = project.record_file("good", "gpu-nvidia-a100")
    wrong.write_bytes(src.read_bytes())
    records, problems = lesson_records(project.evidence, "good")
    assert [r.key for r in records] == ["gpu-nvidia-h200"]
    assert len(problems) == 1 and str(wrong) in problems[0] and "not of this file" in problems[0]


# -- format 1 is upgraded on read -------------------------------------------------------------

@pytest.mark.unit
def test_a_format_1_record_is_upgraded(project, lesson):
    raw = json.loads(fake_record(lesson, "gpu").to_json())
    raw["format_version"] = 1
    del raw["history"]
    raw["benchmarks"] = [{"name": "bw", "measured": 3000.0, "baseline": 3100.0, "unit": "GB/s", "ratio": 0.97,
                          "threshold": 0.9, "baseline_name": "torch", "met": True, "stretch": 1.0,
                          "stretch_met": False, "gate": True, "note": ""}]
    raw["figures"] = [{"name": "plot", "file": "gpu-nvidia-h200/plot.png", "caption": "c"}]
    raw["skipped_parts"] = [{"part": "timing", "reason": "no GPU"}]
    rec = record_from_json(raw, "old.json")
    b = rec.benchmarks[0]
    assert (b.ratio, b.ratio_low, b.ratio_high, b.samples) == (0.97, 0.97, 0.97, 1)
    assert (b.verdict, b.stretch_verdict, b.label) == ("met", "not met", "bw")
    assert "format 1" in b.method
    assert rec.figures == [Figure("plot", "plot.png", "c")]
    assert rec.format_version == FORMAT_VERSION


# -- read errors name the file and the field -------------------------------------------------------

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
    "nan": (lambda raw: json.dumps(raw).replace('"wall_s": 1.5', '"wall_s": NaN'), "NaN is not allowed"),
    "missing-outcome": (_without("outcome"), "outcome: missing"),
    "missing-env": (_without("env"), "env: missing"),
    "missing-version": (_without("format_version"), "no format_version"),
    "future-version": (_with(format_version=FORMAT_VERSION + 1), f"format {FORMAT_VERSION + 1}, newer"),
    "ancient-version": (_with(format_version=0), "too old"),
    "list": (lambda raw: "[1, 2]", "expected a JSON object, found list"),
    "string": (lambda raw: '"a record"', "expected a JSON object, found str"),
    "null": (lambda raw: "null", "expected a JSON object, found NoneType"),
    "unknown-outcome": (_with(outcome="sort-of"), "outcome: 'sort-of' is not one of"),
    "env-not-object": (_with(env="CPU"), "env: expected an object, found text"),
    "checks-not-objects": (_with(checks=["pass"]), "checks[0]: expected an object, found text"),
    "check-missing-status": (_with(checks=[{"name": "x"}]), "checks[0].status: missing"),
    "check-bad-status": (_with(checks=[{"name": "x", "status": "maybe"}]), "checks[0].status: 'maybe' is not one"),
    "wall-time-not-number": (_with(wall_s="abc"), "wall_s: expected a number, found text"),
    "start-not-text": (_with(started_utc=20261129), "started_utc: expected text, found a number"),
    "start-not-a-stamp": (_with(started_utc="yesterday"), "started_utc: expected YYYY-MM-DDTHH:MM:SSZ"),
    "unknown-mode": (_with(mode="tpu"), "mode: 'tpu' is not one of"),
    "bad-hash": (_with(source_hash="abc"), "source_hash: expected 64 hex digits"),
    "bad-lesson": (_with(lesson="../etc"), "lesson: '../etc' is not a lesson name"),
    "benchmark-ratio-text": (_with(benchmarks=[{**bench().__dict__, "ratio": "fast"}]),
                             "benchmarks[0].ratio: expected a number, found text"),
    "benchmark-bad-verdict": (_with(benchmarks=[{**bench().__dict__, "verdict": "great"}]),
                              "benchmarks[0].verdict"),
    "table-rows-not-lists": (_with(tables=[{"name": "t", "columns": ["a"], "rows": ["x"]}]),
                             "tables[0].rows[0]: expected a list"),
}


@pytest.mark.unit
@pytest.mark.parametrize("kind", BAD_FILES)
def test_read_errors_name_the_file_and_field(project, lesson, kind):
    edit, expect = BAD_FILES[kind]
    path = project.evidence / "good" / "interpreter.json"
    path.parent.mkdir(parents=True)
    path.write_text(edit(_good_raw(lesson)), encoding="utf-8")
    with pytest.raises(EvidenceError) as info:
        read_record(path, project.evidence)
    message = str(info.value)
    assert message.startswith(f"{path}"), message
    assert expect in message, message


@pytest.mark.unit
def test_not_utf8_record(project, lesson):
    path = project.evidence / "good" / "interpreter.json"
    path.parent.mkdir(parents=True)
    path.write_bytes(b'{"lesson": "caf\xe9"}')
    with pytest.raises(EvidenceError, match="not UTF-8"):
        read_record(path)


@pytest.mark.integration
@pytest.mark.parametrize("kind", ["truncated", "missing-outcome", "future-version", "list", "checks-not-objects"])
def test_status_and_check_on_a_bad_record_name_it(project, lesson, kind):
    """An unusable record is reported (status says so, --check fails), never a traceback."""
    edit, expect = BAD_FILES[kind]
    path = project.evidence / "good" / "interpreter.json"
    path.parent.mkdir(parents=True)
    path.write_text(edit(_good_raw(lesson)), encoding="utf-8")
    status = project.verify("--status")
    assert status.returncode == 0, status.stderr
    assert str(path) in status.stdout and expect in status.stdout
    data = json.loads(project.verify("--status", "--json").stdout)
    assert len(data[0]["problems"]) == 1 and data[0]["problems"][0].startswith(str(path))
    check = project.verify("--check")
    assert check.returncode == 1
    assert f"check: good: unusable evidence: {path}" in check.stderr and expect in check.stderr
    for result in (status, check):
        assert "Traceback" not in result.stderr


# -- atomic writes -------------------------------------------------------------------------

def _listing(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*")}


@pytest.mark.unit
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


@pytest.mark.unit
def test_a_crash_while_placing_figures_keeps_the_old_record_and_leaves_no_temporary_file(project, lesson,
                                                                                         monkeypatch):
    old = fake_record(lesson, "interpreter", figures=[Figure("plot", PLOT)])
    path = write_record(project.evidence, old, {PLOT: FAKE_PNG})
    old_bytes = path.read_bytes()
    new_png = FAKE_PNG + b"new"
    new_name = hashed_name("plot", new_png)
    real_replace = os.replace

    def replace(src, dst):
        if Path(dst).suffix != ".json":
            raise OSError("disk full")
        real_replace(src, dst)

    monkeypatch.setattr(evidence.os, "replace", replace)
    with pytest.raises(OSError):
        write_record(project.evidence, fake_record(lesson, "interpreter", outcome="failed",
                                                   figures=[Figure("plot", new_name)]), {new_name: new_png})
    monkeypatch.undo()
    assert path.read_bytes() == old_bytes
    assert _listing(project.evidence / "good") == {"interpreter.json", "interpreter", f"interpreter/{PLOT}"}


@pytest.mark.unit
def test_atomic_write_text_replaces_whole(tmp_path):
    path = tmp_path / "r.json"
    path.write_text("old")
    evidence.atomic_write_text(path, "new \u2713")
    assert path.read_text(encoding="utf-8") == "new \u2713"
    assert _listing(tmp_path) == {"r.json"}
    assert path.stat().st_mode & 0o777 == 0o644  # evidence is for every reader


@pytest.mark.unit
def test_figures_are_added_kept_or_removed(project, lesson):
    a_data, b_data = FAKE_PNG + b"A", FAKE_PNG + b"B"
    a, b = hashed_name("a", a_data), hashed_name("b", b_data)
    figs = project.evidence / "good" / "interpreter"
    write_record(project.evidence, fake_record(lesson, "interpreter", figures=[Figure("a", a), Figure("b", b)]),
                 {a: a_data, b: b_data})
    assert _listing(figs) == {a, b}
    mtime = (figs / b).stat().st_mtime_ns
    # a newer record naming only b: a is removed once the JSON is written, b is not rewritten
    write_record(project.evidence, fake_record(lesson, "interpreter", figures=[Figure("b", b)]), {b: b_data})
    assert _listing(figs) == {b} and (figs / b).stat().st_mtime_ns == mtime
    # a record without figures removes them, and their folder
    write_record(project.evidence, fake_record(lesson, "interpreter"))
    assert not figs.exists()
    assert _listing(project.evidence / "good") == {"interpreter.json"}


@pytest.mark.unit
def test_a_record_naming_a_figure_without_its_bytes_is_not_written(project, lesson):
    with pytest.raises(EvidenceError, match=f"no bytes for figure.*{PLOT}"):
        write_record(project.evidence, fake_record(lesson, "interpreter", figures=[Figure("plot", PLOT)]))
    assert not (project.evidence / "good").exists()


@pytest.mark.unit
def test_limits_are_one_table_that_the_docs_show():
    rows = LIMITS.rows()
    assert len(rows) == len(LIMITS.__dataclass_fields__)
    by_what = {what: limit for what, limit, _ in rows}
    assert by_what["one figure (PNG)"] == "4 MiB"
    assert by_what["checks per record"] == f"{LIMITS.checks:,}"
    assert all(where for _, _, where in rows)
