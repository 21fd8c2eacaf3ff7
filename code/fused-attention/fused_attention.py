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

Run it:
    TRITON_INTERPRET=1 python fused_attention.py   # any machine: checks on the CPU
    python fused_attention.py                      # a Hopper GPU: checks, one timing

Beside it: exercises.py (check your own online softmax and causal stages) and
lesson.py (the run the course records: every check, the race of launch
configurations and the benchmarks against SDPA on the lesson's page).
"""

import math
import os

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

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
              num_warps: int = 8, num_stages: int = 3, out=None):
    """softmax(q k^T * sm_scale [+ causal mask]) v for fp16 (B, H, S, D) tensors,
    into `out` when given (any strides with a contiguous D)."""
    B, H, S, D = q.shape
    assert k.shape == v.shape == q.shape, "self-attention: q, k, v all (B, H, S, D)"
    assert q.dtype == k.dtype == v.dtype == torch.float16
    assert q.stride(-1) == k.stride(-1) == v.stride(-1) == 1, "D must be contiguous"
    assert D in (16, 32, 64, 128), "HEAD_DIM: a power of two the tensor cores take"
    assert block_m % block_n == 0
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(D)
    out = torch.empty_like(q) if out is None else out
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
                  num_warps: int = 8, num_stages: int = 3, out=None):
    """attention() with TMA: same arguments, same result; needs a Hopper GPU
    (or the interpreter)."""
    B, H, S, D = q.shape
    assert k.shape == v.shape == q.shape, "self-attention: q, k, v all (B, H, S, D)"
    assert q.dtype == k.dtype == v.dtype == torch.float16
    assert D in (16, 32, 64, 128), "HEAD_DIM: a power of two the tensor cores take"
    assert block_m % block_n == 0
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(D)
    out = torch.empty_like(q) if out is None else out
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


# snippet: tolerance
# The output is a convex combination of rows of V (softmax weights are >= 0
# and sum to 1), so its natural scale is max|ref|. The kernel rounds three
# times: P to fp16 before P @ V (relative 2^-11 on each weight, so at most
# 2^-11 * max|ref| in total), the fp32 accumulations (negligible), and O to
# fp16 at the end (2^-11 relative). exp2 on the GPU is an approximation good
# to about 2 fp32 ulps. Together that is a few times 5e-4 of max|ref|; the
# bound below allows 4e-3, far less than the error of a wrong rescale, a
# dropped block or a causal mask one key off in these shapes. (A tail mask
# one key off hides better in random data; lesson.py's tail check exposes it.)
TOL = 4e-3
# end snippet


# snippet: self-check
def self_check() -> None:
    """Both kernels against the float64 definition, causal and not, on sequence
    lengths no block divides; on a GPU, one timing at a prefill's shape."""
    on_gpu = torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1"
    device = "cuda" if on_gpu else "cpu"
    # The interpreter runs one program at a time: small blocks and shapes.
    blocks = {} if on_gpu else {"block_m": 64, "block_n": 32}
    shape = (2, 3, 1000, 64) if on_gpu else (1, 2, 100, 32)
    torch.manual_seed(0)
    q, k, v = (torch.randn(shape, device=device, dtype=torch.float16) for _ in range(3))
    for causal in (False, True):
        want = reference(q, k, v, causal)
        for kernel in (attention, attention_tma):
            got = kernel(q, k, v, causal, **blocks)
            torch.testing.assert_close(got.double(), want, rtol=TOL,
                                       atol=TOL * float(want.abs().max()))
    print(f"attention and attention_tma match the float64 definition on {shape}, "
          "causal and not")
    if on_gpu:
        q, k, v = (torch.randn(4, 32, 4096, 128, device=device, dtype=torch.float16)
                   for _ in range(3))
        ms = triton.testing.do_bench(lambda: attention_tma(q, k, v, False, block_n=64,
                                                           num_warps=4, num_stages=2))
        print(f"attention_tma, B4 H32 S4096 D128: {ms:.3f} ms, "
              f"{4 * 4 * 32 * 4096**2 * 128 / ms / 1e9:.0f} TFLOP/s")


# end snippet


if __name__ == "__main__":
    self_check()
