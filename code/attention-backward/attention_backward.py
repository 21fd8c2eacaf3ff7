"""Attention backward: dQ, dK and dV without the S x S matrix.

The fused attention lesson computed O = softmax(Q K^T * scale) V one block of
keys at a time and threw every score tile away. Training needs the
gradients too, and the backward pass has the same problem as the forward:
written with PyTorch ops it stores P, an S x S matrix per head, for the
backward to read. FlashAttention's answer is to store one number per query
row instead, the log-sum-exp L of its scores, and to recompute P block by
block in the backward: P = exp(S - L) needs no running max and no rescale,
because L is already the final normaliser.

With dO the incoming gradient, the backward of one head is

    dV = P^T dO          dP = dO V^T          dS = P * (dP - Delta)
    dQ = scale * dS K    dK = scale * dS^T Q

where Delta_i = rowsum(dO_i * O_i) = sum_j P_ij dP_ij (the softmax
Jacobian's row term). A preprocess kernel computes Delta, one pass over O
and dO. Then the work splits by what each gradient sums over: dK and dV
sum over queries, dQ over keys.

* dK/dV kernel: one program per block of keys keeps its K and V tiles and
  its dK and dV accumulators on chip and walks the query blocks,
  recomputing each P^T tile on the way.
* dQ, two ways. Two kernels: a second kernel, one program per block of
  queries, walks the key blocks and recomputes Q K^T and dP a second time
  (7 matmuls instead of 5), but writes every gradient once, in a fixed
  order: the same bits on every run. Atomics (FlashAttention-2's choice):
  the dK/dV program also computes its share of dQ and adds it into an
  FP32 buffer with atomic adds (5 matmuls, but a stream of atomic traffic,
  and an order of addition that changes from run to run). On Hopper the
  TMA does those adds, one instruction per tile, as in FlashAttention-3.

The dK/dV kernel streams its tiles through TMA tensor descriptors, one
warpgroup per block of 64 keys.

lesson.py checks both and times both against PyTorch's
scaled_dot_product_attention backward.

This file carries its own compact forward pass (the fused attention
lesson's kernel, which now also stores L), so it runs alone.

Run it:
    TRITON_INTERPRET=1 python attention_backward.py   # any machine: checks on the CPU
    python attention_backward.py                      # a Hopper GPU: checks, one timing

Beside it: exercises.py (check your own Delta and dK/dV step) and lesson.py
(the run the course records: every check, the benchmark against SDPA's
backward, what the compiler made of each kernel).
"""

import math
import os

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

LOG2E = 1.4426950408889634  # log2(e): exp(x) = exp2(x * log2(e))

# -- The forward pass, which also stores L ------------------------------------
#
# All tensors are contiguous (B, H, S, D): head bh starts bh * S * D elements
# in, and its rows are D apart. L and Delta are (B * H, S) in FP32.


# snippet: forward
@triton.jit
def _fwd_loop(acc, l_i, m_i, q, K, V, offs_m, lo, hi, seq_len, qk_scale,
              HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr,
              MASKED: tl.constexpr, CAUSAL: tl.constexpr):
    # The fused attention lesson's loop: online softmax over keys [lo, hi).
    offs_d = tl.arange(0, HEAD_DIM)
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        offs_n = start_n + tl.arange(0, BLOCK_N)
        kv = offs_n[:, None] * HEAD_DIM + offs_d[None, :]
        if MASKED:
            k = tl.load(K + kv, mask=offs_n[:, None] < seq_len, other=0.0)
            v = tl.load(V + kv, mask=offs_n[:, None] < seq_len, other=0.0)
        else:
            k = tl.load(K + kv)
            v = tl.load(V + kv)
        qk = tl.dot(q, tl.trans(k)) * qk_scale  # base-2 units
        if MASKED:
            keep = offs_n[None, :] < seq_len
            if CAUSAL:
                keep = keep & (offs_m[:, None] >= offs_n[None, :])
            qk = tl.where(keep, qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = tl.dot(p.to(tl.float16), v, acc * alpha[:, None])
        m_i = m_new
    return acc, l_i, m_i


@triton.jit(do_not_specialize=["seq_len"])
def attn_fwd_kernel(Q, K, V, Out, L, seq_len, qk_scale, HEAD_DIM: tl.constexpr,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                    CAUSAL: tl.constexpr):
    tl.static_assert(BLOCK_M % BLOCK_N == 0)
    start_m = tl.program_id(0) * BLOCK_M
    bh = tl.program_id(1).to(tl.int64)
    head = bh * seq_len * HEAD_DIM
    Q, K, V, Out, L = Q + head, K + head, V + head, Out + head, L + bh * seq_len
    offs_m = start_m + tl.arange(0, BLOCK_M)
    rows = offs_m < seq_len
    q_ptrs = offs_m[:, None] * HEAD_DIM + tl.arange(0, HEAD_DIM)[None, :]
    q = tl.load(Q + q_ptrs, mask=rows[:, None], other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    if CAUSAL:  # keys left of the diagonal unmasked, then the diagonal
        acc, l_i, m_i = _fwd_loop(acc, l_i, m_i, q, K, V, offs_m, 0, start_m,
                                  seq_len, qk_scale, HEAD_DIM, BLOCK_N, False, True)
        hi = tl.minimum(start_m + BLOCK_M, seq_len)
        acc, l_i, m_i = _fwd_loop(acc, l_i, m_i, q, K, V, offs_m, start_m, hi,
                                  seq_len, qk_scale, HEAD_DIM, BLOCK_N, True, True)
    else:  # every full key block unmasked, then the tail
        full = (seq_len // BLOCK_N) * BLOCK_N
        acc, l_i, m_i = _fwd_loop(acc, l_i, m_i, q, K, V, offs_m, 0, full,
                                  seq_len, qk_scale, HEAD_DIM, BLOCK_N, False, False)
        acc, l_i, m_i = _fwd_loop(acc, l_i, m_i, q, K, V, offs_m, full, seq_len,
                                  seq_len, qk_scale, HEAD_DIM, BLOCK_N, True, False)
    tl.store(Out + q_ptrs, (acc / l_i[:, None]).to(tl.float16), mask=rows[:, None])
    # What the backward needs: L = m + log2(l), the log-sum-exp of the row's
    # scores in base-2 units. Then P = exp2(s * qk_scale - L) exactly.
    tl.store(L + offs_m, m_i + tl.math.log2(l_i), mask=rows)
# end snippet


# -- The backward pass ----------------------------------------------------------


# snippet: preprocess
@triton.jit(do_not_specialize=["seq_len"])
def attn_bwd_preprocess_kernel(Out, DO, Delta, seq_len, HEAD_DIM: tl.constexpr,
                               BLOCK_M: tl.constexpr):
    # Delta_i = sum_d dO[i, d] * O[i, d], in FP32: one number per query row,
    # read by every key block that row meets in the dK/dV kernel.
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    bh = tl.program_id(1).to(tl.int64)
    rows = offs_m < seq_len
    ptrs = bh * seq_len * HEAD_DIM + offs_m[:, None] * HEAD_DIM + \
        tl.arange(0, HEAD_DIM)[None, :]
    o = tl.load(Out + ptrs, mask=rows[:, None], other=0.0).to(tl.float32)
    do = tl.load(DO + ptrs, mask=rows[:, None], other=0.0).to(tl.float32)
    tl.store(Delta + bh * seq_len + offs_m, tl.sum(o * do, axis=1), mask=rows)
# end snippet


# snippet: dkdv-loop
@triton.jit
def _dkdv_loop(dk, dv, k, v, desc_q, desc_do, desc_dq, L, Delta, DQ, bh, offs_n, lo, hi,
               seq_len, sm_scale, qk_scale, HEAD_DIM: tl.constexpr,
               BLOCK_M: tl.constexpr, MASKED: tl.constexpr, CAUSAL: tl.constexpr,
               DQ_BY: tl.constexpr):
    # Query blocks [lo, hi) against this program's keys. Tiles are
    # transposed: keys along rows, queries along columns, so that dK and dV
    # (one row per key) accumulate in place.
    offs_d = tl.arange(0, HEAD_DIM)
    for start_m in range(lo, hi, BLOCK_M):
        start_m = tl.multiple_of(start_m, BLOCK_M)
        offs_m = start_m + tl.arange(0, BLOCK_M)
        # TMA copies the Q and dO tiles into shared memory; rows past
        # seq_len arrive as zeros.
        q = desc_q.load([bh, start_m, 0]).reshape(BLOCK_M, HEAD_DIM)
        do = desc_do.load([bh, start_m, 0]).reshape(BLOCK_M, HEAD_DIM)
        if MASKED:
            rows = offs_m < seq_len
            lse = tl.load(L + offs_m, mask=rows, other=0.0)
            delta = tl.load(Delta + offs_m, mask=rows, other=0.0)
        else:
            lse = tl.load(L + offs_m)
            delta = tl.load(Delta + offs_m)
        # P^T, recomputed: one fused multiply-add and one exp2 per element;
        # L is the final normaliser, so no max and no rescale.
        pT = tl.math.exp2(tl.dot(k, tl.trans(q)) * qk_scale - lse[None, :])
        if MASKED:
            keep = rows[None, :]
            if CAUSAL:
                keep = keep & (offs_m[None, :] >= offs_n[:, None])
            pT = tl.where(keep, pT, 0.0)
        dv = tl.dot(pT.to(tl.float16), do, dv)               # dV += P^T dO
        dpT = tl.dot(v, tl.trans(do))                        # dP^T = V dO^T
        dsT = (pT * (dpT - delta[None, :])).to(tl.float16)   # dS^T
        dk = tl.dot(dsT, q, dk)                              # dK += dS^T Q
        if DQ_BY != "none":
            # This block's share of dQ = scale * dS K, computed transposed
            # (K^T dS^T: D rows, a full tensor-core tile for any BLOCK_M)
            # and added into an FP32 buffer that every key block adds to.
            dqT = tl.dot(tl.trans(k), dsT) * sm_scale
            if DQ_BY == "tma":
                # One TMA reduce per tile: the copy engine adds it into L2.
                dq = tl.trans(dqT).reshape(1, BLOCK_M, HEAD_DIM)
                desc_dq.atomic_add([bh, start_m, 0], dq)
            else:  # "threads": every thread issues its own atomic adds
                dq_ptrs = DQ + offs_m[None, :] * HEAD_DIM + offs_d[:, None]
                if MASKED:
                    tl.atomic_add(dq_ptrs, dqT, mask=rows[None, :], sem="relaxed")
                else:
                    tl.atomic_add(dq_ptrs, dqT, sem="relaxed")
    return dk, dv
# end snippet


# snippet: dkdv-kernel
@triton.jit(do_not_specialize=["seq_len"])
def attn_bwd_dkdv_kernel(desc_q, desc_k, desc_v, desc_do, desc_dk, desc_dv, desc_dq, DQ,
                         L, Delta, seq_len, sm_scale, qk_scale, HEAD_DIM: tl.constexpr,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                         CAUSAL: tl.constexpr, DQ_BY: tl.constexpr):
    # Descriptors view each tensor as (B * H, S, D): tile [bh, row, 0].
    # The causal diagonal below starts at start_n and steps by BLOCK_M.
    tl.static_assert(BLOCK_N % BLOCK_M == 0)
    start_n = tl.program_id(0) * BLOCK_N
    bh = tl.program_id(1)
    L, Delta = L + bh.to(tl.int64) * seq_len, Delta + bh.to(tl.int64) * seq_len
    if DQ_BY == "threads":
        DQ += bh.to(tl.int64) * seq_len * HEAD_DIM
    offs_n = start_n + tl.arange(0, BLOCK_N)
    # Key rows past seq_len arrive as zeros. They produce rows of dK and dV
    # that the stores drop, and a row of dK or dV depends on its own key
    # only, so they leak into nothing (and add exactly 0 to dQ: K is 0).
    k = desc_k.load([bh, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
    v = desc_v.load([bh, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
    dk = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    full = (seq_len // BLOCK_M) * BLOCK_M  # query blocks with no tail
    if CAUSAL:
        # Queries before start_n see none of these keys: skipped. The
        # BLOCK_N // BLOCK_M query blocks on the diagonal are masked...
        hi = tl.minimum(start_n + BLOCK_N, seq_len)
        dk, dv = _dkdv_loop(dk, dv, k, v, desc_q, desc_do, desc_dq, L, Delta, DQ, bh,
                            offs_n, start_n, hi, seq_len, sm_scale, qk_scale,
                            HEAD_DIM, BLOCK_M, True, True, DQ_BY)
        lo = start_n + BLOCK_N  # ...and every later query sees every key.
    else:
        lo = 0
    dk, dv = _dkdv_loop(dk, dv, k, v, desc_q, desc_do, desc_dq, L, Delta, DQ, bh,
                        offs_n, lo, full, seq_len, sm_scale, qk_scale,
                        HEAD_DIM, BLOCK_M, False, CAUSAL, DQ_BY)
    dk, dv = _dkdv_loop(dk, dv, k, v, desc_q, desc_do, desc_dq, L, Delta, DQ, bh,
                        offs_n, tl.maximum(lo, full), seq_len,  # the tail: a block
                        seq_len, sm_scale, qk_scale, HEAD_DIM, BLOCK_M,
                        True, CAUSAL, DQ_BY)
    # The stores drop rows past seq_len. The softmax saw s = scale * q.k,
    # so dK carries the scale once.
    desc_dv.store([bh, start_n, 0], dv.to(tl.float16).reshape(1, BLOCK_N, HEAD_DIM))
    dk = (dk * sm_scale).to(tl.float16)
    desc_dk.store([bh, start_n, 0], dk.reshape(1, BLOCK_N, HEAD_DIM))
# end snippet


# snippet: dq-loop
@triton.jit
def _dq_loop(dq, q, do, lse, delta, K, V, offs_m, lo, hi, seq_len, qk_scale,
             HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr,
             MASKED: tl.constexpr, CAUSAL: tl.constexpr):
    # Key blocks [lo, hi) against this program's queries, in the forward's
    # orientation: queries along rows.
    offs_d = tl.arange(0, HEAD_DIM)
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        offs_n = start_n + tl.arange(0, BLOCK_N)
        kv = offs_n[:, None] * HEAD_DIM + offs_d[None, :]
        if MASKED:
            cols = offs_n < seq_len
            k = tl.load(K + kv, mask=cols[:, None], other=0.0)
            v = tl.load(V + kv, mask=cols[:, None], other=0.0)
        else:
            k = tl.load(K + kv)
            v = tl.load(V + kv)
        p = tl.math.exp2(tl.dot(q, tl.trans(k)) * qk_scale - lse[:, None])
        if MASKED:
            keep = cols[None, :]
            if CAUSAL:
                keep = keep & (offs_m[:, None] >= offs_n[None, :])
            p = tl.where(keep, p, 0.0)
        dp = tl.dot(do, tl.trans(v))                         # dP = dO V^T
        ds = p * (dp - delta[:, None])                       # dS
        dq = tl.dot(ds.to(tl.float16), k, dq)                # dQ += dS K
    return dq
# end snippet


# snippet: dq-kernel
@triton.jit(do_not_specialize=["seq_len"])
def attn_bwd_dq_kernel(Q, K, V, DO, DQ, L, Delta, seq_len, sm_scale, qk_scale,
                       HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                       BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    tl.static_assert(BLOCK_M % BLOCK_N == 0)
    start_m = tl.program_id(0) * BLOCK_M
    bh = tl.program_id(1).to(tl.int64)
    head = bh * seq_len * HEAD_DIM
    Q, K, V, DO, DQ = Q + head, K + head, V + head, DO + head, DQ + head
    L, Delta = L + bh * seq_len, Delta + bh * seq_len
    offs_m = start_m + tl.arange(0, BLOCK_M)
    rows = offs_m < seq_len
    qo = offs_m[:, None] * HEAD_DIM + tl.arange(0, HEAD_DIM)[None, :]
    # Q, dO, L and Delta of this block stay on chip for the whole loop.
    q = tl.load(Q + qo, mask=rows[:, None], other=0.0)
    do = tl.load(DO + qo, mask=rows[:, None], other=0.0)
    lse = tl.load(L + offs_m, mask=rows, other=0.0)
    delta = tl.load(Delta + offs_m, mask=rows, other=0.0)
    dq = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    if CAUSAL:  # the forward's two stages: left of the diagonal, then on it
        dq = _dq_loop(dq, q, do, lse, delta, K, V, offs_m, 0, start_m, seq_len,
                      qk_scale, HEAD_DIM, BLOCK_N, False, True)
        hi = tl.minimum(start_m + BLOCK_M, seq_len)
        dq = _dq_loop(dq, q, do, lse, delta, K, V, offs_m, start_m, hi, seq_len,
                      qk_scale, HEAD_DIM, BLOCK_N, True, True)
    else:
        full = (seq_len // BLOCK_N) * BLOCK_N
        dq = _dq_loop(dq, q, do, lse, delta, K, V, offs_m, 0, full, seq_len,
                      qk_scale, HEAD_DIM, BLOCK_N, False, False)
        dq = _dq_loop(dq, q, do, lse, delta, K, V, offs_m, full, seq_len, seq_len,
                      qk_scale, HEAD_DIM, BLOCK_N, True, False)
    tl.store(DQ + qo, (dq * sm_scale).to(tl.float16), mask=rows[:, None])
# end snippet


# -- Host side --------------------------------------------------------------------

# snippet: configs
# Block sizes, warps and pipeline stages per kernel, head dimension and mask,
# for Hopper: (BLOCK_M, BLOCK_N, num_warps, num_stages). A dK/dV program
# keeps K, V and two FP32 accumulators of BLOCK_N x D on chip while it
# streams Q and dO tiles; with 64 keys and one warpgroup (4 warps) that is
# small enough for two or three programs to share an SM, whose matmuls and
# exponentials then overlap. "dkdv" is the two-kernel method's dK/dV
# kernel, "atomic" the same kernel adding dQ too. Raced on an H200 against
# SDPA (NOTES.md); the benchmark below records what they reach.
_DQ = (128, 64, 8, 3)
GPU = {
    # (D, causal)
    (64, False): {"fwd": (128, 64, 4, 3), "dkdv": (64, 64, 4, 3),
                  "atomic": (64, 64, 4, 3), "dq": _DQ},
    (64, True): {"fwd": (128, 64, 4, 3), "dkdv": (64, 64, 4, 3),
                 "atomic": (64, 64, 4, 3), "dq": _DQ},
    (128, False): {"fwd": (128, 64, 8, 3), "dkdv": (64, 64, 4, 2),
                   "atomic": (32, 64, 4, 3), "dq": _DQ},
    (128, True): {"fwd": (128, 64, 8, 3), "dkdv": (32, 64, 4, 4),
                  "atomic": (32, 64, 4, 3), "dq": _DQ},
}
# The interpreter runs one program at a time, block by block: small blocks.
INTERPRETER = {"fwd": (16, 16, 4, 1), "dkdv": (16, 32, 4, 1), "dq": (32, 16, 4, 1),
               "atomic": (16, 32, 4, 1)}
METHODS = ("two-kernel", "atomic")
# end snippet


def configs_for(D: int, causal: bool, device: str) -> dict:
    return INTERPRETER if device == "cpu" else GPU[(D, causal)]


# (kernel name, its constexprs) -> (the compiled kernel, its launch configuration),
# kept from each launch for lesson.py's table of what the compiler made.
COMPILED = {}


def _launch(kernel, grid, *args, cfg, **consts):
    block_m, block_n, warps, stages = cfg
    compiled = kernel[grid](*args, BLOCK_M=block_m, BLOCK_N=block_n, num_warps=warps,
                            num_stages=stages, **consts)
    COMPILED[(kernel.__name__, *sorted(consts.items()))] = (compiled, cfg)
    return compiled


# snippet: launch
def attention_forward(q, k, v, causal: bool, sm_scale: float, cfg: dict):
    """O and L (base-2 log-sum-exp per query row) for fp16 (B, H, S, D)."""
    B, H, S, D = q.shape
    o = torch.empty_like(q)
    lse = torch.empty((B * H, S), device=q.device, dtype=torch.float32)
    grid = (triton.cdiv(S, cfg["fwd"][0]), B * H)
    _launch(attn_fwd_kernel, grid, q, k, v, o, lse, S, sm_scale * LOG2E,
            cfg=cfg["fwd"], HEAD_DIM=D, CAUSAL=causal)
    return o, lse


def attention_backward(do, q, k, v, o, lse, causal: bool, sm_scale: float,
                       cfg: dict, method: str = "atomic", out=None):
    """dQ, dK, dV for fp16 (B, H, S, D), by one of METHODS."""
    B, H, S, D = q.shape
    dq, dk, dv = out if out is not None else (torch.empty_like(q) for _ in range(3))
    delta = torch.empty_like(lse)
    attn_bwd_preprocess_kernel[(triton.cdiv(S, 128), B * H)](
        o, do, delta, S, HEAD_DIM=D, BLOCK_M=128)
    # log2(e) folded into the scale once, here: the kernels use exp2 only.
    qk_scale = sm_scale * LOG2E
    block_m, block_n = cfg[method if method == "atomic" else "dkdv"][:2]

    def tiles(t, rows):  # a TMA descriptor: t as (B * H, S, D), tiles of rows x D
        return TensorDescriptor.from_tensor(t.view(B * H, S, D), [1, rows, D])

    descs = [tiles(q, block_m), tiles(k, block_n), tiles(v, block_n),
             tiles(do, block_m), tiles(dk, block_n), tiles(dv, block_n)]
    grid = (triton.cdiv(S, block_n), B * H)
    if method == "atomic":
        # dQ is summed over key blocks by atomic adds into FP32, then rounded.
        # The interpreter has no TMA reduce: there the threads add.
        dq32 = torch.zeros(q.shape, device=q.device, dtype=torch.float32)
        by = "threads" if q.device.type == "cpu" else "tma"
        _launch(attn_bwd_dkdv_kernel, grid, *descs, tiles(dq32, block_m), dq32,
                lse, delta, S, sm_scale, qk_scale, cfg=cfg["atomic"], HEAD_DIM=D,
                CAUSAL=causal, DQ_BY=by)
        dq.copy_(dq32)
        return dq, dk, dv
    # Two kernels: dK and dV by key blocks, then dQ by query blocks.
    _launch(attn_bwd_dkdv_kernel, grid, *descs, None, None, lse, delta, S, sm_scale,
            qk_scale, cfg=cfg["dkdv"], HEAD_DIM=D, CAUSAL=causal, DQ_BY="none")
    _launch(attn_bwd_dq_kernel, (triton.cdiv(S, cfg["dq"][0]), B * H),
            q, k, v, do, dq, lse, delta, S, sm_scale, qk_scale,
            cfg=cfg["dq"], HEAD_DIM=D, CAUSAL=causal)
    return dq, dk, dv
# end snippet


# snippet: autograd
class FlashAttention(torch.autograd.Function):
    """softmax(q k^T * scale) v with the kernels above, forward and backward."""

    @staticmethod
    def forward(ctx, q, k, v, causal, sm_scale, cfg, method):
        o, lse = attention_forward(q, k, v, causal, sm_scale, cfg)
        ctx.save_for_backward(q, k, v, o, lse)  # O(S) extra: L, not P
        ctx.causal, ctx.sm_scale, ctx.cfg, ctx.method = causal, sm_scale, cfg, method
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = attention_backward(do.contiguous(), q, k, v, o, lse, ctx.causal,
                                        ctx.sm_scale, ctx.cfg, ctx.method)
        return dq, dk, dv, None, None, None, None


def attention(q, k, v, causal: bool, sm_scale: float | None = None, cfg=None,
              method: str = "atomic"):
    B, H, S, D = q.shape
    assert k.shape == v.shape == q.shape and q.dtype == torch.float16
    assert D in (16, 32, 64, 128), "HEAD_DIM: a power of two the tensor cores take"
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    sm_scale = 1.0 / math.sqrt(D) if sm_scale is None else sm_scale
    cfg = cfg or configs_for(D, causal, q.device.type)
    return FlashAttention.apply(q, k, v, causal, sm_scale, cfg, method)
# end snippet


# snippet: reference
def reference(q, k, v, causal: bool, sm_scale: float):
    """The definition, in whatever precision q, k, v have: S x S, materialised."""
    S = q.shape[-2]
    scores = (q @ k.transpose(-1, -2)) * sm_scale
    if causal:
        future = torch.ones(S, S, dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def reference_grads(q, k, v, do, causal: bool, sm_scale: float):
    """O, dQ, dK, dV by float64 autograd on the fp16 values."""
    q, k, v = (t.detach().double().requires_grad_() for t in (q, k, v))
    o = reference(q, k, v, causal, sm_scale)
    o.backward(do.double())
    return o.detach(), q.grad, k.grad, v.grad
# end snippet


# snippet: tolerance
# Where the backward rounds: P^T and dS^T go to FP16 before their matmuls
# (2^-11 relative each), Delta is computed from the FP16-rounded O, and the
# three gradients are rounded to FP16 at the end (2^-11). Every sum runs in
# FP32. Each gradient is a sum of terms of both signs, so its error is
# judged against its own max|ref|: a few times 2^-11 expected, 1e-2 allowed,
# far below what a missing Delta, a mask one block off or a dropped scale
# produces.
TOL = 1e-2
# end snippet


def make_inputs(B, H, S, D, device, seed):
    gen = torch.Generator(device="cpu").manual_seed(seed)
    q, k, v, do = (torch.randn((B, H, S, D), generator=gen).to(device, torch.float16)
                   for _ in range(4))
    return q, k, v, do



# snippet: flops
def backward_flops(B, H, S, D, causal):
    """The FLOPs every attention backward is credited with: 2.5x the forward.

    The forward is two matmuls of 2 * S^2 * D each per head (Q K^T, P V).
    The backward needs Q K^T again (P is recomputed: half a forward) and
    four more of the same size (dV = P^T dO, dP = dO V^T, dQ = dS K,
    dK = dS^T Q: two forwards). Causal attention does half of each.
    """
    flop = 2.5 * 4.0 * B * H * S * S * D
    return flop / 2 if causal else flop
# end snippet


# snippet: self-check
def self_check() -> None:
    """Both methods and the autograd wrapper against float64 autograd, causal and
    not, on a length no block divides; on a GPU, one timing at a training shape."""
    on_gpu = torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1"
    device = "cuda" if on_gpu else "cpu"
    B, H, S, D = (2, 2, 1000, 128) if on_gpu else (1, 2, 40, 64)
    q, k, v, do = make_inputs(B, H, S, D, device, seed=0)
    scale = 1.0 / math.sqrt(D)
    for causal in (False, True):
        cfg = configs_for(D, causal, device)
        _, *want = reference_grads(q, k, v, do, causal, scale)
        o, lse = attention_forward(q, k, v, causal, scale, cfg)
        runs = {m: attention_backward(do, q, k, v, o, lse, causal, scale, cfg, m)
                for m in METHODS}
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        attention(*leaves, causal).backward(do)  # loss.backward() in a model
        runs["autograd"] = [t.grad for t in leaves]
        for grads in runs.values():
            for got, ref in zip(grads, want, strict=True):
                torch.testing.assert_close(got.double(), ref, rtol=TOL,
                                           atol=TOL * float(ref.abs().max()))
    print(f"dQ, dK, dV by {', '.join(METHODS)} and through autograd match float64 "
          f"autograd on {(B, H, S, D)}, causal and not")
    if on_gpu:
        q, k, v, do = make_inputs(4, 16, 4096, 128, device, seed=1)
        cfg = configs_for(128, False, device)
        o, lse = attention_forward(q, k, v, False, scale, cfg)
        ms = triton.testing.do_bench(
            lambda: attention_backward(do, q, k, v, o, lse, False, scale, cfg))
        print(f"backward (atomic dQ), B4 H16 S4096 D128: {ms:.3f} ms, "
              f"{backward_flops(4, 16, 4096, 128, False) / ms / 1e9:.0f} TFLOP/s")


# end snippet


if __name__ == "__main__":
    self_check()
