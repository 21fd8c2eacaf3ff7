"""Grouped GEMM: exercises. Fill in each "Your code here", then check your answers:

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
from grouped_gemm import (  # noqa: E402 - with the table's columns, for moe_table
    A_PTR,
    B_PTR,
    C_PTR,
    INTERPRETER,
    K_,
    LDA,
    LDB,
    LDC,
    M_,
    N_,
    ROW,
    aligned,
    grouped_matmul,
)

import practice  # noqa: E402


# snippet: tile-walk
@triton.jit
def tile_walk_kernel(sizes_ptr, n_groups, group_ptr, pid_m_ptr, pid_n_ptr, owner_ptr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """The grouped kernel's schedule, without the matmul. sizes holds n_groups rows
    of (M, N), int32. The tiles of all groups are numbered in one sequence, group
    0's first, each group's tiles row-major over its grid of BLOCK_M x BLOCK_N
    tiles. Program p of P takes tiles p, p + P, p + 2P, ...; for each, it stores at
    index `tile` the group, the tile's (pid_m, pid_n) in that group, and p.

    A group may be empty (M = 0): it owns no tiles, and must shift nothing.
    """
    tile = tl.program_id(0)
    n_programs = tl.num_programs(0)
    # Your code here


# end snippet


def schedule(sizes, block_m, block_n, programs):
    """[(group, pid_m, pid_n, owner), ...] by tile number, built tile by tile."""
    out = []
    for g, (M, N) in enumerate(sizes):
        tiles_n = triton.cdiv(N, block_n)
        out += [(g, t // tiles_n, t % tiles_n) for t in range(triton.cdiv(M, block_m)
                                                              * tiles_n)]
    return [(*t, i % programs) for i, t in enumerate(out)]


def judge_schedule(got, want):
    """Raise practice.Wrong naming the first tile whose entry is wrong."""
    names = ("group", "pid_m", "pid_n", "owner")
    for t, (g, w) in enumerate(zip(got, want, strict=True)):
        if -1 in g:
            missing = sum(-1 in x for x in got)
            raise practice.Wrong(f"tile {t} was never computed ({missing} of "
                                 f"{len(got)} tiles were not)")
        if g != w:
            wrong = [f"{n} {a}, expected {b}"
                     for n, a, b in zip(names, g, w, strict=True) if a != b]
            raise practice.Wrong(f"tile {t}: {'; '.join(wrong)}")


# snippet: check-tile-walk
@practice.exercise("tile-walk", hint="for g in range(n_groups): read M and N, end "
                   "= first + cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N); while tile < end: "
                   "local = tile - first, pid_m = local // tiles_n, pid_n = local % "
                   "tiles_n, store, tile += n_programs; then first = end, every group")
def check_tile_walk(m):
    sizes = [(40, 70), (0, 64), (100, 16), (1, 130), (64, 64)]  # an empty group
    for programs in (1, 3, 7):  # fewer programs than the 19 tiles
        want = schedule(sizes, 32, 32, programs)
        table = practice.guarded(torch.tensor(sizes, dtype=torch.int32))
        out = [practice.guarded(torch.full((len(want),), -1, dtype=torch.int32))
               for _ in range(4)]
        m.tile_walk_kernel[(programs,)](table, len(sizes), *out, BLOCK_M=32,
                                        BLOCK_N=32)
        got = list(zip(*[o.tolist() for o in out], strict=True))
        try:
            judge_schedule(got, want)
        except practice.Wrong as wrong:
            raise practice.Wrong(f"{programs} programs, groups (M, N) {sizes}, "
                                 f"tiles of 32 x 32: {wrong}") from None
        practice.expect("owner", out[3], [w[3] for w in want], case=f"{programs} "
                        "programs")


# end snippet


# snippet: moe-table
def moe_table(x, w, out, counts):
    """The device table of the grouped kernel for a mixture-of-experts layer.

    x (T, K): tokens sorted by expert; w (E, K, N): one weight per expert; out
    (T, N); counts (E,): tokens per expert, on the device. Group e is rows
    [start_e, start_e + counts[e]) of x and out, against w[e]. One int64 row per
    group, its columns named in grouped_gemm.py: A_PTR, B_PTR, C_PTR (addresses
    in bytes), M_, N_, K_, then LDA, LDB, LDC, the row strides of A, B and C in
    elements. Build it with tensor operations on the device, so the router's
    counts never travel to the host.
    """
    E, K, N = w.shape
    table = torch.zeros((E, ROW), dtype=torch.int64, device=x.device)
    # Your code here
    return table


# end snippet


# snippet: check-moe-table
@practice.exercise("moe-table", hint="starts = cumsum(counts) - counts (where "
                   "each expert's rows begin); A_PTR = x.data_ptr() + starts * "
                   "x.stride(0) * x.element_size(), and the same for out; B_PTR = "
                   "w.data_ptr() + e * w.stride(0) * w.element_size(); M = counts; "
                   "LDA, LDB, LDC = "
                   "x.stride(0), w.stride(1), out.stride(0)")
def check_moe_table(m):
    E, K, N = 4, 48, 40
    for sizes in ([30, 0, 25, 15], [1, 7, 0, 12]):  # an expert with no tokens
        T = sum(sizes)
        x = practice.guarded(torch.randn(T, K).half())
        w = practice.guarded(torch.randn(E, K, N).half())
        out = practice.output(T, N, dtype=torch.float16)
        table = m.moe_table(x, w, out, torch.tensor(sizes, device=x.device))
        grouped_matmul(table, x.dtype, INTERPRETER, 3, aligned(table))
        starts = [sum(sizes[:e]) for e in range(E)]
        want = torch.cat([x[s:s + n].double() @ w[e].double()
                          for e, (s, n) in enumerate(zip(starts, sizes, strict=True))])
        practice.expect("out", out, want, 2.0**-10, 4 * 2.0**-23 * K**0.5 *
                        float(want.abs().max()), case=f"tokens per expert {sizes}")


# end snippet


if __name__ == "__main__":
    sys.exit(practice.main())
