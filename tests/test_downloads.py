"""Run it yourself (issue 12): every lesson's archive and notebook, as a reader gets them from the built site.

The site is built once (module fixture). Then, for every lesson: the zip from
site/downloads/ is unpacked into an empty folder and run under the
interpreter; the notebook from site/notebooks/ validates as nbformat 4 and
runs top to bottom in a fresh kernel (nbclient, ipykernel) under the
interpreter; the committed copy Colab opens equals the built one; the
requirements box states what lesson.toml and the evidence say.
"""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest

from conftest import REPO

sys.path.insert(0, str(REPO / "tools"))

import downloads  # noqa: E402
from lessons import discover  # noqa: E402
from status import judge  # noqa: E402

LESSONS = discover(REPO / "code")
NAMES = [lesson.name for lesson in LESSONS]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    site = tmp_path_factory.mktemp("site")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(site)], cwd=REPO,
                          capture_output=True, text=True, env=env, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return site


def interpreter_env() -> dict:
    env = dict(os.environ, TRITON_INTERPRET="1", MPLBACKEND="Agg", PYTHONDONTWRITEBYTECODE="1")
    for key in ("VT_RESULTS", "VT_FIGURES", "CUDA_VISIBLE_DEVICES"):
        env.pop(key, None)
    env["CUDA_VISIBLE_DEVICES"] = ""
    return env


@pytest.mark.parametrize("name", NAMES)
def test_the_archive_runs_alone_in_an_empty_folder(built, tmp_path, name):
    lesson = next(x for x in LESSONS if x.name == name)
    with zipfile.ZipFile(built / "downloads" / f"{name}.zip") as zf:
        names = zf.namelist()
        assert all(n.startswith(f"{name}/") and ".." not in n for n in names), names
        assert {f"{name}/lessonkit.py", f"{name}/lesson.toml", f"{name}/README.md",
                f"{name}/{lesson.main.name}"} <= set(names)
        zf.extractall(tmp_path)
    folder = tmp_path / name
    readme = (folder / "README.md").read_text()
    assert f"TRITON_INTERPRET=1 python {lesson.main.name}" in readme
    run = subprocess.run([sys.executable, lesson.main.name], cwd=folder, env=interpreter_env(),
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, (run.stdout[-2000:], run.stderr[-2000:])
    assert "PASS" in run.stdout


@pytest.mark.parametrize("name", NAMES)
def test_the_notebook_is_valid_and_runs_top_to_bottom(built, tmp_path, name, monkeypatch):
    from nbclient import NotebookClient

    nb = nbformat.read(built / "notebooks" / f"{name}.ipynb", as_version=4)
    nbformat.validate(nb)
    sources = [c.source for c in nb.cells]
    assert any(s.startswith("%%writefile lessonkit.py") for s in sources)
    assert any(s.startswith("%%writefile lesson.toml") for s in sources)
    assert "exit_code = main()" in sources[-1] or any("exit_code = main()" in s for s in sources)
    st = judge(next(x for x in LESSONS if x.name == name), REPO / "evidence")
    if any(r.mode == "gpu" for r in st.records):
        gpu = next(r for r in st.records if r.mode == "gpu")
        recorded = [c.source for c in nb.cells
                    if c.cell_type == "markdown" and c.source.startswith("## The recorded GPU run")]
        assert recorded and gpu.env.device_name in recorded[0] and gpu.started_utc[:10] in recorded[0]
    for key, value in {"TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": "", "MPLBACKEND": "Agg"}.items():
        monkeypatch.setenv(key, value)  # the kernel inherits them
    client = NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}})
    client.execute()  # raises CellExecutionError on any failing cell
    printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "exit code 0" in printed


@pytest.mark.parametrize("name", NAMES)
def test_the_committed_notebook_is_the_built_one(built, name):
    """Colab opens notebooks/<lesson>.ipynb from the repository: it must be what the site builds."""
    committed = REPO / "notebooks" / f"{name}.ipynb"
    assert committed.exists(), "run: python tools/downloads.py notebooks"
    assert committed.read_bytes() == (built / "notebooks" / f"{name}.ipynb").read_bytes(), \
        "run: python tools/downloads.py notebooks"


def test_colab_links_take_colabs_github_form():
    lesson = LESSONS[0]
    url = downloads.colab_url("https://github.com/someone/verified-triton", "main", lesson)
    assert url == (f"https://colab.research.google.com/github/someone/verified-triton/blob/main/notebooks/"
                   f"{lesson.name}.ipynb")
    assert downloads.colab_url("https://github.com/someone/verified-triton.git/", "main", lesson) == url
    for bad in ("", "https://gitlab.com/a/b", "javascript:alert(1)", "https://github.com/a/b/c",
                'https://github.com/a/b"onmouseover="x'):
        assert downloads.colab_url(bad, "main", lesson) == ""
    assert downloads.colab_url("https://github.com/a/b", "main;rm", lesson) == ""


def test_without_a_repository_no_colab_link_is_shown(built):
    page = (built / "lessons" / LESSONS[0].name / "index.html").read_text()
    assert "colab.research.google.com" not in page


@pytest.mark.parametrize("name", NAMES)
def test_the_requirements_box_matches_lesson_toml_and_the_evidence(built, name):
    lesson = next(x for x in LESSONS if x.name == name)
    page = html.unescape(re.sub(r"<[^>]+>", " ", (built / "lessons" / name / "index.html").read_text()))
    box = page[page.index("Run it yourself"):]
    box = re.sub(r"\s+", " ", box)[:4000]
    if lesson.requires.capability:
        assert f"compute capability {lesson.requires.capability} or newer" in box
    if lesson.requires.triton:
        assert f"Triton: {lesson.requires.triton} or newer" in box
    st = judge(lesson, REPO / "evidence")
    for record in st.records:
        env = record.env
        assert env.triton in box and env.torch in box and record.date in box
        assert f"{record.wall_s:.0f} s" in box
    assert f"TRITON_INTERPRET=1 python {lesson.main.name}" in box
    assert "Download the lesson (zip)" in box and "Jupyter notebook" in box


def test_a_lesson_above_colabs_gpus_says_so_and_declines_there():
    def capability(lesson) -> tuple[int, ...]:
        return tuple(map(int, lesson.requires.capability.split("."))) if lesson.requires.capability else (0,)

    hopper = [x for x in LESSONS if capability(x) > (8, 9)]
    assert hopper, "the course has Hopper-only lessons"
    site = downloads.directives.Site.load(REPO / "code", REPO / "evidence")
    for lesson in hopper:
        cell = downloads.setup_cell(lesson, site)
        assert "None of Colab's GPUs" in cell and "decline by design" in cell
        assert f"get_device_capability() < ({', '.join(lesson.requires.capability.split('.'))})" in cell
