"""tools/dev.sh as a newcomer meets it (issue 46): what it needs is said before anything is installed; the
first serve says what it is doing; without an NVIDIA GPU it installs torch's CPU build; `test` runs the full
suite, `test fast` the daily loop, `test ARGS` pytest alone.

Each case runs the real dev.sh in a copy of its folder whose .venv holds stand-ins that log their command
line and the index pip would use, on a PATH that has only the tools the script needs (and, per case, npm
or nvidia-smi as stand-ins too): nothing is installed or built.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import REPO

pytestmark = pytest.mark.integration

CPU_INDEX = "https://download.pytorch.org/whl/cpu"
TOOLS = ("bash", "dirname", "find", "wc", "grep", "sed", "touch", "mktemp", "tar", "rm", "mkdir", "cat", "env", "true")

LOGGER = """#!/bin/bash
echo "${0##*/} ${PIP_EXTRA_INDEX_URL:-<no index>} $*" >> "$DEV_SH_LOG"
"""


def stand_in(path: Path, body: str = LOGGER) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body, encoding="utf-8")
    path.chmod(0o755)


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """dev.sh, pyproject.toml, three pages and two lessons; a .venv of stand-ins with nothing installed."""
    root = tmp_path / "repo"
    (root / "tools").mkdir(parents=True)
    shutil.copy(REPO / "tools" / "dev.sh", root / "tools")
    shutil.copy(REPO / "pyproject.toml", root)
    for page in ("index.md", "lessons/a.md", "lessons/b.md", "includes/glossary.md"):
        (root / "docs" / page).parent.mkdir(parents=True, exist_ok=True)
        (root / "docs" / page).write_text("# x\n", encoding="utf-8")
    for lesson in ("a", "b"):
        (root / "code" / lesson).mkdir(parents=True)
        (root / "code" / lesson / "lesson.toml").write_text("", encoding="utf-8")
    for tool in ("python", "mkdocs", "ruff", "lint-imports"):
        stand_in(root / ".venv" / "bin" / tool)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stand_in(bin_dir / "python3", "#!/bin/bash\nexit 0\n")  # torch's CPU index answers (see the case without)
    for tool in TOOLS:
        found = shutil.which(tool)
        assert found, tool
        (bin_dir / tool).symlink_to(found)
    return root


def dev_sh(root: Path, *args: str, **env: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    """Run tools/dev.sh ARGS in `root`; its output and the stand-ins' log, one line per call."""
    log = root.parent / "calls.log"
    log.write_text("", encoding="utf-8")
    base = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "VT_", "PYTEST"))}
    base.update(PATH=str(root.parent / "bin"), DEV_SH_LOG=str(log), HOME=str(root.parent))
    base.update(env)
    result = subprocess.run(["bash", str(root / "tools" / "dev.sh"), *args], capture_output=True, text=True,
                            env=base, cwd=root.parent, timeout=60)
    return result, log.read_text(encoding="utf-8").splitlines()


def installed(root: Path, *extras: str) -> None:
    for extra in extras:
        (root / ".venv" / f".installed-{extra}").touch()


def test_the_full_test_run_without_npm_stops_at_once_and_says_what_to_install(checkout):
    """Before: it installed the tests' environment, then died with `npm: command not found`, exit 127."""
    result, calls = dev_sh(checkout, "test")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "npm is not installed" in result.stderr and "apt-get install npm" in result.stderr
    assert "bash tools/dev.sh test fast" in result.stderr  # the run that needs none
    assert calls == [] and "installing" not in result.stdout  # nothing installed, nothing run


def test_the_full_run_needs_no_npm_once_axe_core_is_unpacked(checkout):
    axe = checkout / ".cache" / "axe-core" / "axe.min.js"
    axe.parent.mkdir(parents=True)
    version = next(line.split("=")[1] for line in (REPO / "tools" / "dev.sh").read_text().splitlines()
                   if line.startswith("AXE_VERSION="))
    axe.write_text(f"/*! axe v{version} */", encoding="utf-8")
    installed(checkout, "dev")
    result, calls = dev_sh(checkout, "test")
    assert result.returncode == 0, result.stdout + result.stderr
    assert [c.split()[0] for c in calls] == ["ruff", "lint-imports", "python", "python"]
    assert "tools/verify.py --check" in calls[2] and "-m pytest -n auto" in calls[3] and "-m not e2e" not in calls[3]


def test_test_fast_needs_no_npm_and_runs_the_unit_and_integration_tiers_in_parallel(checkout):
    installed(checkout, "dev")
    result, calls = dev_sh(checkout, "test", "fast", "-x")
    assert result.returncode == 0, result.stdout + result.stderr
    assert [c.split()[0] for c in calls] == ["ruff", "lint-imports", "python", "python"]
    assert calls[3].endswith("-m pytest -n auto -m not e2e -x"), calls[3]


def test_test_with_arguments_runs_just_pytest_with_them(checkout):
    installed(checkout, "dev")
    result, calls = dev_sh(checkout, "test", "tests/test_kit.py", "-k", "finish")
    assert result.returncode == 0, result.stdout + result.stderr
    assert calls == ["python <no index> -m pytest tests/test_kit.py -k finish"]


def test_without_an_nvidia_gpu_the_install_takes_torchs_cpu_build(checkout):
    """Before: pip took torch from PyPI, whose Linux build is the multi-GB CUDA one, unless the user had
    read README's note after the commands."""
    result, calls = dev_sh(checkout, "author", "true")
    assert result.returncode == 0, result.stdout + result.stderr
    assert calls == [f"python {CPU_INDEX} -m pip install --quiet --disable-pip-version-check -e .[author]"]
    assert "no NVIDIA GPU here: torch's CPU build" in result.stdout
    # the tests' environment too
    result, calls = dev_sh(checkout, "test", "tests/test_kit.py")
    assert calls[0] == f"python {CPU_INDEX} -m pip install --quiet --disable-pip-version-check -e .[dev]"


def test_an_index_that_does_not_answer_is_not_handed_to_pip(checkout):
    """Before: on a machine that reaches its packages through a mirror (CI's), pip retried torch's CPU index
    five times for every package: the first install took a quarter of an hour."""
    stand_in(checkout.parent / "bin" / "python3", "#!/bin/bash\nexit 1\n")
    result, calls = dev_sh(checkout, "author", "true")
    assert result.returncode == 0, result.stdout + result.stderr
    assert calls == ["python <no index> -m pip install --quiet --disable-pip-version-check -e .[author]"]
    assert "does not answer: pip's own configuration chooses torch" in result.stdout


def test_with_an_nvidia_gpu_or_an_index_of_the_users_own_pip_is_left_alone(checkout):
    stand_in(checkout.parent / "bin" / "nvidia-smi", "#!/bin/bash\necho 'GPU 0: NVIDIA H100 (UUID: GPU-0)'\n")
    result, calls = dev_sh(checkout, "author", "true")
    assert result.returncode == 0 and calls[0].startswith("python <no index> -m pip install"), calls
    (checkout.parent / "bin" / "nvidia-smi").unlink()
    (checkout / ".venv" / ".installed-author").unlink()
    result, calls = dev_sh(checkout, "author", "true", PIP_EXTRA_INDEX_URL="https://mirror.example/simple")
    assert calls[0].startswith("python https://mirror.example/simple -m pip install"), calls


def test_the_site_alone_needs_no_torch_index(checkout):
    result, calls = dev_sh(checkout, "build")
    assert calls[0] == "python <no index> -m pip install --quiet --disable-pip-version-check -e .[site]"


def test_the_first_serve_says_what_it_installs_then_what_it_builds(checkout):
    """Before: `== installing .[site] into .venv`, then minutes of silence until MkDocs served."""
    result, calls = dev_sh(checkout, "serve")
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "installing .[site] into .venv: MkDocs, Material" in out
    assert "building the site: 3 pages, 2 of them lessons" in out  # docs/includes/ holds no page
    assert "the first build takes a few minutes" in out
    assert out.index("installing") < out.index("building the site")
    assert calls[-1] == "mkdocs <no index> serve --dirty --no-strict"
