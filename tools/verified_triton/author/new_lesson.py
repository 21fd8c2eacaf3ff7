"""Create a new lesson that verifies under the interpreter and builds as generated.

    .venv/bin/python tools/new_lesson.py NAME [--title "Title"] [--part "Part of the course"]

Writes code/NAME/ (lesson.toml and the lesson file: a kernel, its checks, a
benchmark against a baseline timed in the same run, one exercise with a
checked solution) and docs/lessons/NAME.md (the page, with the solution in
the site's collapsed block). The lesson joins the navigation by itself: with
--part, at the end of that part (lesson.toml's `after`), else at the end of
the course. It prints the commands that come next.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from verified_triton.core.lessons import LessonError, discover
from verified_triton.core.paths import ROOT
from verified_triton.core.terminal import safe as terminal

# A name the course can find (schema.LESSON_NAME: 64 characters at most), and a module name Python can import.
VALID = re.compile(r"\A(?=.{1,64}\Z)[a-z][a-z0-9]*(?:-[a-z0-9]+)*\Z")

# The lesson file keeps to 88 columns (code/ruff.toml), so no line hides behind a scroll on the page: the
# lines that carry the name have room for the longest one (64 characters, schema.LESSON_NAME), no padding.
LESSON_PY = '''"""{title}.

Replace this paragraph with what the lesson teaches and why: the page tells
the story, this docstring is what a reader of the file sees first.

Run it from this folder:
    python {module}.py
On a CUDA GPU it runs the checks and the benchmark; on any machine, with
TRITON_INTERPRET=1 set, the checks on the CPU.
"""

import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

# lessonkit.py sits beside this file in a download, one folder up in the repository.
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]
from lessonkit import Lesson, bench_interleaved  # noqa: E402


# snippet: kernel
@triton.jit
def scale_kernel(x_ptr, out_ptr, n, factor, BLOCK: tl.constexpr):
    # Program `pid` owns elements [pid * BLOCK, (pid + 1) * BLOCK); the mask
    # switches off the lanes past the end in the last program.
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x * factor, mask=mask)


# end snippet


def scale(x: torch.Tensor, factor: float, block: int = 1024) -> torch.Tensor:
    out = torch.full_like(x, float("nan"))  # poison: an unwritten element cannot pass
    n = x.numel()
    scale_kernel[(triton.cdiv(n, block),)](x, out, n, factor, BLOCK=block)
    return out


def check_correct(lesson: Lesson, device: str) -> None:
    # Sizes that are not multiples of the block, so the mask has work to do.
    # x * 2.0 rounds exactly once, so the result must equal torch's bit for bit.
    torch.manual_seed(0)
    for n in (1, 1000, 5000):
        x = torch.rand(n, device=device)
        ok = torch.equal(scale(x, 2.0), x * 2.0)
        lesson.check(f"matches-torch-n{{n}}", ok, f"{{n}} elements, bit-exact")


def benchmark(lesson: Lesson, device: str) -> None:
    # snippet: benchmark
    # The kernel and its baseline take turns, round after round, in the same
    # run and on the same inputs, so clock drift hits both alike. Each round
    # replays a CUDA graph of each (see "Timing" in docs/writing-a-lesson.md).
    # A smoke run (verify.py --smoke) calls each once on the CPU, on 1000.
    n = lesson.size(gpu=1 << 24, smoke=1000)
    x = torch.rand(n, device=device)
    ms = bench_interleaved({{"triton": lambda: scale(x, 2.0), "torch": lambda: x * 2.0}})
    # end snippet
    lesson.benchmark(
        "scale-vs-torch-2^24-fp32",
        "scale vs torch x * 2.0, 2^24 fp32",
        ms,
        "triton",
        "torch",
        unit="GB/s",
        work=2 * n * x.element_size(),  # one read and one write per element
        baseline_name="torch x * 2.0",
        # threshold=0.9,  # a target the prose states: gates the GPU run (see the guide)
    )


def try_this(lesson: Lesson, device: str) -> None:
    # snippet: solution-negative-factor
    # Exercise: scale by -0.5. Negating and halving are exact in binary
    # floating point, so the result still equals torch's bit for bit.
    x = torch.rand(1000, device=device)
    ok = torch.equal(scale(x, -0.5), x * -0.5)
    # end snippet
    lesson.check("exercise-negative-factor", ok, "factor -0.5, bit-exact")


def main() -> int:
    lesson = Lesson("{name}")
    device = lesson.device()  # "cpu" under the interpreter, "cuda" on a GPU
    with lesson.step("check"):
        check_correct(lesson, device)
    # The interpreter times nothing: the step is recorded as not run there,
    # with the reason (the page and the notebook say so), not silently dropped.
    # A smoke run runs it once on tiny inputs, so a typo fails before a GPU run.
    if lesson.step("benchmark", needs_gpu="the interpreter times nothing"):
        benchmark(lesson, device)
    with lesson.step("exercises"):
        try_this(lesson, device)
    return lesson.finish()


if __name__ == "__main__":
    sys.exit(main())
'''

LESSON_TOML = '''title = "{title}"
{placement}
main = "{module}.py"
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

PAGE = '''---
lesson: {name}
---

# {title}

::status

::requirements

Write the story here: the problem the kernel solves and the one idea the
lesson teaches. Type no measured number: the directives bring them from the
evidence.

## The kernel

::snippet code/{name}/{module}.py kernel

Say what each line does and why.

::step check

## How fast is it?

::snippet code/{name}/{module}.py benchmark

::step benchmark

::benchmarks

## Try this

1. **Scale by a negative factor.** Call `scale(x, -0.5)`. Does the result
   still equal torch's bit for bit?

    ??? success "Solution (checked by the lesson)"

        ::snippet code/{name}/{module}.py solution-negative-factor

        Yes: negating and halving are exact in binary floating point, so
        each element rounds exactly as torch's does.

::step exercises

## What the runs recorded

::checks

::output
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
    values = {"name": name, "title": title, "module": name.replace("-", "_"), "placement": line}
    folder.mkdir(parents=True)
    written = {
        folder / f"{values['module']}.py": LESSON_PY,
        folder / "lesson.toml": LESSON_TOML,
        page: PAGE,
    }
    for path, template in written.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(template.format(**values), encoding="utf-8")
    return list(written), where


NEXT = """
next:
  .venv/bin/python tools/verify.py --lesson {name}      # interpreter run, recorded under evidence/{name}/
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
