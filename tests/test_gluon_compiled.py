"""What the Gluon pages say of the compiled kernels, against the compiled kernels (issue 33).

The pages draw the register split of the warp-specialized kernels from the lessons' budget model
(layout_model.register_split), the matmul's accumulator from the layout model with the kernel's
warps and instruction shape, and say that P's conversion into wgmma's A operand moves nothing
while a conversion to a BlockedLayout does. tests/gluon_compile_probe.py compiles the lessons'
own kernels for sm_90 on this CPU (Triton 3.9, the author environment's pin; the lessons run 3.6
on the GPU, so only robust facts are compared: launch limits, setmaxnreg targets, layout
parameters, whether a conversion touches shared memory).
"""

from __future__ import annotations

import ast
import importlib.util
import json
import subprocess
import sys

import pytest

from conftest import REPO, once_per_run

pytestmark = pytest.mark.integration

pytest.importorskip("triton.experimental.gluon")


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MODEL = _load(REPO / "code" / "gluon-basics" / "layout_model.py", "layout_model")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> dict:
    """What the compiler made of the probe's kernels, once per test run."""
    def make() -> dict:
        run = subprocess.run([sys.executable, str(REPO / "tests" / "gluon_compile_probe.py")], capture_output=True,
                             text=True, timeout=600, cwd=REPO)
        assert run.returncode == 0, run.stderr[-3000:]
        return json.loads(run.stdout)

    return once_per_run(tmp_path_factory, "gluon_compiled", make)


@pytest.mark.parametrize("kernel, default_warps, workers", [
    ("matmul producer 24", 8, [(1, 24)]),
    ("matmul producer 40", 8, [(1, 40)]),  # the matmul page's exercise 3
    ("copy ws", 4, [(1, 24)]),
])
def test_the_register_split_is_what_the_compiler_hands_out(compiled, kernel, default_warps, workers):
    split = MODEL.register_split(default_warps, workers)
    facts = compiled[kernel]
    assert facts["launch"] == [split["launch"]]
    assert {split["default"], *split["workers"]} <= set(facts["setmaxnreg"]), (split, facts["setmaxnreg"])


def test_the_attention_budget_fits_three_warpgroups(compiled):
    """Two consumer warpgroups at 240 and the producer's at 24: the launch limit of 3 warpgroups."""
    split = MODEL.register_split(4, [(4, 240), (1, 24)])
    assert compiled["attention"]["launch"] == [split["launch"]]
    assert {240, 24} <= set(compiled["attention"]["setmaxnreg"])


@pytest.mark.parametrize("kernel", ["backward dkdv", "backward dq"])
def test_the_backward_kernels_compile_to_the_forwards_budget(compiled, kernel):
    """The backward's kernels (Triton 3.9 here, 3.6 on the GPU) split registers as the forward does, and
    their accumulators are wgmma layouts of 4 warps: 64 x 64 scores (S^T, dP^T or S, dP) beside 64 x 128
    gradients at D = 128, the lesson's 64-row streamed blocks."""
    split = MODEL.register_split(4, [(4, 240), (1, 24)])
    assert compiled[kernel]["launch"] == [split["launch"]]
    assert {240, 24} <= set(compiled[kernel]["setmaxnreg"])
    assert compiled[kernel]["mma"] == [["4", "1", "16", "128"], ["4", "1", "16", "64"]]


def constants(path) -> dict:
    """The module-level constants of a lesson file, read without running it."""
    tree = ast.parse(path.read_text())
    return {target.id: ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.Assign)
            for target in node.targets if isinstance(target, ast.Name)
            and isinstance(node.value, (ast.Constant, ast.Tuple))}


def test_the_pictured_layouts_are_the_compiled_ones(compiled):
    """The matmul page draws its accumulator with the lesson's BLOCK and CONSUMER_WARPS: lesson.py's, which
    the CPU half draws with (it never imports Gluon), the same as the kernels module launches."""
    matmul = constants(REPO / "code" / "gluon-matmul" / "gluon_matmul.py")
    drawn = constants(REPO / "code" / "gluon-matmul" / "lesson.py")
    assert {k: drawn[k] for k in ("BLOCK", "CONSUMER_WARPS", "PRODUCER_REGS")} == \
        {k: matmul[k] for k in ("BLOCK", "CONSUMER_WARPS", "PRODUCER_REGS")}
    bm, bn, _ = matmul["BLOCK"]
    warps = matmul["CONSUMER_WARPS"]
    assert compiled["matmul producer 24"]["mma"] == [[str(warps), "1", "16", str(bn)]]
    assert bm == 16 * warps  # every warp owns 16 rows of the tile
    assert compiled["attention"]["mma"] == [["4", "1", "16", "128"]]


def test_a_conversion_is_free_exactly_where_the_model_says_no_element_moves(compiled):
    shape = (64, 128)
    cells = [(r, c) for r in range(shape[0]) for c in range(shape[1])]

    def moved(owner):
        return sum(MODEL.wgmma_acc_owner(r, c, shape, 4, 128)[:2] != owner(r, c)[:2] for r, c in cells)

    assert moved(lambda r, c: MODEL.dot_a_owner(r, c, shape, 4, 2)) == 0
    assert compiled["P to operand"]["shared"] == 0 and compiled["P to operand"]["moves"] == 0
    assert compiled["same layout"]["moves"] == 0
    assert moved(lambda r, c: MODEL.blocked_owner((r, c), [1, 8], [4, 8], [4, 1], [1, 0], shape)) > 0
    assert compiled["P to blocked"]["shared"] > 0 and compiled["P to blocked"]["moves"] > 0
