"""Hostile input, issue 47 (round 4): a record is compared by its structure.

An import that would replace a current record of the same source lists every field that changes, recursively,
but the few an explicit list lets change silently (dates, wall times, the environment, this repository's
history) or move within their noise rule (measured values); the first record of a new GPU model needs
acceptance in every mode on a GPU, the memory check included. Each test here was written against the code
before the change and failed there:

1. a sanitize bundle turning an initcheck "timed out" into "clean" (PARTIALLY VERIFIED to VERIFIED), or
   rewriting a "declared harmless" explanation, merged with exit 0; a first sanitize record of a new GPU model
   carrying a memcheck error flipped a lesson to FAILED with exit 0;
3. a bundle changing every number of a compiled-code table, or one step's output, merged silently;
and the kind of bug: every leaf of a fully populated record, changed, is listed unless the list lets it pass,
so a field added to the format is compared the day it is added.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime
from pathlib import Path

import pytest

from conftest import PASSING, bench, fake_record
from verified_triton.core import kit
from verified_triton.judge.evidence import (
    HistoryPoint,
    Record,
    SanitizerFinding,
    SanitizerLocation,
    SanitizerRun,
    SanitizerToolRun,
    sanitize_key,
    write_record,
)
from verified_triton.judge.status import FAILED, PARTIAL, VERIFIED, judge
from verified_triton.record.bundles import import_bundles, write_bundle
from verified_triton.record.changes import MEASURED, SAID, SILENT, differences

pytestmark = pytest.mark.unit

NOW = datetime.datetime(2026, 6, 1, tzinfo=datetime.UTC)
MAIN = "code/good/good.py"


@pytest.fixture
def good(project):
    project.add("good", PASSING)
    return project


def runs(**states) -> list[SanitizerToolRun]:
    """The four tools clean, but where `states` says otherwise (tool=state)."""
    out = []
    for tool in kit.SANITIZER_TOOLS:
        run = SanitizerToolRun(tool=tool, state="clean", command=f"compute-sanitizer --tool {tool} python {MAIN}",
                               exit_code=0, wall_s=3.0, app_outcome="passed")
        state = states.get(tool, "clean")
        if state == "timeout":
            run.state, run.exit_code, run.reason = "timeout", None, "killed after the 150 s timeout"
        elif state == "errors":
            run.state, run.errors, run.exit_code = "findings", 2, 86
            run.findings = [SanitizerFinding("memory-access", "Invalid __global__ write of size 4 bytes",
                                             [SanitizerLocation("store_kernel", MAIN, 7)], 2)]
        elif state == "declared":
            run.state, run.errors = "findings", 1
            run.findings = [SanitizerFinding("race", "Error: race between accesses",
                                             [SanitizerLocation("store_kernel", MAIN, 7, "Write"),
                                              SanitizerLocation("store_kernel", MAIN, 8, "Read")], 1, 25, "Error")]
        out.append(run)
    return out


def memory(lesson, device="NVIDIA H200", known=(), started="2026-01-02T03:04:05Z", **states) -> Record:
    env = fake_record(lesson, "gpu", device=device).env
    return fake_record(lesson, "sanitize", key=sanitize_key(device), env=env, started=started,
                       sanitizer=SanitizerRun("2025.3.1.0", "smoke", runs(**states), list(known)))


def declared(why: str) -> kit.KnownFinding:
    return kit.KnownFinding("racecheck", "store_kernel", ["good.py:7-8"], [kit.SourceSpan(MAIN, 7, 8)], why)


def take(project, tmp_path: Path, *records: Record, accept: bool = False):
    """Import a bundle of these records into the project, as verify --import does."""
    path = tmp_path / f"b{len(list(tmp_path.glob('b*.tar.gz')))}.tar.gz"
    scratch = tmp_path / "scratch-evidence"
    for record in records:
        write_record(scratch, record)
    write_bundle(path, list(records), scratch)
    lessons = {"good": project.lesson("good")}
    return import_bundles([path], lessons, project.evidence, accept_changes=accept, now=NOW)


def verified(project):
    lesson = project.lesson("good")
    for mode in ("interpreter", "gpu"):
        write_record(project.evidence, fake_record(lesson, mode))
    return lesson


# -- 1. sanitize records ----------------------------------------------------------------------------

def test_a_timed_out_tool_turned_clean_by_a_bundle_is_held_back(good, tmp_path):
    lesson = verified(good)
    write_record(good.evidence, memory(lesson, initcheck="timeout"))
    assert judge(lesson, good.evidence).status is PARTIAL
    before = good.files()
    report = take(good, tmp_path, memory(lesson, started="2026-01-03T00:00:00Z"))
    assert not report.ok and good.files() == before
    held = "\n".join(report.held)
    assert "sanitizer.runs[initcheck].state: 'timeout' -> 'clean'" in held, held
    assert judge(lesson, good.evidence).status is PARTIAL
    assert take(good, tmp_path, memory(lesson, started="2026-01-03T00:00:00Z"), accept=True).ok
    assert judge(lesson, good.evidence).status is VERIFIED


def test_a_rewritten_explanation_of_a_harmless_finding_is_held_back(good, tmp_path):
    lesson = verified(good)
    honest = memory(lesson, known=[declared("the barrier orders the two accesses")], racecheck="declared")
    write_record(good.evidence, honest)
    assert judge(lesson, good.evidence).status is VERIFIED
    forged = dataclasses.replace(honest, started_utc="2026-01-03T00:00:00Z",
                                 sanitizer=dataclasses.replace(honest.sanitizer,
                                                               known=[declared("<b>nothing to see</b>")]))
    report = take(good, tmp_path, forged)
    assert not report.ok
    said = "sanitizer.known[racecheck].why: 'the barrier orders the two accesses' -> '<b>nothing to see</b>'"
    assert any(said in line for line in report.held), report.held


def test_a_first_memory_check_of_a_new_gpu_model_is_held_back(good, tmp_path):
    lesson = verified(good)
    write_record(good.evidence, memory(lesson))
    assert judge(lesson, good.evidence).status is VERIFIED
    before = good.files()
    report = take(good, tmp_path, memory(lesson, device="NVIDIA H100 80GB HBM3", memcheck="errors"))
    assert not report.ok and good.files() == before
    assert report.held == ["good/sanitize-gpu-nvidia-h100-80gb-hbm3: a new GPU model here (NVIDIA H100 80GB HBM3), "
                           "its first memory check: not recorded -> passed"]
    assert judge(lesson, good.evidence).status is VERIFIED
    assert take(good, tmp_path, memory(lesson, device="NVIDIA H100 80GB HBM3", memcheck="errors"), accept=True).ok
    assert judge(lesson, good.evidence).status is FAILED


def test_a_lessons_first_memory_check_needs_no_acceptance(good, tmp_path):
    lesson = verified(good)
    assert take(good, tmp_path, memory(lesson, device="NVIDIA H100 80GB HBM3")).ok


# -- 3. tables and step output ----------------------------------------------------------------------

COMPILED = kit.Table("compiled", ["kernel", "registers", "shared KiB", "TFLOP/s"],
                     [["tiled", 220, 144.0, 600.0], ["tma", 168, 208.0, 650.0]])


def with_output(lesson, table=COMPILED, step_out="max error 1.2e-07\n0.52 ms\n", **fields):
    return fake_record(lesson, "gpu", tables=[table], steps=[kit.Step("intro", step_out)],
                       stdout="GPU: NVIDIA H200\n" + step_out, **fields)


def test_a_bundle_changing_every_number_of_a_table_is_held_back(good, tmp_path):
    lesson = good.lesson("good")
    write_record(good.evidence, fake_record(lesson, "interpreter"))
    write_record(good.evidence, with_output(lesson))
    doubled = kit.Table("compiled", COMPILED.columns, [[r[0], *(2 * x for x in r[1:])] for r in COMPILED.rows])
    report = take(good, tmp_path, with_output(lesson, doubled, started="2026-01-03T00:00:00Z"))
    assert not report.ok
    assert any(line.startswith("good/gpu-nvidia-h200: tables[compiled].rows: ") for line in report.held), report.held


def test_a_bundle_rewriting_one_steps_output_is_held_back(good, tmp_path):
    lesson = good.lesson("good")
    write_record(good.evidence, with_output(lesson))
    rewritten = with_output(lesson, step_out="max error 1.2e-07\n<script>alert(1)</script>\n",
                            started="2026-01-03T00:00:00Z")
    report = take(good, tmp_path, rewritten)
    assert not report.ok
    assert any("steps[intro].stdout: its text changed" in line for line in report.held), report.held


def test_a_rerun_whose_measurements_moved_within_noise_merges_unlisted(good, tmp_path):
    """The same source run again: times printed and tabulated a few percent apart, another date, wall time and
    driver, the memory addresses of a report: nothing to review."""
    lesson = good.lesson("good")
    write_record(good.evidence, with_output(lesson))
    timed = kit.Table("compiled", COMPILED.columns, [[*r[:3], r[3] * 1.04] for r in COMPILED.rows])
    again = with_output(lesson, timed, step_out="max error 1.19e-07\n0.54 ms\n", started="2026-01-09T00:00:00Z",
                        wall_s=99.0)
    again.env.driver = "560.1"
    report = take(good, tmp_path, again)
    assert report.ok and report.held == [] and len(report.merged) == 1


# -- the kind of bug: every field is compared ---------------------------------------------------------

def full_records(lesson) -> list[Record]:
    """A GPU record and a sanitize record with every list filled and every optional field set."""
    gpu = fake_record(
        lesson, "gpu", reason="", stderr="a warning\n", stdout="out 1.0\n",
        checks=[kit.Check("c1", "pass", "close to 1e-6", "why it matters", "intro")],
        benchmarks=[bench("b", 1.5, 1.4, 1.6, threshold=1.2, stretch=1.4, note="a note", label="b vs torch")],
        tables=[kit.Table("t", ["a", "b"], [["x", 1], ["y", 2.5]], "a caption", "intro")],
        figures=[kit.Figure("plot", "plot-0123456789ab.png", "a caption", "plot-dark-0123456789ab.png", "intro")],
        steps=[kit.Step("intro", "out 1.0\n", 0, "", False)],
        predictions=[kit.Prediction("p", 1.5, "bytes over bandwidth", 0.2, "b", "ratio")],
        filtered_warnings=[kit.FilteredWarning("deprecated", "torch says so", 2, "UserWarning: deprecated")],
        history={"b": [HistoryPoint("2025-12-01T00:00:00Z", "1" * 64, "3.6.0", 1.4, 1.3, 1.5)]})
    gpu.env.baselines = {"liger-kernel": "0.5.0"}
    gpu.benchmarks[0].library = "Liger-Kernel"
    gpu.benchmarks[0].step = "intro"
    run = runs(racecheck="declared")
    run[3].notes, run[3].log, run[3].reason, run[3].not_printed = ["a note"], "log text", "why", 0
    run[3].findings[0].detail, run[3].findings[0].host_frame = "by thread (1,0,0)", f"{MAIN}:30"
    san = fake_record(lesson, "sanitize", key=sanitize_key("NVIDIA H200"), skipped_parts=[],
                      sanitizer=SanitizerRun("2025.3.1.0", "smoke", run, [declared("the barrier orders them")]))
    interp = fake_record(lesson, "interpreter", skipped_parts=[kit.SkippedPart("timing", "no timing here")])
    return [gpu, san, interp]


def leaves(node, path=()):
    """Every leaf of a JSON-like value, with its path of keys and indices."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from leaves(value, (*path, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from leaves(value, (*path, i))
    else:
        yield path, node


def shape(path) -> str:
    """'sanitizer.runs[].findings[].detail' for ('sanitizer', 'runs', 3, 'findings', 0, 'detail')."""
    out = ""
    for part in path:
        out += "[]" if isinstance(part, int) else f".{part}" if out else part
    return out


def changed(value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value * 3 + 7
    if isinstance(value, str):
        return value + " and more words"
    return 1.5  # a None becomes a value


def test_every_field_of_a_record_changed_is_listed_unless_the_list_lets_it_change(good):
    lesson = good.lesson("good")
    covered = 0
    for record in full_records(lesson):
        raw = dataclasses.asdict(record)
        for path, value in leaves(raw):
            where = shape(path)
            if any(where == s or where.startswith(s + ".") or where.startswith(s + "[") for s in SILENT):
                continue
            if where == "sanitizer" and value is None:
                continue  # a GPU record has none (and a sanitize record's are changed below)
            if where.startswith("benchmarks[].") and where.split(".")[1].split("[")[0] in (
                    "kernel_ms", "baseline_ms", "ratio", "ratio_low", "ratio_high", "measured", "baseline"):
                continue  # the rounds move together, by the interval rule (tests/test_hostile_trust.py)
            incoming = copy.deepcopy(record)
            node = incoming
            for part in path[:-1]:
                node = node[part] if isinstance(node, list | dict) else getattr(node, part)
            if isinstance(node, list | dict):
                node[path[-1]] = changed(value)
            else:
                setattr(node, path[-1], changed(value))
            found = differences(record, incoming)
            assert found, f"{record.key}: {where} changed from {value!r} unlisted"
            covered += 1
    assert covered > 80
    # the lists name fields that exist: a renamed field would otherwise leave its new name silent
    fields = {shape(p) for r in full_records(lesson) for p, _v in leaves(dataclasses.asdict(r))}
    for name in SILENT | MEASURED | SAID:
        assert any(f == name or f.startswith(name + ".") or f.startswith(name + "[") for f in fields), name


def test_only_the_silent_fields_change_unlisted(good):
    lesson = good.lesson("good")
    for record in full_records(lesson):
        later = dataclasses.replace(record, started_utc="2026-02-01T00:00:00Z", wall_s=record.wall_s * 9,
                                    env=dataclasses.replace(record.env, driver="999.9", torch="9.9"),
                                    history={})
        assert differences(record, later) == []
        earlier = dataclasses.replace(record, started_utc="2025-02-01T00:00:00Z")
        assert differences(record, earlier) == [f"started: {record.started_utc} here -> 2025-02-01T00:00:00Z in the "
                                                "bundle (older than the record here)"]
