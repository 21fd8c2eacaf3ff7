"""Block-scaled matmul: MXFP8 operands and tl.dot_scaled on Blackwell.

The fp8 lesson gave a whole tensor one scale. Microscaling (MX) formats,
from the Open Compute Project's MX specification, give every block of 32
consecutive values along K its own scale: a single byte (E8M0) that is a
power of two, 2^(byte - 127). A tensor in MXFP8 is e4m3 elements plus one
such byte per 32 of them, 8.25 bits a value. A block of small values no
longer shares its range with the tensor's largest value, so it keeps its
three mantissa bits.

Blackwell's tensor cores (compute capability 10.x) apply the block scales
inside the MMA instruction (tcgen05.mma ... block_scale); in Triton that is
`tl.dot_scaled(a, a_scale, "e4m3", b, b_scale, "e4m3", acc)`. Hopper has no
such instruction; Triton there scales the operands before an ordinary MMA.

Run it:
    TRITON_INTERPRET=1 python block_scaled_matmul.py   # any machine: the MX
                                                       # arithmetic; the kernel where
                                                       # the interpreter has dot_scaled
    python block_scaled_matmul.py                      # Blackwell: checks, a timing

Beside it: exercises.py (check your own answers) and lesson.py (the run the
course records: every check on the lesson's page, and the kernel compiled for
sm_100 without a GPU).
"""

import os

import torch
import triton
import triton.language as tl

E4M3_MAX = 448.0  # largest finite float8_e4m3fn: 1.75 * 2^8
MX_BLOCK = 32  # values that share one scale, along K


# snippet: quantize
def quantize_mxfp8(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(R, K) values -> e4m3 elements (R, K) and E8M0 scale bytes (R, K / 32).

    Each block of 32 along K gets the smallest power of two 2^X with
    amax / 2^X <= 448, so no element of the block overflows e4m3.
    """
    R, K = x.shape
    assert K % MX_BLOCK == 0
    blocks = x.double().reshape(R, K // MX_BLOCK, MX_BLOCK)
    amax = blocks.abs().amax(dim=-1)
    # ceil(log2(amax / 448)) exactly: frexp gives amax / 448 = m * 2^e with
    # 0.5 <= m < 1, and the ceiling is e, or e - 1 when m is exactly 0.5.
    m, e = torch.frexp(amax / E4M3_MAX)
    X = torch.where(m == 0.5, e - 1, e)
    X = torch.where(amax > 0, X, torch.full_like(X, -127)).clamp(-127, 127)
    q = (blocks / torch.exp2(X.double())[..., None]).to(torch.float8_e4m3fn)
    return q.reshape(R, K), (X + 127).to(torch.uint8)  # E8M0: the biased exponent


def dequantize_mxfp8(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """The values an MX operand stands for, in float64 (exact)."""
    factor = torch.exp2(scale.double() - 127).repeat_interleave(MX_BLOCK, dim=1)
    return q.double() * factor


# end snippet


# snippet: kernel
@triton.jit
def mx_matmul_kernel(
    a_ptr, a_scale_ptr, bt_ptr, b_scale_ptr, c_ptr, M, N, K,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    # C (M, N) fp32 = dequant(A) @ dequant(B). A is (M, K) e4m3 with scales
    # (M, K/32); B is given as B^T, (N, K) e4m3, with scales (N, K/32): both
    # operands K-major, each scale row covering one row of A or column of B.
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    m_ok = offs_m < M
    n_ok = offs_n < N
    offs_k = tl.arange(0, BLOCK_K)
    offs_s = tl.arange(0, BLOCK_K // 32)  # one scale per 32 values of K
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):  # K is a multiple of BLOCK_K
        a = tl.load(
            a_ptr + offs_m[:, None] * K + (k + offs_k)[None, :],
            mask=m_ok[:, None], other=0.0,
        )  # fmt: skip
        b = tl.load(  # a (BLOCK_K, BLOCK_N) view of the K-major B^T
            bt_ptr + offs_n[None, :] * K + (k + offs_k)[:, None],
            mask=n_ok[None, :], other=0.0,
        )  # fmt: skip
        # Scale bytes; rows past the edge get 127, a scale of 2^0 = 1.
        sa = tl.load(
            a_scale_ptr + offs_m[:, None] * (K // 32) + (k // 32 + offs_s)[None, :],
            mask=m_ok[:, None], other=127,
        )  # fmt: skip
        sb = tl.load(
            b_scale_ptr + offs_n[:, None] * (K // 32) + (k // 32 + offs_s)[None, :],
            mask=n_ok[:, None], other=127,
        )  # fmt: skip
        # acc += (a * 2^(sa - 127)) @ (b * 2^(sb - 127)), scales per 32 of K.
        acc = tl.dot_scaled(a, sa, "e4m3", b, sb, "e4m3", acc)
    c_ptrs = c_ptr + offs_m[:, None] * N + offs_n[None, :]
    tl.store(c_ptrs, acc, mask=m_ok[:, None] & n_ok[None, :])


# end snippet

BLOCK_M, BLOCK_N, BLOCK_K, NUM_WARPS, NUM_STAGES = 128, 128, 128, 4, 3


# snippet: launch
def mx_matmul(a_q, a_scale, bt_q, b_scale, config=None, out=None):
    """fp32 C = A @ B from MXFP8 operands: A (M, K), B^T (N, K), scales per 32."""
    bm, bn, bk, warps, stages = config or (
        BLOCK_M,
        BLOCK_N,
        BLOCK_K,
        NUM_WARPS,
        NUM_STAGES,
    )
    (M, K), (N, K2) = a_q.shape, bt_q.shape
    assert K == K2 and K % bk == 0 and a_scale.shape == (M, K // 32)
    assert b_scale.shape == (N, K // 32)
    out = torch.empty((M, N), device=a_q.device) if out is None else out
    grid = (triton.cdiv(M, bm), triton.cdiv(N, bn))
    mx_matmul_kernel[grid](
        a_q, a_scale, bt_q, b_scale, out, M, N, K,
        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_warps=warps, num_stages=stages,
    )  # fmt: skip
    return out


# end snippet


def varied_blocks(R: int, K: int, seed: int, device: str = "cpu") -> torch.Tensor:
    """Normal values whose magnitude jumps by up to 2^8 either way per block."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(R, K, generator=g)
    exps = torch.randint(-8, 9, (R, K // MX_BLOCK), generator=g).float()
    return (x * torch.exp2(exps).repeat_interleave(MX_BLOCK, dim=1)).to(device)


# snippet: self-check
def self_check() -> None:
    """The MX round trip within its bound, then the kernel against float64 on
    shapes with partial tiles: on Blackwell, or under an interpreter that has
    tl.dot_scaled (Triton 3.9's has; 3.6's has not)."""
    interpret = os.environ.get("TRITON_INTERPRET") == "1"
    x = varied_blocks(256, 1024, seed=0).double()
    q, s = quantize_mxfp8(x)
    X = (s.double() - 127).repeat_interleave(MX_BLOCK, dim=1)
    bound = torch.maximum(2.0**-4 * x.abs(), torch.exp2(X - 10))
    assert bool(((dequantize_mxfp8(q, s) - x).abs() <= bound).all())
    print("MXFP8 round trip within max(2^-4 |x|, 2^(X-10)) on 256 x 1024 values")
    from triton.runtime import interpreter

    if interpret and not hasattr(interpreter.InterpreterBuilder, "create_dot_scaled"):
        print(f"this Triton's interpreter ({triton.__version__}) has no dot_scaled: "
              "the kernel runs on a Blackwell GPU only here")
        return
    on_gpu = torch.cuda.is_available() and not interpret
    if on_gpu and torch.cuda.get_device_capability() < (10, 0):
        print("tl.dot_scaled's block-scaled MMA needs a Blackwell GPU (compute "
              "capability 10.x): the kernel is not checked on this one")
        return
    device = "cuda" if on_gpu else "cpu"
    M, N, K = (1000, 1016, 1024) if on_gpu else (200, 136, 256)
    a_q, a_s = quantize_mxfp8(varied_blocks(M, K, seed=10, device=device))
    bt_q, b_s = quantize_mxfp8(varied_blocks(N, K, seed=20, device=device))
    want = dequantize_mxfp8(a_q, a_s) @ dequantize_mxfp8(bt_q, b_s).T
    got = mx_matmul(a_q, a_s, bt_q, b_s).double()
    # Exact products, fp32 sums: up to 2^-13 of the largest |C| per 32 of K.
    rtol = max(2.0**-10, -(-K // 32) * 2.0**-13)
    torch.testing.assert_close(got, want, rtol=rtol,
                               atol=rtol * float(want.abs().max()))
    print(f"mx_matmul matches float64 on {M}x{N}x{K} (rtol {rtol:.2g})")
    if on_gpu:
        n = 8192
        a_q, a_s = quantize_mxfp8(varied_blocks(n, n, seed=30, device=device))
        bt_q, b_s = quantize_mxfp8(varied_blocks(n, n, seed=31, device=device))
        ms = triton.testing.do_bench(lambda: mx_matmul(a_q, a_s, bt_q, b_s))
        print(f"MXFP8 {n}^3: {ms:.3f} ms, {2 * n**3 / ms * 1e-9:.0f} TFLOP/s")


# end snippet


if __name__ == "__main__":
    self_check()
