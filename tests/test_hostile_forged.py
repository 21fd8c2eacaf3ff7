"""Hostile input, issue 20: records and bundles that claim more than they can show.

One test (or one parametrized family) per class of the issue:

1. a record whose stated outcome, verdicts or intervals disagree with its own content (exit code, checks,
   rounds, skipped parts, the lesson's [requires]) is unusable: named with file and field at --status,
   --check, the strict build and --import, which refuses it;
2. a GPU record's key is derived from its device name, never taken from the record;
3. start times are strict RFC 3339 UTC; a date more than a day ahead is refused; an import that would change
   the outcome or a ratio beyond noise of a current record lists the changes and replaces nothing without
   --accept-changes; the same bundle twice changes nothing; a refused import never blocks a later one;
4. a benchmark's history is built from this repository's records, never from a bundle;
5. bundle hygiene: duplicate member names, control or non-ASCII names, names ending in a newline.

Each test was written before its fix and failed on the code before it.
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from conftest import PASSING, Project, bench, build_output, fake_record, make_site_project
from verified_triton.judge.evidence import write_record
from verified_triton.judge.status import FAILED, VERIFIED

REQUIRES = '[requires]\ncapability = "9.0"\ntriton = "3.0"\nwhy = "wgmma"\n'


@pytest.fixture
def lesson(project: Project):
    project.add("good", PASSING, toml=REQUIRES)
    return project.lesson("good")


def honest(lesson, **fields):
    """A passing GPU record whose every claim its content bears out: a gate met, a stretch goal within noise."""
    return fake_record(lesson, "gpu", benchmarks=[bench("bw", 1.2, 1.1, 1.3, unit="GB/s", threshold=1.0,
                                                        stretch=1.25, label="bandwidth")], **fields)


def raw(record) -> dict:
    return json.loads(record.to_json())


def tar_of(path: Path, members: list[tuple[str, bytes]]) -> Path:
    """A bundle with these members, in this order (the same name may come twice)."""
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def bundle_of(path: Path, *records: dict) -> Path:
    return tar_of(path, [(f"{r['lesson']}/{r['key']}.json", json.dumps(r).encode()) for r in records])


# -- 1. judge, don't trust ----------------------------------------------------------------------------

def _set(path: str, value):
    """An edit of the raw record at a dotted path (benchmarks.0.verdict)."""
    def edit(r: dict) -> None:
        *parents, last = path.split(".")
        here = r
        for part in parents:
            here = here[int(part)] if part.isdigit() else here[part]
        here[int(last) if last.isdigit() else last] = value
    return edit


def _rounds_of_a_slower_kernel(r: dict) -> None:
    b = raw_bench_ms()
    b["kernel_ms"] = [k * 2 for k in b["kernel_ms"]]  # the rounds say 0.6x; the record still says 1.2x, met
    r["benchmarks"][0] = b


def _a_failed_check(r: dict) -> None:
    r["checks"].append({"name": "matches-torch", "status": "fail", "message": "off by 3"})


def _not_met_but_passed(r: dict) -> None:
    b = r["benchmarks"][0]
    b["threshold"], b["verdict"] = 2.0, "not met"  # honest verdict, but a gate not met cannot pass


FORGED = {
    # what the record says about itself -> the field named, and words of the reason
    "passed-with-exit-1": (_set("exit_code", 1), "exit_code", "exit code 1"),
    "passed-with-a-failed-check": (_a_failed_check, "checks[1].status", "failed check"),
    "passed-with-a-gate-not-met": (_not_met_but_passed, "benchmarks[0].verdict", "gate"),
    "verdict-not-from-interval": (_set("benchmarks.0.verdict", "within noise"), "benchmarks[0].verdict",
                                  "the interval"),
    "stretch-verdict-forged": (_set("benchmarks.0.stretch_verdict", "met"), "benchmarks[0].stretch_verdict",
                               "the interval"),
    "interval-not-from-rounds": (_set("benchmarks.0.ratio_low", 1.15), "benchmarks[0].ratio_low", "rounds"),
    "ratio-not-from-rounds": (_rounds_of_a_slower_kernel, "benchmarks[0].ratio", "rounds"),
    "rounds-missing": (_set("benchmarks.0.kernel_ms", []), "benchmarks[0].kernel_ms", "no rounds"),
    "samples-miscounted": (_set("benchmarks.0.samples", 40), "benchmarks[0].samples", "rounds"),
    "ms-median-forged": (lambda r: r["benchmarks"].__setitem__(0, {**raw_bench_ms(), "measured": 0.5}),
                         "benchmarks[0].measured", "median"),
    "gpu-run-with-skipped-parts": (_set("skipped_parts", [{"part": "timing", "reason": "x"}]), "skipped_parts",
                                   "interpreter"),
    "capability-below-requires": (_set("env.capability", "1.3"), "env.capability", "9.0"),
    "capability-missing": (_set("env.capability", ""), "env.capability", "9.0"),
    "triton-below-requires": (_set("env.triton", "2.1.0"), "env.triton", "3.0"),
    "by-design-exit-0": (lambda r: r.update(outcome="by-design", reason="declined"), "exit_code", "by design"),
    "by-design-without-reason": (lambda r: r.update(outcome="by-design", exit_code=3, reason=""), "reason",
                                 "by design"),
    "timeout-with-exit-code": (lambda r: r.update(outcome="timeout"), "exit_code", "timed out"),
    "crashed-with-exit-0": (lambda r: r.update(outcome="crashed"), "exit_code", "signal"),
}


def raw_bench_ms() -> dict:
    return json.loads(json.dumps(bench("t", 1.2, 1.1, 1.3, threshold=1.0).__dict__))


@pytest.mark.integration
@pytest.mark.parametrize("case", FORGED, ids=list(FORGED))
def test_a_record_that_contradicts_itself_is_unusable_everywhere(case, project, lesson, tmp_path):
    edit, field, words = FORGED[case]
    write_record(project.evidence, fake_record(lesson, "interpreter"))
    good = raw(honest(lesson))
    # the honest record is VERIFIED: the rules below are about the forgery, not the shape of the test record
    path = project.record_file("good", "gpu-nvidia-h200")
    path.write_text(json.dumps(good), encoding="utf-8")
    assert project.judge("good").status == VERIFIED, project.judge("good").problems
    forged = json.loads(json.dumps(good))
    edit(forged)
    path.write_text(json.dumps(forged), encoding="utf-8")

    st = project.judge("good")
    assert st.status != VERIFIED and st.modes["gpu"].record is None
    assert len(st.problems) == 1 and st.problems[0].startswith(f"{path}: {field}: "), st.problems
    assert words in st.problems[0], st.problems[0]
    check = project.verify("--check")
    assert check.returncode == 1 and f"{path}: {field}: " in check.stderr and "Traceback" not in check.stderr

    # the same record in a bundle is refused, naming the member and the field; nothing here changes
    path.unlink()
    before = project.files()
    bundle = bundle_of(tmp_path / "forged.tar.gz", forged)
    imported = project.verify("--import", str(bundle))
    assert imported.returncode == 1, imported.stdout + imported.stderr
    assert f"{bundle}:good/gpu-nvidia-h200.json: {field}: " in imported.stderr and "refused" in imported.stderr
    assert project.files() == before


@pytest.mark.unit
def test_a_by_design_record_matches_an_expected_exit_or_a_decline(project, tmp_path):
    project.add("gated", PASSING, toml='[gpu.expected_exits]\n"1" = "the gate of this lesson"\n')
    lesson = project.lesson("gated")
    for exit_code, reason, usable in ((3, "needs a bigger GPU", True), (1, "the gate of this lesson", True),
                                      (1, "some other words", False), (2, "needs a bigger GPU", False)):
        write_record(project.evidence, fake_record(lesson, "gpu", "by-design", exit_code=exit_code, reason=reason))
        st = project.judge("gated")
        assert (st.problems == []) == usable, (exit_code, reason, st.problems)


@pytest.mark.integration
def test_a_forged_pass_fails_the_strict_build(tmp_path):
    site = make_site_project(tmp_path / "site")
    site.add_lesson("plain", "---\nlesson: plain\n---\n\n# Plain\n\n::status\n", toml=REQUIRES)
    record = site.make_record("plain", "gpu", exit_code=1)
    record.env.capability = "9.0"
    path = site.write(record)
    result = site.build()
    assert result.returncode != 0
    assert f"{path}: exit_code: " in build_output(result) and "Traceback" not in build_output(result)


@pytest.mark.unit
def test_every_committed_record_is_consistent():
    """The judgement's rules hold for the real evidence: no committed record contradicts itself."""
    from conftest import REPO
    from verified_triton.core.lessons import discover
    from verified_triton.judge.status import judge

    statuses = {lesson.name: judge(lesson, REPO / "evidence") for lesson in discover(REPO / "code")}
    assert {name: st.problems for name, st in statuses.items() if st.problems} == {}
    assert FAILED not in {st.status for st in statuses.values()}


# -- 2. keys are derived ---------------------------------------------------------------------------------

@pytest.mark.integration
def test_a_gpu_key_that_its_device_does_not_name_is_refused(project, lesson, tmp_path):
    forged = raw(honest(lesson, key="gpu-forged-model"))  # env.device_name is "NVIDIA H200"
    bundle = bundle_of(tmp_path / "forged.tar.gz", forged)
    imported = project.verify("--import", str(bundle))
    assert imported.returncode == 1, imported.stdout + imported.stderr
    assert f"{bundle}:good/gpu-forged-model.json: key: " in imported.stderr and "gpu-nvidia-h200" in imported.stderr
    assert project.files() == {}
    # written here by hand, it is unusable and named
    path = project.record_file("good", "gpu-forged-model")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(forged), encoding="utf-8")
    st = project.judge("good")
    assert st.records == [] and len(st.problems) == 1 and st.problems[0].startswith(f"{path}: key: ")
    check = project.verify("--check")
    assert check.returncode == 1 and f"{path}: key: " in check.stderr


# -- 3. time ------------------------------------------------------------------------------------------------

@pytest.mark.unit
@pytest.mark.parametrize("stamp", ["２０２６-01-02T03:04:05Z", "2026-01-02T03:04:05Z\n", "2026-02-30T03:04:05Z",
                                   "2026-01-02T25:04:05Z", "2026-01-02T23:59:60Z", "2026-01-02T03:04:05+00:00",
                                   "2026-01-02 03:04:05Z", "2026-01-02T03:04:05.5Z", "2026-01-02T03:04:05z"])
def test_a_start_time_is_strict_ascii_rfc3339_utc(project, lesson, tmp_path, stamp):
    for field, edit in (("started_utc", lambda r: r.update(started_utc=stamp)),
                        ("history.bw[0].started_utc", lambda r: r.update(history={"bw": [{
                            "started_utc": stamp, "source_hash": "a" * 64, "triton": "3.6.0", "ratio": 1.0,
                            "ratio_low": 0.9, "ratio_high": 1.1}]}))):
        record = raw(honest(lesson))
        edit(record)
        path = project.record_file("good", "gpu-nvidia-h200")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(record), encoding="utf-8")
        st = project.judge("good")
        assert st.records == [] and st.problems[0].startswith(f"{path}: {field}: expected YYYY-MM-DDTHH:MM:SSZ")
        path.unlink()


def failed_here(project: Project, lesson) -> None:
    """An honest FAILED GPU record: a gate not met, exit 1."""
    write_record(project.evidence, fake_record(lesson, "gpu", "failed", exit_code=1, reason="target bw",
                                               started="2026-01-02T03:04:05Z",
                                               benchmarks=[bench("bw", 0.8, 0.7, 0.9, threshold=1.0)]))


@pytest.mark.integration
def test_a_date_in_the_future_is_refused_and_blocks_nothing(project, lesson, tmp_path):
    failed_here(project, lesson)
    before = project.files()
    forged = raw(honest(lesson, started="9999-12-31T23:59:59Z"))
    bundle = bundle_of(tmp_path / "future.tar.gz", forged)
    result = project.verify("--import", str(bundle))
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"{bundle}:good/gpu-nvidia-h200.json: started_utc: 9999-12-31T23:59:59Z is more than a day ahead" \
        in result.stderr
    assert project.files() == before
    # a later honest import is judged against the record here, as if the forged one had never come
    later = bundle_of(tmp_path / "later.tar.gz", raw(honest(lesson, started="2026-02-01T00:00:00Z")))
    result = project.verify("--import", str(later), "--accept-changes")
    assert result.returncode == 0, result.stdout + result.stderr
    assert project.record("good", "gpu-nvidia-h200").started_utc == "2026-02-01T00:00:00Z"


@pytest.mark.integration
def test_a_change_of_a_current_record_is_listed_and_needs_accept_changes(project, lesson, tmp_path):
    failed_here(project, lesson)
    before = project.files()
    newer = raw(honest(lesson, started="2026-02-01T00:00:00Z"))  # passed, bw 0.8x -> 1.2x
    bundle = bundle_of(tmp_path / "newer.tar.gz", newer)
    result = project.verify("--import", str(bundle))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "good/gpu-nvidia-h200: outcome: failed -> passed" in result.stderr
    assert "good/gpu-nvidia-h200: bandwidth: 0.800x [0.700, 0.900] -> 1.200x [1.100, 1.300]" in result.stderr
    assert "--accept-changes" in result.stderr
    assert project.files() == before
    # a claimed date alone settles nothing: an older record does not silently replace a newer one either
    older = bundle_of(tmp_path / "older.tar.gz", raw(honest(lesson, started="2025-06-01T00:00:00Z")))
    result = project.verify("--import", str(older))
    assert result.returncode == 1 and "2026-01-02T03:04:05Z here -> 2025-06-01T00:00:00Z" in result.stderr
    assert project.files() == before
    accepted = project.verify("--import", str(bundle), "--accept-changes")
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr
    assert project.record("good", "gpu-nvidia-h200").outcome == "passed"


@pytest.mark.integration
def test_the_same_bundle_twice_changes_nothing(project, lesson, tmp_path):
    bundle = bundle_of(tmp_path / "b.tar.gz", raw(honest(lesson)), raw(fake_record(lesson, "interpreter")))
    first = project.verify("--import", str(bundle))
    assert first.returncode == 0, first.stdout + first.stderr
    after_first = project.files()
    second = project.verify("--import", str(bundle))
    assert second.returncode == 0, second.stdout + second.stderr
    assert "2 unchanged" in second.stdout and "0 records merged" in second.stdout
    assert project.files() == after_first


# -- 4. history belongs to this repository ----------------------------------------------------------------

@pytest.mark.integration
def test_a_bundle_never_brings_its_own_history(project, lesson, tmp_path):
    here = honest(lesson, started="2026-01-01T00:00:00Z")
    here.history = {"bw": [{"started_utc": f"2025-12-{d:02d}T00:00:00Z", "source_hash": "a" * 64, "triton": "3.6.0",
                            "ratio": 1.2, "ratio_low": 1.1, "ratio_high": 1.3} for d in (1, 2)]}
    from verified_triton.judge.evidence import record_from_json

    write_record(project.evidence, record_from_json(raw(here), "here"))
    incoming = raw(honest(lesson, started="2026-02-01T00:00:00Z"))
    incoming["history"] = {"bw": [{"started_utc": f"2026-01-{d:02d}T12:00:00Z", "source_hash": "b" * 64,
                                   "triton": "9.9.9", "ratio": 9.0, "ratio_low": 8.9, "ratio_high": 9.1}
                                  for d in range(2, 14)]}  # twelve fabricated points, all newer than ours
    result = project.verify("--import", str(bundle_of(tmp_path / "b.tar.gz", incoming)))
    assert result.returncode == 0, result.stdout + result.stderr
    history = project.record("good", "gpu-nvidia-h200").history["bw"]
    assert [p.started_utc for p in history] == ["2025-12-01T00:00:00Z", "2025-12-02T00:00:00Z",
                                                "2026-01-01T00:00:00Z"]
    assert all(p.ratio != 9.0 for p in history)


# -- 5. bundle hygiene ------------------------------------------------------------------------------------------

@pytest.mark.integration
def test_a_member_name_that_comes_twice_refuses_the_bundle(project, lesson, tmp_path):
    first, second = raw(honest(lesson)), raw(honest(lesson, started="2026-01-03T00:00:00Z"))
    name = "good/gpu-nvidia-h200.json"
    bundle = tar_of(tmp_path / "twice.tar.gz", [(name, json.dumps(first).encode()),
                                                (name, json.dumps(second).encode())])
    result = project.verify("--import", str(bundle))
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"{bundle}:{name}: a second member of this name" in result.stderr
    assert project.files() == {}


@pytest.mark.integration
@pytest.mark.parametrize("name", ["good/gpu-nvidia-h200/x.png\n", "good/gpu-nvidia-h200.json\n",
                                  "good/gpu-nvidia-h200/x\x1b[31m.png", "good/gpu-nvidia-h200/plöt.png",
                                  "good/gpu-nvidia-h200/x\u202egnp.png"])
def test_a_member_name_with_a_newline_control_or_non_ascii_character_is_refused(project, lesson, tmp_path, name):
    from conftest import FAKE_PNG
    from verified_triton.core.kit import Figure

    file = name.rsplit("/", 1)[1]
    record = honest(lesson)
    members = [("good/gpu-nvidia-h200.json", record.to_json().encode())]
    if name.endswith(".json\n"):
        members = [(name, record.to_json().encode())]
    else:
        record.figures = [Figure("plot", file)]
        members = [("good/gpu-nvidia-h200.json", record.to_json().encode()), (name, FAKE_PNG)]
    bundle = tar_of(tmp_path / "names.tar.gz", members)
    result = project.verify("--import", str(bundle))
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"{bundle}:{ascii(name)[1:-1]}: a name with a newline, control or non-ASCII character" in result.stderr
    assert project.files() == {} and not list(project.evidence.rglob("*\n*"))


@pytest.mark.unit
def test_a_record_naming_a_figure_file_with_a_trailing_newline_is_refused(project, lesson):
    from verified_triton.core.kit import Figure

    record = honest(lesson)
    record.figures = [Figure("plot", "x.png\n")]
    path = project.record_file("good", "gpu-nvidia-h200")
    path.parent.mkdir(parents=True)
    path.write_text(record.to_json(), encoding="utf-8")
    st = project.judge("good")
    assert st.records == [] and st.problems[0].startswith(f"{path}: figures[0].file: ")
