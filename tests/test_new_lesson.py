"""tools/new_lesson.py: a scaffolded lesson builds and verifies under the interpreter at once."""

from __future__ import annotations

import html
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import new_lesson  # noqa: E402
from evidence import read_record  # noqa: E402
from lessons import discover  # noqa: E402
from status import PARTIAL, judge  # noqa: E402


@pytest.fixture
def project(tmp_path) -> Path:
    """A copy of the project an author works in: lessons, evidence, pages and mkdocs.yml."""
    for name in ("code", "evidence", "docs"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("_output", "__pycache__"))
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    config = config.replace("  - tools/mkdocs_hooks.py", f"  - {ROOT / 'tools' / 'mkdocs_hooks.py'}")
    config = config.replace("  - tools/reader_hooks.py", f"  - {ROOT / 'tools' / 'reader_hooks.py'}")
    config = config.replace("custom_dir: overrides", f"custom_dir: {ROOT / 'overrides'}")
    config = config.replace("  - tools\n", f"  - {ROOT / 'tools'}\n")  # the watch list
    (tmp_path / "mkdocs.yml").write_text(config, encoding="utf-8")
    return tmp_path


def test_scaffold_creates_a_lesson_that_verifies_and_builds(project):
    config_before = (project / "mkdocs.yml").read_bytes()
    created = new_lesson.create("row-sum", "Row sums", root=project)
    expected = {project / "code/row-sum/row_sum.py", project / "code/row-sum/lesson.toml",
                project / "docs/lessons/row-sum.md"}
    assert set(created) == expected and all(p.is_file() for p in expected)
    # the navigation comes from lesson.toml: the scaffold leaves mkdocs.yml alone
    assert (project / "mkdocs.yml").read_bytes() == config_before

    lessons = {lesson.name: lesson for lesson in discover(project / "code")}
    assert lessons["row-sum"].order == max(lesson.order for lesson in lessons.values())
    assert list(lessons)[-1] == "row-sum"

    run = subprocess.run([sys.executable, str(ROOT / "tools/verify.py"), "--code-dir", str(project / "code"),
                          "--evidence-dir", str(project / "evidence"), "--lesson", "row-sum", "--mode", "interpreter"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    record = read_record(project / "evidence/row-sum/interpreter.json")
    assert record.outcome == "passed" and [c.status for c in record.checks] == ["pass"]
    assert judge(lessons["row-sum"], project / "evidence").status == PARTIAL

    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", VT_CODE_DIR=str(project / "code"),
               VT_EVIDENCE_DIR=str(project / "evidence"))
    build = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(project / "mkdocs.yml"),
                            "-d", str(project / "site")], capture_output=True, text=True, env=env, timeout=300)
    assert build.returncode == 0, build.stdout + build.stderr
    page = (project / "site/lessons/row-sum/index.html").read_text(encoding="utf-8")
    text = html.unescape(re.sub(r"<[^>]+>", "", page))
    assert "def scale_kernel(x_ptr, out_ptr, n, factor, BLOCK: tl.constexpr):" in text
    assert "PARTIALLY VERIFIED" in text
    # it joined the Lessons section of the navigation, last: the lesson before it now leads to it
    before = list(lessons.values())[-2]
    previous_page = (project / "site" / before.page.removesuffix(".md") / "index.html").read_text(encoding="utf-8")
    assert re.search(r'<a href="\.\./row-sum/" class="md-footer__link md-footer__link--next"', previous_page)
    assert "Row sums" in (project / "site/lessons/row-sum/index.html").read_text(encoding="utf-8")


def test_scaffold_refuses_bad_names_and_existing_lessons(project):
    with pytest.raises(SystemExit, match="invalid lesson name"):
        new_lesson.create("Row_Sum", "x", root=project)
    with pytest.raises(SystemExit, match="already exists"):
        new_lesson.create("vector-add", "x", root=project)
    assert not (project / "code/Row_Sum").exists()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _fetch(url: str) -> str:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.read().decode("utf-8")
    except OSError:
        return ""


def test_mkdocs_serve_rerenders_a_page_when_its_lesson_file_changes(project):
    """The `watch:` list in mkdocs.yml: editing a region under code/ shows on the served page."""
    port = _free_port()
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", VT_CODE_DIR=str(project / "code"),
               VT_EVIDENCE_DIR=str(project / "evidence"))
    server = subprocess.Popen([sys.executable, "-m", "mkdocs", "serve", "-f", str(project / "mkdocs.yml"),
                               "-a", f"127.0.0.1:{port}"], env=env, cwd=project,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/lessons/vector-add/"
    marker = "served-page-follows-the-source"
    try:
        deadline = time.monotonic() + 120
        while "add_kernel" not in _fetch(url):
            assert time.monotonic() < deadline, "mkdocs serve did not come up"
            time.sleep(0.5)
        assert marker not in _fetch(url)
        source = project / "code/vector-add/vector_add.py"
        text = source.read_text(encoding="utf-8")
        source.write_text(text.replace("    pid = tl.program_id(axis=0)\n",
                                       f"    pid = tl.program_id(axis=0)  # {marker}\n", 1), encoding="utf-8")
        while marker not in _fetch(url):
            assert time.monotonic() < deadline, "the served page never showed the edited region"
            time.sleep(0.5)
    finally:
        server.terminate()
        server.wait(timeout=30)
