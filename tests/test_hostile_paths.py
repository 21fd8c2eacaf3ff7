"""Hostile input, class 2: files from outside the repository, through links and special files.

A symbolic link, a hard link, a FIFO or a device under code/ or evidence/ is
never followed, read or published: the build, `verify.py` (running, --status,
--check) and `--import` each refuse it with an error naming the path, nothing
hangs on a FIFO, and no byte of the file outside the repository reaches the
built site or the evidence.
"""

from __future__ import annotations

import io
import os
import shutil
import stat
import tarfile
from pathlib import Path

import pytest

from conftest import FAKE_PNG, SiteProject, build_output, figure_name, make_site_project

pytestmark = pytest.mark.integration

SECRET = "TOP-SECRET-4c1f9e"  # what lives outside the repository
PAGE = "---\nlesson: plain\n---\n\n# Plain\n\n::status\n\n::output\n\n::figures\n"
FIG = figure_name("plot", FAKE_PNG)


@pytest.fixture
def outside(tmp_path) -> Path:
    """Files outside the project: text, a 'source', a PNG and a record-shaped JSON, all carrying the secret."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.txt").write_text(f"{SECRET}\n")
    (folder / "secret.py").write_text(f"SECRET = {SECRET!r}\n")
    (folder / "secret.png").write_bytes(FAKE_PNG + SECRET.encode())
    (folder / "lesson.toml").write_text(f'title = "{SECRET}"\nmain = "plain.py"\npage = "lessons/plain.md"\n')
    return folder


SOURCE = """\
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]
from lessonkit import Figure, Lesson  # noqa: E402
import helper  # noqa: E402

# snippet: kernel
def kernel():
    return helper.VALUE
# end snippet


if __name__ == "__main__":
    lesson = Lesson("plain")
    lesson.check("c", kernel() == 1)
    lesson._figure_dir.mkdir(parents=True, exist_ok=True)
    (lesson._figure_dir / "plot.png").write_bytes(b"\\x89PNG\\r\\n\\x1a\\n" + bytes(range(256)))
    lesson.results.figures.append(Figure("plot", "plot.png"))
    lesson._save()
    sys.exit(lesson.finish())
"""


@pytest.fixture
def site(tmp_path) -> SiteProject:
    """A lesson that imports a helper and draws a figure, with a current interpreter record."""
    project = make_site_project(tmp_path / "repo")
    folder = project.add_lesson("plain", PAGE, source=SOURCE)
    (folder / "helper.py").write_text("VALUE = 1\n")
    write_current(project)
    return project


def write_current(project: SiteProject) -> None:
    from verified_triton.core.kit import Check, Figure

    project.write(project.make_record("plain", checks=[Check("c", "pass")], figures=[Figure("plot", FIG)]),
                  {FIG: FAKE_PNG})


def mkfifo(path: Path) -> None:
    path.unlink(missing_ok=True)
    os.mkfifo(path)


def replace_by_link(path: Path, target: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)
    path.symlink_to(target)


def hard_link(path: Path, target: Path) -> None:
    path.unlink(missing_ok=True)
    os.link(target, path)


def assert_no_secret(project: SiteProject, planted: Path | None = None) -> None:
    """Nothing from outside the repository was published, or recorded anywhere but the planted file."""
    for root in (project.site, project.evidence):
        if not root.exists():
            continue
        for p in root.rglob("*"):
            if p == planted or not p.is_file() or p.is_symlink() or stat.S_ISFIFO(p.lstat().st_mode):
                continue
            assert SECRET.encode() not in p.read_bytes(), f"{p} carries a file from outside the repository"


def assert_refused(result, path: Path, what: str) -> None:
    output = build_output(result)
    assert str(path) in output and what in output, output
    assert "Traceback" not in output, output


def lesson_folder_link(project: SiteProject, outside: Path) -> None:
    (outside / "evil").mkdir()
    shutil.copyfile(outside / "lesson.toml", outside / "evil" / "lesson.toml")
    (project.code / "evil").symlink_to(outside / "evil")


def copy_then_link(path: Path, copy: Path) -> None:
    shutil.copytree(path, copy)
    replace_by_link(path, copy)


# Each case: how to plant it, the path the errors must name, and the words they use.
CODE_CASES = {
    "lesson-folder-symlink": (lesson_folder_link, "evil", "a symbolic link"),
    "lesson-toml-symlink": (lambda p, o: replace_by_link(p.code / "plain" / "lesson.toml", o / "lesson.toml"),
                            "plain/lesson.toml", "a symbolic link"),
    "imported-source-symlink": (lambda p, o: replace_by_link(p.code / "plain" / "helper.py", o / "secret.py"),
                                "plain/helper.py", "a symbolic link"),
    "kit-hardlink": (lambda p, o: hard_link(p.code / "lessonkit.py", o / "secret.py"), "lessonkit.py",
                     "a hard link"),
    "imported-source-fifo": (lambda p, o: mkfifo(p.code / "plain" / "helper.py"), "plain/helper.py", "a FIFO"),
}


@pytest.mark.parametrize("case", CODE_CASES, ids=list(CODE_CASES))
def test_a_link_or_special_file_under_code_is_refused_everywhere(case, site, outside, tmp_path):
    plant, rel, what = CODE_CASES[case]
    plant(site, outside)
    path = site.code / rel
    build = site.build()
    assert build.returncode != 0
    assert_refused(build, path, what)
    for args in (["--status"], ["--check"], ["--mode", "interpreter", "--force"]):
        result = site.verify(*args, timeout=60)
        assert result.returncode in (1, 2), (args, result.stdout, result.stderr)
        assert_refused(result, path, what)
    bundle = tmp_path / "b.tar.gz"
    with tarfile.open(bundle, "w:gz") as tar:
        data = site.record_file("plain").read_bytes()
        info = tarfile.TarInfo("plain/interpreter.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    imported = site.verify("--import", str(bundle), timeout=60)
    assert imported.returncode in (1, 2)
    assert_refused(imported, path, what)
    assert_no_secret(site, planted=path)


def test_a_link_that_no_lesson_imports_is_still_never_published(site, outside):
    (site.code / "plain" / "notes.py").symlink_to(outside / "secret.py")
    build = site.build()
    assert build.returncode != 0
    assert_refused(build, site.code / "plain" / "notes.py", "a symbolic link")
    assert_no_secret(site)
    # verify never reads it (it is no lesson's source), so it neither leaks nor blocks the lesson
    result = site.verify("--status")
    assert result.returncode == 0 and SECRET not in result.stdout


def test_a_device_under_code_is_refused(site):
    helper = site.code / "plain" / "helper.py"
    helper.unlink()
    try:
        os.mknod(helper, stat.S_IFCHR | 0o644, os.makedev(1, 5))  # /dev/zero: endless bytes
    except (PermissionError, OSError) as exc:
        pytest.skip(f"cannot make a device node here ({exc})")
    for result in (site.build(), site.verify("--status", timeout=60)):
        assert result.returncode != 0
        assert_refused(result, helper, "a character device")


EVIDENCE_CASES = {
    "record-symlink": (lambda p, o: replace_by_link(p.record_file("plain"), o / "secret.txt"),
                       "plain/interpreter.json", "a symbolic link"),
    "lesson-folder-symlink": (lambda p, o: copy_then_link(p.evidence / "plain", o / "ev"), "plain",
                              "a symbolic link"),
    "figure-symlink": (lambda p, o: replace_by_link(p.evidence / "plain" / "interpreter" / FIG, o / "secret.png"),
                       f"plain/interpreter/{FIG}", "a symbolic link"),
    "figure-folder-symlink": (lambda p, o: copy_then_link(p.evidence / "plain" / "interpreter", o / "figs"),
                              "plain/interpreter", "a symbolic link"),
    "figure-hardlink": (lambda p, o: hard_link(p.evidence / "plain" / "interpreter" / FIG, o / "secret.png"),
                        f"plain/interpreter/{FIG}", "a hard link"),
    "record-fifo": (lambda p, o: mkfifo(p.record_file("plain")), "plain/interpreter.json", "a FIFO"),
}


def bundle_of_current(site: SiteProject, path: Path) -> Path:
    """The current record and its figure as a bundle, made before anything is planted."""
    with tarfile.open(path, "w:gz") as tar:
        for member, data in (("plain/interpreter.json", site.record_file("plain").read_bytes()),
                             (f"plain/interpreter/{FIG}", FAKE_PNG)):
            info = tarfile.TarInfo(member)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def snapshot(folder: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in folder.rglob("*") if p.is_file() and not stat.S_ISFIFO(p.lstat().st_mode)}


@pytest.mark.parametrize("case", EVIDENCE_CASES, ids=list(EVIDENCE_CASES))
def test_a_link_or_special_file_under_evidence_is_refused_everywhere(case, site, outside, tmp_path):
    plant, rel, what = EVIDENCE_CASES[case]
    bundle = bundle_of_current(site, tmp_path / "b.tar.gz")
    plant(site, outside)
    path = site.evidence / rel
    before = snapshot(outside)
    build = site.build()
    assert build.returncode != 0
    assert_refused(build, path, what)
    status = site.verify("--status", timeout=60)
    assert status.returncode == 0 and "could not be used" in status.stdout
    assert_refused(status, path, what)
    check = site.verify("--check", timeout=60)
    assert check.returncode == 1 and "unusable evidence" in check.stderr
    assert_refused(check, path, what)
    # re-recording or importing would write through it (outside the repository, or over the outside file)
    run = site.verify("--mode", "interpreter", "--force", timeout=120)
    assert run.returncode == 1 and "verify could not record this run" in run.stdout
    assert_refused(run, path, "evidence is never written through one")
    imported = site.verify("--import", str(bundle), timeout=60)
    assert imported.returncode == 1
    assert_refused(imported, path, "evidence is never written through one")
    assert snapshot(outside) == before, "a write went through the link, outside the repository"
    assert_no_secret(site, planted=path)


def test_a_bundle_member_that_is_a_link_is_refused(site, tmp_path):
    bundle = tmp_path / "links.tar.gz"
    with tarfile.open(bundle, "w:gz") as tar:
        for kind, name, target in ((tarfile.SYMTYPE, "plain/interpreter.json", "/etc/passwd"),
                                   (tarfile.LNKTYPE, f"plain/interpreter/{FIG}", "/etc/hostname"),
                                   (tarfile.CHRTYPE, "plain/gpu-x.json", "")):
            info = tarfile.TarInfo(name)
            info.type, info.linkname = kind, target
            tar.addfile(info)
    before = site.files()
    result = site.verify("--import", str(bundle), timeout=60)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"{bundle}:plain/interpreter.json: a link; refused" in result.stderr
    assert f"{bundle}:plain/interpreter/{FIG}: a link; refused" in result.stderr
    assert f"{bundle}:plain/gpu-x.json: not a plain file; refused" in result.stderr
    assert site.files() == before
