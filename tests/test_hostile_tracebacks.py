"""Hostile input, class 4: tracebacks instead of errors.

Malformed input anywhere (a truncated bundle, wrongly typed nested evidence
items, a directory or a FIFO given to snippets.py, a reader that goes away
mid-output) ends in a message that names the file and the problem and a
non-zero exit, never a Python traceback.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import sys
import tarfile

import pytest

from conftest import SNIPPETS, VERIFY, Project, base_env, build_output, fake_record, make_site_project

pytestmark = pytest.mark.integration

PAGE = "---\nlesson: plain\n---\n\n# Plain\n\n::status\n\n::checks\n"


def no_traceback(result: subprocess.CompletedProcess) -> None:
    output = (result.stdout or "") + (result.stderr or "")
    assert "Traceback" not in output and "Exception ignored" not in output, output


# -- bundles --------------------------------------------------------------------------------------

def good_bundle(project: Project, path) -> bytes:
    rec = fake_record(project.lesson("good"), "gpu")
    rec.stdout = "x" * 50_000  # enough bytes that a cut lands inside the member, not after it
    with tarfile.open(path, "w:gz") as tar:
        data = rec.to_json().encode()
        info = tarfile.TarInfo("good/gpu-nvidia-h200.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return path.read_bytes()


@pytest.mark.parametrize("keep", [0.1, 0.5, 0.9, -8])
def test_a_truncated_bundle_is_refused_with_a_message(project, tmp_path, keep):
    project.add("good", "lesson = Lesson('good')\nsys.exit(lesson.finish())\n")
    bundle = tmp_path / "cut.tar.gz"
    data = good_bundle(project, bundle)
    bundle.write_bytes(data[: int(len(data) * keep)] if keep > 0 else data[:keep])
    result = project.verify("--import", str(bundle))
    assert result.returncode == 1
    assert f"refused: {bundle}: not a readable bundle, or truncated" in result.stderr
    no_traceback(result)
    assert project.files() == {}


def test_a_plain_tar_without_gzip_is_read_too(project, tmp_path):
    project.add("good", "lesson = Lesson('good')\nsys.exit(lesson.finish())\n")
    gz = tmp_path / "a.tar.gz"
    good_bundle(project, gz)
    plain = tmp_path / "a.tar"
    plain.write_bytes(gzip.decompress(gz.read_bytes()))
    result = project.verify("--import", str(plain))
    assert result.returncode == 0, result.stderr
    assert "imported good gpu-nvidia-h200" in result.stdout


# -- wrongly typed nested items -------------------------------------------------------------------

NESTED = {
    "checks-strings": ("checks", ["pass", "fail"], "checks[0]: expected an object, found text"),
    "check-name-number": ("checks", [{"name": 5, "status": "pass"}], "checks[0].name: expected text, found a number"),
    "benchmarks-numbers": ("benchmarks", [1, 2], "benchmarks[0]: expected an object, found a number"),
    "benchmark-samples-list": ("benchmarks", [{"name": "b"}], "benchmarks[0].label: missing"),
    "table-columns-text": ("tables", [{"name": "t", "columns": "abc", "rows": []}],
                           "tables[0].columns: expected a list, found text"),
    "table-cell-object": ("tables", [{"name": "t", "columns": ["a"], "rows": [[{"x": 1}]]}],
                          "tables[0].rows[0][0]"),
    "figures-lists": ("figures", [["plot.png"]], "figures[0]: expected an object, found a list"),
    "env-list": ("env", ["CPU"], "env: expected an object, found a list"),
    "history-strings": ("history", {"b": ["x"]}, "history.b[0]: expected an object, found text"),
    "source-files-list": ("source_files", ["a.py"], "source_files: expected an object, found a list"),
    "skipped-null": ("skipped_parts", [None], "skipped_parts[0]: expected an object, found null"),
    "deep-nesting": ("checks", "@@DEEP@@", "not valid JSON"),
}


@pytest.mark.parametrize("case", NESTED, ids=list(NESTED))
def test_wrongly_typed_nested_items_name_the_field_everywhere(case, tmp_path):
    field, value, message = NESTED[case]
    site = make_site_project(tmp_path / "repo")
    site.add_lesson("plain", PAGE)
    raw = json.loads(site.make_record("plain").to_json())
    raw[field] = value
    text = json.dumps(raw).replace('"@@DEEP@@"', "[" * 100_000 + "]" * 100_000)  # nesting past any recursion
    path = site.record_file("plain")
    path.parent.mkdir(parents=True)
    path.write_text(text, encoding="utf-8")
    status = site.verify("--status")
    assert status.returncode == 0 and f"{path}" in status.stdout and message in status.stdout, status.stdout
    check = site.verify("--check")
    assert check.returncode == 1 and message in check.stderr
    build = site.build()
    assert build.returncode != 0 and message in build_output(build)
    bundle = tmp_path / "b.tar.gz"
    with tarfile.open(bundle, "w:gz") as tar:
        info = tarfile.TarInfo("plain/interpreter.json")
        data = text.encode()
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    path.unlink()
    imported = site.verify("--import", str(bundle))
    assert imported.returncode == 1 and message in imported.stderr and "refused" in imported.stderr
    for result in (status, check, build, imported):
        no_traceback(result)


def test_wrongly_typed_results_from_a_lesson_fail_its_run_naming_the_field(project):
    project.add("odd", """\
        import json
        with open(os.environ["VT_RESULTS"], "w") as f:
            json.dump({"lesson": "odd", "mode": "interpreter", "checks": ["pass", "pass"]}, f)
    """, kit=False)
    result = project.verify("--mode", "interpreter")
    assert result.returncode == 1
    no_traceback(result)
    assert "checks[0]: expected an object, found text" in project.record("odd").reason


# -- snippets.py on what is not a file --------------------------------------------------------------

def snippets(*args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SNIPPETS), *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("command", [["list"], ["show", "-", "kernel"]])
def test_snippets_on_a_directory_is_an_error(tmp_path, command):
    args = [command[0], str(tmp_path), *command[2:]]
    result = snippets(*args)
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: {tmp_path}: a folder, not a plain file")
    no_traceback(result)


@pytest.mark.parametrize("command", ["list", "show"])
def test_snippets_on_a_fifo_does_not_hang(tmp_path, command):
    fifo = tmp_path / "pipe.py"
    os.mkfifo(fifo)
    args = ["list", str(fifo)] if command == "list" else ["show", str(fifo), "kernel"]
    result = snippets(*args, timeout=20)  # a read that blocks on the FIFO would time out here
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: {fifo}: a FIFO, not a plain file")
    no_traceback(result)


# -- a reader that goes away -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def many_lessons(tmp_path_factory) -> Project:
    """Enough lessons that --status output is larger than a pipe's buffer."""
    from conftest import make_project

    project = make_project(tmp_path_factory.mktemp("many") / "project")
    for i in range(300):
        project.add(f"lesson-{i:03d}", "lesson = Lesson('x')\nsys.exit(lesson.finish())\n", order=i)
    return project


@pytest.mark.parametrize("args", [["--status", "--json"], ["--status"]])
def test_output_into_a_closed_pipe_ends_quietly(many_lessons, tmp_path, args):
    project = many_lessons
    full = project.verify(*args)
    assert len(full.stdout) + len(full.stderr) > 70_000, "not enough output to fill a pipe"
    err = tmp_path / "stderr"
    command = " ".join([sys.executable, str(VERIFY), "--code-dir", str(project.code), "--evidence-dir",
                        str(project.evidence), *args])
    result = subprocess.run(["bash", "-c", f"set -o pipefail; {command} 2>{err} | head -1; "
                                           "echo status=${PIPESTATUS[0]}"],
                            capture_output=True, text=True, env=base_env(), timeout=120)
    first, status = result.stdout.splitlines()[0], result.stdout.splitlines()[-1]
    assert first.strip(), result.stdout
    stderr = err.read_text()
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr, stderr
    assert status == "status=0", status
