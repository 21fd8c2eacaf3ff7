"""Create a new lesson that verifies under the interpreter and builds as generated.

    .venv/bin/python tools/new_lesson.py NAME [--title "Title"] [--part "Part of the course"]

Writes code/NAME/: lesson.toml; the kernels module NAME_SNAKE.py (a kernel, its
launcher and a self-check: it runs alone); lesson.py, the verified run (the
checks, and a benchmark against a baseline timed in the same run); exercises.py
and solutions.py (two exercises, checked by code/practice.py, each with the
mistakes its check must catch); and docs/lessons/NAME.md, the page, ending
with its Practice section (templates: tools/verified_triton/author/scaffold/).
The lesson joins the navigation by itself: with --part, at the end of that
part (lesson.toml's `after`), else at the end of the course. It prints the commands that come next.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from string import Template

from verified_triton.core.lessons import LessonError, discover
from verified_triton.core.paths import ROOT
from verified_triton.core.terminal import safe as terminal

# A name the course can find (schema.LESSON_NAME: 64 characters at most), and a module name Python can import.
VALID = re.compile(r"\A(?=.{1,64}\Z)[a-z][a-z0-9]*(?:-[a-z0-9]+)*\Z")

# The lesson's files are templates in scaffold/ ($name, $title, $module...: string.Template). They keep to
# 88 columns (code/ruff.toml), so no line hides behind a scroll on the page, for the longest name VALID allows.
SCAFFOLD = Path(__file__).with_name("scaffold")
LINE = 88


LESSON_TOML = '''title = "{title}"
{placement}
main = "lesson.py"
page = "lessons/{name}.md"
summary = "One sentence on what this lesson teaches, for the course path on the home page."
prerequisites = ["vector-add"]   # lessons that must come earlier in the course

# What the GPU run needs. The kit enforces it (lesson.device()) and the page,
# the notebook and the messages state it, so state only what a run has shown.
# - capability: the lowest compute capability the kernel's features need, e.g.
#   "8.0" for bf16 and tf32 tensor cores, "9.0" for TMA and wgmma, "10.0" for
#   tcgen05. A GPU below it declines by design (exit 3): PARTIALLY VERIFIED there,
#   which the publish gate accepts. Left out, the page claims only "a CUDA GPU".
# - triton: the oldest Triton a run has passed with, the GPU run included
#   (`.venv/bin/python tools/verify.py --status` shows the versions each run used).
# - why: the feature behind the numbers, said wherever they are.
# These keys are part of the source hash: set them before recording the GPU run.
[requires]
# capability = "8.0"
# triton = "3.6"
# why = "bf16 tensor cores"

[interpreter]
timeout = 120

[gpu]
timeout = 120
'''

def placement(existing, part: str) -> tuple[str, str]:
    """lesson.toml's line that places the lesson, and a sentence on where that is.

    At the end of `part` when it exists (after its last lesson: no lesson is
    renumbered), else at the end of the course, in a new part if one is named.
    """
    in_part = [lesson for lesson in existing if part and lesson.part == part]
    if in_part:
        last = in_part[-1]
        return (f"# placed right after this lesson; or order = N, any number (e.g. 16.5 between 16 and 17)\n"
                f'after = "{last.name}"\npart = {json.dumps(part)}',
                f"at the end of the part \"{part}\", after {last.name}")
    order = int(max((lesson.order for lesson in existing if lesson.order < 999), default=0)) + 1
    line = f'order = {order}  # any number (16.5 goes between 16 and 17), or after = "<lesson>"'
    if part:
        parts = sorted({lesson.part for lesson in existing if lesson.part})
        return (line + f"\npart = {json.dumps(part)}",
                f"in a new part \"{part}\" at the end of the course (existing parts: {', '.join(parts) or 'none'})")
    return line, "at the end of the course, in no part (--part NAME puts it at the end of a part)"


def create(name: str, title: str, root: Path = ROOT, part: str = "") -> list[Path]:
    return create_lesson(name, title, root, part)[0]


def create_lesson(name: str, title: str, root: Path = ROOT, part: str = "") -> tuple[list[Path], str]:
    """Write the lesson's files; return them and where in the course it went."""
    if not VALID.match(name):
        raise SystemExit(f"invalid lesson name {name!r}: use lower-case letters, digits and '-', "
                         "64 characters at most")
    if '"' in title or "\\" in title or '"' in part or "\\" in part:
        raise SystemExit("the title and part may not contain '\"' or '\\'")
    folder = root / "code" / name
    page = root / "docs" / "lessons" / f"{name}.md"
    for path in (folder, page):
        if path.exists():
            raise SystemExit(f"{path} already exists")
    try:
        existing = discover(root / "code")
    except LessonError as exc:
        raise SystemExit(f"cannot place the new lesson: {terminal(exc)}") from None
    line, where = placement(existing, part)
    module = name.replace("-", "_")
    values = {"name": name, "title": title, "module": module, "placement": line,
              "import_scale": from_import(module, "scale", name),
              "import_kernel": from_import(module, "scale_kernel", name)}
    folder.mkdir(parents=True)
    written = {
        folder / f"{module}.py": "kernels.py.in",
        folder / "lesson.py": "lesson.py.in",
        folder / "exercises.py": "exercises.py.in",
        folder / "solutions.py": "solutions.py.in",
        folder / "lesson.toml": LESSON_TOML,
        page: "page.md.in",
    }
    for path, template in written.items():
        text = template.format(**values) if template is LESSON_TOML else \
            Template((SCAFFOLD / template).read_text(encoding="utf-8")).substitute(values)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return list(written), where


def from_import(module: str, name: str, lesson: str) -> str:
    """`from MODULE import NAME`, wrapped as ruff's isort wraps it when it passes the line length. A lesson
    named without a hyphen has a folder code/MODULE, so ruff's isort counts the module first-party (a block
    of its own, after a blank line) where a hyphenated name's module is third-party, beside torch."""
    line = f"from {module} import {name}"
    line = line if len(line) <= LINE else f"from {module} import (\n    {name},\n)"
    return "\n" + line if module == lesson else line


NEXT = """
next:
  TRITON_INTERPRET=1 .venv/bin/python code/{name}/exercises.py --solutions   # the answers pass
  .venv/bin/python tools/verify.py --lesson {name}      # interpreter run and exercises, under evidence/{name}/
  .venv/bin/python tools/verify.py --smoke --lesson {name}   # its GPU steps too, once, untimed: not recorded
  bash tools/dev.sh serve                               # http://127.0.0.1:8000/lessons/{name}/
  .venv/bin/python tools/downloads.py notebooks         # its notebook: CI checks each one is current
on a GPU machine (stock python3), then back here:
  python3 tools/verify.py --lesson {name} --mode gpu --bundle {name}.tar.gz
  .venv/bin/python tools/verify.py --import {name}.tar.gz
  .venv/bin/python tools/downloads.py notebooks         # again: the notebook shows the GPU run
before publishing:
  .venv/bin/python tools/verify.py --check --publish    # fails until the GPU run is recorded
(.venv: bash tools/dev.sh author; the guide: docs/writing-a-lesson.md)"""


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="new_lesson.py", description="Create a new lesson: code/NAME/ and docs/lessons/NAME.md.",
        epilog="example: .venv/bin/python tools/new_lesson.py row-sum --title \"Row sums\" --part Foundations\n"
               "exit codes: 0 created; 1 a bad name, or the lesson exists; 2 a bad command line",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("name", help="the lesson's folder and page name: lower-case letters, digits and '-', "
                                     "e.g. 'row-sum'")
    parser.add_argument("--title", help="the page title (default: from the name)")
    parser.add_argument("--part", default="", help="the part of the course, a section of the navigation, e.g. "
                                                   "'Foundations'; the lesson goes at its end (default: the end "
                                                   "of the course, in no part)")
    args = parser.parse_args(argv)
    title = args.title or args.name.replace("-", " ").capitalize()
    created, where = create_lesson(args.name, title, ROOT, part=args.part)
    for path in created:
        print(f"created {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    print(f"placed {terminal(where)}")  # names the lessons and the part lesson.toml gives
    print(NEXT.format(name=args.name))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
