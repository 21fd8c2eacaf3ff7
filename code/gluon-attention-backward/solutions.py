"""Gluon attention backward: the answers to exercises.py, and the mistakes caught.

    TRITON_INTERPRET=1 python exercises.py --solutions   # these answers pass
"""

import sys
from pathlib import Path

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

HERE = Path(__file__).resolve().parent
sys.path += [str(HERE.parent), str(HERE.parent / "gluon-basics")]
from ring_model import busy  # noqa: E402

from practice import Mistake  # noqa: E402


# snippet: walks
def query_blocks(n0, seq_len, block_m, causal):
    # Causal: query i sees key j only when j <= i, so the queries before the
    # block's first key see none of its keys.
    return range(n0 if causal else 0, seq_len, block_m)


def key_blocks(m0, seq_len, block_n, causal):
    # Causal: up to the key block that holds the program's last query row.
    end = -(-(m0 + 128) // block_n) * block_n if causal else seq_len
    return range(0, end, block_n)


# end snippet


# snippet: dkdv-step
def dkdv_step(k, v, q, do, lse, delta, qk_scale):
    pT = torch.exp2(k @ q.T * qk_scale - lse[None, :])
    dpT = v @ do.T  # dP^T = V dO^T
    dsT = pT * (dpT - delta[None, :])  # Delta is per query: along the columns
    return pT @ do, dsT @ q


# end snippet


# snippet: dq-release
def dq_consumer(ring, wg):
    mma = ring.mma[wg]
    yield ring.resident.wait(0)  # Q and dO of this query block
    for j in range(ring.n_blocks):
        s = j % ring.stages
        ph = (j // ring.stages) & 1  # the lap's parity: it flips every lap
        yield ring.ready["K"][s].wait(ph)
        ring.issue(wg, "S", "K", s, j)  # S = Q K^T
        yield ring.ready["V"][s].wait(ph)
        ring.issue(wg, "dP", "V", s, j)  # dP = dO V^T
        yield mma.wait(1)  # S done; dP may run on
        yield busy("softmax")
        yield mma.wait(0)  # dP done
        ring.empty["V"][s].arrive()  # dP was V's last reader
        ring.issue(wg, "dQ", "K", s, j)  # dQ += dS K
        yield mma.wait(0)
        ring.empty["K"][s].arrive()  # dQ was K's last reader


# end snippet


# snippet: delta-gluon
@gluon.jit
def delta_kernel(Out, DO, Delta, seq_len, D: gl.constexpr, BLOCK_M: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [gl.num_warps(), 1], [1, 0])
    offs_m = gl.program_id(0) * BLOCK_M + gl.arange(
        0, BLOCK_M, layout=gl.SliceLayout(1, layout))
    offs_d = gl.arange(0, D, layout=gl.SliceLayout(0, layout))
    rows = offs_m < seq_len
    ptrs = offs_m[:, None] * D + offs_d[None, :]
    o = gl.load(Out + ptrs, mask=rows[:, None], other=0.0)
    do = gl.load(DO + ptrs, mask=rows[:, None], other=0.0)
    delta = gl.sum(o.to(gl.float32) * do.to(gl.float32), axis=1)  # a row: SliceLayout
    gl.store(Delta + offs_m, delta, mask=rows)


# end snippet


# Each mistake is an edit of this file's text; the check must fail it and say `says`.
MISTAKES = {
    "walks": [
        Mistake("dK/dV's causal walk from the first query block",
                find="range(n0 if causal else 0, seq_len, block_m)",
                replace="range(0, seq_len, block_m)", says="wholly in the future"),
        Mistake("dQ's causal walk one block short",
                find="end = -(-(m0 + 128) // block_n) * block_n if causal",
                replace="end = m0 if causal", says="never computes"),
        Mistake("dK/dV's causal walk one block late",
                find="range(n0 if causal else 0, seq_len, block_m)",
                replace="range(n0 + block_m if causal else 0, seq_len, block_m)",
                says="never computes"),
    ],
    "dkdv-step": [
        Mistake("no Delta", find="dsT = pT * (dpT - delta[None, :])",
                replace="dsT = pT * dpT", says="wrong at"),
        Mistake("Delta along the keys", find="dsT = pT * (dpT - delta[None, :])",
                replace="dsT = pT * (dpT - delta[:, None])", says="wrong at"),
        Mistake("dV from P, not P^T", find="return pT @ do, dsT @ q",
                replace="return pT.T @ do, dsT @ q", says="wrong at"),
    ],
    "dq-release": [
        Mistake("a phase never flipped", find="ph = (j // ring.stages) & 1",
                replace="ph = 0", says="read another block"),
        Mistake("K given back before dQ has read it",
                find='ring.issue(wg, "dQ", "K", s, j)  # dQ += dS K\n'
                     '        yield mma.wait(0)\n'
                     '        ring.empty["K"][s].arrive()',
                replace='ring.empty["K"][s].arrive()\n'
                        '        ring.issue(wg, "dQ", "K", s, j)  # dQ += dS K\n'
                        '        yield mma.wait(0)',
                says="read another block"),
        Mistake("V never given back",
                find='ring.empty["V"][s].arrive()  # dP was', replace="pass  # dP was",
                says="deadlock"),
    ],
    "delta-gluon": [
        Mistake("the store without its mask", find="gl.store(Delta + offs_m, delta, "
                "mask=rows)", replace="gl.store(Delta + offs_m, delta)",
                says="wrote past the end"),
        Mistake("an FP16 accumulator",
                find="gl.sum(o.to(gl.float32) * do.to(gl.float32), axis=1)",
                replace="gl.sum(o * do, axis=1)", says="wrong at"),
    ],
}
