"""Gluon attention backward: exercises. Fill in each "Your code here", then check them:

    TRITON_INTERPRET=1 python exercises.py   # any CPU: the models' exercises
    python exercises.py                      # a Hopper GPU: the Gluon one too

The first three run on backward_model.py, the CPU model of the kernels: their
walks over the tiles, their arithmetic in float64, the dQ kernel's ring under
many random schedules. The Gluon exercise needs a GPU (Gluon has no
interpreter) and says so elsewhere. Each prints one line: passed, or what is
wrong and a hint. --only NAME checks one; --solutions checks solutions.py.
"""

import math
import sys
from pathlib import Path

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

# practice.py one folder up and gluon-basics' ring_model.py (lesson.toml's `uses`)
# in its folder, in the repo; beside this file in a download.
HERE = Path(__file__).resolve().parent
sys.path += [str(HERE.parent), str(HERE.parent / "gluon-basics")]
from backward_model import BLOCK_ROWS, misread, reads_expected, ring_run, visited  # noqa: E402
from ring_model import Deadlock, busy  # noqa: E402

import practice  # noqa: E402

SEEDS = 30  # random schedules per configuration
LOG2E = 1.4426950408889634


# snippet: walks
def query_blocks(n0, seq_len, block_m, causal):
    """The dK/dV kernel's walk: the first rows of the query blocks (of block_m
    rows) that the program of keys [n0, n0 + 128) visits, in order."""
    return range(0, seq_len, block_m)  # Your code here


def key_blocks(m0, seq_len, block_n, causal):
    """The dQ kernel's walk: the first keys of the key blocks (of block_n keys)
    that the program of queries [m0, m0 + 128) visits, in order."""
    return range(0, seq_len, block_n)  # Your code here


# end snippet


def cells(found):
    (i, j), *_ = sorted(found)
    return f"{len(found)} cells (the first, queries {i}-{i + 63} x keys {j}-{j + 63})"


# snippet: check-walks
@practice.exercise("walks", hint="causal: query i sees keys j <= i. The dK/dV program "
                   "of keys from n0 needs the query blocks from n0 on; the dQ program "
                   "of queries [m0, m0 + 128) needs the key blocks up to the one "
                   "holding its last row: range(0, ceil((m0 + 128) / block_n) * "
                   "block_n, block_n)")
def check_walks(m):
    for n, block in ((1024, 128), (1024, 64), (384, 128)):
        for causal in (False, True):
            case = f"S = {n}, blocks of {block}" + (", causal" if causal else "")
            walks = visited(n, block, block, causal, m.query_blocks, m.key_blocks)
            needed = {(i, j) for i in range(0, n, 64) for j in range(0, n, 64)
                      if not causal or j <= i + 63}
            for kernel, done in zip(("dK/dV", "dQ"), walks, strict=True):
                missing = needed - set(done)
                twice = {c for c, times in done.items() if times > 1}
                future = set(done) - needed
                if missing:
                    raise practice.Wrong(f"{case}: the {kernel} walk never computes "
                                         f"{cells(missing)} it needs")
                if twice:
                    raise practice.Wrong(f"{case}: the {kernel} walk computes "
                                         f"{cells(twice)} twice")
                if len(future) > n // BLOCK_ROWS * 2:
                    raise practice.Wrong(f"{case}: the {kernel} walk computes "
                                         f"{cells(future)} wholly in the future, "
                                         "which the mask then throws away")


# end snippet


# snippet: dkdv-step
def dkdv_step(k, v, q, do, lse, delta, qk_scale):
    """One step of a dK/dV consumer warpgroup, in float64: its 64 keys (k, v)
    against one query block (q, do, and the rows' L and Delta).

    The tiles are transposed, keys along the rows: S^T = K Q^T, and P^T =
    exp2(S^T * qk_scale - L), L along the columns (one per query). Return this
    block's terms of dV and of dK (before the scale): P^T dO and dS^T Q.
    """
    pT = torch.exp2(k @ q.T * qk_scale - lse[None, :])  # noqa: F841 - yours to use
    return torch.zeros_like(v), torch.zeros_like(k)  # Your code here


# end snippet


# snippet: check-dkdv-step
@practice.exercise("dkdv-step", hint="dPᵀ = V dOᵀ; dSᵀ = Pᵀ * (dPᵀ - Delta), "
                   "Delta along the columns (delta[None, :]: one per query); return "
                   "(Pᵀ @ dO, dSᵀ @ Q)")
def check_dkdv_step(m):
    torch.manual_seed(0)
    n, d = 64, 32  # one query block of 64 against 64 keys: square tiles
    q, k, v, do = (torch.randn(n, d, dtype=torch.float64) for _ in range(4))
    sm_scale = 1.0 / math.sqrt(d)
    s = q @ k.T * sm_scale
    lse = torch.logsumexp(s, dim=1) * LOG2E  # base 2, as the kernels keep L
    p = torch.softmax(s, dim=1)
    delta = (do * (p @ v)).sum(1)
    qt, kt, vt = (t.clone().requires_grad_() for t in (q, k, v))
    (torch.softmax(qt @ kt.T * sm_scale, dim=1) @ vt).backward(do)
    dv, dk = m.dkdv_step(k, v, q, do, lse, delta, sm_scale * LOG2E)
    case = "64 queries x 64 keys, D = 32, float64"
    for name, got, want in (("dv", dv, vt.grad), ("dk", dk * sm_scale, kt.grad)):
        practice.expect(name, practice.guarded(got.float()), want,
                        atol=1e-5 * float(want.abs().max()), case=case)


# end snippet


# snippet: dq-release
def dq_consumer(ring, wg):
    """One consumer warpgroup of the dQ kernel, as an actor of the ring model.

    Each key block j sits in slot s = j % stages on lap j // stages. Wait for
    its K and V on their `ready` barriers with the lap's parity, and give each
    slot back on its `empty` barrier (ring.empty[name][s].arrive()) once the
    last product that reads it has retired, not before: K is read by S and
    again by dQ, V by dP alone.
    """
    mma = ring.mma[wg]
    yield ring.resident.wait(0)  # Q and dO of this query block
    for j in range(ring.n_blocks):
        s = j % ring.stages
        ph = 0  # Your code here: the parity of block j's phase
        yield ring.ready["K"][s].wait(ph)
        ring.issue(wg, "S", "K", s, j)  # S = Q K^T
        yield ring.ready["V"][s].wait(ph)
        ring.issue(wg, "dP", "V", s, j)  # dP = dO V^T
        yield mma.wait(1)  # S done; dP may run on
        yield busy("softmax")
        yield mma.wait(0)  # dP done
        ring.issue(wg, "dQ", "K", s, j)  # dQ += dS K
        yield mma.wait(0)
        # Your code here: give back the slots


# end snippet


# snippet: check-dq-release
@practice.exercise("dq-release", hint="ph = (j // ring.stages) & 1; V's slot is free "
                   "once dP has retired, before dQ is issued; K's only after dQ has "
                   "retired (the second wait(0))")
def check_dq_release(m):
    for stages, n_blocks in ((2, 7), (3, 5)):
        case = f"{stages} stages, {n_blocks} key blocks"
        stuck, wrong, first = 0, 0, None
        for seed in range(SEEDS):
            try:
                ring = ring_run("dq", stages, n_blocks, seed, consumer=m.dq_consumer)
            except Deadlock as exc:
                ring, stuck = exc.ring, stuck + 1
            bad = misread(ring)
            wrong += bad is not None
            first = first or bad
        if wrong:
            wg, product, block, found = first
            raise practice.Wrong(f"{case}: in {wrong} of {SEEDS} random schedules a "
                                 f"product read another block: warpgroup {wg}'s "
                                 f"{product} of block {block} found block {found} in "
                                 "its slot")
        if stuck:
            raise practice.Wrong(f"{case}: deadlock in {stuck} of {SEEDS} random "
                                 "schedules: the producer waits for a slot no "
                                 "warpgroup gives back, or a warpgroup for a phase "
                                 "that never comes")
        if len(ring.reads) != reads_expected("dq", n_blocks):
            raise practice.Wrong(f"{case}: {len(ring.reads)} reads of shared memory, "
                                 f"where S, dP and dQ of every block make "
                                 f"{reads_expected('dq', n_blocks)}")


# end snippet


# snippet: delta-gluon
@gluon.jit
def delta_kernel(Out, DO, Delta, seq_len, D: gl.constexpr, BLOCK_M: gl.constexpr):
    """Delta[i] = sum over d of dO[i, d] * O[i, d] in FP32, i < seq_len: the
    preprocess the dK/dV kernel's producer streams beside dO. O (at Out) and
    dO are fp16 (seq_len, D), contiguous; one program per BLOCK_M rows.
    """
    layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [gl.num_warps(), 1], [1, 0])
    offs_m = gl.program_id(0) * BLOCK_M + gl.arange(
        0, BLOCK_M, layout=gl.SliceLayout(1, layout))
    offs_d = gl.arange(0, D, layout=gl.SliceLayout(0, layout))
    rows = offs_m < seq_len
    ptrs = offs_m[:, None] * D + offs_d[None, :]
    o = gl.load(Out + ptrs, mask=rows[:, None], other=0.0)  # noqa: F841 - yours
    do = gl.load(DO + ptrs, mask=rows[:, None], other=0.0)  # noqa: F841 - yours
    pass  # Your code here: Delta, in FP32, stored for the rows that exist


# end snippet


# snippet: check-delta-gluon
@practice.exercise("delta-gluon", hint="sum the product of the FP32 values, o.to("
                   "gl.float32) * do.to(gl.float32), along axis 1; store with "
                   "mask=rows", needs_gpu="Gluon has no interpreter: this one runs on "
                   "a Hopper GPU")
def check_delta_gluon(m):
    for n in (1, 100, 257):  # blocks of 64: the last one is partial
        o, do = (practice.guarded(torch.randn(n, 64).half()) for _ in range(2))
        delta = practice.output(n)
        m.delta_kernel[(triton.cdiv(n, 64),)](o, do, delta, n, 64, 64, num_warps=4)
        want = (o.double() * do.double()).sum(-1)
        practice.expect("delta", delta, want, atol=1e-5 * float(want.abs().max()),
                        case=f"seq_len = {n}, D = 64")


# end snippet


if __name__ == "__main__":
    sys.exit(practice.main())
