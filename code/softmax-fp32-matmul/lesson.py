"""Softmax and an FP32 matmul, as the course records them: the checks and benchmarks.

The kernels and their launchers are in softmax_fp32_matmul.py, which runs
alone. This file checks them the way the course checks every lesson (outputs
filled with NaN, float64 references, tolerances that grow with the length of
each sum, rows that overflow exp without the max shift, rows of negative
numbers with masked lanes), sweeps tile shapes, and times them against
torch.softmax, a copy and cuBLAS, with Liger-Kernel and torch.compile where
installed, through the course's kit (lessonkit.py), which keeps the record.

Run it:
    TRITON_INTERPRET=1 python lesson.py   # any machine: checks on the CPU
    python lesson.py                      # a CUDA GPU: checks and timings
"""

import contextlib
import re
import statistics
import sys
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import torch
import triton
from triton.runtime.errors import OutOfResources

# lessonkit.py sits beside this file in a download, one folder up in the repository.
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]
from softmax_fp32_matmul import (  # noqa: E402
    CONFIGS,
    PERSISTENT_TF32,
    TF32_WIDE,
    matmul,
    matmul_persistent_tf32,
    persistent_programs,
    softmax,
    softmax_warps,
)

from lessonkit import (  # noqa: E402
    Lesson,
    Timings,
    bench_interleaved,
    median_interval,
    scaled_rtol,
)

# Part 1's correctness shape: 512 rows of 1024 values.
SOFTMAX_ROWS, SOFTMAX_COLS = 512, 1024
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

# Part 3's sizes.
SWEEP_SIZE = 2048
MATMUL_SIZES = (2048, 4096)
SOFTMAX_SHAPES = ((32768, 1024), (4096, 16384))
SMOKE_SHAPES = ((4, 1024), (2, 4096))  # a smoke run's, on the CPU (lessonkit.py)
LIGER = "liger-kernel"  # the optional baseline (lesson.toml [requires.optional])


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
    """An output full of NaN: an element the kernel never writes cannot pass."""
    return torch.full(shape, float("nan"), device=device)


def softmax64(x: torch.Tensor) -> torch.Tensor:
    """The reference: the kernel's three steps, in float64."""
    x64 = x.double()
    e = torch.exp(x64 - x64.max(dim=1, keepdim=True).values)
    return e / e.sum(dim=1, keepdim=True)


def product64(lesson: Lesson, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """A @ B in float64: on the GPU, or on the CPU under compute-sanitizer, so
    that no library kernel (cuBLAS's float64 product) runs under the tool."""
    if lesson.sanitize:
        a, b = a.cpu(), b.cpu()
    return a.double() @ b.double()


def max_rel_error(got: torch.Tensor, want: torch.Tensor) -> float:
    """max |got - want| / max |want|, the figure compared between precisions."""
    got64 = got.detach().to(want.device, torch.float64)
    return float((got64 - want).abs().max()) / float(want.abs().max())


def multiply_instructions(compiled) -> list[int]:
    """How often each kind of multiply appears in the kernel's PTX."""
    ptx = compiled.asm["ptx"]
    return [
        # Hopper's warpgroup tensor-core MMA
        len(re.findall(r"wgmma\.mma_async[\w.]*\.tf32", ptx)),
        # the warp-level tensor-core MMA (Ampere style)
        len(re.findall(r"mma\.sync[\w.]*\.tf32", ptx)),
        # a plain FP32 fused multiply-add
        len(re.findall(r"fma\.rn\.f32", ptx)),
    ]


def config_name(cfg) -> str:
    return f"{cfg[0]}x{cfg[1]}x{cfg[2]}-g{cfg[3]}-w{cfg[4]}-s{cfg[5]}"


# == Part 1: is the softmax right? ============================================

def check_softmax(lesson: Lesson, device: str) -> None:
    print(f"\nPart 1: row softmax, {SOFTMAX_ROWS} rows of {SOFTMAX_COLS}")
    torch.manual_seed(0)
    # Inputs are made on the host and copied, so the interpreter and the GPU
    # see the same bits. Row i is shifted up by 0.2 * i (the last row by
    # about 102): exp(102) overflows float32, whose largest value is about
    # exp(88.7), so a kernel that skipped the max subtraction would produce
    # inf / inf = NaN there instead of quietly agreeing.
    h_x = torch.randn(SOFTMAX_ROWS, SOFTMAX_COLS)
    h_x += 0.2 * torch.arange(SOFTMAX_ROWS, dtype=torch.float32)[:, None]
    x = h_x.to(device)
    want = softmax64(h_x)
    # Each output is divided by a sum of n_cols exponentials.
    rtol, atol, why = tolerance(F32_RTOL, F32_EPS, SOFTMAX_COLS, want)
    got = softmax(x, out=poisoned(x.shape, device))
    lesson.close("softmax-512x1024-program-per-row", got, want, rtol, atol, why)
    # The same kernel with 16 programs, each looping over 32 rows.
    got = softmax(x, 16, out=poisoned(x.shape, device))
    lesson.close("softmax-512x1024-strided-rows", got, want, rtol, atol,
                 f"16 programs; {why}")

    # A row of only negative numbers, in a width that leaves masked lanes.
    torch.manual_seed(1)
    h_neg = -1.0 - 20.0 * torch.rand(RAGGED_ROWS, RAGGED_COLS)
    want_neg = softmax64(h_neg)
    rtol, atol, why = tolerance(F32_RTOL, F32_EPS, RAGGED_COLS, want_neg)
    got_neg = softmax(h_neg.to(device), out=poisoned(h_neg.shape, device))
    lesson.close("softmax-64x1000-all-negative", got_neg, want_neg, rtol, atol,
                 f"24 masked lanes per row; {why}")

    # What a 0.0 pad would have computed, emulated in float64: the padded
    # lanes win the max on these rows and add exp(0 - 0) = 1 each to the sum.
    pad = triton.next_power_of_2(RAGGED_COLS) - RAGGED_COLS
    padded = torch.nn.functional.pad(h_neg.double(), (0, pad), value=0.0)
    e = torch.exp(padded - padded.max(dim=1, keepdim=True).values)
    zero_padded = (e / e.sum(dim=1, keepdim=True))[:, :RAGGED_COLS]
    err = max_rel_error(zero_padded, want_neg)
    lesson.check("zero-padding-would-be-wrong", err > 100 * rtol,
                 f"a 0.0 pad gives max error / max|want| = {err:.3g}, "
                 f"against a tolerance of {rtol:.3g}")
    check_liger(lesson, device, h_x, h_neg)


def check_liger(lesson: Lesson, device: str, h_x, h_neg) -> None:
    """Liger-Kernel's softmax on the same rows, to the same bound."""
    sm = lesson.optional(LIGER, "liger_kernel.ops.softmax")
    if sm is None:
        return
    for name, h in (("512x1024", h_x), ("64x1000-all-negative", h_neg)):
        want = softmax64(h)
        rtol, atol, why = tolerance(F32_RTOL, F32_EPS, h.shape[1], want)
        got = sm.LigerSoftmaxFunction.apply(h.to(device))
        lesson.close(f"liger-softmax-{name}", got, want, rtol, atol, why)


# == Part 2: is the matmul right, in both precisions? =========================

def check_matmul(lesson: Lesson, device: str) -> None:
    print(f"\nPart 2: matmul {MM_M} x {MM_K} @ {MM_K} x {MM_N}, "
          "FP32 in, FP32 accumulate, FP32 out")
    torch.manual_seed(2)
    h_a = torch.randn(MM_M, MM_K)
    h_b = torch.randn(MM_K, MM_N)
    a, b = h_a.to(device), h_b.to(device)
    want = h_a.double() @ h_b.double()
    cfg = CONFIGS[0]
    print(f"  tile {config_name(cfg)}")

    got = {}
    for label, ieee, rtol_table, eps in (("ieee", True, F32_RTOL, F32_EPS),
                                         ("tf32", False, TF32_RTOL, TF32_EPS)):
        out = poisoned((MM_M, MM_N), device)
        got[label] = matmul(a, b, cfg, ieee, out=out).cpu()
        rtol, atol, why = tolerance(rtol_table, eps, MM_K, want)
        lesson.close(f"matmul-{label}-256x256x1024", got[label], want, rtol, atol,
                     why)

    # snippet: precision-gate
    # TF32 keeps 10 explicit mantissa bits of each input instead of 23, so on
    # a GPU its error must be far larger than IEEE's: we ask for at least 10
    # times, where the spacing of the two formats alone differs by 2**13.
    err_ieee = max_rel_error(got["ieee"], want)
    err_tf32 = max_rel_error(got["tf32"], want)
    tf32_less_accurate = err_tf32 >= 10 * err_ieee
    # end snippet
    summary = f"max error / max|want|: ieee {err_ieee:.3g}, tf32 {err_tf32:.3g}"
    if lesson.interpret:
        # The interpreter runs tl.dot on numpy; whether it honours
        # input_precision is something this run reports, not assumes.
        same = torch.equal(got["ieee"], got["tf32"])
        verdict = ("identical outputs: this interpreter ignored input_precision"
                   if same else
                   "different outputs: this interpreter shortened the tf32 inputs")
        lesson.skip("tf32-less-accurate-than-ieee",
                    f"not gated under the interpreter; {summary}; {verdict}")
    else:
        lesson.check("tf32-less-accurate-than-ieee", tf32_less_accurate, summary)


def check_persistent(lesson: Lesson, device: str) -> None:
    # The persistent TMA kernel of Part 3c, on Part 2's product with B stored
    # column-major (a small tile under the interpreter, the benchmark's tile on
    # a GPU).
    torch.manual_seed(2)
    h_a = torch.randn(MM_M, MM_K)
    h_b = torch.randn(MM_K, MM_N)
    a, b = h_a.to(device), h_b.to(device)
    want = h_a.double() @ h_b.double()
    if lesson.interpret or torch.cuda.get_device_capability() >= (9, 0):
        b_col = b.t().contiguous().t()
        cfg = (64, 64, 32, 4, 4, 2) if lesson.interpret else PERSISTENT_TF32
        out = poisoned((MM_M, MM_N), device)
        got_p = matmul_persistent_tf32(a, b_col, cfg, out=out)
        rtol, atol, why = tolerance(TF32_RTOL, TF32_EPS, MM_K, want)
        lesson.close("matmul-tf32-persistent-tma-256x256x1024", got_p, want, rtol, atol,
                     f"B column-major, tile {config_name(cfg)}; {why}")
    else:
        lesson.skip("matmul-tf32-persistent-tma-256x256x1024",
                    "TMA descriptors need compute capability 9.0")


# == Part 3a: softmax bandwidth ===============================================

# snippet: softmax-benchmark
def softmax_contenders(x: torch.Tensor, programs: int) -> dict:
    """Both launches, torch.softmax and a copy, all on the same input. A
    softmax reads the matrix once and writes it once: 2 * 4 bytes per element,
    exactly the traffic of a copy, so the copy is the ceiling."""
    dst = torch.empty_like(x)
    return {
        "triton, one program per row": lambda: softmax(x),
        f"triton, {programs} programs, strided rows": lambda: softmax(x, programs),
        "torch.softmax": lambda: torch.softmax(x, dim=-1),
        "copy": lambda: dst.copy_(x),
    }
# end snippet


def time_softmax(x: torch.Tensor, programs: int) -> Timings:
    """The four take turns in each of ten rounds, so clock drift hits them alike."""
    return bench_interleaved(softmax_contenders(x, programs), rounds=10)


def benchmark_softmax(lesson: Lesson, device: str) -> None:
    print("\nPart 3a: softmax bandwidth")
    rows, rates = [], {}
    for n_rows, n_cols in lesson.size(gpu=SOFTMAX_SHAPES, smoke=SMOKE_SHAPES):
        shape = f"{n_rows}x{n_cols}"
        torch.manual_seed(3)
        x = torch.randn(n_rows, n_cols, device=device)
        want = softmax64(x)
        rtol, atol, why = tolerance(F32_RTOL, F32_EPS, n_cols, want)
        programs = persistent_programs(n_cols)
        # What is timed must be right: both launches, on the timed input.
        got = softmax(x, out=poisoned(x.shape, device))
        lesson.close(f"softmax-{shape}-per-row", got, want, rtol, atol, why)
        got = softmax(x, programs, out=poisoned(x.shape, device))
        lesson.close(f"softmax-{shape}-strided", got, want, rtol, atol,
                     f"{programs} programs; {why}")
        del want, got

        # The prediction: a softmax moves exactly a copy's bytes and is
        # memory-bound, so it should run at the copy's GB/s.
        lesson.predict(f"softmax-vs-copy-{shape}", 1.0,
                       "memory-bound, moving a copy's bytes (read once, write once) "
                       "at a copy's rate", 0.10)
        ms = time_softmax(x, programs)
        # Softmax reads the matrix once and writes it once: 2 * 4 bytes per
        # element, exactly the traffic of a copy, so the copy is the ceiling.
        nbytes = 2 * x.numel() * x.element_size()
        # The faster of the two launches is the kernel's result, as
        # autotuning would pick it.
        launches = [name for name in ms if name.startswith("triton")]
        best = min(launches, key=ms.median)
        lesson.benchmark(
            f"softmax-vs-torch-{shape}", f"softmax vs torch.softmax, {shape} fp32",
            ms, best, "torch.softmax", unit="GB/s", work=nbytes,
            baseline_name="torch.softmax", threshold=0.8, stretch=1.0, note=best)
        lesson.benchmark(
            f"softmax-vs-copy-{shape}", f"softmax vs a copy, {shape} fp32",
            ms, best, "copy", unit="GB/s", work=nbytes,
            baseline_name="device-to-device copy", threshold=0.8, gate=False,
            note=best)
        rates[shape] = {}
        for name in ms:
            t = ms.median(name)
            warps = softmax_warps(n_cols) if name.startswith("triton") else ""
            rows.append([shape, name, warps, t * 1e3, nbytes / t * 1e-6])
            kind = "per row" if "per row" in name else name.split(",")[-1].strip()
            rates[shape][kind] = nbytes / t * 1e-6
    lesson.table("softmax-launches", ["shape", "kernel", "num_warps", "us", "GB/s"],
                 rows, "Row softmax in fp32, medians of the interleaved rounds; "
                 "GB/s counts one read and one write of the matrix")
    plot_softmax(lesson, rates)


def benchmark_softmax_libraries(lesson: Lesson, device: str) -> None:
    """Part 3a, continued: the same inputs against Liger-Kernel and torch.compile."""
    for n_rows, n_cols in lesson.size(gpu=SOFTMAX_SHAPES, smoke=SMOKE_SHAPES):
        torch.manual_seed(3)  # the inputs benchmark_softmax timed
        x = torch.randn(n_rows, n_cols, device=device)
        compare_with_libraries(lesson, x, f"{n_rows}x{n_cols}")


def torch_softmax(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=-1)


# snippet: liger-benchmark
def library_contenders(lesson: Lesson, x: torch.Tensor, shape: str):
    """Our per-row launch, Liger-Kernel's softmax and torch.compile's, if here;
    and torch.compile's compile time in seconds."""
    fns = {"ours": lambda: softmax(x)}
    sm = lesson.optional(LIGER, "liger_kernel.ops.softmax")
    if sm is not None:
        # Also one program per row, with the same number of warps as ours.
        fns["Liger"] = lambda: sm.LigerSoftmaxFunction.apply(x)
    compile_s = 0.0
    try:
        t0 = time.perf_counter()
        compiled = torch.compile(torch_softmax, dynamic=False)
        compiled(x)
        torch.cuda.synchronize()
        compile_s = time.perf_counter() - t0
        fns["torch.compile"] = lambda: compiled(x)
    except Exception as e:  # noqa: BLE001 - any failure becomes a skip
        first = str(e).splitlines()[0][:200] if str(e) else ""
        lesson.skip(f"torch-compile-{shape}",
                    f"torch.compile failed: {type(e).__name__}: {first}")
    return fns, compile_s
# end snippet


def compare_with_libraries(lesson: Lesson, x: torch.Tensor, shape: str) -> None:
    """In rounds of their own: nothing a library does (a graph capture that
    fails, say) can change how the comparisons with torch above are timed."""
    fns, compile_s = library_contenders(lesson, x, shape)
    if len(fns) == 1:
        return
    want = softmax64(x)
    rtol, atol, why = tolerance(F32_RTOL, F32_EPS, x.shape[1], want)
    for name in fns:  # what is timed must be right
        if name != "ours":
            lesson.close(f"softmax-{shape}-{name.replace('.', '-')}", fns[name](),
                         want, rtol, atol, why)
    del want
    ms = bench_interleaved(fns, rounds=10)
    nbytes = 2 * x.numel() * x.element_size()
    if "Liger" in ms:
        lesson.benchmark(
            f"softmax-vs-liger-{shape}", f"softmax vs Liger-Kernel, {shape} fp32",
            ms, "ours", "Liger", unit="GB/s", work=nbytes,
            baseline_name="Liger-Kernel LigerSoftmaxFunction", threshold=0.95,
            library="Liger-Kernel",
            note="both one program per row, same warps; Liger adds cache hints")
    if "torch.compile" in ms:
        lesson.benchmark(
            f"softmax-vs-compile-{shape}", f"softmax vs torch.compile, {shape} fp32",
            ms, "ours", "torch.compile", unit="GB/s", work=nbytes,
            baseline_name="torch.compile(torch.softmax, dynamic=False)", gate=False,
            library="torch.compile",
            note=f"ours one program per row; report only; first call (compile) "
                 f"took {compile_s:.1f} s")


def plot_softmax(lesson: Lesson, rates: dict) -> None:
    shapes = list(rates)
    kinds = list(rates[shapes[0]])
    labels = {"per row": "Triton, one program per row",
              "strided rows": "Triton, strided rows",
              "torch.softmax": "torch.softmax", "copy": "copy (the ceiling)"}

    def draw(fig):
        ax = fig.subplots()
        width = 0.8 / len(kinds)
        for i, kind in enumerate(kinds):
            xs = [j + (i - (len(kinds) - 1) / 2) * width for j in range(len(shapes))]
            ax.bar(xs, [rates[s][kind] for s in shapes], width,
                   label=labels.get(kind, kind))
        ax.set_xticks(range(len(shapes)),
                      [s.replace("x", " rows\nx ") + " columns" for s in shapes])
        ax.set_ylabel("GB/s (one read + one write)")
        ax.set_title("Row softmax bandwidth, fp32")
        fig.legend(loc="outside lower center", ncols=2)

    lesson.plot("softmax-bandwidth",
                "Softmax GB/s, medians of the interleaved rounds: both launches of "
                "the Triton kernel, torch.softmax, and a device-to-device copy of "
                "the same matrix", draw, size=(7.0, 5.0))


# == Part 3b: a sweep of tile shapes ==========================================

@dataclass
class TileSweep:
    """What the sweep timed and counted; its table waits for the race below."""
    size: int
    keys: list  # (precision, layout, config), in the table's order
    ms: Timings
    facts: dict  # key -> the multiply instructions in its PTX
    skipped: dict  # key -> why it did not run


# Each precision's and layout's best tile, as the race against cuBLAS names it
# (contender, benchmark): at the sweep's size its row comes from those rounds.
BENCHMARKED = {
    ("ieee", "row"): ("triton ieee", "matmul-ieee-vs-cublas-fp32"),
    ("tf32", "row"): ("triton tf32", "matmul-tf32-vs-cublas-tf32"),
    ("tf32", "column"): ("triton tf32, B col", "matmul-tf32-colmajor-b-vs-cublas-tf32"),
}


def sweep_tiles(lesson: Lesson, device: str) -> tuple[dict, TileSweep]:
    size = lesson.size(gpu=SWEEP_SIZE, smoke=64)
    print(f"\nPart 3b: matmul tile sweep at {size}³, FP32 inputs")
    torch.manual_seed(4)
    a = torch.randn(size, size, device=device)
    b = torch.randn(size, size, device=device)
    b_col = b.t().contiguous().t()  # the same B, column-major (see Part 3c)
    want = product64(lesson, a, b)
    fns, facts, skipped = {}, {}, {}
    # snippet: sweep
    # ieee and tf32 with B row-major (so the two differ in one string only),
    # and tf32 again with B column-major, the layout its tensor cores read,
    # where the wider tiles are worth trying too.
    runs = [("ieee", True, "row", b, CONFIGS, F32_RTOL, F32_EPS),
            ("tf32", False, "row", b, CONFIGS, TF32_RTOL, TF32_EPS),
            ("tf32", False, "column", b_col, CONFIGS + TF32_WIDE, TF32_RTOL,
             TF32_EPS)]
    for label, ieee, layout, b_in, configs, rtol_table, eps in runs:
        rtol, atol, why = tolerance(rtol_table, eps, size, want)
        for cfg in configs:
            key = (label, layout, cfg)
            try:
                out, compiled = matmul(a, b_in, cfg, ieee, with_kernel=True,
                                       out=poisoned((size, size), device))
            except OutOfResources as exc:  # too much shared memory for this tile
                skipped[key] = f"skipped: {exc}"
                continue
            # Every timed tile is checked too: a fast wrong answer is not a result.
            lesson.close(f"sweep-{label}-b-{layout}-{config_name(cfg)}", out, want,
                         rtol, atol, why)
            facts[key] = (["", "", ""] if lesson.not_on_interpreter(
                "PTX counts", "the interpreter compiles no PTX")
                else multiply_instructions(compiled))
            fns[key] = partial(matmul, a, b_in, cfg, ieee)
    # A table only ranks the tiles: three interleaved rounds are enough.
    ms = bench_interleaved(fns, rounds=3)
    # end snippet
    best = {}  # the fastest tile of each precision and B layout
    for label, layout, cfg in sorted(fns, key=ms.median):
        best.setdefault((label, layout), cfg)
    keys = [(label, layout, cfg) for label, _, layout, _, configs, _, _ in runs
            for cfg in configs]
    return best, TileSweep(size, keys, ms, facts, skipped)


def sweep_table(lesson: Lesson, sweep: TileSweep, best: dict, race: Timings) -> None:
    """The sweep's table, each row a median of its rounds with its interval;
    the best tiles' rows from the benchmarks' own rounds (`race`), so the
    table never contradicts them."""
    size = sweep.size
    flop = 2.0 * size**3
    rows = []
    for label, layout, cfg in sweep.keys:
        key = (label, layout, cfg)
        if key in sweep.skipped:
            rows.append([label, layout, *cfg, *[""] * 8, sweep.skipped[key]])
            continue
        times, benchmark = sweep.ms[key], ""
        if best[label, layout] == cfg:
            contender, name = BENCHMARKED[label, layout]
            times, benchmark = race[contender], f"{name}-{size}"
        t = statistics.median(times)
        _, low, high = median_interval([flop / r * 1e-9 for r in times])
        rows.append([label, layout, *cfg, t * 1e3, flop / t * 1e-9,
                     f"[{low:.4g}, {high:.4g}]", len(times), *sweep.facts[key],
                     benchmark, ""])
    lesson.table(
        f"matmul-sweep-{size}",
        ["precision", "B layout", "BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M",
         "num_warps", "num_stages", "us", "TFLOP/s", "interval", "rounds",
         "wgmma tf32", "mma.sync tf32", "fma.rn.f32", "benchmark", "note"], rows,
        f"FP32-input matmul at {size}³: every tile shape for each input_precision "
        "and B layout, medians of 3 interleaved rounds with their range; the best "
        "tile of each, the median of its benchmark's rounds against cuBLAS with "
        "their 95 % interval (the benchmark column names it); the multiply "
        "instructions counted in its PTX")


# == Part 3c: against cuBLAS ==================================================

# snippet: cublas-flag
@contextlib.contextmanager
def cublas_tf32(allowed: bool):
    """Tell cuBLAS whether it may use TF32 tensor cores for FP32 inputs.

    The setting is restored afterwards: we leave the process as we found it.
    """
    saved = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = allowed
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved


def cublas(a: torch.Tensor, b: torch.Tensor, tf32: bool) -> torch.Tensor:
    with cublas_tf32(tf32):
        return a @ b
# end snippet


# snippet: cublas-benchmark
def cublas_contenders(a, b, b_col, best) -> dict:
    """Eight functions: each precision's best tile with B row-major and
    column-major, and cuBLAS on the same tensors, told per call whether it may
    use TF32; on Hopper a ninth, the persistent TMA kernel below."""
    ieee, tf32 = best["ieee", "row"], best["tf32", "row"]
    tf32_col = best["tf32", "column"]
    hopper = torch.cuda.get_device_capability() >= (9, 0)
    persistent = ({"triton tf32 persistent TMA, B col":
                   lambda: matmul_persistent_tf32(a, b_col)} if hopper else {})
    return {
        "triton ieee": lambda: matmul(a, b, ieee, ieee=True),
        "cuBLAS FP32": lambda: cublas(a, b, tf32=False),
        "triton ieee, B col": lambda: matmul(a, b_col, ieee, ieee=True),
        "cuBLAS FP32, B col": lambda: cublas(a, b_col, tf32=False),
        "triton tf32": lambda: matmul(a, b, tf32, ieee=False),
        "cuBLAS TF32": lambda: cublas(a, b, tf32=True),
        "triton tf32, B col": lambda: matmul(a, b_col, tf32_col, ieee=False),
        "cuBLAS TF32, B col": lambda: cublas(a, b_col, tf32=True),
        **persistent,
    }
# end snippet


def time_against_cublas(a, b, b_col, best) -> Timings:
    """All of them take turns in every round."""
    return bench_interleaved(cublas_contenders(a, b, b_col, best), rounds=10)


def against_cublas(lesson: Lesson, device: str, best: dict) -> Timings:
    """The benchmarks at each size; returns the rounds at the sweep's size,
    which the sweep's table shows for the best tiles."""
    print("\nPart 3c: the best tiles against cuBLAS, B row-major and column-major")
    results, race = {}, None
    sweep_size = lesson.size(gpu=SWEEP_SIZE, smoke=64)
    sizes = lesson.size(gpu=MATMUL_SIZES, smoke=(64, 96))
    for size in sizes:
        torch.manual_seed(5)
        a = torch.randn(size, size, device=device)
        b = torch.randn(size, size, device=device)
        # snippet: column-major-b
        # The same values of B stored column-major: element (k, n) lives at
        # n * K + k, so K is the contiguous dimension. Only the strides the
        # kernel receives change (stride_bk == 1, which Triton specialises
        # on), and every tile of B arrives in shared memory K-major: the
        # layout Hopper's 32-bit wgmma reads directly. Row-major B has to be
        # transposed on the way, which is where a tf32 kernel loses its speed.
        b_col = b.t().contiguous().t()
        # end snippet
        want = product64(lesson, a, b)
        rtol, atol, why = tolerance(TF32_RTOL, TF32_EPS, size, want)
        got = matmul(a, b_col, best["tf32", "column"], ieee=False,
                     out=poisoned((size, size), device))
        lesson.close(f"tf32-column-major-b-{size}", got, want, rtol, atol, why)
        if torch.cuda.get_device_capability() >= (9, 0):
            got = matmul_persistent_tf32(a, b_col, out=poisoned((size, size), device))
            lesson.close(f"tf32-persistent-tma-{size}", got, want, rtol, atol, why)
        del want, got

        # Predictions, before the rounds. tf32 against ieee: the tensor cores'
        # dense tf32 rate over the FMA units' fp32 rate (H200 datasheet). The
        # persistent TMA kernel: cuBLAS's rate, as for fp16 in the persistent
        # TMA lesson, on the same tensor cores with the same K-major tiles.
        if size == sweep_size:
            lesson.predict(f"matmul-tf32-vs-ieee-{size}", 495 / 67,
                           "tensor cores against FMA units: 495 TFLOP/s dense tf32 "
                           "over 67 TFLOP/s fp32 (H200 datasheet)", 0.25)
        if torch.cuda.get_device_capability() >= (9, 0):
            lesson.predict(f"matmul-tf32-persistent-tma-vs-cublas-tf32-{size}", 1.0,
                           "cuBLAS's rate: the same tensor cores and K-major tiles, "
                           "the persistent TMA kernel that matched cuBLAS in fp16",
                           0.10)
        ms = time_against_cublas(a, b, b_col, best)
        flop = 2.0 * size**3
        cube = f"{size}³"
        tiles = {p: config_name(best[p, "row"]) for p in ("ieee", "tf32")}
        col_tile = config_name(best["tf32", "column"])
        bench = partial(lesson.benchmark, timings=ms, unit="TFLOP/s", work=flop)
        if size == sweep_size:
            # One kernel against itself with one string changed, B row-major
            # for both: if tf32 is not faster than ieee, the tensor cores were
            # not used.
            bench(name=f"matmul-tf32-vs-ieee-{size}",
                  label=f"tf32 vs ieee, same kernel, {cube}, B row-major",
                  kernel="triton tf32", baseline="triton ieee",
                  baseline_name="the ieee kernel", threshold=1.0,
                  note=f"tf32 {tiles['tf32']}, ieee {tiles['ieee']}")
        bench(name=f"matmul-ieee-vs-cublas-fp32-{size}",
              label=f"ieee matmul vs cuBLAS FP32, {cube}",
              kernel="triton ieee", baseline="cuBLAS FP32",
              baseline_name="cuBLAS FP32", note=f"B row-major; tile {tiles['ieee']}")
        bench(name=f"matmul-ieee-colmajor-b-vs-cublas-fp32-{size}",
              label=f"ieee matmul vs cuBLAS FP32, {cube}, B column-major",
              kernel="triton ieee, B col", baseline="cuBLAS FP32, B col",
              baseline_name="cuBLAS FP32, same B",
              note=f"B column-major; tile {tiles['ieee']}")
        bench(name=f"matmul-tf32-vs-cublas-tf32-{size}",
              label=f"tf32 matmul vs cuBLAS TF32, {cube}",
              kernel="triton tf32", baseline="cuBLAS TF32",
              baseline_name="cuBLAS TF32", note=f"B row-major; tile {tiles['tf32']}")
        bench(name=f"matmul-tf32-colmajor-b-vs-cublas-tf32-{size}",
              label=f"tf32 matmul vs cuBLAS TF32, {cube}, B column-major",
              kernel="triton tf32, B col", baseline="cuBLAS TF32, B col",
              baseline_name="cuBLAS TF32, same B", threshold=0.6,
              note=f"B column-major; tile {col_tile}")
        if "triton tf32 persistent TMA, B col" in ms:
            # The course's goal for tf32, 0.9x cuBLAS, is this kernel's stretch.
            bench(name=f"matmul-tf32-persistent-tma-vs-cublas-tf32-{size}",
                  label=f"tf32 persistent TMA vs cuBLAS TF32, {cube}, B column-major",
                  kernel="triton tf32 persistent TMA, B col",
                  baseline="cuBLAS TF32, B col", baseline_name="cuBLAS TF32, same B",
                  threshold=0.6, stretch=0.9,
                  note=f"Bᵀ read K-major through a TMA descriptor; tile "
                       f"{config_name(PERSISTENT_TF32)}, one program per SM")
        results[size] = {name: flop / ms.median(name) * 1e-9 for name in ms}
        if size == sweep_size:
            race = ms
    plot_matmul(lesson, results)
    return race


def plot_matmul(lesson: Lesson, results: dict) -> None:
    groups = [("FP32\n(ieee)", "triton ieee", "cuBLAS FP32"),
              ("TF32\nB row-major", "triton tf32", "cuBLAS TF32"),
              ("TF32\nB col-major", "triton tf32, B col", "cuBLAS TF32, B col"),
              ("TF32 TMA\nB col-major", "triton tf32 persistent TMA, B col",
               "cuBLAS TF32, B col")]
    # The persistent TMA kernel runs on Hopper only.
    groups = [g for g in groups if all(g[1] in tf for tf in results.values())]

    def draw(fig):
        axes = fig.subplots(len(results), 1, sharex=True)
        for ax, (size, tf) in zip(axes, results.items(), strict=True):
            xs = range(len(groups))
            ours = [tf[kernel] for _, kernel, _ in groups]
            theirs = [tf[base] for _, _, base in groups]
            bars = ax.bar([x - 0.2 for x in xs], ours, 0.4, label="Triton, best tile")
            ax.bar([x + 0.2 for x in xs], theirs, 0.4, label="cuBLAS, same B")
            ax.bar_label(bars, [f"{o / t:.2f}x" for o, t in zip(ours, theirs,
                                                                 strict=True)],
                         padding=2)
            ax.set_xticks(list(xs), [g[0] for g in groups])
            ax.set_title(f"{size}³, FP32 inputs")
            ax.set_ylabel("TFLOP/s")
            ax.margins(y=0.15)  # room for the ratio over the tallest bar
        fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center",
                   ncols=2)

    lesson.plot("matmul-throughput",
                "TFLOP/s of the best Triton tile against cuBLAS with TF32 off and on; "
                "the label over each Triton bar is its ratio to cuBLAS", draw,
                size=(7.0, 6.4))


def main() -> int:
    lesson = Lesson("softmax-fp32-matmul")
    device = lesson.device()  # declines below compute capability 8.0 (lesson.toml)
    with lesson.step("softmax-checks"):
        check_softmax(lesson, device)
    with lesson.step("matmul-checks"):
        check_matmul(lesson, device)
    # The interpreter runs each program one after another on numpy, so a time
    # from it would describe Python, not a GPU.
    if lesson.step("softmax-benchmark", needs_gpu="timings need a GPU"):
        benchmark_softmax(lesson, device)
    if lesson.step("softmax-libraries", needs_gpu="timings need a GPU"):
        benchmark_softmax_libraries(lesson, device)
    if lesson.step("sweep", needs_gpu="timings need a GPU"):
        best, sweep = sweep_tiles(lesson, device)  # and the PTX's multiply counts
    with lesson.step("persistent-check"):
        check_persistent(lesson, device)
    if lesson.step("against-cublas", needs_gpu="timings need a GPU"):
        race = against_cublas(lesson, device, best)
        sweep_table(lesson, sweep, best, race)  # the best tiles from the race's rounds
    return lesson.finish()


if __name__ == "__main__":
    sys.exit(main())
