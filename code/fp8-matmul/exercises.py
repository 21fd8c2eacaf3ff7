"""FP8 matmul: exercises. Fill in each "Your code here", then check your answers:

    TRITON_INTERPRET=1 python exercises.py   # any CPU (on a GPU: python exercises.py)

Each exercise prints one line: passed, or what is wrong and a hint. With --only NAME
it checks one; --solutions checks the answers in solutions.py. Triton's interpreter
has no float8 types, but torch's CPU build converts to and from them: the
quantizers are plain torch, and the kernel runs on fp16 stand-ins that hold
e4m3 values exactly (every e4m3 value is an fp16 value), its scales in float32.
"""

import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.append(str(Path(__file__).resolve().parent.parent))  # practice.py, in the repo
import practice  # noqa: E402

E5M2_MAX = 57344.0  # largest finite float8_e5m2: 1.75 * 2**15


# snippet: e5m2
def quantize_e5m2(x):
    """Per-tensor scaling to e5m2, the other fp8 format (2 mantissa bits, 5
    exponent bits), used for gradients: (q, scale) with q = x / scale rounded to
    torch.float8_e5m2 and scale a 0-dim float32 tensor, chosen as fp8_matmul.py's
    quantize_e4m3 chooses it: the largest |x| lands on e5m2's largest finite
    value, E5M2_MAX.
    """
    return x.to(torch.float8_e5m2), torch.tensor(1.0)  # Your code here


# end snippet


# snippet: check-e5m2
@practice.exercise("e5m2", hint="scale = |x|.max() / E5M2_MAX in float32; q = (x / "
                   "scale).clamp(-E5M2_MAX, E5M2_MAX).to(torch.float8_e5m2)")
def check_e5m2(m):
    peaked = torch.randn(64, 100)
    peaked[3, 7] = -40.0  # the largest magnitude is negative
    cases = {"randn fp16": torch.randn(256, 512, dtype=torch.float16),
             "a negative peak": peaked,
             "small values, offset": torch.randn(97, 61) * 1e-3 + 5e-4}
    for case, x in cases.items():
        q, scale = m.quantize_e5m2(x)
        if q.dtype != torch.float8_e5m2:
            raise practice.Wrong(f"{case}: q is {q.dtype}, not torch.float8_e5m2")
        x64, s = x.double(), float(scale)
        amax = float(x64.abs().max())
        if abs(s - amax / E5M2_MAX) > 1e-6 * amax / E5M2_MAX:
            raise practice.Wrong(f"{case}: scale = {s:.6g}, but max |x| / 57344 = "
                                 f"{amax / E5M2_MAX:.6g}: the largest |x| must land "
                                 "on 57344, e5m2's largest finite value")
        back = q.double() * s
        if not back.isfinite().all():
            raise practice.Wrong(f"{case}: q holds values that are not finite")
        # Half a step: 2^-3 of a normal e5m2 value; 2^-17 (half the subnormal
        # step, in scaled units) below e5m2's smallest normal, 2^-14.
        ratio = (back - x64).abs() / (x64.abs() * 2.0**-3).clamp(min=2.0**-17 * s)
        if ratio.max() > 1:
            i, j = divmod(int(ratio.argmax()), x.shape[1])
            raise practice.Wrong(f"{case}: x[{i}, {j}] = {float(x64[i, j]):.6g} came "
                                 f"back as {float(back[i, j]):.6g}, off by "
                                 f"{float(ratio.max()):.3g} times half an e5m2 step")


# end snippet


# snippet: row-scales
def quantize_rows(x):
    """One scale per row: (q, scale) with q (rows, cols) in torch.float8_e4m3fn and
    scale (rows, 1) float32, each row's largest |x| landing on 448, so that
    q * scale gives x back to e4m3's precision in every row, however small the
    row is beside the others. A row of zeros needs a scale too.
    """
    return x.to(torch.float8_e4m3fn), torch.ones(x.shape[0], 1)  # Your code here


# end snippet


# snippet: check-row-scales
@practice.exercise("row-scales", hint="amax = x.abs().amax(dim=1, keepdim=True), "
                   "clamped to at least 1e-12; scale = amax / 448; q = (x / scale)"
                   ".clamp(-448, 448).to(torch.float8_e4m3fn)")
def check_row_scales(m):
    x = torch.randn(256, 512) * torch.logspace(-6, 0, 256)[:, None]  # six decades
    x[5] = 0.0  # a row of zeros
    q, scale = m.quantize_rows(x)
    if q.dtype != torch.float8_e4m3fn:
        raise practice.Wrong(f"q is {q.dtype}, not torch.float8_e4m3fn")
    if tuple(scale.shape) != (256, 1):
        raise practice.Wrong(f"scale is {list(scale.shape)}, not one per row [256, 1]")
    back = q.double() * scale.double()
    if not back.isfinite().all():
        row = int((~back.isfinite()).any(dim=1).nonzero()[0])
        raise practice.Wrong(f"row {row} came back not finite (row 5 is all zeros)")
    x64 = x.double()
    err = (back - x64).norm(dim=1) / x64.norm(dim=1).clamp(min=1e-300)
    if err.max() > 2.0**-4:
        row = int(err.argmax())
        raise practice.Wrong(f"row {row} (|x| about {float(x64[row].abs().max()):.2g}):"
                             f" relative error {float(err[row]):.3g}, more than e4m3's "
                             "half step, 2^-4")


# end snippet


# snippet: row-epilogue
@triton.jit
def row_scaled_matmul_kernel(a_ptr, bt_ptr, c_ptr, sa_ptr, sb_ptr, M, N, K,
                             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                             BLOCK_K: tl.constexpr):
    """C = (A_q @ B_q) * scale_a[m] * scale_b[n] in fp16, from quantized A (M, K) and
    B^T (N, K), both K contiguous, with one float32 scale per row of A (sa, M of
    them) and one per column of B (sb, N of them).

    The K loop sums the raw quantized products, as the lesson's kernel does.
    Write the epilogue: with one scale per row and per column, the per-tensor
    multiply `acc * scale` becomes an outer product of two vectors of scales.
    """
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
    # Your code here: the scales.
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], acc.to(tl.float16),
             mask=mask)


# end snippet


# snippet: check-row-epilogue
@practice.exercise("row-epilogue", hint="sa = tl.load(sa_ptr + offs_m, mask=offs_m "
                   "< M) and sb likewise along offs_n; then acc * sa[:, None] * "
                   "sb[None, :]: row m's scale down the rows, column n's across")
def check_row_epilogue(m):
    for M, N, K in ((70, 50, 64), (33, 96, 40)):  # tiles of 32 x 32 x 16
        # e4m3 values held in fp16, and scales that differ from row to row and
        # from column to column by up to 2^5 and 2^4.
        qa = (torch.randn(M, K) * 8).to(torch.float8_e4m3fn).to(torch.float16)
        qb = (torch.randn(N, K) * 8).to(torch.float8_e4m3fn).to(torch.float16)
        sa = (1 + torch.rand(M)) * torch.exp2(torch.randint(-5, 1, (M,)).float())
        sb = (1 + torch.rand(N)) * torch.exp2(torch.randint(-4, 1, (N,)).float())
        a64 = qa.double() * sa.double()[:, None]
        b64 = qb.double() * sb.double()[:, None]
        c = practice.output(M, N, dtype=torch.float16)
        m.row_scaled_matmul_kernel[(triton.cdiv(M, 32), triton.cdiv(N, 32))](
            practice.guarded(qa), practice.guarded(qb), c, practice.guarded(sa),
            practice.guarded(sb), M, N, K, BLOCK_M=32, BLOCK_N=32, BLOCK_K=16)
        # fp32 sums of exact products, two scale multiplies and an fp16 rounding:
        # 2^-9 of each element; 0.01 for sums that cancel, some 50 times below
        # the smallest row's typical element.
        practice.expect("c", c, a64 @ b64.T, rtol=2.0**-9, atol=0.01,
                        case=f"{M}x{N}x{K}")


# end snippet


if __name__ == "__main__":
    sys.exit(practice.main())
