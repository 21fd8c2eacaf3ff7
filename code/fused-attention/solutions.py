"""Fused attention: the answers to exercises.py, and the mistakes its checks catch.

    TRITON_INTERPRET=1 python exercises.py --solutions   # these answers pass
"""

import sys
from pathlib import Path

import triton
import triton.language as tl

sys.path.append(str(Path(__file__).resolve().parent.parent))  # practice.py, in the repo
from practice import Mistake  # noqa: E402


# snippet: online-softmax
@triton.jit
def online_attention_kernel(Q, K, V, Out, seq_len, qk_scale, D: tl.constexpr,
                            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, D)
    rows = offs_m[:, None] < seq_len
    q = tl.load(Q + offs_m[:, None] * D + offs_d[None, :], mask=rows, other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, D], dtype=tl.float32)
    for start_n in range(0, seq_len, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        kv = offs_n[:, None] * D + offs_d[None, :]
        k = tl.load(K + kv, mask=offs_n[:, None] < seq_len, other=0.0)
        v = tl.load(V + kv, mask=offs_n[:, None] < seq_len, other=0.0)
        s = tl.dot(q, tl.trans(k)) * qk_scale
        s = tl.where(offs_n[None, :] < seq_len, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.math.exp2(s - m_new[:, None])  # every exponent <= 0: no overflow
        alpha = tl.math.exp2(m_i - m_new)  # <= 1; 0 on the first block (m_i = -inf)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]  # what was summed under the old max, rescaled
        acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_new
    tl.store(Out + offs_m[:, None] * D + offs_d[None, :], acc / l_i[:, None], mask=rows)


# end snippet


# snippet: causal-stages
def causal_stages(start_m, seq_len, BLOCK_M, BLOCK_N):
    diag = start_m * BLOCK_M  # the diagonal block's first key: all before it visible
    end = min(diag + BLOCK_M, seq_len)  # the diagonal, cut at the sequence's end
    return (0, diag), (diag, end)


# end snippet


# Each mistake is an edit of this file's text; the check must fail it and say `says`.
MISTAKES = {
    "online-softmax": [
        Mistake("no max subtraction", find="p = tl.math.exp2(s - m_new[:, None])",
                replace="p = tl.math.exp2(s)", says="computed NaN or inf"),
        Mistake("the accumulator not rescaled",
                find="acc = acc * alpha[:, None]  # what",
                replace="acc = acc  # what", says="wrong at"),
        Mistake("alpha the wrong way round", find="alpha = tl.math.exp2(m_i - m_new)",
                replace="alpha = tl.math.exp2(m_new - m_i)",
                says="computed NaN or inf"),
    ],
    "causal-stages": [
        Mistake("the unmasked loop through the diagonal",
                find="return (0, diag), (diag, end)",
                replace="return (0, end), (end, end)", says="wrong at"),
        Mistake("the diagonal one block short",
                find="end = min(diag + BLOCK_M, seq_len)",
                replace="end = min(diag + BLOCK_M - BLOCK_N, seq_len)",
                says="wrong at"),
        Mistake("every key block through the masked loop",
                find="return (0, diag), (diag, end)",
                replace="return (0, 0), (0, end)", says="masks"),
        Mistake("the diagonal not cut at the sequence's end",
                find="end = min(diag + BLOCK_M, seq_len)",
                replace="end = diag + BLOCK_M", says="masks"),
    ],
}
