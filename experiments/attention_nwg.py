"""Issue 38: the lesson's persistent Gluon attention forward, generalised (an experiment, not a lesson).

Two knobs the lesson's kernel (code/gluon-attention/gluon_attention.py) does not have:

- NWG consumer warpgroups (2 or 3), each owning its own 64-row query block of the same head, all
  sharing the K/V ring (empty barriers count NWG arrivals) and taking turns at the tensor cores in a
  round robin (warpgroup i waits turn[i], then arrives on turn[(i + 1) % NWG]). FlashAttention-3 runs
  D64 this way (a 192-row tile, 3 consumer warpgroups): at D64 the softmax of a block costs about as
  much as its two products, so a third warpgroup gives the schedulers more to overlap. 4096 is not a
  multiple of 192: the last tile of a head has one valid 64-row block; a warpgroup whose block lies
  past the sequence only keeps the barrier protocol (no products, no store).
- FOLD: the scale folded into the exponential's argument, as Triton's tutorial 06 does:
  m = max(m, max(s) * scale), p = exp2(s * scale - m) (one FMA per element instead of a multiply
  and a subtraction).

Prediction (before any GPU run): FOLD +1 to +3 % at D64, less at D128 (the softmax is a smaller
share); NWG=3 at D64 +3 to +8 % (FA3's D64 lead over cuDNN is 16-20 % on the H100), nothing or a loss
at D128 (the registers: 160 per consumer thread at most with 3 warpgroups). Compiled for sm_90 with
Triton 3.6 on a CPU (no spills); checked on the GPU by experiments/gluon_variants.py's smoke step.
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

# The lesson's schedule and key-block count, unchanged here: imported, not copied.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "code" / "gluon-attention"))
from gluon_attention import LOG2E, WG_ROWS, _num_kv_blocks, _tile  # noqa: E402


@gluon.jit
def _producer(q_desc, k_desc, v_desc, q_smem, q_bars, ring, seq_len, tiles,
              CAUSAL: gl.constexpr, NWG: gl.constexpr):
    # One warp: each tile's Q (both warpgroups' halves on one barrier) once
    # the last tile's is free, then K and V of each key block into the ring,
    # each on its own barrier, so the QK^T of a block can start before its V
    # has landed. `c` counts key blocks over the program's whole walk: it
    # picks the slot and the lap, so the ring carries on across tiles.
    q_bar, q_empty = q_bars
    k_bufs, v_bufs, k_ready, k_empty, v_ready, v_empty = ring
    BLOCK_M: gl.constexpr = NWG * WG_ROWS
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[0]
    STAGES: gl.constexpr = k_bufs.type.shape[0]
    c = 0
    it = 0
    for t in range(gl.program_id(0), tiles[0], gl.num_programs(0)):
        q_block, bh = _tile(t, seq_len, tiles[1], BLOCK_M, CAUSAL, tiles[2])
        row0 = bh * seq_len  # the first row of this (batch, head) in the 2-D views
        m0 = q_block * BLOCK_M
        mbarrier.wait(q_empty, (it & 1) ^ 1)  # both warpgroups are done with the last Q
        # Every warpgroup's block, valid or not (one past the sequence reads the next head's rows, or
        # zeros past the tensor: never used), so the byte count is the same for every tile.
        mbarrier.expect(q_bar, NWG * q_desc.block_type.nbytes)
        for w in gl.static_range(NWG):
            tma.async_copy_global_to_shared(q_desc, [row0 + m0 + w * WG_ROWS, 0], q_bar, q_smem.index(w))
        for j in range(_num_kv_blocks(m0, seq_len, BLOCK_M, BLOCK_N, CAUSAL)):
            s = c % STAGES
            lap = (c // STAGES) & 1
            mbarrier.wait(k_empty.index(s), lap ^ 1)
            mbarrier.expect(k_ready.index(s), k_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(
                k_desc, [row0 + j * BLOCK_N, 0], k_ready.index(s), k_bufs.index(s))
            mbarrier.wait(v_empty.index(s), lap ^ 1)
            mbarrier.expect(v_ready.index(s), v_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(
                v_desc, [row0 + j * BLOCK_N, 0], v_ready.index(s), v_bufs.index(s))
            c += 1
        it += 1



@gluon.jit
def _softmax_step(s, m_i, l_i, qk_scale, offs_m, kv_start, CAUSAL: gl.constexpr,
                  s_layout: gl.constexpr, MASK_ALL: gl.constexpr, FOLD: gl.constexpr):
    # One block of the online softmax, in base 2 (log2 e is in qk_scale):
    # the new running max, the factor alpha that rescales what was summed
    # under the old max, this block's probabilities and the new running sum.
    if not FOLD:
        s = s * qk_scale
    if CAUSAL:
        # Only a block that reaches past this warpgroup's first query row
        # needs the mask; the blocks before it are entirely visible.
        if MASK_ALL or kv_start + s.shape[1] > gl.min(offs_m, axis=0):
            cols: gl.constexpr = gl.SliceLayout(0, s_layout)  # a row of s_layout
            offs_n = kv_start + gl.arange(0, s.shape[1], layout=cols)
            s = gl.where(offs_m[:, None] >= offs_n[None, :], s, -float("inf"))
    if FOLD:  # qk_scale > 0, so max(s * scale) = max(s) * scale; one FMA per element below
        m_new = gl.maximum(m_i, gl.max(s, axis=1) * qk_scale)
        alpha = gl.exp2(m_i - m_new)
        p = gl.exp2(s * qk_scale - m_new[:, None])
    else:
        m_new = gl.maximum(m_i, gl.max(s, axis=1))
        alpha = gl.exp2(m_i - m_new)
        p = gl.exp2(s - m_new[:, None])
    l_i = l_i * alpha + gl.sum(p, axis=1)
    return p, m_new, l_i, alpha



@gluon.jit
def _consumer(io, ring, turn, seq_len, qk_scale, tiles, WG: gl.constexpr,
              CAUSAL: gl.constexpr, PINGPONG: gl.constexpr, MASK_ALL: gl.constexpr,
              NWG: gl.constexpr, FOLD: gl.constexpr, REUSE_S: gl.constexpr):
    o_desc, q_smem, o_smem, q_bar, q_empty = io
    k_bufs, v_bufs, k_ready, k_empty, v_ready, v_empty = ring
    BLOCK_M: gl.constexpr = NWG * WG_ROWS
    NEXT: gl.constexpr = (WG + 1) % NWG  # whose turn comes after mine
    FIRST: gl.constexpr = 1 if WG == 0 else 0  # warpgroup 0 goes first: its wait passes a fresh barrier
    BLOCK_N: gl.constexpr = k_bufs.type.shape[1]
    HEAD_DIM: gl.constexpr = k_bufs.type.shape[2]
    # The accumulators' layouts: a warpgroup's 4 warps, 16 rows each (a
    # partition's layouts count its own warps). S is 64 x BLOCK_N, O 64 x D.
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_N, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, HEAD_DIM, 16])
    # P goes into the second product from registers, as wgmma's A operand:
    # two fp16 per 32-bit register (k_width=2).
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout,
                                                 k_width=2)
    # A row statistic (m_i, l_i, alpha): one value per row, held by the row's
    # four threads; the slice of the accumulator's layout along its columns.
    row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)

    s_zero = gl.zeros([WG_ROWS, BLOCK_N], gl.float32, layout=s_layout)
    q = q_smem.index(WG)
    # `c` counts key blocks over the program's walk, as the producer's does:
    # it gives every block its slot, its phase and its ping-pong turn.
    c0 = 0
    it = 0
    for t in range(gl.program_id(0), tiles[0], gl.num_programs(0)):
        q_block, bh = _tile(t, seq_len, tiles[1], BLOCK_M, CAUSAL, tiles[2])
        m0 = q_block * BLOCK_M
        n_kv = _num_kv_blocks(m0, seq_len, BLOCK_M, BLOCK_N, CAUSAL)
        offs_m = m0 + WG * WG_ROWS + gl.arange(0, WG_ROWS, layout=row_s)
        m_i = gl.full([WG_ROWS], -float("inf"), gl.float32, layout=row_s)
        l_i = gl.full([WG_ROWS], 0.0, gl.float32, layout=row_s)
        acc = gl.zeros([WG_ROWS, HEAD_DIM], gl.float32, layout=o_layout)
        mbarrier.wait(q_bar, it & 1)
        if m0 + WG * WG_ROWS < seq_len:
            c0 = _tile_body(q, o_desc, q_empty, ring, turn, seq_len, qk_scale, bh, m0, n_kv, c0, offs_m,
                            m_i, l_i, acc, s_zero, WG, CAUSAL, PINGPONG, MASK_ALL, NEXT, FIRST, FOLD, REUSE_S,
                            s_layout, o_layout, p_layout, row_o, o_smem)
        else:
            c0 = _idle_body(q_empty, ring, turn, n_kv, c0, WG, PINGPONG, NEXT, FIRST)
        it += 1
    tma.store_wait(0)


@gluon.jit
def _idle_body(q_empty, ring, turn, n_kv, c0, WG: gl.constexpr, PINGPONG: gl.constexpr,
               NEXT: gl.constexpr, FIRST: gl.constexpr):
    # A warpgroup whose 64 rows lie past the sequence: it keeps the protocol (its turns, its arrivals
    # on every stage's empty barriers, Q's) and computes nothing.
    k_bufs, v_bufs, k_ready, k_empty, v_ready, v_empty = ring
    STAGES: gl.constexpr = k_bufs.type.shape[0]
    for j in range(n_kv):
        c = c0 + j
        s = c % STAGES
        if PINGPONG:
            mbarrier.wait(turn.index(WG), (c & 1) ^ FIRST)
            mbarrier.arrive(turn.index(NEXT), count=1)
        mbarrier.wait(k_ready.index(s), (c // STAGES) & 1)
        mbarrier.arrive(k_empty.index(s), count=1)
        mbarrier.wait(v_ready.index(s), (c // STAGES) & 1)
        mbarrier.arrive(v_empty.index(s), count=1)
    mbarrier.arrive(q_empty, count=1)
    return c0 + n_kv


@gluon.jit
def _tile_body(q, o_desc, q_empty, ring, turn, seq_len, qk_scale, bh, m0, n_kv, c0, offs_m,
               m_i, l_i, acc, s_zero, WG: gl.constexpr, CAUSAL: gl.constexpr, PINGPONG: gl.constexpr,
               MASK_ALL: gl.constexpr, NEXT: gl.constexpr, FIRST: gl.constexpr, FOLD: gl.constexpr,
               REUSE_S: gl.constexpr,
               s_layout: gl.constexpr, o_layout: gl.constexpr, p_layout: gl.constexpr,
               row_o: gl.constexpr, o_smem):
    k_bufs, v_bufs, k_ready, k_empty, v_ready, v_empty = ring
    BLOCK_N: gl.constexpr = k_bufs.type.shape[1]
    STAGES: gl.constexpr = k_bufs.type.shape[0]
    # Block 0: S = Q K^T, then its softmax; nothing to overlap yet.
    s0 = c0 % STAGES
    if PINGPONG:
        mbarrier.wait(turn.index(WG), (c0 & 1) ^ FIRST)
    mbarrier.wait(k_ready.index(s0), (c0 // STAGES) & 1)
    kt = k_bufs.index(s0).permute((1, 0))
    s_tok = warpgroup_mma(q, kt, s_zero, use_acc=False, is_async=True)
    if PINGPONG:
        mbarrier.arrive(turn.index(NEXT), count=1)
    s = warpgroup_mma_wait(0, deps=(s_tok,))
    mbarrier.arrive(k_empty.index(s0), count=1)
    p, m_i, l_i, alpha = _softmax_step(s, m_i, l_i, qk_scale, offs_m, 0, CAUSAL,
                                       s_layout, MASK_ALL, FOLD)

    for j in range(1, n_kv):
        c = c0 + j
        sj = c % STAGES
        sp = (c - 1) % STAGES
        if PINGPONG:  # my turn at the tensor cores: the other one issued
            mbarrier.wait(turn.index(WG), (c & 1) ^ FIRST)
        # Issue S_j = Q K_j^T first, then O += P_{j-1} V_{j-1}: the softmax of
        # block j can start as soon as the first is done, while the second runs.
        mbarrier.wait(k_ready.index(sj), (c // STAGES) & 1)
        kt = k_bufs.index(sj).permute((1, 0))
        # use_acc=False ignores the accumulator's values: handing it the previous block's S (dead since
        # its softmax) instead of a zero tile may spare 64 x BLOCK_N / 128 live registers.
        if REUSE_S:
            s_tok = warpgroup_mma(q, kt, s, use_acc=False, is_async=True)
        else:
            s_tok = warpgroup_mma(q, kt, s_zero, use_acc=False, is_async=True)
        # Both conversions are free: the same thread and register hold each
        # element in both layouts (drawn on the page), so no data moves.
        acc = acc * gl.convert_layout(alpha, row_o)[:, None]
        mbarrier.wait(v_ready.index(sp), ((c - 1) // STAGES) & 1)
        p16 = gl.convert_layout(p.to(gl.float16), p_layout)
        o_tok = warpgroup_mma(p16, v_bufs.index(sp), acc, is_async=True)
        if PINGPONG:
            mbarrier.arrive(turn.index(NEXT), count=1)
        s = warpgroup_mma_wait(1, deps=(s_tok,))  # S_j is done; P V may still run
        mbarrier.arrive(k_empty.index(sj), count=1)
        p, m_i, l_i, alpha = _softmax_step(s, m_i, l_i, qk_scale, offs_m,
                                           j * BLOCK_N, CAUSAL, s_layout, MASK_ALL, FOLD)
        acc = warpgroup_mma_wait(0, deps=(o_tok,))
        mbarrier.arrive(v_empty.index(sp), count=1)
    # This warpgroup's last Q K^T is done: the producer may load the next Q.
    mbarrier.arrive(q_empty, count=1)

    # The last block's P V, then O / l, written through shared memory by TMA.
    cl = c0 + n_kv - 1
    sl = cl % STAGES
    acc = acc * gl.convert_layout(alpha, row_o)[:, None]
    mbarrier.wait(v_ready.index(sl), (cl // STAGES) & 1)
    p16 = gl.convert_layout(p.to(gl.float16), p_layout)
    o_tok = warpgroup_mma(p16, v_bufs.index(sl), acc, is_async=True)
    acc = warpgroup_mma_wait(0, deps=(o_tok,))
    mbarrier.arrive(v_empty.index(sl), count=1)
    o = acc / gl.convert_layout(l_i, row_o)[:, None]
    tma.store_wait(0)  # the last tile's output has left o_smem (it ran under this)
    o_smem.index(WG).store(o.to(gl.float16))
    fence_async_shared()  # the register store above, before the TMA store reads it
    tma.async_copy_shared_to_global(
        o_desc, [bh * seq_len + m0 + WG * WG_ROWS, 0], o_smem.index(WG))
    return c0 + n_kv



@gluon.jit
def attn_fwd_ws_kernel(q_desc, k_desc, v_desc, o_desc, seq_len, n_heads_total, n_tiles,
                       qk_scale, CAUSAL: gl.constexpr, STAGES: gl.constexpr,
                       PINGPONG: gl.constexpr, CONSUMER_REGS: gl.constexpr,
                       PRODUCER_REGS: gl.constexpr, GROUP_HEADS: gl.constexpr,
                       MASK_ALL: gl.constexpr, NWG: gl.constexpr, FOLD: gl.constexpr,
                       REUSE_S: gl.constexpr):
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[0]
    D: gl.constexpr = k_desc.block_type.shape[1]
    # Q and O in two 64-row halves, one per consumer warpgroup; K and V in rings.
    f16: gl.constexpr = q_desc.dtype
    q_smem = gl.allocate_shared_memory(f16, [NWG, WG_ROWS, D], q_desc.layout)
    k_bufs = gl.allocate_shared_memory(f16, [STAGES, BLOCK_N, D], k_desc.layout)
    v_bufs = gl.allocate_shared_memory(f16, [STAGES, BLOCK_N, D], v_desc.layout)
    o_smem = gl.allocate_shared_memory(f16, [NWG, WG_ROWS, D], o_desc.layout)
    # Barriers: Q landed and Q free again (count 2: both warpgroups read it); per
    # stage, K and V ready (the producer's expect) and empty (count 2); two turns.
    bar: gl.constexpr = mbarrier.MBarrierLayout()
    q_bar = gl.allocate_shared_memory(gl.int64, [1], bar)
    q_empty = gl.allocate_shared_memory(gl.int64, [1], bar)
    k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], bar)
    k_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], bar)
    v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], bar)
    v_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], bar)
    turn = gl.allocate_shared_memory(gl.int64, [NWG, 1], bar)
    mbarrier.init(q_bar, count=1)
    mbarrier.init(q_empty, count=NWG)
    for k in gl.static_range(STAGES):
        mbarrier.init(k_ready.index(k), count=1)
        mbarrier.init(v_ready.index(k), count=1)
        mbarrier.init(k_empty.index(k), count=NWG)
        mbarrier.init(v_empty.index(k), count=NWG)
    for k in gl.static_range(NWG):
        mbarrier.init(turn.index(k), count=1)
    # Named once, handed to every role: the walk's tiles, the K/V ring with its
    # barriers, and what the consumers read and write besides it.
    tiles = (n_tiles, n_heads_total, GROUP_HEADS)
    ring = (k_bufs, v_bufs, k_ready, k_empty, v_ready, v_empty)
    io = (o_desc, q_smem, o_smem, q_bar, q_empty)
    if NWG == 3:
        gl.warp_specialize(
            [(_consumer, (io, ring, turn, seq_len, qk_scale, tiles, 0, CAUSAL, PINGPONG, MASK_ALL, NWG, FOLD, REUSE_S)),
             (_consumer, (io, ring, turn, seq_len, qk_scale, tiles, 1, CAUSAL, PINGPONG, MASK_ALL, NWG, FOLD, REUSE_S)),
             (_consumer, (io, ring, turn, seq_len, qk_scale, tiles, 2, CAUSAL, PINGPONG, MASK_ALL, NWG, FOLD, REUSE_S)),
             (_producer, (q_desc, k_desc, v_desc, q_smem, (q_bar, q_empty), ring, seq_len, tiles, CAUSAL, NWG))],
            [4, 4, 1], [CONSUMER_REGS, CONSUMER_REGS, PRODUCER_REGS])
    else:
        gl.warp_specialize(
            [(_consumer, (io, ring, turn, seq_len, qk_scale, tiles, 0, CAUSAL, PINGPONG, MASK_ALL, NWG, FOLD, REUSE_S)),
             (_consumer, (io, ring, turn, seq_len, qk_scale, tiles, 1, CAUSAL, PINGPONG, MASK_ALL, NWG, FOLD, REUSE_S)),
             (_producer, (q_desc, k_desc, v_desc, q_smem, (q_bar, q_empty), ring, seq_len, tiles, CAUSAL, NWG))],
            [4, 1], [CONSUMER_REGS, PRODUCER_REGS])



# -- launcher --------------------------------------------------------------------


def attention_ws(
    q,
    k,
    v,
    causal,
    sm_scale=None,
    block_n=128,
    stages=2,
    pingpong=True,
    consumer_regs=240,
    producer_regs=24,
    maxnreg=None,
    group_heads=8,
    mask_all=False,
    programs=None,
    with_kernel=False,
    nwg=2,
    fold=False,
    reuse_s=False,
):
    """softmax(q k^T * sm_scale [+ causal mask]) v, fp16 (B, H, S, D), S % 128 == 0.

    `programs`: how many programs walk the tiles; None, one per SM (the
    persistent kernel); "tiles", one per tile, each walking one.
    """
    B, H, S, D = q.shape
    assert (
        k.shape == v.shape == q.shape and q.dtype == k.dtype == v.dtype == torch.float16
    )
    assert S % (2 * WG_ROWS.value) == 0 and S % block_n == 0, (
        "this kernel needs S % 128 == 0"
    )
    assert D in (64, 128)
    for t in (q, k, v):
        assert t.is_contiguous()
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(D)
    out = torch.empty_like(q)
    f16 = gl.float16

    rows_wg = WG_ROWS.value

    def desc(t, rows):
        block = [rows, D]
        return TensorDescriptor.from_tensor(
            t.view(B * H * S, D),
            block,
            gl.NVMMASharedLayout.get_default_for(block, f16),
        )

    kw = {"maxnreg": maxnreg} if maxnreg else {}
    n_tiles = -(-S // (nwg * rows_wg)) * B * H
    if programs is None:
        programs = torch.cuda.get_device_properties(q.device).multi_processor_count
    grid = (n_tiles if programs == "tiles" else min(programs, n_tiles),)
    kern = attn_fwd_ws_kernel[grid](
        desc(q, rows_wg),
        desc(k, block_n),
        desc(v, block_n),
        desc(out, rows_wg),
        S,
        B * H,
        n_tiles,
        sm_scale * LOG2E,
        causal,
        stages,
        pingpong,
        consumer_regs,
        producer_regs,
        min(group_heads, B * H),
        mask_all,
        nwg,
        fold,
        reuse_s,
        num_warps=4,
        **kw,
    )
    return (out, kern) if with_kernel else out
