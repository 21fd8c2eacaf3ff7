"""Fused attention: exercises. Fill in each "Your code here", then check your answers:

    TRITON_INTERPRET=1 python exercises.py   # any CPU (on a GPU: python exercises.py)

Each exercise prints one line: passed, or what is wrong and a hint. With --only NAME
it checks one; --solutions checks the answers in solutions.py.
"""

import math
import sys
import warnings
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.append(str(Path(__file__).resolve().parent.parent))  # practice.py, in the repo
from fused_attention import LOG2E, TOL, _attn_key_loop, reference  # noqa: E402

import practice  # noqa: E402


# snippet: online-softmax
@triton.jit
def online_attention_kernel(Q, K, V, Out, seq_len, qk_scale, D: tl.constexpr,
                            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """O = softmax(Q K^T * scale) V for one head: fp16 (seq_len, D), contiguous.

    A program owns BLOCK_M queries and walks the keys in blocks of BLOCK_N.
    The loop computes each block's scores, in base 2 (qk_scale carries
    log2 e) and -inf past seq_len. Fold them into the running row max m_i,
    the running sum l_i and the un-normalised output acc, so that acc / l_i
    is the softmax's output once every block is in.
    """
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, D)
    rows = offs_m[:, None] < seq_len
    q = tl.load(Q + offs_m[:, None] * D + offs_d[None, :], mask=rows, other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)  # noqa: F841 - yours
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, D], dtype=tl.float32)
    for start_n in range(0, seq_len, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        kv = offs_n[:, None] * D + offs_d[None, :]
        k = tl.load(K + kv, mask=offs_n[:, None] < seq_len, other=0.0)
        v = tl.load(V + kv, mask=offs_n[:, None] < seq_len, other=0.0)
        s = tl.dot(q, tl.trans(k)) * qk_scale
        s = tl.where(offs_n[None, :] < seq_len, s, float("-inf"))
        # Your code here: the new max, p, alpha; then l_i, acc (P in fp16 for
        # the tensor cores, as v is) and m_i.
        p = tl.zeros_like(s)
        acc = tl.dot(p.to(v.dtype), v, acc)
    tl.store(Out + offs_m[:, None] * D + offs_d[None, :], acc / l_i[:, None], mask=rows)


# end snippet


def attention_into(out, launch):
    """Run launch(o) twice: into `out` (NaN: what it never writes stays NaN) and
    into zeros, where a NaN or an infinity can only be one it computed."""
    with warnings.catch_warnings():  # the interpreter's numpy on a 0 / 0: said below
        warnings.simplefilter("ignore", RuntimeWarning)
        launch(out)
        zeros = practice.guarded(torch.zeros(out.shape, dtype=out.dtype))
        launch(zeros)
    made = ~torch.isfinite(zeros)
    if made.any():
        row = int(made.nonzero()[0][-2])
        raise practice.Wrong(f"computed NaN or inf at {int(made.sum())} of "
                             f"{zeros.numel()} elements, from row {row} on: an "
                             "exponential that overflowed, a row whose scores were "
                             "all -inf, or one that folded no key at all (0 / 0)")


# snippet: check-online-softmax
@practice.exercise("online-softmax", hint="m_new = max(m_i, max of s's row); p = "
                   "exp2(s - m_new); alpha = exp2(m_i - m_new); l_i = l_i * alpha + "
                   "sum(p); acc = acc * alpha before acc += p V; then m_i = m_new")
def check_online_softmax(m):
    for n, d, spread in ((100, 32, 6.0), (100, 32, 1.0), (37, 16, 1.0)):
        # spread 6: scores of hundreds, far past where exp2 overflows float32
        q, k, v = (practice.guarded((torch.randn(n, d) * s).half())
                   for s in (spread, spread, 1.0))
        out = practice.output(n, d)

        def launch(o, q=q, k=k, v=v, n=n, d=d):
            m.online_attention_kernel[(triton.cdiv(n, 32),)](
                q, k, v, o, n, LOG2E / math.sqrt(d), d, BLOCK_M=32, BLOCK_N=16)

        case = f"seq_len = {n}, D = {d}, inputs x {spread}"
        try:
            attention_into(out, launch)
        except practice.Wrong as wrong:
            raise practice.Wrong(f"out ({case}): {wrong}") from None
        want = reference(q[None, None], k[None, None], v[None, None], False)[0, 0]
        practice.expect("out", out, want, rtol=TOL, atol=TOL * float(want.abs().max()),
                        case=case)


# end snippet


# snippet: causal-stages
def causal_stages(start_m, seq_len, BLOCK_M, BLOCK_N):
    """The two loops of the causal kernel for query block start_m, as key ranges.

    Return ((lo, hi), (lo, hi)): first the keys every query of the block sees,
    folded by the loop with no mask, then the keys the masked loop must fold
    (the diagonal, cut at the sequence's end). Both start at multiples of
    BLOCK_N, and BLOCK_M is a multiple of BLOCK_N.
    """
    return (0, 0), (0, 0)  # Your code here


# end snippet


@triton.jit
def _staged_attention_kernel(Q, K, V, Out, seq_len, qk_scale, start_m, lo1, hi1, lo2,
                             hi2, stride_h, stride_s, HEAD_DIM: tl.constexpr,
                             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # The pointer kernel's causal branch for one query block of one head, with
    # the two loops' key ranges given: _attn_key_loop is fused_attention.py's.
    head = tl.program_id(0) * stride_h
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + head + offs_m[:, None] * stride_s + offs_d[None, :],
                mask=offs_m[:, None] < seq_len, other=0.0)
    k_ptrs = K + head + offs_n[:, None] * stride_s + offs_d[None, :]
    v_ptrs = V + head + offs_n[:, None] * stride_s + offs_d[None, :]
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    acc, l_i, m_i = _attn_key_loop(acc, l_i, m_i, q, k_ptrs, v_ptrs, stride_s, stride_s,
                                   offs_m, lo1, hi1, seq_len, qk_scale, BLOCK_N, False,
                                   True)
    acc, l_i, m_i = _attn_key_loop(acc, l_i, m_i, q, k_ptrs, v_ptrs, stride_s, stride_s,
                                   offs_m, lo2, hi2, seq_len, qk_scale, BLOCK_N, True,
                                   True)
    tl.store(Out + head + offs_m[:, None] * stride_s + offs_d[None, :],
             (acc / l_i[:, None]).to(tl.float16), mask=offs_m[:, None] < seq_len)


def masked_blocks(lo, hi, block):
    return len(range(lo, hi, block))


# snippet: check-causal-stages
@practice.exercise("causal-stages", hint="the diagonal block starts at diag = "
                   "start_m * BLOCK_M: every key before it is visible to every query "
                   "of the block, and the masked loop covers [diag, min(diag + "
                   "BLOCK_M, seq_len))")
def check_causal_stages(m):
    for n, block_m, block_n in ((100, 32, 16), (64, 32, 32), (90, 64, 16)):
        q, k, v = (practice.guarded(torch.randn(2, n, 32).half()) for _ in range(3))
        want = reference(q[None], k[None], v[None], True)[0]
        out = practice.output(2, n, 32, dtype=torch.float16)
        case = f"seq_len = {n}, BLOCK_M = {block_m}, BLOCK_N = {block_n}"
        for start_m in range(triton.cdiv(n, block_m)):
            (lo1, hi1), (lo2, hi2) = m.causal_stages(start_m, n, block_m, block_n)
            # The diagonal's blocks, and the sequence's last: all a mask must touch.
            need = masked_blocks(start_m * block_m, min(start_m * block_m + block_m, n),
                                 block_n)
            if masked_blocks(lo2, hi2, block_n) > need:
                raise practice.Wrong(
                    f"{case}: query block {start_m} masks "
                    f"{masked_blocks(lo2, hi2, block_n)} key blocks, [{lo2}, {hi2}), "
                    f"where the diagonal needs {need}: every block before it pays "
                    "for a mask it does not need")

            def launch(o, s=start_m, r=(lo1, hi1, lo2, hi2), t=(q, k, v, n),
                       blocks=(block_m, block_n)):
                _staged_attention_kernel[(2,)](
                    *t[:3], o, t[3], LOG2E / math.sqrt(32), s, *r, t[0].stride(0),
                    t[0].stride(1), HEAD_DIM=32, BLOCK_M=blocks[0], BLOCK_N=blocks[1])

            try:
                attention_into(out, launch)
            except practice.Wrong as wrong:
                raise practice.Wrong(f"out ({case}, query block {start_m}): {wrong}") \
                    from None
        practice.expect("out", out, want, rtol=TOL, atol=TOL * float(want.abs().max()),
                        case=case)


# end snippet


if __name__ == "__main__":
    sys.exit(practice.main())
