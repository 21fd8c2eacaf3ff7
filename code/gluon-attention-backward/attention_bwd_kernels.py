"""FlashAttention backward in Gluon for Hopper: an experiment for issue 38, not a lesson.

dQ, dK, dV of O = softmax(Q K^T * sm_scale [+ causal mask]) V for fp16 (B, H, S, D),
D in (64, 128), S % 128 == 0, contiguous, written against Triton 3.6's Gluon API
(``triton.experimental.gluon``). The algorithm and its conventions are those of the
course's tl backward (code/attention-backward/attention_backward.py): L is the
forward's log-sum-exp per query row in base 2 of the scaled scores, qk_scale =
sm_scale * log2(e), P^T = exp2(K Q^T * qk_scale - L), Delta = rowsum(dO * O).

Three kernels, as the tl file's two-kernel method (deterministic: every gradient
is written once, in a fixed order):

* Delta: the tl file's ``attn_bwd_preprocess_kernel``, imported.
* dK/dV (``dkdv_kernel``): one program per (block of 128 keys, batch * head),
  warp-specialized in the style of the gluon-attention lesson's forward
  (FlashAttention-3). A producer warp loads this block's K and V once, then the
  Q and dO tiles of each query block through TMA into a ring of STAGES slots,
  Q on one `ready` barrier and dO on another (so S^T = K Q^T can start before
  dO lands); the block's 1-D slices of L and Delta ride along with Q and dO,
  and are read from shared memory when needed rather than held in registers.
  Two consumer warpgroups each own 64 of the 128 keys (wgmma's M is 64 per
  warpgroup), walk the same query blocks, and per block compute, in this order:
      S^T = K Q^T          (wgmma: K from shared memory, Q^T a permuted view)
      dP^T = V dO^T        (issued right after S^T: it runs under the exp2)
      P^T = exp2(S^T * qk_scale - L), in fp16 (masked on the causal diagonal)
      dS^T = P^T * (dP^T - Delta)
      dV += P^T dO, dK += dS^T Q   (P^T, dS^T from registers, wgmma's A operand)
  then dK *= sm_scale and both go out through TMA, staged in the warpgroup's
  own (now dead) K and V tiles. Causal: only query blocks at or after the key
  block; only blocks that reach before a warpgroup's last key are masked.
* dQ (``dq_kernel``): one program per (block of 128 queries, batch * head), the
  forward's shape: producer warp, two consumer warpgroups of 64 queries each
  holding Q and dO in shared memory, a K/V ring. Per key block: S = Q K^T and
  dP = dO V^T, P = exp2(S * qk_scale - L), dS = P * (dP - Delta), dQ += dS K;
  dQ *= sm_scale at the end. Causal: the key blocks up to the diagonal; longest
  query blocks launch first.

Barrier protocol (both kernels): `ready` barriers (count 1) complete when the
producer's expect-tx bytes have landed; `empty` barriers (count 2) complete
when both consumer warpgroups have arrived. Load number c uses slot c % STAGES
in lap c // STAGES: the consumer waits `ready` with parity lap & 1, the
producer waits `empty` with parity (lap & 1) ^ 1, which a fresh barrier passes
at once (lap 0). The one-shot barrier for the resident tiles (K, V or Q, dO) is
waited with parity 0.

Launch: grid (S / 128, B * H) for both kernels, num_warps=4 (consumer warpgroup
0 is the default partition), workers [4, 1] warps (consumer warpgroup 1, the
producer) with [240, 24] registers (setmaxnreg); 384 threads per CTA, one CTA
per SM. Config keys (``attention_bwd_gluon(..., **config)``): block_m, block_n,
stages, consumer_regs, producer_regs; defaults in CONFIGS.

What has been checked: every kernel compiled for sm_90 with Triton 3.6 (ptxas
included) on a CPU machine through a fake driver, D 64 and 128, causal and full:
no spills (consumers at 240 registers); the loop bounds, masks and L/Delta use
were replayed block for block in float32 torch against fp64 autograd. On the
H200 (Triton 3.6, 2026-12-03, experiments/call_b.sh): ``check_on_gpu()`` passed
on its first run, every case within 1e-2 of float64 autograd, no hang; the timing
against cuDNN's backward and the tl lesson's is experiments/bwd_race.py's
(NOTES.md, "Session of 2026-12-03 (afternoon)"). Not a lesson yet:

    python3 experiments/attention_bwd_gluon.py            # check against fp64 autograd
    python3 experiments/attention_bwd_gluon.py --bench    # check, then time against cuDNN
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
    warpgroup_mma_wait,
)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

# The course's tl backward: its forward writes L, its preprocess computes Delta.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "code" / "attention-backward"))
import attention_backward as tl_bwd  # noqa: E402

LOG2E = 1.4426950408889634
WG_ROWS = gl.constexpr(64)  # rows per consumer warpgroup: wgmma's M
BLOCK_ROWS = 128  # rows per program in both kernels: two consumer warpgroups

# Per head dimension: the query block the dK/dV kernel streams (block_m) and the
# key block the dQ kernel streams (block_n). At D128 a dK/dV consumer warpgroup
# already holds two 64 x 128 FP32 accumulators (128 registers per thread), so its
# streamed block is 64 rows. (dQ at D128 also compiles spill-free with block_n=128,
# 192 KiB of shared memory: a knob for the benchmark.)
CONFIGS = {
    64: {"block_m": 128, "block_n": 128, "stages": 2},
    128: {"block_m": 64, "block_n": 64, "stages": 2},
}


# -- dK and dV ---------------------------------------------------------------------


@gluon.jit
def _query_blocks(n0, seq_len, BLOCK_M: gl.constexpr, CAUSAL: gl.constexpr):
    # The query blocks a key block meets: causal, those at or after its first key.
    if CAUSAL:
        lo = n0
    else:
        lo = 0
    return lo, (seq_len - lo) // BLOCK_M


@gluon.jit
def _dkdv_producer(descs, resident, ring, seq_len, CAUSAL: gl.constexpr):
    # One warp: K and V of this key block once (both warpgroups' halves, one
    # barrier), then Q and dO of every query block into the ring, each on its own
    # barrier so that S^T = K Q^T can start before dO has landed. L rides with Q
    # and Delta with dO, so the consumers read them from shared memory when they
    # need them instead of holding them in registers across the block.
    q_desc, do_desc, k_desc, v_desc, l_desc, delta_desc = descs
    k_smem, v_smem, kv_bar = resident
    q_bufs, do_bufs, l_bufs, delta_bufs, q_ready, q_empty, do_ready, do_empty = ring
    BLOCK_M: gl.constexpr = q_desc.block_type.shape[0]
    STAGES: gl.constexpr = q_bufs.type.shape[0]
    n0 = gl.program_id(0) * (2 * WG_ROWS)
    row0 = gl.program_id(1) * seq_len  # first row of this (batch, head) in the 2-D views
    mbarrier.expect(kv_bar, 2 * k_desc.block_type.nbytes + 2 * v_desc.block_type.nbytes)
    for w in gl.static_range(2):
        tma.async_copy_global_to_shared(k_desc, [row0 + n0 + w * WG_ROWS, 0], kv_bar, k_smem.index(w))
        tma.async_copy_global_to_shared(v_desc, [row0 + n0 + w * WG_ROWS, 0], kv_bar, v_smem.index(w))
    lo, n_q = _query_blocks(n0, seq_len, BLOCK_M, CAUSAL)
    for j in range(n_q):
        s = j % STAGES
        lap = (j // STAGES) & 1
        m0 = lo + j * BLOCK_M
        # Lap 0 waits parity 1 on a fresh barrier: passes at once.
        mbarrier.wait(q_empty.index(s), lap ^ 1)
        mbarrier.expect(q_ready.index(s), q_desc.block_type.nbytes + l_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(q_desc, [row0 + m0, 0], q_ready.index(s), q_bufs.index(s))
        tma.async_copy_global_to_shared(l_desc, [row0 + m0], q_ready.index(s), l_bufs.index(s))
        mbarrier.wait(do_empty.index(s), lap ^ 1)
        mbarrier.expect(do_ready.index(s), do_desc.block_type.nbytes + delta_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(do_desc, [row0 + m0, 0], do_ready.index(s), do_bufs.index(s))
        tma.async_copy_global_to_shared(delta_desc, [row0 + m0], do_ready.index(s), delta_bufs.index(s))


@gluon.jit
def _dkdv_consumer(io, ring, seq_len, sm_scale, qk_scale, WG: gl.constexpr, CAUSAL: gl.constexpr):
    dk_desc, dv_desc, k_smem, v_smem, kv_bar = io
    q_bufs, do_bufs, l_bufs, delta_bufs, q_ready, q_empty, do_ready, do_empty = ring
    STAGES: gl.constexpr = q_bufs.type.shape[0]
    BLOCK_M: gl.constexpr = q_bufs.type.shape[1]
    HEAD_DIM: gl.constexpr = q_bufs.type.shape[2]
    # Transposed tiles: keys along rows (64 per warpgroup), queries along columns.
    # S^T and dP^T are 64 x BLOCK_M, dK and dV 64 x D; a partition's layouts count
    # its own 4 warps.
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_M, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, HEAD_DIM, 16])
    # P^T and dS^T enter their products from registers, two fp16 per register.
    a_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    key_l: gl.constexpr = gl.SliceLayout(1, s_layout)  # one value per key row
    query_l: gl.constexpr = gl.SliceLayout(0, s_layout)  # one value per query column
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
        st_tok = warpgroup_mma(k, q.permute((1, 0)), s_zero, use_acc=False, is_async=True)
        mbarrier.wait(do_ready.index(s), ph)
        # dP^T needs no P: issued now, it runs under the exponentials below.
        dp_tok = warpgroup_mma(v, do.permute((1, 0)), s_zero, use_acc=False, is_async=True)
        sT = warpgroup_mma_wait(1, deps=(st_tok,))  # S^T done; dP^T may still run
        # L along the columns: each thread holds the values of its own columns.
        lse = l_bufs.index(s).load(query_l)
        pT = gl.exp2(sT * qk_scale - lse[None, :])
        if CAUSAL:
            # Only a block with a query before this warpgroup's last key needs it.
            if m0 < key0 + WG_ROWS:
                offs_m = m0 + gl.arange(0, BLOCK_M, layout=query_l)
                pT = gl.where(offs_m[None, :] >= offs_n[:, None], pT, 0.0)
        # P^T is kept in fp16 only (dS^T below reads it too: one rounding of
        # 2^-11, as dS^T's own): the FP32 copy would cost BLOCK_M / 2 registers
        # and spill. The conversion to the operand layout moves no data.
        p16 = pT.to(f16)
        dpT = warpgroup_mma_wait(0, deps=(dp_tok,))
        delta = delta_bufs.index(s).load(query_l)
        dsT = p16.to(gl.float32) * (dpT - delta[None, :])
        # Both register-operand products are issued only now: PTX leaves reading
        # a wgmma's A registers while it runs undefined, and dS^T reads P^T. The
        # other consumer warpgroup keeps the tensor cores busy meanwhile.
        pT16 = gl.convert_layout(p16, a_layout)
        ds16 = gl.convert_layout(dsT.to(f16), a_layout)
        dv_tok = warpgroup_mma(pT16, do, dv, is_async=True)
        dk_tok = warpgroup_mma(ds16, q, dk, is_async=True)
        # The register operands are named too, so that nothing reuses their
        # registers before the products that read them have retired.
        dv, dk, pT16, ds16 = warpgroup_mma_wait(0, deps=(dv_tok, dk_tok, pT16, ds16))
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


@gluon.jit
def dkdv_kernel(q_desc, k_desc, v_desc, do_desc, dk_desc, dv_desc, l_desc, delta_desc, seq_len,
                sm_scale, qk_scale, CAUSAL: gl.constexpr, STAGES: gl.constexpr,
                CONSUMER_REGS: gl.constexpr, PRODUCER_REGS: gl.constexpr):
    BLOCK_M: gl.constexpr = q_desc.block_type.shape[0]
    D: gl.constexpr = q_desc.block_type.shape[1]
    f16: gl.constexpr = q_desc.dtype
    # K and V in two 64-row halves, one per consumer warpgroup; Q and dO in rings.
    k_smem = gl.allocate_shared_memory(f16, [2, WG_ROWS, D], k_desc.layout)
    v_smem = gl.allocate_shared_memory(f16, [2, WG_ROWS, D], v_desc.layout)
    q_bufs = gl.allocate_shared_memory(f16, [STAGES, BLOCK_M, D], q_desc.layout)
    do_bufs = gl.allocate_shared_memory(f16, [STAGES, BLOCK_M, D], do_desc.layout)
    l_bufs = gl.allocate_shared_memory(gl.float32, [STAGES, BLOCK_M], l_desc.layout)
    delta_bufs = gl.allocate_shared_memory(gl.float32, [STAGES, BLOCK_M], delta_desc.layout)
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
    gl.warp_specialize(
        [
            (_dkdv_consumer, (io, ring, seq_len, sm_scale, qk_scale, 0, CAUSAL)),
            (_dkdv_consumer, (io, ring, seq_len, sm_scale, qk_scale, 1, CAUSAL)),
            (_dkdv_producer, (descs, (k_smem, v_smem, kv_bar), ring, seq_len, CAUSAL)),
        ],
        [4, 1],  # workers: consumer warpgroup 1, the producer warp
        [CONSUMER_REGS, PRODUCER_REGS],
    )


# -- dQ ------------------------------------------------------------------------------


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
def _dq_producer(q_desc, do_desc, k_desc, v_desc, resident, ring, seq_len, CAUSAL: gl.constexpr):
    # One warp: this block's Q and dO once, then K and V of every key block into
    # the ring, each on its own barrier (S = Q K^T can start before V lands).
    q_smem, do_smem, qdo_bar = resident
    k_bufs, v_bufs, k_ready, k_empty, v_ready, v_empty = ring
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[0]
    STAGES: gl.constexpr = k_bufs.type.shape[0]
    m0 = _q_block(seq_len, CAUSAL) * (2 * WG_ROWS)
    row0 = gl.program_id(1) * seq_len
    mbarrier.expect(qdo_bar, 2 * q_desc.block_type.nbytes + 2 * do_desc.block_type.nbytes)
    for w in gl.static_range(2):
        tma.async_copy_global_to_shared(q_desc, [row0 + m0 + w * WG_ROWS, 0], qdo_bar, q_smem.index(w))
        tma.async_copy_global_to_shared(do_desc, [row0 + m0 + w * WG_ROWS, 0], qdo_bar, do_smem.index(w))
    for j in range(_key_blocks(m0, seq_len, BLOCK_N, CAUSAL)):
        s = j % STAGES
        lap = (j // STAGES) & 1
        mbarrier.wait(k_empty.index(s), lap ^ 1)
        mbarrier.expect(k_ready.index(s), k_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(k_desc, [row0 + j * BLOCK_N, 0], k_ready.index(s), k_bufs.index(s))
        mbarrier.wait(v_empty.index(s), lap ^ 1)
        mbarrier.expect(v_ready.index(s), v_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(v_desc, [row0 + j * BLOCK_N, 0], v_ready.index(s), v_bufs.index(s))


@gluon.jit
def _dq_consumer(io, ring, L, Delta, seq_len, sm_scale, qk_scale, WG: gl.constexpr,
                 CAUSAL: gl.constexpr):
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
    a_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
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
        s_tok = warpgroup_mma(q, kb.permute((1, 0)), s_zero, use_acc=False, is_async=True)
        mbarrier.wait(v_ready.index(s), ph)
        dp_tok = warpgroup_mma(do, v_bufs.index(s).permute((1, 0)), s_zero, use_acc=False, is_async=True)
        sc = warpgroup_mma_wait(1, deps=(s_tok,))  # S done; dP may still run
        p = gl.exp2(sc * qk_scale - lse[:, None])
        if CAUSAL:
            # Only a block with a key past this warpgroup's first query needs it.
            if j * BLOCK_N + BLOCK_N > q0 + 1:
                offs_n = j * BLOCK_N + gl.arange(0, BLOCK_N, layout=key_l)
                p = gl.where(offs_m[:, None] >= offs_n[None, :], p, 0.0)
        dp = warpgroup_mma_wait(0, deps=(dp_tok,))
        mbarrier.arrive(v_empty.index(s), count=1)  # V's last reader (dP) has retired
        ds16 = gl.convert_layout((p * (dp - delta[:, None])).to(f16), a_layout)
        dq_tok = warpgroup_mma(ds16, kb, dq, is_async=True)
        dq, ds16 = warpgroup_mma_wait(0, deps=(dq_tok, ds16))
        mbarrier.arrive(k_empty.index(s), count=1)
    # Q's tile is dead (its last reader has retired): it stages dQ for the store.
    q.store((dq * sm_scale).to(f16))
    fence_async_shared()
    tma.async_copy_shared_to_global(dq_desc, [row0 + q0, 0], q)
    tma.store_wait(0)


@gluon.jit
def dq_kernel(q_desc, k_desc, v_desc, do_desc, dq_desc, L, Delta, seq_len, sm_scale, qk_scale,
              CAUSAL: gl.constexpr, STAGES: gl.constexpr, CONSUMER_REGS: gl.constexpr,
              PRODUCER_REGS: gl.constexpr):
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
    gl.warp_specialize(
        [
            (_dq_consumer, (io, ring, L, Delta, seq_len, sm_scale, qk_scale, 0, CAUSAL)),
            (_dq_consumer, (io, ring, L, Delta, seq_len, sm_scale, qk_scale, 1, CAUSAL)),
            (_dq_producer, (q_desc, do_desc, k_desc, v_desc, (q_smem, do_smem, qdo_bar), ring,
                            seq_len, CAUSAL)),
        ],
        [4, 1],
        [CONSUMER_REGS, PRODUCER_REGS],
    )


# -- Host side -------------------------------------------------------------------------


def forward_lse(q, k, v, causal, sm_scale=None):
    """(o, lse) from the course's tl forward: lse is (B * H, S) FP32, base 2, scaled scores."""
    D = q.shape[-1]
    sm_scale = 1.0 / math.sqrt(D) if sm_scale is None else sm_scale
    cfg = tl_bwd.configs_for(D, causal, q.device.type)
    return tl_bwd.attention_forward(q.contiguous(), k.contiguous(), v.contiguous(), causal, sm_scale, cfg)


def attention_bwd_gluon(q, k, v, o, do, lse, causal, sm_scale=None, **config):
    """(dq, dk, dv) of softmax(q k^T * sm_scale [+ causal]) v; fp16 (B, H, S, D), S % 128 == 0.

    config: block_m (query rows per dK/dV step), block_n (key rows per dQ step),
    stages (ring depth, both kernels), consumer_regs, producer_regs, out (a
    (dq, dk, dv) triple to write into), kernels (a subset of ("delta", "dkdv",
    "dq") to launch; for compile-only tests, which stop at the first launch).
    """
    B, H, S, D = q.shape
    assert k.shape == v.shape == o.shape == do.shape == q.shape
    assert q.dtype == k.dtype == v.dtype == do.dtype == torch.float16
    assert D in (64, 128) and S % BLOCK_ROWS == 0, "D in (64, 128), S % 128 == 0"
    assert lse.shape == (B * H, S) and lse.dtype == torch.float32
    for t in (q, k, v, o, do, lse):
        assert t.is_contiguous()
    sm_scale = 1.0 / math.sqrt(D) if sm_scale is None else sm_scale
    cfg = {**CONFIGS[D], "consumer_regs": 240, "producer_regs": 24, "out": None,
           "kernels": ("delta", "dkdv", "dq"), **config}
    block_m, block_n = cfg["block_m"], cfg["block_n"]
    assert BLOCK_ROWS % block_m == 0 and S % block_n == 0
    dq, dk, dv = cfg["out"] if cfg["out"] is not None else (torch.empty_like(q) for _ in range(3))
    f16 = gl.float16

    def desc(t, rows):  # t as (B * H * S, D), tiles of rows x D
        block = [rows, D]
        return TensorDescriptor.from_tensor(t.view(B * H * S, D), block,
                                            gl.NVMMASharedLayout.get_default_for(block, f16))

    def rows_of(t, rows):  # a (B * H, S) FP32 statistic as one row vector, tiles of rows
        return TensorDescriptor.from_tensor(t.view(B * H * S), [rows],
                                            gl.NVMMASharedLayout.get_default_for([rows], gl.float32))

    delta = torch.empty_like(lse)
    if "delta" in cfg["kernels"]:
        tl_bwd.attn_bwd_preprocess_kernel[(S // 128, B * H)](o, do, delta, S, HEAD_DIM=D, BLOCK_M=128)
    qk_scale = sm_scale * LOG2E
    regs = (cfg["consumer_regs"], cfg["producer_regs"])
    rows = WG_ROWS.value
    if "dkdv" in cfg["kernels"]:
        dkdv_kernel[(S // BLOCK_ROWS, B * H)](
            desc(q, block_m), desc(k, rows), desc(v, rows), desc(do, block_m), desc(dk, rows),
            desc(dv, rows), rows_of(lse, block_m), rows_of(delta, block_m), S, sm_scale, qk_scale,
            causal, cfg["stages"], *regs, num_warps=4)
    if "dq" in cfg["kernels"]:
        dq_kernel[(S // BLOCK_ROWS, B * H)](
            desc(q, rows), desc(k, block_n), desc(v, block_n), desc(do, rows), desc(dq, rows),
            lse, delta, S, sm_scale, qk_scale, causal, cfg["stages"], *regs, num_warps=4)
    return dq, dk, dv


# -- On the GPU --------------------------------------------------------------------------

TOL = 1e-2  # max error over max|ref|, per gradient: the tl lesson's bound


def _reference_grads(q, k, v, do, causal, sm_scale):
    q, k, v = (t.detach().double().requires_grad_() for t in (q, k, v))
    scores = (q @ k.transpose(-1, -2)) * sm_scale
    if causal:
        S = q.shape[-2]
        future = torch.ones(S, S, dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
    (torch.softmax(scores, dim=-1) @ v).backward(do.double())
    return q.grad, k.grad, v.grad


def check_on_gpu() -> bool:
    ok = True
    shapes = [(1, 2), (2, 3), (1, 4), (2, 2)]  # (B, H), cycled over the cases
    case = 0
    for S in (128, 384, 1024):
        for D in (64, 128):
            for causal in (False, True):
                B, H = shapes[case % len(shapes)]
                case += 1
                name = f"B{B} H{H} S{S} D{D} {'causal' if causal else 'full'}"
                print(f"case {name} ...", flush=True)  # printed first: locates a hang
                gen = torch.Generator().manual_seed(case)
                q, k, v, do = (torch.randn((B, H, S, D), generator=gen).to("cuda", torch.float16)
                               for _ in range(4))
                sm_scale = 1.0 / math.sqrt(D)
                o, lse = forward_lse(q, k, v, causal, sm_scale)
                # NaN poison: a tile the kernels never write cannot pass.
                out = tuple(torch.full_like(q, float("nan")) for _ in range(3))
                got = attention_bwd_gluon(q, k, v, o, do, lse, causal, sm_scale, out=out)
                torch.cuda.synchronize()
                want = _reference_grads(q, k, v, do, causal, sm_scale)
                errs = []
                for label, g, r in zip(("dq", "dk", "dv"), got, want, strict=True):
                    err = float((g.double() - r).abs().max() / r.abs().max())
                    err = float("inf") if math.isnan(err) else err
                    ok &= err <= TOL
                    errs.append(f"{label} {err:.2e}")
                print(f"  {name}: {', '.join(errs)}", flush=True)
    print("BWD_CHECK ok" if ok else "BWD_CHECK failed", flush=True)
    return ok


def _bench_case(B, H, S, D, causal):
    """Median ms of our backward (preprocess, dK/dV, dQ) and of cuDNN's, same inputs."""
    from triton.testing import do_bench

    gen = torch.Generator().manual_seed(D + causal)
    q, k, v, do = (torch.randn((B, H, S, D), generator=gen).to("cuda", torch.float16) for _ in range(4))
    sm_scale = 1.0 / math.sqrt(D)
    o, lse = forward_lse(q, k, v, causal, sm_scale)
    ours = do_bench(lambda: attention_bwd_gluon(q, k, v, o, do, lse, causal, sm_scale), return_mode="median")
    qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.CUDNN_ATTENTION):
        out = torch.nn.functional.scaled_dot_product_attention(qg, kg, vg, is_causal=causal)
        theirs = do_bench(lambda: torch.autograd.grad(out, (qg, kg, vg), do, retain_graph=True),
                          return_mode="median")
    return ours, theirs


def bench_on_gpu() -> None:
    B, H, S = 4, 32, 4096
    for D in (128, 64):
        for causal in (False, True):
            ours, theirs = _bench_case(B, H, S, D, causal)
            flop = 2.5 * 4.0 * B * H * S * S * D / (2 if causal else 1)  # the tl lesson's count
            print(f"B{B} H{H} S{S} D{D} {'causal' if causal else 'full'}: gluon {ours:.3f} ms "
                  f"({flop / ours * 1e-9:.0f} TFLOP/s), cuDNN {theirs:.3f} ms "
                  f"({flop / theirs * 1e-9:.0f} TFLOP/s), cuDNN/gluon time ratio {theirs / ours:.3f}",
                  flush=True)
            torch.cuda.empty_cache()


if __name__ == "__main__":
    passed = check_on_gpu()
    if "--bench" in sys.argv[1:]:
        bench_on_gpu()
    sys.exit(0 if passed else 1)
