"""Fused attention (forward): online softmax, one pass over the keys, no S x S matrix.

Attention is softmax(Q K^T * scale) V for every (batch, head). Written as
three PyTorch ops it is memory-bound: Q K^T produces an S x S score matrix
per head, the softmax reads it back and writes another one, and the second
matmul reads that again. At sequence length 4096 that matrix is 16.8 M
elements per head, far more bytes than Q, K, V and the output together.

The fused kernel never writes it. Each program owns BLOCK_M queries of one
(batch, head), keeps them in registers, and walks over the keys and values
in blocks of BLOCK_N. For each block it computes a BLOCK_M x BLOCK_N tile of
scores, folds it into a running softmax (a running row max m_i, a running
row sum l_i and an un-normalised output accumulator), and throws the tile
away. When the max grows, everything accumulated so far is rescaled by
exp(m_old - m_new): that is the whole trick ("online softmax", as in
FlashAttention). Only O (and nothing of size S x S) ever reaches memory.

For causal attention the key blocks fall into two kinds: those entirely
below the diagonal, which need no mask at all, and the one or two blocks
that cross it. The kernel runs two loops, one per kind, so the common case
carries no masking cost; the same masked loop also handles a sequence tail
when S is not a multiple of BLOCK_N.

A second step keeps the algorithm and changes how the tiles move: on Hopper
the Tensor Memory Accelerator (TMA) copies whole Q, K and V tiles into
shared memory and the O tile back out, through tensor descriptors built on
the host. The threads compute no addresses and no load masks; the
descriptor knows each head's sequence length and fills rows past it with
zeros.

Every kernel the lesson races is an entry of KERNELS and every launch
configuration an entry of GPU_CONFIGS: a faster kernel is one more of each.

Run it:
    TRITON_INTERPRET=1 python fused_attention.py   # any machine: checks on the CPU
    python fused_attention.py                      # a Hopper GPU: checks and TFLOP/s
"""

import math
import re
import sys
from pathlib import Path
from typing import NamedTuple

import torch
import triton
import triton.language as tl
from triton.runtime.errors import OutOfResources
from triton.tools.tensor_descriptor import TensorDescriptor

# lessonkit.py sits beside this file in a download, one folder up in the repository.
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]
from lessonkit import Lesson, bench_interleaved, tflops  # noqa: E402

LOG2E = 1.44269504  # log2(e): exp(x) = exp2(x * log2(e))


# -- Step 1: the fused kernel, with pointer loads -----------------------------


# snippet: inner-loop
@triton.jit
def _attn_key_loop(acc, l_i, m_i, q, k_ptrs, v_ptrs, stride_kn, stride_vn,
                   offs_m, lo, hi, seq_len, qk_scale,
                   BLOCK_N: tl.constexpr, MASKED: tl.constexpr, CAUSAL: tl.constexpr):
    # Fold key/value blocks [lo, hi) into the running softmax of this
    # program's BLOCK_M queries. MASKED is a compile-time flag: the unmasked
    # instance has no compares, no selects and no predicated loads.
    offs_n = tl.arange(0, BLOCK_N)
    k_ptrs += lo * stride_kn
    v_ptrs += lo * stride_vn
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        cols = start_n + offs_n
        # -- scores for this block: (BLOCK_M, D) @ (D, BLOCK_N), fp32 accumulate
        if MASKED:
            k = tl.load(k_ptrs, mask=cols[:, None] < seq_len, other=0.0)
        else:
            k = tl.load(k_ptrs)
        qk = tl.dot(q, tl.trans(k))
        if MASKED:
            # Keys past the end of the sequence, and (causal) keys after the
            # query, get -inf: exp2(-inf) = 0, so they add nothing to l_i or acc.
            keep = cols[None, :] < seq_len
            if CAUSAL:
                keep = keep & (offs_m[:, None] >= cols[None, :])
            qk = tl.where(keep, qk * qk_scale, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(qk, 1))
            qk = qk - m_new[:, None]
        else:
            # qk_scale > 0, so max(qk * scale) = max(qk) * scale: scale the
            # BLOCK_M row maxima instead of the whole tile, then fold the
            # scale and the shift into one fused multiply-add per element.
            m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            qk = qk * qk_scale - m_new[:, None]
        # -- online softmax: p = exp(s - m_new); rescale the old state by
        # alpha = exp(m_old - m_new) <= 1. Everything is in base 2 because
        # qk_scale carries log2(e), and exp2 is the hardware's native op.
        p = tl.math.exp2(qk)
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        # -- acc += P @ V: P goes to fp16 for the tensor cores, acc stays fp32
        if MASKED:
            v = tl.load(v_ptrs, mask=cols[:, None] < seq_len, other=0.0)
        else:
            v = tl.load(v_ptrs)
        acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_new
        k_ptrs += BLOCK_N * stride_kn
        v_ptrs += BLOCK_N * stride_vn
    return acc, l_i, m_i


# end snippet


# snippet: kernel
@triton.jit
def attn_fwd_kernel(Q, K, V, Out, seq_len, n_heads, qk_scale,
                    stride_qb, stride_qh, stride_qm,
                    stride_kb, stride_kh, stride_kn,
                    stride_vb, stride_vh, stride_vn,
                    stride_ob, stride_oh, stride_om,
                    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                    BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    # The diagonal stage below starts at a multiple of BLOCK_M and steps by
    # BLOCK_N.
    tl.static_assert(BLOCK_M % BLOCK_N == 0)
    start_m = tl.program_id(0)            # which block of queries
    off_bh = tl.program_id(1)             # which (batch, head)
    off_b = (off_bh // n_heads).to(tl.int64)
    off_h = (off_bh % n_heads).to(tl.int64)

    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    # The last dimension is contiguous (stride 1), which the wrapper checks.
    q_ptrs = (Q + off_b * stride_qb + off_h * stride_qh
              + offs_m[:, None] * stride_qm + offs_d[None, :])
    k_ptrs = (K + off_b * stride_kb + off_h * stride_kh
              + offs_n[:, None] * stride_kn + offs_d[None, :])
    v_ptrs = (V + off_b * stride_vb + off_h * stride_vh
              + offs_n[:, None] * stride_vn + offs_d[None, :])

    # Running state, one entry per query row: the max so far (-inf: nothing
    # seen yet), the softmax denominator so far, and the un-normalised output.
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    # Q is loaded once and stays on chip for the whole loop over the keys.
    q = tl.load(q_ptrs, mask=offs_m[:, None] < seq_len, other=0.0)

    if CAUSAL:
        # Stage 1: key blocks entirely left of this query block's diagonal.
        # Every query sees every key there: no mask, no tail (they all end
        # before start_m * BLOCK_M < seq_len).
        diag = start_m * BLOCK_M
        acc, l_i, m_i = _attn_key_loop(
            acc, l_i, m_i, q, k_ptrs, v_ptrs, stride_kn, stride_vn,
            offs_m, 0, diag, seq_len, qk_scale,
            BLOCK_N, False, CAUSAL)
        # Stage 2: the BLOCK_M // BLOCK_N key blocks on the diagonal, masked
        # (and cut at seq_len). Keys right of the diagonal are never loaded.
        acc, l_i, m_i = _attn_key_loop(
            acc, l_i, m_i, q, k_ptrs, v_ptrs, stride_kn, stride_vn,
            offs_m, diag, tl.minimum(diag + BLOCK_M, seq_len), seq_len, qk_scale,
            BLOCK_N, True, CAUSAL)
    else:
        # Non-causal: every full key block unmasked, then at most one
        # partial block at the end of the sequence with the tail mask.
        full = (seq_len // BLOCK_N) * BLOCK_N
        acc, l_i, m_i = _attn_key_loop(
            acc, l_i, m_i, q, k_ptrs, v_ptrs, stride_kn, stride_vn,
            offs_m, 0, full, seq_len, qk_scale,
            BLOCK_N, False, CAUSAL)
        acc, l_i, m_i = _attn_key_loop(
            acc, l_i, m_i, q, k_ptrs, v_ptrs, stride_kn, stride_vn,
            offs_m, full, seq_len, seq_len, qk_scale,
            BLOCK_N, True, CAUSAL)

    # Epilogue: divide by the softmax denominator once, at the very end.
    # Every row saw at least one unmasked key (key 0 is visible to everyone),
    # so l_i >= 1 and the division is safe.
    out = acc / l_i[:, None]
    o_ptrs = (Out + off_b * stride_ob + off_h * stride_oh
              + offs_m[:, None] * stride_om + offs_d[None, :])
    tl.store(o_ptrs, out.to(Out.dtype.element_ty), mask=offs_m[:, None] < seq_len)


# end snippet


# snippet: launch
def attention(q, k, v, causal: bool, sm_scale: float | None = None,
              block_m: int = 128, block_n: int = 64,
              num_warps: int = 8, num_stages: int = 3):
    """softmax(q k^T * sm_scale [+ causal mask]) v for fp16 (B, H, S, D) tensors."""
    B, H, S, D = q.shape
    assert k.shape == v.shape == q.shape, "self-attention: q, k, v all (B, H, S, D)"
    assert q.dtype == k.dtype == v.dtype == torch.float16
    assert q.stride(-1) == k.stride(-1) == v.stride(-1) == 1, "D must be contiguous"
    assert D in (16, 32, 64, 128), "HEAD_DIM: a power of two the tensor cores take"
    assert block_m % block_n == 0
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(D)
    out = torch.empty_like(q)
    # One program per (query block, batch * head). S need not be a multiple
    # of either block: the last query block and the last key block are masked.
    grid = (triton.cdiv(S, block_m), B * H)
    attn_fwd_kernel[grid](
        # log2(e) folded into the scale: exp2 in the kernel
        q, k, v, out, S, H, sm_scale * LOG2E,
        q.stride(0), q.stride(1), q.stride(2),
        k.stride(0), k.stride(1), k.stride(2),
        v.stride(0), v.stride(1), v.stride(2),
        out.stride(0), out.stride(1), out.stride(2),
        HEAD_DIM=D, BLOCK_M=block_m, BLOCK_N=block_n, CAUSAL=causal,
        num_warps=num_warps, num_stages=num_stages,
    )
    return out


# end snippet


# -- Step 2: the same kernel, with its tiles moved by TMA ----------------------
#
# The pointer kernel above builds a BLOCK_N x HEAD_DIM tensor of addresses
# for K and another for V, keeps them live across the loop, advances them
# every iteration and (in the masked instance) predicates the loads. On
# Hopper all of that can go to the TMA unit: a tensor descriptor records the
# base, shape and strides of a (B, H, S, D) tensor and the shape of the block
# it moves, and `desc.load([b, h, row, 0])` is one bulk copy of that block
# into shared memory, already in the swizzled layout the tensor cores read.
# The descriptors here are 4-D with blocks of [1, 1, BLOCK, HEAD_DIM], so the
# copy engine clips at each head's own sequence length: rows past S read as
# zeros, never as the next head's first rows, and a stored block that hangs
# over the end is cut there. The loaded block is [1, 1, BLOCK, HEAD_DIM];
# reshape drops the two unit dimensions.


# snippet: tma-inner-loop
@triton.jit
def _attn_key_loop_tma(acc, l_i, m_i, q, k_desc, v_desc, off_b, off_h,
                       offs_m, lo, hi, seq_len, qk_scale,
                       HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr,
                       MASKED: tl.constexpr, CAUSAL: tl.constexpr):
    # The loop of _attn_key_loop with descriptor loads. Nothing about the
    # keys' addresses lives in registers: the loop carries one integer row.
    offs_n = tl.arange(0, BLOCK_N)
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        cols = start_n + offs_n
        # Rows past seq_len arrive as zeros: no load mask, in either instance.
        k = k_desc.load([off_b, off_h, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
        qk = tl.dot(q, tl.trans(k))
        if MASKED:
            # A zero key still scores 0, not -inf: the score mask stays.
            keep = cols[None, :] < seq_len
            if CAUSAL:
                keep = keep & (offs_m[:, None] >= cols[None, :])
            qk = tl.where(keep, qk * qk_scale, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(qk, 1))
            qk = qk - m_new[:, None]
        else:
            m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            qk = qk * qk_scale - m_new[:, None]
        p = tl.math.exp2(qk)
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = v_desc.load([off_b, off_h, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
        acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_new
    return acc, l_i, m_i


# end snippet


# snippet: tma-kernel
@triton.jit
def attn_fwd_tma_kernel(q_desc, k_desc, v_desc, o_desc, seq_len, n_heads, qk_scale,
                        HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                        BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    tl.static_assert(BLOCK_M % BLOCK_N == 0)
    start_m = tl.program_id(0)
    off_bh = tl.program_id(1)
    off_b = off_bh // n_heads
    off_h = off_bh % n_heads
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    # Coordinates, not pointers: (batch, head, first row, first column).
    q = q_desc.load([off_b, off_h, start_m * BLOCK_M, 0]).reshape(BLOCK_M, HEAD_DIM)

    # The same stages as the pointer kernel: unmasked blocks first, then the
    # causal diagonal or the sequence tail through the masked instance.
    if CAUSAL:
        diag = start_m * BLOCK_M
        acc, l_i, m_i = _attn_key_loop_tma(
            acc, l_i, m_i, q, k_desc, v_desc, off_b, off_h,
            offs_m, 0, diag, seq_len, qk_scale,
            HEAD_DIM, BLOCK_N, False, CAUSAL)
        acc, l_i, m_i = _attn_key_loop_tma(
            acc, l_i, m_i, q, k_desc, v_desc, off_b, off_h,
            offs_m, diag, tl.minimum(diag + BLOCK_M, seq_len), seq_len,
            qk_scale, HEAD_DIM, BLOCK_N, True, CAUSAL)
    else:
        full = (seq_len // BLOCK_N) * BLOCK_N
        acc, l_i, m_i = _attn_key_loop_tma(
            acc, l_i, m_i, q, k_desc, v_desc, off_b, off_h,
            offs_m, 0, full, seq_len, qk_scale,
            HEAD_DIM, BLOCK_N, False, CAUSAL)
        acc, l_i, m_i = _attn_key_loop_tma(
            acc, l_i, m_i, q, k_desc, v_desc, off_b, off_h,
            offs_m, full, seq_len, seq_len, qk_scale,
            HEAD_DIM, BLOCK_N, True, CAUSAL)

    out = acc / l_i[:, None]
    # The store drops the rows past seq_len itself: no mask here either.
    o_desc.store([off_b, off_h, start_m * BLOCK_M, 0],
                 out.to(q.dtype).reshape(1, 1, BLOCK_M, HEAD_DIM))


# end snippet


# snippet: tma-launch
def attention_tma(q, k, v, causal: bool, sm_scale: float | None = None,
                  block_m: int = 128, block_n: int = 128,
                  num_warps: int = 8, num_stages: int = 3):
    """attention() with TMA: same arguments, same result; needs a Hopper GPU
    (or the interpreter)."""
    B, H, S, D = q.shape
    assert k.shape == v.shape == q.shape, "self-attention: q, k, v all (B, H, S, D)"
    assert q.dtype == k.dtype == v.dtype == torch.float16
    assert D in (16, 32, 64, 128), "HEAD_DIM: a power of two the tensor cores take"
    assert block_m % block_n == 0
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(D)
    out = torch.empty_like(q)
    # One descriptor per tensor, built from its own shape and strides, so any
    # (B, H, S, D) layout works whose last dimension is contiguous and whose
    # other strides are multiples of 16 bytes (TensorDescriptor asserts both).
    # S need not be a multiple of the blocks: the descriptor's S bounds each
    # copy.
    q_desc = TensorDescriptor.from_tensor(q, [1, 1, block_m, D])
    k_desc = TensorDescriptor.from_tensor(k, [1, 1, block_n, D])
    v_desc = TensorDescriptor.from_tensor(v, [1, 1, block_n, D])
    o_desc = TensorDescriptor.from_tensor(out, [1, 1, block_m, D])
    grid = (triton.cdiv(S, block_m), B * H)
    attn_fwd_tma_kernel[grid](
        q_desc, k_desc, v_desc, o_desc, S, H, sm_scale * LOG2E,
        HEAD_DIM=D, BLOCK_M=block_m, BLOCK_N=block_n, CAUSAL=causal,
        num_warps=num_warps, num_stages=num_stages,
    )
    return out


# end snippet


# snippet: configs
# Every kernel the lesson races, by name: each takes (q, k, v, causal) and
# the launch configuration as keywords. A new kernel is one more entry here
# and one or more configurations below; the race, the checks at the
# benchmark shape, the benchmarks and the figure pick it up from there.
KERNELS = {"pointer": attention, "TMA": attention_tma}


class Config(NamedTuple):
    kernel: str
    block_m: int
    block_n: int
    num_warps: int
    num_stages: int

    def label(self) -> str:
        return (f"{self.kernel} {self.block_m}x{self.block_n}, "
                f"{self.num_warps} warps, {self.num_stages} stages")

    def __call__(self, q, k, v, causal: bool, sm_scale=None):
        return KERNELS[self.kernel](
            q, k, v, causal, sm_scale, block_m=self.block_m, block_n=self.block_n,
            num_warps=self.num_warps, num_stages=self.num_stages)


# Fixed configurations, not an autotuner, to keep the run short.
GPU_CONFIGS = [
    Config("pointer", 128, 64, 8, 3),
    Config("pointer", 128, 128, 8, 3),
    Config("TMA", 128, 128, 8, 3),  # in the Hopper space of Triton's own tutorial
    Config("TMA", 128, 128, 8, 2),
    Config("TMA", 128, 64, 8, 3),
    # Four warps, two stages: the fastest of 20 forward variants timed on the
    # H200 (tools/experiments/perf_variants.py; NOTES.md has the table).
    Config("TMA", 128, 64, 4, 2),
]
# end snippet


# snippet: reference
def reference(q, k, v, causal: bool, dtype=torch.float64, sm_scale=None):
    """The unfused definition in high precision: the S x S matrix, materialised."""
    q, k, v = (t.to(dtype) for t in (q, k, v))
    S, D = q.shape[-2], q.shape[-1]
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(D)
    scores = (q @ k.transpose(-1, -2)) * sm_scale
    if causal:
        future = torch.ones(S, S, dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


# end snippet


def attention_flops(B, H, S, D, causal):
    # Two matmuls (Q K^T and P V), each 2 * S * S * D per head; causal skips half.
    flop = 4.0 * B * H * S * S * D
    return flop / 2 if causal else flop


# snippet: tolerance
# The output is a convex combination of rows of V (softmax weights are >= 0
# and sum to 1), so its natural scale is max|ref|. The kernel rounds three
# times: P to fp16 before P @ V (relative 2^-11 on each weight, so at most
# 2^-11 * max|ref| in total), the fp32 accumulations (negligible), and O to
# fp16 at the end (2^-11 relative). exp2 on the GPU is an approximation good
# to about 2 fp32 ulps. Together that is a few times 5e-4 of max|ref|; the
# bound below allows 4e-3, far less than the error of a wrong rescale, a
# dropped block or a causal mask one key off in these shapes. (A tail mask
# one key off hides better in random data; check_tail is built to expose it.)
TOL = 4e-3
# end snippet


def check_case(lesson, name, B, H, S, D, causal, device, seed, fn=attention, **cfg):
    torch.manual_seed(seed)
    q, k, v = (torch.randn(B, H, S, D, device=device, dtype=torch.float16)
               for _ in range(3))
    want = reference(q, k, v, causal)
    got = torch.full_like(q, float("nan"))  # poison: an unwritten row cannot pass
    got.copy_(fn(q, k, v, causal, **cfg))
    scale = float(want.abs().max())
    lesson.close(name, got, want, rtol=TOL, atol=TOL * scale,
                 why=f"B={B} H={H} S={S} D={D} causal={causal}, fp64 reference, "
                 f"atol = {TOL:g} * max|ref|")


# snippet: tail-check
def tail_inputs(S, D, device, seed):
    """A sequence tail that punishes any key past S, read or merely unmasked.

    q, k, v are views of the first S rows of longer buffers, so memory past
    row S exists and holds poison: keys that would score about +4 * sqrt(D)
    and values of 100. And every real score is about -sqrt(D) (q > 0, k < 0),
    so even a zero key past the end (a load that is masked but a score that
    is not) would outweigh each real key by a factor of about exp(sqrt(D)).
    """
    torch.manual_seed(seed)
    shape = (1, 2, S + 64, D)
    q = torch.rand(shape, device=device) + 0.5
    k = -(torch.rand(shape, device=device) + 0.5)
    v = torch.randn(shape, device=device)
    k[:, :, S:] = 4.0
    v[:, :, S:] = 100.0
    return [t.half()[:, :, :S] for t in (q, k, v)]


# end snippet


def check_tail(lesson, name, S, D, causal, device, seed, fn=attention, **cfg):
    q, k, v = tail_inputs(S, D, device, seed)
    want = reference(q, k, v, causal)
    got = torch.full_like(q, float("nan"))
    got.copy_(fn(q, k, v, causal, **cfg))
    scale = float(want.abs().max())
    lesson.close(name, got, want, rtol=TOL, atol=TOL * scale,
                 why=f"S={S} D={D} causal={causal}, poisoned rows past S, "
                 "all real scores < 0")


def masks():
    return (("full", False), ("causal", True))


# snippet: checks
# The pointer kernel's cases, (B, H, S, D), each run non-causal and causal.
# Small shapes under the interpreter; S = 100 and 200 are not multiples of
# the blocks, so the query-tail and key-tail masks both do work. On the GPU,
# H = 32 and S = 1024 make every size a multiple of 16, as at the benchmark
# shape, so that case runs the very kernel the race times. "diagonal" runs
# the causal diagonal stage with several key blocks per query block
# (BLOCK_M > BLOCK_N); the tails are check_tail's poisoned inputs.
POINTER_CHECKS = {
    "interpreter": {
        "cases": [(1, 2, 128, 64), (1, 1, 100, 64), (2, 1, 200, 32)],
        "blocks": {"block_m": 32, "block_n": 32},
        "diagonal": {"block_m": 64, "block_n": 32},
    },
    "gpu": {
        "cases": [(1, 2, 128, 64), (1, 2, 200, 64), (2, 2, 1000, 128),
                  (1, 32, 1024, 128)],
        "blocks": {"block_m": 128, "block_n": 64},
        "diagonal": {"block_m": 128, "block_n": 32, "num_warps": 4},
    },
}
# end snippet


def check_pointer_kernel(lesson: Lesson, device: str) -> None:
    plan = POINTER_CHECKS["interpreter" if lesson.interpret else "gpu"]
    seed = 0
    for B, H, S, D in plan["cases"]:
        for kind, causal in masks():
            check_case(lesson, f"{kind}-b{B}-h{H}-s{S}-d{D}", B, H, S, D, causal,
                       device, seed, **plan["blocks"])
            seed += 1
    check_case(lesson, "causal-bm-gt-bn-s100", 1, 1, 100, 64, True, device, seed,
               **plan["diagonal"])
    for kind, causal in masks():
        check_tail(lesson, f"{kind}-tail-poison-s100", 100, 64, causal, device,
                   seed + 1, **plan["blocks"])


# snippet: tma-checks
# The TMA kernel through the same kinds of case. BLOCK_M = 2 * BLOCK_N,
# so the causal diagonal spans two key blocks. Every case has B * H > 1
# and most a ragged S, so a copy that ran past S into the next head's
# rows would show; in the tail checks the memory past row S holds poison,
# so the descriptor's shape, not the end of the buffer, must stop a copy.
TMA_CHECKS = {
    "interpreter": {
        "cases": [(1, 2, 128, 64), (2, 2, 100, 32)],
        "blocks": {"block_m": 64, "block_n": 32},
    },
    "gpu": {
        "cases": [(1, 2, 128, 64), (2, 2, 1000, 128), (1, 32, 1024, 128)],
        "blocks": {"block_m": 128, "block_n": 64, "num_warps": 8, "num_stages": 3},
    },
}
# end snippet


def check_tma_kernel(lesson: Lesson, device: str) -> None:
    plan = TMA_CHECKS["interpreter" if lesson.interpret else "gpu"]
    seed = 12
    for B, H, S, D in plan["cases"]:
        for kind, causal in masks():
            check_case(lesson, f"tma-{kind}-b{B}-h{H}-s{S}-d{D}", B, H, S, D, causal,
                       device, seed, fn=attention_tma, **plan["blocks"])
            seed += 1
    for kind, causal in masks():
        check_tail(lesson, f"tma-{kind}-tail-poison-s100", 100, 64, causal, device,
                   seed, fn=attention_tma, **plan["blocks"])


# The shape of a large-model prefill: batch 4, 32 heads, 4096 tokens, head
# dimension 128, fp16.
B, H, S, D = 4, 32, 4096, 128


def bench_inputs(lesson: Lesson, device: str):
    torch.manual_seed(1234)
    shape = lesson.size(gpu=(B, H, S, D), smoke=(1, 2, 128, D))
    return [torch.randn(shape, device=device, dtype=torch.float16) for _ in range(3)]


def show_compiled_code(lesson: Lesson) -> None:
    """Pointer loads against TMA, same tile: what each costs in registers."""
    q, k, v = bench_inputs(lesson, "cuda")
    out = torch.empty_like(q)
    scale = LOG2E / math.sqrt(D)
    # The inputs' own sequence length and head count, not the benchmark's S and
    # H: at smoke size they differ, and a kernel told S = 4096 reads past the
    # end of a 128-token K (compute-sanitizer's memcheck caught it).
    _, heads, seq_len, _ = q.shape
    tile = {"HEAD_DIM": D, "BLOCK_M": 128, "BLOCK_N": 128, "CAUSAL": False,
            "num_warps": 8, "num_stages": 3}
    # One program of each is enough: a launch returns the compiled kernel.
    pointer = attn_fwd_kernel[(1, 1)](
        q, k, v, out, seq_len, heads, scale, *q.stride()[:3], *k.stride()[:3],
        *v.stride()[:3], *out.stride()[:3], **tile)
    descs = [TensorDescriptor.from_tensor(t, [1, 1, 128, D]) for t in (q, k, v, out)]
    tma = attn_fwd_tma_kernel[(1, 1)](*descs, seq_len, heads, scale, **tile)
    rows = []
    for name, compiled in (("pointer", pointer), ("TMA", tma)):
        ptx = compiled.asm["ptx"]
        rows.append([
            name,
            getattr(compiled, "n_regs", None),
            getattr(compiled, "n_spills", None),
            round(compiled.metadata.shared / 1024, 1),
            len(re.findall(r"cp\.async\.c[ag]\.shared\.global", ptx)),
            len(re.findall(r"cp\.async\.bulk\.tensor", ptx)),
            len(re.findall(r"wgmma\.mma_async", ptx)),
        ])
    lesson.table(
        "compiled",
        ["kernel", "registers / thread", "spilled registers", "shared memory KiB",
         "cp.async", "TMA copies", "wgmma"],
        rows,
        f"The two kernels compiled for the same tile ({tile['BLOCK_M']}x"
        f"{tile['BLOCK_N']}, D = {D}, {tile['num_warps']} warps, "
        f"{tile['num_stages']} stages, non-causal); instruction counts are static, "
        "in the PTX.",
    )


def race_configs(lesson: Lesson, device: str) -> dict:
    """Every configuration against SDPA at the benchmark shape; the fastest per
    mask goes on to the benchmark."""
    # snippet: race
    q, k, v = bench_inputs(lesson, device)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    race, misfits = {}, []
    for kind, causal in masks():
        fns = {"SDPA": lambda c=causal: sdpa(q, k, v, is_causal=c)}
        for cfg in GPU_CONFIGS:
            # Compile it first: a config whose tiles and pipeline buffers need
            # more shared memory than an SM has fails here. The table records
            # it; the race goes on without it.
            try:
                cfg(q, k, v, causal)
            except OutOfResources as err:
                print(f"  {kind} {cfg.label()} does not fit: {err}")
                misfits.append([kind, cfg.kernel, cfg.label(), "does not fit", ""])
                continue
            fns[cfg] = lambda c=causal, cfg=cfg: cfg(q, k, v, c)
        # SDPA and every config take turns, round after round, so clock drift
        # under sustained load does not favour whichever is timed first. Three
        # rounds pick the fastest; the benchmark below measures it afresh.
        race[kind] = bench_interleaved(fns, rounds=3)
    # end snippet
    rows = []
    for kind, causal in masks():
        flop = attention_flops(B, H, S, D, causal)
        for name in race[kind]:
            ms = race[kind].median(name)
            label = "torch SDPA" if name == "SDPA" else name.label()
            kernel = "SDPA" if name == "SDPA" else name.kernel
            rows.append([kind, kernel, label, round(ms, 4), round(tflops(flop, ms), 1)])
    lesson.table(
        "configs", ["mask", "kernel", "configuration", "ms", "TFLOP/s"],
        rows + misfits,
        f"B={B}, H={H}, S={S}, D={D}, fp16; median of 3 rounds in which SDPA and "
        "every configuration took turns",
    )
    return race


def fastest(race) -> dict:
    return {kind: min((c for c in race[kind] if c != "SDPA"), key=race[kind].median)
            for kind, _ in masks()}


def check_benchmark_shape(lesson: Lesson, device: str, best: dict) -> None:
    """Correctness at the benchmark shape, with the configurations that won:
    against SDPA's own fp16 output on every head (both round the same way, so
    the two differ by about twice the error of each), and against the fp64
    reference on the first four heads of batch 0."""
    q, k, v = bench_inputs(lesson, device)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    for kind, causal in masks():
        cfg = best[kind]
        got = torch.full_like(q, float("nan"))
        got.copy_(cfg(q, k, v, causal))
        want = sdpa(q, k, v, is_causal=causal)
        lesson.close(f"{kind}-bench-shape-vs-sdpa", got, want, rtol=2 * TOL,
                     atol=2 * TOL * float(want.abs().max()),
                     why=f"{cfg.label()}; both fp16; the bound doubles the reference "
                     "tolerance")
        ref = reference(q[:1, :4], k[:1, :4], v[:1, :4], causal)
        lesson.close(f"{kind}-bench-shape-vs-fp64", got[:1, :4], ref, rtol=TOL,
                     atol=TOL * float(ref.abs().max()),
                     why=f"{cfg.label()}; batch 0, heads 0-3, fp64 reference, "
                     f"atol = {TOL:g} * max|ref|")
        del got, want, ref


def benchmark(lesson: Lesson, device: str, best: dict) -> None:
    q, k, v = bench_inputs(lesson, device)
    # snippet: benchmark
    # The fastest configuration of each mask against SDPA, measured afresh:
    # 15 rounds of the two taking turns. FLOPs count the two matmuls only
    # (causal: half). The non-causal run also times what fusion saves: the
    # same attention as three PyTorch ops, which write and read the S x S
    # matrix (B * H * S * S fp16 values, 4.3 GB here).
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def unfused():
        s = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(D))
        return torch.softmax(s, dim=-1) @ v

    contenders = {}
    for kind, causal in masks():
        contenders[kind] = {
            "triton": lambda c=causal, cfg=best[kind]: cfg(q, k, v, c),
            "SDPA": lambda c=causal: sdpa(q, k, v, is_causal=c)}
        if not causal:
            contenders[kind]["unfused"] = unfused
    # end snippet
    ms = {kind: bench_interleaved(fns) for kind, fns in contenders.items()}
    for kind, causal in masks():
        flop = attention_flops(B, H, S, D, causal)
        lesson.benchmark(
            f"{kind}-b{B}-h{H}-s{S}-d{D}-vs-sdpa",
            f"fused attention vs SDPA, {kind}, B{B} H{H} S{S} D{D} fp16",
            ms[kind], "triton", "SDPA", unit="TFLOP/s", work=flop,
            baseline_name="torch SDPA", threshold=0.6, stretch=0.9,
            note=f"fastest of {len(GPU_CONFIGS)} configurations in the race: "
            f"{best[kind].label()}",
        )
        if not causal:
            lesson.benchmark(
                f"{kind}-b{B}-h{H}-s{S}-d{D}-vs-unfused",
                f"fused attention vs unfused torch, {kind}, B{B} H{H} S{S} D{D}",
                ms[kind], "triton", "unfused", unit="TFLOP/s", work=flop,
                baseline_name="unfused torch (matmul, softmax, matmul)", gate=False,
                note="informational: the cost of materialising the score matrix; "
                f"{best[kind].label()}",
            )


def plot_race(lesson: Lesson, race: dict, best: dict) -> None:
    """Each configuration's speed as a fraction of SDPA's, full and causal side
    by side, with the lesson's two targets; the title names the winners."""
    configs = [c for c in GPU_CONFIGS if all(c in race[kind] for kind, _ in masks())]

    def ratio(kind, cfg):
        return race[kind].median("SDPA") / race[kind].median(cfg)

    winners = {best[kind].label() for kind, _ in masks()}
    title = (f"fastest, both masks: {winners.pop()}" if len(winners) == 1 else
             "\n".join(f"fastest, {kind}: {best[kind].label()}"
                       for kind, _ in masks()))

    def draw(fig):
        ax = fig.subplots()
        height = 0.38
        ys = range(len(configs))
        for i, (kind, _) in enumerate(masks()):
            bars = ax.barh([y + (i - 0.5) * height for y in ys],
                           [ratio(kind, c) for c in configs], height, label=kind)
            if best[kind] in configs:  # the winner, outlined
                bars[configs.index(best[kind])].set_edgecolor(ax.yaxis.label.get_color())
                bars[configs.index(best[kind])].set_linewidth(2)
        right = max(1.15, 1.1 * max(ratio(kind, c) for kind, _ in masks()
                                    for c in configs))
        for x, style, text in ((1.0, "-", "SDPA"), (0.9, "--", "stretch 0.9"),
                               (0.6, ":", "gate 0.6")):
            ax.axvline(x, color="gray", linestyle=style, linewidth=1, label=text)
        ax.set_yticks(list(ys), [f"{c.kernel} {c.block_m}x{c.block_n}, "
                                 f"{c.num_warps}w {c.num_stages}s" for c in configs])
        ax.invert_yaxis()  # the first configuration on top
        ax.set_xlim(0, right)
        ax.set_xlabel("speed / SDPA's (SDPA = 1)")
        fig.suptitle(f"B={B}, H={H}, S={S}, D={D}, fp16\n{title}")
        handles, labels = ax.get_legend_handles_labels()  # lines first: bars first
        fig.legend(handles[3:] + handles[:3], labels[3:] + labels[:3],
                   loc="outside lower center", ncols=3)

    lesson.plot("tflops-by-config", "Each kernel and configuration as a fraction of "
                "SDPA's speed in the same run, non-causal and causal (w: warps, s: "
                "pipeline stages); the outlined bar of each mask is the fastest, "
                "which goes on to the benchmark.", draw, size=(7.0, 5.6))


def try_this(lesson: Lesson, device: str) -> None:
    # The checks' first shape and configurations, so the GPU reuses their
    # compiled kernels.
    Bt, Ht, St, Dt = 1, 2, 128, 64
    if lesson.interpret:
        cfg = {"block_m": 32, "block_n": 32}
        tma_cfg = {"block_m": 64, "block_n": 32}
    else:
        cfg = {"block_m": 128, "block_n": 64}
        tma_cfg = {"block_m": 128, "block_n": 64, "num_warps": 8, "num_stages": 3}
    torch.manual_seed(99)

    # snippet: solution-bshd
    # A projection writes (B, S, H, D): the heads of one token side by side.
    # Viewed as (B, H, S, D) with transpose(1, 2), nothing moves: the head
    # dimension stays contiguous and only the strides change, which both
    # kernels take as they come (TMA: every other stride a multiple of 16 B).
    q, k, v = (torch.randn(Bt, St, Ht, Dt, device=device, dtype=torch.float16)
               .transpose(1, 2) for _ in range(3))
    outs = {"pointer": attention(q, k, v, True, **cfg),
            "TMA": attention_tma(q, k, v, True, **tma_cfg)}
    # end snippet
    want = reference(q, k, v, True)
    for name, got in outs.items():
        lesson.close(f"exercise-bshd-{name}", got, want, rtol=TOL,
                     atol=TOL * float(want.abs().max()),
                     why="(B, S, H, D) storage viewed as (B, H, S, D), causal")

    # snippet: solution-temperature
    # A temperature: scores divided by T * sqrt(D) instead of sqrt(D). The
    # kernel multiplies by qk_scale = sm_scale * log2(e) anyway, so it is
    # one number on the host; T < 1 sharpens the softmax toward the max.
    T = 0.25
    sm_scale = 1.0 / (T * math.sqrt(Dt))
    got = attention(q, k, v, False, sm_scale=sm_scale, **cfg)
    # end snippet
    want = reference(q, k, v, False, sm_scale=sm_scale)
    lesson.close("exercise-temperature", got, want, rtol=TOL,
                 atol=TOL * float(want.abs().max()),
                 why=f"sm_scale = 1 / ({T} * sqrt({Dt})), non-causal")


def main() -> int:
    lesson = Lesson("fused-attention")
    device = lesson.device()
    if lesson.step("compiled-code", needs_gpu="the interpreter compiles nothing",
                   smoke=False):
        show_compiled_code(lesson)
    with lesson.step("correctness"):
        check_pointer_kernel(lesson, device)
        check_tma_kernel(lesson, device)
    if lesson.step("race", needs_gpu="the configurations race on GPU time"):
        race = race_configs(lesson, device)
        best = fastest(race)
        check_benchmark_shape(lesson, device, best)
        plot_race(lesson, race, best)
    if lesson.step("benchmark", needs_gpu="timings need a GPU"):
        benchmark(lesson, device, best)
    with lesson.step("exercises"):
        try_this(lesson, device)
    return lesson.finish()


if __name__ == "__main__":
    sys.exit(main())
