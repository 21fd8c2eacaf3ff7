"""Run it yourself: every lesson as a zip archive and as a Jupyter notebook.

    python tools/downloads.py notebooks     write notebooks/<lesson>.ipynb (what "Open in Colab" opens)
    python tools/downloads.py check         exit 1 unless the committed notebooks match the generated ones
    python tools/downloads.py build DIR     write every archive and notebook into DIR

The site build calls the same functions (the hook publishes downloads/<lesson>.zip
and notebooks/<lesson>.ipynb). An archive holds the lesson's files, lesson.toml,
lessonkit.py and a README with the run commands: unpacked into an empty folder,
`TRITON_INTERPRET=1 python <file>.py` runs as it does in the repository. A
notebook is made with nbformat from the lesson's page and source: the page's
prose as Markdown cells (its directives in their notebook form), a setup cell,
the kit and lesson.toml written by %%writefile cells, the lesson file as code
cells ending in its run, and the recorded GPU run's output, labelled with the
machine and date. Nothing here runs a lesson.
"""

from __future__ import annotations

import ast
import io
import re
import sys
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import directives  # noqa: E402
from lessons import Lesson  # noqa: E402
from limits import LIMITS  # noqa: E402
from numfmt import seconds  # noqa: E402
from render import clean_output, code_block, markdown_text  # noqa: E402
from requirements import INSTALL, requirements  # noqa: E402
from safefs import UnsafePathError, read_bytes, read_text, same_bytes, write_bytes  # noqa: E402
from siteconfig import REPO_URL, ConfigError, check_branch, check_repo_url  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
ARCHIVES, NOTEBOOKS = "downloads", "notebooks"
ZIP_TIME = (2020, 1, 1, 0, 0, 0)  # fixed, so the same lesson always makes the same bytes
IMPORT_LINE = "HERE = Path(__file__).resolve().parent"
NOTEBOOK_IMPORT = "HERE = Path.cwd()  # in a notebook: lessonkit.py was written here by the cell above"


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


def lesson_files(lesson: Lesson, code_dir: Path) -> dict[str, bytes]:
    """Archive name -> bytes: the lesson's sources (the kit too), each read through safefs."""
    files = {}
    code_dir = Path(code_dir).absolute()
    for path in lesson.source_files():
        name = path.name if path.parent in (lesson.folder, code_dir) else path.relative_to(lesson.folder).as_posix()
        files[name] = read_bytes(path, LIMITS.source_file, code_dir)
    return files


# -- archives ------------------------------------------------------------------------

def readme(lesson: Lesson, site: directives.Site) -> str:
    req = requirements(lesson, site.status(lesson.name))
    interp, gpu = req.commands()
    md = markdown_text  # lesson.toml text and evidence fields: shown as the characters they are
    need = (f"a CUDA GPU of compute capability {md(req.capability)} or newer ({md(req.why)})" if req.capability
            else "a CUDA GPU")
    lines = [f"# {md(lesson.title)}", "", md(lesson.summary, line_start=True), "",
             "## Run it", "", f"    {INSTALL}", f"    {interp}   # any machine: the checks, on the CPU",
             f"    {gpu}                      # a CUDA GPU: checks and benchmarks", "",
             f"The GPU run needs {need}. {req.colab_sentence}",
             f"It needs Triton {md(req.triton)} or newer." if req.triton else "", "",
             "Exit codes: 0 passed, 1 a check failed or a gating target was missed, 2 this machine cannot run "
             "it (no GPU and no interpreter, or Triton too old), 3 declined by design (a GPU below the capability "
             "it needs).", "",
             "`lessonkit.py` is the small kit the lesson reports its checks and benchmarks through; "
             "`lesson.toml` declares what the lesson needs.", ""]
    if req.runs:
        lines += ["## What the recorded runs used", ""]
        lines += [f"- {r.mode}: {md(r.machine)}, {md(r.date)}, Triton {md(r.triton)}, torch {md(r.torch)}, "
                  f"Python {md(r.python)}, {seconds(r.wall_s)}, {md(r.outcome)}" for r in req.runs]
        lines.append("")
    return "\n".join(line for line in lines) + "\n"


def archive(lesson: Lesson, site: directives.Site) -> bytes:
    """A zip with one folder, <lesson>/, that runs as it is."""
    files = lesson_files(lesson, site.code_dir)
    files["README.md"] = readme(lesson, site).encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in sorted(files):
            info = zipfile.ZipInfo(f"{lesson.name}/{name}", ZIP_TIME)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, files[name])
    return buffer.getvalue()


# -- notebooks -------------------------------------------------------------------------

ADMONITION = re.compile(r'^(?P<indent>[ \t]*)(?:!!!|\?\?\?\+?)\s+[\w -]*?(?:"(?P<title>[^"]*)")?\s*$')
TAB = re.compile(r'^(?P<indent>[ \t]*)===\s+"(?P<title>[^"]*)"\s*$')
ATTRS = re.compile(r"\{\s*[.#:][^}]*\}")
EMOJI = re.compile(r":(?:material|octicons|fontawesome)-[a-z0-9-]+:\s?")


def for_jupyter(markdown: str) -> str:
    """Material's admonitions and tabs as plain Markdown: a bold title, the body dedented."""
    out, stack = [], []  # stack: indents of open blocks
    for line in markdown.split("\n"):
        indent = len(line) - len(line.lstrip(" "))
        while stack and line.strip() and indent < stack[-1]:
            stack.pop()
        depth = 4 * len(stack)
        body = line[depth:] if line.startswith(" " * depth) else line.lstrip(" ")
        match = ADMONITION.match(body) or TAB.match(body)
        if match:
            title = match.group("title")
            if title:
                out.append(f"**{title}**")
            out.append("")
            stack.append(depth + 4)
            continue
        out.append(EMOJI.sub("", ATTRS.sub("", body)))
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out))


def page_markdown(lesson: Lesson, site: directives.Site, docs_dir: Path) -> tuple[str, dict[str, bytes]]:
    """The lesson's page with its directives in notebook form, and the images its cells embed."""
    text = read_text(docs_dir / lesson.page, LIMITS.source_file, docs_dir)
    body = re.sub(r"\A---\n.*?\n---\n", "", text, count=1, flags=re.S)
    page = directives.Page(site, lesson.page, site.status(lesson.name), notebook=True)
    first_line = 1 + text.count("\n") - body.count("\n")  # errors name the page's own lines, front matter counted
    return for_jupyter(directives.expand_page(body, page, first_line)), page.attachments


def split_cells(markdown: str) -> list[str]:
    """Prose cells: one per section (at ## headings), none empty."""
    cells, current = [], []
    fence = False
    for line in markdown.split("\n"):
        if line.lstrip().startswith(("```", "~~~")):
            fence = not fence
        if not fence and line.startswith("## ") and current:
            cells.append("\n".join(current).strip())
            current = []
        current.append(line)
    cells.append("\n".join(current).strip())
    return [c for c in cells if c]


def code_cells(source: str) -> list[str]:
    """The lesson file as cells: the prelude, then one cell per top-level definition or statement;
    the `if __name__ == "__main__"` block becomes the run cell."""
    lines = source.split("\n")
    tree = ast.parse(source)
    starts = []
    for node in tree.body:
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        while first > 1 and lines[first - 2].lstrip().startswith("#"):  # comments above belong to it
            first -= 1
        starts.append((first, node))
    cells, prelude_end = [], None
    for first, node in starts:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)) or _is_main_guard(node):
            prelude_end = first
            break
    prelude_end = prelude_end or len(lines) + 1
    cells.append("\n".join(lines[: prelude_end - 1]))
    for i, (first, node) in enumerate(starts):
        if first < prelude_end:
            continue
        end = starts[i + 1][0] - 1 if i + 1 < len(starts) else len(lines)
        chunk = "\n".join(lines[first - 1:end])
        if _is_main_guard(node):
            chunk = ("# The lesson's run (in a script: sys.exit(main())). Exit code 0: passed; 3: declined by design.\n"
                     "exit_code = main()\nprint('exit code', exit_code)\nassert exit_code == 0, exit_code")
        cells.append(chunk)
    cells = [c.strip("\n") for c in cells if c.strip()]
    cells[0] = cells[0].replace(IMPORT_LINE, NOTEBOOK_IMPORT)
    if NOTEBOOK_IMPORT not in cells[0]:
        raise ValueError(f"the lesson file does not import the kit with the line {IMPORT_LINE!r}")
    return cells


def _is_main_guard(node) -> bool:
    return isinstance(node, ast.If) and "__main__" in ast.unparse(node.test)


def setup_cell(lesson: Lesson, site: directives.Site) -> str:
    req = requirements(lesson, site.status(lesson.name))
    lines = [
        "# Setup. Colab has torch and Triton already; elsewhere: " + INSTALL,
        "import importlib.util, os, subprocess, sys",
        'if importlib.util.find_spec("triton") is None:',
        '    subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", "triton"])',
        "import torch",
        "if not torch.cuda.is_available():",
        "    # No GPU: the kernels run on the CPU through Triton's interpreter (checks only, nothing timed).",
        '    os.environ["TRITON_INTERPRET"] = "1"',
    ]
    if req.capability:
        need = ", ".join(req.capability.split("."))
        lines += [f"elif torch.cuda.get_device_capability() < ({need}):",
                  f"    print({req.colab_sentence!r})",
                  "    print('This GPU is', torch.cuda.get_device_name(), '- the lesson will decline by design.')"]
    return "\n".join(lines)


def notebook(lesson: Lesson, site: directives.Site, docs_dir: Path):
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

    prose, attachments = page_markdown(lesson, site, docs_dir)
    files = lesson_files(lesson, site.code_dir)
    main_source = files.pop(lesson.main.name).decode("utf-8")
    toml = files.pop("lesson.toml").decode("utf-8")
    colab = colab_url(site.repo_url, site.branch, lesson)
    intro = [f"*{markdown_text(lesson.summary)}*", "",
             "Generated from the lesson's page and source by `tools/downloads.py`. It runs top to bottom: on a "
             "GPU it checks and times the kernels; without one it runs the checks on the CPU through Triton's "
             "interpreter."]
    if colab:
        intro += ["", f"[Open in Colab]({colab})"]
    cells = [new_markdown_cell("\n".join(intro))]
    cells.append(new_code_cell(setup_cell(lesson, site)))
    for name in sorted(files):
        cells.append(new_code_cell(f"%%writefile {name}\n" + files[name].decode("utf-8").rstrip("\n")))
    cells.append(new_code_cell("%%writefile lesson.toml\n" + toml.rstrip("\n")))
    for text in split_cells(prose):
        cell = new_markdown_cell(text)
        used = {name: data for name, data in attachments.items() if f"attachment:{name}" in text}
        if used:
            import base64

            cell["attachments"] = {n: {"image/png": base64.b64encode(d).decode()} for n, d in used.items()}
        cells.append(cell)
    cells.append(new_markdown_cell("## The whole lesson\n\nThe lesson file, cell by cell, ending in its run."))
    cells += [new_code_cell(chunk) for chunk in code_cells(main_source)]
    st = site.status(lesson.name)
    gpu = [r for r in (st.records if st else []) if r.mode == "gpu"]
    for record in gpu:
        env = record.env
        older = "" if st.is_current(record) else " (⚠ for an older version of the source)"
        md = markdown_text  # evidence fields: shown as the characters they are
        cells.append(new_markdown_cell(
            f"## The recorded GPU run{older}\n\n{md(env.device_name)}, {md(record.started_utc.replace('T', ' '))}, "
            f"Triton {md(env.triton)}, torch {md(env.torch)}, {seconds(record.wall_s)}, {md(record.outcome)}:\n\n"
            + code_block(clean_output(record.stdout) or "(nothing)")))
    for i, cell in enumerate(cells):
        cell["id"] = f"{lesson.name}-{i}"  # fixed ids: the same lesson makes the same notebook
    nb = new_notebook(cells=cells, metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "language_info": {"name": "python"},
        "accelerator": "GPU",
        "colab": {"provenance": [], "toc_visible": True},
    })
    nb.metadata["title"] = lesson.title
    return nb  # built from nbformat's own constructors; tests/test_downloads.py validates every notebook


def notebook_bytes(lesson: Lesson, site: directives.Site, docs_dir: Path) -> bytes:
    import nbformat

    return (nbformat.writes(notebook(lesson, site, docs_dir)) + "\n").encode("utf-8")


# -- command line ------------------------------------------------------------------------

def _config() -> tuple[str, str]:
    """repo_url and the branch from mkdocs.yml, without importing MkDocs' loaders; ConfigError if either is bad."""
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    repo = re.search(r'^repo_url:[ \t]*"?([^"\n]*)"?[ \t]*$', text, re.M)
    branch = re.search(r"^[ \t]+branch:[ \t]*([^\s#]+)", text, re.M)
    return (check_repo_url(repo.group(1).strip() if repo else ""),
            check_branch(branch.group(1).strip("\"'") if branch else "main"))


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("notebooks", "check", "build"):
        print(__doc__.strip().split("\n\n")[0], file=sys.stderr)
        return 2
    try:
        repo, branch = _config()
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    site = directives.Site.load(ROOT / "code", ROOT / "evidence", repo_url=repo, branch=branch)
    docs = ROOT / "docs"
    try:
        return _write_downloads(argv, site, docs)
    except UnsafePathError as exc:  # a link in a download folder: never followed, nothing written through it
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _write_downloads(argv: list[str], site: directives.Site, docs: Path) -> int:
    """Every file goes through safefs: no link in the folders is followed, nothing lands outside them."""
    if argv[0] == "build":
        out = Path(argv[1] if len(argv) > 1 else ROOT / "site-downloads").absolute()
        for lesson in site.lessons:
            write_bytes(out / ARCHIVES / f"{lesson.name}.zip", archive(lesson, site), out)
            write_bytes(out / NOTEBOOKS / f"{lesson.name}.ipynb", notebook_bytes(lesson, site, docs), out)
        print(f"wrote {len(site.lessons)} archives and notebooks under {out}")
        return 0
    stale = []
    for lesson in site.lessons:
        path = ROOT / NOTEBOOKS / f"{lesson.name}.ipynb"
        data = notebook_bytes(lesson, site, docs)
        if argv[0] == "notebooks":
            if not same_bytes(path, data, ROOT):
                write_bytes(path, data, ROOT)
                print(f"wrote {path.relative_to(ROOT)}")
        elif not same_bytes(path, data, ROOT):
            stale.append(path.relative_to(ROOT).as_posix())
    for name in sorted(p.name for p in (ROOT / NOTEBOOKS).glob("*.ipynb")):
        if name.removesuffix(".ipynb") not in {lesson.name for lesson in site.lessons}:
            stale.append(f"{NOTEBOOKS}/{name} (no such lesson)")
    if stale:
        print("notebooks out of date (run: python tools/downloads.py notebooks): " + ", ".join(stale),
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
