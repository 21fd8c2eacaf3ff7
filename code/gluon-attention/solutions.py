"""Gluon attention: the answers to exercises.py, and the mistakes its checks catch.

    TRITON_INTERPRET=1 python exercises.py --solutions   # these answers pass
"""

import math
import sys
from pathlib import Path

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

sys.path.append(str(Path(__file__).resolve().parent.parent))  # practice.py, in the repo
from practice import Mistake  # noqa: E402


# snippet: pipelined-softmax
def pipelined_softmax(s_blocks, v_blocks, qk_scale):
    rows, d = s_blocks[0].shape[0], v_blocks[0].shape[1]
    m = torch.full((rows,), -math.inf, dtype=torch.float64)
    l_sum = torch.zeros(rows, dtype=torch.float64)
    o = torch.zeros(rows, d, dtype=torch.float64)
    p_prev = v_prev = alpha_prev = None
    for s, v in zip(s_blocks, v_blocks, strict=True):
        m_new = torch.maximum(m, s.max(dim=1).values * qk_scale)
        alpha = torch.exp2(m - m_new)  # rescales what was summed under the old max
        p = torch.exp2(s * qk_scale - m_new[:, None])  # every exponent <= 0
        l_sum = l_sum * alpha + p.sum(dim=1)
        m = m_new
        if p_prev is not None:  # the product one block behind, under its own alpha
            o = o * alpha_prev[:, None] + p_prev @ v_prev
        p_prev, v_prev, alpha_prev = p, v, alpha
    o = o * alpha_prev[:, None] + p_prev @ v_prev  # the last block's product, alone
    return o / l_sum[:, None]


# end snippet


# snippet: turn-parity
def turn_parity(c, wg):
    # wg0: parity 1 first, which a fresh barrier passes at once; wg1: parity 0,
    # which waits for wg0's first arrival. Each turn completes one phase.
    return (c & 1) ^ wg ^ 1


# end snippet


# snippet: tile-order
def tile(t, n_q, heads, group, causal):
    per_group = group * n_q
    g, r = divmod(t, per_group)
    heads_here = min(heads - g * group, group)  # the last group may hold fewer
    head, q_block = g * group + r % heads_here, r // heads_here
    return (n_q - 1 - q_block if causal else q_block), head


# end snippet


# snippet: row-softmax
@gluon.jit
def row_softmax_kernel(S, P, qk_scale, ROWS: gl.constexpr, COLS: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1, 4], [4, 8], [gl.num_warps(), 1], [1, 0])
    rows = gl.arange(0, ROWS, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, COLS, layout=gl.SliceLayout(0, layout))
    offs = rows[:, None] * COLS + cols[None, :]
    s = gl.load(S + offs)
    m = gl.max(s, axis=1) * qk_scale  # SliceLayout(1, layout): one value per row
    p = gl.exp2(s * qk_scale - m[:, None])
    gl.store(P + offs, p)


# end snippet


# Each mistake is an edit of this file's text; the check must fail it and say `says`.
MISTAKES = {
    "pipelined-softmax": [
        Mistake("no max subtraction",
                find="p = torch.exp2(s * qk_scale - m_new[:, None])",
                replace="p = torch.exp2(s * qk_scale)", says="computed NaN or inf"),
        Mistake("this block's alpha on the product behind",
                find="            o = o * alpha_prev[:, None] + p_prev @ v_prev",
                replace="            o = o * alpha[:, None] + p_prev @ v_prev",
                says="wrong at"),
        Mistake("the last block's product forgotten",
                find="    o = o * alpha_prev[:, None] + p_prev @ v_prev  # the last",
                replace="    o = o  # the last", says="wrong at"),
    ],
    "turn-parity": [
        Mistake("warpgroup 0's parity for both", find="return (c & 1) ^ wg ^ 1",
                replace="return (c & 1) ^ 1", says="deadlock"),
        Mistake("a parity never flipped", find="return (c & 1) ^ wg ^ 1",
                replace="return wg ^ 1", says="deadlock"),
        Mistake("the first turn to warpgroup 1", find="return (c & 1) ^ wg ^ 1",
                replace="return (c & 1) ^ wg", says="out of turn"),
    ],
    "tile-order": [
        Mistake("causal blocks not reversed",
                find="return (n_q - 1 - q_block if causal else q_block), head",
                replace="return q_block, head", says="longer"),
        Mistake("the last group's heads not clamped",
                find="heads_here = min(heads - g * group, group)",
                replace="heads_here = group", says="never computed"),
    ],
    "row-softmax": [
        Mistake("no max subtraction", find="p = gl.exp2(s * qk_scale - m[:, None])",
                replace="p = gl.exp2(s * qk_scale)", says="computed NaN or inf"),
        Mistake("the max of the unscaled scores",
                find="m = gl.max(s, axis=1) * qk_scale",
                replace="m = gl.max(s, axis=1)", says="wrong at"),
    ],
}
