"""The settings of mkdocs.yml that become URLs, checked before anything is built from them.

One job: `repo_url` and `extra.branch` end up in links (the repository, "Open in
Colab", the notebooks' source), so they are refused unless they are exactly
what those links expect: a plain https://github.com/OWNER/REPO and a valid git
branch name (git check-ref-format's rules, and nothing that a URL would read as
a path step, a query or a fragment). A bad one stops the build with an error
naming the setting.
"""

from __future__ import annotations

import re

from verified_triton.core.lessons import Lesson

NOTEBOOKS = "notebooks"  # the folder of the notebooks, in the repository and on the site
# GitHub's own rules: an owner is letters, digits and single hyphens (at most 39); a repository name is
# letters, digits, '.', '-' and '_' (at most 100), and neither '.' nor '..'.
REPO_URL = re.compile(r"\Ahttps://github\.com/(?P<owner>[A-Za-z0-9](?:-?[A-Za-z0-9]){0,38})/"
                      r"(?P<repo>[A-Za-z0-9._-]{1,100})/?\Z")
BRANCH_PART = re.compile(r"\A[A-Za-z0-9_][A-Za-z0-9._-]*\Z")  # letters, digits, '.', '_', '-'; no leading '.' or '-'


class ConfigError(ValueError):
    """A setting of mkdocs.yml that no link may be built from; the message names the setting."""


def check_repo_url(value: object) -> str:
    """'' (no repository configured) or https://github.com/OWNER/REPO, without a trailing '/'."""
    if value in (None, ""):
        return ""
    match = REPO_URL.match(value) if isinstance(value, str) else None
    if not match or match["repo"] in (".", ".."):
        raise ConfigError(f"mkdocs.yml: repo_url: {str(value)[:120]!r} is not a plain https://github.com/OWNER/REPO "
                          "(leave it empty for no repository links)")
    return value.rstrip("/")


def check_branch(value: object) -> str:
    """A branch name git accepts and a URL keeps as one path: 'main', 'release/v1'."""
    ok = isinstance(value, str) and 0 < len(value) <= 200 and not value.endswith((".", "/", ".lock")) \
        and ".." not in value and "@{" not in value and "//" not in value \
        and all(BRANCH_PART.match(part) and not part.endswith(".lock") for part in value.split("/"))
    if not ok:
        raise ConfigError(f"mkdocs.yml: extra.branch: {str(value)[:120]!r} is not a valid git branch name "
                          "(letters, digits, '.', '_', '-' and '/' between parts; no '..', no spaces or "
                          "control characters)")
    return value

def colab_url(repo_url: str, branch: str, lesson: Lesson) -> str:
    """Colab's GitHub form: https://colab.research.google.com/github/OWNER/REPO/blob/BRANCH/notebooks/NAME.ipynb"""
    try:  # siteconfig's checks: a plain GitHub repository and a valid branch name, or no link at all
        match = REPO_URL.match(check_repo_url(repo_url))
        check_branch(branch)
    except ConfigError:
        return ""
    if not match:
        return ""
    owner, repo = match["owner"], match["repo"].removesuffix(".git")
    return f"https://colab.research.google.com/github/{owner}/{repo}/blob/{branch}/{NOTEBOOKS}/{lesson.name}.ipynb"
