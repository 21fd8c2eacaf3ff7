"""Softmax and an FP32 matmul: two kernels written as programs over blocks.

Part 1 is a row softmax. One program takes one row, holds the whole row as a
single block value, and reduces it twice (a max, then a sum) with one call
each. The two details that make it correct are the padding value of the
masked lanes (-inf, never 0.0) and subtracting the row maximum before `exp`.

Part 2 is a matrix product with FP32 inputs, an FP32 accumulator and an FP32
output. It is compiled twice, once with `tl.dot(..., input_precision="ieee")`
and once with `"tf32"`. On compute capability 8.0 and newer that one string
decides whether the product runs on the ordinary FP32 multiply-add units or on
the tensor cores, which see only 10 of the 23 explicit mantissa bits. Triton's
default for an FP32 `tl.dot` is "tf32", so a kernel that never says which it
wants gets the faster, less accurate one.

Part 3 (GPU only) times both against their PyTorch counterparts: the softmax
against `torch.softmax` and a plain copy, the matmul against cuBLAS in FP32
and in TF32, after a small sweep of tile shapes.

Run it:
    TRITON_INTERPRET=1 python code/softmax-fp32-matmul/softmax_fp32_matmul.py   # CPU, checks only
    python code/softmax-fp32-matmul/softmax_fp32_matmul.py                      # GPU, checks and timings
"""

import contextlib
import re
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl
from triton.runtime.errors import OutOfResources

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # code/, where lessonkit.py lives
from lessonkit import Lesson, bench_interleaved, bench_ms, gbps, scaled_rtol, tflops  # noqa: E402

# Part 1's correctness shape: 2048 rows of 1024 values.
SOFTMAX_ROWS, SOFTMAX_COLS = 2048, 1024
# A width that is not a power of two, so that masked lanes exist at all.
RAGGED_ROWS, RAGGED_COLS = 64, 1000

# Part 2's correctness shape. K is the long side on purpose: at K = 1024 the
# length-scaled tolerance for FP32 is larger than the flat table value, so
# the scaling rule below is doing real work.
MM_M, MM_N, MM_K = 256, 256, 1024

# Spacing at 1.0 (eps) and the flat relative tolerance for each precision.
# FP32 keeps 23 explicit mantissa bits, TF32 keeps 10.
F32_EPS, F32_RTOL = 2.0**-23, 1e-5
TF32_EPS, TF32_RTOL = 2.0**-10, 1e-2

# Tile shapes for the sweep: (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps,
# num_stages). Written out rather than hidden in triton.autotune so that every
# row is printed and recorded, and so that the interpreter can check one of
# them. The first is the one the correctness checks use.
CONFIGS = [
    (64, 64, 32, 8, 4, 3),
    (128, 128, 32, 8, 8, 3),
    (128, 64, 64, 8, 4, 4),
]
# Wider tiles that suit Hopper's warpgroup tensor-core instructions; only
# worth trying for tf32 (for ieee a 128 x 256 accumulator would not fit in
# registers without spilling).
TF32_EXTRA = [(128, 256, 32, 8, 8, 3), (128, 256, 32, 8, 8, 4), (256, 128, 32, 8, 8, 3)]

# Part 3's sizes.
SWEEP_SIZE = 2048
MATMUL_SIZES = (2048, 4096)
SOFTMAX_SHAPES = ((32768, 1024), (4096, 16384))


# snippet: softmax-kernel
@triton.jit
def softmax_kernel(out_ptr, in_ptr, out_row_stride, in_row_stride, n_rows, n_cols,
                   BLOCK_COLS: tl.constexpr, STAGES: tl.constexpr):
    # BLOCK_COLS is the next power of two at or above n_cols: a block's
    # length must be a power of two, so a row of 1000 values is held in a
    # block of 1024 and the last 24 lanes are masked off.
    cols = tl.arange(0, BLOCK_COLS)
    mask = cols < n_cols
    # Program p handles rows p, p + P, p + 2P, ... where P is the grid size.
    # Launched with one program per row, the loop body runs exactly once.
    for row in tl.range(tl.program_id(0), n_rows, tl.num_programs(0), num_stages=STAGES):
        # Masked lanes read -inf. It can never be the maximum, and after the
        # shift exp(-inf) = 0 adds nothing to the sum. A 0.0 pad would do
        # both wrong: on a row of negative numbers it would *be* the maximum,
        # and every padded lane would add exp(0 - max) to the denominator.
        x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf"))
        # Subtracting the row maximum leaves the result unchanged in exact
        # arithmetic, and keeps every exponent <= 0, so exp cannot overflow.
        shifted = x - tl.max(x, axis=0)
        numerator = tl.exp(shifted)
        denominator = tl.sum(numerator, axis=0)
        tl.store(out_ptr + row * out_row_stride + cols, numerator / denominator, mask=mask)
# end snippet


# snippet: softmax-launch
def softmax_warps(n_cols: int) -> int:
    # The whole row lives in registers, spread over the program's threads.
    # Keep it to at most 32 values per thread: 4 warps up to 4096 columns,
    # then 8, 16, 32 warps as the row doubles.
    block_cols = triton.next_power_of_2(n_cols)
    return min(32, max(4, block_cols // (32 * 32)))


def softmax(x: torch.Tensor, programs: int | None = None, out: torch.Tensor | None = None) -> torch.Tensor:
    """Row softmax of a 2-D tensor. programs=None: one program per row.

    With a number, that many programs each walk a stride of rows, and the
    loop is software-pipelined two deep so the next row's load is already in
    flight while this row is reduced.
    """
    n_rows, n_cols = x.shape
    out = torch.empty_like(x) if out is None else out
    grid = (n_rows if programs is None else min(programs, n_rows),)
    softmax_kernel[grid](out, x, out.stride(0), x.stride(0), n_rows, n_cols,
                         BLOCK_COLS=triton.next_power_of_2(n_cols),
                         STAGES=1 if programs is None else 2,
                         num_warps=softmax_warps(n_cols))
    return out
# end snippet


def persistent_programs(n_cols: int) -> int:
    """Enough programs to fill every multiprocessor once, counting threads (2048 = 64 warps per SM)."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    return sms * max(1, 64 // softmax_warps(n_cols))


# snippet: matmul-signature
@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, m, n, k,
                  stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  GROUP_M: tl.constexpr, IEEE: tl.constexpr):
    # end snippet
    # Each program computes one BLOCK_M x BLOCK_N tile of C, walking K.
    #
    # snippet: group-order
    # Which tile does program `pid` take? Row-major order (pid_m = pid // tiles_n)
    # would have the programs running at the same moment sweep one full row
    # of C tiles: they share a strip of A but each needs a different strip
    # of B. Grouping walks GROUP_M tile rows down a column before moving
    # right, so the programs in flight together touch fewer distinct strips
    # of A and B and find more of them already in L2.
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(m, BLOCK_M)
    tiles_n = tl.cdiv(n, BLOCK_N)
    programs_per_group = GROUP_M * tiles_n
    group = pid // programs_per_group
    first_m = group * GROUP_M
    rows_in_group = min(tiles_m - first_m, GROUP_M)  # the last group can be short
    pid_m = first_m + (pid % programs_per_group) % rows_in_group
    pid_n = (pid % programs_per_group) // rows_in_group
    # end snippet

    # snippet: tile-offsets
    # Wrapping the row and column offsets (% m, % n) keeps every load in
    # bounds without a mask; the rows and columns that wrapped are simply
    # not stored at the end. The wrap hides from the compiler that each run
    # of offsets is contiguous and block-aligned, so we state it again: that
    # is what allows 16-byte vector loads and asynchronous copies.
    offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % m
    offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % n
    offs_m = tl.max_contiguous(tl.multiple_of(offs_m, BLOCK_M), BLOCK_M)
    offs_n = tl.max_contiguous(tl.multiple_of(offs_n, BLOCK_N), BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    # end snippet

    # snippet: dot-precision
    # The accumulator is FP32 in both variants; IEEE only decides how the
    # FP32 inputs are multiplied. IEEE is a tl.constexpr, so the `if` is
    # resolved at compile time and each compiled kernel holds one branch.
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for step in range(0, tl.cdiv(k, BLOCK_K)):
        k_left = k - step * BLOCK_K  # the last step may be partial: pad with zeros
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        if IEEE:
            acc = tl.dot(a, b, acc, input_precision="ieee")  # all 23 mantissa bits, FP32 FMA units
        else:
            acc = tl.dot(a, b, acc, input_precision="tf32")  # tensor cores, 10-bit mantissa inputs
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    # end snippet

    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn
    tl.store(c_ptrs, acc, mask=(rows[:, None] < m) & (cols[None, :] < n))


def matmul(a: torch.Tensor, b: torch.Tensor, config, ieee: bool, out: torch.Tensor | None = None,
           with_kernel: bool = False):
    """C = A @ B with FP32 inputs and output, one tile shape, one precision.

    with_kernel=True also returns the compiled kernel, whose PTX shows which
    multiply instruction the precision string turned into.
    """
    m, k = a.shape
    n = b.shape[1]
    block_m, block_n, block_k, group_m, warps, stages = config
    out = torch.empty((m, n), device=a.device, dtype=torch.float32) if out is None else out
    grid = (triton.cdiv(m, block_m) * triton.cdiv(n, block_n),)
    compiled = matmul_kernel[grid](
        a, b, out, m, n, k,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), out.stride(0), out.stride(1),
        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, GROUP_M=group_m, IEEE=ieee,
        num_warps=warps, num_stages=stages)
    return (out, compiled) if with_kernel else out


# snippet: tolerance
def tolerance(rtol_table: float, eps: float, terms: int, want: torch.Tensor):
    """(rtol, atol, why) for an output that sums `terms` rounded values.

    rtol grows like sqrt(terms), the way a sum of independent rounding errors
    grows; atol is rtol times the largest reference value, because a sum of
    signed terms can land near zero, where a purely relative bound would
    demand more accuracy than the inputs carry.
    """
    rtol, why = scaled_rtol(rtol_table, eps, terms)
    atol = rtol * float(want.abs().max())
    return rtol, atol, why
# end snippet


def poisoned(shape, device) -> torch.Tensor:
    """An output buffer full of NaN: an element the kernel never writes cannot pass a check."""
    return torch.full(shape, float("nan"), device=device)


def softmax64(x: torch.Tensor) -> torch.Tensor:
    """The reference: the kernel's three steps, in float64."""
    x64 = x.double()
    e = torch.exp(x64 - x64.max(dim=1, keepdim=True).values)
    return e / e.sum(dim=1, keepdim=True)


def max_rel_error(got: torch.Tensor, want: torch.Tensor) -> float:
    """max |got - want| / max |want|, the figure compared between precisions."""
    got64 = got.detach().to(want.device, torch.float64)
    return float((got64 - want).abs().max()) / float(want.abs().max())


def multiply_instructions(compiled) -> list[int]:
    """How often each kind of multiply appears in the kernel's PTX."""
    ptx = compiled.asm["ptx"]
    return [len(re.findall(r"wgmma\.mma_async[\w.]*\.tf32", ptx)),  # Hopper warpgroup tensor-core MMA
            len(re.findall(r"mma\.sync[\w.]*\.tf32", ptx)),  # warp-level tensor-core MMA (Ampere style)
            len(re.findall(r"fma\.rn\.f32", ptx))]  # plain FP32 fused multiply-add


def config_name(cfg) -> str:
    return f"{cfg[0]}x{cfg[1]}x{cfg[2]}-g{cfg[3]}-w{cfg[4]}-s{cfg[5]}"


def part1_softmax(lesson: Lesson, device: str) -> None:
    print(f"\nPart 1: row softmax, {SOFTMAX_ROWS} rows of {SOFTMAX_COLS}")
    torch.manual_seed(0)
    # Inputs are made on the host and copied, so the interpreter and the GPU
    # see the same bits. Row i is shifted up by 0.05 * i (the last row by
    # about 102): exp(102) overflows float32, whose largest value is about
    # exp(88.7), so a kernel that skipped the max subtraction would produce
    # inf / inf = NaN there instead of quietly agreeing.
    h_x = torch.randn(SOFTMAX_ROWS, SOFTMAX_COLS)
    h_x += 0.05 * torch.arange(SOFTMAX_ROWS, dtype=torch.float32)[:, None]
    x = h_x.to(device)
    want = softmax64(h_x)
    # Each output is divided by a sum of n_cols exponentials.
    rtol, atol, why = tolerance(F32_RTOL, F32_EPS, SOFTMAX_COLS, want)
    lesson.close("softmax-2048x1024-program-per-row", softmax(x, out=poisoned(x.shape, device)), want, rtol, atol, why)
    # The same kernel with 64 programs, each looping over 32 rows.
    lesson.close("softmax-2048x1024-strided-rows", softmax(x, 64, out=poisoned(x.shape, device)), want,
                 rtol, atol, f"64 programs; {why}")

    # A row of only negative numbers, in a width that leaves masked lanes.
    torch.manual_seed(1)
    h_neg = -1.0 - 20.0 * torch.rand(RAGGED_ROWS, RAGGED_COLS)
    want_neg = softmax64(h_neg)
    rtol, atol, why = tolerance(F32_RTOL, F32_EPS, RAGGED_COLS, want_neg)
    got_neg = softmax(h_neg.to(device), out=poisoned(h_neg.shape, device))
    lesson.close("softmax-64x1000-all-negative", got_neg, want_neg, rtol, atol, f"24 masked lanes per row; {why}")

    # What a 0.0 pad would have computed, emulated in float64: the padded
    # lanes win the max on these rows and add exp(0 - 0) = 1 each to the sum.
    pad = triton.next_power_of_2(RAGGED_COLS) - RAGGED_COLS
    padded = torch.nn.functional.pad(h_neg.double(), (0, pad), value=0.0)
    e = torch.exp(padded - padded.max(dim=1, keepdim=True).values)
    zero_padded = (e / e.sum(dim=1, keepdim=True))[:, :RAGGED_COLS]
    err = max_rel_error(zero_padded, want_neg)
    lesson.check("zero-padding-would-be-wrong", err > 100 * rtol,
                 f"a 0.0 pad gives max error / max|want| = {err:.3g}, against a tolerance of {rtol:.3g}")


def part2_matmul(lesson: Lesson, device: str) -> None:
    print(f"\nPart 2: matmul {MM_M} x {MM_K} @ {MM_K} x {MM_N}, FP32 in, FP32 accumulate, FP32 out")
    torch.manual_seed(2)
    h_a = torch.randn(MM_M, MM_K)
    h_b = torch.randn(MM_K, MM_N)
    a, b = h_a.to(device), h_b.to(device)
    want = h_a.double() @ h_b.double()
    cfg = CONFIGS[0]
    print(f"  tile {config_name(cfg)}")

    got = {}
    for label, ieee, rtol_table, eps in (("ieee", True, F32_RTOL, F32_EPS), ("tf32", False, TF32_RTOL, TF32_EPS)):
        got[label] = matmul(a, b, cfg, ieee, out=poisoned((MM_M, MM_N), device)).cpu()
        rtol, atol, why = tolerance(rtol_table, eps, MM_K, want)
        lesson.close(f"matmul-{label}-256x256x1024", got[label], want, rtol, atol, why)

    # snippet: precision-gate
    # TF32 keeps 10 explicit mantissa bits of each input instead of 23, so on
    # a GPU its error must be far larger than IEEE's: we ask for at least 10
    # times, where the spacing of the two formats alone differs by 2**13.
    err_ieee = max_rel_error(got["ieee"], want)
    err_tf32 = max_rel_error(got["tf32"], want)
    summary = f"max error / max|want|: ieee {err_ieee:.3g}, tf32 {err_tf32:.3g}"
    if lesson.interpret:
        # The interpreter runs tl.dot on numpy; whether it honours
        # input_precision is something this run reports, not assumes.
        same = torch.equal(got["ieee"], got["tf32"])
        verdict = ("identical outputs: this interpreter ignored input_precision" if same
                   else "different outputs: this interpreter shortened the tf32 inputs")
        lesson.skip("tf32-less-accurate-than-ieee", f"not gated under the interpreter; {summary}; {verdict}")
    else:
        lesson.check("tf32-less-accurate-than-ieee", err_tf32 >= 10 * err_ieee, summary)
    # end snippet


# snippet: softmax-benchmark
def time_softmax(x: torch.Tensor, programs: int) -> dict:
    """Median milliseconds of both launches, torch.softmax and a copy, all on the same input.

    The four take turns, round after round, so clock drift hits them alike.
    """
    dst = torch.empty_like(x)
    return bench_interleaved({
        "triton, one program per row": lambda: softmax(x),
        f"triton, {programs} programs, strided rows": lambda: softmax(x, programs),
        "torch.softmax": lambda: torch.softmax(x, dim=-1),
        "copy": lambda: dst.copy_(x),
    })
# end snippet


def part3_softmax_speed(lesson: Lesson) -> dict:
    print("\nPart 3a: softmax bandwidth")
    rows, results = [], {}
    for n_rows, n_cols in SOFTMAX_SHAPES:
        shape = f"{n_rows}x{n_cols}"
        torch.manual_seed(3)
        x = torch.randn(n_rows, n_cols, device="cuda")
        want = softmax64(x)
        rtol, atol, why = tolerance(F32_RTOL, F32_EPS, n_cols, want)
        programs = persistent_programs(n_cols)
        lesson.close(f"softmax-{shape}-per-row", softmax(x, out=poisoned(x.shape, "cuda")), want, rtol, atol, why)
        lesson.close(f"softmax-{shape}-strided", softmax(x, programs, out=poisoned(x.shape, "cuda")), want,
                     rtol, atol, f"{programs} programs; {why}")
        del want

        ms = time_softmax(x, programs)
        # Softmax reads the matrix once and writes it once: 2 * 4 bytes per
        # element, exactly the traffic of a copy, so the copy is the ceiling.
        nbytes = 2 * x.numel() * x.element_size()
        rate = {label: gbps(nbytes, t) for label, t in ms.items()}
        for label, t in ms.items():
            warps = softmax_warps(n_cols) if label.startswith("triton") else ""
            rows.append([shape, label, warps, t * 1e3, rate[label]])
        # The faster of the two launches is the kernel's result, as autotuning would pick it.
        best = max((label for label in rate if label.startswith("triton")), key=rate.get)
        lesson.benchmark(f"softmax-vs-torch-{shape}", rate[best], rate["torch.softmax"], "GB/s",
                         threshold=0.8, stretch=1.0, baseline_name="torch.softmax", note=best)
        lesson.benchmark(f"softmax-vs-copy-{shape}", rate[best], rate["copy"], "GB/s",
                         threshold=0.8, gate=False, baseline_name="device-to-device copy", note=best)
        results[shape] = {"triton": rate[best], "torch.softmax": rate["torch.softmax"], "copy": rate["copy"]}
    lesson.table("softmax-launches", ["shape", "kernel", "num_warps", "us", "GB/s"], rows,
                 "Row softmax in fp32; GB/s counts one read and one write of the matrix")
    return results


def time_matmul(a: torch.Tensor, b: torch.Tensor, cfg, ieee: bool) -> float:
    return bench_ms(lambda: matmul(a, b, cfg, ieee))


# snippet: cublas-flag
@contextlib.contextmanager
def cublas_tf32(allowed: bool):
    """Tell cuBLAS whether it may use TF32 tensor cores for FP32 inputs; restore the setting after."""
    saved = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = allowed
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved  # leave the process as we found it
# end snippet


def part3_matmul_sweep(lesson: Lesson) -> dict:
    size = SWEEP_SIZE
    print(f"\nPart 3b: matmul tile sweep at {size}^3, FP32 inputs")
    torch.manual_seed(4)
    a = torch.randn(size, size, device="cuda")
    b = torch.randn(size, size, device="cuda")
    b_col = b.t().contiguous().t()  # the same B, column-major (see Part 3c)
    want = a.double() @ b.double()
    flop = 2.0 * size**3
    rows, best = [], {}
    # snippet: sweep
    # ieee with B row-major; tf32 with B row-major too (so the two differ in
    # one string only) and again column-major, the layout its tensor cores read.
    runs = [("ieee", True, "row", b, CONFIGS, F32_RTOL, F32_EPS),
            ("tf32", False, "row", b, CONFIGS + TF32_EXTRA, TF32_RTOL, TF32_EPS),
            ("tf32", False, "column", b_col, CONFIGS + TF32_EXTRA, TF32_RTOL, TF32_EPS)]
    for label, ieee, layout, b_in, configs, rtol_table, eps in runs:
        rtol, atol, why = tolerance(rtol_table, eps, size, want)
        for cfg in configs:
            try:
                out, compiled = matmul(a, b_in, cfg, ieee, out=poisoned((size, size), "cuda"), with_kernel=True)
            except OutOfResources as exc:  # too much shared memory for this tile and pipeline depth
                rows.append([label, layout, *cfg, "", "", "", "", "", f"skipped: {exc}"])
                continue
            # Every timed tile is checked too: a fast wrong answer is not a result.
            lesson.close(f"sweep-{label}-b-{layout}-{config_name(cfg)}", out, want, rtol, atol, why)
            ms = time_matmul(a, b_in, cfg, ieee)
            rows.append([label, layout, *cfg, ms * 1e3, tflops(flop, ms), *multiply_instructions(compiled), ""])
            key = (label, layout)
            if key not in best or ms < best[key][1]:
                best[key] = (cfg, ms)
    # end snippet
    lesson.table(f"matmul-sweep-{size}", ["precision", "B layout", "BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M",
                                          "num_warps", "num_stages", "us", "TFLOP/s", "wgmma tf32",
                                          "mma.sync tf32", "fma.rn.f32", "note"], rows,
                 f"FP32-input matmul at {size}^3: every tile shape for each input_precision and B layout, with "
                 "the multiply instructions counted in its PTX")

    # One kernel against itself with one string changed, B row-major for
    # both: if tf32 is not faster than ieee, the tensor cores were not used.
    tf32, ieee_ = best["tf32", "row"], best["ieee", "row"]
    lesson.benchmark(f"matmul-tf32-vs-ieee-{size}", tflops(flop, tf32[1]), tflops(flop, ieee_[1]),
                     "TFLOP/s", threshold=1.0, baseline_name="best ieee tile",
                     note=f"B row-major for both; tf32 {config_name(tf32[0])}, ieee {config_name(ieee_[0])}")
    # Part 3c uses each precision's best tile in the layout that suits it.
    return {"ieee": best["ieee", "row"][0], "tf32": best["tf32", "column"][0]}


def time_against_cublas(a, b, b_col, cfg, ieee: bool, allow_tf32: bool) -> dict:
    """Median ms of the Triton tile and cuBLAS, with B row-major and column-major, taking turns."""
    with cublas_tf32(allow_tf32):
        return bench_interleaved({
            "triton": lambda: matmul(a, b, cfg, ieee),
            "cublas": lambda: a @ b,
            "triton, B column-major": lambda: matmul(a, b_col, cfg, ieee),
            "cublas, B column-major": lambda: a @ b_col,
        })


def part3_matmul_vs_cublas(lesson: Lesson, best: dict) -> dict:
    print("\nPart 3c: the best tile of each precision against cuBLAS, B row-major and column-major")
    results = {}
    for size in MATMUL_SIZES:
        torch.manual_seed(5)
        a = torch.randn(size, size, device="cuda")
        b = torch.randn(size, size, device="cuda")
        # snippet: column-major-b
        # The same values of B stored column-major: element (k, n) lives at
        # n * K + k, so K is the contiguous dimension. Only the strides the
        # kernel receives change (stride_bk == 1, which Triton specialises
        # on), and every tile of B arrives in shared memory K-major: the
        # layout Hopper's 32-bit wgmma reads directly. Row-major B has to be
        # transposed on the way, which is where a tf32 kernel loses its speed.
        b_col = b.t().contiguous().t()
        # end snippet
        flop = 2.0 * size**3
        rtol, atol, why = tolerance(TF32_RTOL, TF32_EPS, size, a.double() @ b.double())
        lesson.close(f"tf32-column-major-b-{size}", matmul(a, b_col, best["tf32"], ieee=False),
                     a.double() @ b.double(), rtol, atol, why)
        # snippet: cublas-benchmark
        for label, ieee, allow_tf32, baseline in (("ieee", True, False, "fp32"), ("tf32", False, True, "tf32")):
            cfg = best[label]
            ms = time_against_cublas(a, b, b_col, cfg, ieee, allow_tf32)
            # end snippet
            name = baseline.upper()
            lesson.benchmark(f"matmul-{label}-vs-cublas-{baseline}-{size}", tflops(flop, ms["triton"]),
                             tflops(flop, ms["cublas"]), "TFLOP/s", baseline_name=f"cuBLAS {name}",
                             note=f"B row-major; tile {config_name(cfg)}")
            goal = {} if ieee else {"threshold": 0.6, "stretch": 0.9}
            lesson.benchmark(f"matmul-{label}-colmajor-b-vs-cublas-{baseline}-{size}",
                             tflops(flop, ms["triton, B column-major"]), tflops(flop, ms["cublas, B column-major"]),
                             "TFLOP/s", baseline_name=f"cuBLAS {name}, same B", note=f"B column-major; tile "
                             f"{config_name(cfg)}", **goal)
            for kind, key in (("", "triton"), ("", "cublas"), (", B col", "triton, B column-major"),
                              (", B col", "cublas, B column-major")):
                who = f"triton {label}" if key.startswith("triton") else f"cuBLAS {name}"
                results[(size, who + kind)] = tflops(flop, ms[key])
    return results


def figures(lesson: Lesson, soft: dict, mm: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.2))
    kinds = ["triton", "torch.softmax", "copy"]
    width = 0.25
    for i, kind in enumerate(kinds):
        ax.bar([j + (i - 1) * width for j in range(len(soft))], [soft[s][kind] for s in soft], width, label=kind)
    ax.set_xticks(range(len(soft)), [f"{s} fp32" for s in soft])
    ax.set_ylabel("GB/s (read + write)")
    ax.set_title("Row softmax bandwidth")
    ax.legend()
    lesson.figure(fig, "softmax-bandwidth", "Softmax GB/s: the Triton kernel (faster launch), torch.softmax, "
                                            "and a device-to-device copy of the same matrix")
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 3.2))
    series = ["triton ieee", "cuBLAS FP32", "triton tf32", "cuBLAS TF32", "triton tf32, B col", "cuBLAS TF32, B col"]
    width = 0.13
    for i, label in enumerate(series):
        ax.bar([j + (i - 2.5) * width for j in range(len(MATMUL_SIZES))],
               [mm[(size, label)] for size in MATMUL_SIZES], width, label=label)
    ax.set_xticks(range(len(MATMUL_SIZES)), [f"{s}^3" for s in MATMUL_SIZES])
    ax.set_ylabel("TFLOP/s")
    ax.set_title("FP32-input matmul")
    ax.legend(fontsize=8)
    lesson.figure(fig, "matmul-throughput", "TFLOP/s of the best Triton tile per precision against cuBLAS "
                                            "with TF32 off and on; B row-major, and for TF32 also column-major")
    plt.close(fig)


def main() -> int:
    lesson = Lesson("softmax-fp32-matmul")
    device = lesson.device()
    if device == "cuda":
        # input_precision="tf32" needs tensor cores that take TF32 (8.0+).
        lesson.require_capability(8, 0, "tf32 tensor cores")

    part1_softmax(lesson, device)
    part2_matmul(lesson, device)

    if lesson.interpret:
        print("\nNo timings under the interpreter: it runs each program one after another on numpy,\n"
              "so a time from it would describe Python, not a GPU.")
        return lesson.finish()

    soft = part3_softmax_speed(lesson)
    best = part3_matmul_sweep(lesson)
    mm = part3_matmul_vs_cublas(lesson, best)
    figures(lesson, soft, mm)
    return lesson.finish()


if __name__ == "__main__":
    sys.exit(main())
