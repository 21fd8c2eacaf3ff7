"""Issue 38, forward at D64: the gluon-attention lesson's kernel with fewer MUFU exponentials.

An experiment, not a lesson: the kernel of code/gluon-attention/gluon_attention.py (its producer,
key-block count and tile order imported from the lesson) with a softmax that computes P in one of
three ways (EXP):

* 0, the lesson's: `gl.exp2`, one MUFU.EX2 per score.
* 1: `ex2.approx.f16x2`, the exponent rounded to fp16 first. Compiled for sm_90 (ptxas 3.6's), it
  becomes two MUFU.EX2.F16 per pair: as many MUFU instructions as EXP 0, plus a conversion back to
  FP32 per score for the row sum. Timed only to confirm that it buys nothing.
* N >= 2: in every group of N scores, one exponential is computed on the FMA units instead
  (FlashAttention-4's trick): round to the nearest integer j with the 1.5 * 2^23 addition, a
  degree-4 polynomial for 2^f on f in [-0.5, 0.5] (relative error under 6e-5, against the 2^-11
  of P's fp16 rounding), and j added to the result's exponent field. Arguments are clamped at
  -125 first, so the exponent field never underflows (2^-125 is 0 once P is fp16).

Why: at D64 the 8,192 exponentials of a 64 x 128 block take the MUFU unit (16 a clock an SM) as
long as the block's two products take the tensor cores; the softmax phase is the longer one, and
the other warpgroup's products cannot hide it. The polynomial costs about 8 FMA-pipe instructions
where MUFU.EX2 costs one issue slot and 8 cycles of the MUFU pipe.
Prediction (before any GPU run): EXP 1 within noise of EXP 0 (same MUFU count); EXP 4 +2 to +6 % at
D64, 0 to +2 % at D128; EXP 2 less than EXP 4 (issue slots become the limit).

The lesson's docstring follows.

A FlashAttention-3-style forward pass for Hopper: one producer warp issues
the TMA loads of Q, K and V; two consumer warpgroups each own 64 rows of a
128-row query block. Inside a warpgroup the QK^T of key block j is issued
before the softmax of block j - 1 has finished with the tensor cores (the
P V product of block j - 1 runs while block j's softmax is computed), and
between the two warpgroups an mbarrier pair can make them take turns at the
tensor cores (ping-pong), so that one's softmax overlaps the other's
products. The kernel is persistent: one program per SM walks the (query
block, head) tiles, and the K/V ring, the ping-pong turns and the output
store carry on from one tile to the next. Written against Triton 3.6's Gluon
API; the lesson file checks the schedule, the protocol and the online-softmax
arithmetic in plain Python.
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

# The gluon-attention lesson's kernels: what this experiment leaves as the lesson has it is the lesson's own.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "code" / "gluon-attention"))
from gluon_attention import LOG2E, WG_ROWS, _num_kv_blocks, _producer, _tile  # noqa: E402


@gluon.jit
def _softmax_step(s, m_i, l_i, qk_scale, offs_m, kv_start, CAUSAL: gl.constexpr,
                  s_layout: gl.constexpr, MASK_ALL: gl.constexpr, EXP16: gl.constexpr):
    # One block of the online softmax, in base 2 (log2 e is in qk_scale):
    # the new running max, the factor alpha that rescales what was summed
    # under the old max, this block's probabilities and the new running sum.
    # The scale waits for the exponential: qk_scale > 0, so the max of the
    # raw scores, scaled once per row, is the max of the scaled ones, and
    # s * qk_scale - m is one fused multiply-add per score.
    if CAUSAL:
        # Only a block that reaches past this warpgroup's first query row
        # needs the mask; the blocks before it are entirely visible.
        if MASK_ALL or kv_start + s.shape[1] > gl.min(offs_m, axis=0):
            cols: gl.constexpr = gl.SliceLayout(0, s_layout)  # a row of s_layout
            offs_n = kv_start + gl.arange(0, s.shape[1], layout=cols)
            s = gl.where(offs_m[:, None] >= offs_n[None, :], s, -float("inf"))
    m_new = gl.maximum(m_i, gl.max(s, axis=1) * qk_scale)
    alpha = gl.exp2(m_i - m_new)
    if EXP16 == 1:
        x = (s * qk_scale - m_new[:, None]).to(gl.float16)
        p = gl.inline_asm_elementwise("ex2.approx.f16x2 $0, $1;", "=r,r", [x],
                                      dtype=gl.float16, is_pure=True, pack=2)
        l_i = l_i * alpha + gl.sum(p.to(gl.float32), axis=1)
    elif EXP16 >= 2:
        x = s * qk_scale - m_new[:, None]
        p = gl.inline_asm_elementwise(_mixed_exp2_asm(EXP16), _mixed_constraints(EXP16), [x],
                                      dtype=gl.float32, is_pure=True, pack=EXP16)
        l_i = l_i * alpha + gl.sum(p, axis=1)
    else:
        p = gl.exp2(s * qk_scale - m_new[:, None])
        l_i = l_i * alpha + gl.sum(p, axis=1)
    return p, m_new, l_i, alpha


@gluon.jit
def _consumer(io, ring, turn, seq_len, qk_scale, tiles, WG: gl.constexpr,
              CAUSAL: gl.constexpr, PINGPONG: gl.constexpr, MASK_ALL: gl.constexpr,
              EXP16: gl.constexpr):
    o_desc, q_smem, o_smem, q_bar, q_empty = io
    k_bufs, v_bufs, k_ready, k_empty, v_ready, v_empty = ring
    BLOCK_M: gl.constexpr = 2 * WG_ROWS
    BLOCK_N: gl.constexpr = k_bufs.type.shape[1]
    HEAD_DIM: gl.constexpr = k_bufs.type.shape[2]
    STAGES: gl.constexpr = k_bufs.type.shape[0]
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

        # Block 0: S = Q K^T, then its softmax; nothing to overlap yet.
        s0 = c0 % STAGES
        if PINGPONG:
            mbarrier.wait(turn.index(WG), (c0 & 1) ^ WG ^ 1)
        mbarrier.wait(k_ready.index(s0), (c0 // STAGES) & 1)
        kt = k_bufs.index(s0).permute((1, 0))
        s_tok = warpgroup_mma(q, kt, s_zero, use_acc=False, is_async=True)
        if PINGPONG:
            mbarrier.arrive(turn.index(1 - WG), count=1)
        s = warpgroup_mma_wait(0, deps=(s_tok,))
        mbarrier.arrive(k_empty.index(s0), count=1)
        p, m_i, l_i, alpha = _softmax_step(s, m_i, l_i, qk_scale, offs_m, 0, CAUSAL,
                                           s_layout, MASK_ALL, EXP16)

        for j in range(1, n_kv):
            c = c0 + j
            sj = c % STAGES
            sp = (c - 1) % STAGES
            if PINGPONG:  # my turn at the tensor cores: the other one issued
                mbarrier.wait(turn.index(WG), (c & 1) ^ WG ^ 1)
            # Issue S_j = Q K_j^T first, then O += P_{j-1} V_{j-1}: the softmax of
            # block j can start as soon as the first is done, while the second runs.
            mbarrier.wait(k_ready.index(sj), (c // STAGES) & 1)
            kt = k_bufs.index(sj).permute((1, 0))
            s_tok = warpgroup_mma(q, kt, s_zero, use_acc=False, is_async=True)
            # Both conversions are free: the same thread and register hold each
            # element in both layouts (drawn on the page), so no data moves.
            acc = acc * gl.convert_layout(alpha, row_o)[:, None]
            mbarrier.wait(v_ready.index(sp), ((c - 1) // STAGES) & 1)
            p16 = gl.convert_layout(p.to(gl.float16), p_layout)
            o_tok = warpgroup_mma(p16, v_bufs.index(sp), acc, is_async=True)
            if PINGPONG:
                mbarrier.arrive(turn.index(1 - WG), count=1)
            s = warpgroup_mma_wait(1, deps=(s_tok,))  # S_j is done; P V may still run
            mbarrier.arrive(k_empty.index(sj), count=1)
            p, m_i, l_i, alpha = _softmax_step(s, m_i, l_i, qk_scale, offs_m,
                                               j * BLOCK_N, CAUSAL, s_layout, MASK_ALL,
                                               EXP16)
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
        c0 += n_kv
        it += 1
    tma.store_wait(0)


@gluon.jit
def attn_fwd_ws_kernel(q_desc, k_desc, v_desc, o_desc, seq_len, n_heads_total, n_tiles,
                       qk_scale, CAUSAL: gl.constexpr, STAGES: gl.constexpr,
                       PINGPONG: gl.constexpr, CONSUMER_REGS: gl.constexpr,
                       PRODUCER_REGS: gl.constexpr, GROUP_HEADS: gl.constexpr,
                       MASK_ALL: gl.constexpr, EXP16: gl.constexpr):
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[0]
    D: gl.constexpr = k_desc.block_type.shape[1]
    # Q and O in two 64-row halves, one per consumer warpgroup; K and V in rings.
    f16: gl.constexpr = q_desc.dtype
    q_smem = gl.allocate_shared_memory(f16, [2, WG_ROWS, D], q_desc.layout)
    k_bufs = gl.allocate_shared_memory(f16, [STAGES, BLOCK_N, D], k_desc.layout)
    v_bufs = gl.allocate_shared_memory(f16, [STAGES, BLOCK_N, D], v_desc.layout)
    o_smem = gl.allocate_shared_memory(f16, [2, WG_ROWS, D], o_desc.layout)
    # Barriers: Q landed and Q free again (count 2: both warpgroups read it); per
    # stage, K and V ready (the producer's expect) and empty (count 2); two turns.
    bar: gl.constexpr = mbarrier.MBarrierLayout()
    q_bar = gl.allocate_shared_memory(gl.int64, [1], bar)
    q_empty = gl.allocate_shared_memory(gl.int64, [1], bar)
    k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], bar)
    k_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], bar)
    v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], bar)
    v_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], bar)
    turn = gl.allocate_shared_memory(gl.int64, [2, 1], bar)
    mbarrier.init(q_bar, count=1)
    mbarrier.init(q_empty, count=2)
    for k in gl.static_range(STAGES):
        mbarrier.init(k_ready.index(k), count=1)
        mbarrier.init(v_ready.index(k), count=1)
        mbarrier.init(k_empty.index(k), count=2)
        mbarrier.init(v_empty.index(k), count=2)
    for k in gl.static_range(2):
        mbarrier.init(turn.index(k), count=1)
    # Named once, handed to every role: the walk's tiles, the K/V ring with its
    # barriers, and what the consumers read and write besides it.
    tiles = (n_tiles, n_heads_total, GROUP_HEADS)
    ring = (k_bufs, v_bufs, k_ready, k_empty, v_ready, v_empty)
    io = (o_desc, q_smem, o_smem, q_bar, q_empty)
    gl.warp_specialize(
        [
            (_consumer, (io, ring, turn, seq_len, qk_scale, tiles,
                         0, CAUSAL, PINGPONG, MASK_ALL, EXP16)),
            (_consumer, (io, ring, turn, seq_len, qk_scale, tiles,
                         1, CAUSAL, PINGPONG, MASK_ALL, EXP16)),
            (_producer, (q_desc, k_desc, v_desc, q_smem, (q_bar, q_empty), ring,
                         seq_len, tiles, CAUSAL)),
        ],
        [4, 1],  # warps of the workers: consumer warpgroup 1, the producer
        [CONSUMER_REGS, PRODUCER_REGS],  # their registers per thread (setmaxnreg)
    )


@gluon.constexpr_function
def _mixed_constraints(n):
    return ",".join(["=r"] * n + ["r"] * n)


@gluon.constexpr_function
def _mixed_exp2_asm(n):
    # Outputs $0..$(n-1), inputs $n..$(2n-1): the first n - 1 on MUFU, the last on the FMA units.
    lines = [f"ex2.approx.ftz.f32 ${i}, ${n + i};" for i in range(n - 1)]
    x, out = f"${2 * n - 1}", f"${n - 1}"
    lines += [
        "{", ".reg .f32 xc, t, j, f, q;", ".reg .b32 ti, qi;",
        f"max.f32 xc, {x}, 0fC2FA0000;",  # -125
        "add.rn.f32 t, xc, 0f4B400000;",  # 1.5 * 2^23: t's low mantissa bits hold round(xc)
        "sub.rn.f32 j, t, 0f4B400000;",
        "sub.rn.f32 f, xc, j;",  # f in [-0.5, 0.5]
        "fma.rn.f32 q, f, 0f3C1D955B, 0f3D635847;",  # ln2^4/24, ln2^3/6
        "fma.rn.f32 q, q, f, 0f3E75FDF0;",  # ln2^2/2
        "fma.rn.f32 q, q, f, 0f3F317218;",  # ln2
        "fma.rn.f32 q, q, f, 0f3F800000;",  # 1
        "mov.b32 ti, t;", "shl.b32 ti, ti, 23;", "mov.b32 qi, q;", "add.s32 qi, qi, ti;",
        f"mov.b32 {out}, qi;", "}",
    ]
    return "\n".join(lines)


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
    exp16=False,
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
    n_tiles = S // (2 * rows_wg) * B * H
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
        exp16,
        num_warps=4,
        **kw,
    )
    return (out, kern) if with_kernel else out
