"""Hostile input, issue 30 (round 3), items 3 to 9: what the import compares, figures by content, the same
bytes verified and imported, every text scrubbed, declared exits, smoke runs, the glossary's parser.

3. an import for the same source lists (and, without --accept-changes, holds back) every change of what that
   source determines: checks and their outcomes, gates, thresholds and stretch targets, predictions and their
   verdicts, steps, figures' bytes, skipped parts; an interval implausibly wide for its method; and a new GPU
   model's first record;
4. a figure's file name holds the hash of its bytes: an import refuses a figure whose bytes differ from its
   name, a planted file in place is replaced by the honest import that follows, and the site reads no figure
   whose bytes do not match its name;
5. with --require-attestation the bundle is copied once into a private file, and that copy is what `gh`
   verifies and what is imported; gh's output is read bounded and parsed with a depth bound, never a
   traceback;
6. every text of a record is scrubbed of machine paths, what each step printed included, and the migration
   finds what the scrubber missed before;
7. a declared exit ([gpu.expected_exits]) is by design only when no recorded check failed, in the runner and
   in the judgement;
8. a smoke run works in a scratch copy of code/, and ends every process the lesson started, in a session of
   its own too;
9. the glossary's reader and the prose lint take linear time on pathological lines.

Each test was written before its fix and failed on the code before it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import textwrap
import time
from pathlib import Path

import pytest

from conftest import PASSING, REPO, Project, base_env, bench, fake_record
from verified_triton.core.kit import Check, Figure, FilteredWarning, Prediction, SkippedPart, Step, Table
from verified_triton.judge.evidence import EvidenceError, read_figure, write_record
from verified_triton.judge.status import FAILED, VERIFIED, contradictions

PNG = b"\x89PNG\r\n\x1a\n"


def png_bytes(tag: bytes) -> bytes:
    return PNG + b"figure " + tag


def sha_name(stem: str, data: bytes) -> str:
    return f"{stem}-{hashlib.sha256(data).hexdigest()[:12]}.png"


def tar_of(path: Path, members: list[tuple[str, bytes]]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def bundle(path: Path, *records, figures: dict[str, bytes] | None = None) -> Path:
    """A bundle of these records; `figures`: member name under <lesson>/<key>/ -> bytes."""
    members = [(f"{r.lesson}/{r.key}.json", r.to_json().encode()) for r in records]
    for r in records:
        members += [(f"{r.lesson}/{r.key}/{name}", data) for name, data in (figures or {}).items()
                    if name in {f.file for f in r.figures} | {f.dark_file for f in r.figures}]
    return tar_of(path, members)


@pytest.fixture
def good(project: Project):
    project.add("good", PASSING)
    return project


def passing(lesson, mode="gpu", **fields):
    fields.setdefault("checks", [Check(f"c{i}", "pass", "fine") for i in range(5)])
    return fake_record(lesson, mode, **fields)


# -- 7. a declared exit hides no failed check ------------------------------------------------------------

DECLARED = '[interpreter.expected_exits]\n"1" = "capability gate: needs tensor cores"\n'
FAILS_THEN_EXITS_1 = """\
    lesson = Lesson("declared")
    lesson.check("matches-torch", False, "off by 3")
    sys.exit(lesson.finish())
"""


@pytest.mark.integration
def test_a_declared_exit_with_a_failed_check_is_recorded_as_a_failure(project):
    project.add("declared", FAILS_THEN_EXITS_1, toml=DECLARED)
    result = project.verify("--mode", "interpreter", "--lesson", "declared")
    record = project.record("declared")
    assert (record.outcome, record.exit_code) == ("failed", 1), result.stdout + result.stderr
    assert "matches-torch" in record.reason and "capability gate" in record.reason
    assert project.judge("declared").status == FAILED


@pytest.mark.integration
def test_the_judgement_refuses_a_by_design_record_with_a_failed_check(project):
    """Whatever a bundle claims: a declared exit, or the kit's decline, after a failed check is no design."""
    project.add("declared", PASSING, toml=DECLARED.replace("interpreter", "gpu"))
    lesson = project.lesson("declared")
    failed = [Check("fine", "pass"), Check("matches-torch", "fail", "off by 3")]
    for code, reason in ((1, "capability gate: needs tensor cores"), (3, "needs a bigger GPU")):
        forged = fake_record(lesson, "gpu", "by-design", exit_code=code, reason=reason, checks=failed)
        assert any(p.startswith("checks[1].status: a failed check") for p in contradictions(lesson, forged)), code
        honest = dataclasses.replace(forged, checks=failed[:1])
        assert contradictions(lesson, honest) == []
    write_record(project.evidence, forged)
    result = project.verify("--check", "--lesson", "declared")
    assert result.returncode == 1 and "checks[1].status" in result.stdout + result.stderr


# -- 6. every text field scrubbed ---------------------------------------------------------------------------

HOME = "/home/alice/src/verified-triton"


def strings(node, path="record"):
    """Every string of a record, with where it is."""
    if dataclasses.is_dataclass(node):
        for f in dataclasses.fields(node):
            yield from strings(getattr(node, f.name), f"{path}.{f.name}")
    elif isinstance(node, dict):
        for k, v in node.items():
            yield from strings(k, f"{path}[key]")
            yield from strings(v, f"{path}[{k!r}]")
    elif isinstance(node, list | tuple):
        for i, v in enumerate(node):
            yield from strings(v, f"{path}[{i}]")
    elif isinstance(node, str):
        yield path, node


def dirty_record(lesson):
    at = f"{HOME}/code/good/good.py"
    return fake_record(
        lesson, "gpu", stdout=f"ran {at}\n", reason="", command=f"python {at}",
        checks=[Check("fine", "pass", f"ran {at}", why=f"compares with {at}")],
        steps=[Step("first", stdout=f"reading /tmp/vt-verify-1-good/data from {at}\n", not_run="")],
        tables=[Table("t", ["where", f"{HOME}/col"], [[f"{HOME}/x", 1]], caption=f"made in {HOME}")],
        figures=[], benchmarks=[bench("b", label=f"kernel of {at}", note=f"{HOME}/n", baseline_name="torch")],
        predictions=[Prediction("p", 1.0, f"bytes moved, from {HOME}/model.txt", 0.2, of="b")],
        filtered_warnings=[FilteredWarning("deprecated", f"raised in {HOME}/lib.py", 1, f"UserWarning: {at}:3")],
        skipped_parts=[])


@pytest.mark.unit
def test_every_text_of_a_record_is_scrubbed_step_output_included(good):
    from verified_triton.record.scrub import scrub_record, scrubber

    record = dirty_record(good.lesson("good"))
    hashes = (record.source_hash, record.source_files)
    scrub_record(record, scrubber(good.root))
    left = [(where, text) for where, text in strings(record) if "/home/" in text or "/tmp/" in text]
    assert left == []
    assert record.steps[0].stdout == ("reading <tmp>/vt-verify-1-good/data from "
                                      "~/src/verified-triton/code/good/good.py\n")
    assert (record.source_hash, record.source_files) == hashes


@pytest.mark.integration
def test_the_migration_finds_paths_in_what_a_step_printed(good):
    lesson = good.lesson("good")
    dirty = passing(lesson, steps=[Step("first", stdout=f"loaded {HOME}/code/good/data.bin\n")])
    write_record(good.evidence, dirty)
    script = REPO / "tools" / "migrate.py"

    def migrate(*args):
        return subprocess.run([sys.executable, str(script), "--evidence-dir", str(good.evidence), *args],
                              capture_output=True, text=True, timeout=120)

    check = migrate("--check")
    assert check.returncode == 1 and "1 record(s) to clean" in check.stdout, check.stdout + check.stderr
    assert migrate().returncode == 0
    after = good.record("good", "gpu-nvidia-h200")
    assert after.steps[0].stdout == "loaded ~/src/verified-triton/code/good/data.bin\n"
    assert after.source_hash == dirty.source_hash and good.judge("good").problems == []
    snapshot = good.files()
    assert "0 record(s) cleaned" in migrate().stdout and good.files() == snapshot


# -- 4. figures are content-addressed -------------------------------------------------------------------------

HONEST = png_bytes(b"honest")
PLANTED = png_bytes(b"planted")


def with_figure(lesson, data=HONEST, name=None, **fields):
    return passing(lesson, figures=[Figure("plot", name or sha_name("plot", data), "a plot")], **fields)


@pytest.mark.integration
def test_an_import_refuses_a_figure_whose_bytes_do_not_match_its_name(good, tmp_path):
    record = with_figure(good.lesson("good"))  # named after the honest bytes...
    path = bundle(tmp_path / "b.tar.gz", record, figures={record.figures[0].file: PLANTED})  # ...holding others
    result = good.verify("--import", str(path))
    assert result.returncode == 1
    assert f"{path}:good/gpu-nvidia-h200/{record.figures[0].file}: " in result.stderr
    assert "does not match" in result.stderr and good.files() == {}


@pytest.mark.integration
def test_a_figure_name_without_its_hash_is_refused(good, tmp_path):
    record = with_figure(good.lesson("good"), name="plot.png")
    path = bundle(tmp_path / "b.tar.gz", record, figures={"plot.png": HONEST})
    result = good.verify("--import", str(path))
    assert result.returncode == 1 and "plot.png" in result.stderr and good.files() == {}


@pytest.mark.integration
@pytest.mark.parametrize("again", ["the same record", "a newer record"])
def test_a_planted_figure_does_not_survive_the_honest_import_that_follows(good, tmp_path, again):
    lesson = good.lesson("good")
    record = with_figure(lesson)
    write_record(good.evidence, record, {record.figures[0].file: HONEST})
    placed = good.evidence / "good" / "gpu-nvidia-h200" / record.figures[0].file
    placed.write_bytes(PLANTED)  # someone with write access to evidence/ swaps the picture
    incoming = record if again == "the same record" else with_figure(lesson, started="2026-01-03T00:00:00Z")
    path = bundle(tmp_path / "b.tar.gz", incoming, figures={record.figures[0].file: HONEST})
    result = good.verify("--import", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert placed.read_bytes() == HONEST


@pytest.mark.unit
def test_the_site_reads_no_figure_whose_bytes_do_not_match_its_name(good):
    record = with_figure(good.lesson("good"))
    write_record(good.evidence, record, {record.figures[0].file: HONEST})
    assert read_figure(good.evidence, record, record.figures[0].file) == HONEST
    (good.evidence / "good" / "gpu-nvidia-h200" / record.figures[0].file).write_bytes(PLANTED)
    with pytest.raises(EvidenceError, match=f"{record.figures[0].file}.*does not match"):
        read_figure(good.evidence, record, record.figures[0].file)


# -- 3. the change list compares everything the same source determines -------------------------------------------

def _prediction(value: float):
    return [Prediction("p", value, "bytes moved over the bandwidth", 0.1, of="b")]


SAME_SOURCE_CHANGES = {
    # here (fields of a passing GPU record), incoming (fields), words of the line that must be listed
    "five-passing-checks-to-one-skipped": (
        {}, {"checks": [Check("c0", "skip", "no GPU after all")]}, "checks: 5 passed -> 1 skipped"),
    "a-check-fails-to-pass": (
        {"outcome": "failed", "exit_code": 1, "reason": "check c4",
         "checks": [*(Check(f"c{i}", "pass") for i in range(4)), Check("c4", "fail")]},
        {"outcome": "passed", "exit_code": 0, "reason": "", "checks": [Check(f"c{i}", "pass") for i in range(5)]},
        "check c4: fail -> pass"),
    "both-gates-removed": (
        {"benchmarks": [bench("b", 1.2, 1.1, 1.3, threshold=1.0, label="speed"),
                        bench("d", 1.2, 1.1, 1.3, threshold=1.1, stretch=1.5, label="bandwidth")]},
        {"benchmarks": [bench("b", 1.2, 1.1, 1.3, label="speed"), bench("d", 1.2, 1.1, 1.3, label="bandwidth")]},
        "speed: target 1x (gates the run) -> none"),
    "a-stretch-target-removed": (
        {"benchmarks": [bench("d", 1.2, 1.1, 1.3, threshold=1.1, stretch=1.5, label="bandwidth")]},
        {"benchmarks": [bench("d", 1.2, 1.1, 1.3, threshold=1.1, label="bandwidth")]},
        "bandwidth: stretch goal 1.5x -> none"),
    "a-gate-made-advisory": (
        {"benchmarks": [bench("b", 1.2, 1.1, 1.3, threshold=1.0, label="speed")]},
        {"benchmarks": [bench("b", 1.2, 1.1, 1.3, threshold=1.0, gate=False, label="speed")]},
        "speed: target 1x (gates the run) -> 1x (does not gate)"),
    "a-missed-prediction-held": (
        {"benchmarks": [bench("b", 1.0, 0.9, 1.1)], "predictions": _prediction(1.12)},
        {"benchmarks": [bench("b", 1.02, 0.92, 1.12)], "predictions": _prediction(1.12)},
        "prediction p: missed -> held"),
    "an-interval-crafted-wide": (
        {"benchmarks": [bench("b", 1.0, 0.99, 1.01, label="speed")]},
        {"benchmarks": [bench("b", 0.6, 0.05, 20.0, label="speed")]},
        "speed: 1.000x [0.990, 1.010] -> 0.600x [0.050, 20.000]: an interval implausibly wide"),
    "a-step-gone": (
        {"steps": [Step("first"), Step("second")]}, {"steps": [Step("first")]}, "steps: first, second -> first"),
    "a-part-no-longer-skipped": (
        {"mode": "interpreter", "skipped_parts": [SkippedPart("timing", "nothing is timed")]},
        {"skipped_parts": []}, "skipped parts: timing -> none"),
}


@pytest.mark.integration
@pytest.mark.parametrize("case", SAME_SOURCE_CHANGES, ids=list(SAME_SOURCE_CHANGES))
def test_an_import_for_the_same_source_lists_what_it_changes_and_waits(good, tmp_path, case):
    here_fields, incoming_fields, expected = SAME_SOURCE_CHANGES[case]
    lesson = good.lesson("good")
    here = passing(lesson, **here_fields)
    write_record(good.evidence, here)
    incoming = dataclasses.replace(here, started_utc="2026-01-03T00:00:00Z", **incoming_fields)
    before = good.files()
    path = bundle(tmp_path / "b.tar.gz", incoming)
    result = good.verify("--import", str(path))
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"held back: good/{here.key}: {expected}" in result.stderr
    assert good.files() == before
    accepted = good.verify("--import", str(path), "--accept-changes")
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr
    assert good.record("good", here.key).started_utc == "2026-01-03T00:00:00Z"


@pytest.mark.integration
def test_a_figure_redrawn_from_other_bytes_is_listed(good, tmp_path):
    lesson = good.lesson("good")
    here = with_figure(lesson)
    write_record(good.evidence, here, {here.figures[0].file: HONEST})
    other = png_bytes(b"another run")
    incoming = with_figure(lesson, other, started="2026-01-03T00:00:00Z")
    result = good.verify("--import", str(bundle(tmp_path / "b.tar.gz", incoming,
                                                figures={incoming.figures[0].file: other})))
    assert result.returncode == 1
    assert f"held back: good/gpu-nvidia-h200: figure plot: {here.figures[0].file} -> {incoming.figures[0].file}" \
        in result.stderr


@pytest.mark.integration
def test_a_first_record_for_a_new_gpu_model_is_listed_as_new(good, tmp_path):
    lesson = good.lesson("good")
    write_record(good.evidence, passing(lesson, "interpreter"))
    write_record(good.evidence, passing(lesson))
    assert good.judge("good").status == VERIFIED
    before = good.files()
    failed = fake_record(lesson, "gpu", "failed", device="NVIDIA A100-SXM4-80GB", exit_code=1, reason="check result")
    path = bundle(tmp_path / "b.tar.gz", failed)
    result = good.verify("--import", str(path))
    assert result.returncode == 1, result.stdout + result.stderr
    assert ("held back: good/gpu-nvidia-a100-sxm4-80gb: a new GPU model here (NVIDIA A100-SXM4-80GB): "
            "not recorded -> failed") in result.stderr
    assert good.files() == before and good.judge("good").status == VERIFIED
    accepted = good.verify("--import", str(path), "--accept-changes")
    assert accepted.returncode == 0 and good.judge("good").status == FAILED


@pytest.mark.integration
def test_a_new_lessons_records_need_no_acceptance(good, tmp_path):
    """Nothing here to compare with: a lesson's first records, interpreter then GPU, come in as before."""
    lesson = good.lesson("good")
    for mode in ("interpreter", "gpu"):
        result = good.verify("--import", str(bundle(tmp_path / f"{mode}.tar.gz", passing(lesson, mode))))
        assert result.returncode == 0, result.stdout + result.stderr
    assert good.judge("good").status == VERIFIED


@pytest.mark.integration
def test_a_rerun_within_noise_is_no_change(good, tmp_path):
    lesson = good.lesson("good")
    here = passing(lesson, benchmarks=[bench("b", 1.0, 0.98, 1.02, threshold=0.9)])
    write_record(good.evidence, here)
    incoming = passing(lesson, benchmarks=[bench("b", 1.01, 0.99, 1.03, threshold=0.9)],
                       started="2026-01-03T00:00:00Z")
    result = good.verify("--import", str(bundle(tmp_path / "b.tar.gz", incoming)))
    assert result.returncode == 0 and "held back" not in result.stderr, result.stdout + result.stderr


@pytest.mark.integration
def test_the_strict_build_names_a_figure_whose_bytes_do_not_match_its_name(tmp_path):
    from conftest import build_output, make_site_project

    site = make_site_project(tmp_path / "site")
    site.add_lesson("plain")
    name = sha_name("plot", HONEST)
    site.write(site.make_record("plain", "gpu", figures=[Figure("plot", name, "a plot")],
                                tables=[Table("t", ["a"], [[1]])]), {name: HONEST})
    honest = site.build()
    assert honest.returncode == 0, build_output(honest)
    (site.evidence / "plain" / "gpu-fake-gpu" / name).write_bytes(PLANTED)
    result = site.build()
    assert result.returncode != 0
    assert f"{site.evidence / 'plain' / 'gpu-fake-gpu' / name}: its bytes hash to" in build_output(result)


# -- 5. the bytes gh verifies are the bytes imported ---------------------------------------------------------------

SIGNER = "owner/repo/.github/workflows/record.yml@refs/heads/main"
ATTESTED = json.dumps([{"verificationResult": {"signature": {"certificate": {"runnerEnvironment": "github-hosted"}}}}])


def gh_on_path(tmp_path: Path, body: str) -> str:
    """A folder with an executable `gh` whose body (Python) sees `args`, to put on PATH."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    script = folder / "gh"
    script.write_text(f"#!{sys.executable}\nimport json, os, shutil, stat, sys\nargs = sys.argv[1:]\n"
                      + textwrap.dedent(body))
    script.chmod(0o755)
    return str(folder)


@pytest.mark.integration
def test_the_bundle_gh_verified_is_the_bundle_imported(good, tmp_path):
    lesson = good.lesson("good")
    honest = bundle(tmp_path / "interpreter-1-of-1.tar.gz", passing(lesson, "interpreter", stdout="honest\n"))
    forged = bundle(tmp_path / "forged.tar.gz", passing(lesson, "interpreter", stdout="forged\n"))
    seen = tmp_path / "seen.json"
    # gh vouches for the file it is given, then the bundle at the path named on the command line is swapped
    path = gh_on_path(tmp_path, f"""\
        given = args[2]
        json.dump({{"path": given, "mode": stat.S_IMODE(os.stat(given).st_mode)}}, open({str(seen)!r}, "w"))
        shutil.copyfile({str(forged)!r}, {str(honest)!r})
        sys.stdout.write({ATTESTED!r})
    """)
    result = good.verify("--import", str(honest), "--expect-mode", "interpreter", "--require-attestation", SIGNER,
                         PATH=path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert good.record("good").stdout == "honest\n"
    asked = json.loads(seen.read_text())
    assert asked["path"] != str(honest) and asked["mode"] == 0o600  # a private copy, made once
    assert not Path(asked["path"]).exists()  # and removed after the import
    assert asked["path"] not in result.stdout + result.stderr  # messages name the bundle, never its copy


NESTED = "[" * 200_000 + "]" * 200_000


@pytest.mark.integration
@pytest.mark.parametrize("out", [NESTED, '{"a": ' * 100_000 + "1" + "}" * 100_000, "\udcff\udcfe not utf-8",
                                 "[" + "1," * 10 + "]"], ids=["nested-lists", "nested-objects", "not-utf8", "bad"])
def test_any_output_of_gh_is_a_clear_refusal_never_a_traceback(good, tmp_path, out):
    lesson = good.lesson("good")
    path = bundle(tmp_path / "b.tar.gz", passing(lesson, "interpreter"))
    gh = gh_on_path(tmp_path, f"sys.stdout.buffer.write({out!r}.encode('utf-8', 'surrogateescape'))\n")
    result = good.verify("--import", str(path), "--require-attestation", SIGNER, PATH=gh)
    assert result.returncode == 1 and f"refused: {path}: " in result.stderr, result.stderr[-2000:]
    assert "Traceback" not in result.stderr and good.files() == {}


@pytest.mark.integration
def test_huge_output_of_gh_is_read_bounded(good, tmp_path):
    lesson = good.lesson("good")
    path = bundle(tmp_path / "b.tar.gz", passing(lesson, "interpreter"))
    gh = gh_on_path(tmp_path, """\
        chunk = b" " * (1 << 20)
        for _ in range(300):
            sys.stdout.buffer.write(chunk)
        sys.stdout.buffer.write(b"[]")
    """)
    command = [sys.executable, str(REPO / "tools" / "verify.py"), "--code-dir", str(good.code), "--evidence-dir",
               str(good.evidence), "--import", str(path), "--require-attestation", SIGNER]
    # The peak memory of verify (and of gh) as the one child of a small parent: 300 MiB read whole would show.
    measure = ("import json, resource, subprocess, sys\n"
               "r = subprocess.run(json.loads(sys.argv[1]), capture_output=True, text=True)\n"
               "print(json.dumps([r.returncode, r.stderr[-2000:], "
               "resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss]))\n")
    done = subprocess.run([sys.executable, "-c", measure, json.dumps(command)], capture_output=True, text=True,
                          timeout=300, env=base_env(PATH=gh))
    code, stderr, peak_kib = json.loads(done.stdout)
    assert peak_kib < 150 * 1024, f"verify peaked at {peak_kib // 1024} MiB reading gh's output"
    assert code == 1 and "refused" in stderr and "Traceback" not in stderr, stderr
    assert "printed more than" in stderr


@pytest.mark.integration
def test_a_bundle_that_is_a_link_is_refused_before_gh_is_asked(good, tmp_path):
    real = bundle(tmp_path / "real.tar.gz", passing(good.lesson("good"), "interpreter"))
    link = tmp_path / "link.tar.gz"
    link.symlink_to(real)
    asked = tmp_path / "asked"
    gh = gh_on_path(tmp_path, f"open({str(asked)!r}, 'w').write('asked')\nsys.stdout.write({ATTESTED!r})\n")
    result = good.verify("--import", str(link), "--require-attestation", SIGNER, PATH=gh)
    assert result.returncode == 1 and f"refused: {link}: a link, not a plain file; refused" in result.stderr
    assert not asked.exists() and good.files() == {}


# -- 8. smoke runs in a scratch copy, and leave nothing running -------------------------------------------------

WRITES = """\
    lesson = Lesson("writes")
    Path("out.txt").write_text("written with a relative path")
    (Path(__file__).resolve().parent / "beside.txt").write_text("written beside the lesson")
    lesson.check("fine", True)
    sys.exit(lesson.finish())
"""

STARTS_A_SESSION = """\
    import subprocess

    lesson = Lesson("helper")
    helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
    Path(PIDS).write_text(str(helper.pid))
    lesson.check("fine", True)
    sys.exit(lesson.finish())
"""


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state not in ("Z", "X")  # a zombie has ended; its parent reaps it


def gone_within(pid: int, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while alive(pid) and time.monotonic() < end:
        time.sleep(0.05)
    return not alive(pid)


@pytest.mark.integration
def test_a_smoke_run_writes_nothing_into_code(project):
    from verified_triton.record.smoke import smoke_run

    folder = project.add("writes", WRITES)
    before = sorted(p.name for p in folder.iterdir())
    run = smoke_run(project.lesson("writes"))
    assert run.outcome == "passed", run.line()
    assert sorted(p.name for p in folder.iterdir()) == before  # no out.txt, no beside.txt
    assert not (project.root / "out.txt").exists()


@pytest.mark.integration
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="finds a lesson's processes through /proc")
@pytest.mark.parametrize("how", ["smoke", "verify"])
def test_a_helper_in_a_session_of_its_own_is_ended_with_the_run(project, tmp_path, how):
    from verified_triton.record.smoke import smoke_run

    pids = tmp_path / "helper.pid"
    project.add("helper", f"PIDS = {str(pids)!r}\n" + textwrap.dedent(STARTS_A_SESSION))
    try:
        if how == "smoke":
            run = smoke_run(project.lesson("helper"))
            assert run.outcome == "passed", run.line()
        else:
            result = project.verify("--mode", "interpreter")
            assert result.returncode == 0, result.stdout + result.stderr
        pid = int(pids.read_text())
        assert gone_within(pid, 5), f"the lesson's helper {pid} outlived the run"
    finally:
        if pids.exists() and alive(int(pids.read_text())):
            os.kill(int(pids.read_text()), 9)


# -- 9. the glossary's reader and the prose lint take linear time ------------------------------------------------

SPACES = " " * 150_000
GLOSSARY_LINES = {
    "spaces-inside-a-definition": "*[warp]: x" + SPACES + "y",
    "spaces-ending-a-definition": "*[warp]: 32 threads." + SPACES,
    "spaces-before-taught-in": "*[warp]: a" + SPACES + "Taught in: Vector add",
    "spaces-as-a-term": "*[" + SPACES + "]: 32 threads. Taught in: Vector add.",
    "taught-in-many-times": "*[warp]: a" + " Taught in:" * 15_000 + " x",
}
PAGE_LINES = {
    "allow-with-spaces-in-the-rules": "<!-- prose-lint: allow timing" + SPACES + "x",
    "allow-with-spaces-in-the-reason": "<!-- prose-lint: allow timing: x" + SPACES + "y",
    "backticks": "x " + "`" * 150_000,  # not at the start of the line, where it would open a fence
    "link-targets-never-closed": "](" * 75_000,
    "html-tags-never-closed": "<a" * 75_000,
    "asides-never-closed": "(was " * 30_000,
}
TIMED = """\
import sys, time
sys.path.insert(0, {tools!r})
from pathlib import Path
from verified_triton.site.glossary import GlossaryError, read
from verified_triton.author.prose_lint import lint
line = Path(sys.argv[1]).read_text(encoding="utf-8")
start = time.perf_counter()
if sys.argv[2] == "glossary":
    try:
        read(Path(sys.argv[1]))
        print("read", end=" ")
    except GlossaryError as exc:
        print("refused", str(exc)[:200].replace(" ", "_"), end=" ")
else:
    lint("page.md", "# A page\\n\\n" + line + "\\n\\nwarps and more.\\n", [])
    print("linted", end=" ")
print(time.perf_counter() - start)
"""


def timed(tmp_path: Path, line: str, kind: str) -> tuple[str, float]:
    """(what happened, seconds) of reading one pathological line, in a process killed past 30 s."""
    (tmp_path / "line.md").write_text(line + "\n", encoding="utf-8")
    try:
        done = subprocess.run([sys.executable, "-c", TIMED.format(tools=str(REPO / "tools")), str(tmp_path / "line.md"),
                               kind], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        return "still busy after 30 s", 30.0
    assert done.returncode == 0, done.stderr[-2000:]
    *what, seconds = done.stdout.split()
    return " ".join(what), float(seconds)


@pytest.mark.integration
@pytest.mark.parametrize("case", GLOSSARY_LINES, ids=list(GLOSSARY_LINES))
def test_the_glossary_reader_takes_linear_time(tmp_path, case):
    what, seconds = timed(tmp_path, GLOSSARY_LINES[case], "glossary")
    assert seconds < 5, f"{case}: {what} after {seconds:.1f} s"
    assert what.startswith("refused") and ":1:" in what  # a clear error at FILE:LINE


@pytest.mark.integration
@pytest.mark.parametrize("case", PAGE_LINES, ids=list(PAGE_LINES))
def test_the_prose_lint_takes_linear_time(tmp_path, case):
    what, seconds = timed(tmp_path, PAGE_LINES[case], "page")
    assert seconds < 5 and what == "linted", f"{case}: {what} after {seconds:.1f} s"
