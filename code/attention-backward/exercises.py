"""Attention backward: exercises. Fill in each "Your code here", then check them:

    TRITON_INTERPRET=1 python exercises.py   # any CPU (on a GPU: python exercises.py)

Each exercise prints one line: passed, or what is wrong and a hint. With --only NAME
it checks one; --solutions checks the answers in solutions.py.
"""

import math
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.append(str(Path(__file__).resolve().parent.parent))  # practice.py, in the repo
from attention_backward import LOG2E, TOL, make_inputs, reference_grads  # noqa: E402

import practice  # noqa: E402


# snippet: delta
@triton.jit
def delta_kernel(Out, DO, Delta, seq_len, stride, D: tl.constexpr,
                 BLOCK_M: tl.constexpr):
    """Delta[i] = sum over d of dO[i, d] * O[i, d], in FP32, for i < seq_len.

    O (at Out) and dO are fp16 (seq_len, D) with rows `stride` elements apart (a view
    of a wider buffer); Delta is FP32. One program per BLOCK_M rows.
    """
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rows = offs_m < seq_len  # noqa: F841 - yours to use
    # Your code here: the rows' offsets, the two loads, the sum, the store.
    pass


# end snippet


# snippet: check-delta
@practice.exercise("delta", hint="ptrs = offs_m[:, None] * stride + tl.arange(0, D)"
                   "[None, :]; load both with mask=rows[:, None]; sum the product "
                   "of their FP32 values along axis 1; store with mask=rows")
def check_delta(m):
    for n in (1, 100, 257):  # blocks of 32: the last one is partial
        o, do = (practice.guarded(torch.randn(n, 64).half(), gap=8) for _ in range(2))
        delta = practice.output(n)
        m.delta_kernel[(triton.cdiv(n, 32),)](o, do, delta, n, o.stride(0), 64,
                                              BLOCK_M=32)
        want = (o.double() * do.double()).sum(-1)
        # The products of two fp16 values are exact in FP32: what is left is
        # the FP32 sum's rounding, far below an FP16 accumulator's.
        practice.expect("delta", delta, want, atol=1e-5 * float(want.abs().max()),
                        case=f"seq_len = {n}, D = 64, rows {o.stride(0)} apart")


# end snippet


# snippet: dkdv-step
@triton.jit
def dkdv_kernel(Q, K, V, DO, L, Delta, DK, DV, seq_len, sm_scale, qk_scale,
                D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """dK and dV of one head (full attention), one program per BLOCK_N keys.

    Q, K, V, dO are fp16 (seq_len, D), contiguous; L (base 2) and Delta are
    the FP32 statistics of each query row. The loop recomputes P^T, keys along
    its rows and queries along its columns. Accumulate dV and dK in FP32 from
    the four products of the backward, with P^T and dS^T in fp16 for the
    tensor cores.
    """
    offs_n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D)
    keys = offs_n[:, None] < seq_len
    k = tl.load(K + offs_n[:, None] * D + offs_d[None, :], mask=keys, other=0.0)
    v = tl.load(V + offs_n[:, None] * D + offs_d[None, :], mask=keys,  # noqa: F841
                other=0.0)
    dk = tl.zeros([BLOCK_N, D], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, D], dtype=tl.float32)
    for start_m in range(0, seq_len, BLOCK_M):
        offs_m = start_m + tl.arange(0, BLOCK_M)
        rows = offs_m < seq_len
        q = tl.load(Q + offs_m[:, None] * D + offs_d[None, :], mask=rows[:, None],
                    other=0.0)
        do = tl.load(DO + offs_m[:, None] * D + offs_d[None, :],  # noqa: F841
                     mask=rows[:, None], other=0.0)
        lse = tl.load(L + offs_m, mask=rows, other=0.0)
        delta = tl.load(Delta + offs_m, mask=rows, other=0.0)  # noqa: F841 - yours
        pT = tl.math.exp2(tl.dot(k, tl.trans(q)) * qk_scale - lse[None, :])
        pT = tl.where(rows[None, :], pT, 0.0)
        # Your code here: dV += P^T dO, dP^T = V dO^T, dS^T, dK += dS^T Q.
    tl.store(DK + offs_n[:, None] * D + offs_d[None, :], dk * sm_scale, mask=keys)
    tl.store(DV + offs_n[:, None] * D + offs_d[None, :], dv, mask=keys)


# end snippet


def statistics(q, k, v, do, sm_scale):
    """L (base 2, of the scaled scores) and Delta per query row, from float64."""
    s = (q.double() @ k.double().T) * sm_scale
    o = torch.softmax(s, dim=-1) @ v.double()
    lse = torch.logsumexp(s, dim=-1) * LOG2E
    return lse.float(), (do.double() * o).sum(-1).float()


# snippet: check-dkdv-step
@practice.exercise("dkdv-step", hint="dv += Pᵀ dO: tl.dot(pT.to(tl.float16), do, dv); "
                   "dPᵀ = tl.dot(v, tl.trans(do)); dSᵀ = Pᵀ * (dPᵀ - Delta), with "
                   "Delta along the columns (delta[None, :]); dk += tl.dot(dSᵀ in "
                   "fp16, q, dk)")
def check_dkdv_step(m):
    for n, d in ((100, 32), (37, 16)):  # no multiple of the blocks
        q, k, v, do = (t[0, 0] for t in make_inputs(1, 1, n, d, "cpu", n))
        sm_scale = 1.0 / math.sqrt(d)
        lse, delta = statistics(q, k, v, do, sm_scale)
        _, _, want_dk, want_dv = reference_grads(q, k, v, do, False, sm_scale)
        dk, dv = practice.output(n, d), practice.output(n, d)
        args = [practice.guarded(t) for t in (q, k, v, do, lse, delta)]
        m.dkdv_kernel[(triton.cdiv(n, 16),)](*args, dk, dv, n, sm_scale,
                                             sm_scale * LOG2E, d, BLOCK_M=32,
                                             BLOCK_N=16)
        case = f"seq_len = {n}, D = {d}"
        for name, got, want in (("dv", dv, want_dv), ("dk", dk, want_dk)):
            practice.expect(name, got, want, rtol=TOL,
                            atol=TOL * float(want.abs().max()), case=case)


# end snippet


if __name__ == "__main__":
    sys.exit(practice.main())
