"""Run it yourself: every lesson as a zip archive and as a Jupyter notebook.

    .venv/bin/python tools/downloads.py notebooks     write notebooks/<lesson>.ipynb (what "Open in Colab" opens)
    .venv/bin/python tools/downloads.py check         exit 1 unless the committed notebooks match the generated ones
    .venv/bin/python tools/downloads.py build DIR     write every archive and notebook into DIR

The site build calls the same functions (the hook publishes downloads/<lesson>.zip
and notebooks/<lesson>.ipynb). An archive holds the lesson's files, lesson.toml,
lessonkit.py and a README with the run commands: unpacked into an empty folder,
`TRITON_INTERPRET=1 python <file>.py` runs as it does in the repository. A
notebook is the lesson's page, runnable (tools/verified_triton/site/notebook.py): the page's prose,
section by section, each followed by the code it discusses, and every step of
main() with what the recorded GPU run printed in it. Nothing here runs a lesson.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

from verified_triton.core.lessons import Lesson, kernels_module
from verified_triton.core.limits import LIMITS
from verified_triton.core.numfmt import counted, seconds
from verified_triton.core.paths import ROOT
from verified_triton.core.safefs import UnsafePathError, read_bytes, same_bytes, write_bytes
from verified_triton.site import directives, sources, tutorial
from verified_triton.site import notebook as notebooks
from verified_triton.site.door import PlainMd, markdown_text, plain_code, terminal
from verified_triton.site.requirements import CPU_INSTALL, INSTALL, requirements
from verified_triton.site.siteconfig import NOTEBOOKS, ConfigError, check_branch, check_repo_url

ARCHIVES = "downloads"
ZIP_TIME = (2020, 1, 1, 0, 0, 0)  # fixed, so the same lesson always makes the same bytes



def built_commit(fallback: str, root: Path = ROOT) -> str:
    """The commit the site is built from, so a page's links open exactly the code whose evidence it shows.

    GITHUB_SHA in CI, else `git rev-parse HEAD`; each is taken only as 40 hex digits. Without
    either (a copy that is no git checkout), `fallback`: the branch.
    """
    sha = os.environ.get("GITHUB_SHA", "").strip()
    if not re.fullmatch(r"[0-9a-f]{40}", sha):
        try:
            head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                                  timeout=20)
            sha = head.stdout.strip() if head.returncode == 0 else ""
        except (OSError, subprocess.TimeoutExpired):
            sha = ""
    return sha if re.fullmatch(r"[0-9a-f]{40}", sha) else fallback



# -- archives ------------------------------------------------------------------------

def readme(lesson: Lesson, site: directives.Site) -> PlainMd:
    """The archive's README: what to install (torch's CPU build on a machine without a GPU), how to run it, what
    the recorded runs used. Plain Markdown (door.PlainMd): it reads as itself in an editor and on GitHub."""
    req = requirements(lesson, site.status(lesson.name))
    interp, gpu = (plain_code(command) for command in req.commands())
    need = (PlainMd("a CUDA GPU of compute capability {} or newer").format(req.capability)
            + (PlainMd(" ({})").format(req.why) if req.why else PlainMd("")) if req.capability
            else PlainMd("a CUDA GPU"))
    optional = [PlainMd("    {}   # optional: a baseline the benchmarks compare against").format(plain_code(line))
                for line in req.optional_installs]
    blank = PlainMd("")
    lines = [PlainMd("# {}").format(lesson.title), blank, markdown_text(lesson.summary, line_start=True), blank,
             PlainMd("## Run it"), blank,
             PlainMd("With a CUDA GPU, the checks and the benchmarks:"), blank,
             PlainMd("    {}").format(plain_code(INSTALL)), *optional,
             PlainMd("    {}").format(gpu), blank,
             PlainMd("Without a GPU, the checks run on the CPU through Triton's interpreter (nothing is timed). "
                     "Install torch's CPU build first: on Linux the default torch is the CUDA build, gigabytes of "
                     "libraries a CPU cannot use."), blank,
             *(PlainMd("    {}").format(plain_code(line)) for line in CPU_INSTALL), *optional,
             PlainMd("    {}").format(interp), blank,
             PlainMd("The GPU run needs {}. {}").format(need, req.colab_sentence),
             PlainMd("It needs Triton {} or newer.").format(req.triton) if req.triton else blank,
             *([markdown_text(req.optional_sentence)] if req.optional else []), blank,
             PlainMd("Exit codes: 0 passed, 1 a check failed or a gating target was missed, 2 this machine cannot run "
                     "it (no GPU and no interpreter, or Triton too old), 3 declined by design (a GPU below the "
                     "capability it needs)."), blank,
             PlainMd("`lessonkit.py` is the small kit the lesson reports its checks and benchmarks through; "
                     "`lesson.toml` declares what the lesson needs."), blank]
    if req.runs:
        lines += [PlainMd("## What the recorded runs used"), blank]
        lines += [PlainMd("- {}: {}, {}, Triton {}, torch {}, Python {}, {}, {}").format(
            r.mode, r.machine, r.date, r.triton, r.torch, r.python, seconds(r.wall_s), r.outcome) for r in req.runs]
        lines.append(blank)
    lines += [PlainMd("## Licence"), blank,
              PlainMd("The code in this folder is under the MIT licence (`LICENSE`, beside this file). The course's "
                      "prose and figures, on its site, are under CC BY 4.0, Creative Commons Attribution 4.0 "
                      "International (`LICENSE-docs` in the course's repository)."), blank]
    return PlainMd("\n").join(lines) + PlainMd("\n")


def tutorial_readme(lesson: Lesson, site: directives.Site, kernels: Path) -> PlainMd:
    """The README of a converted lesson's archive, in the order a reader takes it: the kernels module alone,
    then the exercises, then the verified run (lesson.py, through lessonkit.py)."""
    req = requirements(lesson, site.status(lesson.name))
    interp, gpu = (plain_code(command) for command in req.commands())
    blank = PlainMd("")
    name = plain_code(kernels.name)  # a file name, in code spans and code blocks
    gluon = "gluon" in read_bytes(kernels, LIMITS.source_file, site.code_dir).decode("utf-8", "replace")
    need = PlainMd("a CUDA GPU of compute capability {}").format(req.capability) if req.capability \
        else PlainMd("a CUDA GPU")
    alone = (PlainMd("Its Gluon kernels run on {} only; on a CPU it says so and stops.").format(need) if gluon
             else PlainMd("Under the interpreter it runs on any CPU; on a GPU it also times the kernel."))
    lines = [PlainMd("# {}").format(lesson.title), blank, markdown_text(lesson.summary, line_start=True), blank,
             PlainMd("## 1. The kernels: `{}`").format(name), blank,
             PlainMd("The kernels, their launchers and the comments that explain them; run alone, it checks them "
                     "against torch on sizes that are not multiples of the blocks. {}").format(alone), blank,
             PlainMd("    TRITON_INTERPRET=1 python {}").format(name), PlainMd("    python {}").format(name), blank,
             PlainMd("## 2. The exercises: `exercises.py`"), blank,
             PlainMd("Fill in each \"Your code here\", then check: one line per exercise, passed or what is wrong "
                     "and a hint (`--only NAME` checks one; `--solutions` checks the answers in `solutions.py`; "
                     "`practice.py` is the checker)."), blank,
             PlainMd("    TRITON_INTERPRET=1 python exercises.py"), PlainMd("    python exercises.py"), blank,
             PlainMd("## 3. The verified run: `{}`").format(plain_code(lesson.main.name)), blank,
             PlainMd("The checks, benchmarks and figures the course records for this lesson, through "
                     "`lessonkit.py`; `lesson.toml` says what it needs."), blank,
             PlainMd("    {}").format(interp), PlainMd("    {}").format(gpu), blank,
             PlainMd("Exit codes: 0 passed, 1 a check failed or a gating target was missed, 2 this machine cannot "
                     "run it, 3 declined by design (a GPU below the capability it needs)."), blank,
             PlainMd("## Install"), blank,
             PlainMd("With a CUDA GPU:"), blank, PlainMd("    {}").format(plain_code(INSTALL)), blank,
             PlainMd("Without one, torch's CPU build first (on Linux the default torch is the CUDA build):"), blank,
             *(PlainMd("    {}").format(plain_code(line)) for line in CPU_INSTALL), blank,
             PlainMd("The GPU run needs {}. {}").format(need, req.colab_sentence),
             PlainMd("It needs Triton {} or newer.").format(req.triton) if req.triton else blank, blank,
             PlainMd("## Licence"), blank,
             PlainMd("The code in this folder is under the MIT licence (`LICENSE`, beside this file). The course's "
                     "prose and figures, on its site, are under CC BY 4.0 (`LICENSE-docs` in the course's "
                     "repository)."), blank]
    return PlainMd("\n").join(lines) + PlainMd("\n")


def archive(lesson: Lesson, site: directives.Site) -> bytes:
    """A zip with one folder, <lesson>/, that runs as it is, with the code's licence (and the exercises)."""
    files = sources.lesson_files(lesson, site.code_dir, exercises=True)
    kernels = kernels_module(lesson)
    files["README.md"] = (readme(lesson, site) if kernels is None else tutorial_readme(lesson, site, kernels)).encode()
    files["LICENSE"] = read_bytes(ROOT / "LICENSE", LIMITS.source_file, ROOT)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in sorted(files):
            info = zipfile.ZipInfo(f"{lesson.name}/{name}", ZIP_TIME)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, files[name])
    return buffer.getvalue()


# -- notebooks -------------------------------------------------------------------------

def notebook(lesson: Lesson, site: directives.Site, docs_dir: Path):
    """The lesson's notebook (tools/verified_triton/site/notebook.py makes it: the page, runnable)."""
    return notebooks.build(lesson, site, docs_dir,  # nbformat's constructors; tests/test_downloads.py validates
                           plan=tutorial.plan if tutorial.applies(lesson) else None)


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


def parse_args(argv: list[str]):
    import argparse

    parser = argparse.ArgumentParser(
        prog="downloads.py", description="Every lesson as a zip archive and as a Jupyter notebook.",
        formatter_class=lambda prog: argparse.RawDescriptionHelpFormatter(prog, max_help_position=20),
        epilog="exit codes: 0 done (check: every notebook is current); 1 check found stale or extra notebooks; "
               "2 a bad command line\n"
               "examples:\n"
               "  .venv/bin/python tools/downloads.py notebooks   # after recording or importing evidence\n"
               "  .venv/bin/python tools/downloads.py check       # what CI runs\n"
               "needs nbformat: bash tools/dev.sh author (or serve) installs it into .venv")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands.add_parser("notebooks", help="write notebooks/<lesson>.ipynb, what \"Open in Colab\" opens")
    commands.add_parser("check", help="exit 1 unless the committed notebooks match the generated ones")
    build = commands.add_parser("build", help="write every archive and notebook into DIR")
    build.add_argument("dir", nargs="?", type=Path, default=ROOT / "site-downloads", metavar="DIR",
                       help="where to write them (default: site-downloads/)")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    argv = [args.command] + ([str(args.dir)] if args.command == "build" else [])  # the checked command line
    try:
        repo, branch = _config()
    except ConfigError as exc:
        print(f"error: {terminal(exc)}", file=sys.stderr)
        return 2
    site = directives.Site.load(ROOT / "code", ROOT / "evidence", repo_url=repo, branch=branch)
    docs = ROOT / "docs"
    try:
        return _write_downloads(argv, site, docs)
    except UnsafePathError as exc:  # a link in a download folder: never followed, nothing written through it
        print(f"error: {terminal(exc)}", file=sys.stderr)
        return 2


def _write_downloads(argv: list[str], site: directives.Site, docs: Path) -> int:
    """Every file goes through safefs: no link in the folders is followed, nothing lands outside them."""
    if argv[0] == "build":
        out = Path(argv[1] if len(argv) > 1 else ROOT / "site-downloads").absolute()
        for lesson in site.lessons:
            write_bytes(out / ARCHIVES / f"{lesson.name}.zip", archive(lesson, site), out)
            write_bytes(out / NOTEBOOKS / f"{lesson.name}.ipynb", notebook_bytes(lesson, site, docs), out)
        print(f"wrote {counted(len(site.lessons), 'archive')} and {counted(len(site.lessons), 'notebook')} under {out}")
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
        print("notebooks out of date (run: .venv/bin/python tools/downloads.py notebooks): "
              + terminal(", ".join(stale)), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
