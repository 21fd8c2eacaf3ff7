"""Issue 38, the forward: the gluon-attention lesson's kernel with its P V in flight under the softmax.

An experiment, not a lesson: code/gluon-attention/gluon_attention.py's consumer, kernel and launcher
with two knobs; the producer and the schedule are the lesson's, imported.

What the compiled lesson kernel does (Triton 3.6 and its ptxas 12.8, compiled for sm_90 here;
ptxas 13.0 does the same): the PTX waits for P V_{j-1} after softmax j, as the source says, but
in the SASS `WARPGROUP.DEPBAR.LE gsb0, 0x0` comes a few instructions after the wait for S_j,
before the first exponential, at D64 and D128 alike. The softmax of block j runs after P V_{j-1}
has retired, not under it. Two causes, both ptxas's: P's registers are the A operand of the
product in flight, and once P V has been issued nothing in the PTX reads them again, so the
register allocator hands them to the softmax's temporaries (alpha, a copy of m), and a write to a
register an HGMMA still reads needs the wait first; and with P in shared memory instead (no
register in flight) its scheduler still hoists the wait to just after the one for S_j. A wait
ptxas cannot move above the softmax is one at the top of the next step, in the basic block after
the loop's back edge; with P in registers ptxas then serialises every HGMMA (a register operand
in flight across the back edge), with P in shared memory it does not.

* PV 1: P goes to shared memory (each consumer has two P buffers: P_j is written while
  P V_{j-1} reads the other), P V_{j-1} is retired at the top of step j + 1 (before O is rescaled
  again), and O's staging tile for the TMA store is one of the P buffers (at D128 a separate one
  does not fit: 2 x 2 x 16 KB of P on top of the lesson's 198 KB). Costs a 16 KB shared-memory
  store of P per block and a warpgroup barrier before the product that reads it.
* TREE 1: the row max and the row sum as trees. Column n/2 of the wgmma accumulator is a
  register bit (n > 8), so reshape + permute + split pairs two registers of the same thread;
  folding 128 columns down to 8 is 4 levels of independent FMNMX instead of ptxas's chain of 31
  dependent ones, then the quad's 2 shuffles. No data moves (`convert_layout(...,
  assert_trivial=True)` checks the layouts at compile time).
* TREE 2: TREE 1 for the max; the row sum kept as each thread's partial sums in the folds'
  layout and reduced across the quad once per tile (FlashAttention-3's way), 2 shuffles and a
  dependent add fewer per block and row.

Prediction (before any GPU run): PV 1 +5 to +15 % at D128 (the products are the longer phase,
and each warpgroup now keeps the tensor cores fed during its own softmax), +3 to +10 % at D64
(the softmax is the longer phase there); TREE 2 +2 to +5 % at D64 on top, about 0 at D128.

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
store carry on from one tile to the next.
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
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

# The lesson's producer, schedule and key-block count, unchanged here: imported, not copied.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "code" / "gluon-attention"))
from gluon_attention import LOG2E, WG_ROWS, _num_kv_blocks, _producer, _tile  # noqa: E402


@gluon.jit
def _fold(x, OP: gl.constexpr):
    # Columns [0, n/2) against [n/2, n), element by element (OP 0: max, 1: sum, 2: the first
    # half). Column bit n/2 is a register bit of the wgmma layout while n > 8: a thread combines
    # two of its own registers, no data moves.
    n: gl.constexpr = x.shape[1]
    a, b = gl.split(gl.permute(gl.reshape(x, [x.shape[0], 2, n // 2]), (0, 2, 1)))
    if OP == 0:
        return gl.maximum(a, b)
    elif OP == 1:
        return a + b
    else:
        return a


@gluon.jit
def _to_quad(x, OP: gl.constexpr):
    # Folded down to 8 columns: in each row, 2 registers in each of the quad's 4 threads.
    x = _fold(x, OP)
    if x.shape[1] > 8:
        x = _fold(x, OP)
    if x.shape[1] > 8:
        x = _fold(x, OP)
    if x.shape[1] > 8:
        x = _fold(x, OP)
    if x.shape[1] > 8:
        x = _fold(x, OP)
    return x


@gluon.jit
def _row_max(s, TREE: gl.constexpr, row_s: gl.constexpr):
    if TREE == 0:
        return gl.max(s, axis=1)
    else:
        return gl.convert_layout(gl.max(_to_quad(s, 0), axis=1), row_s, assert_trivial=True)


@gluon.jit
def _softmax_step(s, m_i, l_i, qk_scale, offs_m, kv_start, CAUSAL: gl.constexpr,
                  s_layout: gl.constexpr, MASK_ALL: gl.constexpr, TREE: gl.constexpr):
    # The lesson's step; l_i is a row vector (TREE 0, 1) or each thread's partial sums in the
    # quad layout (TREE 2).
    row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    if CAUSAL:
        if MASK_ALL or kv_start + s.shape[1] > gl.min(offs_m, axis=0):
            cols: gl.constexpr = gl.SliceLayout(0, s_layout)
            offs_n = kv_start + gl.arange(0, s.shape[1], layout=cols)
            s = gl.where(offs_m[:, None] >= offs_n[None, :], s, -float("inf"))
    m_new = gl.maximum(m_i, _row_max(s, TREE, row_s) * qk_scale)
    alpha = gl.exp2(m_i - m_new)
    p = gl.exp2(s * qk_scale - m_new[:, None])
    if TREE == 0:
        l_i = l_i * alpha + gl.sum(p, axis=1)
    elif TREE == 1:
        part = _to_quad(p, 1)
        l_i = l_i * alpha + gl.convert_layout(gl.sum(part, axis=1), row_s, assert_trivial=True)
    else:
        # alpha broadcast along the row, then folded (first halves) into the partials' layout
        alpha_q = _to_quad(gl.zeros_like(s) + alpha[:, None], 2)
        l_i = l_i * alpha_q + _to_quad(p, 1)
    return p, m_new, l_i, alpha


@gluon.jit
def _consumer(io, ring, turn, p_smem, seq_len, qk_scale, tiles, WG: gl.constexpr,
              CAUSAL: gl.constexpr, PINGPONG: gl.constexpr, MASK_ALL: gl.constexpr,
              TREE: gl.constexpr, PV: gl.constexpr):
    o_desc, q_smem, o_smem, q_bar, q_empty = io
    k_bufs, v_bufs, k_ready, k_empty, v_ready, v_empty = ring
    BLOCK_M: gl.constexpr = 2 * WG_ROWS
    BLOCK_N: gl.constexpr = k_bufs.type.shape[1]
    HEAD_DIM: gl.constexpr = k_bufs.type.shape[2]
    STAGES: gl.constexpr = k_bufs.type.shape[0]
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_N, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, HEAD_DIM, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout,
                                                 k_width=2)
    row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)
    s_zero = gl.zeros([WG_ROWS, BLOCK_N], gl.float32, layout=s_layout)
    q = q_smem.index(WG)
    c0 = 0
    it = 0
    for t in range(gl.program_id(0), tiles[0], gl.num_programs(0)):
        q_block, bh = _tile(t, seq_len, tiles[1], BLOCK_M, CAUSAL, tiles[2])
        m0 = q_block * BLOCK_M
        n_kv = _num_kv_blocks(m0, seq_len, BLOCK_M, BLOCK_N, CAUSAL)
        offs_m = m0 + WG * WG_ROWS + gl.arange(0, WG_ROWS, layout=row_s)
        m_i = gl.full([WG_ROWS], -float("inf"), gl.float32, layout=row_s)
        if TREE == 2:  # each thread's partial row sums, in the folds' layout
            l_i = _to_quad(s_zero, 2)
        else:
            l_i = gl.full([WG_ROWS], 0.0, gl.float32, layout=row_s)
        acc = gl.zeros([WG_ROWS, HEAD_DIM], gl.float32, layout=o_layout)
        if PV == 1:  # carried as a product in flight: retired at the top of the next step
            acc = warpgroup_mma_init(acc)
        mbarrier.wait(q_bar, it & 1)

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
                                           s_layout, MASK_ALL, TREE)
        if PV == 1:
            if BLOCK_N == HEAD_DIM:
                tma.store_wait(0)  # the last tile's O may still be leaving a P buffer
            p_smem.index(2 * WG + c0 % 2).store(p.to(gl.float16))
            fence_async_shared()

        for j in range(1, n_kv):
            c = c0 + j
            sj = c % STAGES
            sp = (c - 1) % STAGES
            if PV == 1:  # P V_{j-2} retires here, after softmax j - 1 ran under it
                acc = warpgroup_mma_wait(0, deps=(acc,))
                mbarrier.arrive(v_empty.index((c - 2) % STAGES), count=1, pred=j > 1)
            if PINGPONG:
                mbarrier.wait(turn.index(WG), (c & 1) ^ WG ^ 1)
            mbarrier.wait(k_ready.index(sj), (c // STAGES) & 1)
            kt = k_bufs.index(sj).permute((1, 0))
            s_tok = warpgroup_mma(q, kt, s_zero, use_acc=False, is_async=True)
            acc = acc * gl.convert_layout(alpha, row_o)[:, None]
            mbarrier.wait(v_ready.index(sp), ((c - 1) // STAGES) & 1)
            if PV == 1:
                o_tok = warpgroup_mma(p_smem.index(2 * WG + (c - 1) % 2), v_bufs.index(sp),
                                      acc, is_async=True)
            else:
                p16 = gl.convert_layout(p.to(gl.float16), p_layout)
                o_tok = warpgroup_mma(p16, v_bufs.index(sp), acc, is_async=True)
            if PINGPONG:
                mbarrier.arrive(turn.index(1 - WG), count=1)
            s = warpgroup_mma_wait(1, deps=(s_tok,))
            mbarrier.arrive(k_empty.index(sj), count=1)
            p, m_i, l_i, alpha = _softmax_step(s, m_i, l_i, qk_scale, offs_m,
                                               j * BLOCK_N, CAUSAL, s_layout, MASK_ALL,
                                               TREE)
            if PV == 1:
                # P V_{j-2} read this buffer and has retired; P V_{j-1} reads the other.
                p_smem.index(2 * WG + c % 2).store(p.to(gl.float16))
                fence_async_shared()
                acc = o_tok
            else:
                if PV == 2:  # V's barrier again (complete): a block boundary for ptxas
                    mbarrier.wait(v_ready.index(sp), ((c - 1) // STAGES) & 1)
                acc = warpgroup_mma_wait(0, deps=(o_tok,))
                mbarrier.arrive(v_empty.index(sp), count=1)
        mbarrier.arrive(q_empty, count=1)

        cl = c0 + n_kv - 1
        sl = cl % STAGES
        if PV == 1:
            acc = warpgroup_mma_wait(0, deps=(acc,))
            mbarrier.arrive(v_empty.index((cl - 1) % STAGES), count=1, pred=n_kv > 1)
        acc = acc * gl.convert_layout(alpha, row_o)[:, None]
        mbarrier.wait(v_ready.index(sl), (cl // STAGES) & 1)
        if PV == 1:
            o_tok = warpgroup_mma(p_smem.index(2 * WG + cl % 2), v_bufs.index(sl), acc,
                                  is_async=True)
        else:
            p16 = gl.convert_layout(p.to(gl.float16), p_layout)
            o_tok = warpgroup_mma(p16, v_bufs.index(sl), acc, is_async=True)
        acc = warpgroup_mma_wait(0, deps=(o_tok,))
        mbarrier.arrive(v_empty.index(sl), count=1)
        if TREE == 2:
            l_row = gl.sum(l_i, axis=1)
        else:
            l_row = l_i
        o = acc / gl.convert_layout(l_row, row_o)[:, None]
        if PV == 1 and BLOCK_N == HEAD_DIM:
            # O is staged in a P buffer: the next tile's first P store waits for this TMA
            # store to have read it (`tma.store_wait` there).
            o_buf = p_smem.index(2 * WG + (cl + 2) % 2)
        else:
            o_buf = o_smem.index(WG)
            tma.store_wait(0)  # the last tile's output has left o_smem
        o_buf.store(o.to(gl.float16))
        fence_async_shared()
        tma.async_copy_shared_to_global(o_desc, [bh * seq_len + m0 + WG * WG_ROWS, 0], o_buf)
        c0 += n_kv
        it += 1
    tma.store_wait(0)


@gluon.jit
def attn_fwd_ws_kernel(q_desc, k_desc, v_desc, o_desc, seq_len, n_heads_total, n_tiles,
                       qk_scale, CAUSAL: gl.constexpr, STAGES: gl.constexpr,
                       PINGPONG: gl.constexpr, CONSUMER_REGS: gl.constexpr,
                       PRODUCER_REGS: gl.constexpr, GROUP_HEADS: gl.constexpr,
                       MASK_ALL: gl.constexpr, TREE: gl.constexpr, PV: gl.constexpr):
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[0]
    D: gl.constexpr = k_desc.block_type.shape[1]
    f16: gl.constexpr = q_desc.dtype
    q_smem = gl.allocate_shared_memory(f16, [2, WG_ROWS, D], q_desc.layout)
    k_bufs = gl.allocate_shared_memory(f16, [STAGES, BLOCK_N, D], k_desc.layout)
    v_bufs = gl.allocate_shared_memory(f16, [STAGES, BLOCK_N, D], v_desc.layout)
    if PV == 1 and BLOCK_N == D:  # two P buffers per consumer, one of them stages O
        p_smem = gl.allocate_shared_memory(f16, [4, WG_ROWS, BLOCK_N], o_desc.layout)
        o_smem = p_smem
    elif PV == 1:  # two P buffers per consumer, and O's own tiles (there is room at D64)
        p_sl: gl.constexpr = gl.NVMMASharedLayout.get_default_for([WG_ROWS, BLOCK_N], f16)
        p_smem = gl.allocate_shared_memory(f16, [4, WG_ROWS, BLOCK_N], p_sl)
        o_smem = gl.allocate_shared_memory(f16, [2, WG_ROWS, D], o_desc.layout)
    else:
        o_smem = gl.allocate_shared_memory(f16, [2, WG_ROWS, D], o_desc.layout)
        p_smem = o_smem
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
    tiles = (n_tiles, n_heads_total, GROUP_HEADS)
    ring = (k_bufs, v_bufs, k_ready, k_empty, v_ready, v_empty)
    io = (o_desc, q_smem, o_smem, q_bar, q_empty)
    gl.warp_specialize(
        [
            (_consumer, (io, ring, turn, p_smem, seq_len, qk_scale, tiles,
                         0, CAUSAL, PINGPONG, MASK_ALL, TREE, PV)),
            (_consumer, (io, ring, turn, p_smem, seq_len, qk_scale, tiles,
                         1, CAUSAL, PINGPONG, MASK_ALL, TREE, PV)),
            (_producer, (q_desc, k_desc, v_desc, q_smem, (q_bar, q_empty), ring,
                         seq_len, tiles, CAUSAL)),
        ],
        [4, 1],
        [CONSUMER_REGS, PRODUCER_REGS],
    )


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
    tree=0,
    pv=0,
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
        tree,
        pv,
        num_warps=4,
        **kw,
    )
    return (out, kern) if with_kernel else out
