"""Hostile input, issue 20, classes 8 and 9: caches and configuration.

8. The `mkdocs serve --dirty` cache and every build or download folder go through the safe-file layer: a
   link planted there is never followed, nothing is written outside the project or the build folder.
9. The URLs built from mkdocs.yml are validated: `repo_url` is a plain https://github.com/OWNER/REPO, the
   branch a valid git ref name; otherwise the build stops with an error naming the setting.

Each test was written before its fix and failed on the code before it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import MKDOCS_ENV, REPO, build_output, make_site_project

SECRET = b"outside the project: must never change\n"


@pytest.fixture
def outside(tmp_path) -> Path:
    target = tmp_path / "outside" / "victim.txt"
    target.parent.mkdir()
    target.write_bytes(SECRET)
    os.utime(target, (1_000_000, 1_000_000))
    return target


# -- 8. caches are files too ----------------------------------------------------------------------------

def dirty_output(project_root: Path, monkeypatch):
    """The hook's output for `mkdocs serve --dirty`: generated files go through the cache folder."""
    from mkdocs.structure.files import Files

    from verified_triton.site import hooks as mkdocs_hooks

    monkeypatch.setenv("VT_DIRTY_SERVE", "1")
    config = {"config_file_path": str(project_root / "mkdocs.yml"), "site_dir": str(project_root / "site"),
              "use_directory_urls": True}
    return mkdocs_hooks._Output(Files([]), config)


@pytest.mark.unit
def test_a_link_planted_in_the_serve_cache_is_never_followed(tmp_path, outside, monkeypatch):
    root = tmp_path / "project"
    cache = root / ".cache" / "site-files" / "downloads"
    cache.mkdir(parents=True)
    (cache / "plain.zip").symlink_to(outside)  # the generated file's place
    (cache / ".page.zip.tmp").symlink_to(outside)  # where a fixed temporary name would be written
    out = dirty_output(root, monkeypatch)
    out.add("downloads/plain.zip", b"zip bytes")
    out.add("downloads/page.zip", b"more bytes")
    assert outside.read_bytes() == SECRET
    assert not (cache / "plain.zip").is_symlink() and (cache / "plain.zip").read_bytes() == b"zip bytes"
    assert (cache / "page.zip").read_bytes() == b"more bytes"
    # a linked folder on the way is an error naming it; nothing is written through it
    linked = root / ".cache" / "site-files" / "notebooks"
    linked.symlink_to(outside.parent, target_is_directory=True)
    from verified_triton.core.safefs import UnsafePathError

    with pytest.raises(UnsafePathError, match="notebooks"):
        out.add("notebooks/victim.txt", b"overwritten")
    assert outside.read_bytes() == SECRET and sorted(p.name for p in outside.parent.iterdir()) == ["victim.txt"]


@pytest.mark.unit
def test_marking_a_page_stale_follows_no_link(tmp_path, outside):
    from verified_triton.site import incremental

    page = tmp_path / "site" / "index.html"
    page.parent.mkdir()
    page.symlink_to(outside)
    incremental.mark_stale(str(page))
    assert outside.stat().st_mtime == 1_000_000


@pytest.mark.integration
def test_a_link_planted_in_a_download_folder_is_never_followed(tmp_path, outside):
    out = tmp_path / "build"
    (out / "downloads").mkdir(parents=True)
    (out / "downloads" / "vector-add.zip").symlink_to(outside)
    (out / "notebooks").symlink_to(outside.parent, target_is_directory=True)
    result = subprocess.run([sys.executable, str(REPO / "tools" / "downloads.py"), "build", str(out)],
                            capture_output=True, text=True, timeout=600)
    assert outside.read_bytes() == SECRET and sorted(p.name for p in outside.parent.iterdir()) == ["victim.txt"]
    assert result.returncode != 0 and "notebooks" in result.stderr and "link" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


# -- 9. URLs from configuration are validated ----------------------------------------------------------

BAD_SETTINGS = {
    "branch-escapes-the-repository": ("repo_url", "https://github.com/owner/repo", "branch",
                                      "../../../evil/repo/blob/main"),
    "branch-with-a-newline": ("repo_url", "https://github.com/owner/repo", "branch", "main\n"),
    "branch-with-a-space": ("repo_url", "https://github.com/owner/repo", "branch", "main evil"),
    "branch-ending-in-lock": ("repo_url", "https://github.com/owner/repo", "branch", "main.lock"),
    "branch-with-at-brace": ("repo_url", "https://github.com/owner/repo", "branch", "a@{b"),
    "repo-url-not-github": ("repo_url", "https://evil.example/owner/repo", "branch", "main"),
    "repo-url-with-a-path": ("repo_url", "https://github.com/owner/repo/tree/main", "branch", "main"),
    "repo-url-http": ("repo_url", "http://github.com/owner/repo", "branch", "main"),
    "repo-url-javascript": ("repo_url", "javascript:alert(1)//github.com/a/b", "branch", "main"),
    "repo-url-with-a-newline": ("repo_url", "https://github.com/owner/repo\n", "branch", "main"),
}


def configured(site, repo_url: str, branch: str) -> Path:
    import json

    config = site.config()
    text = config.read_text(encoding="utf-8")
    text = text.replace('repo_url: ""', f"repo_url: {json.dumps(repo_url)}")
    text = text.replace("  branch: main", f"  branch: {json.dumps(branch)}")
    config.write_text(text, encoding="utf-8")
    return config


def build_with(site, config: Path) -> subprocess.CompletedProcess:
    env = dict(MKDOCS_ENV, VT_CODE_DIR=str(site.code), VT_EVIDENCE_DIR=str(site.evidence))
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d",
                           str(site.site)], capture_output=True, text=True, env=env, cwd=site.root, timeout=300)


@pytest.mark.unit
@pytest.mark.parametrize("case", BAD_SETTINGS, ids=list(BAD_SETTINGS))
def test_a_bad_repository_setting_stops_the_build_naming_it(tmp_path, case):
    repo_key, repo_url, branch_key, branch = BAD_SETTINGS[case]
    from verified_triton.site.siteconfig import ConfigError, check_branch, check_repo_url

    bad = "extra.branch" if case.startswith("branch") else "repo_url"
    with pytest.raises(ConfigError, match=bad.replace(".", r"\.")):
        check_repo_url(repo_url)
        check_branch(branch)


@pytest.mark.integration
def test_a_bad_branch_stops_a_real_build_and_makes_no_colab_link(tmp_path):
    site = make_site_project(tmp_path / "site")
    site.add_lesson("plain", "---\nlesson: plain\n---\n\n# Plain\n\n::requirements\n")
    result = build_with(site, configured(site, "https://github.com/owner/repo", "../../../evil/repo/blob/main"))
    output = build_output(result)
    assert result.returncode != 0 and "extra.branch" in output and "Traceback" not in output, output
    good = build_with(site, configured(site, "https://github.com/owner/repo", "release/v1"))
    assert good.returncode == 0, build_output(good)
    page = (site.site / "lessons" / "plain" / "index.html").read_text(encoding="utf-8")
    # Colab opens the commit the site was built from (GITHUB_SHA or git's HEAD), else the valid branch
    assert re.search(r"https://colab\.research\.google\.com/github/owner/repo/blob/(?:[0-9a-f]{40}|release/v1)/"
                     r"notebooks/plain\.ipynb", page), page


@pytest.mark.unit
@pytest.mark.parametrize("branch", ["main", "release/v1", "feature-x_2.0", "v1.2.3"])
def test_good_settings_pass(branch):
    from verified_triton.site.siteconfig import check_branch, check_repo_url

    assert check_repo_url("https://github.com/owner/my.repo") == "https://github.com/owner/my.repo"
    assert check_repo_url("https://github.com/owner/repo/") == "https://github.com/owner/repo"
    assert check_repo_url("") == ""  # no repository: no repository links, no Colab badge
    assert check_branch(branch) == branch
