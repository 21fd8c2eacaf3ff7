"""Gluon: a FlashAttention-3-style forward attention for Hopper, the kernels.

A FlashAttention-3-style forward pass for Hopper: one producer warp issues
the TMA loads of Q, K and V; two consumer warpgroups each own 64 rows of a
128-row query block. Inside a warpgroup the QK^T of key block j is issued
before the P V product of block j - 1, and the source waits for the first
only, so that block j's softmax could run while the second is on the tensor
cores; ptxas moves the wait for the second up to the first (the lesson reads
the SASS), so the overlap that runs is the one between the two warpgroups:
an mbarrier pair can make them take turns at the tensor cores (ping-pong),
so that one's softmax overlaps the other's products. The kernel is
persistent: one program per SM walks the (query block, head) tiles, and the
K/V ring, the ping-pong turns and the output store carry on from one tile to
the next. Written against Triton 3.6's Gluon API.

Run it:
    python gluon_attention.py   # a Hopper GPU: checked against float64, one timing

Gluon has no interpreter. Beside it: attention_model.py runs the kernel's
online softmax, its schedule and its mbarrier protocol on any CPU;
exercises.py poses exercises on them; lesson.py is the run the course records.
"""

import math
import os

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
WG_ROWS = gl.constexpr(
    64
)  # query rows per consumer warpgroup (wgmma's M is 64 per warpgroup)


# snippet: producer
@gluon.jit
def _producer(q_desc, k_desc, v_desc, q_smem, q_bars, ring, seq_len, tiles,
              CAUSAL: gl.constexpr):
    # One warp: each tile's Q (both warpgroups' halves on one barrier) once
    # the last tile's is free, then K and V of each key block into the ring,
    # each on its own barrier, so the QK^T of a block can start before its V
    # has landed. `c` counts key blocks over the program's whole walk: it
    # picks the slot and the lap, so the ring carries on across tiles.
    q_bar, q_empty = q_bars
    k_bufs, v_bufs, k_ready, k_empty, v_ready, v_empty = ring
    BLOCK_M: gl.constexpr = 2 * WG_ROWS
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[0]
    STAGES: gl.constexpr = k_bufs.type.shape[0]
    c = 0
    it = 0
    for t in range(gl.program_id(0), tiles[0], gl.num_programs(0)):
        q_block, bh = _tile(t, seq_len, tiles[1], BLOCK_M, CAUSAL, tiles[2])
        row0 = bh * seq_len  # the first row of this (batch, head) in the 2-D views
        m0 = q_block * BLOCK_M
        mbarrier.wait(q_empty, (it & 1) ^ 1)  # both warpgroups are done with the last Q
        mbarrier.expect(q_bar, 2 * q_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(q_desc, [row0 + m0, 0], q_bar, q_smem.index(0))
        tma.async_copy_global_to_shared(
            q_desc, [row0 + m0 + WG_ROWS, 0], q_bar, q_smem.index(1))
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


# end snippet


@gluon.jit
def _num_kv_blocks(m0, seq_len, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                   CAUSAL: gl.constexpr):
    # Causal: key blocks up to the one holding this query block's last row.
    if CAUSAL:
        return gl.cdiv(gl.minimum(m0 + BLOCK_M, seq_len), BLOCK_N)
    else:
        return gl.cdiv(seq_len, BLOCK_N)


# snippet: softmax
@gluon.jit
def _softmax_step(s, m_i, l_i, qk_scale, offs_m, kv_start, CAUSAL: gl.constexpr,
                  s_layout: gl.constexpr, MASK_ALL: gl.constexpr):
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
    p = gl.exp2(s * qk_scale - m_new[:, None])
    l_i = l_i * alpha + gl.sum(p, axis=1)
    return p, m_new, l_i, alpha


# end snippet


# snippet: consumer
@gluon.jit
def _consumer(io, ring, turn, seq_len, qk_scale, tiles, WG: gl.constexpr,
              CAUSAL: gl.constexpr, PINGPONG: gl.constexpr, MASK_ALL: gl.constexpr):
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
                                           s_layout, MASK_ALL)

        for j in range(1, n_kv):
            c = c0 + j
            sj = c % STAGES
            sp = (c - 1) % STAGES
            if PINGPONG:  # my turn at the tensor cores: the other one issued
                mbarrier.wait(turn.index(WG), (c & 1) ^ WG ^ 1)
            # Issue S_j = Q K_j^T first, then O += P_{j-1} V_{j-1}: the softmax of
            # block j needs only the first. (ptxas waits for both before it.)
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
            s = warpgroup_mma_wait(1, deps=(s_tok,))  # S_j is done; P V may run on
            mbarrier.arrive(k_empty.index(sj), count=1)
            p, m_i, l_i, alpha = _softmax_step(s, m_i, l_i, qk_scale, offs_m,
                                               j * BLOCK_N, CAUSAL, s_layout, MASK_ALL)
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


# end snippet


# snippet: schedule
@gluon.jit
def _tile(t, seq_len, n_heads_total, BLOCK_M: gl.constexpr, CAUSAL: gl.constexpr,
          GROUP_HEADS: gl.constexpr):
    # Tile t of n_q * (batch * heads), in groups of GROUP_HEADS heads: inside a
    # group the query blocks of its heads come in turns, so the tiles that run
    # together share K and V in L2. Causal: the longest query blocks (the last
    # rows, which see every key before them) come first in each group. A
    # program walks tiles pid, pid + programs, ...: one per SM, each walk
    # takes long and short tiles alike.
    n_q = gl.cdiv(seq_len, BLOCK_M)
    per_group = GROUP_HEADS * n_q
    group = t // per_group
    r = t % per_group
    heads_here = gl.minimum(n_heads_total - group * GROUP_HEADS, GROUP_HEADS)
    bh = group * GROUP_HEADS + r % heads_here
    q_block = r // heads_here
    if CAUSAL:
        q_block = n_q - 1 - q_block
    return q_block, bh


# end snippet


# snippet: kernel
@gluon.jit
def attn_fwd_ws_kernel(q_desc, k_desc, v_desc, o_desc, seq_len, n_heads_total, n_tiles,
                       qk_scale, CAUSAL: gl.constexpr, STAGES: gl.constexpr,
                       PINGPONG: gl.constexpr, CONSUMER_REGS: gl.constexpr,
                       PRODUCER_REGS: gl.constexpr, GROUP_HEADS: gl.constexpr,
                       MASK_ALL: gl.constexpr):
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
                         0, CAUSAL, PINGPONG, MASK_ALL)),
            (_consumer, (io, ring, turn, seq_len, qk_scale, tiles,
                         1, CAUSAL, PINGPONG, MASK_ALL)),
            (_producer, (q_desc, k_desc, v_desc, q_smem, (q_bar, q_empty), ring,
                         seq_len, tiles, CAUSAL)),
        ],
        [4, 1],  # warps of the workers: consumer warpgroup 1, the producer
        [CONSUMER_REGS, PRODUCER_REGS],  # their registers per thread (setmaxnreg)
    )


# end snippet


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
    out=None,
):
    """softmax(q k^T * sm_scale [+ causal mask]) v, fp16 (B, H, S, D), S % 128 == 0.

    `programs`: how many programs walk the tiles; None, one per SM (the
    persistent kernel); "tiles", one per tile, each walking one. `out`: the
    tensor to write (the checks pass one filled with NaN), or None.
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
    if out is None:
        out = torch.empty_like(q)
    assert out.shape == q.shape and out.dtype == q.dtype and out.is_contiguous()
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
        num_warps=4,
        **kw,
    )
    return (out, kern) if with_kernel else out


# snippet: self-check
def self_check() -> None:
    """Both schedules against the float64 definition, causal and not, D = 64 and
    128, on 10 heads (the last group of 8 holds 2) of 384 tokens; one timing."""
    if not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") == "1":
        print("Gluon kernels run on a GPU only (compute capability 9.0, Hopper): "
              "nothing to check here. On a CPU, run exercises.py: the kernel's models.")
        return

    def reference(q, k, v, causal):
        q, k, v = (t.double() for t in (q, k, v))
        s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
        if causal:
            n = q.shape[-2]
            future = torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1)
            s = s.masked_fill(future, float("-inf"))
        return torch.softmax(s, dim=-1) @ v

    torch.manual_seed(0)
    for D in (64, 128):
        q, k, v = (torch.randn(1, 10, 384, D, device="cuda", dtype=torch.float16)
                   for _ in range(3))
        for causal in (False, True):
            want = reference(q, k, v, causal)
            for pingpong in (True, False):
                out = torch.full_like(q, float("nan"))  # a tile never written fails
                attention_ws(q, k, v, causal, pingpong=pingpong, out=out)
                torch.testing.assert_close(out.double(), want, rtol=4e-3,
                                           atol=4e-3 * float(want.abs().max()))
    print("attention_ws matches the float64 definition: 10 heads of 384 tokens, "
          "D = 64 and 128, causal and not, with and without ping-pong")
    q, k, v = (torch.randn(4, 32, 4096, 128, device="cuda", dtype=torch.float16)
               for _ in range(3))
    ms = triton.testing.do_bench(lambda: attention_ws(q, k, v, False))
    print(f"attention_ws, B4 H32 S4096 D128: {ms:.3f} ms, "
          f"{4 * 4 * 32 * 4096**2 * 128 / ms / 1e9:.0f} TFLOP/s")


# end snippet


if __name__ == "__main__":
    self_check()
