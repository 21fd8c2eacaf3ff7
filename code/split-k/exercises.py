"""Split-K: exercises. Fill in each "Your code here", then check your answers:

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
import practice  # noqa: E402


# snippet: slice
@triton.jit
def split_k_partial_kernel(a_ptr, b_ptr, ws_ptr, M, N, K, k_per_split,
                           stride_am, stride_ak, stride_bk, stride_bn,
                           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                           BLOCK_K: tl.constexpr):
    """Program (n, m, s): the partial product of tile (m, n) of C = A @ B over the
    s-th slice of K, k in [s * k_per_split, (s + 1) * k_per_split), the last slice
    cut short at K. It goes into ws[s], slice s of an S x M x N FP32 workspace
    (dense: element (i, j) of slice s is at s * M * N + i * N + j).

    k_per_split need not be a multiple of BLOCK_K here: a slice's last step may
    stop inside a block, and the next slice's values must not be added twice.
    """
    pid_n = tl.program_id(0)
    pid_m = tl.program_id(1)
    pid_s = tl.program_id(2)
    offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    # Your code here: this slice's K loop, then acc into ws[pid_s].


# end snippet


def slices(K, k_per_split):
    """[(start, end), ...] of the slices of K."""
    return [(s, min(s + k_per_split, K)) for s in range(0, K, k_per_split)]


# snippet: check-slice
@practice.exercise("slice", hint="k_start = pid_s * k_per_split and k_end = "
                   "tl.minimum(k_start + k_per_split, K); loop k over range(k_start, "
                   "k_end, BLOCK_K) with mask offs_k < k_end - k (not K - k); store "
                   "at ws_ptr + pid_s * M * N + rows * N + columns, masked to M x N")
def check_slice(m):
    M, N, K = 5, 40, 200
    a = practice.guarded(torch.randn(M, K).half(), gap=8)
    b = practice.guarded(torch.randn(K, N).half(), gap=8)
    for k_per_split in (200, 64, 67, 90):  # 67 and 90: slices end inside a block
        parts = slices(K, k_per_split)
        ws = practice.output(len(parts), M, N)
        grid = (triton.cdiv(N, 32), triton.cdiv(M, 16), len(parts))
        m.split_k_partial_kernel[grid](a, b, ws, M, N, K, k_per_split, a.stride(0),
                                       a.stride(1), b.stride(0), b.stride(1),
                                       BLOCK_M=16, BLOCK_N=32, BLOCK_K=32)
        want = torch.stack([a[:, s:e].double() @ b[s:e].double() for s, e in parts])
        # One FP32 sum of at most 90 products per element: within 1e-5 of the scale.
        practice.expect("ws", ws, want, 1e-5, 1e-5 * float(want.abs().max()),
                        case=f"{M}x{N}x{K}, {len(parts)} slices of {k_per_split}, "
                        "blocks 16x32x32")


# end snippet


# snippet: ordered-sum
@triton.jit
def ordered_sum_kernel(ws_ptr, c_ptr, MN, SPLITS, BLOCK: tl.constexpr):
    """c[i] = ws[0, i] + ws[1, i] + ... + ws[SPLITS - 1, i], added in that order in
    FP32 and rounded to FP16, for every i < MN; ws is SPLITS x MN FP32, dense.

    One block of BLOCK elements per program. The same additions in the same order
    give the same bits on every run: that is the point of this kernel.
    """
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    # Your code here


# end snippet


# snippet: check-ordered-sum
@practice.exercise("ordered-sum", hint="acc = tl.zeros((BLOCK,), tl.float32), then for "
                   "s in range(SPLITS): acc += tl.load(ws_ptr + s * MN + offs, mask="
                   "offs < MN, other=0.0); store acc.to(tl.float16) with the same mask")
def check_ordered_sum(m):
    for splits, mn in ((3, 200), (7, 1000), (1, 130)):  # blocks of 128: partial
        ws = practice.guarded(torch.randn(splits, mn) * 100)
        c = practice.output(mn, dtype=torch.float16)
        m.ordered_sum_kernel[(triton.cdiv(mn, 128),)](ws, c, mn, splits, BLOCK=128)
        want = ws[0].clone()
        for s in range(1, splits):
            want += ws[s]  # FP32, in slice order
        # The same additions in the same order: the same bits, no tolerance.
        practice.expect("c", c, want.half(), case=f"{splits} slices of {mn}")


# end snippet


if __name__ == "__main__":
    sys.exit(practice.main())
