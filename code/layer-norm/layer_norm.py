"""Layer normalization: a row reduction fused with an element-wise epilogue.

Layer norm rescales every row of x to zero mean and unit variance, then
applies a learned scale w and shift b, one per column:

    mean = sum(x) / N            var = sum((x - mean)^2) / N
    y    = (x - mean) / sqrt(var + eps) * w + b

Each output element needs two statistics of its whole row, so the natural
Triton program owns whole rows: it loads a row once into registers, reduces
it twice (mean, then variance around the mean), and writes the normalized
row. The arithmetic is a handful of operations per element; what costs is
moving the bytes. The kernel is memory-bound, and the question is how close
it gets to a plain copy of the same data.

The backward pass is the second half. dx is again a per-row computation,
but dw and db are sums over *all* rows, a reduction across programs. It is
done in two stages: every program adds up its own rows into a private
partial sum, and a second small kernel adds the partial sums.

Inputs and outputs are FP16; every statistic and every sum is FP32.

Run it:
    TRITON_INTERPRET=1 python layer_norm.py   # any machine: checks on the CPU
    python layer_norm.py                      # a CUDA GPU: checks and GB/s

Beside it: exercises.py (check your own kernels) and lesson.py (the run the
course records: every check and benchmark on the lesson's page).
"""

import os

import torch
import torch.nn.functional as F
import triton
import triton.language as tl


# snippet: forward-kernel
@triton.jit
def layer_norm_fwd_kernel(
    X, Y, W, B, Mean, Rstd,      # pointers: x, y are M x N; w, b have N;
                                 # mean, rstd have M
    stride_x, stride_y,          # distance in elements between two rows
    M, N, eps,
    BLOCK_N: tl.constexpr,       # a power of two >= N: one row fits in one block
    ROWS: tl.constexpr,          # rows handled by one program
):
    # Program `pid` owns rows [pid * ROWS, pid * ROWS + ROWS). The tile is
    # ROWS x BLOCK_N: each row of the tile is a whole row of x.
    pid = tl.program_id(0)
    rows = pid * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_N)
    row_ok = rows < M
    col_ok = cols < N            # N is rarely a power of two: mask the padding
    mask = row_ok[:, None] & col_ok[None, :]

    # One trip to memory: the whole row goes into registers as FP32. The
    # padding lanes read 0, so they add nothing to the sum.
    x = tl.load(X + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0)
    x = x.to(tl.float32)

    # Two reductions over the row that is already in registers: the mean,
    # then the variance *around the mean*. The second pass costs no memory
    # traffic, and it avoids E[x^2] - E[x]^2, which cancels badly when the
    # mean is large compared with the spread.
    mean = tl.sum(x, axis=1) / N
    xc = tl.where(mask, x - mean[:, None], 0.0)   # padding must stay 0 here too
    var = tl.sum(xc * xc, axis=1) / N
    rstd = 1.0 / tl.sqrt(var + eps)

    # The affine epilogue, still in FP32; w and b are the same for every row.
    w = tl.load(W + cols, mask=col_ok, other=0.0).to(tl.float32)
    b = tl.load(B + cols, mask=col_ok, other=0.0).to(tl.float32)
    y = xc * rstd[:, None] * w[None, :] + b[None, :]

    # Round once, on the way out, to the output's type (FP16 here).
    y_ptrs = Y + rows[:, None] * stride_y + cols[None, :]
    tl.store(y_ptrs, y.to(Y.dtype.element_ty), mask=mask)
    # The backward pass needs the two statistics again: 8 bytes per row.
    tl.store(Mean + rows, mean, mask=row_ok)
    tl.store(Rstd + rows, rstd, mask=row_ok)
# end snippet


# snippet: forward-config
def forward_config(N: int, element_size: int) -> tuple[int, int, int]:
    """BLOCK_N, rows per program and warps for a row of N elements."""
    BLOCK_N = triton.next_power_of_2(N)
    if BLOCK_N * element_size > 32768:
        # 16384 FP16 values per row: beyond that one row no longer sits
        # comfortably in the registers of one program, and the kernel would
        # need a loop over the row (two passes over memory) instead.
        raise ValueError(f"rows of {N} elements do not fit in one block")
    # Narrow rows: one row of 1024 FP16 values is only 2 KB, so a program
    # that owns one row has little memory in flight and finishes quickly;
    # the GPU then spends its time starting programs. Several rows per
    # program put more loads in flight at once. Wide rows already do.
    # The rows-per-program sweep below measures this choice at N = 1024.
    ROWS = max(1, min(2, 2048 // BLOCK_N))
    # A thread loads 16 bytes (8 FP16 values) per instruction. Four warps
    # are 128 threads, 1024 values per load; wider rows get eight warps so
    # that each thread holds a few vectors, not dozens. More warps than
    # that only add cross-warp traffic to the two reductions.
    num_warps = min(max(BLOCK_N * element_size // 1024, 4), 8)
    return BLOCK_N, ROWS, num_warps


# end snippet


# snippet: forward-launch
def layer_norm_fwd(x, weight, bias, eps=1e-5, out=None, rows=None, num_warps=None):
    """y, mean, rstd of layer norm over the last dimension of a 2-D x.

    `out` = (y, mean, rstd) writes into given tensors (the checks poison
    them first); `rows` and `num_warps` override the tuning for the sweep.
    """
    assert x.ndim == 2 and x.stride(1) == 1
    assert weight.shape == bias.shape == (x.shape[1],)
    M, N = x.shape
    if out is None:
        out = (torch.empty_like(x),
               torch.empty(M, device=x.device, dtype=torch.float32),
               torch.empty(M, device=x.device, dtype=torch.float32))
    y, mean, rstd = out
    BLOCK_N, ROWS, warps = forward_config(N, x.element_size())
    ROWS = rows or ROWS
    warps = num_warps or warps
    grid = (triton.cdiv(M, ROWS),)
    layer_norm_fwd_kernel[grid](
        x, y, weight, bias, mean, rstd, x.stride(0), y.stride(0), M, N, eps,
        BLOCK_N=BLOCK_N, ROWS=ROWS, num_warps=warps,
    )
    return y, mean, rstd


# end snippet


# The backward pass. With xhat = (x - mean) * rstd and g = dy * w,
#
#     dx = rstd * (g - mean(g) - xhat * mean(g * xhat))      per row
#     dw = sum over rows of dy * xhat                         per column
#     db = sum over rows of dy                                per column
#
# dx needs two more row reductions (mean(g) and mean(g * xhat)), exactly
# like the forward pass. dw and db are different: they add up M rows, and
# no single program sees all the rows.

# snippet: backward-kernel
@triton.jit
def layer_norm_bwd_dx_kernel(
    X, DY, DX, W, Mean, Rstd,
    DW_part, DB_part,            # G x N FP32 partial sums, one row per program
    stride, M, N,
    ROWS_PER_PROGRAM,            # consecutive rows owned by one program
    BLOCK_N: tl.constexpr,
    ROWS: tl.constexpr,          # rows per step of the loop
):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    col_ok = cols < N
    w = tl.load(W + cols, mask=col_ok, other=0.0).to(tl.float32)
    # This program's share of dw and db lives in registers for the whole
    # loop: no other program touches it, so no atomics and no locks.
    dw_acc = tl.zeros((ROWS, BLOCK_N), dtype=tl.float32)
    db_acc = tl.zeros((ROWS, BLOCK_N), dtype=tl.float32)

    first = pid * ROWS_PER_PROGRAM
    last = tl.minimum(first + ROWS_PER_PROGRAM, M)
    for start in range(first, last, ROWS):
        rows = start + tl.arange(0, ROWS)
        row_ok = rows < last
        mask = row_ok[:, None] & col_ok[None, :]
        offs = rows[:, None] * stride + cols[None, :]
        x = tl.load(X + offs, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(DY + offs, mask=mask, other=0.0).to(tl.float32)
        mean = tl.load(Mean + rows, mask=row_ok, other=0.0)
        rstd = tl.load(Rstd + rows, mask=row_ok, other=0.0)

        # Rebuild xhat from the saved statistics instead of storing it in
        # the forward pass: 8 bytes per row instead of 2 bytes per element.
        xhat = tl.where(mask, (x - mean[:, None]) * rstd[:, None], 0.0)
        g = dy * w[None, :]
        c1 = tl.sum(g * xhat, axis=1) / N
        c2 = tl.sum(g, axis=1) / N
        dx = (g - c2[:, None] - xhat * c1[:, None]) * rstd[:, None]
        tl.store(DX + offs, dx.to(DX.dtype.element_ty), mask=mask)

        # Stage one of the dw/db reduction: accumulate, do not store yet.
        dw_acc += dy * xhat
        db_acc += dy

    # One row of partial sums per program, written once at the end.
    tl.store(DW_part + pid * N + cols, tl.sum(dw_acc, axis=0), mask=col_ok)
    tl.store(DB_part + pid * N + cols, tl.sum(db_acc, axis=0), mask=col_ok)


@triton.jit
def layer_norm_bwd_dwdb_kernel(
    DW_part, DB_part, DW, DB, G, N,
    BLOCK_G: tl.constexpr, BLOCK_C: tl.constexpr,
):
    # Stage two: each program owns BLOCK_C columns and adds the G partial
    # rows for them, a small G x N column sum.
    cols = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    col_ok = cols < N
    dw = tl.zeros((BLOCK_G, BLOCK_C), dtype=tl.float32)
    db = tl.zeros((BLOCK_G, BLOCK_C), dtype=tl.float32)
    for g0 in range(0, G, BLOCK_G):
        parts = g0 + tl.arange(0, BLOCK_G)
        mask = (parts < G)[:, None] & col_ok[None, :]
        offs = parts[:, None] * N + cols[None, :]
        dw += tl.load(DW_part + offs, mask=mask, other=0.0)
        db += tl.load(DB_part + offs, mask=mask, other=0.0)
    tl.store(DW + cols, tl.sum(dw, axis=0).to(DW.dtype.element_ty), mask=col_ok)
    tl.store(DB + cols, tl.sum(db, axis=0).to(DB.dtype.element_ty), mask=col_ok)
# end snippet


# snippet: backward-launch
PROGRAMS_PER_SM = 4  # stage one's programs per SM; the lesson's sweep measures it


def layer_norm_bwd(dy, x, weight, mean, rstd, out=None,
                   programs_per_sm=PROGRAMS_PER_SM):
    """dx, dw, db of layer norm, given the forward pass's mean and rstd."""
    assert x.is_contiguous() and dy.is_contiguous() and dy.shape == x.shape
    M, N = x.shape
    BLOCK_N, _, warps = forward_config(N, x.element_size())
    # Each step of the loop reads two tiles (x and dy) and keeps two
    # accumulators, so take fewer rows per step than the forward pass does.
    ROWS = 2 if BLOCK_N <= 1024 else 1
    # Stage one runs a few programs per SM, each looping over a contiguous
    # slice of rows. Every program writes one partial row of N FP32 values
    # for dw and one for db, which stage two reads back: more programs
    # would hide more latency but leave more partial sums to add.
    sms = 4  # under the interpreter, a pretend GPU of 4 SMs
    if x.is_cuda:
        sms = torch.cuda.get_device_properties(x.device).multi_processor_count
    per_program = triton.cdiv(M, programs_per_sm * sms)
    rows_per_program = triton.cdiv(per_program, ROWS) * ROWS
    G = triton.cdiv(M, rows_per_program)
    if out is None:
        out = (torch.empty_like(x), torch.empty_like(weight), torch.empty_like(weight))
    dx, dw, db = out
    dw_part = torch.empty(G, N, device=x.device, dtype=torch.float32)
    db_part = torch.empty(G, N, device=x.device, dtype=torch.float32)
    layer_norm_bwd_dx_kernel[(G,)](
        x, dy, dx, weight, mean, rstd, dw_part, db_part,
        x.stride(0), M, N, rows_per_program,
        BLOCK_N=BLOCK_N, ROWS=ROWS, num_warps=warps,
    )
    BLOCK_C = 64
    layer_norm_bwd_dwdb_kernel[(triton.cdiv(N, BLOCK_C),)](
        dw_part, db_part, dw, db, G, N, BLOCK_G=32, BLOCK_C=BLOCK_C, num_warps=4
    )
    return dx, dw, db


# end snippet


# snippet: self-check
def self_check() -> None:
    """Both passes against torch's layer norm in float64, on row counts and
    widths no block divides; on a GPU, one timing of each pass."""
    on_gpu = torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1"
    device = "cuda" if on_gpu else "cpu"
    torch.manual_seed(0)
    for M, N in ((37, 1000), (5, 4096)):
        x = (torch.randn(M, N) + 2.0).to(device, torch.float16)
        w, b = torch.randn(N).to(device, torch.float16), torch.randn(N).to(device,
                                                                           torch.float16)
        dy = torch.randn(M, N).to(device, torch.float16)
        y, mean, rstd = layer_norm_fwd(x, w, b)
        dx, dw, db = layer_norm_bwd(dy, x, w, mean, rstd)
        # torch's own layer norm and its gradients, in float64 from the same inputs.
        x64, w64, b64 = (t.double().cpu().requires_grad_() for t in (x, w, b))
        y64 = F.layer_norm(x64, (N,), w64, b64, 1e-5)
        grads = torch.autograd.grad(y64, (x64, w64, b64), dy.double().cpu())
        # FP32 arithmetic rounded once to FP16: within one FP16 ulp (2^-10) of
        # each value, or of the largest one for values near zero.
        for got, want in zip((y, dx, dw, db), (y64.detach(), *grads), strict=True):
            torch.testing.assert_close(got.double().cpu(), want, rtol=2**-10,
                                       atol=2**-10 * float(want.abs().max()))
        print(f"y, dx, dw and db match torch within one FP16 ulp at {M} x {N}")
    if on_gpu:
        M, N = 32768, 1024
        x, dy = (torch.randn(M, N, device=device, dtype=torch.float16) for _ in "xy")
        w, b = x[0].clone(), x[1].clone()
        _, mean, rstd = layer_norm_fwd(x, w, b)
        for name, fn, moved in (
                ("forward", lambda: layer_norm_fwd(x, w, b), 2 * x.numel() * 2),
                ("backward", lambda: layer_norm_bwd(dy, x, w, mean, rstd),
                 3 * x.numel() * 2)):
            ms = triton.testing.do_bench(fn)
            print(f"{name}, {M} x {N} fp16: {ms:.3f} ms, {moved / ms / 1e6:.0f} GB/s")


# end snippet


if __name__ == "__main__":
    self_check()
