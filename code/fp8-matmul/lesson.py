"""FP8 matmul, as the course records it: accuracy, checks and benchmarks.

The quantizer, the kernel and its launcher are in fp8_matmul.py, which runs
alone. This file checks them the way every lesson is checked (outputs filled
with NaN first, shapes no tile divides, float64 references and tolerances
from a model of the fp8 accumulator), measures what fp8 costs in accuracy
and what it buys in speed against torch._scaled_mm and fp16 cuBLAS in the
same rounds, through the course's kit (lessonkit.py), which keeps the record.

Run it:
    TRITON_INTERPRET=1 python lesson.py   # any machine: the quantizer, and the
                                          # kernel on fp16 stand-ins
    python lesson.py                      # H100/H200: fp8 checks, accuracy, TFLOP/s
"""

import math
import sys
from pathlib import Path

import torch
from triton.runtime.errors import OutOfResources

# lessonkit.py sits beside this file in a download, one folder up in the repository.
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]
from fp8_matmul import (  # noqa: E402
    E4M3_MAX,
    FAST_CONFIGS,
    PROMOTED_CONFIG,
    Config,
    dequantize64,
    descriptors,
    quantize_e4m3,
    scaled_matmul,
    scaled_matmul_kernel,
)

from lessonkit import Lesson, bench_interleaved, scaled_rtol, tflops  # noqa: E402

# snippet: tolerances
# The fp16 output rounding (2**-11), with room; also the floor of every bound.
FP16_OUT = 2.0**-10
# What one fp8 wgmma step may lose, relative to the size of the sum it makes.
FP8_ACC_STEP = 2.0**-13


def rtol_fast(K: int) -> tuple[float, str]:
    # Each wgmma adds 32 exact products into the tensor core's accumulator,
    # which keeps about 13 fraction bits. K/32 steps whose losses, at worst,
    # all have the same sign: a bound linear in K.
    steps = math.ceil(K / 32)
    rtol = max(FP16_OUT, steps * FP8_ACC_STEP)
    return rtol, (f"fast fp8 accumulation: rtol = max(2⁻¹⁰, ceil(K/32) * 2⁻¹³) "
                  f"= {rtol:.3g} at K={K}")


def rtol_promoted(K: int, block_k: int) -> tuple[float, str]:
    # Each BLOCK_K slice loses at most (BLOCK_K/32) steps of 2^-13 of its own
    # size, which is about |C| / sqrt(slices); the fp32 adds between slices
    # are exact enough. Slices adding up at worst:
    # sqrt(slices) * (BLOCK_K/32) * 2^-13.
    slices = math.ceil(K / block_k)
    rtol = max(FP16_OUT, math.sqrt(slices) * (block_k / 32) * FP8_ACC_STEP)
    return rtol, (f"promoted every {block_k}: rtol = max(2⁻¹⁰, sqrt(K/{block_k}) "
                  f"* {block_k // 32} * 2⁻¹³) = {rtol:.3g} at K={K}")


# end snippet


def product64(x: torch.Tensor, yt: torch.Tensor, on_cpu: bool = False) -> torch.Tensor:
    """x @ yt.T in float64. on_cpu: multiplied on the CPU and moved back, so that
    no library kernel runs under compute-sanitizer (the lesson's own are checked)."""
    if on_cpu:
        return (x.cpu().double() @ yt.cpu().double().T).to(x.device)
    return x.double() @ yt.double().T


def rel_errors(got: torch.Tensor, want64: torch.Tensor) -> tuple[float, float]:
    """(max |err| / max |want|, rms err / rms want): the worst element and the
    typical one."""
    err = got.to(torch.float64) - want64
    return (float(err.abs().max() / want64.abs().max()),
            float(err.pow(2).mean().sqrt() / want64.pow(2).mean().sqrt()))


# snippet: predict-error
def predicted_and_measured_error(a, bt, got, on_cpu=False) -> tuple[float, float]:
    """C's error as rounding the inputs to e4m3 predicts it, and as measured."""

    def eps(x):
        # ||dequant(x) - x|| / ||x||: the inputs' rounding, each element
        # weighted by its size
        q, scale = quantize_e4m3(x)
        x64 = x.to(torch.float64)
        return float((dequantize64(q, scale) - x64).norm() / x64.norm())

    # C's error is a sum over K of a*b*(da + db) with independent roundings
    # da, db, so its rms relative to rms C is sqrt(eps_A^2 + eps_B^2).
    predicted = (eps(a) ** 2 + eps(bt) ** 2) ** 0.5
    # the fp16 inputs, before quantization
    exact = product64(a, bt, on_cpu)
    measured = rel_errors(got, exact)[1]
    return predicted, measured


# end snippet


def check_error_prediction(lesson: Lesson, a, bt, got, label: str) -> None:
    """Is C's error what rounding the inputs to e4m3 predicts, no more?"""
    on_cpu = bool(lesson.sanitize)
    predicted, measured = predicted_and_measured_error(a, bt, got, on_cpu)
    lesson.check(
        f"error-is-quantization-error-{label}", 0.9 < measured / predicted < 1.1,
        f"rms err / rms C = {measured:.4g} against the fp16 inputs; predicted from "
        f"the inputs' rounding: sqrt(eps_A² + eps_B²) = {predicted:.4g} "
        "(checked within 10%)",
    )


# snippet: check-quantizer
def quantizer_error(x: torch.Tensor) -> tuple[float, float, bool]:
    """The worst error of a round trip through e4m3 in units of its bound, the
    largest |q|, and whether every dequantized value is finite."""
    q, scale = quantize_e4m3(x)
    back = dequantize64(q, scale)
    x64 = x.to(torch.float64)
    # Round to nearest with 3 mantissa bits: a normal e4m3 value is off by at
    # most half a step, 2**-4 of its size. Below 2**-6 (in scaled units) e4m3
    # is subnormal with a fixed step of 2**-9, so there the bound is absolute.
    bound = torch.clamp(x64.abs() * 2.0**-4, min=2.0**-10 * float(scale))
    worst = float(((back - x64).abs() / bound).max())
    peak = float(q.to(torch.float32).abs().max())
    return worst, peak, bool(torch.isfinite(back).all())


# end snippet


def check_quantizer(lesson: Lesson, x: torch.Tensor, label: str) -> None:
    worst, peak, finite = quantizer_error(x)
    ok = worst <= 1.0 and peak == E4M3_MAX and finite
    lesson.check(
        f"quantizer-{label}", ok,
        f"max |dequantized - x| / bound = {worst:.3f} (bound: 2⁻⁴ |x|, or "
        f"2⁻¹⁰ scale where e4m3 is subnormal); largest |q| = {peak:g} "
        f"(want {E4M3_MAX:g})",
    )


def check_quantizers(lesson: Lesson, device: str) -> None:
    """The quantizer is plain torch, and torch's CPU build converts to and
    from float8_e4m3fn, so it is checked in full in both modes."""
    torch.manual_seed(0)
    if lesson.interpret:
        x = torch.randn(300, 200, dtype=torch.float16)
        check_quantizer(lesson, x, "fp16-randn")
        x = torch.randn(97, 61) * 1e-3 + 5e-4
        check_quantizer(lesson, x, "fp32-small-offset")
    else:
        n = lesson.size(gpu=4096, smoke=256)
        x = torch.randn(n, n, device=device, dtype=torch.float16)
        check_quantizer(lesson, x, "fp16-randn")


# snippet: interpreter-standin
# The kernel names no input dtype, so the same code runs under the
# interpreter on fp16 operands: the quantized values kept in fp16 (every e4m3
# value is exactly an fp16 value) with the same scales. That exercises the
# descriptors, the ragged edges, the persistent walk (3 programs over up to
# 20 tiles), both epilogues, the promotion branch and the scale multiply.
STANDIN_CASES = [((77, 40, 56), False, False), ((130, 96, 200), True, False),
                 ((33, 136, 24), False, True)]


def standin_case(M, N, K, split, promote, seed):
    """One stand-in case: (got, want, rtol, why)."""
    torch.manual_seed(10 + seed)
    a = torch.randn(M, K, dtype=torch.float16)
    bt = torch.randn(N, K, dtype=torch.float16) * 3
    qa, sa = quantize_e4m3(a)
    qb, sb = quantize_e4m3(bt)
    a16, bt16 = qa.to(torch.float16), qb.to(torch.float16)
    cfg = Config(32, 32, 32, 2, 4, 2, split_epilogue=split, promote_acc=promote)
    # poison: an unwritten element cannot pass
    c = torch.full((M, N), float("nan"), dtype=torch.float16)
    scaled_matmul(a16, bt16, sa, sb, cfg, num_sms=3, out=c)
    want = dequantize64(a16, sa) @ dequantize64(bt16, sb).T
    # fp16 products are exact in fp32 and the interpreter accumulates in
    # fp32: only accumulation order and the fp16 output round.
    rtol, why = scaled_rtol(FP16_OUT, 2.0**-24, K)
    return c, want, rtol, why


# end snippet


def check_standin(lesson: Lesson) -> None:
    """Under the interpreter: the kernel on fp16 stand-ins for the fp8 values."""
    lesson.not_on_interpreter(
        "fp8 e4m3 inputs",
        "Triton's interpreter runs on numpy, which has no float8 types",
    )
    for seed, ((M, N, K), split, promote) in enumerate(STANDIN_CASES):
        c, want, rtol, why = standin_case(M, N, K, split, promote, seed)
        name = f"kernel-fp16-standin-{M}x{N}x{K}"
        name += ("-split" if split else "") + ("-promote" if promote else "")
        lesson.close(name, c, want, rtol, rtol * float(want.abs().max()), why)

    # The quantization error of C, predicted from the inputs alone, on a
    # product long enough (K = 512) for the statistics to settle.
    torch.manual_seed(20)
    a = torch.randn(96, 512, dtype=torch.float16)
    bt = torch.randn(80, 512, dtype=torch.float16)
    qa, sa = quantize_e4m3(a)
    qb, sb = quantize_e4m3(bt)
    cfg = Config(32, 32, 64, 2, 4, 2, split_epilogue=False, promote_acc=False)
    a16, bt16 = qa.to(torch.float16), qb.to(torch.float16)
    c = scaled_matmul(a16, bt16, sa, sb, cfg, num_sms=3)
    check_error_prediction(lesson, a, bt, c, "96x80x512-fp16-standin")


def target_operands(n, device="cuda"):
    torch.manual_seed(0)
    a = torch.randn(n, n, device=device, dtype=torch.float16)
    bt = torch.randn(n, n, device=device, dtype=torch.float16)  # B^T: (N, K)
    return a, bt, *quantize_e4m3(a), *quantize_e4m3(bt)


def pick_config(lesson: Lesson, n: int) -> Config:
    """Race the candidate configurations at n³; keep the fastest fast one."""
    # snippet: pick-config
    a, bt, qa, sa, qb, sb = target_operands(n)
    fns, misfits = {}, []
    for cfg in FAST_CONFIGS + [PROMOTED_CONFIG]:
        # Compile and run each once: a configuration whose pipeline does not
        # fit in shared memory fails here, is reported, and sits out the race.
        try:
            scaled_matmul(qa, qb, sa, sb, cfg)
        except OutOfResources as e:
            print(f"  {cfg.label()}: does not fit ({e})")
            misfits.append(cfg)
            continue
        fns[cfg] = lambda cfg=cfg: scaled_matmul(qa, qb, sa, sb, cfg)
    assert any(cfg in fns for cfg in FAST_CONFIGS), "no fast configuration fits"
    # Three rounds, the candidates taking turns, are enough to pick one.
    ms = bench_interleaved(fns, rounds=3, warm_s=0.25)
    best = min((cfg for cfg in FAST_CONFIGS if cfg in fns), key=ms.median)
    # end snippet
    flop = 2.0 * n**3
    lesson.table(
        "configs", ["configuration", "TFLOP/s"],
        [[cfg.label(), tflops(flop, ms.median(cfg))] for cfg in fns]
        + [[cfg.label(), "does not fit"] for cfg in misfits],
        f"Candidate configurations at {n}³, fp8 in, fp16 out, median of 3 rounds; "
        "the fastest fast-accumulation one is used for everything below.",
    )
    print(f"  using {best.label()}")
    return best


# snippet: gpu-checks
def gpu_comparisons(M, N, K, best, seed, ref_on_cpu=False, num_sms=None):
    """Both accumulation modes on real e4m3 inputs into poison, against two
    references: (name, got, reference, rtol, why, max|want|) for each."""
    torch.manual_seed(100 + seed)
    a1 = torch.randn(M, K, device="cuda", dtype=torch.float16)
    bt1 = torch.randn(N, K, device="cuda", dtype=torch.float16)
    q1, s1 = quantize_e4m3(a1)
    q2, s2 = quantize_e4m3(bt1)
    # The exact product of what the kernels are given: the dequantized
    # fp8 values, multiplied in float64. What remains is accumulation.
    want = product64(dequantize64(q1, s1), dequantize64(q2, s2), ref_on_cpu)
    amax = float(want.abs().max())
    # cuBLAS on the same fp8 inputs and scales, with and without fast
    # accumulation. _scaled_mm wants its second operand column-major:
    # q2.t() is (K, N) with K contiguous, a view of the same bytes.
    cublas = {
        fast: torch._scaled_mm(q1, q2.t(), scale_a=s1, scale_b=s2,
                               out_dtype=torch.float16, use_fast_accum=fast)
        for fast in (False, True)
    }
    modes = [("fast", best, rtol_fast(K), cublas[True]),
             ("promoted", PROMOTED_CONFIG,
              rtol_promoted(K, PROMOTED_CONFIG.block_k), cublas[False])]
    out = []
    for name, cfg, (rtol, why), ref in modes:
        c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
        scaled_matmul(q1, q2, s1, s2, cfg, num_sms, out=c)  # into poison
        out.append((f"{name}-vs-fp64-{M}x{N}x{K}", c, want, rtol, why, amax))
        # Two accumulations in different orders: the difference is bounded
        # by the kernel's bound plus one more fp16 rounding and cuBLAS's own.
        # (Under compute-sanitizer cuBLAS's output is read back by a copy to the
        # CPU: initcheck does not see its TMA stores, and every element a torch
        # kernel read would be reported as uninitialized.)
        ref64 = ref.cpu().double().to(c.device) if ref_on_cpu else ref.double()
        out.append((f"{name}-vs-scaled-mm-{M}x{N}x{K}", c, ref64,
                    rtol + FP16_OUT, f"cuBLAS with use_fast_accum={name == 'fast'}; "
                    "rtol = kernel bound + 2⁻¹⁰", amax))
    return out


# end snippet


def check_gpu(lesson: Lesson, best: Config) -> None:
    """Both accumulation modes on real e4m3 inputs, against two references."""
    # Under compute-sanitizer: shapes as ragged (K a multiple of 16 but of no
    # BLOCK_K, edge tiles in M and N; N a multiple of 16 too, as
    # torch._scaled_mm needs), small enough for every tool, and two
    # programs, so that each walks more than one tile (None: one per SM).
    shapes = lesson.size(gpu=[(4096, 4096, 4096), (1008, 1040, 784)],
                         smoke=[(256, 256, 256), (208, 272, 144)])
    programs = lesson.size(gpu=None, smoke=2)
    for seed, (M, N, K) in enumerate(shapes):
        cases = gpu_comparisons(M, N, K, best, seed, bool(lesson.sanitize), programs)
        for name, got, want, rtol, why, amax in cases:
            lesson.close(name, got, want, rtol, rtol * amax, why)


# snippet: paths
def paths(best: Config, a, bt, qa, sa, qb, sb) -> dict:
    """The five ways to compute C = A @ B that the lesson compares."""
    return {
        "fp16 torch.matmul": lambda: a @ bt.T,
        "fp8 torch._scaled_mm": lambda: torch._scaled_mm(
            qa, qb.t(), scale_a=sa, scale_b=sb, out_dtype=torch.float16),
        "fp8 torch._scaled_mm, fast accum": lambda: torch._scaled_mm(
            qa, qb.t(), scale_a=sa, scale_b=sb, out_dtype=torch.float16,
            use_fast_accum=True),
        "fp8 Triton, fast accum": lambda: scaled_matmul(qa, qb, sa, sb, best),
        "fp8 Triton, promoted": lambda: scaled_matmul(qa, qb, sa, sb, PROMOTED_CONFIG),
    }


# end snippet


def show_compiled_code(lesson: Lesson, best: Config) -> None:
    """What the compiler made: e4m3 wgmma, TMA copies, registers, shared memory."""
    n = lesson.size(gpu=1024, smoke=256)
    a, bt, qa, sa, qb, sb = target_operands(n)
    num_sms = torch.cuda.get_device_properties(0).multi_processor_count
    compiled = {}
    for cfg in (best, PROMOTED_CONFIG):
        c = torch.empty((n, n), device="cuda", dtype=torch.float16)
        # One program is enough: the launch returns the compiled kernel.
        compiled[cfg.label()] = scaled_matmul_kernel[(1,)](
            *descriptors(qa, qb, c, cfg), sa, sb, n, n, n,
            BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k,
            GROUP_M=cfg.group_m, NUM_SMS=num_sms, SPLIT_EPILOGUE=cfg.split_epilogue,
            PROMOTE_ACC=cfg.promote_acc, num_warps=cfg.num_warps,
            num_stages=cfg.num_stages,
        )
    wgmma = r"wgmma\.mma_async\.sync\.aligned\.(\w+)\.f32\.(?:\w+)\."
    lesson.compiled_table("compiled", compiled, {
        "wgmma shape": wgmma,
        "wgmma input type": r"wgmma\.mma_async\.sync\.aligned\.\w+\.f32\.(\w+)\.",
        "wgmma": r"wgmma\.mma_async",
        "TMA copies": r"cp\.async\.bulk\.tensor",
    }, "What Triton compiled for the two accumulation modes (the same kernel serves "
       "every shape); instruction counts are static, in the PTX.")


def accuracy(lesson: Lesson, best: Config, n: int) -> None:
    operands = target_operands(n)
    a, bt, qa, sa, qb, sb = operands
    on_cpu = bool(lesson.sanitize)  # float64 products off the GPU under the tool
    # snippet: accuracy
    # What fp8 costs: every path against the float64 product of the fp16
    # inputs before quantization, and against that of the fp8 values.
    exact = product64(a, bt, on_cpu)
    exact_q = product64(dequantize64(qa, sa), dequantize64(qb, sb), on_cpu)
    errors = {}
    for name, fn in paths(best, *operands).items():
        got = fn()
        fp8 = not name.startswith("fp16")
        errors[name] = [*rel_errors(got, exact),
                        *(rel_errors(got, exact_q) if fp8 else ("-", "-"))]
    # end snippet
    lesson.table(
        "accuracy",
        ["path", "max err / max|C|", "rms err / rms C",
         "max err / max|C| (fp8 values)", "rms err / rms C (fp8 values)"],
        [[name, *e] for name, e in errors.items()],
        f"{n}³, randn fp16 inputs. First two columns: against the float64 product "
        "of the fp16 inputs (quantization and accumulation). Last two: against the "
        "float64 product of the dequantized fp8 values (accumulation and fp16 "
        "output only).",
    )
    got = scaled_matmul(qa, qb, sa, sb, best)
    check_error_prediction(lesson, a, bt, got, f"{n}x{n}x{n}")


def benchmark(lesson: Lesson, best: Config, n: int) -> None:
    operands = target_operands(n)
    # snippet: measure
    # The five paths on the same inputs, taking turns round after round so
    # that clock drift hits them alike. Quantization is not timed. 2 * n^3
    # FLOP per call. Predicted first: like for like, the same tensor-core
    # instructions as cuBLAS's fp8 kernel; against fp16, the datasheet's 2x.
    lesson.predict("fp8-vs-scaled-mm-fast-4096", 1.0,
                   "cuBLAS's rate: the same fp8 tensor-core instructions, both "
                   "accumulating in the tensor core", 0.10)
    lesson.predict("fp8-vs-fp16-cublas-4096", 1979 / 989,
                   "dense tensor-core rates of an H200's datasheet: 1979 TFLOP/s "
                   "fp8 over 989 fp16", 0.15)
    ms = bench_interleaved(paths(best, *operands))
    flop = 2.0 * n**3
    # end snippet
    lesson.table(
        "speed", ["path", "TFLOP/s"],
        [[name, tflops(flop, ms.median(name))] for name in ms],
        f"{n}³, median of 15 rounds taking turns, all in one run; quantization "
        "is not timed.",
    )
    triton_fast, triton_promoted = "fp8 Triton, fast accum", "fp8 Triton, promoted"
    rate = {"unit": "TFLOP/s", "work": flop}
    lesson.benchmark(
        "fp8-vs-scaled-mm-4096", "fp8 Triton vs torch._scaled_mm, 4096³",
        ms, triton_fast, "fp8 torch._scaled_mm", **rate,
        baseline_name="torch._scaled_mm (cuBLAS fp8)", threshold=0.6, stretch=0.95,
        note="the lesson's kernel (Triton's default fast accumulation) against "
        f"_scaled_mm's default; {best.label()}",
    )
    lesson.benchmark(
        "fp8-vs-scaled-mm-fast-4096",
        "fp8 Triton vs torch._scaled_mm, both fast accumulation, 4096³",
        ms, triton_fast, "fp8 torch._scaled_mm, fast accum", **rate,
        baseline_name="torch._scaled_mm, use_fast_accum=True",
        note="like for like: both let the tensor core accumulate across all of K",
    )
    lesson.benchmark(
        "fp8-promoted-vs-scaled-mm-4096",
        "fp8 Triton promoted vs torch._scaled_mm, 4096³",
        ms, triton_promoted, "fp8 torch._scaled_mm", **rate,
        baseline_name="torch._scaled_mm (cuBLAS fp8)",
        note="like for like: both promote partial sums into fp32",
    )
    lesson.benchmark(
        "fp8-vs-fp16-cublas-4096", "fp8 Triton vs fp16 cuBLAS, 4096³",
        ms, triton_fast, "fp16 torch.matmul", **rate,
        baseline_name="torch.matmul fp16 (cuBLAS)", threshold=1.3, gate=False,
        note="what the narrower type buys; the datasheet ratio is 2",
    )


def error_vs_k(lesson: Lesson, best: Config) -> None:
    """How each accumulation mode's error grows with the length of the sum."""
    # snippet: error-vs-k
    # 1024 x 1024 outputs, K from 256 to 16384. Against the float64 product
    # of the fp8 values, so only accumulation and the fp16 output count;
    # the quantization error (against the fp16 inputs) is drawn for scale.
    M = N = lesson.size(gpu=1024, smoke=128)
    ks = lesson.size(gpu=[256, 1024, 4096, 16384], smoke=[256, 1024])
    on_cpu = bool(lesson.sanitize)  # float64 products off the GPU under the tool
    rows = []
    for K in ks:
        torch.manual_seed(K)
        a = torch.randn(M, K, device="cuda", dtype=torch.float16)
        bt = torch.randn(N, K, device="cuda", dtype=torch.float16)
        (qa, sa), (qb, sb) = quantize_e4m3(a), quantize_e4m3(bt)
        exact_q = product64(dequantize64(qa, sa), dequantize64(qb, sb), on_cpu)
        fast = scaled_matmul(qa, qb, sa, sb, best)
        promoted = scaled_matmul(qa, qb, sa, sb, PROMOTED_CONFIG)
        quantized = rel_errors(fast, product64(a, bt, on_cpu))[1]
        rows.append([K, rel_errors(fast, exact_q)[1],
                     rel_errors(promoted, exact_q)[1], quantized])
    # end snippet
    lesson.table(
        "error-vs-k",
        ["K", "fast accum: rms err / rms C", "promoted: rms err / rms C",
         "against the fp16 inputs (fast)"],
        rows,
        "1024 x 1024 outputs, randn inputs. The first two columns count "
        "accumulation and the fp16 output only; the last adds quantization.",
    )

    def draw(fig):
        ax = fig.subplots()
        ax.plot(ks, [r[3] for r in rows], "s:",
                label="whole error: fast, against the fp16 inputs")
        ax.plot(ks, [r[1] for r in rows], "o-", label="fast accumulation")
        ax.plot(ks, [r[2] for r in rows], "^-", label="promoted every BLOCK_K")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(ks, [str(k) for k in ks])
        ax.set_xlabel("K (length of each dot product)")
        ax.set_ylabel("rms error / rms C")
        fig.legend(loc="outside lower center", ncols=1)

    lesson.plot("error-vs-k", "Error of the fp8 kernel against K: the accumulation "
                "modes against the exact product of the fp8 values, and the whole "
                "error against the fp16 inputs.", draw, size=(7.0, 5.6))


# Why a smoke run (lessonkit.py) skips the GPU steps too: every one runs the
# kernel on float8 operands.
NO_FLOAT8 = "the interpreter has no float8, and the kernel runs on float8 inputs"


def main() -> int:
    lesson = Lesson("fp8-matmul")
    device = lesson.device()
    # 4096^3 on the GPU; under compute-sanitizer every step at a size each tool
    # finishes (K still a multiple of 16 for the fp8 descriptors).
    n = lesson.size(gpu=4096, smoke=256)
    with lesson.step("quantizers"):
        check_quantizers(lesson, device)
    if lesson.step("pick-config", needs_gpu="the configurations race on GPU time",
                   smoke=NO_FLOAT8):
        best = pick_config(lesson, n)
    if lesson.step("compiled-code", needs_gpu="the interpreter compiles nothing",
                   smoke=False):
        show_compiled_code(lesson, best)
    with lesson.step("correctness"):
        if lesson.interpret:
            check_standin(lesson)
        else:
            check_gpu(lesson, best)
    if lesson.step("accuracy", needs_gpu="the interpreter has no float8", smoke=False):
        accuracy(lesson, best, n)
    if lesson.step("error-vs-k", needs_gpu="the interpreter has no float8",
                   smoke=False):
        error_vs_k(lesson, best)
    if lesson.step("benchmark", needs_gpu="timings need a GPU", smoke=NO_FLOAT8):
        benchmark(lesson, best, n)
    return lesson.finish()


if __name__ == "__main__":
    sys.exit(main())
