"""The lessons converted to the kernels-module structure (issues 49 and 50), in one place.

A converted lesson has a kernels module code/<lesson>/<name_snake>.py that runs alone, a lesson.py (the verified
run, lesson.toml's main), exercises.py and solutions.py checked by code/practice.py, a page ending with its
Practice section, and a notebook that is the tutorial (site/tutorial.py). tests/test_converted.py holds every
lesson listed here to that; the tests of the older notebooks (tests/test_notebooks.py, tests/test_downloads.py)
hold the others. Converting a lesson: add its name here (docs/writing-a-lesson.md, "Converting a lesson"). Once
every lesson is listed, the list and the older notebooks' tests can go.
"""

from __future__ import annotations

CONVERTED = (
    "vector-add",
    "gluon-basics",
    "persistent-tma-matmul",
    "fp8-matmul",
    "block-scaled-matmul",
    "gluon-matmul",
    "dropout",
    "reductions-scans",
    "gelu-libdevice",
    "softmax-fp32-matmul",
    "fp16-matmul",
    "autotune",
    "split-k",
    "grouped-gemm",
    "batched-matmul",
    "layer-norm",
    "rmsnorm-rope",
    "cross-entropy",
    "profiling-debugging",
    "fused-attention",
    "attention-backward",
    "gluon-attention",
    "gluon-attention-backward",
)


def converted(names) -> list[str]:
    return [name for name in names if name in CONVERTED]


def not_converted(names) -> list[str]:
    return [name for name in names if name not in CONVERTED]
