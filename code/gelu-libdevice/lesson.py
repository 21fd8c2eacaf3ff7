"""GELU with libdevice, as the course records it: the checks and benchmarks of the page.

The kernel, its launcher and the interpreter's libdevice stand-ins are in
gelu_libdevice.py, which runs alone. This file measures every form of GELU
in ulps against float64, checks the fused kernel on shapes that leave
partial tiles, reads what the compiler made of each form, and times the
kernel against eager PyTorch, Liger-Kernel and torch.compile, through the
course's kit (lessonkit.py), which keeps the record.

Run it:
    TRITON_INTERPRET=1 python lesson.py   # any machine: checks on the CPU
    python lesson.py                      # a CUDA GPU: checks, PTX, timings
"""

import math
import re
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

# lessonkit.py sits beside this file in a download, one folder up in the repository.
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]
from gelu_libdevice import BLOCK_M, BLOCK_N, NUM_WARPS, geglu, geglu_kernel  # noqa: E402

from lessonkit import Lesson, bench_interleaved  # noqa: E402

LIGER = "liger-kernel"  # the optional baseline (lesson.toml [requires.optional])

# form -> (the libdevice call, the function it computes)
FORMS = {
    "erf": ("libdevice.erf", "exact"),
    "erfc": ("libdevice.erfc", "exact"),
    "normcdf": ("libdevice.normcdf", "exact"),
    "tanh": ("libdevice.tanh", "tanh"),
    "sigmoid": ("libdevice.exp", "tanh"),
}
TANH_A = 0.044715


# snippet: references
def references(x: torch.Tensor) -> dict:
    """Exact GELU and the tanh approximation in float64, with condition numbers.

    The condition number |h f'(h) / f(h)| says how much a relative change
    of the input changes the output, relatively: the error any float32
    formula must make, even one that rounds only its argument.
    """
    h = x.double()
    phi = torch.exp(-0.5 * h * h) / math.sqrt(2 * math.pi)
    Phi = 0.5 * torch.erfc(-h / math.sqrt(2.0))  # no cancellation in float64
    # tanh form in float64 via the sigmoid: 1 + tanh(u) cancels in float64
    # too (below u = -19 it is 0), 1 / (1 + e^-2u) does not.
    u = math.sqrt(2 / math.pi) * (h + TANH_A * h**3)
    du = math.sqrt(2 / math.pi) * (1 + 3 * TANH_A * h * h)
    s = torch.sigmoid(2 * u)
    return {
        "exact": (h * Phi, (1 + h * phi / Phi).abs()),
        "tanh": (h * s, (1 + 2 * h * du * (1 - s)).abs()),
    }


def ulp_error(got: torch.Tensor, want: torch.Tensor) -> torch.Tensor:
    """|got - want| in units in the last place of float32 at `want`.

    A float32 in [2^(e-1), 2^e) has 24 significant bits, so neighbouring
    floats there are 2^(e-24) apart: that spacing is one ulp. 0.5 ulp is
    correct rounding; 1 ulp is "one of the two floats around the answer".
    """
    _, e = torch.frexp(want)  # want = m * 2^e with 0.5 <= |m| < 1
    ulp = torch.ldexp(torch.ones_like(want), (e - 24).clamp(min=-149))
    ulp = torch.where(want == 0, 2.0**-149, ulp)
    return (got.double() - want).abs() / ulp


# end snippet


def run_gelu(x: torch.Tensor, form: str) -> torch.Tensor:
    """gelu(x) by the fused kernel: b = 0 and y = 1 change nothing in float32."""
    x2 = x.reshape(1, -1).contiguous()
    out = torch.full_like(x2, float("nan"))  # poison
    b = torch.zeros(x2.shape[1], device=x.device)
    geglu(x2, b, torch.ones_like(x2), form, out=out)
    return out.reshape(-1)


def check_accuracy(lesson: Lesson, device: str):
    """Every form in ulps against float64, and the erf-vs-tanh difference."""
    # 2^20 + 1 points on a GPU; 4001 under the interpreter and compute-sanitizer.
    n = lesson.size(gpu=(1 << 20) + 1, smoke=4001) if device == "cuda" else 4001
    x = torch.linspace(-10.0, 10.0, n, device=device)  # float32 values
    ref = references(x)
    xs = x.double()
    regions = {
        "x >= 0": xs >= 0,
        "-4 <= x < 0": (xs >= -4) & (xs < 0),
        "x < -4": xs < -4,
    }
    lesson.not_on_interpreter(
        "libdevice's accuracy",
        "the interpreter has no libdevice; its stand-ins are float64 math "
        "rounded to float32, so the interpreter's ulp table measures the "
        "formulas, not libdevice",
    )
    rows, errors = [], {}
    for form, (call, function) in FORMS.items():
        want, cond = ref[function]
        err = ulp_error(run_gelu(x, form), want)
        errors[form] = err
        rows.append(
            [form, call, function]
            + [round(float(err[m].max()), 1) for m in regions.values()]
            + [round(float(err.mean()), 2)]
        )
    for approximate, function in (("none", "exact"), ("tanh", "tanh")):
        err = ulp_error(F.gelu(x, approximate=approximate), ref[function][0])
        rows.append(
            [f"torch F.gelu({approximate!r})", f"torch on {device}", function]
            + [round(float(err[m].max()), 1) for m in regions.values()]
            + [round(float(err.mean()), 2)]
        )
    columns = ["form", "computed with", "function"]
    columns += [f"max ulp, {r}" for r in regions] + ["mean ulp"]
    caption = f"float32 GELU against float64, {n} points evenly spaced on [-10, 10]"
    if lesson.interpret:
        # Printed, not recorded: the page's table is libdevice's, from the GPU.
        print(f"\n  {caption} (interpreter stand-ins, not libdevice)")
        for row in [columns, *rows]:
            print("  " + " | ".join(str(c) for c in row))
    else:
        lesson.table("ulps", columns, rows, caption)

    # snippet: accuracy-checks
    # The bound: a formula that rounds its argument once or twice (relative
    # change ~2 * 2^-24) moves the output by up to 2 * cond(x) ulps. Add 16
    # for the rest: CUDA documents erfcf at 4 ulps, expf at 2 and the
    # division div.full.f32 at 2, each up to twice that in the result's
    # binade, plus the roundings of 1 + e and of the products. Each claim is
    # (name, holds, what was found).
    claims = []
    for form in ("erfc", "sigmoid"):
        want, cond = ref[FORMS[form][1]]
        excess = (errors[form] - (2 * cond + 16)).max()
        claims.append((
            f"ulp-bound-{form}",
            float(excess) <= 0,
            f"ulp error <= 2 * cond(x) + 16 on [-10, 10]; "
            f"max {float(errors[form].max()):.1f} ulp",
        ))
    # normcdf carries h / sqrt(2) as two floats and corrects erfc for the
    # low part (its PTX shows it), so argument rounding should not show:
    # CUDA documents normcdff at 5 ulps, so h * normcdf(h) <= 2 * 5 + 1.
    worst = float(errors["normcdf"].max())
    claims.append((
        "ulp-normcdf-flat",
        worst <= 12,
        f"max {worst:.1f} ulp <= 12 everywhere on [-10, 10]",
    ))
    # The textbook forms: fine where 1 + erf (or 1 + tanh) is >= 1, all
    # digits lost where it is about 0: for x < -5.5, erf(x / sqrt 2) rounds
    # to -1 and the float32 result is 0, a relative error of 1, 2^23 ulps.
    for form in ("erf", "tanh"):
        want, cond = ref[FORMS[form][1]]
        pos = xs >= 0
        fine = float((errors[form][pos] - (2 * cond[pos] + 16)).max()) <= 0
        lost = float(errors[form][xs < -4].max()) >= 2**22
        claims.append((
            f"textbook-{form}-cancels-only-for-negative-x",
            fine and lost,
            f"x >= 0: within 2 * cond + 16; x < -4: max "
            f"{float(errors[form][xs < -4].max()):.3g} ulp (>= 2²²)",
        ))
    # end snippet
    for claim in claims:
        lesson.check(*claim)

    # snippet: erf-vs-tanh
    # The tanh approximation is a different function: its distance from
    # exact GELU is a modelling choice, thousands of float32 ulps, not a
    # rounding error. Measured in float64, and between the two kernels.
    exact, approx = ref["exact"][0], ref["tanh"][0]
    gap = (approx - exact).abs()
    at = float(xs[gap.argmax()])
    kernels_gap = float(
        (run_gelu(x, "sigmoid").double() - run_gelu(x, "normcdf").double()).abs().max()
    )
    small_and_the_same = (float(gap.max()) < 5e-4
                          and abs(kernels_gap - float(gap.max())) < 1e-6)
    # end snippet
    lesson.check(
        "tanh-approximation-vs-exact", small_and_the_same,
        f"max |gelu_tanh - gelu| = {float(gap.max()):.3e} at x = {at:.3f} "
        f"(float64); between the float32 kernels {kernels_gap:.3e}",
    )
    return x, errors, ref


def check_fused(lesson: Lesson, device: str) -> None:
    """gelu(x + b) * y against float64, on shapes that leave partial tiles."""
    shapes = [(37, 1000), (5, 513), (1, 1)]
    if device == "cuda":  # under compute-sanitizer, lesson.size's smoke value
        shapes = lesson.size(gpu=[(1001, 1000), (3, 4097), (2048, 8192)],
                             smoke=shapes + [(3, 4097)])
    for i, (M, N) in enumerate(shapes):
        torch.manual_seed(i)
        x = torch.randn(M, N, device=device)
        b = 0.1 * torch.randn(N, device=device)
        y = torch.randn(M, N, device=device)
        h = x + b  # float32, rounded as the kernel rounds it
        ref = references(h)
        for form in ("normcdf", "sigmoid"):
            out = torch.full_like(x, float("nan"))  # poison
            geglu(x, b, y, form, out=out)
            want, cond = ref[FORMS[form][1]]
            # The sweep's bound in ulps of gelu, as a relative error (an
            # ulp is at most 2^-23 of the value), plus the rounding of * y.
            ulps = 12 if form == "normcdf" else float((2 * cond + 16).max())
            rtol = (ulps + 1) * 2.0**-23
            lesson.close(
                f"geglu-{form}-{M}x{N}",
                out,
                want * y.double(),
                rtol=rtol,
                atol=1e-30,
                why=f"{ulps:.0f} ulp of gelu + 1 rounding for * y",
            )
    check_liger(lesson, device)


def textbook_tolerance(h, y, ref, function):
    """(rtol, atol, why) for gelu(h) * y by a textbook form, 1 + erf or 1 + tanh.

    Relative: the conditioning bound, as for the erfc and sigmoid forms.
    Absolute: where h < 0, 1 + erf (or 1 + tanh) cancels, and the few-ulp
    error of erf (tanh) near -1, where floats are 2^-24 apart, is all that
    is left of it: at most 2^-22 of |h y|.
    """
    ulps = float((2 * ref[function][1] + 16).max())
    atol = 2.0**-22 * float((h.double() * y.double()).abs().max())
    return (ulps + 1) * 2.0**-23, atol, f"{ulps:.0f} ulp + 1 rounding; 2⁻²² max|h y|"


def check_liger(lesson: Lesson, device: str) -> None:
    """Liger-Kernel's GEGLU, gelu_tanh(a) * b (no bias), and our tanh form."""
    geglu_mod = lesson.optional(LIGER, "liger_kernel.ops.geglu")
    if geglu_mod is None:
        return
    # Under the interpreter Liger's kernel calls the same tanh stand-in as
    # ours: it imported libdevice.tanh after the stand-ins were lent.
    shapes = [(37, 1000)]
    if device == "cuda":
        shapes = lesson.size(gpu=[(1001, 1000), (2048, 8192)], smoke=shapes)
    for i, (M, N) in enumerate(shapes, start=40):
        torch.manual_seed(i)
        x = torch.randn(M, N, device=device)
        y = torch.randn(M, N, device=device)
        zero = torch.zeros(N, device=device)
        ref = references(x)
        rtol, atol, why = textbook_tolerance(x, y, ref, "tanh")
        want = ref["tanh"][0] * y.double()
        got = geglu_mod.LigerGELUMulFunction.apply(x, y)
        lesson.close(f"liger-geglu-{M}x{N}", got, want, rtol, atol, why)
        out = torch.full_like(x, float("nan"))  # poison
        geglu(x, zero, y, "tanh", out=out)
        lesson.close(f"geglu-tanh-{M}x{N}", out, want, rtol, atol, why)


def compiled_code_facts(lesson: Lesson) -> None:
    """PTX of the fused kernel, per form: what libdevice inlines."""
    M, N = 64, 8192  # the benchmark's N: the same specialization
    x = torch.randn(M, N, device="cuda")
    b = torch.randn(N, device="cuda")
    per_thread = BLOCK_M * BLOCK_N // (32 * NUM_WARPS)
    rows = []
    for form in ("none", *FORMS):
        compiled = geglu_kernel[(N // BLOCK_N, M // BLOCK_M)](
            x, b, x, torch.empty_like(x), M, N,
            FORM=form, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, num_warps=NUM_WARPS,
        )  # fmt: skip
        ptx = compiled.asm["ptx"]
        # Instructions: indented lines that start with an opcode (optionally
        # predicated), not labels, directives or braces.
        body = re.findall(r"^\s+(?:@!?%p\d+\s+)?[a-z]\w*", ptx, re.MULTILINE)

        def per_elem(pattern, ptx=ptx):
            return round(len(re.findall(pattern, ptx)) / per_thread, 2)

        rows.append(
            [
                form,
                round(len(body) / per_thread, 1),
                per_elem(r"ex2\.approx"),
                per_elem(r"rcp\.approx|div\.\w+\.f32"),
                per_elem(r"fma\.rn"),
                per_elem(r"\bbra\b"),
                len(re.findall(r"\bcall\b", ptx)),
                getattr(compiled, "n_regs", None),
            ]
        )
    lesson.table(
        "ptx",
        ["form", "PTX instructions per element", "ex2.approx", "rcp / div",
         "fma", "branches", "calls", "registers"],
        rows,
        f"The fused kernel's PTX per form (counts per element, {per_thread} "
        "elements per thread; static counts, the kernel has no loops)",
    )  # fmt: skip


def benchmark(lesson: Lesson, device: str):
    M = N = lesson.size(gpu=8192, smoke=256)
    # snippet: benchmark
    # 8192 x 8192 float32 (256 MiB per tensor), random inputs. Bytes per
    # element, counted:
    #   fused (any form):   read x 4 + read y 4 + write out 4          = 12
    #   eager PyTorch:      x + b: read 4, write 4;  gelu: read 4, write 4;
    #                       * y: read 4 + 4, write 4                   = 28
    # (b is 32 KiB, read from cache; it is counted once.) Both are timed
    # as GB/s of the fused form's bytes, so the ratio is a ratio of times.
    torch.manual_seed(7)
    x = torch.randn(M, N, device=device)
    y = torch.randn(M, N, device=device)
    b = 0.1 * torch.randn(N, device=device)
    fns = {form: (lambda f=form: geglu(x, b, y, f)) for form in ("none", *FORMS)}
    fns["torch"] = lambda: F.gelu(x + b) * y
    fns["torch-tanh"] = lambda: F.gelu(x + b, approximate="tanh") * y
    # end snippet
    # snippet: measure
    # The prediction from those counts: both sides memory-bound at one rate,
    # so the fused form takes 12/28 of eager's time.
    lesson.predict("geglu-normcdf-vs-torch-8192x8192-fp32", 28 / 12,
                   "bytes per element at one bandwidth: eager's 28 over the fused "
                   "form's 12", 0.15)
    ms = bench_interleaved(fns)
    fused_bytes = 12 * M * N + 4 * N
    # end snippet
    lesson.benchmark(
        "geglu-normcdf-vs-torch-8192x8192-fp32",
        "gelu(x + b) * y, exact GELU, fused vs eager torch, 8192² fp32",
        ms,
        "normcdf",
        "torch",
        unit="GB/s",
        work=fused_bytes,
        baseline_name="torch: F.gelu(x + b) * y",
        threshold=1.5,
        stretch=2.2,
        note="both counted at the fused form's 12 bytes per element; "
        "eager torch moves 28",
    )
    lesson.benchmark(
        "geglu-sigmoid-vs-torch-tanh-8192x8192-fp32",
        "gelu(x + b) * y, tanh approximation, fused vs eager torch, 8192² fp32",
        ms,
        "sigmoid",
        "torch-tanh",
        unit="GB/s",
        work=fused_bytes,
        baseline_name="torch: F.gelu(x + b, approximate='tanh') * y",
        note="informational; both counted at 12 bytes per element",
    )
    rows = []
    for key, label, kernels, per_elem in (
        ("none", "fused, no activation: (x + b) * y", 1, 12),
        ("erf", "fused, erf (textbook)", 1, 12),
        ("erfc", "fused, erfc", 1, 12),
        ("normcdf", "fused, normcdf", 1, 12),
        ("tanh", "fused, tanh (textbook)", 1, 12),
        ("sigmoid", "fused, tanh as sigmoid", 1, 12),
        ("torch", "eager torch, exact", 3, 28),
        ("torch-tanh", "eager torch, tanh", 3, 28),
    ):
        t = ms.median(key)
        rows.append(
            [label, kernels, per_elem, round(t, 4),
             round(per_elem * M * N / t / 1e6, 1), round(ms.median("none") / t, 3)]
        )  # fmt: skip
    lesson.table(
        "timing",
        ["variant", "kernels", "bytes/element", "ms per call",
         "GB/s (its own bytes)", "speed vs no activation"],
        rows,
        "Median time per call at 8192 x 8192 fp32: what each form of GELU "
        "costs on top of the memory traffic",
    )  # fmt: skip
    return x, b, y, fused_bytes


def torch_geglu(x, b, y):
    return F.gelu(x + b) * y


# snippet: liger-benchmark
def library_contenders(lesson: Lesson, x, b, y):
    """Ours against Liger-Kernel's GEGLU and torch.compile's, if here; and
    torch.compile's compile time in seconds."""
    fns = {
        "normcdf": lambda: geglu(x, b, y, "normcdf"),
        "tanh": lambda: geglu(x, b, y, "tanh"),
    }
    liger = lesson.optional(LIGER, "liger_kernel.ops.geglu")
    if liger is not None:
        # gelu_tanh(x) * y: the same tanh formula as our "tanh" form, with
        # no bias (ours also reads b, 32 KiB, and adds it).
        fns["Liger"] = lambda: liger.LigerGELUMulFunction.apply(x, y)
    compile_s = 0.0
    try:
        t0 = time.perf_counter()
        compiled = torch.compile(torch_geglu, dynamic=False)
        compiled(x, b, y)
        torch.cuda.synchronize()
        compile_s = time.perf_counter() - t0
        fns["torch.compile"] = lambda: compiled(x, b, y)
    except Exception as e:  # noqa: BLE001 - any failure becomes a skip
        first = str(e).splitlines()[0][:200] if str(e) else ""
        lesson.skip(
            "torch-compile", f"torch.compile failed: {type(e).__name__}: {first}"
        )
    return fns, compile_s


# end snippet


def compare_with_libraries(lesson: Lesson, x, b, y, fused_bytes) -> None:
    """In rounds of their own: nothing a library does (a graph capture that
    fails, say) can change how the comparisons with eager torch are timed."""
    fns, compile_s = library_contenders(lesson, x, b, y)
    if len(fns) == 2:
        return
    # What is timed must be right: every 64th row, against float64. Liger
    # computes gelu_tanh(x) * y; Inductor writes exact GELU as 1 + erf.
    rows = slice(None, None, 64)
    for name, h, function in (
        ("Liger", x[rows], "tanh"),
        ("torch.compile", (x + b)[rows], "exact"),
    ):
        if name in fns:
            ref = references(h)
            rtol, atol, why = textbook_tolerance(h, y[rows], ref, function)
            want = ref[function][0] * y[rows].double()
            lesson.close(
                f"{name.replace('.', '-')}-geglu-8192x8192-rows",
                fns[name]()[rows], want, rtol, atol, why,
            )  # fmt: skip
    ms = bench_interleaved(fns)
    if "Liger" in ms:
        lesson.benchmark(
            "geglu-tanh-vs-liger-8192x8192-fp32",
            "gelu(x + b) * y, tanh approximation, fused vs Liger-Kernel's "
            "gelu_tanh(x) * y, 8192² fp32",
            ms,
            "tanh",
            "Liger",
            unit="GB/s",
            work=fused_bytes,
            baseline_name="Liger-Kernel LigerGELUMulFunction (no bias)",
            threshold=0.95,
            library="Liger-Kernel",
            note="the same tanh formula and libdevice.tanh; ours also adds the "
            "bias; both counted at 12 bytes per element",
        )
    if "torch.compile" in ms:
        lesson.benchmark(
            "geglu-normcdf-vs-compile-8192x8192-fp32",
            "gelu(x + b) * y, exact GELU, fused vs torch.compile, 8192² fp32",
            ms,
            "normcdf",
            "torch.compile",
            unit="GB/s",
            work=fused_bytes,
            baseline_name="torch.compile(F.gelu(x + b) * y, dynamic=False)",
            gate=False,
            library="torch.compile",
            note=f"report only; first call (compile) took {compile_s:.1f} s",
        )


def plot_ulps(lesson: Lesson, x, errors, ref) -> None:
    xs = x.double().cpu().numpy()
    bins = 800  # the largest error in each of 800 bins along x
    edges = np.linspace(-10, 10, bins + 1)
    which = np.clip(np.digitize(xs, edges) - 1, 0, bins - 1)
    centers = 0.5 * (edges[:-1] + edges[1:])

    def binned_max(values):
        out = np.zeros(bins)
        np.maximum.at(out, which, values)
        return np.maximum(out, 1e-2)  # log axis: show exact results at 1e-2

    def draw(fig):
        axes = fig.subplots(2, 1, sharex=True, sharey=True)
        for ax, function, forms in (
            (axes[0], "exact", ("erf", "erfc", "normcdf")),
            (axes[1], "tanh", ("tanh", "sigmoid")),
        ):
            for form in forms:
                ax.plot(centers, binned_max(errors[form].cpu().numpy()), label=form)
            bound = (2 * ref[function][1] + 16).cpu().numpy()
            ax.plot(centers, binned_max(bound), "--", color="gray", lw=1,
                    label="2 cond + 16")
            ax.set_yscale("log")
            ax.set_title("exact GELU" if function == "exact" else "tanh approximation")
            ax.set_ylabel("ulp error")
            ax.legend(loc="upper right", ncols=2)
        axes[1].set_xlabel("x (ulp error: the largest in each bin)")

    lesson.plot(
        "ulp-error",
        "ulp error of each float32 form of GELU along x, against float64, "
        "with the conditioning bound (exact results drawn at 0.01)",
        draw,
        size=(7.0, 7.0),
    )


def main() -> int:
    lesson = Lesson("gelu-libdevice")
    device = lesson.device()
    with lesson.step("accuracy"):
        x, errors, ref = check_accuracy(lesson, device)
    if lesson.step("ulp-plot", needs_gpu="the GPU's libdevice is what it plots"):
        plot_ulps(lesson, x, errors, ref)
    with lesson.step("fused"):
        check_fused(lesson, device)
    if lesson.step("compiled-code", needs_gpu="the interpreter compiles no PTX",
                   smoke=False):
        compiled_code_facts(lesson)
    if lesson.step("benchmark", needs_gpu="timings need a GPU"):
        x, b, y, fused_bytes = benchmark(lesson, device)
    if lesson.step("libraries", needs_gpu="timings need a GPU"):
        compare_with_libraries(lesson, x, b, y, fused_bytes)
    return lesson.finish()


if __name__ == "__main__":
    sys.exit(main())
