"""Hostile input, class 5: silent success.

An import that merged nothing, a bundle whose every member was skipped or
refused, a GPU recording on a machine without a GPU, a bundle with nothing
to put in it: each says what happened, member by member, and exits non-zero.
"""

from __future__ import annotations

import io
import tarfile

import pytest

from conftest import fake_record

pytestmark = pytest.mark.integration

LESSON = "lesson = Lesson('good')\nsys.exit(lesson.finish())\n"


def bundle_of(path, members) -> None:
    """members: (name, type, data or link target)."""
    with tarfile.open(path, "w:gz") as tar:
        for name, kind, payload in members:
            info = tarfile.TarInfo(name)
            info.type = kind
            if kind == tarfile.REGTYPE:
                info.size = len(payload)
                tar.addfile(info, io.BytesIO(payload))
            else:
                info.linkname = payload
                tar.addfile(info)


SKIPPED = {
    "absolute-path": [("/etc/cron.d/evil.json", tarfile.REGTYPE, b"{}")],
    "parent-path": [("../../evil.json", tarfile.REGTYPE, b"{}"), ("good/../../x.json", tarfile.REGTYPE, b"{}")],
    "symlink": [("good/interpreter.json", tarfile.SYMTYPE, "/etc/passwd")],
    "hardlink": [("good/interpreter.json", tarfile.LNKTYPE, "good/gpu-x.json")],
    "device": [("good/interpreter.json", tarfile.CHRTYPE, "")],
    "fifo": [("good/interpreter.json", tarfile.FIFOTYPE, "")],
    "not-evidence": [("good/notes.txt", tarfile.REGTYPE, b"hello"), ("README.md", tarfile.REGTYPE, b"hi")],
    "folders-only": [("good", tarfile.DIRTYPE, ""), ("good/interpreter", tarfile.DIRTYPE, "")],
    "empty": [],
}


@pytest.mark.parametrize("case", SKIPPED, ids=list(SKIPPED))
def test_a_bundle_with_nothing_usable_fails_and_says_why(project, tmp_path, case):
    project.add("good", LESSON)
    bundle = tmp_path / "b.tar.gz"
    bundle_of(bundle, SKIPPED[case])
    result = project.verify("--import", str(bundle))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert "import: 0 records merged" in result.stdout
    for name, _, _ in SKIPPED[case]:
        if case != "folders-only":
            assert f"refused: {bundle}:{name}: " in result.stderr, (name, result.stderr)
    if case in ("folders-only", "empty"):
        assert f"refused: {bundle}: no records in this bundle" in result.stderr
    assert project.files() == {}


def test_a_bundle_of_lessons_not_selected_merges_nothing_and_fails(project, tmp_path):
    project.add("good", LESSON)
    project.add("other", LESSON.replace("good", "other"), order=2)
    bundle = tmp_path / "b.tar.gz"
    rec = fake_record(project.lesson("good"), "gpu")
    bundle_of(bundle, [("good/gpu-nvidia-h200.json", tarfile.REGTYPE, rec.to_json().encode())])
    result = project.verify("--import", str(bundle), "--lesson", "other")
    assert result.returncode == 1
    assert f"note: {bundle}:good/gpu-nvidia-h200.json: lesson not selected, skipped" in result.stdout
    assert f"refused: {bundle}: no records in this bundle" in result.stderr  # none of the selected lessons
    assert project.files() == {}
    # and with the lesson selected, the same bundle merges
    assert project.verify("--import", str(bundle), "--lesson", "good").returncode == 0


def test_one_good_member_does_not_hide_a_refused_one(project, tmp_path):
    project.add("good", LESSON)
    bundle = tmp_path / "b.tar.gz"
    rec = fake_record(project.lesson("good"), "gpu")
    bundle_of(bundle, [("good/gpu-nvidia-h200.json", tarfile.REGTYPE, rec.to_json().encode()),
                       ("good/evil.sh", tarfile.REGTYPE, b"rm -rf /")])
    result = project.verify("--import", str(bundle))
    assert result.returncode == 1
    assert f"refused: {bundle}:good/evil.sh: not a record" in result.stderr
    assert "nothing from this bundle was imported" in result.stderr
    assert project.files() == {}


def test_gpu_mode_without_a_gpu_fails_with_a_message(project, tmp_path):
    project.add("good", LESSON)
    bundle = tmp_path / "gpu.tar.gz"
    result = project.verify("--mode", "gpu", "--force", "--bundle", str(bundle))
    assert result.returncode == 2
    assert "error: --mode gpu: no CUDA device found on this machine" in result.stderr
    assert "nothing was run and no bundle was written" in result.stderr
    assert not bundle.exists() and project.files() == {}


def test_a_bundle_with_no_records_is_not_written_and_fails(project, tmp_path):
    project.add("gpu-only", LESSON.replace("good", "gpu-only"),
                toml='[interpreter]\nsupported = false\nreason = "needs a GPU"\n')
    bundle = tmp_path / "out.tar.gz"
    result = project.verify("--mode", "interpreter", "--bundle", str(bundle))
    assert result.returncode == 1
    assert "bundle: no records to bundle; nothing written" in result.stderr
    assert not bundle.exists()
