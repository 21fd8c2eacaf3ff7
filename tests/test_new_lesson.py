"""tools/new_lesson.py: a scaffolded lesson builds and verifies under the interpreter at once."""

from __future__ import annotations

import html
import io
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import pytest

from conftest import repo_hooks
from verified_triton.author import new_lesson
from verified_triton.core.lessons import discover
from verified_triton.judge.evidence import read_record
from verified_triton.judge.status import PARTIAL, judge
from verified_triton.record.smoke import smoke_run
from verified_triton.site.hooks import course_nav

ROOT = Path(__file__).resolve().parent.parent



@pytest.fixture
def project(tmp_path) -> Path:
    """A copy of the project an author works in: lessons, evidence, pages and mkdocs.yml."""
    for name in ("code", "evidence", "docs"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("_output", "__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)  # code/ruff.toml extends it
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    config = repo_hooks(config)
    config = config.replace("  - tools\n", f"  - {ROOT / 'tools'}\n")  # the watch list
    (tmp_path / "mkdocs.yml").write_text(config, encoding="utf-8")
    return tmp_path


@pytest.mark.integration
def test_scaffold_creates_a_lesson_that_verifies_and_builds(project):
    config_before = (project / "mkdocs.yml").read_bytes()
    created = new_lesson.create("row-sum", "Row sums", root=project)
    expected = {project / f"code/row-sum/{name}" for name in ("row_sum.py", "lesson.py", "exercises.py",
                                                               "solutions.py", "lesson.toml")}
    expected.add(project / "docs/lessons/row-sum.md")
    assert set(created) == expected and all(p.is_file() for p in expected)
    # the navigation comes from lesson.toml: the scaffold leaves mkdocs.yml alone
    assert (project / "mkdocs.yml").read_bytes() == config_before

    lessons = {lesson.name: lesson for lesson in discover(project / "code")}
    assert list(lessons)[-1] == "row-sum" and lessons["row-sum"].part == ""
    # it keeps to the lessons' 88 columns and the project's rules as generated
    lint = subprocess.run([str(ROOT / ".venv/bin/ruff"), "check", str(project / "code/row-sum")],
                          capture_output=True, text=True, cwd=project)
    assert lint.returncode == 0, lint.stdout + lint.stderr

    run = subprocess.run([sys.executable, str(ROOT / "tools/verify.py"), "--code-dir", str(project / "code"),
                          "--evidence-dir", str(project / "evidence"), "--lesson", "row-sum", "--mode", "interpreter"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    record = read_record(project / "evidence/row-sum/interpreter.json")
    # its checks pass; the benchmark is skipped, and the record says so
    assert record.outcome == "passed" and {c.status for c in record.checks} == {"pass"}
    assert [p.part for p in record.skipped_parts] == ["step benchmark"] and not record.benchmarks
    # its two exercises are proven: the starters fail, the solutions pass, every listed mistake is caught
    st = judge(lessons["row-sum"], project / "evidence")
    assert st.status == PARTIAL and st.exercises.state == "passed" and st.exercises.caught() == (4, 4)
    # its benchmark's code runs on the CPU as generated, once, in a smoke run (issue 26, Build 6)
    smoke = smoke_run(lessons["row-sum"])
    assert smoke.outcome == "passed", smoke.line()
    assert [c.name for c in smoke.results.checks if c.name.startswith("smoke-")] == ["smoke-scale-vs-torch-2^24-fp32"]

    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", VT_CODE_DIR=str(project / "code"),
               VT_EVIDENCE_DIR=str(project / "evidence"))
    build = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(project / "mkdocs.yml"),
                            "-d", str(project / "site")], capture_output=True, text=True, env=env, timeout=300)
    assert build.returncode == 0, build.stdout + build.stderr
    page = (project / "site/lessons/row-sum/index.html").read_text(encoding="utf-8")
    text = html.unescape(re.sub(r"<[^>]+>", "", page))
    assert "def scale_kernel(x_ptr, out_ptr, n, factor, BLOCK: tl.constexpr):" in text
    assert "PARTIALLY VERIFIED" in text
    # the Practice section: each exercise's starter, its command, and its solution folded with its proof
    assert "def shift_kernel(x_ptr, out_ptr, n, c, BLOCK: tl.constexpr):" in text
    assert "TRITON_INTERPRET=1 python exercises.py --only grid" in text
    assert re.search(r'<details class="success">\s*<summary>Solution; its check catches 2 of 2 listed mistakes'
                     r'</summary>', page)
    assert "grid = (triton.cdiv(n, block),)" in text
    # nothing on the page claims what no run has shown: no Triton version, no list of GPUs it runs on
    assert not re.search(r"\bTriton:\s*\d", text) and "Colab's GPUs (T4" not in text
    assert "lesson.toml states no minimum compute capability" in text
    # it joined the Lessons section of the navigation, last: the lesson before it now leads to it
    before = list(lessons.values())[-2]
    previous_page = (project / "site" / before.page.removesuffix(".md") / "index.html").read_text(encoding="utf-8")
    assert re.search(r'<a href="\.\./row-sum/" class="md-footer__link md-footer__link--next"', previous_page)
    assert "Row sums" in (project / "site/lessons/row-sum/index.html").read_text(encoding="utf-8")


def _parts(lessons) -> list[str]:
    return [next(iter(item)) for item in course_nav(lessons) if isinstance(item, dict)]


@pytest.mark.unit
@pytest.mark.parametrize("part", ["Foundations", "Transformer kernels"])
def test_the_scaffolds_lesson_lands_at_the_end_of_its_part(project, part):
    """Before: --part gave order = max + 1, after the Blackwell lesson of another part, so the part showed
    twice in the navigation. Now the lesson goes after its part's last lesson; no lesson is renumbered."""
    tomls = {p: p.read_bytes() for p in (project / "code").glob("*/lesson.toml")}
    before = discover(project / "code")
    last_of_part = [lesson for lesson in before if lesson.part == part][-1]
    new_lesson.create("adamw", "AdamW in one kernel", root=project, part=part)
    assert all(p.read_bytes() == data for p, data in tomls.items())  # nobody renumbered
    lessons = discover(project / "code")
    names = [lesson.name for lesson in lessons]
    assert names[names.index(last_of_part.name) + 1] == "adamw"
    assert _parts(lessons) == _parts(before)  # each part once, in the same order
    section = next(item[part] for item in course_nav(lessons) if isinstance(item, dict) and part in item)
    assert section[-1] == {"AdamW in one kernel": "lessons/adamw.md"}


@pytest.mark.unit
def test_the_scaffold_opens_a_new_part_at_the_end_and_says_where_it_went(project, capsys, monkeypatch):
    monkeypatch.setattr(new_lesson, "ROOT", project)
    assert new_lesson.main(["adamw", "--part", "Optimizers"]) == 0
    out = capsys.readouterr().out
    assert 'in a new part "Optimizers" at the end of the course' in out
    # the next commands: verify, serve, record on a GPU, bring it back, regenerate the notebook, publish
    for command in ("tools/verify.py --lesson adamw", "bash tools/dev.sh serve", "--mode gpu --bundle",
                    "--import adamw.tar.gz", "tools/downloads.py notebooks", "--check --publish"):
        assert command in out
    lessons = discover(project / "code")
    assert lessons[-1].name == "adamw" and _parts(lessons)[-1] == "Optimizers"


@pytest.mark.unit
def test_a_part_that_would_show_twice_fails_the_build_naming_the_lesson(project):
    """The scaffold's old placement: a Transformer-kernels lesson after the Beyond-Hopper one."""
    new_lesson.create("adamw", "AdamW", root=project)  # the end of the course, in no part
    toml = project / "code/adamw/lesson.toml"
    toml.write_text(toml.read_text().replace("main =", 'part = "Transformer kernels"\nmain ='))
    with pytest.raises(Exception) as info:
        course_nav(discover(project / "code"))
    message = str(info.value)
    assert message.startswith(str(toml)) and 'part "Transformer kernels" would appear twice' in message
    assert 'after = "attention-backward"' in message


@pytest.mark.unit
def test_a_lesson_that_splits_another_part_is_the_one_named(project):
    """A lesson placed inside another part's run is named, with the place at the end of its own part."""
    new_lesson.create("adamw", "AdamW", root=project, part="Transformer kernels")
    toml = project / "code/adamw/lesson.toml"
    lines = [line for line in toml.read_text().splitlines() if not line.startswith(("after =", "order ="))]
    toml.write_text("\n".join(['after = "vector-add"', *lines]) + "\n")
    with pytest.raises(Exception) as info:
        course_nav(discover(project / "code"))
    message = str(info.value)
    assert message.startswith(str(toml)), message
    assert "'adamw' (Transformer kernels) sits between 'vector-add' and 'dropout'" in message
    assert 'part "Foundations" would appear twice' in message and 'after = "attention-backward"' in message


@pytest.mark.unit
def test_scaffold_refuses_bad_names_and_existing_lessons(project):
    with pytest.raises(SystemExit, match="invalid lesson name"):
        new_lesson.create("Row_Sum", "x", root=project)
    with pytest.raises(SystemExit, match="already exists"):
        new_lesson.create("vector-add", "x", root=project)
    assert not (project / "code/Row_Sum").exists()


# Names of every shape the scaffold accepts: short, the one that failed, digits, and the longest the course finds.
NAMES = ["ab", "bias-leaky-relu", "softmax-2-pass-online", "x" * 30 + "-" + "y" * 33, "a" * 64, "z" * 64]


@pytest.mark.integration
def test_the_scaffold_passes_the_projects_ruff_for_any_valid_name(tmp_path):
    """Before: `new_lesson.py bias-leaky-relu` gave E501 at line 10, the docstring's run line padded to line up
    with the one above; a 64-character name overflowed both run lines. Now no line carrying the name is padded,
    and the longest name the course finds still fits the lessons' 88 columns."""
    keep = ("lessonkit.py", "ruff.toml", "vector-add")  # the kit, the lessons' ruff rules, the scaffold's prerequisite
    shutil.copytree(ROOT / "code", tmp_path / "code", ignore=lambda folder, names: [
        n for n in names if Path(folder) == ROOT / "code" and n not in keep])
    shutil.copy(ROOT / "pyproject.toml", tmp_path)  # code/ruff.toml extends it
    for name in NAMES:
        assert len(name) <= 64
        new_lesson.create(name, name.replace("-", " ").capitalize(), root=tmp_path)
    lint = subprocess.run([str(ROOT / ".venv/bin/ruff"), "check", "--no-cache",
                           *(str(tmp_path / "code" / name) for name in NAMES)],
                          capture_output=True, text=True, cwd=tmp_path)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    assert [lesson.name for lesson in discover(tmp_path / "code")][1:] == NAMES  # each one a lesson the course finds


@pytest.mark.unit
def test_the_scaffold_refuses_a_name_the_course_would_not_find(tmp_path):
    """Before: a 65-character name was scaffolded, and then every command refused the course (the schema's
    lesson names stop at 64 characters)."""
    (tmp_path / "code").mkdir()
    with pytest.raises(SystemExit, match="64 characters at most"):
        new_lesson.create("a" * 65, "x", root=tmp_path)
    assert not list((tmp_path / "code").iterdir())


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


@pytest.mark.integration
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


# -- an author's `mkdocs serve` (bash tools/dev.sh serve: --dirty --no-strict) ----------------------

class _Serve:
    """`mkdocs serve` as tools/dev.sh runs it, on the project, with its terminal output kept."""

    def __init__(self, project: Path):
        self.project, self.port = project, _free_port()
        self.log = project / "serve.log"
        env = dict(os.environ, NO_MKDOCS_2_WARNING="1", VT_CODE_DIR=str(project / "code"),
                   VT_EVIDENCE_DIR=str(project / "evidence"))
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "mkdocs", "serve", "--dirty", "--no-strict", "-f", str(project / "mkdocs.yml"),
                 "-a", f"127.0.0.1:{self.port}"], env=env, cwd=project, stdout=log, stderr=subprocess.STDOUT)

    def get(self, path: str, limit: float = 10) -> tuple[float, bytes]:
        """(seconds the answer took, its body); fails the test past `limit`: the server must never hang.
        (A request during a rebuild waits for it, by MkDocs' design: on two busy cores that can take a while.)"""
        start = time.monotonic()
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=limit) as response:
                body = response.read()
        except urllib.error.HTTPError as exc:
            body = exc.read()
        except TimeoutError:
            pytest.fail(f"GET {path} got no answer within {limit:g} s; log:\n{self.log.read_text()[-3000:]}")
        return time.monotonic() - start, body

    def wait_for(self, path: str, predicate, what: str, limit: float = 240) -> str:
        deadline = time.monotonic() + limit
        while True:
            assert self.process.poll() is None, f"mkdocs serve exited; log:\n{self.log.read_text()[-3000:]}"
            try:
                body = self.get(path, limit=180)[1]
            except urllib.error.URLError:  # not listening yet
                body = b""
            text = body.decode("utf-8", "replace")
            if predicate(text):
                return text
            assert time.monotonic() < deadline, f"{what}; log:\n{self.log.read_text()[-3000:]}"
            time.sleep(0.5)

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


def _plain(page: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", page))


@pytest.mark.integration
def test_serve_with_a_broken_page_answers_within_10_s_with_file_line(project):
    """Before: the first build failed and `mkdocs serve` exited; a later failed rebuild held every request
    (one waited 600 s), and a repeated error printed only "Aborted with a BuildError!"."""
    page = project / "docs/lessons/vector-add.md"
    good = page.read_text(encoding="utf-8")
    directive = "::snippet code/vector-add/vector_add.py "
    broken = good.replace(directive + "launch", directive + "lunch")
    line = broken.splitlines().index(directive + "lunch") + 1
    where = f"docs/lessons/vector-add.md:{line}: "
    page.write_text(broken, encoding="utf-8")
    server = _Serve(project)
    try:
        shown = server.wait_for("/lessons/vector-add/", lambda t: where in _plain(t), "the error never showed")
        assert "no region named 'lunch'" in _plain(shown)  # FILE:LINE and the message, on the failing page
        took, again = server.get("/lessons/vector-add/")  # within 10 s (get fails the test past that)
        assert where.encode() in again
        took, other = server.get("/lessons/dropout/")  # and as an overlay on every other page
        assert b'id="vt-build-error"' in other and where.encode() in other

        page.write_text(good, encoding="utf-8")  # the next good build replaces it
        fixed = server.wait_for("/lessons/vector-add/", lambda t: "def add(x: torch.Tensor" in _plain(t),
                                "the fixed page never came back")
        assert "vt-build-error" not in fixed
        assert b"vt-build-error" not in server.get("/lessons/dropout/")[1]

        page.write_text(broken, encoding="utf-8")  # the same error again: printed again
        server.wait_for("/lessons/vector-add/", lambda t: where in _plain(t), "the repeated error never showed")
        assert server.log.read_text().count(where) == 2

        toml = project / "code/dropout/lesson.toml"  # an error no page owns: every page shows it
        page.write_text(good, encoding="utf-8")
        toml.write_text(toml.read_text().replace("order = 2", 'order = "second"'))
        shown = server.wait_for("/lessons/vector-add/", lambda t: "order: expected a number" in _plain(t),
                                "the lesson.toml error never showed")
        assert str(toml) in _plain(shown)
    finally:
        server.close()


@pytest.mark.integration
def test_serve_refreshes_navigation_archive_and_notebook_when_a_lesson_moves(project):
    """Before: with --dirty, pages kept the navigation of the first build and the archive and notebook
    kept the old title until the server was restarted."""
    server = _Serve(project)
    try:
        server.wait_for("/lessons/dropout/", lambda t: "Vector add: programs" in t, "mkdocs serve did not come up")
        toml = project / "code/vector-add/lesson.toml"  # the first lesson: a part of its own stays in one piece
        text = toml.read_text()
        title = re.search(r'^title = "(.*)"$', text, re.M).group(1)
        toml.write_text(text.replace(f'title = "{title}"', 'title = "Vector add, renamed"')
                        .replace('part = "Foundations"', 'part = "First steps"'))
        # another lesson's page: the new part is a section of its own (before: the first build's navigation)
        nav = server.wait_for("/lessons/dropout/", lambda t: "First steps" in t, "the navigation never changed")
        assert "vt-build-error" not in nav
        assert "Vector add, renamed" in server.get("/", limit=180)[1].decode()  # the home page's course path
        notebook = json.loads(server.get("/notebooks/vector-add.ipynb", limit=180)[1])
        assert notebook["metadata"]["title"] == "Vector add, renamed"
        with zipfile.ZipFile(io.BytesIO(server.get("/downloads/vector-add.zip", limit=180)[1])) as archive:
            readme = next(archive.read(n) for n in archive.namelist() if n.endswith("README.md"))
        assert b"Vector add, renamed" in readme
    finally:
        server.close()
