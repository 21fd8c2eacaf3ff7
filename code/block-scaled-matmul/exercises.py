"""Block-scaled matmul: exercises. Fill in each "Your code here", then check:

    TRITON_INTERPRET=1 python exercises.py   # any CPU (on a GPU: python exercises.py)

Each exercise prints one line: passed, or what is wrong and a hint. With --only NAME
it checks one; --solutions checks the answers in solutions.py. Both run on any
machine: the MX arithmetic is plain torch (its CPU build converts to and from
float8_e4m3fn), and the kernel reads e4m3 values held in fp16 (each one is
exactly an fp16 value), as Triton's interpreter has no float8 types.
"""

import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.append(str(Path(__file__).resolve().parent.parent))  # practice.py, in the repo
from block_scaled_matmul import E4M3_MAX, MX_BLOCK, varied_blocks  # noqa: E402

import practice  # noqa: E402


# snippet: ocp-rule
def quantize_ocp(x):
    """MXFP8 by the OCP specification's rule, for x (R, K) in float64, K a multiple
    of 32, no block all zeros: each block of 32 along K gets the scale 2^X with
    X = floor(log2(amax)) - 8 (8: e4m3's largest exponent), stored as the byte
    X + 127 (E8M0); its elements x / 2^X, clamped to +-448, round to e4m3.

    Return (q, scale): q (R, K) in torch.float8_e4m3fn, scale (R, K / 32) in
    torch.uint8.
    """
    R, K = x.shape
    # Your code here: the lesson's quantize_mxfp8 rounds X up instead.
    q = x.clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    return q, torch.full((R, K // MX_BLOCK), 127, dtype=torch.uint8)


# end snippet


# snippet: check-ocp-rule
@practice.exercise("ocp-rule", hint="X = torch.floor(torch.log2(amax)) - 8 per block "
                   "of 32 (reshape to (R, K / 32, 32)); q = (x / torch.exp2(X))"
                   ".clamp(-448, 448).to(torch.float8_e4m3fn); scale = (X + 127)"
                   ".to(torch.uint8)")
def check_ocp_rule(m):
    x = varied_blocks(64, 1024, seed=3).double()
    q, scale = m.quantize_ocp(x)
    blocks = x.reshape(64, -1, MX_BLOCK)
    _, e = torch.frexp(blocks.abs().amax(dim=-1))  # amax = f * 2^e, 1/2 <= f < 1
    want = e - 1 - 8 + 127  # floor(log2(amax)) = e - 1
    if scale.dtype != torch.uint8 or tuple(scale.shape) != tuple(want.shape):
        raise practice.Wrong(f"scale is {scale.dtype} {list(scale.shape)}, not torch."
                             f"uint8 {list(want.shape)}: one byte per 32 values")
    wrong = (scale.long() != want).nonzero()
    if len(wrong):
        r, b = (int(i) for i in wrong[0])
        raise practice.Wrong(f"{len(wrong)} of {want.numel()} scale bytes differ; "
                             f"block ({r}, {b}): byte {int(scale[r, b])}, the OCP rule "
                             f"gives {int(want[r, b])}")
    if q.dtype != torch.float8_e4m3fn:
        raise practice.Wrong(f"q is {q.dtype}, not torch.float8_e4m3fn")
    factor = torch.exp2(scale.double() - 127).repeat_interleave(MX_BLOCK, dim=1)
    back = q.double() * factor
    if not back.isfinite().all():
        r, k = (int(i) for i in (~back.isfinite()).nonzero()[0])
        raise practice.Wrong(f"q[{r}, {k}] is not finite: x / 2^X = "
                             f"{float(x[r, k] / factor[r, k]):.4g} is past 448")
    # A clamped element lay in (448, 512) * 2^X: off by less than 64/512 = 1/8.
    # The others within half an e4m3 step: 2^-4 of a normal value, 2^(X-10) below.
    bound = torch.maximum(2.0**-4 * x.abs(), factor * 2.0**-10)
    clamped = (x / factor).abs() > E4M3_MAX
    bound[clamped] = x.abs()[clamped] / 8
    ratio = (back - x).abs() / bound
    if ratio.max() > 1:
        r, k = divmod(int(ratio.argmax()), x.shape[1])
        raise practice.Wrong(f"x[{r}, {k}] = {float(x[r, k]):.6g} came back as "
                             f"{float(back[r, k]):.6g}, off by {float(ratio.max()):.3g}"
                             " times its bound")


# end snippet


# snippet: mx-dequant
@triton.jit
def mx_dequant_kernel(q_ptr, s_ptr, out_ptr, R, K,
                      BLOCK_R: tl.constexpr, BLOCK_K: tl.constexpr):
    """out[r, k] = q[r, k] * 2^(s[r, k // 32] - 127) in float32: the values an MX
    operand stands for, the arithmetic tl.dot_scaled does on each element.

    q is (R, K), row-major; s holds the E8M0 scale bytes, one per 32 values
    along K, (R, K / 32) row-major (widened to int32 here). K is a multiple of
    32; one program per BLOCK_R x BLOCK_K tile. The loads and the store are
    written: find each element's scale byte and apply it.
    """
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.program_id(1) * BLOCK_K + tl.arange(0, BLOCK_K)
    mask = (rows[:, None] < R) & (cols[None, :] < K)
    q = tl.load(q_ptr + rows[:, None] * K + cols[None, :], mask=mask, other=0.0)
    factor = 1.0  # Your code here: each element's block scale, a power of two.
    tl.store(out_ptr + rows[:, None] * K + cols[None, :], q.to(tl.float32) * factor,
             mask=mask)


# end snippet


# snippet: check-mx-dequant
@practice.exercise("mx-dequant", hint="the scale of (r, k) sits at s_ptr + "
                   "r * (K // 32) + k // 32; factor = "
                   "tl.exp2(s.to(tl.float32) - 127.0)")
def check_mx_dequant(m):
    for R, K in ((70, 96), (33, 160)):  # tiles of 32 x 64: partial in both
        q = (torch.randn(R, K) * 100).to(torch.float8_e4m3fn).to(torch.float16)
        s = torch.randint(127 - 20, 127 + 21, (R, K // MX_BLOCK), dtype=torch.int32)
        out = practice.output(R, K)
        m.mx_dequant_kernel[(triton.cdiv(R, 32), triton.cdiv(K, 64))](
            practice.guarded(q), practice.guarded(s), out, R, K, BLOCK_R=32, BLOCK_K=64)
        want = q.double() * torch.exp2(s.double() - 127).repeat_interleave(MX_BLOCK, 1)
        practice.expect("out", out, want, case=f"{R} x {K}, blocks of 32 along K")


# end snippet


if __name__ == "__main__":
    sys.exit(practice.main())
