"""Attention backward: the answers to exercises.py, and the mistakes its checks catch.

    TRITON_INTERPRET=1 python exercises.py --solutions   # these answers pass
"""

import sys
from pathlib import Path

import triton
import triton.language as tl

sys.path.append(str(Path(__file__).resolve().parent.parent))  # practice.py, in the repo
from practice import Mistake  # noqa: E402


# snippet: delta
@triton.jit
def delta_kernel(Out, DO, Delta, seq_len, stride, D: tl.constexpr,
                 BLOCK_M: tl.constexpr):
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rows = offs_m < seq_len
    ptrs = offs_m[:, None] * stride + tl.arange(0, D)[None, :]
    o = tl.load(Out + ptrs, mask=rows[:, None], other=0.0)
    do = tl.load(DO + ptrs, mask=rows[:, None], other=0.0)
    # FP32 before the products: an fp16 sum would round at every step.
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), axis=1)
    tl.store(Delta + offs_m, delta, mask=rows)


# end snippet


# snippet: dkdv-step
@triton.jit
def dkdv_kernel(Q, K, V, DO, L, Delta, DK, DV, seq_len, sm_scale, qk_scale,
                D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    offs_n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D)
    keys = offs_n[:, None] < seq_len
    k = tl.load(K + offs_n[:, None] * D + offs_d[None, :], mask=keys, other=0.0)
    v = tl.load(V + offs_n[:, None] * D + offs_d[None, :], mask=keys, other=0.0)
    dk = tl.zeros([BLOCK_N, D], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, D], dtype=tl.float32)
    for start_m in range(0, seq_len, BLOCK_M):
        offs_m = start_m + tl.arange(0, BLOCK_M)
        rows = offs_m < seq_len
        q = tl.load(Q + offs_m[:, None] * D + offs_d[None, :], mask=rows[:, None],
                    other=0.0)
        do = tl.load(DO + offs_m[:, None] * D + offs_d[None, :], mask=rows[:, None],
                     other=0.0)
        lse = tl.load(L + offs_m, mask=rows, other=0.0)
        delta = tl.load(Delta + offs_m, mask=rows, other=0.0)
        pT = tl.math.exp2(tl.dot(k, tl.trans(q)) * qk_scale - lse[None, :])
        pT = tl.where(rows[None, :], pT, 0.0)
        dv = tl.dot(pT.to(tl.float16), do, dv)  # dV += P^T dO
        dpT = tl.dot(v, tl.trans(do))  # dP^T = V dO^T
        dsT = pT * (dpT - delta[None, :])  # dS^T: Delta is per query, a column
        dk = tl.dot(dsT.to(tl.float16), q, dk)  # dK += dS^T Q
    tl.store(DK + offs_n[:, None] * D + offs_d[None, :], dk * sm_scale, mask=keys)
    tl.store(DV + offs_n[:, None] * D + offs_d[None, :], dv, mask=keys)


# end snippet


# Each mistake is an edit of this file's text; the check must fail it and say `says`.
MISTAKES = {
    "delta": [
        Mistake("the store without its mask", find="tl.store(Delta + offs_m, delta, "
                "mask=rows)", replace="tl.store(Delta + offs_m, delta)",
                says="wrote past the end"),
        Mistake("an FP16 accumulator",
                find="tl.sum(o.to(tl.float32) * do.to(tl.float32), axis=1)",
                replace="tl.sum(o * do, axis=1)", says="wrong at"),
        Mistake("rows D apart, not stride", find="ptrs = offs_m[:, None] * stride",
                replace="ptrs = offs_m[:, None] * D", says="wrong at"),
    ],
    "dkdv-step": [
        Mistake("no Delta", find="dsT = pT * (dpT - delta[None, :])",
                replace="dsT = pT * dpT", says="wrong at"),
        Mistake("Delta along the keys", find="dsT = pT * (dpT - delta[None, :])",
                replace="dsT = pT * (dpT - delta[:, None])", says="raised"),
        Mistake("dK from P^T, not dS^T", find="dk = tl.dot(dsT.to(tl.float16), q, dk)",
                replace="dk = tl.dot(pT.to(tl.float16), q, dk)", says="wrong at"),
    ],
}
