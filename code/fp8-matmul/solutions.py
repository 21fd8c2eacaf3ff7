"""FP8 matmul: the answers to exercises.py, and the mistakes its checks catch.

    TRITON_INTERPRET=1 python exercises.py --solutions   # these answers pass
"""

import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.append(str(Path(__file__).resolve().parent.parent))  # practice.py, in the repo
from practice import Mistake  # noqa: E402

E4M3_MAX = 448.0
E5M2_MAX = 57344.0


# snippet: e5m2
def quantize_e5m2(x):
    # The same quantizer with a new top value: 57344 = 1.75 * 2**15.
    amax = x.abs().max().float().clamp(min=1e-12)
    scale = amax / E5M2_MAX
    q = (x.float() / scale).clamp(-E5M2_MAX, E5M2_MAX).to(torch.float8_e5m2)
    return q, scale.reshape(())


# end snippet


# snippet: row-scales
def quantize_rows(x):
    # Each row's own largest |x| lands on 448; a row of zeros keeps a scale.
    amax = x.abs().amax(dim=1, keepdim=True).float().clamp(min=1e-12)
    scale = amax / E4M3_MAX
    q = (x.float() / scale).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    return q, scale


# end snippet


# snippet: row-epilogue
@triton.jit
def row_scaled_matmul_kernel(a_ptr, bt_ptr, c_ptr, sa_ptr, sb_ptr, M, N, K,
                             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                             BLOCK_K: tl.constexpr):
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        k_ok = (k + offs_k) < K
        a = tl.load(a_ptr + offs_m[:, None] * K + (k + offs_k)[None, :],
                    mask=(offs_m[:, None] < M) & k_ok[None, :], other=0.0)
        b = tl.load(bt_ptr + offs_n[None, :] * K + (k + offs_k)[:, None],
                    mask=(offs_n[None, :] < N) & k_ok[:, None], other=0.0)
        acc = tl.dot(a, b, acc)
    # One scale per row of the tile and one per column: an outer product.
    sa = tl.load(sa_ptr + offs_m, mask=offs_m < M, other=0.0)
    sb = tl.load(sb_ptr + offs_n, mask=offs_n < N, other=0.0)
    acc = acc * sa[:, None] * sb[None, :]
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], acc.to(tl.float16),
             mask=mask)


# end snippet


# Each mistake is an edit of this file's text; the check must fail it and say `says`.
MISTAKES = {
    "e5m2": [
        Mistake("e4m3's top value, 448", find="scale = amax / E5M2_MAX",
                replace="scale = amax / E4M3_MAX", says="57344"),
        Mistake("the largest x, not the largest |x|", find="amax = x.abs().max()",
                replace="amax = x.max()", says="57344"),
        Mistake("the scale multiplied, not divided",
                find="q = (x.float() / scale).clamp(-E5M2_MAX",
                replace="q = (x.float() * scale).clamp(-E5M2_MAX",
                says="half an e5m2 step"),
    ],
    "row-scales": [
        Mistake("amax down the columns", find="amax(dim=1, keepdim=True)",
                replace="amax(dim=0, keepdim=True)", says="one per row"),
        Mistake("one scale for the whole tensor", find="amax(dim=1, keepdim=True)",
                replace="amax().expand(x.shape[0], 1)", says="relative error"),
        Mistake("no floor under amax", find=".float().clamp(min=1e-12)\n    scale = "
                "amax / E4M3_MAX", replace=".float()\n    scale = amax / E4M3_MAX",
                says="not finite"),
    ],
    "row-epilogue": [
        Mistake("one scale for the tile: the per-tensor epilogue",
                find="acc = acc * sa[:, None] * sb[None, :]",
                replace="acc = acc * tl.load(sa_ptr) * tl.load(sb_ptr)",
                says="wrong at"),
        Mistake("the scales broadcast the wrong way round",
                find="acc = acc * sa[:, None] * sb[None, :]",
                replace="acc = acc * sa[None, :] * sb[:, None]", says="wrong at"),
        Mistake("B's scales read along the rows",
                find="sb = tl.load(sb_ptr + offs_n, mask=offs_n < N",
                replace="sb = tl.load(sb_ptr + offs_m, mask=offs_m < N",
                says="wrong at"),
    ],
}
