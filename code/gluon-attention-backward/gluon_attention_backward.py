"""Gluon: a warp-specialized attention backward for Hopper, the kernels: dQ, dK, dV.

dQ, dK, dV of O = softmax(Q K^T * sm_scale [+ causal mask]) V for fp16
(B, H, S, D), D in (64, 128), S % 128 == 0, contiguous, written against
Triton 3.6's Gluon API. The conventions are the attention-backward lesson's
(its `tl` forward writes L, its preprocess computes Delta): L is the
forward's log-sum-exp per query row in base 2 of the scaled scores,
qk_scale = sm_scale * log2(e), P^T = exp2(K Q^T * qk_scale - L),
Delta = rowsum(dO * O).

Two warp-specialized kernels, each gradient written once, in a fixed order:

* dK/dV (`dkdv_kernel`): one program per (block of 128 keys, batch * head).
  A producer warp loads the block's K and V once, then the Q and dO tiles
  of each query block into a ring of STAGES slots. Two consumer warpgroups
  each own 64 of the 128 keys (wgmma's M is 64 per warpgroup) and walk the
  same query blocks.
* dQ (`dq_kernel`): one program per (block of 128 queries, batch * head),
  the forward's shape: Q and dO resident, a K/V ring.

Barriers (both kernels): `ready` (count 1) completes when the producer's
expected bytes have landed; `empty` (count 2) when both consumer warpgroups
have arrived. Load c uses slot c % STAGES in lap c // STAGES; the consumer
waits `ready` with parity lap & 1, the producer `empty` with (lap & 1) ^ 1,
which a fresh barrier passes at once.

Run it:
    python gluon_attention_backward.py   # a Hopper GPU: checked against float64

Gluon has no interpreter. Beside it: backward_model.py runs the kernels'
walks, arithmetic and rings on any CPU; exercises.py poses exercises on them;
lesson.py is the run the course records.
"""

import math
import os
import sys
from pathlib import Path

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

LOG2E = 1.4426950408889634
WG_ROWS = gl.constexpr(64)  # rows per consumer warpgroup: wgmma's M
BLOCK_ROWS = 128  # rows per program in both kernels: two consumer warpgroups

# Per head dimension: the query block the dK/dV kernel streams (block_m) and
# the key block the dQ kernel streams (block_n). At D = 128 a dK/dV consumer
# already holds two 64 x 128 FP32 accumulators (128 registers a thread), so
# its streamed block is 64 rows.
CONFIGS = {
    64: {"block_m": 128, "block_n": 128, "stages": 2},
    128: {"block_m": 64, "block_n": 64, "stages": 2},
}


# -- dK and dV ---------------------------------------------------------------


@gluon.jit
def _query_blocks(n0, seq_len, BLOCK_M: gl.constexpr, CAUSAL: gl.constexpr):
    # The query blocks a key block meets: causal, those at or after its first key.
    if CAUSAL:
        lo = n0
    else:
        lo = 0
    return lo, (seq_len - lo) // BLOCK_M


# snippet: dkdv-producer
@gluon.jit
def _dkdv_producer(descs, resident, ring, seq_len, CAUSAL: gl.constexpr):
    # One warp: K and V of this key block once (both warpgroups' halves, one
    # barrier), then Q and dO of every query block into the ring, each on its
    # own barrier, so that S^T = K Q^T can start before dO has landed. L rides
    # with Q and Delta with dO: the consumers read them from shared memory
    # when they need them instead of holding them in registers.
    q_desc, do_desc, k_desc, v_desc, l_desc, delta_desc = descs
    k_smem, v_smem, kv_bar = resident
    q_bufs, do_bufs, l_bufs, delta_bufs, q_ready, q_empty, do_ready, do_empty = ring
    BLOCK_M: gl.constexpr = q_desc.block_type.shape[0]
    STAGES: gl.constexpr = q_bufs.type.shape[0]
    n0 = gl.program_id(0) * (2 * WG_ROWS)
    row0 = gl.program_id(1) * seq_len  # this (batch, head)'s first row
    kv_bytes: gl.constexpr = 2 * k_desc.block_type.nbytes + 2 * v_desc.block_type.nbytes
    mbarrier.expect(kv_bar, kv_bytes)
    for w in gl.static_range(2):
        row = row0 + n0 + w * WG_ROWS
        tma.async_copy_global_to_shared(k_desc, [row, 0], kv_bar, k_smem.index(w))
        tma.async_copy_global_to_shared(v_desc, [row, 0], kv_bar, v_smem.index(w))
    lo, n_q = _query_blocks(n0, seq_len, BLOCK_M, CAUSAL)
    for j in range(n_q):
        s = j % STAGES
        lap = (j // STAGES) & 1
        m0 = lo + j * BLOCK_M
        # Lap 0 waits parity 1 on a fresh barrier: passes at once.
        mbarrier.wait(q_empty.index(s), lap ^ 1)
        bar = q_ready.index(s)
        mbarrier.expect(bar, q_desc.block_type.nbytes + l_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(q_desc, [row0 + m0, 0], bar, q_bufs.index(s))
        tma.async_copy_global_to_shared(l_desc, [row0 + m0], bar, l_bufs.index(s))
        mbarrier.wait(do_empty.index(s), lap ^ 1)
        bar = do_ready.index(s)
        mbarrier.expect(bar, do_desc.block_type.nbytes + delta_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(do_desc, [row0 + m0, 0], bar, do_bufs.index(s))
        tma.async_copy_global_to_shared(
            delta_desc, [row0 + m0], bar, delta_bufs.index(s))


# end snippet


# snippet: dkdv-consumer
@gluon.jit
def _dkdv_consumer(io, ring, seq_len, sm_scale, qk_scale, WG: gl.constexpr,
                   CAUSAL: gl.constexpr):
    dk_desc, dv_desc, k_smem, v_smem, kv_bar = io
    q_bufs, do_bufs, l_bufs, delta_bufs, q_ready, q_empty, do_ready, do_empty = ring
    STAGES: gl.constexpr = q_bufs.type.shape[0]
    BLOCK_M: gl.constexpr = q_bufs.type.shape[1]
    HEAD_DIM: gl.constexpr = q_bufs.type.shape[2]
    # Transposed tiles: keys along rows (64 per warpgroup), queries along
    # columns. S^T and dP^T are 64 x BLOCK_M, dK and dV 64 x D; a partition's
    # layouts count its own 4 warps.
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_M, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, HEAD_DIM, 16])
    # P^T and dS^T enter their products from registers, two fp16 a register.
    a_layout: gl.constexpr = gl.DotOperandLayout(
        operand_index=0, parent=o_layout, k_width=2)
    key_l: gl.constexpr = gl.SliceLayout(1, s_layout)  # a value per key row
    query_l: gl.constexpr = gl.SliceLayout(0, s_layout)  # per query column
    f16: gl.constexpr = q_bufs.dtype

    n0 = gl.program_id(0) * (2 * WG_ROWS)
    bh = gl.program_id(1)
    row0 = bh * seq_len
    key0 = n0 + WG * WG_ROWS  # this warpgroup's first key
    offs_n = key0 + gl.arange(0, WG_ROWS, layout=key_l)
    k = k_smem.index(WG)
    v = v_smem.index(WG)
    s_zero = gl.zeros([WG_ROWS, BLOCK_M], gl.float32, layout=s_layout)
    dk = gl.zeros([WG_ROWS, HEAD_DIM], gl.float32, layout=o_layout)
    dv = gl.zeros([WG_ROWS, HEAD_DIM], gl.float32, layout=o_layout)
    lo, n_q = _query_blocks(n0, seq_len, BLOCK_M, CAUSAL)
    mbarrier.wait(kv_bar, 0)
    for j in range(n_q):
        s = j % STAGES
        ph = (j // STAGES) & 1
        m0 = lo + j * BLOCK_M
        q = q_bufs.index(s)
        do = do_bufs.index(s)
        mbarrier.wait(q_ready.index(s), ph)
        qT = q.permute((1, 0))
        st_tok = warpgroup_mma(k, qT, s_zero, use_acc=False, is_async=True)
        mbarrier.wait(do_ready.index(s), ph)
        # dP^T needs no P: issued now, it may run under the exponentials below
        # (ptxas lets it through all of them only in the causal kernels: the
        # lesson's compiled table counts them in the SASS).
        doT = do.permute((1, 0))
        dp_tok = warpgroup_mma(v, doT, s_zero, use_acc=False, is_async=True)
        sT = warpgroup_mma_wait(1, deps=(st_tok,))  # S^T done; dP^T may run on
        # L along the columns: each thread holds the values of its own columns.
        lse = l_bufs.index(s).load(query_l)
        pT = gl.exp2(sT * qk_scale - lse[None, :])
        if CAUSAL:
            # Only a block with a query before this warpgroup's last key needs it.
            if m0 < key0 + WG_ROWS:
                offs_m = m0 + gl.arange(0, BLOCK_M, layout=query_l)
                pT = gl.where(offs_m[None, :] >= offs_n[:, None], pT, 0.0)
        # P^T is kept in fp16 only (dS^T below reads it too: one rounding of
        # 2^-11, as dS^T's own): an FP32 copy would cost BLOCK_M / 2 registers
        # and spill. The conversion to the operand layout moves no data.
        p16 = pT.to(f16)
        dpT = warpgroup_mma_wait(0, deps=(dp_tok,))
        delta = delta_bufs.index(s).load(query_l)
        dsT = p16.to(gl.float32) * (dpT - delta[None, :])
        # Both register-operand products are issued only now: PTX leaves
        # reading a wgmma's A registers while it runs undefined, and dS^T
        # reads P^T. The other warpgroup keeps the tensor cores busy meanwhile.
        pT16 = gl.convert_layout(p16, a_layout)
        ds16 = gl.convert_layout(dsT.to(f16), a_layout)
        dv_tok = warpgroup_mma(pT16, do, dv, is_async=True)
        dk_tok = warpgroup_mma(ds16, q, dk, is_async=True)
        # The register operands are named too, so that nothing reuses their
        # registers before the products that read them have retired.
        dv, dk, pT16, ds16 = warpgroup_mma_wait(
            0, deps=(dv_tok, dk_tok, pT16, ds16))
        mbarrier.arrive(do_empty.index(s), count=1)
        mbarrier.arrive(q_empty.index(s), count=1)
    # This warpgroup's K and V tiles are dead (only it read them, and its last
    # products have retired): they stage dK and dV for the TMA stores. The
    # softmax saw scale * q.k, so dK carries the scale once.
    k.store((dk * sm_scale).to(f16))
    v.store(dv.to(f16))
    fence_async_shared()  # the register stores before the TMA engine reads them
    tma.async_copy_shared_to_global(dk_desc, [row0 + key0, 0], k)
    tma.async_copy_shared_to_global(dv_desc, [row0 + key0, 0], v)
    tma.store_wait(0)


# end snippet


# snippet: dkdv-kernel
@gluon.jit
def dkdv_kernel(q_desc, k_desc, v_desc, do_desc, dk_desc, dv_desc,
                l_desc, delta_desc, seq_len, sm_scale, qk_scale,
                CAUSAL: gl.constexpr, STAGES: gl.constexpr,
                CONSUMER_REGS: gl.constexpr, PRODUCER_REGS: gl.constexpr):
    BLOCK_M: gl.constexpr = q_desc.block_type.shape[0]
    D: gl.constexpr = q_desc.block_type.shape[1]
    f16: gl.constexpr = q_desc.dtype
    # K and V in two 64-row halves, one per consumer warpgroup; Q, dO in rings.
    k_smem = gl.allocate_shared_memory(f16, [2, WG_ROWS, D], k_desc.layout)
    v_smem = gl.allocate_shared_memory(f16, [2, WG_ROWS, D], v_desc.layout)
    q_bufs = gl.allocate_shared_memory(f16, [STAGES, BLOCK_M, D], q_desc.layout)
    do_bufs = gl.allocate_shared_memory(f16, [STAGES, BLOCK_M, D], do_desc.layout)
    f32: gl.constexpr = gl.float32
    l_bufs = gl.allocate_shared_memory(f32, [STAGES, BLOCK_M], l_desc.layout)
    delta_bufs = gl.allocate_shared_memory(f32, [STAGES, BLOCK_M], delta_desc.layout)
    bar: gl.constexpr = mbarrier.MBarrierLayout()
    kv_bar = gl.allocate_shared_memory(gl.int64, [1], bar)
    q_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], bar)
    q_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], bar)
    do_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], bar)
    do_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], bar)
    mbarrier.init(kv_bar, count=1)
    for i in gl.static_range(STAGES):
        mbarrier.init(q_ready.index(i), count=1)
        mbarrier.init(do_ready.index(i), count=1)
        mbarrier.init(q_empty.index(i), count=2)  # both warpgroups read every tile
        mbarrier.init(do_empty.index(i), count=2)
    ring = (q_bufs, do_bufs, l_bufs, delta_bufs, q_ready, q_empty, do_ready, do_empty)
    io = (dk_desc, dv_desc, k_smem, v_smem, kv_bar)
    descs = (q_desc, do_desc, k_desc, v_desc, l_desc, delta_desc)
    resident = (k_smem, v_smem, kv_bar)
    gl.warp_specialize(
        [
            (_dkdv_consumer, (io, ring, seq_len, sm_scale, qk_scale, 0, CAUSAL)),
            (_dkdv_consumer, (io, ring, seq_len, sm_scale, qk_scale, 1, CAUSAL)),
            (_dkdv_producer, (descs, resident, ring, seq_len, CAUSAL)),
        ],
        [4, 1],  # workers: consumer warpgroup 1, the producer warp
        [CONSUMER_REGS, PRODUCER_REGS],
    )


# end snippet


# -- dQ -----------------------------------------------------------------------


@gluon.jit
def _key_blocks(m0, seq_len, BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr):
    # Causal: the key blocks up to the one holding this query block's last row.
    if CAUSAL:
        return gl.cdiv(m0 + 2 * WG_ROWS, BLOCK_N)
    else:
        return seq_len // BLOCK_N


@gluon.jit
def _q_block(seq_len, CAUSAL: gl.constexpr):
    # Causal: the longest query blocks (the last ones) launch first.
    if CAUSAL:
        return seq_len // (2 * WG_ROWS) - 1 - gl.program_id(0)
    else:
        return gl.program_id(0)


@gluon.jit
def _dq_producer(descs, resident, ring, seq_len, CAUSAL: gl.constexpr):
    # One warp: this block's Q and dO once, then K and V of every key block
    # into the ring, each on its own barrier (S = Q K^T can start before V).
    q_desc, do_desc, k_desc, v_desc = descs
    q_smem, do_smem, qdo_bar = resident
    k_bufs, v_bufs, k_ready, k_empty, v_ready, v_empty = ring
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[0]
    STAGES: gl.constexpr = k_bufs.type.shape[0]
    m0 = _q_block(seq_len, CAUSAL) * (2 * WG_ROWS)
    row0 = gl.program_id(1) * seq_len
    qdo_bytes: gl.constexpr = (2 * q_desc.block_type.nbytes
                               + 2 * do_desc.block_type.nbytes)
    mbarrier.expect(qdo_bar, qdo_bytes)
    for w in gl.static_range(2):
        row = row0 + m0 + w * WG_ROWS
        tma.async_copy_global_to_shared(q_desc, [row, 0], qdo_bar, q_smem.index(w))
        tma.async_copy_global_to_shared(do_desc, [row, 0], qdo_bar, do_smem.index(w))
    for j in range(_key_blocks(m0, seq_len, BLOCK_N, CAUSAL)):
        s = j % STAGES
        lap = (j // STAGES) & 1
        row = row0 + j * BLOCK_N
        mbarrier.wait(k_empty.index(s), lap ^ 1)
        mbarrier.expect(k_ready.index(s), k_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(
            k_desc, [row, 0], k_ready.index(s), k_bufs.index(s))
        mbarrier.wait(v_empty.index(s), lap ^ 1)
        mbarrier.expect(v_ready.index(s), v_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(
            v_desc, [row, 0], v_ready.index(s), v_bufs.index(s))


# snippet: dq-consumer
@gluon.jit
def _dq_consumer(io, ring, L, Delta, seq_len, sm_scale, qk_scale,
                 WG: gl.constexpr, CAUSAL: gl.constexpr):
    dq_desc, q_smem, do_smem, qdo_bar = io
    k_bufs, v_bufs, k_ready, k_empty, v_ready, v_empty = ring
    STAGES: gl.constexpr = k_bufs.type.shape[0]
    BLOCK_N: gl.constexpr = k_bufs.type.shape[1]
    HEAD_DIM: gl.constexpr = k_bufs.type.shape[2]
    # The forward's orientation: queries along rows (64 per warpgroup).
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_N, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, HEAD_DIM, 16])
    a_layout: gl.constexpr = gl.DotOperandLayout(
        operand_index=0, parent=o_layout, k_width=2)
    query_l: gl.constexpr = gl.SliceLayout(1, s_layout)
    key_l: gl.constexpr = gl.SliceLayout(0, s_layout)
    f16: gl.constexpr = k_bufs.dtype

    m0 = _q_block(seq_len, CAUSAL) * (2 * WG_ROWS)
    row0 = gl.program_id(1) * seq_len
    q0 = m0 + WG * WG_ROWS  # this warpgroup's first query
    offs_m = q0 + gl.arange(0, WG_ROWS, layout=query_l)
    lse = gl.load(L + row0 + offs_m)
    delta = gl.load(Delta + row0 + offs_m)
    q = q_smem.index(WG)
    do = do_smem.index(WG)
    s_zero = gl.zeros([WG_ROWS, BLOCK_N], gl.float32, layout=s_layout)
    dq = gl.zeros([WG_ROWS, HEAD_DIM], gl.float32, layout=o_layout)
    mbarrier.wait(qdo_bar, 0)
    for j in range(_key_blocks(m0, seq_len, BLOCK_N, CAUSAL)):
        s = j % STAGES
        ph = (j // STAGES) & 1
        kb = k_bufs.index(s)
        mbarrier.wait(k_ready.index(s), ph)
        kT = kb.permute((1, 0))
        s_tok = warpgroup_mma(q, kT, s_zero, use_acc=False, is_async=True)
        mbarrier.wait(v_ready.index(s), ph)
        vT = v_bufs.index(s).permute((1, 0))
        dp_tok = warpgroup_mma(do, vT, s_zero, use_acc=False, is_async=True)
        sc = warpgroup_mma_wait(1, deps=(s_tok,))  # S done; dP may still run
        p = gl.exp2(sc * qk_scale - lse[:, None])
        if CAUSAL:
            # Only a block with a key past this warpgroup's first query needs it.
            if j * BLOCK_N + BLOCK_N > q0 + 1:
                offs_n = j * BLOCK_N + gl.arange(0, BLOCK_N, layout=key_l)
                p = gl.where(offs_m[:, None] >= offs_n[None, :], p, 0.0)
        dp = warpgroup_mma_wait(0, deps=(dp_tok,))
        mbarrier.arrive(v_empty.index(s), count=1)  # V's last reader has retired
        ds16 = gl.convert_layout((p * (dp - delta[:, None])).to(f16), a_layout)
        dq_tok = warpgroup_mma(ds16, kb, dq, is_async=True)
        dq, ds16 = warpgroup_mma_wait(0, deps=(dq_tok, ds16))
        mbarrier.arrive(k_empty.index(s), count=1)
    # Q's tile is dead (its last reader has retired): it stages dQ for the store.
    q.store((dq * sm_scale).to(f16))
    fence_async_shared()
    tma.async_copy_shared_to_global(dq_desc, [row0 + q0, 0], q)
    tma.store_wait(0)


# end snippet


@gluon.jit
def dq_kernel(q_desc, k_desc, v_desc, do_desc, dq_desc, L, Delta, seq_len,
              sm_scale, qk_scale, CAUSAL: gl.constexpr, STAGES: gl.constexpr,
              CONSUMER_REGS: gl.constexpr, PRODUCER_REGS: gl.constexpr):
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[0]
    D: gl.constexpr = k_desc.block_type.shape[1]
    f16: gl.constexpr = q_desc.dtype
    q_smem = gl.allocate_shared_memory(f16, [2, WG_ROWS, D], q_desc.layout)
    do_smem = gl.allocate_shared_memory(f16, [2, WG_ROWS, D], do_desc.layout)
    k_bufs = gl.allocate_shared_memory(f16, [STAGES, BLOCK_N, D], k_desc.layout)
    v_bufs = gl.allocate_shared_memory(f16, [STAGES, BLOCK_N, D], v_desc.layout)
    bar: gl.constexpr = mbarrier.MBarrierLayout()
    qdo_bar = gl.allocate_shared_memory(gl.int64, [1], bar)
    k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], bar)
    k_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], bar)
    v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], bar)
    v_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], bar)
    mbarrier.init(qdo_bar, count=1)
    for i in gl.static_range(STAGES):
        mbarrier.init(k_ready.index(i), count=1)
        mbarrier.init(v_ready.index(i), count=1)
        mbarrier.init(k_empty.index(i), count=2)
        mbarrier.init(v_empty.index(i), count=2)
    ring = (k_bufs, v_bufs, k_ready, k_empty, v_ready, v_empty)
    io = (dq_desc, q_smem, do_smem, qdo_bar)
    descs = (q_desc, do_desc, k_desc, v_desc)
    resident = (q_smem, do_smem, qdo_bar)
    gl.warp_specialize(
        [
            (_dq_consumer, (io, ring, L, Delta, seq_len, sm_scale, qk_scale, 0,
                            CAUSAL)),
            (_dq_consumer, (io, ring, L, Delta, seq_len, sm_scale, qk_scale, 1,
                            CAUSAL)),
            (_dq_producer, (descs, resident, ring, seq_len, CAUSAL)),
        ],
        [4, 1],
        [CONSUMER_REGS, PRODUCER_REGS],
    )


# -- Host side ----------------------------------------------------------------


def tl_backward():
    """The attention-backward lesson's kernels module (lesson.toml's `uses`): its
    forward writes L, its preprocess computes Delta. Beside this file in a
    download; in the repository, in that lesson's folder."""
    try:
        import attention_backward
    except ImportError:
        here = Path(globals().get("__file__", ".")).resolve().parent
        sys.path.append(str(here.parent / "attention-backward"))
        import attention_backward
    return attention_backward


def forward_lse(q, k, v, causal, sm_scale=None):
    """(o, lse) from the attention-backward lesson's tl forward: lse is
    (B * H, S) FP32, base 2, of the scaled scores."""
    tl_bwd = tl_backward()
    D = q.shape[-1]
    sm_scale = 1.0 / math.sqrt(D) if sm_scale is None else sm_scale
    cfg = tl_bwd.configs_for(D, causal, q.device.type)
    q, k, v = (t.contiguous() for t in (q, k, v))
    return tl_bwd.attention_forward(q, k, v, causal, sm_scale, cfg)


def _descriptor(t, rows):
    """A contiguous (B, H, S, D) fp16 tensor as (B * H * S, D), tiles rows x D."""
    D = t.shape[-1]
    block = [rows, D]
    layout = gl.NVMMASharedLayout.get_default_for(block, gl.float16)
    return TensorDescriptor.from_tensor(t.view(-1, D), block, layout)


def _row_descriptor(t, rows):
    """A (B * H, S) FP32 statistic as one row vector, in tiles of rows."""
    layout = gl.NVMMASharedLayout.get_default_for([rows], gl.float32)
    return TensorDescriptor.from_tensor(t.view(-1), [rows], layout)


# snippet: launch
def attention_bwd_gluon(q, k, v, o, do, lse, causal, sm_scale=None, **config):
    """(dq, dk, dv) of softmax(q k^T * sm_scale [+ causal]) v.

    fp16 (B, H, S, D), D in (64, 128), S % 128 == 0; o and lse (B * H, S)
    from the forward. config: block_m (query rows a dK/dV step streams),
    block_n (key rows a dQ step streams), stages (the rings' depth),
    consumer_regs, producer_regs, out (a (dq, dk, dv) triple to write into),
    delta (Delta, computed already: the preprocess is not launched), kernels
    (which of "dkdv" and "dq" to launch), with_kernels (also return the
    compiled kernels).
    """
    B, H, S, D = q.shape
    assert k.shape == v.shape == o.shape == do.shape == q.shape
    assert q.dtype == k.dtype == v.dtype == do.dtype == torch.float16
    assert D in (64, 128) and S % BLOCK_ROWS == 0, "D in (64, 128), S % 128 == 0"
    assert lse.shape == (B * H, S) and lse.dtype == torch.float32
    assert all(t.is_contiguous() for t in (q, k, v, o, do, lse))
    sm_scale = 1.0 / math.sqrt(D) if sm_scale is None else sm_scale
    cfg = {**CONFIGS[D], "consumer_regs": 240, "producer_regs": 24, "out": None,
           "delta": None, "kernels": ("dkdv", "dq"), "with_kernels": False, **config}
    block_m, block_n, stages = cfg["block_m"], cfg["block_n"], cfg["stages"]
    assert BLOCK_ROWS % block_m == 0 and S % block_n == 0
    out = cfg["out"] or tuple(torch.empty_like(q) for _ in range(3))
    dq, dk, dv = out
    qk_scale = sm_scale * LOG2E
    # Launch: one CTA per SM (384 threads); consumer warpgroup 0 is the default
    # partition (num_warps=4), the workers are warpgroup 1 and the producer.
    regs = (cfg["consumer_regs"], cfg["producer_regs"])
    rows = WG_ROWS.value
    grid = (S // BLOCK_ROWS, B * H)
    kernels = {}
    delta = cfg["delta"]
    if delta is None:  # Delta = rowsum(dO * O): the tl lesson's preprocess
        delta = torch.empty_like(lse)
        tl_backward().attn_bwd_preprocess_kernel[(S // 128, B * H)](
            o, do, delta, S, HEAD_DIM=D, BLOCK_M=128)
    if "dkdv" in cfg["kernels"]:
        kernels["dkdv"] = dkdv_kernel[grid](
            _descriptor(q, block_m), _descriptor(k, rows), _descriptor(v, rows),
            _descriptor(do, block_m), _descriptor(dk, rows), _descriptor(dv, rows),
            _row_descriptor(lse, block_m), _row_descriptor(delta, block_m),
            S, sm_scale, qk_scale, causal, stages, *regs, num_warps=4)
    if "dq" in cfg["kernels"]:
        kernels["dq"] = dq_kernel[grid](
            _descriptor(q, rows), _descriptor(k, block_n), _descriptor(v, block_n),
            _descriptor(do, rows), _descriptor(dq, rows), lse, delta,
            S, sm_scale, qk_scale, causal, stages, *regs, num_warps=4)
    return (out, kernels) if cfg["with_kernels"] else out


# end snippet


# snippet: self-check
def self_check() -> None:
    """All three gradients against float64 autograd, causal and not, D = 64 and
    128, on 3 heads of 384 tokens; one timing."""
    if not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") == "1":
        print("Gluon kernels run on a GPU only (compute capability 9.0, Hopper): "
              "nothing to check here. On a CPU, run exercises.py: the kernels' models.")
        return
    tl_bwd = tl_backward()
    for D in (64, 128):
        q, k, v, do = tl_bwd.make_inputs(1, 3, 384, D, "cuda", seed=D)
        for causal in (False, True):
            o, lse = forward_lse(q, k, v, causal)
            out = tuple(torch.full_like(q, float("nan")) for _ in range(3))
            got = attention_bwd_gluon(q, k, v, o, do, lse, causal, out=out)
            _, *want = tl_bwd.reference_grads(q, k, v, do, causal, 1.0 / math.sqrt(D))
            for g, w in zip(got, want, strict=True):
                torch.testing.assert_close(g.double(), w, rtol=0,
                                           atol=tl_bwd.TOL * float(w.abs().max()))
    print("dQ, dK, dV match float64 autograd: 3 heads of 384 tokens, D = 64 and 128, "
          "causal and not")
    q, k, v, do = tl_bwd.make_inputs(4, 32, 4096, 128, "cuda", seed=1)
    o, lse = forward_lse(q, k, v, False)
    ms = triton.testing.do_bench(
        lambda: attention_bwd_gluon(q, k, v, o, do, lse, False))
    flop = tl_bwd.backward_flops(4, 32, 4096, 128, False)
    print(f"backward, B4 H32 S4096 D128: {ms:.3f} ms, {flop / ms / 1e9:.0f} TFLOP/s")


# end snippet


if __name__ == "__main__":
    self_check()
