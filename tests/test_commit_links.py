"""A page's "Open in Colab" link opens the commit the site was built from, not the branch head.

The page shows the evidence of one commit; the branch may have moved on since, to code that
was never verified. tools/downloads.py's built_commit() takes GITHUB_SHA (CI), else
`git rev-parse HEAD`, each only as 40 hex digits, else falls back to the branch.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from conftest import MKDOCS_ENV, make_site_project
from verified_triton.site import downloads

SHA = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def no_git_above(tmp_path, monkeypatch):
    """git must not find the project's own repository above tmp_path."""
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    monkeypatch.delenv("GITHUB_SHA", raising=False)
    return tmp_path


def git_repo(folder):
    folder.mkdir()
    run = dict(cwd=folder, check=True, capture_output=True)
    subprocess.run(["git", "init", "-q"], **run)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "x"],
                   **run)
    return subprocess.run(["git", "rev-parse", "HEAD"], **run, text=True).stdout.strip()


@pytest.mark.unit
def test_github_sha_is_taken_first(no_git_above, monkeypatch):
    monkeypatch.setenv("GITHUB_SHA", SHA)
    assert downloads.built_commit("main", no_git_above) == SHA


@pytest.mark.integration
@pytest.mark.parametrize("bad", ["main", SHA[:39], SHA + "0", SHA.upper(), SHA[:-1] + "g", f"{SHA}\n; rm -rf /"])
def test_a_github_sha_that_is_no_commit_falls_back_to_git_then_the_branch(no_git_above, monkeypatch, bad):
    monkeypatch.setenv("GITHUB_SHA", bad)
    assert downloads.built_commit("main", no_git_above) == "main"  # no git repository here
    head = git_repo(no_git_above / "repo")
    assert downloads.built_commit("main", no_git_above / "repo") == head


@pytest.mark.integration
def test_without_either_the_branch_is_used(no_git_above):
    assert downloads.built_commit("develop", no_git_above) == "develop"


@pytest.mark.integration
def test_the_page_links_colab_to_the_built_commit(tmp_path):
    project = make_site_project(tmp_path / "site-project")
    project.add_lesson("alpha")
    project.write(project.make_record("alpha"))
    config = project.config()
    config.write_text(re.sub(r'(?m)^repo_url: ""$', 'repo_url: "https://github.com/someone/verified-triton"',
                             config.read_text()))
    env = dict(MKDOCS_ENV, VT_CODE_DIR=str(project.code), VT_EVIDENCE_DIR=str(project.evidence), GITHUB_SHA=SHA)
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config),
                             "-d", str(project.site)], capture_output=True, text=True, env=env, cwd=project.root,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    links = re.findall(r'href="(https://colab\.research\.google\.com/[^"]+)"', project.html("alpha"))
    assert links == [f"https://colab.research.google.com/github/someone/verified-triton/blob/{SHA}/notebooks/"
                     f"alpha.ipynb"]
