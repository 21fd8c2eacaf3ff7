"""RMSNorm + RoPE: exercises. Fill in each "Your code here", then check your answers:

    TRITON_INTERPRET=1 python exercises.py   # any CPU (on a GPU: python exercises.py)

Each exercise prints one line: passed, or what is wrong and a hint. With --only NAME
it checks one; --solutions checks the answers in solutions.py.
"""

import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.append(str(Path(__file__).resolve().parent.parent))  # practice.py, in the repo
from rmsnorm_rope import MAX_POS, rope_cache  # noqa: E402

import practice  # noqa: E402


# snippet: rope
@triton.jit
def rope_kernel(X, Cos, Sin, Pos, Out, n_rows, H, stride_xt, stride_xh,
                HALF: tl.constexpr, BLOCK_HALF: tl.constexpr, ROWS: tl.constexpr):
    """RoPE alone, rotate-half, on x: (tokens, H heads, 2 * HALF), in float32.

    x is a view: token t's head h starts at X + t * stride_xt + h * stride_xh
    (q inside a fused qkv tensor: stride_xt is not H * 2 * HALF). Out is
    contiguous, (tokens, H, 2 * HALF). A row is one head of one token; program
    pid owns rows [pid * ROWS, pid * ROWS + ROWS) of the n_rows = tokens * H.
    Element i pairs with element i + HALF, and the angle's cos and sin are row
    Pos[t] of the (max_pos, HALF) tables: the token's position, whichever head.
    """
    # Your code here: each row's token and head, the two halves, the rotation.
    pass


# end snippet


def rope64(x, positions, interleaved=False):
    """RoPE of x in float64, the angles from the positions (no table)."""
    x = x.double()
    D = x.shape[-1]
    inv_freq = 10000.0 ** (-2.0 * torch.arange(D // 2, dtype=torch.float64,
                                               device=x.device) / D)
    angle = positions.double()[:, None, None] * inv_freq
    c, s = angle.cos(), angle.sin()
    if interleaved:  # pairs (x[2i], x[2i + 1])
        a, b = x[..., 0::2], x[..., 1::2]
        return torch.stack((a * c - b * s, b * c + a * s), dim=-1).flatten(-2)
    a, b = x[..., : D // 2], x[..., D // 2 :]
    return torch.cat((a * c - b * s, b * c + a * s), dim=-1)


# snippet: check-rope
@practice.exercise("rope", hint="tok = rows // H and head = rows % H; load x1 at "
                   "X + tok * stride_xt + head * stride_xh + cols and x2 at HALF "
                   "further, masked by rows < n_rows and cols < HALF; the tables' row "
                   "is Pos[tok]; out1 = x1 * c - x2 * s, out2 = x2 * c + x1 * s")
def check_rope(m):
    # Head counts that do not divide ROWS = 8, head_dim 96 (halves of 48 in 64
    # lanes), and x as the q part of a qkv tensor: tokens (H + 2) * D apart.
    for T, H, D in ((13, 3, 96), (5, 8, 64)):
        half = D // 2
        qkv = torch.randn(T, (H + 2) * D)
        x = practice.guarded(qkv)[:, : H * D].view(T, H, D)
        # Every input between poisoned bands too: a position read past the
        # end is -7777, and its table row lands in the tables' bands.
        pos = practice.guarded(torch.randint(0, MAX_POS, (T,)))
        cos, sin = (practice.guarded(t) for t in rope_cache(D, "cpu"))
        out = practice.output(T, H, D)
        m.rope_kernel[(triton.cdiv(T * H, 8),)](
            x, cos, sin, pos, out, T * H, H,
            x.stride(0), x.stride(1), HALF=half,
            BLOCK_HALF=triton.next_power_of_2(half), ROWS=8)
        # float32 products of a value and a cos or sin rounded to float32: a
        # few float32 ulps of the largest value.
        practice.expect("out", out, rope64(x, pos), 1e-5, 1e-5,
                        case=f"{T} tokens, {H} heads of {D}, token stride "
                        f"{x.stride(0)}")


# end snippet


# snippet: interleaved
@triton.jit
def rmsnorm_rope_interleaved_kernel(X, W, Cos, Sin, Pos, Out, n_rows, H, eps,
                                    D: tl.constexpr, ROWS: tl.constexpr):
    """RMSNorm over each head, then RoPE in the interleaved (GPT-J) convention.

    x (fp16) and out are contiguous (tokens, H, D); D is a power of two. Pair
    i is (n[2i], n[2i + 1]) and rotates by the angle of row Pos[t] of the
    (max_pos, D / 2) tables. Normalize as rmsnorm_rope_kernel does (in
    float32, rounded once at the store to Out's type), then take the even and
    odd elements of the head apart with tl.reshape and tl.split; tl.join puts
    them back together.
    """
    # Your code here.
    pass


# end snippet


def rmsnorm64(x, w, eps):
    x = x.double()
    return x / (x.pow(2).mean(dim=-1, keepdim=True) + eps).sqrt() * w.double()


# snippet: check-interleaved
@practice.exercise("interleaved", hint="offs = rows[:, None] * D + cols[None, :], "
                   "masked by rows < n_rows; even, odd = tl.split(tl.reshape(n, "
                   "(ROWS, D // 2, 2))); pair i rotates as (even * c - odd * s, "
                   "odd * c + even * s), with c and s from row Pos[rows // H]")
def check_interleaved(m):
    for T, H, D in ((13, 4, 64), (3, 5, 128)):
        x = practice.guarded((torch.randn(T, H, D) * 2).half())
        w = practice.guarded((1 + 0.3 * torch.randn(D)).half())
        pos = practice.guarded(torch.randint(0, MAX_POS, (T,)))
        cos, sin = (practice.guarded(t) for t in rope_cache(D, "cpu"))
        out = practice.output(T, H, D, dtype=torch.float32)
        m.rmsnorm_rope_interleaved_kernel[(triton.cdiv(T * H, 16),)](
            x, w, cos, sin, pos, out, T * H, H, 1e-6, D=D, ROWS=16)
        want = rope64(rmsnorm64(x, w, 1e-6), pos, interleaved=True)
        # The kernel stores float32 here (out's type), so the bound is float32's.
        practice.expect("out", out, want, 1e-5, 1e-5 * float(want.abs().max()),
                        case=f"{T} tokens, {H} heads of {D}, 16 rows per program")


# end snippet


if __name__ == "__main__":
    sys.exit(practice.main())
