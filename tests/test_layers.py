"""The wings of tools/verified_triton hold: import-linter's contracts pass on the tree and fail on a planted
upward import or cycle; what a GPU machine runs imports nothing the site installs; no module edits sys.path."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "tools" / "verified_triton"
LINT = Path(sys.executable).parent / "lint-imports"
SITE_ONLY = ("mkdocs", "material", "pymdownx", "nbformat", "nbclient", "yaml", "markdown")
# What torch itself needs, and so every machine with torch has: the page check before a run (site/preflight.py)
# imports the directives, whose escape door is markupsafe's Markup. core, judge and record import neither
# (import-linter's contract); test_markupsafe_comes_with_torch holds the claim.
WITH_TORCH = ("jinja2", "markupsafe")


def lint(tools: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(tools))
    return subprocess.run([str(LINT), "--no-cache", "--config", str(ROOT / "pyproject.toml")], cwd=tools.parent,
                          env=env, capture_output=True, text=True, timeout=300)


def planted(tmp_path: Path, module: str, line: str) -> Path:
    """A copy of the package with `line` added to the top of `module` (a path inside the package)."""
    tools = tmp_path / "tools"
    shutil.copytree(PACKAGE, tools / "verified_triton", ignore=shutil.ignore_patterns("__pycache__"))
    target = tools / "verified_triton" / module
    target.write_text(line + "\n" + target.read_text(encoding="utf-8"), encoding="utf-8")
    return tools


@pytest.mark.integration
def test_the_tree_keeps_every_contract():
    result = lint(ROOT / "tools")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 kept, 0 broken" in result.stdout


@pytest.mark.integration
@pytest.mark.parametrize(("module", "line", "contract"), [
    ("core/numfmt.py", "from verified_triton.site import render  # noqa", "wings"),
    ("judge/status.py", "import verified_triton.record.report  # noqa", "wings"),
    ("record/report.py", "from verified_triton.site import render  # noqa", "wings"),
    ("record/scrub.py", "import yaml  # noqa", "stock python3"),
    ("site/render.py", "from verified_triton.site import notebook  # noqa", "no import cycle"),
])
def test_a_planted_import_breaks_the_contract_it_crosses(tmp_path, module, line, contract):
    result = lint(planted(tmp_path, module, line))
    assert result.returncode != 0, result.stdout
    broken = [line for line in result.stdout.splitlines() if "BROKEN" in line or contract in line]
    assert any(contract in b for b in broken), result.stdout


BLOCKER = f"""
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {SITE_ONLY!r}:
            raise ImportError("not on a GPU machine: " + name)
sys.meta_path.insert(0, Block())
"""


@pytest.mark.integration
def test_what_a_gpu_machine_runs_needs_nothing_the_site_installs(tmp_path):
    """`python3 tools/verify.py` on a machine with torch and Triton only: the command line and the record and
    judge wings import with MkDocs, pymdownx, nbformat and YAML unavailable, and so does the check of the pages
    it runs before any run (site/preflight.py), which passes on today's course there."""
    probe = BLOCKER + "\n".join([
        "sys.path.insert(0, sys.argv[1])",
        "import verified_triton.author.verify as v",
        "import verified_triton.record.runner, verified_triton.record.bundles, verified_triton.judge.status",
        "from pathlib import Path",
        "from verified_triton.core.lessons import discover",
        "root = Path(sys.argv[1]).parent",
        "v.refuse_what_the_site_cannot_build(discover(root / 'code'), root / 'code')",
        "print('preflight passed')",
        "sys.argv = ['verify.py', '--help']",
        "try:\n    v.main(['--help'])\nexcept SystemExit as e:\n    print('exit', e.code)",
    ])
    result = subprocess.run([sys.executable, "-c", probe, str(ROOT / "tools")], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert "preflight passed" in result.stdout
    assert "exit 0" in result.stdout and "--mode" in result.stdout


@pytest.mark.unit
def test_markupsafe_comes_with_torch():
    """The one site package the GPU machine's verify imports (the door, for the page check) is torch's own
    dependency: torch requires jinja2, which requires MarkupSafe."""
    from importlib import metadata

    def names(package: str) -> set[str]:
        return {re.split(r"[ ;<>=!~\[]", r, maxsplit=1)[0].lower() for r in metadata.requires(package) or []}

    assert "jinja2" in names("torch") and "markupsafe" in names("jinja2")
    assert set(WITH_TORCH) == {"jinja2", "markupsafe"}


@pytest.mark.unit
def test_no_module_of_the_package_edits_sys_path():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr == "path" and isinstance(node.value, ast.Name) \
                    and node.value.id == "sys":
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []


@pytest.mark.unit
def test_the_entry_scripts_are_a_few_lines_that_call_the_package():
    entries = ("verify", "downloads", "new_lesson", "prose_lint", "bench_scale", "snippets", "migrate",
               "mkdocs_hooks", "reader_hooks", "ci_plan")
    for name in entries:
        text = (ROOT / "tools" / f"{name}.py").read_text(encoding="utf-8")
        assert "from verified_triton" in text, name
        assert len(text.splitlines()) <= 30, name
    assert not any(p.suffix == ".py" for p in (ROOT / "tools").iterdir() if p.is_file() and p.stem not in entries)


@pytest.mark.unit
def test_nothing_in_tools_imports_the_experiments():
    """experiments/ holds GPU measurement scripts behind NOTES.md; the product never imports them."""
    experiments = {p.stem for p in (ROOT / "experiments").glob("*.py")} | {"experiments"}
    for path in sorted((ROOT / "tools").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not any(n.split(".")[0] in experiments for n in names), f"{path}:{node.lineno}"
