"""evidence/awaiting-gpu.toml: a fix made without a GPU may wait for its GPU run, only as written.

The check lets a lesson with GPU evidence of an older source through only while the entry's source
hash is the lesson's source now and its interpreter record is current; the badge never changes, a
wrong or outdated entry is itself a problem, and --publish ignores the file.
"""

from __future__ import annotations

import pytest

from conftest import Project, fake_record
from verified_triton.judge.evidence import write_record
from verified_triton.judge.status import PARTIAL
from verified_triton.record.awaiting import AwaitingError, load_awaiting

OLD = "1" * 64


@pytest.fixture
def fixed(project: Project):
    """A lesson fixed after its GPU run: the interpreter record is current, the GPU record is not."""
    project.add("fixed", "lesson = Lesson('fixed')\nsys.exit(lesson.finish())\n")
    lesson = project.lesson("fixed")
    write_record(project.evidence, fake_record(lesson, "interpreter"))
    write_record(project.evidence, fake_record(lesson, "gpu", source_hash=OLD))
    return lesson


def entry(lesson: str, source_hash: str, reason: str = "the GPU time ran out") -> str:
    return f'[[awaiting]]\nlesson = "{lesson}"\nsource_hash = "{source_hash}"\nreason = "{reason}"\n'


def write_awaiting(project: Project, text: str) -> None:
    (project.evidence / "awaiting-gpu.toml").write_text(text, encoding="utf-8")


@pytest.mark.integration
def test_without_an_entry_a_gpu_record_of_an_older_source_fails_the_check(project: Project, fixed):
    got = project.verify("--check")
    assert got.returncode == 1
    assert "evidence/fixed/gpu-nvidia-h200.json is for another source" in got.stderr


@pytest.mark.integration
def test_an_entry_for_the_source_now_lets_it_through_and_says_so(project: Project, fixed):
    write_awaiting(project, entry("fixed", fixed.source_hash(), "fixed a launch; no GPU left"))
    assert project.judge("fixed").status == PARTIAL  # the badge is the judge's, not the file's
    got = project.verify("--check")
    assert got.returncode == 0, got.stderr
    assert "fixed: PARTIALLY VERIFIED, waiting for a GPU run of this source" in got.stdout
    assert "fixed a launch; no GPU left" in got.stdout
    assert "0 of 1 lesson have current, usable evidence and 1 waits" in got.stdout
    published = project.verify("--check", "--publish")
    assert published.returncode == 1 and "is for another source" in published.stderr


@pytest.mark.integration
def test_an_entry_for_another_source_is_a_problem_naming_the_file(project: Project, fixed):
    write_awaiting(project, entry("fixed", "2" * 64))
    got = project.verify("--check")
    assert got.returncode == 1
    assert "fixed: evidence/awaiting-gpu.toml: the entry is for source 222222222222" in got.stderr
    assert "is for another source" in got.stderr  # and the stale record is still reported


@pytest.mark.integration
def test_an_entry_that_explains_nothing_must_go(project: Project, fixed):
    write_record(project.evidence, fake_record(fixed, "gpu"))  # recorded again: nothing waits
    write_awaiting(project, entry("fixed", fixed.source_hash()) + entry("gone", "3" * 64))
    got = project.verify("--check")
    assert got.returncode == 1
    assert "fixed: evidence/awaiting-gpu.toml: the lesson is VERIFIED with no GPU record" in got.stderr
    assert "evidence/awaiting-gpu.toml: 'gone' is not a lesson here; remove its entry" in got.stderr


@pytest.mark.integration
def test_a_stale_interpreter_record_is_not_excused(project: Project, fixed):
    write_record(project.evidence, fake_record(fixed, "interpreter", source_hash=OLD))
    write_awaiting(project, entry("fixed", fixed.source_hash()))
    got = project.verify("--check")
    assert got.returncode == 1
    assert "its interpreter record is not current and passing" in got.stderr


@pytest.mark.unit
@pytest.mark.parametrize("text, message", [
    ("[[awaiting]]\nlesson = 'x'\n", "source_hash"),
    ("[[awaiting]\n", "awaiting-gpu.toml"),
    (entry("x", "ABC"), "64 lower-case hex digits"),
    (entry("x", "a" * 64, " "), "reason must say"),
    (entry("x", "a" * 64) + entry("x", "b" * 64), "listed twice"),
    ("[[awaiting]]\nlesson = 'x'\nsource_hash = '" + "a" * 64 + "'\nreason = 'r'\nextra = 1\n", "extra"),
])
def test_a_malformed_file_is_an_error_naming_the_file_and_field(project: Project, text, message):
    write_awaiting(project, text)
    with pytest.raises(AwaitingError, match=message) as err:
        load_awaiting(project.evidence)
    assert "awaiting-gpu.toml" in str(err.value)


@pytest.mark.integration
def test_a_malformed_file_stops_the_check_with_a_clear_error(project: Project, fixed):
    write_awaiting(project, entry("fixed", "not a hash"))
    got = project.verify("--check")
    assert got.returncode == 2 and "Traceback" not in got.stderr
    assert "awaiting-gpu.toml: awaiting[0]: source_hash must be 64 lower-case hex digits" in got.stderr
