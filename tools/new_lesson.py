"""Create a new lesson that builds and verifies under the interpreter at once.

    python tools/new_lesson.py NAME [--title "Title"]

Writes code/NAME/ (lesson.toml and the lesson file with one region and one
check) and docs/lessons/NAME.md. The page joins the site's Lessons section
by itself: the navigation comes from lesson.toml (`order`). Then run:

    python tools/verify.py --lesson NAME
    mkdocs serve
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from lessons import discover  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
VALID = re.compile(r"\A[a-z][a-z0-9]*(?:-[a-z0-9]+)*\Z")

LESSON_PY = '''"""{title}.

Run it:
    TRITON_INTERPRET=1 python code/{name}/{module}.py   # CPU, checks only
    python code/{name}/{module}.py                      # GPU
"""

import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

# lessonkit.py sits beside this file in a download, one folder up in the repository.
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]
from lessonkit import Lesson  # noqa: E402


# snippet: kernel
@triton.jit
def scale_kernel(x_ptr, out_ptr, n, factor, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x * factor, mask=mask)
# end snippet


def main() -> int:
    lesson = Lesson("{name}")
    device = lesson.device()
    torch.manual_seed(0)
    n = 1000
    x = torch.rand(n, device=device)
    out = torch.full_like(x, float("nan"))
    scale_kernel[(triton.cdiv(n, 256),)](x, out, n, 2.0, BLOCK=256)
    lesson.check("matches-torch", torch.equal(out, x * 2.0), f"{{n}} elements, bit-exact")
    return lesson.finish()


if __name__ == "__main__":
    sys.exit(main())
'''

LESSON_TOML = '''title = "{title}"
order = {order}{part_line}
main = "{module}.py"
page = "lessons/{name}.md"
summary = "One sentence on what this lesson teaches."
prerequisites = ["vector-add"]

[requires]
capability = "7.0"
triton = "3.0"
why = "plain loads and stores"

[interpreter]
timeout = 120

[gpu]
timeout = 120
'''

PAGE = '''---
lesson: {name}
---

# {title}

::status

::requirements

The story of the lesson, in prose.

::snippet code/{name}/{module}.py kernel

::checks

::benchmarks

::output
'''


def create(name: str, title: str, root: Path = ROOT, part: str = "") -> list[Path]:
    if not VALID.match(name):
        raise SystemExit(f"invalid lesson name {name!r}: use lower-case letters, digits and '-'")
    folder = root / "code" / name
    page = root / "docs" / "lessons" / f"{name}.md"
    for path in (folder, page):
        if path.exists():
            raise SystemExit(f"{path} already exists")
    existing = discover(root / "code")
    order = max((lesson.order for lesson in existing if lesson.order < 999), default=0) + 1
    part_line = f"\npart = {json.dumps(part)}" if part else ""
    values = {"name": name, "title": title, "module": name.replace("-", "_"), "order": order,
              "part_line": part_line}
    folder.mkdir(parents=True)
    written = {
        folder / f"{values['module']}.py": LESSON_PY,
        folder / "lesson.toml": LESSON_TOML,
        page: PAGE,
    }
    for path, template in written.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(template.format(**values), encoding="utf-8")
    return list(written)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="Create a new lesson.")
    parser.add_argument("name", help="lower-case letters, digits and '-', e.g. 'row-sum'")
    parser.add_argument("--title", help="the page title (default: from the name)")
    parser.add_argument("--part", default="", help="the part of the course (a section of the navigation)")
    args = parser.parse_args(argv)
    title = args.title or args.name.replace("-", " ").capitalize()
    for path in create(args.name, title, part=args.part):
        print(f"created {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    print(f"next: python tools/verify.py --lesson {args.name} && mkdocs serve")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
