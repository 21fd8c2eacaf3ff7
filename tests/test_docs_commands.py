"""The commands a newcomer needs are written down, once and the same everywhere (issue 37, item 4).

Before: the strict build appeared only in verification.md's batch script (run directly, it printed Material's
end-of-life banner that dev.sh hides); writing-a-lesson.md, read as a file, showed a bare `::directives` line
where the directive table is; the guide did not say what `work=` does in `lesson.benchmark`; verification.md
said `dev.sh test` creates the torch environment where README said `dev.sh author`; the publish gate's message
suggested a bare `python`.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import make_site_project

ROOT = Path(__file__).resolve().parent.parent
DOCS = {"README.md": ROOT / "README.md", "the guide": ROOT / "docs" / "writing-a-lesson.md",
        "verification.md": ROOT / "docs" / "verification.md"}
COMMAND = re.compile(r"bash tools/dev\.sh (?P<name>[a-z]+)")
# pyproject.toml's extras, by the name the docs give each environment
ENVIRONMENTS = {"site": "the site's", "author": "the author's", "dev": "the tests'"}


def dev_sh_extras() -> dict[str, str]:
    """Each command of tools/dev.sh and the extra it installs (its `setup EXTRA` line)."""
    script = (ROOT / "tools" / "dev.sh").read_text(encoding="utf-8")
    arms = re.findall(r"^    (?P<name>[a-z]+)\)\n(?:        (?!setup ).*\n)*?        setup (?P<extra>[a-z]+)$", script,
                      re.M)
    assert arms, "tools/dev.sh: no `NAME)` arm with a `setup EXTRA` line"
    return dict(arms)


def sentences(text: str) -> list[str]:
    """Prose joined into sentences (a code line is one of its own; a table row too)."""
    out: list[str] = []
    paragraph: list[str] = []
    fenced = False
    for line in text.split("\n") + [""]:
        if line.startswith("```"):
            fenced = not fenced
            continue
        if fenced or line.startswith("|") or not line.strip():
            if paragraph:
                out += re.split(r"(?<=[.;!?])\s+", " ".join(paragraph))
                paragraph = []
            if line.strip():
                out.append(line)
            continue
        paragraph.append(line.strip())
    return out


def claims(sentence: str) -> list[tuple[str, str]]:
    """(command, the text that belongs to it) for each `bash tools/dev.sh X` in a sentence: with one
    command, the whole sentence; with several, from each command to the next."""
    found = list(COMMAND.finditer(sentence))
    if len(found) == 1:
        return [(found[0].group("name"), sentence)]
    return [(m.group("name"), sentence[m.start():found[i + 1].start() if i + 1 < len(found) else None])
            for i, m in enumerate(found)]


@pytest.mark.unit
def test_dev_sh_and_the_readmes_table_tell_the_same_environments():
    extras = dev_sh_extras()
    assert extras == {"serve": "site", "build": "site", "author": "author", "test": "dev"}, extras
    readme = DOCS["README.md"].read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `bash tools/dev\.sh ([a-z]+)` \| (the [a-z]+'s?)[ :]", readme, re.M))
    assert rows == {name: ENVIRONMENTS[extra] for name, extra in extras.items()}, rows


@pytest.mark.unit
@pytest.mark.parametrize("doc", DOCS)
def test_every_dev_sh_command_is_named_with_the_environment_it_creates(doc):
    """A sentence that names `bash tools/dev.sh X` and an environment names X's own; one that promises
    torch names the author's command (the site's environment has none, and the tests' is not the one to
    ask for it)."""
    extras = dev_sh_extras()
    wrong = []
    for sentence in sentences(DOCS[doc].read_text(encoding="utf-8")):
        for name, said in claims(sentence):
            assert name in extras, f"{doc}: `bash tools/dev.sh {name}` is no command of tools/dev.sh: {sentence}"
            own = ENVIRONMENTS[extras[name]]
            others = [env for env in ENVIRONMENTS.values() if env != own and env in said]
            torch = re.search(r"(?<!no )\btorch\b(?! 2\.13| \()", said) and "no torch" not in said
            if (others and own not in said) or (torch and extras[name] != "author" and own not in said):
                wrong.append(sentence)
    assert wrong == [], f"{doc}: " + "\n".join(wrong)


@pytest.mark.unit
def test_readme_lists_the_prerequisites_before_the_first_command():
    """Before: README began with `bash tools/dev.sh serve`; venv, npm, Chromium and the disk the torch
    environment takes were found out by failing (issue 46, a newcomer's first hour)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    first_command = text.index("```bash\nbash tools/dev.sh")
    before = re.sub(r"\s+", " ", text[:first_command])
    assert "## Before the commands" in before
    for needed in ("Python 3.11 or newer", "python3-venv", "npm", "axe-core", "Chromium", "2.5 GB",
                   "PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu"):
        assert needed in before, f"README says {needed!r} only after the first command, or not at all"


@pytest.mark.unit
def test_the_strict_build_is_one_command_and_the_docs_use_it():
    for doc, path in DOCS.items():
        text = path.read_text(encoding="utf-8")
        assert "bash tools/dev.sh build" in text, doc
        by_hand = re.findall(r"^\s*(?:\S*/)?mkdocs build.*$", text, re.M)
        assert by_hand == [], f"{doc} shows a build by hand: {by_hand}"


@pytest.mark.integration
def test_dev_sh_build_is_quiet_and_says_where_the_site_is(tmp_path):
    """The real command, on a small course with the real mkdocs.yml and hooks (the real site is built once per
    test run, `real_site`): no end-of-life banner, no INFO lines, the folder."""
    stamp = ROOT / ".venv" / ".installed-site"  # dev.sh's record that the site's extra is installed
    if not stamp.is_file() or stamp.stat().st_mtime < (ROOT / "pyproject.toml").stat().st_mtime:
        pytest.skip("bash tools/dev.sh build would first install the site's extra into .venv")
    project = make_site_project(tmp_path / "project")
    project.add_lesson("vector-add")
    site = tmp_path / "built"
    env = dict(os.environ, VT_CODE_DIR=str(project.code), VT_EVIDENCE_DIR=str(project.evidence))
    result = subprocess.run(["bash", "tools/dev.sh", "build", "-f", str(project.config()), "-d", str(site)],
                            capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    output = result.stdout + result.stderr
    assert (site / "index.html").is_file()
    assert "MkDocs 2.0" not in output and "INFO" not in output, output
    assert f"the site is in {site}/ " in output, output


@pytest.mark.unit
def test_the_guides_directive_table_is_the_registry_written_out():
    """Readable in the Markdown source, and never behind the registry: the text between the markers is
    what the registry writes (directives/reference.py)."""
    from verified_triton.site.directives.reference import directive_table_markdown

    guide = DOCS["the guide"].read_text(encoding="utf-8")
    start, end = "<!-- the directive table:", "<!-- end of the directive table -->"
    assert guide.count(start) == 1 and guide.count(end) == 1
    committed = guide.split(start, 1)[1].split("-->", 1)[1].split(end, 1)[0].strip("\n")
    expected = directive_table_markdown().strip("\n")
    assert committed == expected, ("docs/writing-a-lesson.md's directive table is not the registry's; put this "
                                   f"between its markers:\n{expected}")
    assert "\n::directives\n" not in guide


@pytest.mark.unit
def test_the_guide_explains_work_with_an_example():
    guide = DOCS["the guide"].read_text(encoding="utf-8")
    section = guide[guide.index("`work=`"):][:2500]
    assert "time ratio" in section and "rate" in section and "work=(" in section


# -- what the tools print: the environment's Python, never a bare `python` ----------------------------

BARE = re.compile(r"(?<![\w./-])python (?=tools/)")


def string_constants(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.append((node.lineno, node.value))
    return found


@pytest.mark.unit
def test_no_message_of_the_tools_suggests_a_bare_python():
    """`.venv/bin/python tools/...` here, `python3 tools/verify.py` on a GPU machine: a bare `python` may be
    one without torch, or none at all."""
    offenders = [f"{path.relative_to(ROOT)}:{line}: {text.strip()[:100]}"
                 for path in sorted((ROOT / "tools").rglob("*.py")) for line, text in string_constants(path)
                 if BARE.search(text)]
    assert offenders == []


@pytest.mark.integration
def test_the_publish_gate_names_the_environments_python(project):
    from conftest import PASSING

    project.add("good", PASSING)
    assert project.verify("--mode", "interpreter").returncode == 0
    gate = project.verify("--check", "--publish")
    assert gate.returncode == 1
    assert "(.venv/bin/python tools/verify.py --import good.tar.gz)" in gate.stderr, gate.stderr
    assert not BARE.search(gate.stderr)


@pytest.mark.integration
def test_verify_help_names_the_environments_python():
    result = subprocess.run([sys.executable, "tools/verify.py", "--help"], capture_output=True, text=True,
                            cwd=ROOT, timeout=60)
    assert result.returncode == 0 and not BARE.search(result.stdout), result.stdout
