"""Layer norm: exercises. Fill in each "Your code here", then check your answers:

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


# snippet: row-stats
@triton.jit
def row_stats_kernel(X, Mean, Rstd, stride, N, eps, BLOCK_N: tl.constexpr):
    """Mean[r] and Rstd[r] = 1 / sqrt(var + eps) of row r of X, one row per program.

    X is FP16, its rows `stride` elements apart (not N: rows may be padded);
    BLOCK_N is N rounded up to a power of two. Compute in FP32, and take the
    variance around the mean, in a second reduction over the row already in
    registers, as layer_norm_fwd_kernel does. The lanes past N must add
    nothing to either sum.
    """
    row = tl.program_id(0)
    # Your code here: load the row, reduce it twice, store two numbers.
    tl.store(Mean + row, 0.0)
    tl.store(Rstd + row, 1.0)


# end snippet


def rows_near(M, N, centre, seed):
    """M rows of N FP16 values around `centre`, each with its own spread."""
    g = torch.Generator().manual_seed(seed)
    spread = torch.rand(M, 1, generator=g) + 0.5
    return (centre + spread * torch.randn(M, N, generator=g)).half()


# snippet: check-row-stats
@practice.exercise("row-stats", hint="x = tl.load(..., mask=cols < N, other=0.0) as "
                   "FP32; mean = tl.sum(x) / N; then xc = tl.where(cols < N, x - mean, "
                   "0.0) before var = tl.sum(xc * xc) / N: each padding lane would "
                   "add mean²")
def check_row_stats(m):
    # Widths that are not powers of two; rows 3 elements longer than N (a
    # stride that is not the width); rows centred far from zero, where the
    # one-pass formula E[x^2] - E[x]^2 loses the digits that matter.
    for M, N, centre in ((7, 1000, 0.5), (5, 77, -2.0), (6, 300, 100.0)):
        x64 = rows_near(M, N, centre, seed=N).double()
        x = practice.guarded(x64.half(), gap=3)
        mean, rstd = practice.output(M), practice.output(M)
        m.row_stats_kernel[(M,)](x, mean, rstd, x.stride(0), N, 1e-5,
                                 BLOCK_N=triton.next_power_of_2(N))
        want_var = x64.var(dim=1, unbiased=False)
        case = f"{M} rows of {N} around {centre}, stride {x.stride(0)}"
        # FP32 sums of N terms: 4 * 2^-24 * sqrt(N) relative, with room to spare.
        rtol = 16 * 2**-24 * N**0.5
        practice.expect("mean", mean, x64.mean(dim=1), rtol, rtol * abs(centre) + 1e-6,
                        case=case)
        practice.expect("rstd", rstd, 1 / (want_var + 1e-5).sqrt(), rtol, case=case)


# end snippet


# snippet: partial-sums
@triton.jit
def partial_sums_kernel(DY, XHAT, DW_part, DB_part, stride, M, N, ROWS_PER_PROGRAM,
                        BLOCK_N: tl.constexpr):
    """Stage one of dw and db: program pid adds up its own slice of rows.

    Program pid owns rows [pid * ROWS_PER_PROGRAM, pid * ROWS_PER_PROGRAM +
    ROWS_PER_PROGRAM), cut at M (the last slice is shorter). Over its rows it
    adds dy * xhat and dy into two FP32 accumulators of BLOCK_N columns, kept in
    registers, and at the end stores them into row pid of DW_part and DB_part
    (G x N, contiguous). DY and XHAT are FP32 with rows `stride` apart.
    """
    # Your code here: one loop over this program's rows, then two stores.
    pass


# end snippet


# snippet: check-partial-sums
@practice.exercise("partial-sums", hint="first = pid * ROWS_PER_PROGRAM; last = "
                   "tl.minimum(first + ROWS_PER_PROGRAM, M); for row in range(first, "
                   "last): accumulate; then store both rows at pid * N + cols, "
                   "masked by col_ok")
def check_partial_sums(m):
    # 37 rows in slices of 8: the last program gets 5; 100 columns in a block
    # of 128; dy and xhat rows 4 elements longer than N.
    for M, N, per in ((37, 100, 8), (20, 33, 20), (9, 128, 2)):
        dy64, xhat64 = torch.randn(M, N).double(), torch.randn(M, N).double()
        dy = practice.guarded(dy64.float(), gap=4)
        xhat = practice.guarded(xhat64.float(), gap=4)
        G = triton.cdiv(M, per)
        dw_part, db_part = practice.output(G, N), practice.output(G, N)
        m.partial_sums_kernel[(G,)](dy, xhat, dw_part, db_part, dy.stride(0), M, N, per,
                                    BLOCK_N=triton.next_power_of_2(N))
        slices = [slice(g * per, min(g * per + per, M)) for g in range(G)]
        want_dw = torch.stack([(dy64[s] * xhat64[s]).sum(0) for s in slices])
        want_db = torch.stack([dy64[s].sum(0) for s in slices])
        case = f"M = {M}, N = {N}, {per} rows per program, G = {G}"
        # FP32 sums of at most `per` terms: a few FP32 roundings.
        practice.expect("dw_part", dw_part, want_dw, 1e-5, 1e-5, case=case)
        practice.expect("db_part", db_part, want_db, 1e-5, 1e-5, case=case)


# end snippet


if __name__ == "__main__":
    sys.exit(practice.main())
