"""The gluon-attention-backward kernels on a CPU: their walks, arithmetic and rings.

gluon_attention_backward.py's kernels run on a Hopper GPU only (Gluon has no
interpreter). What a CPU can check of them lives here, in plain Python, for
lesson.py's checks and pictures and for the exercises:

* the walks: which query blocks the dK/dV program of a key block visits, and
  which key blocks the dQ program of a query block visits;
* the arithmetic: both kernels' loops in float64, block by block in their
  order, with their masks and their fp16 roundings;
* the rings: each kernel's producer warp and two consumer warpgroups as
  actors of the gluon-basics lesson's mbarrier model (ring_model.py,
  lesson.toml's `uses`), their waits and arrivals in the kernels' order, the
  copies and the products' reads of shared memory completing at random later
  moments.
"""

from __future__ import annotations

import math
import random

import torch
from ring_model import AsyncGroups, MBarrier, Trace, busy, run, run_in_rounds

LOG2E = 1.4426950408889634
WG_ROWS, BLOCK_ROWS = 64, 128  # rows a consumer warpgroup owns, a program owns


# -- The walks ---------------------------------------------------------------


# snippet: visits
def query_blocks(n0: int, seq_len: int, block_m: int, causal: bool) -> range:
    """The dK/dV kernel's _query_blocks: the query blocks that key block n0
    meets (causal: those at or after its first key)."""
    return range(n0 if causal else 0, seq_len, block_m)


def key_blocks(m0: int, seq_len: int, block_n: int, causal: bool) -> range:
    """The dQ kernel's _key_blocks: the key blocks that query block m0 meets
    (causal: up to the one holding its last row)."""
    end = -(-(m0 + BLOCK_ROWS) // block_n) * block_n if causal else seq_len
    return range(0, end, block_n)


# end snippet


def visited(seq_len: int, block_m: int, block_n: int, causal: bool,
            query_blocks=query_blocks, key_blocks=key_blocks):
    """(query row, key) 64 x 64 cells each kernel computes, with counts, by the
    kernels' walks or others."""
    cells = 64
    dkdv, dq = {}, {}
    for n0 in range(0, seq_len, BLOCK_ROWS):
        for m0 in query_blocks(n0, seq_len, block_m, causal):
            for i in range(m0, m0 + block_m, cells):
                for j in range(n0, n0 + BLOCK_ROWS, cells):
                    dkdv[i, j] = dkdv.get((i, j), 0) + 1
    for m0 in range(0, seq_len, BLOCK_ROWS):
        for n0 in key_blocks(m0, seq_len, block_n, causal):
            for i in range(m0, m0 + BLOCK_ROWS, cells):
                for j in range(n0, n0 + block_n, cells):
                    dq[i, j] = dq.get((i, j), 0) + 1
    return dkdv, dq



# -- The arithmetic, in float64 ----------------------------------------------


# snippet: backward-model
def backward_model(q, k, v, do, causal, block_m, block_n, rounded=torch.float64,
                   use_delta=True):
    """dQ, dK, dV of one head, block by block in the kernels' order.

    L and Delta are the forward's statistics per query row. The dK/dV
    program of keys [n0, n0 + 128) runs two warpgroups of 64 keys; each
    walks the query blocks, with P^T and dS^T rounded to `rounded` before
    their products, as the kernel feeds them to wgmma in fp16. The dQ
    program of queries [m0, m0 + 128) walks the key blocks; its dS is
    rounded too. A mask is applied only where a block reaches past the
    diagonal, as in the kernels.
    """
    n, d = q.shape
    sm_scale = 1.0 / math.sqrt(d)
    qk_scale = sm_scale * LOG2E
    idx = torch.arange(n)
    future = idx[None, :] > idx[:, None]  # future[i, j]: key j after query i
    s_all = (q @ k.T) * qk_scale
    if causal:
        s_all = s_all.masked_fill(future, -math.inf)
    lse = torch.logsumexp(s_all / LOG2E, dim=1) * LOG2E  # base 2, as the kernels
    delta = (do * (torch.exp2(s_all - lse[:, None]) @ v)).sum(1)
    if not use_delta:
        delta = torch.zeros_like(delta)

    def r(t):
        return t.to(rounded).to(torch.float64)

    dq, dk, dv = (torch.zeros_like(q) for _ in range(3))
    for n0 in range(0, n, BLOCK_ROWS):  # one dK/dV program per 128 keys
        for key0 in (n0, n0 + WG_ROWS):  # its two consumer warpgroups
            ks, vs = k[key0 : key0 + WG_ROWS], v[key0 : key0 + WG_ROWS]
            for m0 in query_blocks(n0, n, block_m, causal):
                rows = slice(m0, m0 + block_m)
                pT = torch.exp2(ks @ q[rows].T * qk_scale - lse[None, rows])
                if causal and m0 < key0 + WG_ROWS:
                    pT = pT.masked_fill(future[rows, key0 : key0 + WG_ROWS].T, 0.0)
                pT = r(pT)
                dsT = pT * (vs @ do[rows].T - delta[None, rows])
                dv[key0 : key0 + WG_ROWS] += pT @ do[rows]
                dk[key0 : key0 + WG_ROWS] += r(dsT) @ q[rows]
    for m0 in range(0, n, BLOCK_ROWS):  # one dQ program per 128 queries
        for q0 in (m0, m0 + WG_ROWS):
            rows = slice(q0, q0 + WG_ROWS)
            for n0 in key_blocks(m0, n, block_n, causal):
                keys = slice(n0, n0 + block_n)
                p = torch.exp2(q[rows] @ k[keys].T * qk_scale - lse[rows, None])
                if causal and n0 + block_n > q0 + 1:
                    p = p.masked_fill(future[rows, keys], 0.0)
                ds = p * (do[rows] @ v[keys].T - delta[rows, None])
                dq[rows] += r(ds) @ k[keys]
    return dq * sm_scale, dk * sm_scale, dv


# end snippet


# -- The rings: a producer warp, two consumer warpgroups --------------------


class Ring:
    """One program of either kernel: the barrier its resident tiles land on (dK/dV:
    K and V; dQ: Q and dO), a ring of `stages` slots for the two tiles it streams
    (`names`: dK/dV, Q and dO; dQ, K and V), each slot with a `ready` barrier
    (count 1: the producer's expect) and an `empty` one (`empty_count`, 2: both
    warpgroups read every tile), each warpgroup's wgmma groups, and a log of
    what every read of shared memory found."""

    def __init__(self, stages, n_blocks, names, empty_count=2):
        self.stages, self.n_blocks, self.names = stages, n_blocks, names
        self.resident = MBarrier(1)
        self.slots = {name: [None] * stages for name in names}
        self.ready = {name: [MBarrier(1) for _ in range(stages)] for name in names}
        self.empty = {name: [MBarrier(empty_count) for _ in range(stages)]
                      for name in names}
        self.mma = [AsyncGroups(), AsyncGroups()]
        self.events, self.reads = [], []

    def issue(self, wg, product, name, s, block):
        """warpgroup_mma(..., is_async=True): the product reads slot s later."""
        group = self.mma[wg].issue()

        def read():
            self.reads.append((wg, product, block, self.slots[name][s]))
            self.mma[wg].finish(group)

        read.__name__ = f"read {block}"  # for the pictures: whose block it read
        self.events.append(read)

    def read_now(self, wg, what, name, s, block):
        """The threads' own load from slot s (L beside Q, Delta beside dO)."""
        self.reads.append((wg, what, block, self.slots[name][s]))


def producer(ring: Ring):
    """Both kernels' producer warp: the resident tiles once, then the two streamed
    tiles of every block, each on its own barrier, into slot j % stages."""
    ring.resident.expect(1)

    def land():
        ring.resident.landed(1)

    ring.events.append(land)
    for j in range(ring.n_blocks):
        s, lap = j % ring.stages, (j // ring.stages) & 1
        for name in ring.names:
            yield ring.empty[name][s].wait(lap ^ 1)  # a fresh barrier passes parity 1
            ring.ready[name][s].expect(1)

            def land(name=name, s=s, block=j):
                ring.slots[name][s] = block
                ring.ready[name][s].landed(1)

            land.__name__ = f"land {j}"  # for the pictures: which block landed
            ring.events.append(land)


# snippet: dkdv-ring
def dkdv_consumer(ring: Ring, wg: int):
    """_dkdv_consumer's waits, products and arrivals, in its order."""
    mma = ring.mma[wg]
    yield ring.resident.wait(0)  # K and V of this key block
    for j in range(ring.n_blocks):
        s, ph = j % ring.stages, (j // ring.stages) & 1
        yield ring.ready["Q"][s].wait(ph)
        ring.issue(wg, "S^T", "Q", s, j)  # S^T = K Q^T
        yield ring.ready["dO"][s].wait(ph)
        ring.issue(wg, "dP^T", "dO", s, j)  # dP^T = V dO^T, needs no P
        yield mma.wait(1)  # S^T done; dP^T may run on
        ring.read_now(wg, "L", "Q", s, j)
        yield busy("softmax")  # P^T = exp2(S^T * qk_scale - L)
        yield mma.wait(0)  # dP^T done
        ring.read_now(wg, "Delta", "dO", s, j)
        ring.issue(wg, "dV", "dO", s, j)  # dV += P^T dO
        ring.issue(wg, "dK", "Q", s, j)  # dK += dS^T Q
        yield mma.wait(0)  # both retired: the slot's last readers
        ring.empty["dO"][s].arrive()
        ring.empty["Q"][s].arrive()


# end snippet


# snippet: dq-ring
def dq_consumer(ring: Ring, wg: int):
    """_dq_consumer's waits, products and arrivals, in its order."""
    mma = ring.mma[wg]
    yield ring.resident.wait(0)  # Q and dO of this query block
    for j in range(ring.n_blocks):
        s, ph = j % ring.stages, (j // ring.stages) & 1
        yield ring.ready["K"][s].wait(ph)
        ring.issue(wg, "S", "K", s, j)  # S = Q K^T
        yield ring.ready["V"][s].wait(ph)
        ring.issue(wg, "dP", "V", s, j)  # dP = dO V^T
        yield mma.wait(1)  # S done; dP may run on
        yield busy("softmax")  # P = exp2(S * qk_scale - L)
        yield mma.wait(0)  # dP done: V's last reader has retired
        ring.empty["V"][s].arrive()
        ring.issue(wg, "dQ", "K", s, j)  # dQ += dS K reads K once more
        yield mma.wait(0)
        ring.empty["K"][s].arrive()


# end snippet


KERNELS = {"dkdv": (("Q", "dO"), dkdv_consumer), "dq": (("K", "V"), dq_consumer)}


def ring_run(kernel: str, stages: int, n_blocks: int, seed: int, consumer=None,
             empty_count: int = 2) -> Ring:
    """One random schedule of a kernel's program: its producer and two consumers
    (`consumer`, the kernel's unless a check says other). Raises Deadlock when
    the roles get stuck; the ring, with what was read so far, is `.ring` then."""
    names, kernels_consumer = KERNELS[kernel]
    consumer = consumer or kernels_consumer
    ring = Ring(stages, n_blocks, names, empty_count)
    roles = {"producer": producer(ring), "wg0": consumer(ring, 0),
             "wg1": consumer(ring, 1)}
    try:
        run(roles, ring.events, random.Random(seed))
    except Exception as exc:
        exc.ring = ring
        raise
    return ring


def misread(ring: Ring) -> tuple | None:
    """The first read that found another block than its own, as (warpgroup,
    product, its block, what the slot held), or None."""
    return next((r for r in ring.reads if r[2] != r[3]), None)


def reads_expected(kernel: str, n_blocks: int) -> int:
    return 2 * n_blocks * (6 if kernel == "dkdv" else 3)


def traced_ring(kernel: str, stages: int, n_blocks: int) -> Trace:
    """One schedule of a kernel's program in rounds, recorded for a picture."""
    names, consumer = KERNELS[kernel]
    ring = Ring(stages, n_blocks, names)
    watched = {f"{kind}_{name}[{s}]": getattr(ring, kind)[name][s]
               for s in range(stages) for name in names for kind in ("ready", "empty")}
    watched |= {f"wg{w} mma": ring.mma[w] for w in (0, 1)}
    trace = Trace(watched)
    roles = {"producer": producer(ring), "wg0": consumer(ring, 0),
             "wg1": consumer(ring, 1)}
    run_in_rounds(roles, ring.events, trace)
    assert misread(ring) is None and len(ring.reads) == reads_expected(kernel, n_blocks)
    return trace
