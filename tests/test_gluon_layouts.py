"""The Gluon lessons' layout model against Triton's own layout objects (issue 33).

code/gluon-basics/layout_model.py says which (warp, lane, register) holds
each element of the layouts the three Gluon lessons use; the lessons' CPU
runs draw their ownership pictures from it, so the pictures are only as
true as the model. Here each of its functions is compared, element by
element, with the layout Triton itself computes for the same layout object
(`to_linear_layout`, which the compiler uses to lower the kernel): every
element must have the same owners, duplicates included. Triton 3.9 (the
author environment's pin) runs this without a GPU.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import random
import subprocess
import sys

import pytest

from conftest import REPO

pytestmark = pytest.mark.integration

pytest.importorskip("triton.experimental.gluon.language")

# Triton's side runs in a child process: the layout builder's bindings report leaked objects when
# an interpreter exits normally, so the child ends with os._exit after printing the bases.
LIBRARY = """
import json, os, sys
from triton.experimental.gluon import language as gl
from triton._C.libtriton import gluon_ir, ir
context = ir.context()
ir.load_dialects(context)
builder = gluon_ir.GluonOpBuilder(context)

def layout(spec):
    kind, args = spec
    if kind == "blocked":
        return gl.BlockedLayout(*args)
    if kind == "mma":
        warps, instr_n = args
        return gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[warps, 1], instr_shape=[16, instr_n, 16])
    if kind == "dot":
        parent, k_width = args
        return gl.DotOperandLayout(operand_index=0, parent=layout(parent), k_width=k_width)
    if kind == "slice":
        dim, parent = args
        return gl.SliceLayout(dim, layout(parent))
    raise ValueError(kind)

out = []
for spec, shape in json.load(sys.stdin):
    linear = builder.to_linear_layout(layout(spec)._to_ir(builder), shape)
    out.append([linear.reg_bases, linear.lane_bases, linear.warp_bases])
print(json.dumps(out))
sys.stdout.flush()
os._exit(0)
"""


def _model():
    path = REPO / "code" / "gluon-basics" / "layout_model.py"
    spec = importlib.util.spec_from_file_location("layout_model", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


M = _model()


def library_bases(cases: list) -> list:
    """Triton's linear layout (register, lane and warp bases) of each (layout spec, shape)."""
    run = subprocess.run([sys.executable, "-c", LIBRARY], input=json.dumps(cases), capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout)


def owners_from_bases(bases, shape) -> dict[tuple, set]:
    """{element: {(warp, lane, register), ...}}: bit i of an index, when set, XORs basis i into the element."""
    reg_bases, lane_bases, warp_bases = bases
    table: dict[tuple, set] = {}
    for warp in range(1 << len(warp_bases)):
        for lane in range(1 << len(lane_bases)):
            for reg in range(1 << len(reg_bases)):
                coord = [0] * len(shape)
                for index, basis_list in ((reg, reg_bases), (lane, lane_bases), (warp, warp_bases)):
                    for bit, basis in enumerate(basis_list):
                        if index >> bit & 1:
                            coord = [c ^ x for c, x in zip(coord, basis, strict=True)]
                table.setdefault(tuple(coord), set()).add((warp, lane, reg))
    return table


def model_owners(owner, shape) -> dict[tuple, set]:
    """The same table from a model function owner(coord) -> (warp, lane, register) or a list of them."""
    table = {}
    for coord in itertools.product(*(range(n) for n in shape)):
        got = owner(coord)
        table[coord] = set(got) if isinstance(got, list) else {got}
    return table


def assert_same(bases, shape, owner, what=""):
    want, got = owners_from_bases(bases, shape), model_owners(owner, shape)
    wrong = [c for c in want if got.get(c) != want[c]]
    assert not wrong, (f"{what} on {shape}: {len(wrong)} elements differ, e.g. {wrong[0]}: "
                       f"model {got.get(wrong[0])}, Triton {want[wrong[0]]}")
    assert set(got) == set(want)


# The lessons' own layouts, then others the model claims to cover.
BLOCKED = [
    ([8], [32], [4], [0], [4096]),  # gluon-basics step 1 (4096-element block, 4 warps)
    ([8], [32], [4], [0], [1024]),
    ([8], [32], [8], [0], [8192]),
    ([1, 8], [4, 8], [4, 1], [1, 0], [64, 64]),  # the gluon-attention page's contrast
    ([1, 4], [4, 8], [4, 1], [1, 0], [32, 32]),
    ([2, 1], [8, 4], [1, 4], [0, 1], [64, 32]),
]


def _random_blocked(rng):
    rank = rng.choice([1, 2, 3])
    spt = [1 << rng.randrange(3) for _ in range(rank)]
    tpw, wpc = [1] * rank, [1] * rank
    for _ in range(5):
        tpw[rng.randrange(rank)] *= 2
    for _ in range(rng.randrange(3)):
        wpc[rng.randrange(rank)] *= 2
    order = rng.sample(range(rank), rank)
    # at least one block along every dimension: the model does not cover broadcasting
    shape = [spt[d] * tpw[d] * wpc[d] << rng.randrange(2) for d in range(rank)]
    return spt, tpw, wpc, order, shape


RANDOM_BLOCKED = [_random_blocked(random.Random(seed)) for seed in range(60)]

# (warps, instr N, shape): the matmul's accumulator (8 warps, 128 x 256), the attention's S and O
# accumulators (4 warps, 64 x 128 and 64 x 64 / 64 x 128), and repetitions along N and M.
MMA = [(8, 256, [128, 256]), (4, 128, [64, 128]), (4, 64, [64, 64]), (4, 64, [64, 128]),
       (4, 64, [128, 128]), (4, 256, [64, 256])]
DOT = [(warps, n, shape, k) for warps, n, shape in [(4, 64, [64, 64]), (4, 128, [64, 128]), (8, 128, [128, 64])]
       for k in (1, 2, 4)]
ROWS = [(4, 128, 64), (4, 64, 64), (8, 256, 128), (4, 64, 128)]


@pytest.fixture(scope="module")
def triton_layouts() -> dict:
    """Triton's bases for every case of this file, from one child process."""
    cases = {}
    for spt, tpw, wpc, order, shape in BLOCKED + RANDOM_BLOCKED:
        cases[("blocked", str((spt, tpw, wpc, order, shape)))] = (["blocked", [spt, tpw, wpc, order]], shape)
    for warps, n, shape in MMA:
        cases[("mma", warps, n, str(shape))] = (["mma", [warps, n]], shape)
    for warps, n, shape, k in DOT:
        cases[("dot", warps, n, str(shape), k)] = (["dot", [["mma", [warps, n]], k]], shape)
    for warps, n, rows in ROWS:
        cases[("rows", warps, n, rows)] = (["slice", [1, ["mma", [warps, n]]]], [rows])
    keys = list(cases)
    return dict(zip(keys, library_bases([cases[k] for k in keys]), strict=True))


@pytest.mark.parametrize("spt, tpw, wpc, order, shape", BLOCKED)
def test_blocked_layout_model_is_tritons(triton_layouts, spt, tpw, wpc, order, shape):
    bases = triton_layouts[("blocked", str((spt, tpw, wpc, order, shape)))]
    assert_same(bases, shape, lambda c: M.blocked_owner(c, spt, tpw, wpc, order, shape), f"Blocked{spt, tpw, wpc}")


def test_blocked_layout_model_on_random_layouts(triton_layouts):
    for spt, tpw, wpc, order, shape in RANDOM_BLOCKED:
        bases = triton_layouts[("blocked", str((spt, tpw, wpc, order, shape)))]
        assert_same(bases, shape, lambda c, a=(spt, tpw, wpc, order, shape): M.blocked_owner(c, *a),
                    f"Blocked{spt, tpw, wpc, order}")


@pytest.mark.parametrize("warps, instr_n, shape", MMA)
def test_wgmma_accumulator_model_is_tritons(triton_layouts, warps, instr_n, shape):
    bases = triton_layouts[("mma", warps, instr_n, str(shape))]
    assert_same(bases, shape, lambda c: M.wgmma_acc_owner(*c, shape, warps, instr_n), "NVMMADistributed v3")


@pytest.mark.parametrize("warps, instr_n, shape, k_width", DOT)
def test_dot_operand_model_is_tritons(triton_layouts, warps, instr_n, shape, k_width):
    bases = triton_layouts[("dot", warps, instr_n, str(shape), k_width)]
    assert_same(bases, shape, lambda c: M.dot_a_owner(*c, shape, warps, k_width), f"DotOperand k_width {k_width}")


@pytest.mark.parametrize("warps, instr_n, rows", ROWS)
def test_row_statistic_model_is_tritons(triton_layouts, warps, instr_n, rows):
    bases = triton_layouts[("rows", warps, instr_n, rows)]
    assert_same(bases, [rows], lambda c: M.row_owners(c[0], rows, warps), "SliceLayout(1, accumulator)")


def test_a_wrong_model_is_caught(triton_layouts):
    """The comparison can fail: lanes of a quad swapped in the accumulator model are found."""
    bases = triton_layouts[("mma", 4, 64, str([64, 64]))]

    def swapped(c):
        warp, lane, reg = M.wgmma_acc_owner(*c, [64, 64], 4, 64)
        return warp, lane ^ 1, reg

    with pytest.raises(AssertionError, match="elements differ"):
        assert_same(bases, [64, 64], swapped)
