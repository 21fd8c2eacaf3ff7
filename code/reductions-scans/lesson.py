"""Reductions and scans along rows: tl.sum, tl.max and tl.associative_scan.

A row reduction turns each row of a matrix into one number (its sum, its
maximum); a row scan turns each row into its running totals (a prefix sum).
Both combine the elements of a row with an associative operation, and both
have the same two problems in Triton:

* the last block of a row is ragged, so masked lanes must load a value that
  changes nothing: the operation's *neutral element*, 0 for a sum and -inf
  for a maximum (0 would win the maximum of a row of negative numbers);
* a row may be longer than one block, so the program walks it in a loop and
  carries what it has combined so far: an accumulator for a reduction, the
  running total for a scan.

`tl.sum`, `tl.max` and `tl.associative_scan` (with a combine function we
write) do the work inside one block; the compiler turns them into
per-thread loops, warp shuffles and one trip through shared memory. Each
kernel reads every element once and writes its result once, so all of them
are memory-bound: the yardstick is GB/s against torch and against a copy.

Run it:
    TRITON_INTERPRET=1 python reductions_scans.py   # any machine: checks on the CPU
    python reductions_scans.py                      # a CUDA GPU: checks, GB/s, figure
"""

import re
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

# lessonkit.py sits beside this file in a download, one folder up in the repository.
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]
from lessonkit import Lesson, bench_interleaved, bench_ms, gbps, scaled_rtol  # noqa: E402

# The spacing of float32 numbers at 1.0: the eps of scaled_rtol's length rule.
F32_EPS = 2.0**-23


# snippet: reduce-kernel
@triton.jit
def row_reduce_kernel(
    X, Out,              # x is M x N (rows `stride_x` apart); out has M values
    M, N, stride_x,
    IS_MAX: tl.constexpr,  # False: the row's sum; True: its maximum
    ROWS: tl.constexpr,    # rows per program
    BLOCK_N: tl.constexpr,  # columns per step of the loop (a power of two)
):
    pid = tl.program_id(0)
    rows = pid * ROWS + tl.arange(0, ROWS)
    row_ok = rows < M
    cols = tl.arange(0, BLOCK_N)
    # The neutral element: what a masked lane must hold so that it changes
    # nothing. 0 adds nothing to a sum; -inf never wins a maximum (a 0 would,
    # on a row of negative numbers).
    if IS_MAX:
        neutral: tl.constexpr = float("-inf")
    else:
        neutral: tl.constexpr = 0.0
    # A ROWS x BLOCK_N accumulator: the loop combines element-wise, lane by
    # lane, and only after the loop does one reduction cross the lanes.
    acc = tl.full((ROWS, BLOCK_N), neutral, tl.float32)
    start = 0
    while start < N:
        c = start + cols
        mask = row_ok[:, None] & (c < N)[None, :]
        x = tl.load(X + rows[:, None] * stride_x + c[None, :], mask=mask,
                    other=neutral)
        if IS_MAX:
            acc = tl.maximum(acc, x)
        else:
            acc += x
        start += BLOCK_N
    if IS_MAX:
        result = tl.max(acc, axis=1)
    else:
        result = tl.sum(acc, axis=1)
    tl.store(Out + rows, result, mask=row_ok)


# end snippet


# snippet: tile-config
def tile_config(N: int) -> tuple[int, int, int]:
    """ROWS, BLOCK_N and warps for rows of N float32 values."""
    # A row wider than 4096 values (16 KB) is walked in a loop, 4096 at a
    # time; narrower rows are packed several to a program, so that each
    # step of a program loads at least 2048 values (8 KB) and keeps enough
    # loads in flight. Eight warps give each thread 8 or 16 values: the
    # scan keeps every prefix live at once, and a tile twice this size
    # costs it registers, and so programs per SM.
    BLOCK_N = min(triton.next_power_of_2(N), 4096)
    ROWS = min(max(2048 // BLOCK_N, 1), 64)
    num_warps = 8 if ROWS * BLOCK_N >= 2048 else 4
    return ROWS, BLOCK_N, num_warps


# end snippet


# snippet: reduce-launch
def row_reduce(x: torch.Tensor, op: str = "sum", out=None, config=None):
    """Sum or maximum of every row of a 2-D float32 tensor."""
    assert x.ndim == 2 and x.stride(1) == 1 and x.dtype == torch.float32
    assert op in ("sum", "max")
    M, N = x.shape
    if out is None:
        out = torch.empty(M, device=x.device, dtype=torch.float32)
    ROWS, BLOCK_N, warps = config or tile_config(N)
    grid = (triton.cdiv(M, ROWS),)
    row_reduce_kernel[grid](x, out, M, N, x.stride(0), IS_MAX=op == "max",
                            ROWS=ROWS, BLOCK_N=BLOCK_N, num_warps=warps)
    return out


# end snippet


# snippet: combine
@triton.jit
def add(a, b):
    # A scan's combine function: takes two values (or two blocks of values)
    # and returns one. It must be associative, (a + b) + c == a + (b + c),
    # because the compiler is free to group the terms as it likes.
    return a + b


# end snippet


# snippet: scan-kernel
@triton.jit
def row_cumsum_kernel(
    X, Y,                # x and y are M x N, rows `stride_x`, `stride_y` apart
    M, N, stride_x, stride_y,
    ROWS: tl.constexpr, BLOCK_N: tl.constexpr,
    USE_CUMSUM: tl.constexpr,  # tl.cumsum instead of our own combine function
):
    pid = tl.program_id(0)
    rows = pid * ROWS + tl.arange(0, ROWS)
    row_ok = rows < M
    cols = tl.arange(0, BLOCK_N)
    # The running total of everything to the left of this block, per row.
    carry = tl.zeros((ROWS,), dtype=tl.float32)
    start = 0
    while start < N:
        c = start + cols
        mask = row_ok[:, None] & (c < N)[None, :]
        # Padding loads 0, the neutral element of +: it shifts no prefix sum
        # (and the masked store below never writes it anyway).
        x = tl.load(X + rows[:, None] * stride_x + c[None, :], mask=mask,
                    other=0.0)
        if USE_CUMSUM:
            s = tl.cumsum(x, axis=1)
        else:
            s = tl.associative_scan(x, 1, add)  # inclusive prefix sums
        tl.store(Y + rows[:, None] * stride_y + c[None, :],
                 s + carry[:, None], mask=mask)
        # The block's total moves the carry on to the next block.
        carry += tl.sum(x, axis=1)
        start += BLOCK_N


# end snippet


def row_cumsum(x: torch.Tensor, out=None, config=None, use_cumsum=False):
    """Inclusive prefix sums along every row of a 2-D float32 tensor."""
    assert x.ndim == 2 and x.stride(1) == 1 and x.dtype == torch.float32
    M, N = x.shape
    if out is None:
        out = torch.empty_like(x)
    ROWS, BLOCK_N, warps = config or tile_config(N)
    grid = (triton.cdiv(M, ROWS),)
    row_cumsum_kernel[grid](x, out, M, N, x.stride(0), out.stride(0), ROWS=ROWS,
                            BLOCK_N=BLOCK_N, USE_CUMSUM=use_cumsum,
                            num_warps=warps)
    return out


def make_rows(M: int, N: int, device: str, seed: int) -> torch.Tensor:
    """Random rows, uniform in [-0.5, 1): signed, but drifting upwards.

    Running totals start near zero and then grow like N/4, so the relative
    error of a prefix sum measures the kernel, not cancellation.
    """
    g = torch.Generator(device=device).manual_seed(seed)
    return torch.rand(M, N, generator=g, device=device) * 1.5 - 0.5


# snippet: checks
def reduction_results(x):
    """The row sum into poison, with the float64 sum and its bound; and
    whether the max of rows of negative numbers is exact."""
    M, N = x.shape
    want = x.double().sum(dim=1)
    out = torch.full((M,), float("nan"), device=x.device)  # poison
    row_reduce(x, "sum", out=out)
    # N rounded float32 additions: rtol grows like sqrt(N). atol = rtol:
    # the values are O(1), so a sum near zero is judged on that scale.
    rtol, why = scaled_rtol(1e-5, F32_EPS, N)
    # Rows of negative numbers: a 0 in the padding would be their max.
    neg = -(x.abs() + 0.25)
    top = torch.full((M,), float("nan"), device=x.device)
    row_reduce(neg, "max", out=top)
    # A maximum picks one of its inputs: no rounding, bit-exact.
    return (out, want, rtol, why), torch.equal(top, neg.amax(dim=1))


def scan_results(x, config=None):
    """The row cumsum into poison, with the float64 cumsum and its bound; and
    whether tl.cumsum gives the same bits."""
    N = x.shape[1]
    want = x.double().cumsum(dim=1)
    y = torch.full_like(x, float("nan"))  # poison
    row_cumsum(x, out=y, config=config)
    # The last prefix sum adds all N terms: the same length rule.
    rtol, why = scaled_rtol(1e-5, F32_EPS, N)
    # tl.cumsum is associative_scan with an add: the same bits.
    y2 = row_cumsum(x, config=config, use_cumsum=True)
    return (y, want, rtol, why), torch.equal(y, y2)


# end snippet


def check_reductions(lesson: Lesson, device: str) -> None:
    shapes = [(37, 1000), (5, 3000), (64, 256), (3, 1)]  # ragged, long, exact
    if device == "cuda":
        shapes += [(4099, 4096), (300, 70_000)]
    for seed, (M, N) in enumerate(shapes):
        (out, want, rtol, why), exact_max = reduction_results(
            make_rows(M, N, device, seed))
        lesson.close(f"sum-{M}x{N}", out, want, rtol, rtol, why)
        lesson.check(f"max-negative-rows-{M}x{N}", exact_max, "bit-exact vs torch.amax")


def check_scans(lesson: Lesson, device: str) -> None:
    # BLOCK_N is at most 4096 (tile_config): N = 5000 and 70 000 take 2
    # and 18 steps of the loop, so the carry has work to do; the small
    # tiles of the last shape make 1000 columns take 8 steps of 128.
    # Small under the interpreter: it scans element by element in Python.
    shapes = [(9, 1000, None), (2, 5000, None), (16, 256, None),
              (13, 1000, (2, 128, 4))]
    if device == "cuda":
        shapes += [(4099, 4096, None), (300, 70_000, None)]
    for seed, (M, N, config) in enumerate(shapes):
        x = make_rows(M, N, device, 100 + seed)
        (y, want, rtol, why), same_bits = scan_results(x, config)
        tag = f"{M}x{N}" + ("" if config is None else f"-block{config[1]}")
        lesson.close(f"cumsum-{tag}", y, want, rtol, rtol, why)
        lesson.check(f"tl-cumsum-same-bits-{tag}", same_bits,
                     "tl.cumsum == associative_scan(x, 1, add), bit for bit")


# snippet: solution-zero-pad
@triton.jit
def row_max_zero_pad_kernel(X, Out, N, stride_x, BLOCK_N: tl.constexpr):
    # The exercise's broken kernel: one row per program, one block per
    # row, and the padding loaded as 0.0 instead of -inf.
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    x = tl.load(X + row * stride_x + cols, mask=cols < N, other=0.0)
    tl.store(Out + row, tl.max(x, axis=0))


# end snippet


# snippet: solution-cummax
@triton.jit
def maximum(a, b):
    return tl.maximum(a, b)


@triton.jit
def row_cummax_kernel(X, Y, M, N, stride, ROWS: tl.constexpr,
                      BLOCK_N: tl.constexpr):
    # The running maximum: the same kernel with another combine function,
    # another padding and another carry. The carry starts at -inf, the
    # neutral element of max, just as the sum's starts at 0.
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_ok = rows < M
    cols = tl.arange(0, BLOCK_N)
    carry = tl.full((ROWS,), float("-inf"), tl.float32)
    start = 0
    while start < N:
        c = start + cols
        mask = row_ok[:, None] & (c < N)[None, :]
        offs = rows[:, None] * stride + c[None, :]
        x = tl.load(X + offs, mask=mask, other=float("-inf"))
        s = tl.associative_scan(x, 1, maximum)
        tl.store(Y + offs, tl.maximum(s, carry[:, None]), mask=mask)
        carry = tl.maximum(carry, tl.max(x, axis=1))
        start += BLOCK_N


# end snippet


def try_this(lesson: Lesson, device: str) -> None:
    # Exercise 1: 0.0 as the padding of a maximum, on rows of negative
    # numbers: every row whose width is not a power of two reads as 0.
    M, N = 6, 1000
    neg = -(make_rows(M, N, device, 7).abs() + 0.25)
    out = torch.full((M,), float("nan"), device=device)
    row_max_zero_pad_kernel[(M,)](neg, out, N, neg.stride(0), BLOCK_N=1024)
    lesson.check("exercise-zero-pad",
                 bool((out == 0).all()) and bool((neg.amax(dim=1) < 0).all()),
                 "padding 0.0: every max of a negative row of 1000 reads 0")

    # Exercise 2: a running maximum over rows longer than one block.
    M, N = 9, 700
    x = torch.randn(M, N, generator=torch.Generator().manual_seed(8)).to(device)
    y = torch.full_like(x, float("nan"))
    row_cummax_kernel[(triton.cdiv(M, 4),)](x, y, M, N, x.stride(0), ROWS=4,
                                           BLOCK_N=256)
    lesson.check("exercise-cummax",
                 torch.equal(y, torch.cummax(x, dim=1).values),
                 "bit-exact vs torch.cummax; 700 columns in blocks of 256")


def ptx_facts(compiled) -> list:
    """Counts in the PTX of one compiled kernel (instructions in the code,
    not executions): 16-byte global loads and stores, warp shuffles, block
    barriers, and the shared memory the kernel asks for."""
    ptx = compiled.asm["ptx"]
    return [
        len(re.findall(r"ld\.global(?:\.(?!v\d)[\w:]+)*\.v4\.b32", ptx)),
        len(re.findall(r"st\.global(?:\.(?!v\d)[\w:]+)*\.v4\.b32", ptx)),
        len(re.findall(r"shfl\.sync", ptx)),
        len(re.findall(r"bar\.sync", ptx)),
        compiled.metadata.shared,
    ]


def show_compiled_code(lesson: Lesson, device: str) -> None:
    N = 4096  # the benchmark's rows; 8 of them are enough to compile
    x = make_rows(8, N, device, 1)
    ROWS, BLOCK_N, warps = tile_config(N)
    rows = []
    for label, op in (("row sum", "sum"), ("row max", "max")):
        k = row_reduce_kernel[(1,)](x, torch.empty(8, device=device), 8, N, N,
                                    IS_MAX=op == "max", ROWS=ROWS,
                                    BLOCK_N=BLOCK_N, num_warps=warps)
        rows.append([label, *ptx_facts(k)])
    k = row_cumsum_kernel[(1,)](x, torch.empty_like(x), 8, N, N, N, ROWS=ROWS,
                                BLOCK_N=BLOCK_N, USE_CUMSUM=False,
                                num_warps=warps)
    rows.append(["row cumsum", *ptx_facts(k)])
    lesson.table(
        "ptx",
        ["kernel", "16-byte ld.global", "16-byte st.global", "shfl.sync",
         "bar.sync", "shared bytes"],
        rows,
        f"What the compiler made of each kernel for rows of {N} float32 values: "
        f"tile {ROWS} x {BLOCK_N}, {warps} warps; static counts in the PTX",
    )


def benchmark(lesson: Lesson, device: str) -> None:
    M, N = lesson.size(gpu=(32768, 4096), smoke=(8, 1000))
    # snippet: benchmark
    # 32768 rows of 4096 float32 values: 512 MiB, ten times the H200's
    # L2, and do_bench flushes the L2 between calls, so every call streams
    # from DRAM. Bytes that must move: the cumsum reads x once and writes
    # y once (8 bytes per element); the sum reads x once and writes one
    # float per row. A device-to-device copy of x moves the cumsum's bytes.
    x = make_rows(M, N, device, 2)
    y, dst = torch.empty_like(x), torch.empty_like(x)
    contenders = {
        "cumsum": lambda: row_cumsum(x, out=y),
        "torch_cumsum": lambda: torch.cumsum(x, dim=1),
        "sum": lambda: row_reduce(x, "sum"),
        "torch_sum": lambda: torch.sum(x, dim=1),
        "copy": lambda: dst.copy_(x),
    }
    bytes_scan = 2 * M * N * 4
    bytes_sum = M * N * 4 + M * 4
    # end snippet
    # snippet: measure
    # Predictions: both kernels are memory-bound, so each moves its bytes at
    # the rate its yardstick moves the same bytes: a copy for the cumsum,
    # torch.sum's one read of the matrix for the sum.
    shape = f"{M}x{N}-fp32"
    lesson.predict(f"cumsum-vs-copy-{shape}", 1.0,
                   "memory-bound, moving a copy's bytes at a copy's rate", 0.10)
    lesson.predict(f"sum-vs-torch-{shape}", 1.0,
                   "memory-bound like torch.sum: one read of the matrix at the "
                   "same rate", 0.10)
    # Per call: in a CUDA graph, a 512 MiB copy runs on the copy engine.
    ms = bench_interleaved(contenders, method="events")
    lesson.benchmark(f"cumsum-vs-torch-{shape}", f"row cumsum vs torch, {M} x {N}",
                     ms, "cumsum", "torch_cumsum", unit="GB/s", work=bytes_scan,
                     baseline_name="torch.cumsum(x, dim=1)", threshold=1.0,
                     stretch=1.5)
    lesson.benchmark(f"cumsum-vs-copy-{shape}", f"row cumsum vs a copy, {M} x {N}",
                     ms, "cumsum", "copy", unit="GB/s", work=bytes_scan,
                     baseline_name="device-to-device copy of x",
                     note="the ceiling: a copy moves the same bytes and does "
                     "no arithmetic")
    lesson.benchmark(f"sum-vs-torch-{shape}", f"row sum vs torch, {M} x {N}",
                     ms, "sum", "torch_sum", unit="GB/s", work=bytes_sum,
                     baseline_name="torch.sum(x, dim=1)", threshold=0.8,
                     stretch=1.0)
    # end snippet


def race_tiles(lesson: Lesson, device: str) -> None:
    # snippet: race
    # The tile is the one free choice. Race a few at the benchmark's shape:
    # rows per program x columns per step, and warps.
    M, N = lesson.size(gpu=(32768, 4096), smoke=(1, 4096))
    x = make_rows(M, N, device, 3)
    y = torch.empty_like(x)
    configs = [(1, 1024, 4), (1, 2048, 8), (1, 4096, 8), (1, 4096, 16),
               (4, 1024, 8), tile_config(N)]
    configs = list(dict.fromkeys(configs))  # the rule's pick is one of them
    ms = bench_interleaved(
        {c: (lambda c=c: row_cumsum(x, out=y, config=c)) for c in configs},
        rounds=5, rep_ms=10, warm_s=0.2)
    # end snippet
    lesson.table(
        "scan-tiles",
        ["rows/program", "BLOCK_N", "warps", "steps per row", "cumsum GB/s",
         "the rule's pick"],
        [[*c, triton.cdiv(N, c[1]), gbps(2 * M * N * 4, ms.median(c)),
          "yes" if c == tile_config(N) else ""] for c in configs],
        f"Row cumsum at {M} x {N} float32 with different tiles (median of 5 "
        "interleaved rounds)",
    )


def measure_width(x: torch.Tensor) -> list:
    """GB/s of our cumsum and torch's on one 2-D x, taking turns."""
    y = torch.empty_like(x)
    ms = bench_interleaved({"triton": lambda: row_cumsum(x, out=y),
                            "torch": lambda: torch.cumsum(x, dim=1)},
                           rounds=5, rep_ms=10, warm_s=0.1)
    nbytes = 2 * x.numel() * 4  # read x, write y
    return [x.shape[1], x.shape[0], gbps(nbytes, ms.median("triton")),
            gbps(nbytes, ms.median("torch"))]


def sweep_and_plot(lesson: Lesson, device: str) -> None:
    # snippet: sweep
    # Same 2^27 elements (512 MiB) at every width: from many short rows,
    # where several rows share a program, to a few long ones, where each
    # program walks its row in 16 KB steps.
    widths = lesson.size(gpu=[256, 1024, 4096, 16384, 65536], smoke=[256, 2048])
    x0 = make_rows(1, lesson.size(gpu=1 << 27, smoke=1 << 11), device, 4)
    dst = torch.empty_like(x0)
    copy_gbps = gbps(2 * x0.numel() * 4, bench_ms(lambda: dst.copy_(x0)))
    rows = [measure_width(x0.view(-1, N)) for N in widths]
    # end snippet
    lesson.table("widths", ["N", "rows", "Triton GB/s", "torch GB/s"], rows,
                 "Row cumsum over 2^27 float32 values at five row widths "
                 f"(copy of the same bytes: {copy_gbps:.0f} GB/s)")

    def draw(fig):
        ax = fig.subplots()
        ns = [r[0] for r in rows]
        ax.plot(ns, [r[2] for r in rows], "o-", label="Triton row cumsum")
        ax.plot(ns, [r[3] for r in rows], "s-", label="torch.cumsum(x, dim=1)")
        ax.axhline(copy_gbps, color="gray", ls="--", lw=1,
                   label="copy of the same bytes")
        ax.set_xscale("log", base=2)
        ax.set_xticks(ns, [str(n) for n in ns])
        ax.set_xlabel(f"row width N (float32; rows x N = {x0.numel():,})")
        ax.set_ylabel("GB/s (read x + write y)")
        ax.set_ylim(bottom=0)
        fig.legend(loc="outside lower center", ncols=2)

    lesson.plot("cumsum-by-width",
                "Row cumsum bandwidth by row width, Triton vs torch, same bytes",
                draw, size=(7.0, 5.0))


def main() -> int:
    lesson = Lesson("reductions-scans")
    device = lesson.device()
    if lesson.step("compiled-code", needs_gpu="the interpreter compiles no PTX",
                   smoke=False):
        show_compiled_code(lesson, device)
    with lesson.step("correctness"):
        check_reductions(lesson, device)
        check_scans(lesson, device)
    if lesson.step("benchmark", needs_gpu="timings need a GPU"):
        benchmark(lesson, device)
    if lesson.step("race", needs_gpu="the tiles race on GPU time"):
        race_tiles(lesson, device)
    if lesson.step("sweep", needs_gpu="timings need a GPU"):
        sweep_and_plot(lesson, device)
    with lesson.step("exercises"):
        try_this(lesson, device)
    return lesson.finish()


if __name__ == "__main__":
    sys.exit(main())
