"""Issue 38, the backward at D128: the gluon-attention-backward lesson's kernels, with two options.

An experiment, not a lesson: the kernels of code/gluon-attention-backward/gluon_attention_backward.py with
options; what the options leave as the lesson has it (its producers, block walks, descriptors and
configurations) is imported from the lesson.

* DEFER (both kernels): the products that accumulate (dV and dK, or dQ) are not waited for at the
  end of their step. The next step's first products are issued behind them, so the tensor cores
  find work queued when they finish, instead of idling while the warpgroup sees the wait return,
  releases the ring slot (a partition-wide barrier and an arrival), waits for the next slot and
  issues. The next step's first wait retires them (wgmma groups retire in order); the ring slot
  is released one step later. Costs the register operands' 32 registers over the step boundary.
* PINGPONG (dK/dV): the two consumer warpgroups take turns at issuing (S^T and dP^T, then dV and
  dK), as the forward's ping-pong does, so that one's exponentials run under the other's products.
* ATOMIC_DQ (dK/dV, after call G): FlashAttention-2's dQ inside the dK/dV kernel, the dQ kernel not
  launched. Each consumer stores its dS^T (64 keys x BLOCK_M queries, fp16) to shared memory, a
  fifth product dQ_part = dS K (A: that tile transposed, B: its K) runs with the other two, and
  dQ_part is added into an FP32 dQ with atomic adds; a last elementwise pass scales dQ and rounds
  it to fp16. Five products instead of seven, each dQ element added to once per 64 keys. The dQ
  product is issued after dV and dK retire (issued with them, at D = 128 it spilled 16 bytes and
  ptxas waited after each of the kernel's 56 tensor-core instructions), in column slices of
  DQ_COLS: whole at D = 128 it still spills a little; in 64-column slices it does not (compiled
  here). Not yet run on a GPU.

Prediction (before any GPU run): DEFER +2 to +5 % at D128 (the dK/dV kernel is 62 % of the time),
less at D64; PINGPONG within noise (the forward's ping-pong bought nothing at D128); the dQ kernel
with 128-key blocks at D128 (a configuration, no change) +3 to +8 % on that kernel.

What the kernels compute, and how their barriers work: the lesson's module docstring
(code/gluon-attention-backward/gluon_attention_backward.py).
"""

import math
import sys
from pathlib import Path

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_init,
    warpgroup_mma_wait,
)

# The attention-backward lesson's module (its forward writes L, its preprocess
# computes Delta), and the gluon-attention-backward lesson's kernels, whose
# unchanged parts this experiment uses as they are.
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "code" / "attention-backward"),
                str(HERE.parent / "code" / "gluon-attention-backward")]
import attention_backward as tl_bwd  # noqa: E402
from gluon_attention_backward import (  # noqa: E402
    BLOCK_ROWS,
    CONFIGS,
    LOG2E,
    WG_ROWS,
    _descriptor,
    _dkdv_producer,
    _dq_producer,
    _key_blocks,
    _q_block,
    _query_blocks,
    _row_descriptor,
)

# -- dK and dV ---------------------------------------------------------------


@gluon.jit
def _dkdv_consumer(io, ring, turn, dq_io, seq_len, sm_scale, qk_scale, WG: gl.constexpr,
                   CAUSAL: gl.constexpr, DEFER: gl.constexpr, PINGPONG: gl.constexpr,
                   ATOMIC_DQ: gl.constexpr, DQ_COLS: gl.constexpr, FENCE: gl.constexpr):
    dk_desc, dv_desc, k_smem, v_smem, kv_bar = io
    dq_acc, ds_smem = dq_io
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
    # The register operands of the last step's products, carried so that their registers live
    # until those products retire (DEFER).
    pT16 = gl.zeros([WG_ROWS, BLOCK_M], f16, layout=a_layout)
    ds16 = gl.zeros([WG_ROWS, BLOCK_M], f16, layout=a_layout)
    if DEFER:  # the accumulators are carried as in-flight products' results
        dv = warpgroup_mma_init(dv)
        dk = warpgroup_mma_init(dk)
    mbarrier.wait(kv_bar, 0)
    for j in range(n_q):
        s = j % STAGES
        ph = (j // STAGES) & 1
        m0 = lo + j * BLOCK_M
        q = q_bufs.index(s)
        do = do_bufs.index(s)
        if PINGPONG:
            mbarrier.wait(turn.index(WG), ((2 * j) & 1) ^ WG ^ 1)
        mbarrier.wait(q_ready.index(s), ph)
        qT = q.permute((1, 0))
        st_tok = warpgroup_mma(k, qT, s_zero, use_acc=False, is_async=True)
        mbarrier.wait(do_ready.index(s), ph)
        # dP^T needs no P: issued now, it runs under the exponentials below.
        doT = do.permute((1, 0))
        dp_tok = warpgroup_mma(v, doT, s_zero, use_acc=False, is_async=True)
        if PINGPONG:
            mbarrier.arrive(turn.index(1 - WG), count=1)
        if DEFER:
            # Retires the last step's dV and dK too (groups retire in order): its slot is free.
            sT, dv, dk, pT16, ds16 = warpgroup_mma_wait(1, deps=(st_tok, dv, dk, pT16, ds16))
            if j > 0:
                mbarrier.arrive(do_empty.index((j - 1) % STAGES), count=1)
                mbarrier.arrive(q_empty.index((j - 1) % STAGES), count=1)
        else:
            sT = warpgroup_mma_wait(1, deps=(st_tok,))  # S^T done; dP^T may run on
        # L along the columns: each thread holds the values of its own columns.
        lse = l_bufs.index(s).load(query_l)
        pT = gl.exp2(sT * qk_scale - lse[None, :])
        if CAUSAL:
            # Only a block with a query before this warpgroup's last key needs it.
            if m0 < key0 + WG_ROWS:
                offs_m = m0 + gl.arange(0, BLOCK_M, layout=query_l)
                pT = gl.where(offs_m[None, :] >= offs_n[:, None], pT, 0.0)
        if FENCE and not CAUSAL:
            # dO's barrier again (its phase has completed: returns at once). Its spin loop is
            # a basic block boundary, which ptxas does not schedule across: without it ptxas
            # hoists the wait for dP^T below to a few exponentials after the wait for S^T,
            # and dP^T does not run under the exponentials. (Causal: the mask's branch does.)
            mbarrier.wait(do_ready.index(s), ph)
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
        if ATOMIC_DQ:  # dS^T to shared memory: the A operand of dQ_part = dS K, transposed
            ds_smem.index(WG).store(dsT.to(f16))
            fence_async_shared()
        if PINGPONG:
            mbarrier.wait(turn.index(WG), ((2 * j + 1) & 1) ^ WG ^ 1)
        dv = warpgroup_mma(pT16, do, dv, is_async=True)
        dk = warpgroup_mma(ds16, q, dk, is_async=True)
        if PINGPONG:
            mbarrier.arrive(turn.index(1 - WG), count=1)
        if ATOMIC_DQ:
            dv, dk, pT16, ds16 = warpgroup_mma_wait(0, deps=(dv, dk, pT16, ds16))
            mbarrier.arrive(do_empty.index(s), count=1)
            mbarrier.arrive(q_empty.index(s), count=1)
            # dQ_part = dS K in column slices of DQ_COLS (fewer registers at D = 128), each
            # added into dQ as soon as it is done.
            dq_layout: gl.constexpr = gl.NVMMADistributedLayout(
                version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, DQ_COLS, 16])
            rows_q = m0 + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, dq_layout))
            dsT_smem = ds_smem.index(WG).permute((1, 0))
            for h in gl.static_range(HEAD_DIM // DQ_COLS):
                dq_zero = gl.zeros([BLOCK_M, DQ_COLS], gl.float32, layout=dq_layout)
                dq_part = warpgroup_mma(dsT_smem, k.slice(h * DQ_COLS, DQ_COLS, dim=1), dq_zero,
                                        use_acc=False, is_async=True)
                dq_part = warpgroup_mma_wait(0, deps=(dq_part,))
                cols_d = h * DQ_COLS + gl.arange(0, DQ_COLS, layout=gl.SliceLayout(0, dq_layout))
                ptrs = dq_acc + (row0 + rows_q)[:, None] * HEAD_DIM + cols_d[None, :]
                gl.atomic_add(ptrs, dq_part, sem="relaxed")
        elif not DEFER:
            # The register operands are named too, so that nothing reuses their
            # registers before the products that read them have retired.
            dv, dk, pT16, ds16 = warpgroup_mma_wait(0, deps=(dv, dk, pT16, ds16))
            mbarrier.arrive(do_empty.index(s), count=1)
            mbarrier.arrive(q_empty.index(s), count=1)
    if DEFER:
        dv, dk, pT16, ds16 = warpgroup_mma_wait(0, deps=(dv, dk, pT16, ds16))
    # This warpgroup's K and V tiles are dead (only it read them, and its last
    # products have retired): they stage dK and dV for the TMA stores. The
    # softmax saw scale * q.k, so dK carries the scale once.
    k.store((dk * sm_scale).to(f16))
    v.store(dv.to(f16))
    fence_async_shared()  # the register stores before the TMA engine reads them
    tma.async_copy_shared_to_global(dk_desc, [row0 + key0, 0], k)
    tma.async_copy_shared_to_global(dv_desc, [row0 + key0, 0], v)
    tma.store_wait(0)


@gluon.jit
def dkdv_kernel(q_desc, k_desc, v_desc, do_desc, dk_desc, dv_desc,
                l_desc, delta_desc, seq_len, sm_scale, qk_scale,
                CAUSAL: gl.constexpr, STAGES: gl.constexpr,
                CONSUMER_REGS: gl.constexpr, PRODUCER_REGS: gl.constexpr,
                DEFER: gl.constexpr, PINGPONG: gl.constexpr, dq_acc,
                ATOMIC_DQ: gl.constexpr, DQ_COLS: gl.constexpr, FENCE: gl.constexpr):
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
    turn = gl.allocate_shared_memory(gl.int64, [2, 1], bar)
    for i in gl.static_range(2):
        mbarrier.init(turn.index(i), count=1)
    ds_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([WG_ROWS, BLOCK_M], f16)
    ds_smem = gl.allocate_shared_memory(f16, [2, WG_ROWS, BLOCK_M], ds_layout)
    dq_io = (dq_acc, ds_smem)
    ring = (q_bufs, do_bufs, l_bufs, delta_bufs, q_ready, q_empty, do_ready, do_empty)
    io = (dk_desc, dv_desc, k_smem, v_smem, kv_bar)
    descs = (q_desc, do_desc, k_desc, v_desc, l_desc, delta_desc)
    resident = (k_smem, v_smem, kv_bar)
    gl.warp_specialize(
        [
            (_dkdv_consumer, (io, ring, turn, dq_io, seq_len, sm_scale, qk_scale, 0, CAUSAL,
                              DEFER, PINGPONG, ATOMIC_DQ, DQ_COLS, FENCE)),
            (_dkdv_consumer, (io, ring, turn, dq_io, seq_len, sm_scale, qk_scale, 1, CAUSAL,
                              DEFER, PINGPONG, ATOMIC_DQ, DQ_COLS, FENCE)),
            (_dkdv_producer, (descs, resident, ring, seq_len, CAUSAL)),
        ],
        [4, 1],  # workers: consumer warpgroup 1, the producer warp
        [CONSUMER_REGS, PRODUCER_REGS],
    )


# -- dQ -----------------------------------------------------------------------


@gluon.jit
def _dq_consumer(io, ring, L, Delta, seq_len, sm_scale, qk_scale,
                 WG: gl.constexpr, CAUSAL: gl.constexpr, DEFER: gl.constexpr,
                 FENCE: gl.constexpr):
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
    ds16 = gl.zeros([WG_ROWS, BLOCK_N], f16, layout=a_layout)
    if DEFER:
        dq = warpgroup_mma_init(dq)
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
        if DEFER:  # retires the last step's dQ product too: its K slot is free
            sc, dq, ds16 = warpgroup_mma_wait(1, deps=(s_tok, dq, ds16))
            if j > 0:
                mbarrier.arrive(k_empty.index((j - 1) % STAGES), count=1)
        else:
            sc = warpgroup_mma_wait(1, deps=(s_tok,))  # S done; dP may still run
        p = gl.exp2(sc * qk_scale - lse[:, None])
        if CAUSAL:
            # Only a block with a key past this warpgroup's first query needs it.
            if j * BLOCK_N + BLOCK_N > q0 + 1:
                offs_n = j * BLOCK_N + gl.arange(0, BLOCK_N, layout=key_l)
                p = gl.where(offs_m[:, None] >= offs_n[None, :], p, 0.0)
        if FENCE and not CAUSAL:  # V's barrier again: keeps the wait for dP below (as dK/dV's)
            mbarrier.wait(v_ready.index(s), ph)
        dp = warpgroup_mma_wait(0, deps=(dp_tok,))
        mbarrier.arrive(v_empty.index(s), count=1)  # V's last reader has retired
        ds16 = gl.convert_layout((p * (dp - delta[:, None])).to(f16), a_layout)
        dq = warpgroup_mma(ds16, kb, dq, is_async=True)
        if not DEFER:
            dq, ds16 = warpgroup_mma_wait(0, deps=(dq, ds16))
            mbarrier.arrive(k_empty.index(s), count=1)
    if DEFER:
        dq, ds16 = warpgroup_mma_wait(0, deps=(dq, ds16))
    # Q's tile is dead (its last reader has retired): it stages dQ for the store.
    q.store((dq * sm_scale).to(f16))
    fence_async_shared()
    tma.async_copy_shared_to_global(dq_desc, [row0 + q0, 0], q)
    tma.store_wait(0)


@gluon.jit
def dq_kernel(q_desc, k_desc, v_desc, do_desc, dq_desc, L, Delta, seq_len,
              sm_scale, qk_scale, CAUSAL: gl.constexpr, STAGES: gl.constexpr,
              CONSUMER_REGS: gl.constexpr, PRODUCER_REGS: gl.constexpr, DEFER: gl.constexpr,
              FENCE: gl.constexpr):
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
                            CAUSAL, DEFER, FENCE)),
            (_dq_consumer, (io, ring, L, Delta, seq_len, sm_scale, qk_scale, 1,
                            CAUSAL, DEFER, FENCE)),
            (_dq_producer, (descs, resident, ring, seq_len, CAUSAL)),
        ],
        [4, 1],
        [CONSUMER_REGS, PRODUCER_REGS],
    )


# -- Host side ----------------------------------------------------------------


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
           "delta": None, "kernels": ("dkdv", "dq"), "with_kernels": False,
           "defer": False, "pingpong": False, "dq_block_n": None, "atomic_dq": False, "dq_cols": None,
           "fence": False, **config}
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
        tl_bwd.attn_bwd_preprocess_kernel[(S // 128, B * H)](
            o, do, delta, S, HEAD_DIM=D, BLOCK_M=128)
    # FP32 dQ for the atomic adds (ATOMIC_DQ), zeroed before the dK/dV kernel adds into it.
    dq_acc = torch.zeros(q.shape, dtype=torch.float32, device=q.device) if cfg["atomic_dq"] else None
    if "dkdv" in cfg["kernels"]:
        kernels["dkdv"] = dkdv_kernel[grid](
            _descriptor(q, block_m), _descriptor(k, rows), _descriptor(v, rows),
            _descriptor(do, block_m), _descriptor(dk, rows), _descriptor(dv, rows),
            _row_descriptor(lse, block_m), _row_descriptor(delta, block_m),
            S, sm_scale, qk_scale, causal, stages, *regs, cfg["defer"], cfg["pingpong"],
            dq_acc if cfg["atomic_dq"] else delta, cfg["atomic_dq"], cfg["dq_cols"] or D,
            cfg["fence"], num_warps=4)
    if cfg["atomic_dq"]:  # dQ was summed in FP32 by the dK/dV kernel: scale and round it
        if "dkdv" in cfg["kernels"]:
            dq.copy_(dq_acc.view_as(dq) * sm_scale)
    elif "dq" in cfg["kernels"]:
        block_n = cfg["dq_block_n"] or block_n
        kernels["dq"] = dq_kernel[grid](
            _descriptor(q, rows), _descriptor(k, block_n), _descriptor(v, block_n),
            _descriptor(do, rows), _descriptor(dq, rows), lse, delta,
            S, sm_scale, qk_scale, causal, stages, *regs, cfg["defer"], cfg["fence"], num_warps=4)
    return (out, kernels) if cfg["with_kernels"] else out


