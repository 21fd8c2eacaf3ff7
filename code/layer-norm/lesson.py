"""Layer norm, as the course records it: the checks and benchmarks of the page.

The kernels and their launchers are in layer_norm.py, which runs alone. This
file checks both passes the way every lesson is checked (outputs filled with
NaN first, widths and row counts no block divides, tolerances from where each
output is rounded, against torch's layer norm in float64), and times them
against torch, a plain copy and Liger-Kernel, through the course's kit
(lessonkit.py), which keeps the record.

Run it:
    TRITON_INTERPRET=1 python lesson.py   # any machine: the checks on the CPU
    python lesson.py                      # a CUDA GPU: checks and GB/s
"""

import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

# lessonkit.py sits beside this file in a download, one folder up in the repository.
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]
from layer_norm import (  # noqa: E402
    PROGRAMS_PER_SM,
    forward_config,
    layer_norm_bwd,
    layer_norm_fwd,
    layer_norm_fwd_kernel,
)

from lessonkit import (  # noqa: E402
    Lesson,
    bench_interleaved,
    gbps,
    median_interval,
    scaled_rtol,
)

LIGER = "liger-kernel"  # the optional baseline (lesson.toml [requires.optional])


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
    M, N = (64, 1000) if device == "cpu" else lesson.size(gpu=(4096, 1000),
                                                           smoke=(64, 1000))
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
    # Under compute-sanitizer (lesson.size's smoke value) the same widths, on
    # few rows: the tool runs every kernel many times slower.
    if lesson.interpret:
        shapes = [(37, 1000), (64, 1024), (5, 4096)]
    else:
        shapes = lesson.size(
            gpu=[(1001, 1000), (4096, 1024), (999, 4096), (300, 8192), (2048, 777)],
            smoke=[(37, 1000), (64, 1024), (5, 4096), (3, 8192), (19, 777)])
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
    shapes = [(37, 1000)] if lesson.interpret else lesson.size(
        gpu=[(1001, 1000), (999, 4096)], smoke=[(37, 1000), (5, 4096)])
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
    compiled = {}
    for N in (1024, 4096):
        # The benchmarks' rows, or 64 under compute-sanitizer: a multiple of 16
        # either way, so the kernel is specialized as it is when timed.
        M = lesson.size(gpu=ELEMENTS // N, smoke=64)
        x = torch.randn(M, N, device=device, dtype=torch.float16)
        w, b = x[0].clone(), x[1].clone()
        y, mean, rstd = layer_norm_fwd(x, w, b, eps)
        BLOCK_N, ROWS, warps = forward_config(N, 2)
        # One program is enough to get the compiled kernel back from a launch.
        compiled[f"forward, N = {N} ({ROWS} rows/program, {warps} warps)"] = (
            layer_norm_fwd_kernel[(1,)](
                x, y, w, b, mean, rstd, x.stride(0), y.stride(0), M, N, eps,
                BLOCK_N=BLOCK_N, ROWS=ROWS, num_warps=warps))
    lesson.compiled_table(
        "compiled", compiled,
        {"16-byte loads": r"ld\.global[\w.:]*\.v4\.",
         "all global loads": r"ld\.global"},
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


def rate(ms, name, nbytes) -> tuple[float, float, float]:
    """GB/s of `name` as a benchmark reports it: the rate at the median time,
    and the 95 % interval of the rates of its rounds."""
    _, low, high = median_interval([gbps(nbytes, t) for t in ms[name]])
    return gbps(nbytes, ms.median(name)), low, high


def ratio(ms, kernel, baseline, work=(1, 1)) -> float:
    """kernel's rate over baseline's as a benchmark computes it: the median of
    the ratios of each round; `work` is (the kernel's, the baseline's) bytes."""
    return statistics.median(work[0] / k / (work[1] / b)
                             for k, b in zip(ms[kernel], ms[baseline], strict=True))


def sweep_and_plot(lesson: Lesson, device: str, measured: dict, copy_gbps: float,
                   eps=1e-5) -> None:
    """Four row widths, then the two tuning knobs at N = 1024. Where the
    benchmarks timed a point (N = 1024 and 4096, and the launchers' own
    choices at N = 1024), it is drawn from their rounds."""
    results = {}
    elements = lesson.size(gpu=ELEMENTS, smoke=8192)
    copy_bytes = 2 * elements * 2  # read + write, FP16
    for N in (1024, 2048, 4096, 8192):
        if N in measured:  # the benchmarks' own rounds
            ms = measured[N]
        else:  # widths only in the table: three rounds are enough
            ms = bench_interleaved(contenders(N, device, eps, elements=elements),
                                   rounds=3)
        M = elements // N
        fb, bb = forward_bytes(M, N, 2), backward_bytes(M, N, 2)
        r = {key: rate(ms, key, nbytes) for key, nbytes in (
            ("forward", fb), ("F.layer_norm", fb), ("backward", bb),
            ("torch backward", bb))}
        r["forward / torch"] = ratio(ms, "forward", "F.layer_norm")
        r["backward / torch"] = ratio(ms, "backward", "torch backward")
        # The copy took turns with the benchmarks at N = 1024 only.
        r["forward / copy"] = (ratio(ms, "forward", "copy", (fb, copy_bytes))
                               if "copy" in ms else r["forward"][0] / copy_gbps)
        results[N] = {"M": M, "rounds": len(ms["forward"]), **r}
    lesson.table(
        "widths",
        ["N", "M", "rows/program (fwd)", "warps", "forward GB/s", "F.layer_norm GB/s",
         "forward / torch", "backward GB/s", "torch backward GB/s", "backward / torch",
         "forward / copy", "rounds", "benchmark"],
        [[N, r["M"], *forward_config(N, 2)[1:], r["forward"][0], r["F.layer_norm"][0],
          r["forward / torch"], r["backward"][0], r["torch backward"][0],
          r["backward / torch"], r["forward / copy"], r["rounds"],
          f"forward-vs-torch-{ELEMENTS // N}x{N}-fp16" if N in measured else ""]
         for N, r in results.items()],
        "FP16 layer norm over 2²⁵ elements at four row widths; GB/s counts the "
        f"bytes each pass must move (copy of the same 64 MiB: {copy_gbps:.0f} GB/s). "
        "At N = 1024 and 4096, the benchmarks' own rounds (the one named, and at "
        "1024 the backward's and the copy's beside it); at 2048 and 8192, 3 rounds "
        "of their own. Ratios are medians of each round's ratio.",
    )

    def draw(fig):
        ax = fig.subplots()
        widths = list(results)
        for key, style, name in (("forward", "o-", "Triton forward"),
                                 ("F.layer_norm", "s--", "F.layer_norm"),
                                 ("backward", "^-", "Triton backward"),
                                 ("torch backward", "v--", "torch backward")):
            mid = [results[n][key][0] for n in widths]
            err = [[m - results[n][key][1] for m, n in zip(mid, widths, strict=True)],
                   [results[n][key][2] - m for m, n in zip(mid, widths, strict=True)]]
            ax.errorbar(widths, mid, yerr=err, fmt=style, capsize=2, label=name)
        ax.axhline(copy_gbps, color="gray", linestyle=":", label="copy of x")
        ax.set_xscale("log", base=2)
        ax.set_xticks(widths, [str(n) for n in widths])
        ax.set_xlabel(f"row width N (FP16, M x N = {elements:,} elements)")
        ax.set_ylabel("GB/s")
        ax.set_ylim(bottom=0)
        fig.legend(loc="outside lower center", ncols=2)

    lesson.plot("gbps-vs-width", "Bandwidth of the forward and backward passes by "
                "row width, against torch and a plain copy of the same bytes: medians "
                "with their confidence intervals, the benchmarks' rounds at N = 1024 "
                "and 4096", draw, size=(7.0, 5.2))

    # snippet: sweep
    # How much do several rows per program buy at N = 1024? Same kernel,
    # same warps, only ROWS changes. The benchmarks timed the launcher's
    # choice; the other three take turns for three rounds.
    M, N = lesson.size(gpu=(32768, 1024), smoke=(8, 1024))
    x, w, b, dy = make_inputs(M, N, device, seed=1)
    chosen = forward_config(N, 2)[1]
    ms = bench_interleaved(
        {r: (lambda r=r: layer_norm_fwd(x, w, b, eps, rows=r))
         for r in (1, 2, 4, 8) if r != chosen},
        rounds=3,
    )
    # end snippet
    fb, rows = forward_bytes(M, N, 2), []
    for r in (1, 2, 4, 8):
        src, key, said = ((measured[N], "forward", "forward-vs-copy-32768x1024-fp16")
                          if r == chosen else (ms, r, ""))
        mid, low, high = rate(src, key, fb)
        # The copy took turns with the benchmark: there, the ratio of each round.
        per_copy = (ratio(src, key, "copy", (fb, copy_bytes)) if said
                    else mid / copy_gbps)
        rows.append([r, mid, f"[{low:.4g}, {high:.4g}]", per_copy, len(src[key]), said])
    lesson.table(
        "rows-per-program",
        ["rows/program", "forward GB/s", "95 % interval", "forward / copy", "rounds",
         "benchmark"],
        rows,
        f"Forward pass at {M} x {N} FP16, 4 warps, varying the rows each program "
        f"normalizes: medians; the launcher's choice, {chosen} rows, from the "
        "benchmark named (its ratio from the same rounds), the others from 3 rounds "
        "of their own (their interval, the range)",
    )

    # snippet: sweep-backward
    # The backward pass's one free choice: how many stage-one programs per
    # SM, i.e. how many partial rows of dw and db stage two must add up.
    # The benchmarks timed the launcher's choice; the others take turns.
    _, mean, rstd = layer_norm_fwd(x, w, b, eps)
    ms = bench_interleaved(
        {p: (lambda p=p: layer_norm_bwd(dy, x, w, mean, rstd, programs_per_sm=p))
         for p in (2, 4, 8, 16) if p != PROGRAMS_PER_SM},
        rounds=3,
    )
    # end snippet
    bb, rows = backward_bytes(M, N, 2), []
    for p in (2, 4, 8, 16):
        src, key, said = ((measured[N], "backward", "backward-vs-torch-32768x1024-fp16")
                          if p == PROGRAMS_PER_SM else (ms, p, ""))
        mid, low, high = rate(src, key, bb)
        rows.append([p, mid, f"[{low:.4g}, {high:.4g}]", len(src[key]), said])
    lesson.table(
        "backward-programs",
        ["programs per SM", "backward GB/s", "95 % interval", "rounds", "benchmark"],
        rows,
        f"Backward pass (dx, dw, db) at {M} x {N} FP16, varying the number of "
        f"stage-one programs: medians; the launcher's choice, {PROGRAMS_PER_SM} per "
        "SM, from the benchmark named, the others from 3 rounds of their own",
    )


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
    return lesson.finish()


if __name__ == "__main__":
    sys.exit(main())
