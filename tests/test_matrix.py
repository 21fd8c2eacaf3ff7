"""Runs under other Triton releases (issue 36): environments, release records, the [requires] rule, the page.

No test downloads Triton: an environment is made from a tiny local wheel of a fake `triton` package
(pip with PIP_NO_INDEX and PIP_FIND_LINKS, the real installer path) or by a fake installer, and a fake
lesson checks for an API one fake release has and the other lacks.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import os
import zipfile
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from conftest import fake_record
from verified_triton.judge.evidence import EvidenceError, write_record
from verified_triton.judge.matrix import DECLINED, FAILED, PASSED, ReleaseResult, judge_release_records, lowest_passing
from verified_triton.judge.releases import (
    ReleaseEnv,
    ReleaseRecord,
    lesson_releases,
    read_release,
    release_from_json,
    release_path,
    write_release,
)
from verified_triton.record import releases as envs
from verified_triton.record.matrix import keep_or_write

# -- helpers ------------------------------------------------------------------------------------------

FAKE_TRITON = """\
__version__ = "{version}"
{extra}
"""


def fake_triton_files(version: str, extra: str = "") -> dict[str, str]:
    return {"triton/__init__.py": FAKE_TRITON.format(version=version, extra=extra),
            "triton/runtime/__init__.py": "", "triton/runtime/interpreter.py": ""}


def fake_wheel(folder: Path, version: str, extra: str = "") -> Path:
    """A wheel of a fake `triton` (a few hundred bytes) that pip installs like the real one."""
    folder.mkdir(parents=True, exist_ok=True)
    info = f"triton-{version}.dist-info"
    files = {**fake_triton_files(version, extra),
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: triton\nVersion: {version}\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = []
    for name, body in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(body.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(body.encode())}")
    files[f"{info}/RECORD"] = "\n".join(record + [f"{info}/RECORD,,"]) + "\n"
    path = folder / f"triton-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as whl:
        for name, body in files.items():
            whl.writestr(name, body)
    return path


def fake_installer(extra: str = "", version: str | None = None, calls: list | None = None):
    """An installer that writes a fake triton of `version` (default: the release asked for) into the target,
    and nothing else it was asked for."""
    def install(wanted: list[str], target: Path) -> str:
        if calls is not None:
            calls.append(wanted)
        release = wanted[0].removeprefix("triton==")
        for rel, body in fake_triton_files(version or release, extra).items():
            (target / rel).parent.mkdir(parents=True, exist_ok=True)
            (target / rel).write_text(body)
        return ""
    return install


def offline_pip(wheels: Path) -> dict[str, str]:
    """pip's own environment variables: install from `wheels` only, never from an index."""
    return {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheels), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def release_record(lesson, release: str = "3.5.1", outcome: str = "passed", **fields) -> ReleaseRecord:
    base = dict(lesson=lesson.name, release=release, outcome=outcome, exit_code=0 if outcome == "passed" else 1,
                reason="" if outcome == "passed" else "check x failed", checks_passed=3,
                checks_failed=0 if outcome == "passed" else 1, checks_skipped=0, wall_s=2.5,
                source_hash=lesson.source_hash(), started_utc="2026-03-04T05:06:07Z",
                command=f"TRITON_INTERPRET=1 python {lesson.relative(lesson.main)}",
                env=ReleaseEnv(python="3.11.7", torch="2.13.0+cpu", triton=release, numpy="2.4.6"))
    base.update(fields)
    return ReleaseRecord(**base)


NEW_API_LESSON = """\
    lesson = Lesson("uses-new-api")
    lesson.device()
    import triton

    lesson.check("triton-has-new-api", hasattr(triton, "new_api"), "triton.new_api exists")
    from triton import new_api

    lesson.check("new-api-works", new_api() == 42, "triton.new_api() is 42")
    sys.exit(lesson.finish())
"""
NEW_API = "def new_api():\n    return 42\n"


@pytest.fixture
def wheels(tmp_path: Path) -> Path:
    """Fake releases: 3.7.0 lacks triton.new_api, 3.8.0 has it (no COMPANIONS for either)."""
    folder = tmp_path / "wheels"
    fake_wheel(folder, "3.7.0")
    fake_wheel(folder, "3.8.0", NEW_API)
    return folder


def new_api_project(project, requires: str = "3.7"):
    project.add("uses-new-api", NEW_API_LESSON,
                toml=f'[requires]\ntriton = "{requires}"\nwhy = "triton.new_api, which Triton 3.8 added"\n')
    lesson = project.lesson("uses-new-api")
    # The badge's own records, current and passing, so that --check judges the matrix alone.
    write_record(project.evidence, fake_record(lesson, mode="interpreter", device="CPU"))
    write_record(project.evidence, fake_record(lesson, mode="gpu"))
    return lesson


# -- a release lacking an API: recorded as failing there, refused where the lesson claims it ---------------

@pytest.mark.integration
def test_a_lesson_using_an_api_a_release_lacks_fails_there_and_check_refuses_its_claim(project, wheels, tmp_path):
    lesson = new_api_project(project, requires="3.7")
    cache = tmp_path / "cache"
    run = project.verify("--matrix", "3.7.0,3.8.0", "--jobs", "2", "--cache-dir", str(cache), **offline_pip(wheels))
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    old = read_release(release_path(project.evidence, lesson.name, "3.7.0"), project.evidence)
    new = read_release(release_path(project.evidence, lesson.name, "3.8.0"), project.evidence)
    assert (old.outcome, old.exit_code, old.checks_failed) == ("failed", 1, 1)
    assert "new_api" in old.reason and old.env.triton == "3.7.0" and old.env.torch
    assert (new.outcome, new.checks_passed, new.checks_failed) == ("passed", 2, 0)
    assert (cache / "3.7.0" / "site" / "triton" / "__init__.py").is_file()  # made once, cached
    assert "uses-new-api [Triton 3.7.0]: failed" in out  # the progress line, release x lesson
    assert "refused by --check: uses-new-api" in out

    check = project.verify("--check")
    assert check.returncode == 1, check.stdout + check.stderr
    refusal = [line for line in check.stderr.splitlines() if "Triton 3.7.0" in line]
    assert refusal and 'claims Triton 3.7 and newer' in refusal[0], check.stderr
    assert "--lesson uses-new-api --triton 3.7.0 --force" in refusal[0]  # the command that shows it
    assert "the lowest release it passes on is 3.8.0" in refusal[0]

    again = project.verify("--matrix", "3.7.0,3.8.0", "--cache-dir", str(cache), **offline_pip(tmp_path / "none"))
    assert again.returncode == 0, again.stdout + again.stderr  # cached: pip is not asked again (no wheels now)
    assert "= pass" in again.stdout and "= FAIL" in again.stdout and "making its environment" not in again.stdout


@pytest.mark.integration
def test_below_its_claim_the_kit_check_is_lifted_and_a_failure_is_information(project, wheels, tmp_path):
    lesson = new_api_project(project, requires="3.8")
    run = project.verify("--triton", "3.7.0", "--cache-dir", str(tmp_path / "cache"), **offline_pip(wheels))
    assert run.returncode == 0, run.stdout + run.stderr
    old = read_release(release_path(project.evidence, lesson.name, "3.7.0"), project.evidence)
    # The kit would exit 2 ("needs Triton 3.8 or newer") before the checks; lifted, the lesson ran them.
    assert old.outcome == "failed" and old.exit_code == 1 and old.checks_failed == 1, old
    assert "check lifted" in old.command
    check = project.verify("--check")
    assert check.returncode == 0, check.stdout + check.stderr
    assert "Triton 3.7.0" not in check.stderr


@pytest.mark.integration
def test_an_environment_that_cannot_be_made_runs_nothing_and_keeps_the_record(project, tmp_path):
    lesson = new_api_project(project)
    kept = write_release(project.evidence, release_record(lesson, "3.7.0"))
    before = kept.read_bytes()
    run = project.verify("--triton", "3.7.0", "--force", "--cache-dir", str(tmp_path / "cache"),
                         **offline_pip(tmp_path / "no-wheels"))
    assert run.returncode == 1
    assert "Triton 3.7.0: not run: the environment for Triton 3.7.0 could not be made" in run.stderr
    assert kept.read_bytes() == before
    assert not (tmp_path / "cache" / "3.7.0").exists()


# -- environments ------------------------------------------------------------------------------------------

@pytest.mark.integration
def test_an_environment_is_made_once_checked_and_reused(tmp_path):
    calls: list[str] = []
    made = envs.prepare("3.7.0", tmp_path / "cache", fake_installer(calls=calls), report=lambda line: None)
    assert made.site == tmp_path / "cache" / "3.7.0" / "site" and made.versions.triton == "3.7.0"
    assert made.versions.torch and made.versions.numpy and made.versions.python
    again = envs.prepare("3.7.0", tmp_path / "cache", fake_installer(calls=calls), report=lambda line: None)
    assert again == made and calls == [["triton==3.7.0"]]
    assert made.pythonpath("/elsewhere") == f"{made.site}{os.pathsep}/elsewhere"


@pytest.mark.integration
def test_the_real_installer_installs_a_local_wheel(tmp_path, monkeypatch, wheels):
    for name, value in offline_pip(wheels).items():
        monkeypatch.setenv(name, value)
    made = envs.prepare("3.8.0", tmp_path / "cache", report=lambda line: None)
    assert (made.site / "triton" / "__init__.py").read_text().startswith('__version__ = "3.8.0"')
    assert (made.site / "triton-3.8.0.dist-info").is_dir()


@pytest.mark.integration
def test_an_environment_importing_another_version_is_refused(tmp_path):
    with pytest.raises(envs.ReleaseEnvError, match="imports Triton 3.3.0, not 3.7.0"):
        envs.prepare("3.7.0", tmp_path / "cache", fake_installer(version="3.3.0"), report=lambda line: None)


@pytest.mark.unit
def test_a_failed_install_leaves_nothing(tmp_path):
    with pytest.raises(envs.ReleaseEnvError, match="could not be made: no such release"):
        envs.prepare("3.7.0", tmp_path / "cache", lambda wanted, target: "no such release", report=lambda _: None)
    assert list((tmp_path / "cache").iterdir()) == []


@pytest.mark.unit
def test_a_linked_cache_folder_is_refused(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "3.7.0").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(envs.ReleaseEnvError, match="links are never followed"):
        envs.prepare("3.7.0", tmp_path / "cache", fake_installer(), report=lambda line: None)


@pytest.mark.integration
def test_an_old_release_gets_its_numpy_and_the_check_holds_it_to_that(tmp_path):
    calls: list = []
    with pytest.raises(envs.ReleaseEnvError, match="imports numpy 2.4.6, not 2.3.5"):
        envs.prepare("3.5.1", tmp_path / "cache", fake_installer(calls=calls), report=lambda line: None)
    assert calls == [["triton==3.5.1", "numpy==2.3.5"]]  # Triton before 3.7 cannot run on numpy 2.4


@pytest.mark.integration
def test_an_environment_made_with_other_requirements_is_made_again(tmp_path):
    calls: list = []
    made = envs.prepare("3.7.0", tmp_path / "cache", fake_installer(calls=calls), report=lambda line: None)
    manifest = made.site.parent / envs.MANIFEST
    assert manifest.read_text() == "triton==3.7.0\n"
    manifest.write_text("triton==3.7.0\nnumpy==1.0\n")
    envs.prepare("3.7.0", tmp_path / "cache", fake_installer(calls=calls), report=lambda line: None)
    assert len(calls) == 2 and manifest.read_text() == "triton==3.7.0\n"
    (tmp_path / "cache" / "3.8.0").mkdir()  # a folder verify did not make is not taken, nor removed
    with pytest.raises(envs.ReleaseEnvError, match="not an environment verify made"):
        envs.prepare("3.8.0", tmp_path / "cache", fake_installer(), report=lambda line: None)


@pytest.mark.unit
def test_releases_resolve_from_the_table_or_the_registry():
    asked: list[str] = []

    def ask(requirement: str) -> str:
        asked.append(requirement)
        return "3.10.2"

    assert envs.resolve("3.5", ask) == "3.5.1" and envs.resolve("3.5.0", ask) == "3.5.0" and asked == []
    assert envs.resolve("3.10", ask) == "3.10.2" and envs.resolve("newest", ask) == "3.10.2"
    assert asked == ["triton==3.10.*", "triton"]
    assert envs.resolve_all(["3.9", "3.4", "3.4.0"], ask) == ["3.4.0", "3.9.0"]
    for bad in ("3", "3.x", "latest", "3.5.1; rm -rf /", "٣.5"):
        with pytest.raises(envs.ReleaseEnvError, match="is not a Triton release"):
            envs.resolve(bad, ask)


# -- a hostile release record is refused like any record ------------------------------------------------

def as_json(record: ReleaseRecord, **changes) -> dict:
    raw = asdict(record)
    for key, value in changes.items():
        if "." in key:
            outer, inner = key.split(".")
            raw[outer] = {**raw[outer], inner: value}
        else:
            raw[key] = value
    return raw


@pytest.mark.unit
@pytest.mark.parametrize("changes, field", [
    ({"release": "3.5"}, "release"),
    ({"release": "3.5.1\n", "env.triton": "3.5.1\n"}, "release"),
    ({"release": "03.5.1", "env.triton": "03.5.1"}, "release"),
    ({"release": "٣.5.1", "env.triton": "٣.5.1"}, "release"),  # Arabic-Indic digit
    ({"release": "3.5.1rc1", "env.triton": "3.5.1rc1"}, "release"),
    ({"env.triton": "3.9.0"}, "env.triton"),  # ran some other Triton
    ({"source_hash": "0" * 63 + "g"}, "source_hash"),
    ({"source_hash": "abc"}, "source_hash"),
    ({"reason": "x" * 5000}, "reason"),
    ({"reason": "two\nlines"}, "reason"),
    ({"env.torch": "2.13.0 <script>"}, "env.torch"),
    ({"env.numpy": "1" * 200}, "env.numpy"),
    ({"checks_passed": -1}, "checks_passed"),
    ({"checks_failed": 10**9}, "checks_failed"),
    ({"wall_s": float("1e300")}, "wall_s"),
    ({"started_utc": "2026-02-30T00:00:00Z"}, "started_utc"),
    ({"outcome": "passed", "exit_code": 1}, "exit_code"),
    ({"outcome": "passed", "checks_failed": 2}, "checks_failed"),
    ({"outcome": "timeout", "exit_code": 0}, "exit_code"),
    ({"outcome": "crashed", "exit_code": 1}, "exit_code"),
    ({"outcome": "great"}, "outcome"),
    ({"lesson": "../etc"}, "lesson"),
    ({"verdict": "VERIFIED"}, "unknown field"),
    ({"format_version": 2}, "format_version"),
])
def test_a_hostile_release_record_is_refused(project, changes, field):
    project.add("plain", "pass\n")
    record = release_record(project.lesson("plain"))
    with pytest.raises(EvidenceError) as refused:
        release_from_json(as_json(record, **changes), "evidence/plain/releases/triton-3.5.1.json")
    assert field in str(refused.value) and "evidence/plain/releases/triton-3.5.1.json" in str(refused.value)


@pytest.mark.unit
def test_hostile_files_are_refused_where_they_lie(project, tmp_path):
    project.add("plain", "pass\n")
    lesson = project.lesson("plain")
    path = write_release(project.evidence, release_record(lesson, "3.5.1"))
    assert read_release(path, project.evidence) == release_record(lesson, "3.5.1")  # the honest one reads back
    folder = path.parent
    (folder / "triton-3.6.0.json").write_text(release_record(lesson, "3.7.1").to_json())  # another release inside
    (folder / "notes.txt").write_text("hello")
    big = as_json(release_record(lesson, "3.9.0"))
    big["command"] = "x" * 3000
    (folder / "triton-3.9.0.json").write_text(json.dumps(big) + " " * 70_000)  # past the 64 KiB a record may be
    records, problems = lesson_releases(project.evidence, "plain")
    assert [r.release for r in records] == ["3.5.1"]
    said = "\n".join(problems)
    assert "triton-3.6.0.json: holds the record of plain under Triton 3.7.1" in said
    assert "notes.txt: not a release record" in said
    assert "triton-3.9.0.json" in said and "over the limit of 65,536" in said


@pytest.mark.unit
def test_a_link_among_release_records_is_refused_and_never_written_through(project, tmp_path):
    project.add("plain", "pass\n")
    lesson = project.lesson("plain")
    folder = write_release(project.evidence, release_record(lesson, "3.5.1")).parent
    outside = tmp_path / "outside.json"
    outside.write_text(release_record(lesson, "3.8.0").to_json())
    (folder / "triton-3.8.0.json").symlink_to(outside)
    records, problems = lesson_releases(project.evidence, "plain")
    assert records == [] and "triton-3.8.0.json" in problems[0] and "symbolic link" in problems[0]
    with pytest.raises(EvidenceError, match="not a plain file"):
        write_release(project.evidence, release_record(lesson, "3.8.0", "failed"))
    assert outside.read_text() == release_record(lesson, "3.8.0").to_json()
    (folder / "triton-3.8.0.json").unlink()
    (project.evidence / "linked").symlink_to(tmp_path, target_is_directory=True)
    with pytest.raises(EvidenceError, match="not a plain folder"):
        write_release(project.evidence, replace(release_record(lesson), lesson="linked"))


@pytest.mark.unit
def test_too_many_release_records_are_refused_unread(project):
    from verified_triton.core.limits import LIMITS

    project.add("plain", "pass\n")
    lesson = project.lesson("plain")
    for patch in range(LIMITS.releases + 1):
        write_release(project.evidence, release_record(lesson, f"3.{patch}.0"))
    records, problems = lesson_releases(project.evidence, "plain")
    assert records == [] and f"over the limit of {LIMITS.releases} release records" in problems[0]


@pytest.mark.integration
def test_status_json_carries_the_matrix(project):
    project.add("plain", "pass\n", toml='[requires]\ntriton = "3.4"\n')
    lesson = project.lesson("plain")
    write_release(project.evidence, release_record(lesson, "3.4.0", "failed"))
    write_release(project.evidence, release_record(lesson, "3.5.1"))
    out = json.loads(project.verify("--status", "--json").stdout)[0]["releases"]
    assert out["requires"] == "3.4" and out["lowest_passing"] == "3.5.1" and len(out["refusals"]) == 1
    assert [(r["release"], r["state"]) for r in out["results"]] == [("3.4.0", "failed"), ("3.5.1", "passed")]


@pytest.mark.integration
def test_check_refuses_an_unusable_release_record(project):
    project.add("plain", "pass\n")
    lesson = project.lesson("plain")
    write_record(project.evidence, fake_record(lesson, mode="interpreter", device="CPU"))
    write_record(project.evidence, fake_record(lesson, mode="gpu"))
    assert project.verify("--check").returncode == 0
    path = write_release(project.evidence, release_record(lesson, "3.5.1"))
    path.write_text(path.read_text().replace('"triton": "3.5.1"', '"triton": "3.9.0"'))
    check = project.verify("--check")
    assert check.returncode == 1 and "unusable release record" in check.stderr and "env.triton" in check.stderr


# -- the lowest-passing rule and --check's refusal ----------------------------------------------------------

def results(*states: str, below: int = 0) -> list[ReleaseResult]:
    releases = ["3.4.0", "3.5.1", "3.6.0", "3.7.1", "3.8.0", "3.9.0"]
    out = []
    for i, state in enumerate(states):
        record = ReleaseRecord("x", releases[i], {"P": "passed", "D": "by-design", "F": "failed"}[state], 0, "",
                               0, 0, 0, 1.0, "0" * 64, "2026-01-01T00:00:00Z", "", ReleaseEnv("", "", releases[i]))
        out.append(ReleaseResult(record, {"P": PASSED, "D": DECLINED, "F": FAILED}[state], i < below))
    return out


@pytest.mark.unit
@pytest.mark.parametrize("states, lowest", [
    ("PPPPPP", "3.4.0"),
    ("FPPPPP", "3.5.1"),
    ("FFPPPP", "3.6.0"),
    ("PFPPPP", "3.6.0"),  # a pass below a failure does not count: every newer release must pass
    ("PPPPPF", ""),  # fails under the newest
    ("DDDDDD", ""),  # declining everywhere (Gluon under the interpreter) proves nothing
    ("FDPPPP", "3.6.0"),  # a decline below the lowest pass does not lower it
    ("PPPPDP", "3.4.0"),
])
def test_the_lowest_passing_release(states, lowest):
    assert lowest_passing(results(*states)) == lowest


def judged(project, requires: str, outcomes: dict[str, str], source_hash: str | None = None):
    project.add("claims", "pass\n", toml=f'[requires]\ntriton = "{requires}"\n' if requires else "")
    lesson = project.lesson("claims")
    records = [release_record(lesson, release, outcome, **({"source_hash": source_hash} if source_hash else {}))
               for release, outcome in outcomes.items()]
    return judge_release_records(lesson, records)


@pytest.mark.unit
def test_a_failure_inside_the_claim_is_refused_and_one_below_it_is_not(project):
    m = judged(project, "3.4", {"3.4.0": "failed", "3.5.1": "passed", "3.6.0": "passed"})
    assert m.lowest == "3.5.1" and len(m.refusals) == 1
    assert ("claims Triton 3.4 and newer, but it failed under the interpreter of Triton 3.4.0 (check x failed)"
            in m.refusals[0])
    assert "python tools/verify.py --lesson claims --triton 3.4.0 --force" in m.refusals[0]


@pytest.mark.unit
def test_a_failure_below_the_claim_is_information(tmp_path):
    from conftest import make_project
    m = judged(make_project(tmp_path / "p"), "3.5", {"3.4.0": "failed", "3.5.1": "passed", "3.6.0": "passed"})
    assert m.refusals == [] and m.notes == [] and m.lowest == "3.5.1"  # '3.5' covers 3.5.1: no mismatch
    assert [r.below_requires for r in m.results] == [True, False, False]


@pytest.mark.unit
def test_a_claim_too_high_or_too_low_is_noted_not_refused(tmp_path):
    from conftest import make_project
    high = judged(make_project(tmp_path / "a"), "3.6", {"3.4.0": "passed", "3.5.1": "passed", "3.6.0": "passed"})
    assert high.refusals == [] and len(high.notes) == 1
    assert 'passes under Triton 3.4.0, 3.5.1 too' in high.notes[0] and 'triton = "3.4"' in high.notes[0]
    low = judged(make_project(tmp_path / "b"), "3.0", {"3.4.0": "passed", "3.9.0": "passed"})
    assert low.refusals == [] and 'the matrix says [requires] triton = "3.4"' in low.notes[0]
    none = judged(make_project(tmp_path / "c"), "", {"3.4.0": "failed", "3.9.0": "passed"})
    assert "lesson.toml states no [requires] triton, so it claims every Triton release" in none.refusals[0]


@pytest.mark.unit
def test_stale_release_records_are_a_note_never_a_refusal(project):
    m = judged(project, "3.4", {"3.4.0": "failed", "3.9.0": "passed"}, source_hash="a" * 64)
    assert m.results == [] and m.refusals == [] and len(m.stale) == 2
    assert "for an older source" in m.notes[0] and "--lesson claims --matrix" in m.notes[0]


@pytest.mark.unit
def test_the_newest_patch_of_a_minor_is_the_one_judged(project):
    m = judged(project, "3.4", {"3.5.0": "failed", "3.5.1": "passed"})
    assert [r.release for r in m.results] == ["3.5.1"] and m.refusals == []


# -- better evidence is never replaced by worse ----------------------------------------------------------------

@pytest.mark.unit
def test_a_run_that_says_the_same_keeps_the_file_and_other_versions_do_not_replace_a_pass(project):
    project.add("plain", "pass\n")
    lesson = project.lesson("plain")
    path = write_release(project.evidence, release_record(lesson, "3.5.1"))
    before = path.read_bytes()
    same = keep_or_write(lesson, replace(release_record(lesson, "3.5.1"), started_utc="2026-05-05T00:00:00Z",
                                         wall_s=9.0), project.evidence, force=True)
    assert not same.written and "unchanged" in same.skipped and path.read_bytes() == before
    worse = replace(release_record(lesson, "3.5.1", "failed"), env=ReleaseEnv("3.11.7", "2.14.0", "3.5.1", "2.4.6"))
    kept = keep_or_write(lesson, worse, project.evidence, force=False)
    assert not kept.written and "stays" in kept.skipped and path.read_bytes() == before
    forced = keep_or_write(lesson, worse, project.evidence, force=True)
    assert forced.written and read_release(path, project.evidence).outcome == "failed"


# -- the command line ------------------------------------------------------------------------------------

@pytest.mark.integration
@pytest.mark.parametrize("args, message", [
    (["--triton", "3.5.1", "--mode", "gpu"], "a GPU run uses the Triton of the machine it runs on"),
    (["--triton", "3.5.1", "--matrix"], "--triton and --matrix are separate jobs"),
    (["--matrix", "--shard", "1/2"], "--shard applies to a run"),
    (["--matrix", "--check"], "are separate jobs"),
    (["--triton", "3.5.1rc1"], "'3.5.1rc1' is not a Triton release"),
    (["--matrix", "3.4,latest"], "'latest' is not a Triton release"),
])
def test_matrix_options_that_do_not_go_together(project, args, message):
    run = project.verify(*args)
    assert run.returncode == 2 and message in run.stderr, run.stderr


# -- the page says so ----------------------------------------------------------------------------------------

@pytest.mark.unit
def test_the_status_line_names_the_releases_and_the_failures(project):
    from verified_triton.judge.status import judge
    from verified_triton.site.directives.releases import release_fold, release_line

    project.add("claims", "pass\n", toml='[requires]\ntriton = "3.5"\nwhy = "triton.new_api"\n')
    lesson = project.lesson("claims")
    write_record(project.evidence, fake_record(lesson, mode="gpu", device="NVIDIA H200"))
    for release in ("3.5.1", "3.6.0", "3.9.0"):
        write_release(project.evidence, release_record(lesson, release))
    write_release(project.evidence, release_record(lesson, "3.4.0", "failed",
                                                   reason="exit 1 (failed): ImportError: cannot import new_api"))
    st = judge(lesson, project.evidence)
    line = release_line(st)
    assert line.startswith("Checked under the interpreter with Triton 3.5, 3.6 and 3.9, fails under 3.4, below the "
                           "Triton 3.5 it requires; on an NVIDIA H200 with Triton 3.9.")
    fold = release_fold(st, "../")
    assert "cannot import new&#95;api" in fold and "below &#91;requires&#93;" in fold
    assert fold.startswith('??? vt-why vt-releases "Triton releases"')


@pytest.mark.unit
def test_a_hostile_reason_reaches_the_page_escaped(project):
    from verified_triton.judge.status import judge
    from verified_triton.site.directives.releases import release_fold

    project.add("plain", "pass\n")
    lesson = project.lesson("plain")
    write_release(project.evidence, release_record(lesson, "3.4.0", "failed",
                                                   reason="<script>alert(1)</script> [x](javascript:1) {{ page }}"))
    fold = release_fold(judge(lesson, project.evidence), "")
    assert "<script>" not in fold and "[x](" not in fold and "{{" not in fold


@pytest.mark.integration
def test_the_site_shows_the_line_and_the_status_page_the_table(site_project):
    site_project.add_lesson("claims", toml='[requires]\ntriton = "3.5"\nwhy = "triton.new_api"\n')
    (site_project.docs / "status.md").write_text("# Status\n\n::status-table\n\n::release-table\n", encoding="utf-8")
    (site_project.docs / "verification.md").write_text("# How verification works\n\n## Other Triton releases\n\n"
                                                       "A stub.\n", encoding="utf-8")  # the fold links here
    lesson = site_project.lesson("claims")
    site_project.write(site_project.make_record("claims"))
    for release in ("3.5.1", "3.9.0"):
        write_release(site_project.evidence, release_record(lesson, release))
    write_release(site_project.evidence, release_record(lesson, "3.4.0", "failed",
                                                        reason="ImportError: cannot import name new_api"))
    build = site_project.build()
    assert build.returncode == 0, build.stdout + build.stderr
    page = html.unescape(site_project.html("claims"))  # what the reader sees: character references resolved
    assert "Checked under the interpreter with Triton 3.5 and 3.9, fails under 3.4" in page
    assert "cannot import name new_api" in page
    status = html.unescape((site_project.site / "status" / "index.html").read_text(encoding="utf-8"))
    assert "Triton 3.4" in status and "Why each failure failed (1)" in status
    assert "cannot import name new_api" in status


@pytest.mark.unit
def test_the_release_table_says_what_the_matrix_says(site_project):
    from verified_triton.site.directives import Page, Site
    from verified_triton.site.directives.releases import release_table

    site_project.add_lesson("claims", toml='[requires]\ntriton = "3.4"\n')
    lesson = site_project.lesson("claims")
    write_release(site_project.evidence, release_record(lesson, "3.4.0", "failed"))
    write_release(site_project.evidence, release_record(lesson, "3.5.1"))
    site = Site.load(site_project.code, site_project.evidence)
    table = release_table(Page(site, "status.md", None))
    row = next(line for line in table.splitlines() if line.startswith("| [Lesson claims]"))
    assert row.split(" | ")[1:5] == ["✗", "✓", "3.4", "3.5 ✗ refused |"], row


@pytest.fixture(autouse=True)
def _quiet_tmp(tmp_path, monkeypatch):
    """pip writes its cache under HOME; keep it in the test's folder."""
    monkeypatch.setenv("PIP_CACHE_DIR", str(tmp_path / "pip-cache"))
    yield
