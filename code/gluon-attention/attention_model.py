"""The gluon-attention kernel on a CPU: its arithmetic, its schedule, its protocol.

gluon_attention.py's kernel runs on a Hopper GPU only (Gluon has no
interpreter). What a CPU can check of it lives here, in plain Python, for
lesson.py's checks and pictures and for the exercises:

* the consumers' online softmax in the kernel's order of operations (the
  rescale and the product one block behind, the mask on the diagonal blocks
  only), in float64 against the definition;
* the program schedule: which (query block, head) tile each step of a
  persistent program's walk computes;
* the protocol: the producer warp and the two consumer warpgroups as actors
  of the gluon-basics lesson's mbarrier model (ring_model.py, lesson.toml's
  `uses`), their waits and arrivals in the kernel's order, the copies and the
  products' reads of shared memory completing at random later moments.
"""

from __future__ import annotations

import math
import random

import torch
from ring_model import AsyncGroups, MBarrier, Trace, busy, run, run_in_rounds

LOG2E = 1.4426950408889634
WG_ROWS, BLOCK_M = 64, 128  # rows a consumer warpgroup owns, a program owns


def reference(q, k, v, causal: bool):
    """The definition in float64: the S x S matrix, materialised."""
    q, k, v = (t.to(torch.float64) for t in (q, k, v))
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if causal:
        n = q.shape[-2]
        scores = scores.masked_fill(
            torch.ones(n, n, dtype=torch.bool).triu(1).to(q.device), float("-inf")
        )
    return torch.softmax(scores, dim=-1) @ v



# -- The kernel's arithmetic, in float64 -----------------------------------------------


# snippet: softmax-model
def pipelined_rows(q, k, v, causal, m0, block_n, p_dtype=torch.float64):
    """One warpgroup's rows [m0, m0 + 64) in the kernel's order of operations.

    Iteration j: (maybe) mask S_j, new running max (of the raw scores, then
    scaled), alpha, P_j = exp2(S_j * scale - max), running sum; *then*
    O = O * alpha_{j-1} + P_{j-1} V_{j-1}, one block behind, as the kernel
    issues it. P is rounded to p_dtype before its
    product, as the kernel feeds it to wgmma in fp16.
    """
    d = q.shape[-1]
    qk_scale = LOG2E / math.sqrt(d)
    rows = torch.arange(m0, m0 + WG_ROWS, dtype=torch.float64)
    n_kv = (
        -(-min(m0 - m0 % BLOCK_M + BLOCK_M, q.shape[0]) // block_n)
        if causal
        else -(-k.shape[0] // block_n)
    )
    m = torch.full((WG_ROWS,), -math.inf, dtype=torch.float64)
    l_sum = torch.zeros(WG_ROWS, dtype=torch.float64)
    o = torch.zeros(WG_ROWS, d, dtype=torch.float64)
    p_prev = v_prev = alpha_prev = None
    for j in range(n_kv):
        kj, vj = k[j * block_n : (j + 1) * block_n], v[j * block_n : (j + 1) * block_n]
        s = q[m0 : m0 + WG_ROWS] @ kj.T
        if (
            causal and (j + 1) * block_n > m0
        ):  # only blocks that reach past the first row
            cols = torch.arange(j * block_n, (j + 1) * block_n, dtype=torch.float64)
            s = s.masked_fill(rows[:, None] < cols[None, :], -math.inf)
        m_new = torch.maximum(m, s.max(dim=1).values * qk_scale)
        alpha = torch.exp2(m - m_new)
        p = torch.exp2(s * qk_scale - m_new[:, None])
        l_sum = l_sum * alpha + p.sum(dim=1)
        m = m_new
        if p_prev is not None:  # the product one block behind
            o = o * alpha_prev[:, None] + p_prev.to(p_dtype).to(torch.float64) @ v_prev
        p_prev, v_prev, alpha_prev = p, vj, alpha
    o = o * alpha_prev[:, None] + p_prev.to(p_dtype).to(torch.float64) @ v_prev
    return o / l_sum[:, None]


# end snippet


# -- The program schedule --------------------------------------------------------------


# snippet: schedule-model
def tile(t: int, n_q: int, heads: int, group: int, causal: bool) -> tuple[int, int]:
    """The kernel's _tile: tile t -> (query block, batch * head)."""
    per_group = group * n_q
    g, r = divmod(t, per_group)
    heads_here = min(heads - g * group, group)
    bh, q_block = g * group + r % heads_here, r // heads_here
    return (n_q - 1 - q_block if causal else q_block), bh


def walk(pid: int, programs: int, n_tiles: int) -> range:
    """The tiles program `pid` of `programs` computes, in order."""
    return range(pid, n_tiles, programs)


# end snippet


def causal_balance(n_q: int, heads: int, group: int, programs: int,
                   tile=tile) -> float:
    """The longest walk's work over the mean (a tile's work: its key blocks), with
    the kernel's tile order or another one."""
    n_tiles = n_q * heads
    work = [
        sum(tile(t, n_q, heads, group, True)[0] + 1 for t in walk(p, programs, n_tiles))
        for p in range(programs)
    ]
    return max(work) / (sum(work) / programs)


# -- The protocol: producer, two consumers, ping-pong ----------------------------------


# The mbarrier, the wgmma groups and the random scheduler are the gluon-basics
# lesson's (ring_model.py); the protocol is this kernel's.


def turn_parity(c: int, wg: int) -> int:
    """The parity warpgroup `wg` waits on for its turn at key block c (counted over
    the walk), as the kernel's consumer does."""
    return (c & 1) ^ wg ^ 1


class Protocol:
    """Shared state of one program: Q, the K and V rings, the barriers, a log.

    `n_kv` is a tile's number of key blocks, or a list of them: the tiles one
    persistent program walks, the ring and the turns carrying on across them.
    `empty_count` and `turn_parity` are the kernel's unless a check says other."""

    def __init__(self, stages, n_kv, empty_count=2, turn_parity=turn_parity):
        self.stages, self.turn_parity = stages, turn_parity
        self.tiles = [n_kv] if isinstance(n_kv, int) else list(n_kv)
        self.q, self.k, self.v = None, [None] * stages, [None] * stages
        self.q_bar, self.q_empty = MBarrier(1), MBarrier(2)
        self.k_ready, self.v_ready = (
            [MBarrier(1) for _ in range(stages)] for _ in range(2)
        )
        self.k_empty, self.v_empty = (
            [MBarrier(empty_count) for _ in range(stages)] for _ in range(2)
        )
        self.turn = [MBarrier(1), MBarrier(1)]
        self.mma = [AsyncGroups(), AsyncGroups()]  # each warpgroup's wgmma groups
        self.events, self.issues, self.reads = [], [], []

    @property
    def n_kv(self) -> int:
        return sum(self.tiles)


# snippet: protocol-model
def producer(pr: Protocol):
    c = 0  # key blocks loaded over the whole walk: the slot and the lap
    for t, n_kv in enumerate(pr.tiles):
        yield pr.q_empty.wait((t & 1) ^ 1)  # both warpgroups done with the last Q
        pr.q_bar.expect(1)

        def land_q(t=t):
            pr.q = t
            pr.q_bar.landed(1)

        pr.events.append(land_q)
        for j in range(n_kv):
            s, lap = c % pr.stages, (c // pr.stages) & 1
            for ring, ready, empty in (
                (pr.k, pr.k_ready, pr.k_empty),
                (pr.v, pr.v_ready, pr.v_empty),
            ):
                yield empty[s].wait(lap ^ 1)
                ready[s].expect(1)

                def land(ring=ring, bar=ready[s], s=s, block=(t, j)):
                    ring[s] = block
                    bar.landed(1)

                pr.events.append(land)
            c += 1


def consumer(pr: Protocol, wg: int, pingpong: bool):
    """The kernel's _consumer, its waits and arrivals in order; each wgmma
    reads its shared-memory operands at some later moment (an event)."""
    mma = pr.mma[wg]

    def issue(ring, s, what, block):  # warpgroup_mma(..., is_async=True)
        group = mma.issue()

        def read():  # what the product found in shared memory (Q too, for S)
            pr.reads.append((wg, what, block, ring[s], pr.q if what == "K" else None))
            mma.finish(group)

        pr.events.append(read)

    c0 = 0  # key blocks consumed over the walk: slot, phase and turn
    for t, n_kv in enumerate(pr.tiles):
        yield pr.q_bar.wait(t & 1)
        for j in range(n_kv + 1):  # j = n_kv: the last P V alone
            c = c0 + j
            sj, sp = c % pr.stages, (c - 1) % pr.stages
            if j < n_kv:
                if pingpong:  # my turn at the tensor cores
                    yield pr.turn[wg].wait(pr.turn_parity(c, wg))
                yield pr.k_ready[sj].wait((c // pr.stages) & 1)
                issue(pr.k, sj, "K", (t, j))
                pr.issues.append(wg)
            if j > 0:
                yield pr.v_ready[sp].wait(((c - 1) // pr.stages) & 1)
                issue(pr.v, sp, "V", (t, j - 1))
            if j < n_kv:
                if pingpong:
                    pr.turn[1 - wg].arrive()
                yield mma.wait(1 if j > 0 else 0)  # S_j done; P_{j-1} V_{j-1} may run
                pr.k_empty[sj].arrive()
                yield busy("softmax")  # of block j; P_{j-1} V_{j-1} may run on
            if j > 0:
                yield mma.wait(0)
                pr.v_empty[sp].arrive()
            if j == n_kv - 1:  # the tile's last Q K^T is done: Q may be replaced
                pr.q_empty.arrive()
        c0 += n_kv


# end snippet


def protocol_run(
    stages, n_kv, seed, pingpong=True, empty_count=2, parity=turn_parity
) -> Protocol:
    """One random schedule of the producer and both consumers; Deadlock if the
    roles get stuck."""
    pr = Protocol(stages, n_kv, empty_count, parity)
    run(
        {
            "producer": producer(pr),
            "wg0": consumer(pr, 0, pingpong),
            "wg1": consumer(pr, 1, pingpong),
        },
        pr.events,
        random.Random(seed),
    )
    return pr


def operands_right(pr: Protocol) -> bool:
    """Every product read its own K or V block, and every S its own tile's Q."""
    blocks = [(t, j) for t, n in enumerate(pr.tiles) for j in range(n)]
    want = sorted(
        (wg, what, b, b, b[0] if what == "K" else None)
        for wg in (0, 1)
        for what in "KV"
        for b in blocks
    )
    return sorted(pr.reads) == want


def traced_protocol(stages: int, n_kv: int, watched=("k", "v", "turn", "mma")):
    """One schedule of the ping-pong protocol in rounds, recorded for a picture:
    (the trace, the protocol). `watched`: which barriers and groups it records."""
    pr = Protocol(stages, n_kv)
    named = {}
    for s in range(stages):
        for ring in ("k", "v"):
            if ring in watched:
                named[f"{ring}_ready[{s}]"] = getattr(pr, f"{ring}_ready")[s]
                named[f"{ring}_empty[{s}]"] = getattr(pr, f"{ring}_empty")[s]
    if "turn" in watched:
        named |= {f"turn[{w}]": pr.turn[w] for w in (0, 1)}
    if "mma" in watched:
        named |= {f"wg{w} mma": pr.mma[w] for w in (0, 1)}
    trace = Trace(named)
    roles = {"producer": producer(pr), "wg0": consumer(pr, 0, True),
             "wg1": consumer(pr, 1, True)}
    run_in_rounds(roles, pr.events, trace)
    assert operands_right(pr) and pr.issues == [0, 1] * n_kv, "the pictured schedule"
    return trace, pr
