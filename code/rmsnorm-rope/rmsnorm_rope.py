"""RMSNorm and rotary position embedding, fused: the query/key path of a block.

In models with QK-norm (Qwen3 and Gemma 3, for example), every query and key
head goes through the same two steps after the projection:

    RMSNorm over head_dim:  n = x / sqrt(mean(x^2) + eps) * w
    RoPE, "rotate half":     (n1, n2) -> (n1*cos - n2*sin, n2*cos + n1*sin)

where n1 and n2 are the two halves of a head and the angle of pair i at
position p is p * base^(-2i/D). Written in eager PyTorch that is eighteen
kernels, most of them reading and writing the whole tensor in float32.
Fused, it is one kernel that reads each head once and writes it once: the
norm needs the whole head in registers anyway, and the rotation is
element-wise on what is already there. The kernel is memory-bound; what
it saves is all the traffic in between.

Run it:
    TRITON_INTERPRET=1 python rmsnorm_rope.py   # any machine: checks on the CPU
    python rmsnorm_rope.py                      # a CUDA GPU: checks and GB/s

Beside it: exercises.py (check your own kernels) and lesson.py (the run the
course records: every check and benchmark on the lesson's page).
"""

import os

import torch
import triton
import triton.language as tl

EPS = 1e-6  # Qwen3's rms_norm_eps
BASE = 10000.0  # RoPE's theta
MAX_POS = 32768  # rows of the cos/sin cache

# snippet: eager
def rmsnorm_rope_eager(x, weight, cos, sin, positions, eps=EPS):
    """The same computation in plain PyTorch: float32 inside, one rounding.

    x: (tokens, heads, head_dim); weight: (head_dim,); cos, sin:
    (max_pos, head_dim / 2) float32 tables; positions: (tokens,) integers.
    """
    half = x.shape[-1] // 2
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
    xf = xf * weight.float()
    c = cos[positions].unsqueeze(1)  # (tokens, 1, half): shared by all heads
    s = sin[positions].unsqueeze(1)
    x1, x2 = xf[..., :half], xf[..., half:]
    out = torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)
    return out.to(x.dtype)


# end snippet


# snippet: cache
def rope_cache(head_dim: int, device: str, max_pos: int = MAX_POS, base=BASE):
    """cos and sin of every position's angles, (max_pos, head_dim / 2) float32.

    Computed once per model. The angles are formed in float64 and only the
    cos and sin are rounded to float32: an angle p * theta_i formed in
    float32 is off by about p * 2^-24 radians, 0.002 near p = 32767, which
    is more than an fp16 rounding of the output.
    """
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    inv_freq = base ** (-2.0 * i / head_dim)
    angle = torch.arange(max_pos, dtype=torch.float64)[:, None] * inv_freq[None, :]
    return angle.cos().float().to(device), angle.sin().float().to(device)


# end snippet


# snippet: kernel
@triton.jit
def rmsnorm_rope_kernel(
    X, W, Cos, Sin, Pos, Out,
    n_rows, H,                     # n_rows = tokens * heads; H = heads
    stride_xt, stride_xh,          # x may be a view (q or k inside a qkv tensor)
    stride_ot, stride_oh,
    eps,
    HALF: tl.constexpr,            # head_dim / 2
    BLOCK_HALF: tl.constexpr,      # HALF rounded up to a power of two
    ROWS: tl.constexpr,            # (token, head) rows per program
):
    # A row is one head of one token: head_dim values, normalized together.
    # Program `pid` owns ROWS consecutive rows of the flattened (token, head)
    # grid, so with ROWS = H it owns exactly one token.
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_ok = rows < n_rows
    tok = rows // H
    head = rows % H
    cols = tl.arange(0, BLOCK_HALF)
    mask = row_ok[:, None] & (cols < HALF)[None, :]

    # The two halves of each head, as two ROWS x HALF tiles: rotate-half
    # pairs element i with element i + HALF, so the halves line up.
    x_ptr = X + tok[:, None] * stride_xt + head[:, None] * stride_xh + cols[None, :]
    x1 = tl.load(x_ptr, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(x_ptr + HALF, mask=mask, other=0.0).to(tl.float32)

    # RMSNorm over the head: one reduction, in float32, on values already
    # in registers. Padding lanes loaded 0 and add nothing to the sum.
    mean_sq = tl.sum(x1 * x1 + x2 * x2, axis=1) / (2 * HALF)
    rstd = tl.rsqrt(mean_sq + eps)
    w1 = tl.load(W + cols, mask=cols < HALF, other=0.0).to(tl.float32)
    w2 = tl.load(W + HALF + cols, mask=cols < HALF, other=0.0).to(tl.float32)
    n1 = x1 * rstd[:, None] * w1[None, :]
    n2 = x2 * rstd[:, None] * w2[None, :]

    # RoPE: the angle depends on the token's position and the pair, not on
    # the head. Every head of a token reads the same cos/sin row, so after
    # the first head they come from cache, not DRAM.
    pos = tl.load(Pos + tok, mask=row_ok, other=0)
    cs_off = pos[:, None] * HALF + cols[None, :]
    c = tl.load(Cos + cs_off, mask=mask, other=0.0)
    s = tl.load(Sin + cs_off, mask=mask, other=0.0)
    o1 = n1 * c - n2 * s
    o2 = n2 * c + n1 * s

    # Round once, on the way out, to the input's type.
    o_ptr = Out + tok[:, None] * stride_ot + head[:, None] * stride_oh + cols[None, :]
    tl.store(o_ptr, o1.to(Out.dtype.element_ty), mask=mask)
    tl.store(o_ptr + HALF, o2.to(Out.dtype.element_ty), mask=mask)


# end snippet


# snippet: launch
def rows_per_program(head_dim: int) -> int:
    # About 4096 values per program (8 KiB of fp16 or bf16 read, as much
    # written): 32 heads of 128. Fewer rows leave each program too little
    # in flight; many more only lengthen the tail of the launch. A power
    # of two, because tl.arange(0, ROWS) must be one.
    return max(1, min(64, 4096 // triton.next_power_of_2(head_dim)))


def rmsnorm_rope(x, weight, cos, sin, positions, eps=EPS, out=None, rows=None):
    """Fused RMSNorm (over head_dim) + RoPE of x: (tokens, heads, head_dim)."""
    T, H, D = x.shape
    assert D % 2 == 0 and x.stride(2) == 1 and cos.shape[1] == D // 2
    assert cos.is_contiguous() and sin.is_contiguous() and weight.shape == (D,)
    if out is None:
        out = torch.empty((T, H, D), device=x.device, dtype=x.dtype)
    ROWS = rows or rows_per_program(D)
    grid = (triton.cdiv(T * H, ROWS),)
    rmsnorm_rope_kernel[grid](
        x, weight, cos, sin, positions, out, T * H, H,
        x.stride(0), x.stride(1), out.stride(0), out.stride(1), eps,
        HALF=D // 2, BLOCK_HALF=triton.next_power_of_2(D // 2), ROWS=ROWS,
        num_warps=4,
    )
    return out


# end snippet


# snippet: self-check
def self_check() -> None:
    """The fused kernel against the eager function, on token and head counts
    no block divides, head_dim 96 (halves of 48, not a power of two), and q as
    a view of a fused qkv tensor; on a GPU, one timing."""
    on_gpu = torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1"
    device = "cuda" if on_gpu else "cpu"
    torch.manual_seed(0)
    for T, H, D in ((37, 8, 128), (5, 5, 96)):
        qkv = torch.randn(T, (H + 2) * D).to(device, torch.float16)
        x = qkv[:, : H * D].view(T, H, D)  # rows of q are (H + 2) * D apart
        w = (1 + 0.3 * torch.randn(D)).to(device, torch.float16)
        cos, sin = rope_cache(D, device)
        pos = torch.randint(0, MAX_POS, (T,), device=device)
        # Both compute in float32 and round once to fp16, in different
        # orders: within one fp16 ulp (2^-10) of each value, plus 2^-20 of the
        # largest where a rotated value cancels to nearly zero.
        want = rmsnorm_rope_eager(x, w, cos, sin, pos)
        torch.testing.assert_close(rmsnorm_rope(x, w, cos, sin, pos), want,
                                   rtol=2**-10, atol=2**-20 * float(want.abs().max()))
        print(f"fused matches eager within one fp16 ulp at {T} tokens x {H} heads "
              f"x {D}")
    if on_gpu:
        x = torch.randn(32768, 32, 128, device=device, dtype=torch.bfloat16)
        w = torch.ones(128, device=device, dtype=torch.bfloat16)
        cos, sin = rope_cache(128, device)
        pos = torch.arange(32768, device=device) % 4096
        ms = triton.testing.do_bench(lambda: rmsnorm_rope(x, w, cos, sin, pos))
        print(f"fused, 32768 x 32 x 128 bf16: {ms:.3f} ms, "
              f"{2 * x.numel() * 2 / ms / 1e6:.0f} GB/s")


# end snippet


if __name__ == "__main__":
    self_check()
