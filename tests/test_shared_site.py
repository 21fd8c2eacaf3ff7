"""The real site is built once per test run, whatever the number of xdist workers (conftest.py, `real_site`);
so is what a fixture makes through conftest.py's `once_per_run` (every lesson's smoke run).

pytest runs in a child process on a tiny folder of tests that read `real_site`, with the project's conftest.py
loaded as a plugin and the build command swapped for a stand-in that counts its runs: the stand-in runs once,
every test of every worker reads the same folder, a run with no such test builds nothing, and a failed build
fails each test that needs it with the build's output.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import REPO

pytestmark = pytest.mark.integration

# The stand-in for `mkdocs build`: counts itself, sleeps so that every worker asks while it runs, writes a page.
STAND_IN = """\
import os, sys, time
from pathlib import Path
with open(os.environ["BUILD_COUNT"], "a") as f:
    f.write("built\\n")
time.sleep(2)
if os.environ.get("BUILD_FAILS"):
    print("page.md:3: no such region", flush=True)
    sys.exit(1)
site = Path(sys.argv[sys.argv.index("-d") + 1])
site.mkdir(parents=True)
(site / "index.html").write_text("<p>home</p>")
"""

PLUGIN = """\
import sys
import conftest

conftest.SITE_BUILD[:] = [sys.executable, {stand_in!r}]
"""

READER = """\
import os

import pytest

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("n", range(4))
def test_reads_the_site(real_site, n):
    assert (real_site / "index.html").read_text() == "<p>home</p>"
    with open(os.environ["SITES_READ"], "a") as f:
        f.write(f"{real_site}\\n")
"""


def run(tmp_path: Path, *args: str, fails: bool = False) -> tuple[subprocess.CompletedProcess, int, set[str]]:
    """pytest ARGS on the tiny tests; its result, how many builds ran, and the site folders the tests read."""
    stand_in = tmp_path / "stand_in.py"
    stand_in.write_text(STAND_IN, encoding="utf-8")
    (tmp_path / "fakebuild.py").write_text(PLUGIN.format(stand_in=str(stand_in)), encoding="utf-8")
    count, read = tmp_path / "count", tmp_path / "sites"
    count.write_text("", encoding="utf-8")
    read.write_text("", encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "tests"), str(REPO / "tools"), str(tmp_path)]),
               BUILD_COUNT=str(count), SITES_READ=str(read), BUILD_FAILS="1" if fails else "")
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_ADDOPTS"):
        env.pop(name, None)
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "conftest", "-p", "fakebuild", "-p",
                             "no:cacheprovider", "--basetemp", str(tmp_path / "base"), *args],
                            capture_output=True, text=True, cwd=tmp_path / "tests", env=env, timeout=120)
    return result, len(count.read_text().splitlines()), set(read.read_text().splitlines())


@pytest.fixture
def tests(tmp_path: Path) -> Path:
    folder = tmp_path / "tests"
    folder.mkdir()
    for name in ("test_one.py", "test_two.py"):
        (folder / name).write_text(textwrap.dedent(READER), encoding="utf-8")
    (folder / "test_other.py").write_text("import pytest\n\npytestmark = pytest.mark.unit\n\n\n"
                                          "def test_no_site():\n    pass\n", encoding="utf-8")
    return folder


@pytest.mark.parametrize("parallel", [[], ["-n", "2"], ["-n", "3"]], ids=["serial", "2 workers", "3 workers"])
def test_the_site_is_built_once_per_run_and_every_worker_reads_it(tmp_path, tests, parallel):
    result, builds, read = run(tmp_path, *parallel)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "9 passed" in out and builds == 1, (builds, out)
    assert len(read) == 1, read  # one folder, read by the tests of every worker


def test_a_run_that_needs_no_site_builds_none(tmp_path, tests):
    result, builds, _ = run(tmp_path, "-n", "2", "test_other.py")
    assert result.returncode == 0 and builds == 0, result.stdout + result.stderr


def test_a_failed_build_fails_each_test_that_needs_it_with_its_output_and_runs_once(tmp_path, tests):
    result, builds, _ = run(tmp_path, "-n", "2", fails=True)
    out = result.stdout + result.stderr
    assert result.returncode == 1 and builds == 1, out
    assert "8 errors" in out and "1 passed" in out, out
    assert "the real site does not build (exit 1)" in out and "page.md:3: no such region" in out


MADE_ONCE = """\
import os

import pytest

from conftest import once_per_run

pytestmark = pytest.mark.integration


@pytest.fixture(scope="session")
def made(tmp_path_factory):
    def make():
        with open(os.environ["BUILD_COUNT"], "a") as f:
            f.write("made\\\\n")
        return {"pid": os.getpid()}

    return once_per_run(tmp_path_factory, "made", make)


@pytest.mark.parametrize("n", range(6))
def test_reads_what_was_made_once(made, n):
    with open(os.environ["SITES_READ"], "a") as f:
        f.write(f"{made['pid']}\\\\n")
"""


@pytest.mark.parametrize("parallel", [[], ["-n", "3"]], ids=["serial", "3 workers"])
def test_a_fixture_made_once_per_run_is_made_once_and_read_by_every_worker(tmp_path, parallel):
    """A session fixture of minutes (every lesson's smoke run) was made by each xdist worker that needed it;
    once_per_run makes it once and hands the same value to every worker (the smoke runs are pickled)."""
    folder = tmp_path / "tests"
    folder.mkdir()
    (folder / "test_made.py").write_text(textwrap.dedent(MADE_ONCE), encoding="utf-8")
    result, made, read = run(tmp_path, *parallel)
    assert result.returncode == 0 and "6 passed" in result.stdout, result.stdout + result.stderr
    assert made == 1 and len(read) == 1, (made, read)
