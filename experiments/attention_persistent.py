"""Issue 38: a persistent schedule for the Gluon attention forward (an experiment, not a lesson).

The lesson's kernel (code/gluon-attention/gluon_attention.py) launches one program per
(query block, head): 4,096 programs at B4 H32 S4096, about 31 waves of 132 SMs, each paying
barrier set-up, the Q load and the output store with nothing to overlap them. Here one program
per SM walks the same tiles in the same order (grouped heads, causal tiles longest first), with
three changes that only a persistent program can make:

- the K/V ring and the ping-pong turns carry on across tiles (one running count of key blocks
  gives every slot, phase and turn), so the producer loads the next tile's first blocks while the
  consumers finish the current one;
- Q gets an "empty" barrier: the producer loads the next tile's Q as soon as both warpgroups
  have issued their last Q K^T of this one;
- the output store of a tile is waited for only before the next tile's store (tma.store_wait at
  the start of the epilogue), so it runs under the next tile's main loop.

Prediction (before any GPU run): +2 to +5 % over the lesson's kernel in every case (the per-tile
prologue/epilogue is a few % of a 31-wave launch), most at D64 where a tile is shortest. Checked
for correctness against SDPA in float64 by experiments/gluon_variants.py's smoke step, timed there.
Written against Triton 3.6's Gluon API (the H200's); compiles for sm_90 on a CPU with Triton 3.6.
"""

from __future__ import annotations

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

# The gluon-attention lesson's kernels: what this experiment leaves as the lesson has it is the lesson's own.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "code" / "gluon-attention"))
from gluon_attention import LOG2E, WG_ROWS, _tile  # noqa: E402


@gluon.jit
def _num_kv(m0, seq_len, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr):
    if CAUSAL:
        return gl.cdiv(gl.minimum(m0 + BLOCK_M, seq_len), BLOCK_N)
    else:
        return gl.cdiv(seq_len, BLOCK_N)


@gluon.jit
def _softmax(s, m_i, l_i, qk_scale, offs_m, kv_start, CAUSAL: gl.constexpr, s_layout: gl.constexpr):
    s = s * qk_scale
    if CAUSAL:
        if kv_start + s.shape[1] > gl.min(offs_m, axis=0):
            offs_n = kv_start + gl.arange(0, s.shape[1], layout=gl.SliceLayout(0, s_layout))
            s = gl.where(offs_m[:, None] >= offs_n[None, :], s, -float("inf"))
    m_new = gl.maximum(m_i, gl.max(s, axis=1))
    alpha = gl.exp2(m_i - m_new)
    p = gl.exp2(s - m_new[:, None])
    l_i = l_i * alpha + gl.sum(p, axis=1)
    return p, m_new, l_i, alpha


@gluon.jit
def _producer(descs, bufs, bars, seq_len, n_heads_total, n_tiles,
              BLOCK_M: gl.constexpr, CAUSAL: gl.constexpr, GROUP_HEADS: gl.constexpr):
    q_desc, k_desc, v_desc = descs
    q_smem, k_bufs, v_bufs = bufs
    q_bar, q_empty, k_ready, k_empty, v_ready, v_empty = bars
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[0]
    STAGES: gl.constexpr = k_bufs.type.shape[0]
    kv = 0  # key blocks loaded by this program so far: the ring's running position
    it = 0  # tiles started by this program so far
    for t in range(gl.program_id(0), n_tiles, gl.num_programs(0)):
        q_block, bh = _tile(t, seq_len, n_heads_total, BLOCK_M, CAUSAL, GROUP_HEADS)
        row0 = bh * seq_len
        m0 = q_block * BLOCK_M
        mbarrier.wait(q_empty, (it & 1) ^ 1)  # both warpgroups are done with the last tile's Q
        mbarrier.expect(q_bar, 2 * q_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(q_desc, [row0 + m0, 0], q_bar, q_smem.index(0))
        tma.async_copy_global_to_shared(q_desc, [row0 + m0 + WG_ROWS, 0], q_bar, q_smem.index(1))
        for j in range(_num_kv(m0, seq_len, BLOCK_M, BLOCK_N, CAUSAL)):
            s = kv % STAGES
            lap = (kv // STAGES) & 1
            mbarrier.wait(k_empty.index(s), lap ^ 1)
            mbarrier.expect(k_ready.index(s), k_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(k_desc, [row0 + j * BLOCK_N, 0], k_ready.index(s), k_bufs.index(s))
            mbarrier.wait(v_empty.index(s), lap ^ 1)
            mbarrier.expect(v_ready.index(s), v_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(v_desc, [row0 + j * BLOCK_N, 0], v_ready.index(s), v_bufs.index(s))
            kv += 1
        it += 1


@gluon.jit
def _consumer(o_desc, bufs, o_smem, bars, turn, seq_len, n_heads_total, n_tiles, qk_scale,
              WG: gl.constexpr, BLOCK_M: gl.constexpr, CAUSAL: gl.constexpr, GROUP_HEADS: gl.constexpr,
              PINGPONG: gl.constexpr):
    q_smem, k_bufs, v_bufs = bufs
    q_bar, q_empty, k_ready, k_empty, v_ready, v_empty = bars
    BLOCK_N: gl.constexpr = k_bufs.type.shape[1]
    HEAD_DIM: gl.constexpr = k_bufs.type.shape[2]
    STAGES: gl.constexpr = k_bufs.type.shape[0]
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_N, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, HEAD_DIM, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)
    s_zero = gl.zeros([WG_ROWS, BLOCK_N], gl.float32, layout=s_layout)
    q = q_smem.index(WG)
    kv = 0  # key blocks consumed so far: slot, phase and ping-pong turn of each block
    it = 0
    for t in range(gl.program_id(0), n_tiles, gl.num_programs(0)):
        q_block, bh = _tile(t, seq_len, n_heads_total, BLOCK_M, CAUSAL, GROUP_HEADS)
        m0 = q_block * BLOCK_M
        n_kv = _num_kv(m0, seq_len, BLOCK_M, BLOCK_N, CAUSAL)
        offs_m = m0 + WG * WG_ROWS + gl.arange(0, WG_ROWS, layout=row_s)
        m_i = gl.full([WG_ROWS], -float("inf"), gl.float32, layout=row_s)
        l_i = gl.full([WG_ROWS], 0.0, gl.float32, layout=row_s)
        acc = gl.zeros([WG_ROWS, HEAD_DIM], gl.float32, layout=o_layout)
        mbarrier.wait(q_bar, it & 1)

        s0 = kv % STAGES
        if PINGPONG:
            mbarrier.wait(turn.index(WG), (kv & 1) ^ WG ^ 1)
        mbarrier.wait(k_ready.index(s0), (kv // STAGES) & 1)
        s_tok = warpgroup_mma(q, k_bufs.index(s0).permute((1, 0)), s_zero, use_acc=False, is_async=True)
        if PINGPONG:
            mbarrier.arrive(turn.index(1 - WG), count=1)
        s = warpgroup_mma_wait(0, deps=(s_tok,))
        mbarrier.arrive(k_empty.index(s0), count=1)
        p, m_i, l_i, alpha = _softmax(s, m_i, l_i, qk_scale, offs_m, 0, CAUSAL, s_layout)

        for j in range(1, n_kv):
            c = kv + j
            sj = c % STAGES
            sp = (c - 1) % STAGES
            if PINGPONG:
                mbarrier.wait(turn.index(WG), (c & 1) ^ WG ^ 1)
            mbarrier.wait(k_ready.index(sj), (c // STAGES) & 1)
            s_tok = warpgroup_mma(q, k_bufs.index(sj).permute((1, 0)), s_zero, use_acc=False, is_async=True)
            acc = acc * gl.convert_layout(alpha, row_o)[:, None]
            mbarrier.wait(v_ready.index(sp), ((c - 1) // STAGES) & 1)
            p16 = gl.convert_layout(p.to(gl.float16), p_layout)
            o_tok = warpgroup_mma(p16, v_bufs.index(sp), acc, is_async=True)
            if PINGPONG:
                mbarrier.arrive(turn.index(1 - WG), count=1)
            s = warpgroup_mma_wait(1, deps=(s_tok,))
            mbarrier.arrive(k_empty.index(sj), count=1)
            p, m_i, l_i, alpha = _softmax(s, m_i, l_i, qk_scale, offs_m, j * BLOCK_N, CAUSAL, s_layout)
            acc = warpgroup_mma_wait(0, deps=(o_tok,))
            mbarrier.arrive(v_empty.index(sp), count=1)
        mbarrier.arrive(q_empty, count=1)  # this warpgroup's last Q K^T is done: the next Q may land

        cl = kv + n_kv - 1
        sl = cl % STAGES
        acc = acc * gl.convert_layout(alpha, row_o)[:, None]
        mbarrier.wait(v_ready.index(sl), (cl // STAGES) & 1)
        p16 = gl.convert_layout(p.to(gl.float16), p_layout)
        o_tok = warpgroup_mma(p16, v_bufs.index(sl), acc, is_async=True)
        acc = warpgroup_mma_wait(0, deps=(o_tok,))
        mbarrier.arrive(v_empty.index(sl), count=1)
        o = acc / gl.convert_layout(l_i, row_o)[:, None]
        tma.store_wait(0)  # the last tile's output has left o_smem
        o_smem.store(o.to(gl.float16))
        fence_async_shared()
        tma.async_copy_shared_to_global(o_desc, [bh * seq_len + m0 + WG * WG_ROWS, 0], o_smem)
        kv += n_kv
        it += 1
    tma.store_wait(0)


@gluon.jit
def attn_fwd_persistent_kernel(q_desc, k_desc, v_desc, o_desc, seq_len, n_heads_total, n_tiles, qk_scale,
                               CAUSAL: gl.constexpr, STAGES: gl.constexpr, PINGPONG: gl.constexpr,
                               CONSUMER_REGS: gl.constexpr, PRODUCER_REGS: gl.constexpr,
                               GROUP_HEADS: gl.constexpr):
    BLOCK_M: gl.constexpr = 2 * WG_ROWS
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[0]
    HEAD_DIM: gl.constexpr = k_desc.block_type.shape[1]
    q_smem = gl.allocate_shared_memory(q_desc.dtype, [2, WG_ROWS, HEAD_DIM], q_desc.layout)
    k_bufs = gl.allocate_shared_memory(k_desc.dtype, [STAGES, BLOCK_N, HEAD_DIM], k_desc.layout)
    v_bufs = gl.allocate_shared_memory(v_desc.dtype, [STAGES, BLOCK_N, HEAD_DIM], v_desc.layout)
    o_smem = gl.allocate_shared_memory(o_desc.dtype, [2, WG_ROWS, HEAD_DIM], o_desc.layout)
    one: gl.constexpr = mbarrier.MBarrierLayout()
    q_bar = gl.allocate_shared_memory(gl.int64, [1], one)
    q_empty = gl.allocate_shared_memory(gl.int64, [1], one)
    k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], one)
    k_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], one)
    v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], one)
    v_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], one)
    turn = gl.allocate_shared_memory(gl.int64, [2, 1], one)
    mbarrier.init(q_bar, count=1)
    mbarrier.init(q_empty, count=2)
    for k in gl.static_range(STAGES):
        mbarrier.init(k_ready.index(k), count=1)
        mbarrier.init(v_ready.index(k), count=1)
        mbarrier.init(k_empty.index(k), count=2)
        mbarrier.init(v_empty.index(k), count=2)
    for k in gl.static_range(2):
        mbarrier.init(turn.index(k), count=1)
    descs = (q_desc, k_desc, v_desc)
    bufs = (q_smem, k_bufs, v_bufs)
    bars = (q_bar, q_empty, k_ready, k_empty, v_ready, v_empty)
    gl.warp_specialize(
        [
            (_consumer, (o_desc, bufs, o_smem.index(0), bars, turn, seq_len, n_heads_total, n_tiles, qk_scale,
                         0, BLOCK_M, CAUSAL, GROUP_HEADS, PINGPONG)),
            (_consumer, (o_desc, bufs, o_smem.index(1), bars, turn, seq_len, n_heads_total, n_tiles, qk_scale,
                         1, BLOCK_M, CAUSAL, GROUP_HEADS, PINGPONG)),
            (_producer, (descs, bufs, bars, seq_len, n_heads_total, n_tiles, BLOCK_M, CAUSAL, GROUP_HEADS)),
        ],
        [4, 1],
        [CONSUMER_REGS, PRODUCER_REGS],
    )


def attention_persistent(q, k, v, causal, sm_scale=None, block_n=128, stages=2, pingpong=True,
                         consumer_regs=240, producer_regs=24, group_heads=8, programs=None, with_kernel=False):
    """softmax(q k^T * sm_scale [+ causal mask]) v, fp16 (B, H, S, D), S % 128 == 0; one program per SM."""
    B, H, S, D = q.shape
    assert k.shape == v.shape == q.shape and q.dtype == torch.float16 and D in (64, 128)
    assert S % 128 == 0 and S % block_n == 0
    sm_scale = 1.0 / math.sqrt(D) if sm_scale is None else sm_scale
    out = torch.empty_like(q)

    def desc(t, rows):
        block = [rows, D]
        return TensorDescriptor.from_tensor(t.view(B * H * S, D), block,
                                            gl.NVMMASharedLayout.get_default_for(block, gl.float16))

    n_tiles = S // 128 * B * H
    if programs is None:
        programs = torch.cuda.get_device_properties(q.device).multi_processor_count
    grid = (min(programs, n_tiles),)
    kern = attn_fwd_persistent_kernel[grid](
        desc(q, 64), desc(k, block_n), desc(v, block_n), desc(out, 64), S, B * H, n_tiles, sm_scale * LOG2E,
        causal, stages, pingpong, consumer_regs, producer_regs, min(group_heads, B * H), num_warps=4)
    return (out, kern) if with_kernel else out
