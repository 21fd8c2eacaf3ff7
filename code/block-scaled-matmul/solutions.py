"""Block-scaled matmul: the answers to exercises.py, and the mistakes its checks catch.

    TRITON_INTERPRET=1 python exercises.py --solutions   # these answers pass
"""

import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.append(str(Path(__file__).resolve().parent.parent))  # practice.py, in the repo
from block_scaled_matmul import E4M3_MAX, MX_BLOCK  # noqa: E402

from practice import Mistake  # noqa: E402


# snippet: ocp-rule
def quantize_ocp(x):
    R, K = x.shape
    blocks = x.reshape(R, K // MX_BLOCK, MX_BLOCK)
    amax = blocks.abs().amax(dim=-1, keepdim=True)
    X = torch.floor(torch.log2(amax)) - 8  # the block's largest exponent, less 8
    scaled = blocks / torch.exp2(X)  # |scaled| < 2^9 = 512: clamp what passes 448
    q = scaled.clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    return q.reshape(R, K), (X.squeeze(-1) + 127).to(torch.uint8)


# end snippet


# snippet: mx-dequant
@triton.jit
def mx_dequant_kernel(q_ptr, s_ptr, out_ptr, R, K,
                      BLOCK_R: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.program_id(1) * BLOCK_K + tl.arange(0, BLOCK_K)
    mask = (rows[:, None] < R) & (cols[None, :] < K)
    q = tl.load(q_ptr + rows[:, None] * K + cols[None, :], mask=mask, other=0.0)
    # Row r's scales are K // 32 bytes long; element k is in block k // 32.
    s = tl.load(s_ptr + rows[:, None] * (K // 32) + (cols // 32)[None, :],
                mask=mask, other=127)
    factor = tl.exp2(s.to(tl.float32) - 127.0)  # E8M0: a biased exponent
    tl.store(out_ptr + rows[:, None] * K + cols[None, :], q.to(tl.float32) * factor,
             mask=mask)


# end snippet


# Each mistake is an edit of this file's text; the check must fail it and say `says`.
MISTAKES = {
    "ocp-rule": [
        Mistake("the exponent rounded up, as the lesson's own rule does",
                find="floor(torch.log2(amax)) - 8",
                replace="ceil(torch.log2(amax)) - 8",
                says="scale bytes differ"),
        Mistake("X not rounded to a whole exponent",
                find="X = torch.floor(torch.log2(amax)) - 8",
                replace="X = torch.log2(amax) - 8", says="off by"),
        Mistake("the E8M0 bias forgotten", find="(X.squeeze(-1) + 127)",
                replace="X.squeeze(-1)", says="scale bytes differ"),
    ],
    "mx-dequant": [
        Mistake("the block of element k taken as k % 32", find="(cols // 32)[None, :]",
                replace="(cols % 32)[None, :]", says="wrong at"),
        Mistake("a scale row as long as a row of q", find="rows[:, None] * (K // 32)",
                replace="rows[:, None] * K", says="wrong at"),
        Mistake("the exponent's bias forgotten", find="s.to(tl.float32) - 127.0",
                replace="s.to(tl.float32)", says="wrong at"),
    ],
}
