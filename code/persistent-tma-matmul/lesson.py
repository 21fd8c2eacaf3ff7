"""Persistent TMA matmul, as the course records it: the checks and benchmarks.

The kernels and their launchers are in persistent_tma_matmul.py, which runs
alone. This file checks the three steps the way every lesson is checked
(outputs filled with NaN first, shapes no tile divides, a float64 reference
and a tolerance from the error analysis), reads what the compiler made of
them, and times them against cuBLAS in the same rounds, through the course's
kit (lessonkit.py), which keeps the record.

Run it:
    TRITON_INTERPRET=1 python lesson.py   # any machine: the checks on the CPU
    python lesson.py                      # Hopper: checks, TFLOP/s
"""

import math
import sys
from functools import partial
from pathlib import Path

import torch

# lessonkit.py sits beside this file in a download, one folder up in the repository.
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]
from persistent_tma_matmul import (  # noqa: E402
    BLOCK_K,
    BLOCK_M,
    BLOCK_N,
    BLOCKS,
    matmul_persistent_tma,
    matmul_tiled,
    matmul_tma,
)

from lessonkit import Lesson, bench_interleaved, median_interval, scaled_rtol  # noqa: E402

# -- checks ----------------------------------------------------------------------

FP16_RTOL = 1e-3  # the output is rounded to fp16: 2**-11 relative, under this value
F32_EPS = 2.0**-23  # the accumulator is fp32


def reference(a, b, on_cpu=False):
    """The same fp16 inputs multiplied in float64, and the course's tolerance.

    What is left between the kernel and this is its fp32 accumulation and its
    fp16 output. on_cpu: the product on the CPU (under compute-sanitizer, so
    that no library kernel runs under the tool), moved to a's device.
    """
    if on_cpu:
        want = (a.cpu().double() @ b.cpu().double()).to(a.device)
    else:
        want = a.to(torch.float64) @ b.to(torch.float64)
    rtol, why = scaled_rtol(FP16_RTOL, F32_EPS, a.shape[1])
    return want, rtol, rtol * float(want.abs().max()), why


def nan_output(M, N, device):
    """Poison: a tile that no program writes stays NaN and fails the check."""
    return torch.full((M, N), float("nan"), device=device, dtype=torch.float16)


STEPS = {"tiled": "tiled (pointers)", "tma": "TMA, one tile per program",
         "persistent-tma": "persistent TMA"}


def steps(num_sms):
    """The three launchers, each called as run(a, b, out=..., blocks=...)."""
    return {"tiled": matmul_tiled, "tma": matmul_tma,
            "persistent-tma": partial(matmul_persistent_tma, num_sms=num_sms)}


# snippet: checks
def step_results(M, N, K, device, blocks, num_sms, ref_on_cpu=False):
    """Each step's C of random fp16 inputs, into poison, beside the float64
    product and its bound: {step: (got, want, rtol, atol, why)}."""
    torch.manual_seed(M * 7 + N * 3 + K)
    a = torch.randn((M, K), device=device, dtype=torch.float16)
    b = torch.randn((K, N), device=device, dtype=torch.float16)
    want, rtol, atol, why = reference(a, b, ref_on_cpu)
    return {name: (run(a, b, out=nan_output(M, N, device), blocks=blocks), want,
                   rtol, atol, why)
            for name, run in steps(num_sms).items()}


# end snippet


def check_correctness(lesson, device, shapes, blocks, num_sms):
    for M, N, K in shapes:
        results = step_results(M, N, K, device, blocks, num_sms, bool(lesson.sanitize))
        for name, result in results.items():
            lesson.close(f"{name}-{M}x{N}x{K}", *result)


def show_compiled_code(lesson, device, num_sms):
    """What Triton made of each step: registers, shared memory, copies, wgmma."""
    # 4096^3 on the GPU; under compute-sanitizer a small square compiles the
    # same kernels (the sizes stay multiples of 16, as the kernels specialise).
    n = lesson.size(gpu=4096, smoke=256)
    a = torch.randn((n, n), device=device, dtype=torch.float16)
    compiled = {STEPS[name]: run(a, a, with_kernel=True)[1]
                for name, run in steps(num_sms).items()}
    lesson.compiled_table("compiled", compiled, {
        "cp.async (pointer copies)": r"cp\.async\.c[ag]\.shared\.global",
        "TMA loads": r"cp\.async\.bulk\.tensor\.\dd\.shared\S*\.global",
        "TMA stores": r"cp\.async\.bulk\.tensor\.\dd\.global\.shared",
        "wgmma": r"wgmma\.mma_async",
    }, f"What Triton compiled for each step at {n}³ (instructions counted in the "
       "PTX, not executions)")


# snippet: contenders
def contenders(n, device, num_sms):
    """The three steps and cuBLAS at M = N = K = n, on the same random fp16
    inputs (never zeros: the tensor cores draw less power on zeros and clock
    higher). cuBLAS is torch.matmul."""
    a = torch.randn((n, n), device=device, dtype=torch.float16)
    b = torch.randn((n, n), device=device, dtype=torch.float16)
    return {
        "tiled": lambda: matmul_tiled(a, b),
        "tma": lambda: matmul_tma(a, b),
        "persistent-tma": lambda: matmul_persistent_tma(a, b, num_sms),
        "cublas": lambda: torch.matmul(a, b),
    }
# end snippet


def measure(n, device, num_sms, rounds):
    """The four taking turns in `rounds`."""
    return bench_interleaved(contenders(n, device, num_sms), rounds=rounds,
                             warm_s=0.5 if rounds > 3 else 0.2)


def benchmark_and_sweep(lesson, device, num_sms):
    # Rounds: 15 where the stretch goal is a percent away, 10 at 8192^3 (each
    # round is slower there), 3 where only a table and a figure are filled.
    sizes = lesson.size(gpu={1024: 3, 2048: 3, 4096: 15, 8192: 10},
                        smoke={128: 3, 256: 15, 384: 10})
    target, large = lesson.size(gpu=(4096, 8192), smoke=(256, 384))
    rates, ratios = {}, {}
    for n, rounds in sizes.items():
        # Predictions, before the rounds. The tiled kernel pays, per tile, the
        # pipeline's fill and its epilogue (about 3 K steps) and idles in the
        # part-empty last wave: the previous lesson's model. The persistent
        # kernel overlaps both, so it should match cuBLAS on the same cores.
        if n == target:
            steps, waves = n // BLOCK_K, (n // BLOCK_M) * (n // BLOCK_N) / num_sms
            lesson.predict(
                "tiled-vs-cublas-4096", steps / (steps + 3) * waves / math.ceil(waves),
                f"cuBLAS's rate, less 3 of {steps + 3} K steps per tile and the idle "
                f"part of {waves:.2f} waves of {num_sms} SMs", 0.10)
        if n in (target, large):
            lesson.predict(
                f"persistent-tma-vs-cublas-{n}", 1.0,
                "cuBLAS's rate: the same tensor cores, no last-wave tail, and each "
                "tile's epilogue overlapped with the next tile's loads", 0.05)
        ms = measure(n, device, num_sms, rounds)
        flop = 2.0 * n**3
        rates[n] = {name: flop / ms.median(name) * 1e-9 for name in ms}
        # Per-round ratios to cuBLAS: their median and its interval.
        ratios[n] = {name: median_interval(
            [c / k for k, c in zip(ms[name], ms["cublas"], strict=True)])
            for name in STEPS}
        if n == target:
            for name, step, goal in (
                    ("tiled", "step 0: the previous lesson's tiled kernel", {}),
                    ("tma", "step 1: TMA loads and store, one tile per program", {}),
                    ("persistent-tma", "step 2: persistent grid, TMA, split "
                     "epilogue, 4 stages", {"threshold": 0.90, "stretch": 1.0})):
                lesson.benchmark(f"{name}-vs-cublas-4096",
                                 f"{STEPS[name]} vs cuBLAS, 4096³ fp16", ms, name,
                                 "cublas", unit="TFLOP/s", work=flop,
                                 baseline_name="torch.matmul (cuBLAS)", note=step,
                                 **goal)
        if n == large:
            lesson.benchmark("persistent-tma-vs-cublas-8192",
                             "persistent TMA vs cuBLAS, 8192³ fp16", ms,
                             "persistent-tma", "cublas", unit="TFLOP/s", work=flop,
                             baseline_name="torch.matmul (cuBLAS)",
                             threshold=0.95, stretch=1.0, note="step 2 at 8192³")
    rows = [[f"{n}³", r["tiled"], r["tma"], r["persistent-tma"], r["cublas"],
             ratios[n]["persistent-tma"][0], sizes[n]] for n, r in rates.items()]
    lesson.table("sweep", ["size", "tiled TFLOP/s", "TMA TFLOP/s",
                           "persistent TMA TFLOP/s", "cuBLAS TFLOP/s",
                           "persistent / cuBLAS", "rounds"], rows,
                 "Square FP16 matmuls: medians of interleaved rounds, cuBLAS "
                 "(torch.matmul) taking its turn in every round; the ratio is the "
                 "median of the per-round ratios")
    plot_sweep(lesson, rates, ratios)


def plot_sweep(lesson, rates, ratios):
    sizes = list(rates)
    # At 1024^3 a 128 x 256 tile grid is 32 programs for 132 SMs: no kernel
    # here fills the GPU, and its ratio would squash the others' differences.
    full = [n for n in sizes if n >= 2048]
    labels = {**STEPS, "cublas": "cuBLAS (torch.matmul)"}
    markers = {"tiled": "o", "tma": "s", "persistent-tma": "^", "cublas": "D"}

    def draw(fig):
        left, right = fig.subplots(2, 1)  # stacked: a phone's column
        for name, label in labels.items():
            left.plot(sizes, [rates[n][name] for n in sizes], marker=markers[name],
                      label=label, linestyle="--" if name == "cublas" else "-")
        # The lines above overlap within a few percent: the ratio to cuBLAS,
        # with each point's 95 % interval, shows the steps apart.
        for i, name in enumerate(STEPS):
            shift = [n * 2 ** (0.06 * (i - 1)) for n in full]  # side by side
            mid = [ratios[n][name][0] for n in full]
            err = [[m - ratios[n][name][1] for n, m in zip(full, mid, strict=True)],
                   [ratios[n][name][2] - m for n, m in zip(full, mid, strict=True)]]
            right.errorbar(shift, mid, yerr=err, marker=markers[name], capsize=3,
                           label=labels[name])
        right.axhline(1.0, color="grey", linewidth=1, linestyle="--")
        for ax, xs in ((left, sizes), (right, full)):
            ax.set_xscale("log", base=2)
            ax.set_xticks(xs, [str(n) for n in xs])
            ax.set_xlabel("M = N = K")
        left.set_ylabel("TFLOP/s")
        left.set_ylim(bottom=0)
        fig.legend(*left.get_legend_handles_labels(), loc="outside lower center",
                   ncols=2)
        right.set_ylabel("kernel / cuBLAS")

    lesson.plot("sweep",
                "Top: TFLOP/s (fp16 in, fp32 accumulate) of the three steps and "
                "cuBLAS. Bottom, from 2048³ up: "
                "each step's ratio to cuBLAS, the median of the per-round ratios "
                "and its confidence interval (at 2048³, the range of 3 rounds)", draw,
                size=(7.0, 7.6))


def main() -> int:
    lesson = Lesson("persistent-tma-matmul")
    device = lesson.device()  # declines below compute capability 9.0 (lesson.toml)
    if lesson.interpret:
        # Small tiles and a pretend machine of 4 SMs, so the persistent loop
        # really loops (up to 3 tiles per program here) and an uneven share
        # of tiles per program is exercised. Shapes are not multiples of the
        # blocks in M, N or K; N and K stay multiples of 8 for TMA.
        num_sms, blocks = 4, (32, 32, 16)
        shapes = [(64, 64, 64), (90, 72, 88), (37, 136, 200)]
    else:
        blocks = BLOCKS
        # 1000x1032: 40 tiles, fewer than the SMs; 4096^2: 512 tiles, an
        # uneven 3 or 4 per program; 777 rows: a ragged last tile row. Under
        # compute-sanitizer: shapes small enough for every tool, and a
        # pretend machine of 4 SMs so that the persistent loop still loops.
        num_sms = lesson.size(
            gpu=torch.cuda.get_device_properties(0).multi_processor_count, smoke=4)
        shapes = lesson.size(
            gpu=[(1000, 1032, 776), (777, 520, 4104), (4096, 4096, 4096)],
            smoke=[(300, 776, 200), (129, 520, 328)])
    print(f"NUM_SMS = {num_sms}, blocks {blocks}")
    with lesson.step("correctness"):
        check_correctness(lesson, device, shapes, blocks, num_sms)
    if lesson.step("compiled-code", needs_gpu="the interpreter compiles nothing",
                   smoke=False):
        show_compiled_code(lesson, device, num_sms)
    if lesson.step("benchmark", needs_gpu="timings need a GPU"):
        benchmark_and_sweep(lesson, device, num_sms)
    return lesson.finish()


if __name__ == "__main__":
    sys.exit(main())
