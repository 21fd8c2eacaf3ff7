"""Grouped GEMM, as the course records it: the checks, the race and the benchmarks.

The problem table, the grouped kernel, its launchers and the MoE table are in
grouped_gemm.py, which runs alone. This file checks them the way every lesson
is checked (outputs filled with NaN, ragged and empty groups, a float64
reference), counts what the compiler made of the two paths, races the
configurations and times one launch against a loop of torch.matmul and
against torch._grouped_mm, through the course's kit (lessonkit.py), which
keeps the record.

Run it:
    TRITON_INTERPRET=1 python lesson.py   # any machine: checks on the CPU
    python lesson.py                      # a GPU: checks, speed, sweep
"""

import random
import re
import statistics
import sys
from pathlib import Path

import torch
import triton.language as tl

# lessonkit.py sits beside this file in a download, one folder up in the repository.
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]
from grouped_gemm import (  # noqa: E402
    GENERAL,
    GPU,
    aligned,
    grouped,
    grouped_matmul,
    grouped_matmul_kernel,
    moe_problems,
    problem_table,
    sm_count,
)

from lessonkit import (  # noqa: E402
    Lesson,
    bench_interleaved,
    median_interval,
    scaled_rtol,
)


# snippet: tolerance
def tolerance(K, want, dtype=torch.float16):
    """(rtol, atol, why) for one group, as in the FP16 matmul lesson: the
    output rounding (2^-11 for fp16, 2^-8 for bf16) relative to each
    element, plus the FP32 sum over K, which drifts like sqrt(K) roundings,
    relative to the group's max|want|."""
    rtol = 2.0**-11 if dtype == torch.float16 else 2.0**-8
    acc_rtol, acc_why = scaled_rtol(0.0, 2.0**-23, max(K, 1))
    scale = float(want.abs().max()) if want.numel() else 0.0
    return rtol, acc_rtol * scale, f"output rounding {rtol:.3g}; fp32 sum {acc_why}"
# end snippet


def make_groups(shapes, device, dtype=torch.float16, seed=0):
    """Random A, B and a NaN-poisoned C per (M, N, K): a tile the kernel
    forgets to write cannot pass."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    groups = []
    for M, N, K in shapes:
        a = torch.randn((M, K), generator=gen).to(device, dtype)
        b = torch.randn((K, N), generator=gen).to(device, dtype)
        c = torch.full((M, N), float("nan"), device=device, dtype=dtype)
        groups.append((a, b, c))
    return groups


def reference(lesson: Lesson, a, b):
    """The exact products of the rounded inputs, summed in float64. Under
    compute-sanitizer on the CPU, so the tool instruments no library kernel."""
    if lesson.sanitize:
        a, b = a.cpu(), b.cpu()
    return a.double() @ b.double()


def check_groups(lesson, name, groups):
    """Each group against float64 on the same (rounded) inputs."""
    ok = True
    for g, (a, b, c) in enumerate(groups):
        if c.numel() == 0:
            continue  # an empty group: the groups after it show it shifted nothing
        want = reference(lesson, a, b)
        rtol, atol, why = tolerance(a.shape[1], want, a.dtype)
        M, K = a.shape
        N = b.shape[1]
        ok &= lesson.close(f"{name}-g{g}-{M}x{N}x{K}", c, want, rtol, atol, why)
    return ok


# snippet: shapes
def ragged_shapes(count: int, seed: int = 2024, lo: int = 256, hi: int = 1024):
    """`count` (M, N, K) with each drawn from [lo, hi]: M any integer (a
    token count), N and K multiples of 8 (model widths), none a multiple of
    the 128x128x64 tile in general."""
    rng = random.Random(seed)
    return [(rng.randint(lo, hi), 8 * rng.randint(lo // 8, hi // 8),
             8 * rng.randint(lo // 8, hi // 8)) for _ in range(count)]
# end snippet


# snippet: checks
# Ragged groups (M, N, K): M of 1, 33, 100; N and K that are not multiples of
# the tile; an empty group (M = 0), which owns no tiles. Fewer programs than
# tiles, so every program walks several groups. Then K = 17 and N = 13 break
# the alignment promise: rows no longer start on 16 bytes, and the launch
# takes the general path (ALIGNED=False).
ALIGNED_SHAPES = {
    "interpreter": [(40, 24, 72), (100, 64, 40), (1, 8, 16), (0, 16, 8),
                    (64, 64, 64), (33, 200, 8)],
    "gpu": [(40, 24, 72), (1000, 1016, 984), (1, 8, 16), (0, 16, 8),
            (4096, 512, 1024), (33, 200, 8), (129, 1032, 4104)],
}
UNALIGNED_SHAPES = [(20, 13, 17), (5, 30, 9), (70, 40, 48)]
# end snippet


def check_correctness(lesson: Lesson, device: str) -> None:
    shapes = ALIGNED_SHAPES["interpreter" if lesson.interpret else "gpu"]
    # Under compute-sanitizer, groups small enough for every tool: the same
    # kinds of case (ragged, a row of one, an empty group, K of 8).
    shapes = lesson.size(gpu=shapes, smoke=[(40, 24, 72), (300, 264, 200), (1, 8, 16),
                                            (0, 16, 8), (33, 200, 8)])
    groups = make_groups(shapes, device, seed=1)
    table = grouped(groups)
    lesson.check("fast-path-taken", aligned(table), "all groups aligned",
                 why="groups whose rows start on 16 bytes take the fast path")
    check_groups(lesson, "aligned", groups)
    groups = make_groups(UNALIGNED_SHAPES, device, seed=2)
    table = grouped(groups)
    lesson.check("general-path-taken", not aligned(table), "K=17, N=13: unaligned",
                 why="one unaligned group sends the launch down the general path")
    check_groups(lesson, "unaligned", groups)
    if lesson.interpret:
        # The GPU's own tiles once (warps and stages mean nothing here):
        # 1000 rows make eight 128-row tiles, the last one wrapping.
        groups = make_groups([(1000, 136, 72), (200, 264, 200)], device, seed=3)
        grouped(groups, config={k: GPU[k] for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K")})
        check_groups(lesson, "gpu-tiles", groups)
    else:
        # The benchmark's 16 groups, and bf16 (the interpreter has no bf16).
        groups = make_groups(lesson.size(gpu=ragged_shapes(16),
                                         smoke=ragged_shapes(4, lo=8, hi=48)),
                             device, seed=4)
        grouped(groups)
        check_groups(lesson, "bench-shapes", groups)
        groups = make_groups(shapes, device, dtype=torch.bfloat16, seed=5)
        grouped(groups)
        check_groups(lesson, "bf16", groups)


def moe_reference(lesson: Lesson, x, w, sizes):
    """Each expert's rows against its own weight, in float64."""
    starts = [sum(sizes[:e]) for e in range(len(sizes))]
    return torch.cat([reference(lesson, x[s:s + m], w[e])
                      for e, (s, m) in enumerate(zip(starts, sizes, strict=True))])


def show_compiled_code(lesson: Lesson, device: str) -> None:
    """The PTX of the two paths: how A and B travel to the tensor cores."""
    groups = make_groups([(256, 256, 256)], device, seed=8)
    table = problem_table(groups).to(device)
    rows = []
    for label, ok, config in (("ALIGNED=True (hints)", True, GPU),
                              ("ALIGNED=False (general)", False, GENERAL)):
        compiled = grouped_matmul_kernel[(1,)](table, 1, DTYPE=tl.float16,
                                               ALIGNED=ok, **config)
        ptx = compiled.asm["ptx"]
        rows.append([
            label,
            "{BLOCK_M}x{BLOCK_N}x{BLOCK_K}, {num_warps} warps".format(**config),
            len(re.findall(r"cp\.async\.c[ag]\.shared\.global", ptx)),
            len(re.findall(r"ld\.global(?:\.(?!v\d)[\w:]+)*\.b16\b", ptx)),
            len(re.findall(r"st\.global(?:\.(?!v\d)[\w:]+)*\.v4\.b32", ptx)),
            getattr(compiled, "n_regs", None),
            getattr(compiled, "n_spills", None),
        ])
    lesson.table(
        "compiled",
        ["kernel", "tile", "cp.async (16-byte)", "2-byte ld.global",
         "16-byte st.global", "registers / thread", "spilled registers"],
        rows,
        "PTX of the grouped kernel with and without the alignment hints "
        "(static instruction counts, 3 stages).",
    )


def loop_of_matmuls(groups):
    def run():
        for a, b, c in groups:
            torch.matmul(a, b, out=c)
    return run


def race_configs(lesson: Lesson, device: str) -> tuple:
    """Tile shape and programs per SM, raced on the benchmark's 16 groups."""
    shapes = lesson.size(gpu=ragged_shapes(16), smoke=ragged_shapes(4, lo=8, hi=48))
    groups = make_groups(shapes, device, seed=9)
    table = problem_table(groups).to(device)
    sms = sm_count()
    small = dict(BLOCK_M=64, BLOCK_N=128, BLOCK_K=64, num_warps=4, num_stages=4)
    candidates = {
        f"128x128x64, 4 warps, 3 stages, {sms} programs": (GPU, sms, True),
        f"128x128x64, 4 warps, 3 stages, {2 * sms} programs": (GPU, 2 * sms, True),
        f"64x128x64, 4 warps, 4 stages, {2 * sms} programs": (small, 2 * sms, True),
        f"no hints: 128x128x32, 8 warps, {2 * sms} programs": (GENERAL, 2 * sms, False),
    }
    fns = {name: (lambda c=c, p=p, h=h: grouped_matmul(table, torch.float16, c, p, h))
           for name, (c, p, h) in candidates.items()}
    ms = bench_interleaved({**fns, "loop": loop_of_matmuls(groups)}, rounds=5,
                           method="events")
    best = min((n for n in candidates if candidates[n][2]), key=ms.median)
    print(f"  the race's winner: {best}")
    config, programs, _ = candidates[best]
    return config, programs, (candidates, ms, best)


def configs_table(lesson: Lesson, race, bench_ms) -> None:
    """The race's table, each row a median of its rounds taking turns with the
    loop; the winner's row from the benchmark's own rounds (named in its last
    column)."""
    candidates, race_ms, best = race
    rows = []
    for name in candidates:
        ms, key, said = race_ms, name, ""
        if name == best:
            ms, key, said = bench_ms, "grouped", "grouped-vs-loop-16"
        speed_up = statistics.median(
            lp / g for g, lp in zip(ms[key], ms["loop"], strict=True))
        rows.append([name, 1e3 * ms.median(key), speed_up, len(ms[key]), said])
    lesson.table("configs", ["configuration", "us per launch", "speed-up vs loop",
                             "rounds", "benchmark"],
                 rows, "16 ragged fp16 groups; medians of rounds taking turns with the "
                 "loop of torch.matmul: the race's for the others, the benchmark's for "
                 f"the one it uses, {best}.")


def benchmark(lesson: Lesson, device: str, config: dict, programs: int):
    shapes = lesson.size(gpu=ragged_shapes(16), smoke=ragged_shapes(4, lo=8, hi=48))
    # snippet: benchmark
    # 16 groups, M, N, K drawn from [256, 1024] with a fixed seed: one launch
    # against a Python loop of 16 torch.matmul calls (cuBLAS), same inputs,
    # same preallocated outputs. FLOPs: 2 * M * N * K per group.
    groups = make_groups(shapes, device, seed=10)
    table = problem_table(groups).to(device)
    flop = sum(2.0 * M * N * K for M, N, K in shapes)
    contenders = {
        "grouped": lambda: grouped_matmul(table, torch.float16, config, programs,
                                          True),
        "loop": loop_of_matmuls(groups),
        # The same launch, paying for a fresh table (host list, one copy).
        "grouped + table": lambda: grouped(groups, config, programs),
    }
    # end snippet
    # Per call, launches included: what a Python loop costs.
    ms = bench_interleaved(contenders, method="events")
    lesson.benchmark(
        "grouped-vs-loop-16", "one grouped launch vs a loop of 16 torch.matmul",
        ms, "grouped", "loop", unit="TFLOP/s", work=flop,
        baseline_name="Python loop of torch.matmul", threshold=1.5, stretch=2.5,
        note=f"16 fp16 groups, M, N, K in [256, 1024], seed 2024; "
             f"{config['BLOCK_M']}x{config['BLOCK_N']}x{config['BLOCK_K']}, "
             f"{programs} programs; the table is built once, outside the timing",
    )
    lesson.benchmark(
        "grouped-with-table-vs-loop-16",
        "the same, building the table on every call", ms, "grouped + table", "loop",
        unit="TFLOP/s", work=flop, baseline_name="Python loop of torch.matmul",
        note="informational: a host-built table costs a list and one copy per call",
    )
    lesson.skip("torch-grouped-mm-ragged",
                "torch._grouped_mm takes groups that share two of M, N, K "
                "(2D x 3D: a common K and N; 2D x 2D: a common M and N); these "
                "16 groups differ in all three, so it cannot express them")
    return shapes, ms


def moe_benchmark(lesson: Lesson, device: str, config: dict, programs: int) -> None:
    E, K, N = lesson.size(gpu=(16, 1024, 2048), smoke=(4, 32, 16))
    lo, hi = lesson.size(gpu=(256, 1024), smoke=(1, 9))  # tokens per expert
    dtype = lesson.size(gpu=torch.bfloat16, smoke=torch.float16)  # no bf16 on a CPU
    # snippet: moe-benchmark
    # The shape torch._grouped_mm was made for: 16 experts sharing K and N,
    # a ragged number of tokens each. bf16, the dtype of its fast path.
    rng = random.Random(11)
    sizes = [rng.randint(lo, hi) for _ in range(E)]
    T, starts = sum(sizes), [sum(sizes[:e]) for e in range(E)]
    counts = torch.tensor(sizes, device=device)
    offsets = torch.cumsum(counts, 0).to(torch.int32)  # _grouped_mm's form
    x = torch.randn((T, K), device=device, dtype=dtype)
    w = torch.randn((E, K, N), device=device, dtype=dtype)
    out = torch.full((T, N), float("nan"), device=device, dtype=dtype)
    table = moe_problems(x, w, out, counts)
    flop = 2.0 * T * K * N
    experts = [(x[s:s + m], w[e], out[s:s + m])
               for e, (s, m) in enumerate(zip(starts, sizes, strict=True))]
    fast = aligned(table)
    fns = {"grouped": lambda: grouped_matmul(table, x.dtype, config, programs, fast),
           "loop": loop_of_matmuls(experts)}
    # end snippet
    fns["grouped"]()
    want = moe_reference(lesson, x, w, sizes)
    rtol, atol, why = tolerance(K, want, dtype)
    lesson.close("moe-bf16-bench-shape", out, want, rtol, atol, why)
    reason = ""
    if not hasattr(torch, "_grouped_mm"):
        reason = f"torch {torch.__version__} has no torch._grouped_mm"
    else:
        try:
            got = torch._grouped_mm(x, w, offs=offsets)
            lesson.close("torch-grouped-mm-moe", got, want, rtol, atol,
                         "the baseline itself, same bound")
            fns["torch._grouped_mm"] = lambda: torch._grouped_mm(x, w, offs=offsets)
        except (RuntimeError, TypeError, ValueError) as err:
            reason = f"torch._grouped_mm refused: {str(err).splitlines()[0][:200]}"
    if reason:
        lesson.skip("torch-grouped-mm-moe", reason)
    ms = bench_interleaved(fns, rounds=10, method="events")
    if "torch._grouped_mm" in ms:
        lesson.benchmark(
            "grouped-vs-torch-grouped-mm-moe", "MoE shape vs torch._grouped_mm (bf16)",
            ms, "grouped", "torch._grouped_mm", unit="TFLOP/s", work=flop,
            baseline_name="torch._grouped_mm", gate=False,
            note=f"report only: {E} experts, K={K}, N={N}, {T} tokens, bf16",
        )
    lesson.benchmark(
        "grouped-vs-loop-moe", "MoE shape vs a loop of torch.matmul (bf16)",
        ms, "grouped", "loop", unit="TFLOP/s", work=flop,
        baseline_name="Python loop of torch.matmul", gate=False,
        note=f"report only: {E} experts, K={K}, N={N}, {T} tokens, bf16",
    )


def sweep_and_plot(lesson: Lesson, device: str, config: dict, programs: int,
                   benchmarked: tuple) -> None:
    """1 to 64 groups: where does one launch start to pay? Each point the median
    of rounds taking turns with the loop, with a 95 % interval; at the
    benchmark's 16 groups, the benchmark's own rounds."""
    all_shapes = lesson.size(gpu=ragged_shapes(64), smoke=ragged_shapes(8, lo=8, hi=32))
    counts = lesson.size(gpu=[1, 2, 4, 8, 16, 32, 64], smoke=[1, 8])
    bench_shapes, bench_ms = benchmarked
    rows, points = [], {"grouped": [], "loop": [], "speed-up": []}
    for n in counts:
        shapes = all_shapes[:n]
        if shapes == bench_shapes:
            ms, said = bench_ms, f"benchmark, {len(bench_ms['grouped'])}"
        else:
            groups = make_groups(shapes, device, seed=12)
            table = problem_table(groups).to(device)
            ms = bench_interleaved({
                "grouped": lambda t=table: grouped_matmul(t, torch.float16, config,
                                                          programs, True),
                "loop": loop_of_matmuls(groups),
            }, rounds=7, rep_ms=10, warm_s=0.2, method="events")
            said = f"sweep, {len(ms['grouped'])}"
        for name in ("grouped", "loop"):
            points[name].append(median_interval([1e3 * t for t in ms[name]]))
        ratios = [lp / g for g, lp in zip(ms["grouped"], ms["loop"], strict=True)]
        points["speed-up"].append(median_interval(ratios))
        g, lp = 1e3 * ms.median("grouped"), 1e3 * ms.median("loop")
        flop = sum(2.0 * M * N * K for M, N, K in shapes)
        low, high = points["speed-up"][-1][1:]
        rows.append([n, g, lp, statistics.median(ratios), f"[{low:.3g}, {high:.3g}]",
                     flop / g * 1e-6, flop / lp * 1e-6, said])
    lesson.table("groups-sweep",
                 ["groups", "grouped us", "loop us", "speed-up", "95 % interval",
                  "grouped TFLOP/s", "loop TFLOP/s", "rounds"], rows,
                 "The first n of 64 ragged fp16 groups (M, N, K in [256, 1024], "
                 "seed 2024); medians of rounds taking turns (at 16 groups the "
                 "benchmark's), the speed-up's with its 95 % interval.")

    def bars(ax, values, fmt, **style):
        mid = [v[0] for v in values]
        err = [[m - v[1] for m, v in zip(mid, values, strict=True)],
               [v[2] - m for m, v in zip(mid, values, strict=True)]]
        ax.errorbar(counts, mid, yerr=err, fmt=fmt, capsize=3, **style)

    def draw(fig):
        top, bottom = fig.subplots(2, 1, sharex=True)  # stacked: a phone's column
        bars(top, points["grouped"], "o-", label="one grouped launch")
        bars(top, points["loop"], "s--", label="loop of torch.matmul")
        for ax in (top, bottom):
            ax.set_xscale("log", base=2)
            ax.set_xticks(counts, [str(c) for c in counts])
        bottom.set_xlabel("number of groups")
        top.set_yscale("log")
        top.set_ylabel("µs per call")
        fig.legend(loc="outside lower center", ncols=2)
        bars(bottom, points["speed-up"], "o-", color="tab:green")
        bottom.axhline(1.0, color="gray", linewidth=0.8)
        bottom.set_ylabel("speed-up")
        bottom.set_ylim(bottom=0)

    lesson.plot("groups-sweep", "Time per call (top) and speed-up of the grouped "
                "launch (bottom) against the number of groups (fp16, M, N, K in "
                "[256, 1024]): medians of interleaved rounds with their confidence "
                "intervals, at 16 groups the benchmark's rounds", draw,
                size=(7.0, 7.0))


def main() -> int:
    lesson = Lesson("grouped-gemm")
    device = lesson.device()
    if lesson.step("compiled-code", needs_gpu="the interpreter compiles nothing",
                   smoke=False):
        show_compiled_code(lesson, device)
    with lesson.step("correctness"):
        check_correctness(lesson, device)
        lesson.not_on_interpreter("bf16 groups", "the interpreter has no bfloat16")
    if lesson.step("race", needs_gpu="the configurations race on GPU time"):
        config, programs, race = race_configs(lesson, device)
    if lesson.step("benchmark", needs_gpu="timings need a GPU"):
        benchmarked = benchmark(lesson, device, config, programs)
        configs_table(lesson, race, benchmarked[1])
    if lesson.step("sweep", needs_gpu="timings need a GPU"):
        sweep_and_plot(lesson, device, config, programs, benchmarked)
    if lesson.step("moe-benchmark", needs_gpu="timings need a GPU"):
        moe_benchmark(lesson, device, config, programs)
    return lesson.finish()


if __name__ == "__main__":
    sys.exit(main())
