"""Every test has exactly one tier (tests/tiers.py): one without, or with two, stops the collection naming it.

Each case runs pytest in a child process on a tiny folder of tests beside the project's own conftest.py and
pytest configuration (pyproject.toml), as `bash tools/dev.sh test` runs it, with and without xdist.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import REPO
from tiers import TIERS

pytestmark = pytest.mark.integration

TESTS = REPO / "tests"


def run_pytest(folder: Path, *args: str) -> subprocess.CompletedProcess:
    """pytest on `folder` with the project's configuration and conftest.py (it imports the tier hook)."""
    shutil.copy(REPO / "pyproject.toml", folder)
    shutil.copy(TESTS / "conftest.py", folder)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), str(REPO / "tools")]))
    env.pop("PYTEST_XDIST_WORKER", None)
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args, str(folder)],
                          capture_output=True, text=True, cwd=folder, env=env, timeout=120)


def write(folder: Path, name: str, source: str) -> None:
    (folder / name).write_text(textwrap.dedent(source), encoding="utf-8")


TIERED = """\
    import pytest

    pytestmark = pytest.mark.unit


    def test_in_process():
        assert 1 + 1 == 2
    """

MIXED = """\
    import pytest


    @pytest.mark.integration
    def test_marked():
        pass


    def test_without_a_tier():
        pass


    @pytest.mark.unit
    @pytest.mark.e2e
    def test_with_two():
        pass


    class TestGroup:
        def test_in_a_class(self):
            pass
    """


@pytest.mark.parametrize("parallel", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_a_test_without_exactly_one_tier_fails_the_collection_by_name(tmp_path, parallel):
    write(tmp_path, "test_tiered.py", TIERED)
    write(tmp_path, "test_mixed.py", MIXED)
    result = run_pytest(tmp_path, *parallel)
    out = result.stdout + result.stderr
    assert result.returncode != 0, out
    assert "ERROR collecting test_mixed.py" in out and "3 test(s) without exactly one tier" in out, out
    assert "test_mixed.py::test_without_a_tier: no tier" in out
    assert "test_mixed.py::test_with_two: tiers e2e and unit" in out
    assert "test_mixed.py::TestGroup::test_in_a_class: no tier" in out
    assert "test_marked" not in out.split("ERROR collecting")[1].split("short test summary")[0]


def test_tiered_tests_collect_and_run_and_each_tier_selects_its_own(tmp_path):
    write(tmp_path, "test_tiered.py", TIERED)
    write(tmp_path, "test_other.py", """\
        import pytest


        @pytest.mark.integration
        def test_a_subprocess():
            pass


        @pytest.mark.e2e
        def test_a_browser():
            pass
        """)
    everything = run_pytest(tmp_path, "-v")
    assert everything.returncode == 0 and "3 passed" in everything.stdout, everything.stdout + everything.stderr
    fast = run_pytest(tmp_path, "-v", "-m", "not e2e")
    assert fast.returncode == 0, fast.stdout + fast.stderr
    assert re.findall(r"::(\w+) PASSED", fast.stdout) == ["test_a_subprocess", "test_in_process"]


def test_a_misspelt_tier_is_an_error_not_a_new_marker(tmp_path):
    write(tmp_path, "test_typo.py", """\
        import pytest

        pytestmark = pytest.mark.integraton


        def test_x():
            pass
        """)
    result = run_pytest(tmp_path)
    assert result.returncode != 0
    assert "'integraton' not found in `markers` configuration option" in result.stdout + result.stderr


def test_the_tiers_are_the_markers_pyproject_registers():
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    registered = re.findall(r'^    "(\w+): ', text.split("markers = [", 1)[1].split("]", 1)[0], re.M)
    assert tuple(registered) == TIERS
