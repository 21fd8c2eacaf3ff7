"""Hostile input, class 6: loss of evidence that was already there.

An import that names a figure its bundle lacks is refused and leaves the
record and figures here untouched; a crash between writing the new figures
and the new record leaves the old record whole with its figures; an existing
figure is removed only after a record that no longer names it was written
completely.
"""

from __future__ import annotations

import io
import tarfile

import pytest

from conftest import FAKE_PNG, Project, fake_record, figure_name
from verified_triton.core.kit import Figure
from verified_triton.judge import evidence
from verified_triton.judge.evidence import read_record, write_record

OLD_PNG, NEW_PNG = FAKE_PNG + b"old", FAKE_PNG + b"new"
OLD, NEW = figure_name("plot", OLD_PNG), figure_name("plot", NEW_PNG)
LESSON = "lesson = Lesson('good')\nsys.exit(lesson.finish())\n"


@pytest.fixture
def existing(project: Project):
    """A GPU record with its figure, already here."""
    project.add("good", LESSON)
    record = fake_record(project.lesson("good"), "gpu", started="2026-01-01T00:00:00Z", figures=[Figure("plot", OLD)])
    write_record(project.evidence, record, {OLD: OLD_PNG})
    return record


def newer(project: Project):
    return fake_record(project.lesson("good"), "gpu", started="2026-02-01T00:00:00Z", figures=[Figure("plot", NEW)])


def bundle_of(path, members: dict[str, bytes]):
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


@pytest.mark.integration
def test_an_import_naming_a_figure_it_lacks_changes_nothing(project, existing, tmp_path):
    before = project.files()
    assert sorted(before) == ["good/gpu-nvidia-h200.json", f"good/gpu-nvidia-h200/{OLD}"]
    bundle = bundle_of(tmp_path / "b.tar.gz", {"good/gpu-nvidia-h200.json": newer(project).to_json().encode()})
    result = project.verify("--import", str(bundle))
    assert result.returncode == 1
    assert f"{bundle}:good/gpu-nvidia-h200.json: figure {NEW} is not in the bundle; refused" in result.stderr
    assert project.files() == before


@pytest.mark.integration
def test_an_import_that_brings_its_figure_replaces_the_old_one_after_the_record(project, existing, tmp_path):
    bundle = bundle_of(tmp_path / "b.tar.gz", {"good/gpu-nvidia-h200.json": newer(project).to_json().encode(),
                                               f"good/gpu-nvidia-h200/{NEW}": NEW_PNG})
    result = project.verify("--import", str(bundle), "--accept-changes")  # a figure from other bytes is a change
    assert result.returncode == 0, result.stderr
    assert sorted(project.files()) == ["good/gpu-nvidia-h200.json", f"good/gpu-nvidia-h200/{NEW}"]


@pytest.mark.unit
def test_a_crash_between_the_figures_and_the_record_keeps_the_old_record_and_its_figures(project, existing,
                                                                                       monkeypatch):
    before = project.files()

    def crash(path, text):
        raise OSError("killed between the figures and the record")

    monkeypatch.setattr(evidence, "atomic_write_text", crash)
    with pytest.raises(OSError):
        write_record(project.evidence, newer(project), {NEW: NEW_PNG})
    monkeypatch.undo()
    after = project.files()
    # the old record is whole and every figure it names is still there (the new figure may wait, unnamed)
    assert after["good/gpu-nvidia-h200.json"] == before["good/gpu-nvidia-h200.json"]
    assert after[f"good/gpu-nvidia-h200/{OLD}"] == OLD_PNG
    record = read_record(project.record_file("good", "gpu-nvidia-h200"), project.evidence)
    assert record == existing
    assert evidence.read_figure(project.evidence, record, OLD) == OLD_PNG
    # the next complete write tidies up: only the figures its record names remain
    write_record(project.evidence, newer(project), {NEW: NEW_PNG})
    assert sorted(project.files()) == ["good/gpu-nvidia-h200.json", f"good/gpu-nvidia-h200/{NEW}"]


@pytest.mark.unit
def test_a_crash_during_an_import_keeps_the_old_record_and_its_figures(project, existing, tmp_path, monkeypatch):
    """The same crash, on the import path, in process."""
    from verified_triton.record.bundles import import_bundles

    before = project.files()
    bundle = bundle_of(tmp_path / "b.tar.gz", {"good/gpu-nvidia-h200.json": newer(project).to_json().encode(),
                                               f"good/gpu-nvidia-h200/{NEW}": NEW_PNG})

    def crash(path, text):
        raise OSError("disk full")

    monkeypatch.setattr(evidence, "atomic_write_text", crash)
    with pytest.raises(OSError):
        import_bundles([bundle], {"good": project.lesson("good")}, project.evidence, accept_changes=True)
    monkeypatch.undo()
    after = project.files()
    assert after["good/gpu-nvidia-h200.json"] == before["good/gpu-nvidia-h200.json"]
    assert after[f"good/gpu-nvidia-h200/{OLD}"] == OLD_PNG


@pytest.mark.unit
def test_old_figures_are_removed_only_once_the_new_record_is_in_place(project, existing, monkeypatch):
    seen = {}
    real = evidence.atomic_write_text

    def watch(path, text):
        seen["at the record write"] = sorted(p.name for p in path.parent.joinpath("gpu-nvidia-h200").iterdir())
        real(path, text)

    monkeypatch.setattr(evidence, "atomic_write_text", watch)
    write_record(project.evidence, newer(project), {NEW: NEW_PNG})
    assert seen["at the record write"] == sorted([OLD, NEW])  # both, while the record is being replaced
    assert sorted(p.name for p in (project.evidence / "good" / "gpu-nvidia-h200").iterdir()) == [NEW]


@pytest.mark.integration
def test_a_bundle_refused_for_one_member_leaves_every_record_here(project, existing, tmp_path):
    project.add("other", LESSON.replace("good", "other"), order=2)
    write_record(project.evidence, fake_record(project.lesson("other"), "interpreter"))
    before = project.files()
    good = newer(project)
    bundle = bundle_of(tmp_path / "b.tar.gz", {
        "good/gpu-nvidia-h200.json": good.to_json().encode(), f"good/gpu-nvidia-h200/{NEW}": NEW_PNG,
        "other/interpreter.json": b"{ not json"})
    result = project.verify("--import", str(bundle))
    assert result.returncode == 1 and "nothing from this bundle was imported" in result.stderr
    assert project.files() == before
