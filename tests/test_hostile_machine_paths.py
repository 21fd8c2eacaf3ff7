"""Hostile input, issue 20, class 11: no paths of the recording machine.

Before a record is written, the paths a run printed become repository-relative
(under the project) or stable forms (<site-packages>/..., <python>/..., <tmp>/...,
~/...); tools/migrate.py cleans records written before, keeping
their source hashes, and running it twice changes nothing. Written before the
fix: records held the project's, the temporary folder's and the venv's paths.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest

from conftest import REPO, Project, fake_record
from verified_triton.judge.evidence import write_record

PRINTS_PATHS = """\
    import sysconfig
    import warnings

    lesson = Lesson("paths")
    here = Path(__file__).resolve()
    packages = Path(sysconfig.get_paths()["purelib"]) / "triton" / "language" / "core.py"
    where = {"file": str(here), "results": os.environ["VT_RESULTS"], "packages": str(packages),
             "home": str(Path.home() / ".triton" / "cache"), "stdlib": os.__file__}
    print(" | ".join(f"{k}={v}" for k, v in where.items()))
    warnings.warn(f"from {packages}:869 and {here}")
    lesson.check("paths", True, f"ran {here} with results in {where['results']}")
    raise RuntimeError(f"the traceback goes through {here}")
"""


def machine_paths(project: Project) -> list[str]:
    """Absolute paths of this machine that a record must not hold."""
    found = [str(project.root), tempfile.gettempdir() + "/", str(Path.home()) + "/",
             sysconfig.get_paths()["purelib"], sysconfig.get_paths()["stdlib"]]
    return sorted({p for p in found if p not in ("/", "")})


@pytest.mark.integration
def test_a_record_holds_no_path_of_the_machine_that_ran_it(project):
    project.add("paths", PRINTS_PATHS)
    result = project.verify("--mode", "interpreter")
    assert result.returncode == 1, result.stdout + result.stderr
    raw = project.record_file("paths").read_text(encoding="utf-8")
    for path in machine_paths(project):
        assert json.dumps(path)[1:-1] not in raw, f"{path} is in the record"
    record = project.record("paths")
    assert "file=code/paths/paths.py" in record.stdout and "results=<tmp>/" in record.stdout
    assert "packages=<site-packages>/triton/language/core.py" in record.stdout and "home=~/.triton" in record.stdout
    assert "stdlib=<python>/os.py" in record.stdout
    assert 'File "code/paths/paths.py", line' in record.stderr and "<site-packages>/triton" in record.stderr
    assert record.checks[0].message.startswith("ran code/paths/paths.py with results in <tmp>/")


@pytest.mark.integration
def test_the_migration_cleans_committed_records_and_keeps_their_hashes(project, tmp_path):
    project.add("good", "lesson = Lesson('good')\nsys.exit(lesson.finish())\n")
    lesson = project.lesson("good")
    dirty = fake_record(lesson, "gpu", stderr="/opt/torch/.venv/lib/python3.12/site-packages/torch/autograd/"
                        "graph.py:869: UserWarning: x (Triggered internally at /pytorch/aten/src/ATen/x.cpp:335.)\n"
                        'File "/home/alice/src/verified-triton/code/good/good.py", line 3\n/tmp/vt-verify-9-good/r\n')
    write_record(project.evidence, dirty)
    clean = fake_record(lesson, "interpreter")
    write_record(project.evidence, clean)
    untouched = project.record_file("good").read_bytes()
    script = REPO / "tools" / "migrate.py"

    def migrate(*args):
        return subprocess.run([sys.executable, str(script), "--evidence-dir", str(project.evidence), *args],
                              capture_output=True, text=True, timeout=120)

    assert migrate("--check").returncode == 1
    first = migrate()
    assert first.returncode == 0 and "1 record(s) cleaned" in first.stdout, first.stdout + first.stderr
    after = project.record("good", "gpu-nvidia-h200")
    assert after.stderr == ("<site-packages>/torch/autograd/graph.py:869: UserWarning: x (Triggered internally at "
                            "/pytorch/aten/src/ATen/x.cpp:335.)\nFile \"~/src/verified-triton/code/good/good.py\", "
                            "line 3\n<tmp>/vt-verify-9-good/r\n")
    assert (after.source_hash, after.source_files) == (dirty.source_hash, dirty.source_files)
    assert project.judge("good").problems == []
    assert project.record_file("good").read_bytes() == untouched  # a clean record is not rewritten
    snapshot = project.files()
    second = migrate()
    assert second.returncode == 0 and "0 record(s) cleaned" in second.stdout
    assert project.files() == snapshot and migrate("--check").returncode == 0


@pytest.mark.integration
def test_no_committed_record_holds_an_absolute_path_of_a_recording_machine():
    pattern = re.compile(r'(?<![\w.:~<>/-])/(?:home|Users|root|tmp|var|opt|usr|private|work|srv|mnt|nix)/')
    offenders = {}
    for path in sorted((REPO / "evidence").glob("*/*.json")):
        found = pattern.findall(path.read_text(encoding="utf-8"))
        if found:
            offenders[path.relative_to(REPO).as_posix()] = found
    assert offenders == {}, "run: .venv/bin/python tools/migrate.py"
    statuses = subprocess.run([sys.executable, str(REPO / "tools" / "verify.py"), "--status", "--json"],
                              capture_output=True, text=True, cwd=REPO, timeout=300,
                              env=dict(os.environ, CUDA_VISIBLE_DEVICES=""))
    assert all(not lesson["problems"] for lesson in json.loads(statuses.stdout))  # cleaned, still usable


@pytest.mark.unit
def test_a_python_executable_in_a_virtual_environment_is_named_without_its_folder():
    """compute-sanitizer's host frames name the recording machine's interpreter (/opt/torch/.venv/...)."""
    from verified_triton.record.scrub import scrubber

    scrub = scrubber(Path(tempfile.gettempdir()) / "elsewhere")
    text = "Host Frame: PyObject_Call\n  in /opt/torch/.venv/bin/python3\n  in /srv/x/bin/python3.12\n"
    assert scrub(text) == "Host Frame: PyObject_Call\n  in <python>/bin/python\n  in <python>/bin/python\n"
    assert scrub("/usr/bin/pythonista and bin/python3") == "/usr/bin/pythonista and bin/python3"
