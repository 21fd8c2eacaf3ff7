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

The backward pass is the second half of the lesson. dx is again a per-row
computation, but dw and db are sums over *all* rows, a reduction across
programs. We do it in two stages: every program adds up its own rows into a
private partial sum, and a second small kernel adds the partial sums.

Inputs and outputs are FP16; every statistic and every sum is FP32.

Run it:
    TRITON_INTERPRET=1 python layer_norm.py   # any machine: checks on the CPU
    python layer_norm.py                      # a CUDA GPU: checks and GB/s
"""

import re
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

# lessonkit.py sits beside this file in a download, one folder up in the repository.
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]
from lessonkit import Lesson, bench_interleaved, gbps, scaled_rtol  # noqa: E402

LIGER = "liger-kernel"  # the optional baseline (lesson.toml [requires.optional])


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
def layer_norm_bwd(dy, x, weight, mean, rstd, out=None, programs_per_sm=4):
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


def make_inputs(M, N, device, seed, dtype=torch.float16):
    """Rows with their own offset and spread, so mean and rstd differ per row."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    spread = torch.rand(M, 1, generator=g) * 1.5 + 0.5
    offset = torch.rand(M, 1, generator=g) * 4.0 - 2.0
    x = torch.randn(M, N, generator=g) * spread + offset
    w = 1.0 + 0.5 * torch.randn(N, generator=g)
    b = 0.5 * torch.randn(N, generator=g)
    dy = torch.randn(M, N, generator=g)
    return [t.to(device=device, dtype=dtype) for t in (x, w, b, dy)]


def reference64(x, w, b, dy, eps):
    """Forward and backward of torch's own layer norm, in float64 on the CPU."""
    x64, w64, b64 = (t.detach().to("cpu", torch.float64).requires_grad_()
                     for t in (x, w, b))
    y64 = F.layer_norm(x64, (x.shape[1],), w64, b64, eps)
    grads = torch.autograd.grad(y64, (x64, w64, b64), dy.to("cpu", torch.float64))
    xd = x64.detach()
    mean64 = xd.mean(dim=1)
    rstd64 = 1.0 / torch.sqrt(xd.var(dim=1, unbiased=False) + eps)
    return y64.detach(), mean64, rstd64, *grads


def nan_like(t, dtype=None):
    return torch.full_like(t, float("nan"), dtype=dtype)


# snippet: checks
def results_and_bounds(x, w, b, dy, eps=1e-5):
    """Both passes into outputs poisoned with NaN (a row the kernels skip
    fails), each output beside its float64 reference and its bound: (name,
    got, want, (rtol, why), the scale atol is rtol times)."""
    M, N = x.shape
    y_ref, mean_ref, rstd_ref, dx_ref, dw_ref, db_ref = reference64(x, w, b, dy, eps)
    stats = torch.full((M,), float("nan"), device=x.device)
    y, mean, rstd = layer_norm_fwd(x, w, b, eps, out=(nan_like(x), stats,
                                                      stats.clone()))
    # Backward, from the kernel's own mean and rstd.
    dx, dw, db = layer_norm_bwd(dy, x, w, mean, rstd,
                                out=(nan_like(x), nan_like(w), nan_like(w)))
    # y and dx are computed in FP32 and rounded once to FP16: half an FP16
    # ulp, 2^-11 relative. We allow one ulp (2^-10), or the length-scaled
    # FP32 bound if that is larger; atol scales with the largest value.
    rounded_once = scaled_rtol(2**-10, 2**-24, N)
    # mean and rstd stay FP32: only the sums' rounding, 4*eps32*sqrt(N).
    # (mean's atol scales with max|x|, since the mean of a row can be ~0.)
    sums = scaled_rtol(1e-6, 2**-24, N)
    # dw and db add up M rows in FP32 before one rounding to FP16.
    over_rows = scaled_rtol(2**-10, 2**-24, M)
    largest = lambda t: float(t.abs().max())  # noqa: E731
    return [
        ("forward-y", y, y_ref, rounded_once, largest(y_ref)),
        ("forward-mean", mean, mean_ref, sums, largest(x)),
        ("forward-rstd", rstd, rstd_ref, sums, largest(rstd_ref)),
        ("backward-dx", dx, dx_ref, rounded_once, largest(dx_ref)),
        ("backward-dw", dw, dw_ref, over_rows, largest(dw_ref)),
        ("backward-db", db, db_ref, over_rows, largest(db_ref)),
    ]


# end snippet


def check_shape(lesson, M, N, device, seed, eps=1e-5):
    x, w, b, dy = make_inputs(M, N, device, seed)
    for name, got, want, (rtol, why), scale in results_and_bounds(x, w, b, dy, eps):
        lesson.close(f"{name}-{M}x{N}", got, want, rtol, rtol * scale, why)



def check_against_torch(lesson, device, eps=1e-5):
    """Our FP16 output next to torch's own FP16 layer norm: both within one
    ulp of float64."""
    M, N = (64, 1000) if device == "cpu" else (4096, 1000)
    x, w, b, _ = make_inputs(M, N, device, seed=7)
    y, _, _ = layer_norm_fwd(x, w, b, eps)
    y_torch = F.layer_norm(x, (N,), w, b, eps)
    y64 = F.layer_norm(x.double(), (N,), w.double(), b.double(), eps)
    ours = float((y.double() - y64).abs().max())
    theirs = float((y_torch.double() - y64).abs().max())
    # Two correct FP16 results may differ by one rounding each.
    diff = float((y.double() - y_torch.double()).abs().max())
    bound = 2 * 2**-11 * float(y64.abs().max())
    lesson.check(
        f"agrees-with-torch-fp16-{M}x{N}", diff <= bound,
        f"max|ours - F.layer_norm| = {diff:.3g} <= {bound:.3g} (two half-ulps at "
        f"max|y|); max error vs float64: ours {ours:.3g}, torch {theirs:.3g}",
    )


def check_correctness(lesson: Lesson, device: str) -> None:
    # Widths that are and are not powers of two, a ragged number of rows
    # (not a multiple of the rows per program), and one wide row.
    if lesson.interpret:
        shapes = [(37, 1000), (64, 1024), (5, 4096)]
    else:
        shapes = [(1001, 1000), (4096, 1024), (999, 4096), (300, 8192), (2048, 777)]
    for i, (M, N) in enumerate(shapes):
        check_shape(lesson, M, N, device, seed=i)
    check_against_torch(lesson, device)
    check_liger(lesson, device)


def check_liger(lesson: Lesson, device: str, eps=1e-5) -> None:
    """Liger-Kernel's layer norm, forward and backward, to the bounds above."""
    ln = lesson.optional(LIGER, "liger_kernel.ops.layer_norm")
    if ln is None:
        return
    if lesson.interpret:
        lesson.skip(
            "liger-forward",
            "Liger's forward kernel calls eps.to(tl.float32) on its float "
            "argument; the interpreter passes a float argument as a Python "
            "float, which has no .to(), so it runs only compiled. Its backward "
            "(no float argument) is checked here from our forward's mean and rstd",
        )
    shapes = [(37, 1000)] if lesson.interpret else [(1001, 1000), (999, 4096)]
    for seed, (M, N) in enumerate(shapes, start=30):
        x, w, b, dy = make_inputs(M, N, device, seed)
        y_ref, _, _, dx_ref, dw_ref, db_ref = reference64(x, w, b, dy, eps)
        tag = f"{M}x{N}"
        if lesson.interpret:
            _, mean, rstd = layer_norm_fwd(x, w, b, eps)
        else:
            y, _, mean, rstd, _, _ = ln.layer_norm_forward(x, w, b, eps)
            rtol, why = scaled_rtol(2**-10, 2**-24, N)
            lesson.close(f"liger-forward-y-{tag}", y, y_ref, rtol,
                         rtol * float(y_ref.abs().max()), why)
        try:
            dx, dw, db = ln.layer_norm_backward(dy, x, w, b, mean, rstd)
        except Exception as exc:  # noqa: BLE001 - only the interpreter may refuse it
            if not lesson.interpret:
                raise
            lesson.skip("liger-backward", "this Triton's interpreter could not run "
                        f"it ({type(exc).__name__}: {str(exc)[:200]}); Triton 3.6's "
                        "cannot take a runtime bound in range() under NumPy 2.4, "
                        "and Liger's loop has one. The GPU run checks it")
            return
        for name, got, want, terms in (("dx", dx, dx_ref, N), ("dw", dw, dw_ref, M),
                                       ("db", db, db_ref, M)):
            rtol, why = scaled_rtol(2**-10, 2**-24, terms)
            lesson.close(f"liger-backward-{name}-{tag}", got, want, rtol,
                         rtol * float(want.abs().max()), why)


def forward_bytes(M, N, element_size):
    # read x, write y, read w and b once, write mean and rstd (FP32)
    return 2 * M * N * element_size + 2 * N * element_size + 2 * M * 4


def backward_bytes(M, N, element_size):
    # read x and dy, write dx, read mean and rstd; w, dw, db are small
    return 3 * M * N * element_size + 2 * M * 4 + 3 * N * element_size


ELEMENTS = 32768 * 1024  # every benchmarked shape holds 2^25 elements


def show_compiled_code(lesson: Lesson, device: str, eps=1e-5) -> None:
    """How the rows reach the registers: the loads in the PTX, per pass."""
    rows = []
    for N in (1024, 4096):
        M = ELEMENTS // N
        x = torch.randn(M, N, device=device, dtype=torch.float16)
        w, b = x[0].clone(), x[1].clone()
        y, mean, rstd = layer_norm_fwd(x, w, b, eps)
        BLOCK_N, ROWS, warps = forward_config(N, 2)
        # One program is enough to get the compiled kernel back from a launch.
        compiled = layer_norm_fwd_kernel[(1,)](
            x, y, w, b, mean, rstd, x.stride(0), y.stride(0), M, N, eps,
            BLOCK_N=BLOCK_N, ROWS=ROWS, num_warps=warps,
        )
        ptx = compiled.asm["ptx"]
        loads = re.findall(r"ld\.global[\w.:]*", ptx)
        rows.append([
            f"forward, N = {N}", ROWS, warps,
            sum(".v4." in ld for ld in loads), len(loads),
            getattr(compiled, "n_regs", None), compiled.metadata.shared,
        ])
    lesson.table(
        "compiled",
        ["kernel", "rows/program", "warps", "16-byte loads", "all global loads",
         "registers / thread", "shared memory bytes"],
        rows,
        "PTX of the forward kernel as launched in the benchmarks (static counts). "
        "A 16-byte load (ld.global.v4.b32) brings 8 FP16 values into one thread; "
        "the shared memory carries the two row sums across warps.",
    )


# snippet: benchmark
# Every shape holds the same 2^25 elements: 64 MiB of FP16 read and 64 MiB
# written per forward pass, twice the 60 MB L2 of an H200, and do_bench
# flushes the L2 between repetitions, so each run streams from DRAM. The
# ceiling is a device-to-device copy of the same bytes.
def contenders(N, device, eps=1e-5, with_copy=False, elements=ELEMENTS):
    """Ours and torch's, forward and backward, at row width N (and a copy)."""
    M = elements // N
    x, w, b, dy = make_inputs(M, N, device, seed=N)
    # torch's backward kernel itself, from torch's own saved statistics, so
    # neither side pays for autograd's bookkeeping.
    _, mean_t, rstd_t = torch.ops.aten.native_layer_norm(x, [N], w, b, eps)
    _, mean, rstd = layer_norm_fwd(x, w, b, eps)
    fns = {
        "forward": lambda: layer_norm_fwd(x, w, b, eps),
        "F.layer_norm": lambda: F.layer_norm(x, (N,), w, b, eps),
        "backward": lambda: layer_norm_bwd(dy, x, w, mean, rstd),
        "torch backward": lambda: torch.ops.aten.native_layer_norm_backward(
            dy, x, [N], mean_t, rstd_t, w, b, [True, True, True]),
    }
    if with_copy:
        dst = torch.empty_like(x)
        fns["copy"] = lambda: dst.copy_(x)
    return fns


# end snippet


def benchmark(lesson: Lesson, device: str):
    """Both passes against torch at two widths, with a copy as the ceiling."""
    # The contenders take turns, round after round, so clock drift hits them
    # all alike; 15 rounds give 15 paired ratios for each benchmark.
    # The prediction: the forward pass moves a copy's bytes and is
    # memory-bound, so it should run at the copy's GB/s.
    lesson.predict("forward-vs-copy-32768x1024-fp16", 1.0,
                   "memory-bound, moving a copy's bytes (read x, write y) at a "
                   "copy's rate", 0.10)
    elements = lesson.size(gpu=ELEMENTS, smoke=8192)
    ms = {1024: bench_interleaved(contenders(1024, device, with_copy=True,
                                             elements=elements)),
          4096: bench_interleaved(contenders(4096, device, elements=elements))}
    fwd_1024 = forward_bytes(elements // 1024, 1024, 2)
    fwd_4096 = forward_bytes(elements // 4096, 4096, 2)
    copy_bytes = 2 * elements * 2  # read + write, FP16
    lesson.benchmark(
        "forward-vs-torch-32768x1024-fp16",
        "forward vs F.layer_norm, 32768 x 1024 fp16",
        ms[1024], "forward", "F.layer_norm", unit="GB/s", work=fwd_1024,
        baseline_name="F.layer_norm", threshold=1.0, stretch=1.5,
    )
    lesson.benchmark(
        "forward-vs-copy-32768x1024-fp16",
        "forward vs a copy of x, 32768 x 1024 fp16",
        ms[1024], "forward", "copy", unit="GB/s", work=(fwd_1024, copy_bytes),
        baseline_name="device-to-device copy of x", threshold=0.7, gate=False,
    )
    lesson.benchmark(
        "forward-vs-torch-8192x4096-fp16",
        "forward vs F.layer_norm, 8192 x 4096 fp16",
        ms[4096], "forward", "F.layer_norm", unit="GB/s", work=fwd_4096,
        baseline_name="F.layer_norm",
    )
    lesson.benchmark(
        "backward-vs-torch-32768x1024-fp16",
        "backward (dx, dw, db) vs torch, 32768 x 1024 fp16",
        ms[1024], "backward", "torch backward", unit="GB/s",
        work=backward_bytes(elements // 1024, 1024, 2),
        baseline_name="aten native_layer_norm_backward", threshold=1.0, gate=False,
    )
    return ms, gbps(copy_bytes, ms[1024].median("copy"))


def torch_layer_norm(x, w, b, eps):
    return F.layer_norm(x, (x.shape[1],), w, b, eps)


# snippet: liger-benchmark
def library_contenders(lesson, ln, x, w, b, dy, eps=1e-5):
    """Ours against Liger-Kernel (`ln`: liger_kernel.ops.layer_norm, or None)
    and torch.compile, on the same inputs; the compile time, in seconds."""
    _, mean, rstd = layer_norm_fwd(x, w, b, eps)
    fns = {"forward": lambda: layer_norm_fwd(x, w, b, eps)[0],
           "backward": lambda: layer_norm_bwd(dy, x, w, mean, rstd)}
    if ln is not None:
        # Liger's backward from its own forward's statistics, called directly
        # as torch's is above: neither side pays for autograd's bookkeeping.
        _, _, mean_l, rstd_l, _, _ = ln.layer_norm_forward(x, w, b, eps)
        fns["Liger forward"] = lambda: ln.LigerLayerNormFunction.apply(x, w, b, eps)
        fns["Liger backward"] = lambda: ln.layer_norm_backward(
            dy, x, w, b, mean_l, rstd_l)
    # torch.compile of F.layer_norm for this one shape; its first call compiles.
    compile_s = 0.0
    try:
        t0 = time.perf_counter()
        compiled = torch.compile(torch_layer_norm, dynamic=False)
        compiled(x, w, b, eps)
        torch.cuda.synchronize()
        compile_s = time.perf_counter() - t0
        fns["torch.compile"] = lambda: compiled(x, w, b, eps)
    except Exception as e:  # noqa: BLE001 - any failure becomes a skip
        first = str(e).splitlines()[0][:200] if str(e) else ""
        lesson.skip(f"torch-compile-{x.shape[0]}x{x.shape[1]}",
                    f"torch.compile failed: {type(e).__name__}: {first}")
    return fns, compile_s


# end snippet


def check_timed(lesson: Lesson, fns: dict, x, w, b, dy, eps=1e-5) -> None:
    """What is timed must be right: y of each forward pass and dx of Liger's
    backward, on every 256th row, against float64 (dw and db add up all rows,
    so they are checked at the smaller shapes of check_liger)."""
    M, N = x.shape
    rows = slice(None, None, 256)
    y_ref, _, _, dx_ref, _, _ = reference64(x[rows], w, b, dy[rows], eps)
    rtol, why = scaled_rtol(2**-10, 2**-24, N)
    for name in ("forward", "Liger forward", "torch.compile", "Liger backward"):
        if name in fns:
            got = fns[name]()
            got, want = (got[0], dx_ref) if name == "Liger backward" else (got, y_ref)
            lesson.close(f"{name.replace(' ', '-').replace('.', '-')}-{M}x{N}-rows",
                         got[rows], want, rtol, rtol * float(want.abs().max()), why)


def compare_with_libraries(lesson: Lesson, device: str) -> None:
    """Both passes against Liger-Kernel, the forward against torch.compile.

    In rounds of their own: nothing a library does (a graph capture that
    fails, say) can change how the comparisons with torch above are timed.
    """
    ln = lesson.optional(LIGER, "liger_kernel.ops.layer_norm")
    for N in (1024, 4096):
        M = lesson.size(gpu=ELEMENTS, smoke=8192) // N
        x, w, b, dy = make_inputs(M, N, device, seed=N)
        fns, compile_s = library_contenders(lesson, ln, x, w, b, dy)
        if len(fns) == 2:
            continue  # neither library is here: nothing to compare
        check_timed(lesson, fns, x, w, b, dy)
        ms = bench_interleaved(fns)
        shape = f"{M}x{N}"
        fwd, bwd = forward_bytes(M, N, 2), backward_bytes(M, N, 2)
        if ln is not None:
            lesson.benchmark(
                f"forward-vs-liger-{shape}-fp16",
                f"forward vs Liger-Kernel, {M} x {N} fp16", ms, "forward",
                "Liger forward", unit="GB/s", work=fwd,
                baseline_name="Liger-Kernel LigerLayerNormFunction", threshold=0.95,
                library="Liger-Kernel", note="both write y, mean and rstd",
            )
            lesson.benchmark(
                f"backward-vs-liger-{shape}-fp16",
                f"backward (dx, dw, db) vs Liger-Kernel, {M} x {N} fp16", ms,
                "backward", "Liger backward", unit="GB/s", work=bwd,
                baseline_name="Liger-Kernel layer_norm_backward", threshold=0.95,
                library="Liger-Kernel",
                note="each from its own forward's mean and rstd; Liger adds its "
                "per-SM partial sums of dw and db with torch",
            )
        if "torch.compile" in fns:
            lesson.benchmark(
                f"forward-vs-compile-{shape}-fp16",
                f"forward vs torch.compile, {M} x {N} fp16", ms, "forward",
                "torch.compile", unit="GB/s", work=fwd,
                baseline_name="torch.compile(F.layer_norm, dynamic=False)",
                gate=False, library="torch.compile",
                note=f"report only; first call (compile) took {compile_s:.1f} s; "
                "it keeps no mean and rstd for a backward pass",
            )


def sweep_and_plot(lesson: Lesson, device: str, measured: dict, copy_gbps: float,
                   eps=1e-5) -> None:
    """Four row widths, then the two tuning knobs at N = 1024."""
    results = {}
    elements = lesson.size(gpu=ELEMENTS, smoke=8192)
    for N in (1024, 2048, 4096, 8192):
        if N in measured:
            ms = measured[N]
        else:  # widths only in the table: three rounds are enough
            ms = bench_interleaved(contenders(N, device, eps, elements=elements),
                                   rounds=3)
        M = elements // N
        fb, bb = forward_bytes(M, N, 2), backward_bytes(M, N, 2)
        results[N] = {"M": M, "forward": gbps(fb, ms.median("forward")),
                      "F.layer_norm": gbps(fb, ms.median("F.layer_norm")),
                      "backward": gbps(bb, ms.median("backward")),
                      "torch backward": gbps(bb, ms.median("torch backward"))}
    lesson.table(
        "widths",
        ["N", "M", "rows/program (fwd)", "warps", "forward GB/s", "F.layer_norm GB/s",
         "forward / torch", "backward GB/s", "torch backward GB/s", "backward / torch",
         "forward / copy"],
        [[N, r["M"], *forward_config(N, 2)[1:], r["forward"], r["F.layer_norm"],
          r["forward"] / r["F.layer_norm"], r["backward"], r["torch backward"],
          r["backward"] / r["torch backward"], r["forward"] / copy_gbps]
         for N, r in results.items()],
        "FP16 layer norm over 2^25 elements at four row widths; GB/s counts the "
        f"bytes each pass must move (copy of the same 64 MiB: {copy_gbps:.0f} GB/s). "
        "Medians of 15 rounds at N = 1024 and 4096, 3 at 2048 and 8192.",
    )

    def draw(fig):
        ax = fig.subplots()
        widths = list(results)
        for key, style, name in (("forward", "o-", "Triton forward"),
                                 ("F.layer_norm", "s--", "F.layer_norm"),
                                 ("backward", "^-", "Triton backward"),
                                 ("torch backward", "v--", "torch backward")):
            ax.plot(widths, [results[n][key] for n in widths], style, label=name)
        ax.axhline(copy_gbps, color="gray", linestyle=":", label="copy of x")
        ax.set_xscale("log", base=2)
        ax.set_xticks(widths, [str(n) for n in widths])
        ax.set_xlabel(f"row width N (FP16, M x N = {elements:,} elements)")
        ax.set_ylabel("GB/s")
        ax.set_ylim(bottom=0)
        fig.legend(loc="outside lower center", ncols=2)

    lesson.plot("gbps-vs-width", "Bandwidth of the forward and backward passes by "
                "row width, against torch and a plain copy of the same bytes", draw,
                size=(7.0, 5.2))

    # snippet: sweep
    # How much do several rows per program buy at N = 1024? Same kernel,
    # same warps, only ROWS changes; three rounds of the four, taking turns.
    M, N = lesson.size(gpu=(32768, 1024), smoke=(8, 1024))
    x, w, b, dy = make_inputs(M, N, device, seed=1)
    ms = bench_interleaved(
        {r: (lambda r=r: layer_norm_fwd(x, w, b, eps, rows=r)) for r in (1, 2, 4, 8)},
        rounds=3,
    )
    fwd = {r: gbps(forward_bytes(M, N, 2), ms.median(r)) for r in ms}
    # end snippet
    lesson.table(
        "rows-per-program", ["rows/program", "forward GB/s", "forward / copy"],
        [[r, fwd[r], fwd[r] / copy_gbps] for r in fwd],
        "Forward pass at 32768 x 1024 FP16, 4 warps, varying the rows each program "
        "normalizes (median of 3 rounds)",
    )

    # snippet: sweep-backward
    # The backward pass's one free choice: how many stage-one programs per
    # SM, i.e. how many partial rows of dw and db stage two must add up.
    _, mean, rstd = layer_norm_fwd(x, w, b, eps)
    ms = bench_interleaved(
        {p: (lambda p=p: layer_norm_bwd(dy, x, w, mean, rstd, programs_per_sm=p))
         for p in (2, 4, 8, 16)},
        rounds=3,
    )
    bwd = {p: gbps(backward_bytes(M, N, 2), ms.median(p)) for p in ms}
    # end snippet
    lesson.table(
        "backward-programs", ["programs per SM", "backward GB/s"],
        [[p, bwd[p]] for p in bwd],
        "Backward pass (dx, dw, db) at 32768 x 1024 FP16, varying the number of "
        "stage-one programs (median of 3 rounds)",
    )


# snippet: solution-one-pass
@triton.jit
def variance_one_pass_kernel(X, Var, stride, N, BLOCK_N: tl.constexpr):
    # E[x^2] - E[x]^2: one reduction pass fewer, and two large, nearly
    # equal numbers subtracted when the mean is large against the spread.
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    x = tl.load(X + row * stride + cols, mask=cols < N, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / N
    tl.store(Var + row, tl.sum(x * x, axis=0) / N - mean * mean)


# end snippet


def try_this(lesson: Lesson, device: str, eps=1e-5) -> None:
    M, N = 64, 1000
    x, w, b, dy = make_inputs(M, N, device, seed=11)
    x = x + 100.0  # rows centred near 100, spread about 1
    var64 = x.double().var(dim=1, unbiased=False)
    # The two-pass kernel's variance, recovered from its rstd.
    _, _, rstd = layer_norm_fwd(x, w, b, eps)
    two_pass = 1.0 / rstd.double() ** 2 - eps
    one_pass = torch.empty(M, device=device, dtype=torch.float32)
    variance_one_pass_kernel[(M,)](x, one_pass, x.stride(0), N,
                                   BLOCK_N=triton.next_power_of_2(N))
    err_two = float(((two_pass - var64) / var64).abs().max())
    err_one = float(((one_pass.double() - var64) / var64).abs().max())
    lesson.check(
        "exercise-one-pass-variance", err_two < 1e-5 and err_one > 10 * err_two,
        f"rows near 100: relative error of the variance {err_one:.2e} in one pass, "
        f"{err_two:.2e} in two",
    )

    # Enough rows that 1 and 32 programs per SM give different slices.
    M = 64 if lesson.interpret else 4096
    x, w, b, dy = make_inputs(M, 1024, device, seed=12)

    # snippet: solution-programs-per-sm
    # dx is computed row by row, whatever slice of rows a program owns, so it
    # must not change at all. dw and db are added up in a different order
    # (G partial rows, then their sum), so they may differ by rounding.
    _, mean, rstd = layer_norm_fwd(x, w, b, eps)
    dx1, dw1, db1 = layer_norm_bwd(dy, x, w, mean, rstd, programs_per_sm=1)
    dx32, dw32, db32 = layer_norm_bwd(dy, x, w, mean, rstd, programs_per_sm=32)
    same_dx = torch.equal(dx1, dx32)
    # end snippet
    rtol, why = scaled_rtol(2**-10, 2**-24, M)
    ok = same_dx
    for a, b_ in ((dw1, dw32), (db1, db32)):
        scale = float(b_.double().abs().max())
        ok &= bool(((a.double() - b_.double()).abs() <= 2 * rtol * scale).all())
    lesson.check("exercise-programs-per-sm", ok,
                 f"dx bit for bit: {same_dx}; dw and db within 2 x ({why})",
                 why="more stage-one programs reorder the sums of dw and db, never dx")


def main() -> int:
    lesson = Lesson("layer-norm")
    device = lesson.device()
    if lesson.step("compiled-code", needs_gpu="the interpreter compiles nothing",
                   smoke=False):
        show_compiled_code(lesson, device)
    with lesson.step("correctness"):
        check_correctness(lesson, device)
    if lesson.step("benchmark", needs_gpu="timings need a GPU"):
        measured, copy_gbps = benchmark(lesson, device)
    if lesson.step("sweep", needs_gpu="timings need a GPU"):
        sweep_and_plot(lesson, device, measured, copy_gbps)
    if lesson.step("libraries", needs_gpu="timings need a GPU"):
        compare_with_libraries(lesson, device)
    with lesson.step("exercises"):
        try_this(lesson, device)
    return lesson.finish()


if __name__ == "__main__":
    sys.exit(main())
