"""FP16 matmul: exercises. Fill in each "Your code here", then check your answers:

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


# snippet: column-groups
@triton.jit
def column_group_order_kernel(pid_m_ptr, pid_n_ptr, num_pid_m, num_pid_n,
                              GROUP_SIZE_N: tl.constexpr):
    """Program pid stores the tile (pid_m, pid_n) it computes, in grouped order
    with the groups along N: GROUP_SIZE_N columns of tiles, walked row by row.

    With 3 columns in a group, programs 0, 1, 2 take tiles (0, 0), (0, 1),
    (0, 2); programs 3, 4, 5 take (1, 0), (1, 1), (1, 2); and so on down the
    rows, then the next group of 3 columns. num_pid_n need not be a multiple of
    GROUP_SIZE_N: the last group may be narrower.
    """
    pid = tl.program_id(0)
    # Your code here: this is row-major order, not grouped.
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n
    tl.store(pid_m_ptr + pid, pid_m)
    tl.store(pid_n_ptr + pid, pid_n)


# end snippet


def column_groups(num_pid_m, num_pid_n, group):
    """The order the exercise asks for, built tile by tile: [(pid_m, pid_n), ...]."""
    order = []
    for first in range(0, num_pid_n, group):
        for m in range(num_pid_m):
            order += [(m, n) for n in range(first, min(first + group, num_pid_n))]
    return order


def judge_order(got, want, num_pid_m, num_pid_n):
    """Raise practice.Wrong naming the first tile or program at fault."""
    grid = f"the {num_pid_m} x {num_pid_n} grid of tiles"
    outside = [(p, t) for p, t in enumerate(got)
               if not (0 <= t[0] < num_pid_m and 0 <= t[1] < num_pid_n)]
    if outside:
        p, t = outside[0]
        raise practice.Wrong(f"program {p} computes tile {t}, outside {grid} "
                             f"({len(outside)} programs do)")
    missing = sorted(set(want) - set(got))
    if missing:
        twice = sorted({t for t in got if got.count(t) > 1})
        raise practice.Wrong(f"tile {missing[0]} is computed by no program "
                             f"({len(missing)} tiles are not; {len(twice)} twice)")
    wrong = [p for p, (g, w) in enumerate(zip(got, want, strict=True)) if g != w]
    if wrong:
        p = wrong[0]
        raise practice.Wrong(f"program {p} computes tile {got[p]}, expected {want[p]} "
                             f"({len(wrong)} of {len(got)} programs out of order)")


# snippet: check-column-groups
@practice.exercise("column-groups", hint="a group is GROUP_SIZE_N * num_pid_m "
                   "programs; first_pid_n = (pid // that) * GROUP_SIZE_N; the last "
                   "group is min(num_pid_n - first_pid_n, GROUP_SIZE_N) wide; within "
                   "it, the column is local % width and the row local // width")
def check_column_groups(m):
    for tiles_m, tiles_n, group in ((4, 7, 3), (5, 8, 4), (3, 10, 4), (6, 2, 4)):
        n = tiles_m * tiles_n
        pid_m = practice.guarded(torch.full((n,), -1, dtype=torch.int32))
        pid_n = practice.guarded(torch.full((n,), -1, dtype=torch.int32))
        m.column_group_order_kernel[(n,)](pid_m, pid_n, tiles_m, tiles_n,
                                          GROUP_SIZE_N=group)
        want = column_groups(tiles_m, tiles_n, group)
        got = list(zip(pid_m.tolist(), pid_n.tolist(), strict=True))
        case = f"{tiles_m} x {tiles_n} tiles, GROUP_SIZE_N = {group}"
        try:
            judge_order(got, want, tiles_m, tiles_n)
        except practice.Wrong as wrong:
            raise practice.Wrong(f"{case}: {wrong}") from None
        practice.expect("pid_m", pid_m, [row for row, _ in want], case=case)


# end snippet


# snippet: k-loop
@triton.jit
def tile_matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                       stride_am, stride_ak, stride_bk, stride_bn,
                       stride_cm, stride_cn,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                       BLOCK_K: tl.constexpr):
    """C = A @ B in FP16: this program's BLOCK_M x BLOCK_N tile of C.

    The offsets and the store are written for you, as in the lesson's kernel.
    Walk K in steps of BLOCK_K: load a tile of A and a tile of B (zeros past K,
    which is rarely a multiple of BLOCK_K), add their product into an FP32
    accumulator, and move both pointers on. B may be a transposed view: use its
    strides, never assume them.
    """
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    # Your code here: the K loop.

    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn
    mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, acc.to(tl.float16), mask=mask)


# end snippet


def fp16_pair(M, N, K, b_transposed):
    """Guarded random FP16 A (M x K) and B (K x N); B as a transposed view when
    asked: a weight W stored N x K, with strides (1, row length of W)."""
    a = practice.guarded(torch.randn(M, K).half(), gap=8)
    if b_transposed:
        return a, practice.guarded(torch.randn(N, K).half(), gap=8).t()
    return a, practice.guarded(torch.randn(K, N).half(), gap=8)


def within(K, want):
    """(rtol, atol): the output is rounded to FP16 on both sides, one unit in the
    last place (2^-10) apart at most, plus the FP32 sum's drift over K terms,
    4 * 2^-23 * sqrt(K), on the scale of the result."""
    return 2.0**-10, 4 * 2.0**-23 * K**0.5 * float(want.abs().max())


# snippet: check-k-loop
@practice.exercise("k-loop", hint="acc = tl.dot(a, b, acc) for k in range(tl.cdiv(K, "
                   "BLOCK_K)), loading with mask=offs_k < K - k * BLOCK_K and "
                   "other=0.0; then a_ptrs += BLOCK_K * stride_ak and b_ptrs += "
                   "BLOCK_K * stride_bk")
def check_k_loop(m):
    # K is no multiple of 32, and long enough for FP16 sums to drift.
    for M, N, K, b_transposed in ((70, 50, 300, False), (40, 72, 200, True)):
        a, b = fp16_pair(M, N, K, b_transposed)
        c = practice.output(M, N, dtype=torch.float16, gap=8)
        grid = (triton.cdiv(M, 32), triton.cdiv(N, 32))
        m.tile_matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1),
                                   b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                                   BLOCK_M=32, BLOCK_N=32, BLOCK_K=32)
        want = a.double() @ b.double()
        rtol, atol = within(K, want)
        layout = "B = W.T, a transposed view" if b_transposed else "B row-major"
        practice.expect("C", c, want, rtol, atol,
                        case=f"{M}x{N}x{K}, blocks of 32, {layout}")


# end snippet


if __name__ == "__main__":
    sys.exit(practice.main())
