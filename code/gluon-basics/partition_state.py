"""What compute-sanitizer's racecheck reports in a warp-specialized Gluon kernel.

Under racecheck (compute-sanitizer 2025.3.1, the H200's), every
warp-specialized kernel of the course shows the same "RAW hazard": a store at
the kernel's `def` line or its `gl.warp_specialize(...)` line, and a load at
the kernel's entry, also reported on its `def` line. Neither is the lesson's
code. Triton lowers `warp_specialize` to a small protocol of its own: the
default warpgroup writes, in shared memory, which partition each worker warp
runs next (and, at the end, "exit"); the worker warps sit in a dispatch loop
that reads their byte of that word. In the compiled code (PTX, sm_90, Triton
3.6) each write is followed, and each read preceded, by `barrier.sync 1`, a
barrier of the whole CTA: the accesses are ordered, and racecheck does not
pair that barrier with them. The lessons' own shared buffers (the rings, the
tiles, the mbarriers) are reported nowhere.

`declare(lesson, path, kernel)` tells the memory check so, naming exactly
those two lines: a hazard anywhere else, in the lesson's partitions included,
stays undeclared and keeps the lesson from VERIFIED.
"""

import ast
from pathlib import Path

WHY = (
    "Triton's warp_specialize lowering: the default warpgroup writes each worker "
    "warp's partition-state word in shared memory and the workers read it in "
    "their dispatch loop; barrier.sync 1 (a CTA-wide barrier) follows every "
    "write and precedes every read in the compiled PTX, which racecheck "
    "2025.3.1 does not pair with the accesses"
)


def lines(path: Path, kernel: str) -> tuple[int, int]:
    """The `def` line of `kernel` in `path` and the line of its warp_specialize call."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == kernel:
            for call in ast.walk(node):
                if (
                    isinstance(call, ast.Call)
                    and isinstance(call.func, ast.Attribute)
                    and call.func.attr == "warp_specialize"
                ):
                    return node.lineno, call.lineno
    raise ValueError(f"{path.name}: no kernel {kernel} calling gl.warp_specialize")


def declare(lesson, path: Path, kernel: str) -> None:
    """lesson.sanitizer_known for the partition-state accesses of `kernel`,
    defined in `path`, a file in the lesson's folder."""
    define, call = lines(path, kernel)
    where = [f"{path.name}:{define}", f"{path.name}:{call}"]
    lesson.sanitizer_known("racecheck", kernel, where, WHY)
