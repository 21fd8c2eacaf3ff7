"""Fused attention, as the course records it: the checks, the race and the benchmarks.

The kernels and their launchers are in fused_attention.py, which runs alone.
This file checks them the way the course checks every lesson (outputs filled
with NaN first, sequence lengths no block divides, inputs built so that a
tail mask one key off cannot hide, a float64 reference with a tolerance from
the error analysis), compiles both for the same tile to compare what they
cost in registers, races every launch configuration against torch's
scaled_dot_product_attention (SDPA), and measures the fastest of each mask
afresh, through the course's kit (lessonkit.py), which keeps the record.

Every kernel the lesson races is an entry of KERNELS and every launch
configuration an entry of GPU_CONFIGS: a faster kernel is one more of each.

Run it:
    TRITON_INTERPRET=1 python lesson.py   # any machine: the checks on the CPU
    python lesson.py                      # a Hopper GPU: checks, race, TFLOP/s
"""

import contextlib
import math
import re
import sys
from pathlib import Path
from typing import NamedTuple

import torch
from triton.runtime.errors import OutOfResources
from triton.tools.tensor_descriptor import TensorDescriptor

# lessonkit.py sits beside this file in a download, one folder up in the repository.
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]
from fused_attention import (  # noqa: E402
    LOG2E,
    TOL,
    attention,
    attention_tma,
    attn_fwd_kernel,
    attn_fwd_tma_kernel,
    reference,
)

from lessonkit import Lesson, bench_interleaved, median_interval  # noqa: E402

# snippet: configs
# Every kernel the lesson races, by name: each takes (q, k, v, causal) and
# the launch configuration as keywords. A new kernel is one more entry here
# and one or more configurations below; the race, the checks at the
# benchmark shape, the benchmarks and the figure pick it up from there.
KERNELS = {"pointer": attention, "TMA": attention_tma}


class Config(NamedTuple):
    kernel: str
    block_m: int
    block_n: int
    num_warps: int
    num_stages: int

    def label(self) -> str:
        return (f"{self.kernel} {self.block_m}x{self.block_n}, "
                f"{self.num_warps} warps, {self.num_stages} stages")

    def __call__(self, q, k, v, causal: bool, sm_scale=None, out=None):
        return KERNELS[self.kernel](
            q, k, v, causal, sm_scale, block_m=self.block_m, block_n=self.block_n,
            num_warps=self.num_warps, num_stages=self.num_stages, out=out)


# Fixed configurations, not an autotuner, to keep the run short.
GPU_CONFIGS = [
    Config("pointer", 128, 64, 8, 3),
    Config("pointer", 128, 128, 8, 3),
    Config("TMA", 128, 128, 8, 3),  # in the Hopper space of Triton's own tutorial
    Config("TMA", 128, 128, 8, 2),
    Config("TMA", 128, 64, 8, 3),
    # Four warps, two stages: the fastest of 20 forward variants timed on the
    # H200 (tools/experiments/perf_variants.py; NOTES.md has the table).
    Config("TMA", 128, 64, 4, 2),
]
# end snippet


def attention_flops(B, H, S, D, causal):
    # Two matmuls (Q K^T and P V), each 2 * S * S * D per head; causal skips half.
    flop = 4.0 * B * H * S * S * D
    return flop / 2 if causal else flop


def reference_on(lesson: Lesson, q, k, v, causal: bool):
    """The float64 reference where it is cheapest to trust: on the CPU under
    compute-sanitizer (no library kernel for the tool to instrument), else
    beside the inputs."""
    if lesson.sanitize:
        q, k, v = (t.cpu() for t in (q, k, v))
    return reference(q, k, v, causal)


def check_case(lesson, name, B, H, S, D, causal, device, seed, fn=attention, **cfg):
    torch.manual_seed(seed)
    q, k, v = (torch.randn(B, H, S, D, device=device, dtype=torch.float16)
               for _ in range(3))
    want = reference_on(lesson, q, k, v, causal)
    # Poison: an unwritten row cannot pass (and the memory the check reads
    # back was written, by the fill at least: initcheck does not see TMA stores).
    got = fn(q, k, v, causal, out=torch.full_like(q, float("nan")), **cfg)
    scale = float(want.abs().max())
    lesson.close(name, got, want, rtol=TOL, atol=TOL * scale,
                 why=f"B={B} H={H} S={S} D={D} causal={causal}, fp64 reference, "
                 f"atol = {TOL:g} * max|ref|")


# snippet: tail-check
def tail_inputs(S, D, device, seed):
    """A sequence tail that punishes any key past S, read or merely unmasked.

    q, k, v are views of the first S rows of longer buffers, so memory past
    row S exists and holds poison: keys that would score about +4 * sqrt(D)
    and values of 100. And every real score is about -sqrt(D) (q > 0, k < 0),
    so even a zero key past the end (a load that is masked but a score that
    is not) would outweigh each real key by a factor of about exp(sqrt(D)).
    """
    torch.manual_seed(seed)
    shape = (1, 2, S + 64, D)
    q = torch.rand(shape, device=device) + 0.5
    k = -(torch.rand(shape, device=device) + 0.5)
    v = torch.randn(shape, device=device)
    k[:, :, S:] = 4.0
    v[:, :, S:] = 100.0
    return [t.half()[:, :, :S] for t in (q, k, v)]


# end snippet


def check_tail(lesson, name, S, D, causal, device, seed, fn=attention, **cfg):
    q, k, v = tail_inputs(S, D, device, seed)
    want = reference_on(lesson, q, k, v, causal)
    got = fn(q, k, v, causal, out=torch.full_like(q, float("nan")), **cfg)
    scale = float(want.abs().max())
    lesson.close(name, got, want, rtol=TOL, atol=TOL * scale,
                 why=f"S={S} D={D} causal={causal}, poisoned rows past S, "
                 "all real scores < 0")


def masks():
    return (("full", False), ("causal", True))


# snippet: checks
# The pointer kernel's cases, (B, H, S, D), each run non-causal and causal.
# Small shapes under the interpreter; S = 100 and 200 are not multiples of
# the blocks, so the query-tail and key-tail masks both do work. On the GPU,
# H = 32 and S = 1024 make every size a multiple of 16, as at the benchmark
# shape, so that case runs the very kernel the race times. "diagonal" runs
# the causal diagonal stage with several key blocks per query block
# (BLOCK_M > BLOCK_N); the tails are check_tail's poisoned inputs. Under
# compute-sanitizer, which slows every kernel down, the GPU's blocks on
# the smallest shapes.
POINTER_CHECKS = {
    "interpreter": {
        "cases": [(1, 2, 128, 64), (1, 1, 100, 64), (2, 1, 200, 32)],
        "blocks": {"block_m": 32, "block_n": 32},
        "diagonal": {"block_m": 64, "block_n": 32},
    },
    "gpu": {
        "cases": [(1, 2, 128, 64), (1, 2, 200, 64), (2, 2, 1000, 128),
                  (1, 32, 1024, 128)],
        "blocks": {"block_m": 128, "block_n": 64},
        "diagonal": {"block_m": 128, "block_n": 32, "num_warps": 4},
    },
    "sanitize": {
        "cases": [(1, 2, 128, 64), (1, 2, 200, 64)],
        "blocks": {"block_m": 128, "block_n": 64},
        "diagonal": {"block_m": 128, "block_n": 32, "num_warps": 4},
    },
}
# end snippet


def plan_of(lesson: Lesson, plans: dict) -> dict:
    """The interpreter's cases; on a GPU the GPU's, or under compute-sanitizer
    its own (lesson.size: the smoke value there)."""
    return plans["interpreter" if lesson.interpret else lesson.size("gpu", "sanitize")]


def check_pointer_kernel(lesson: Lesson, device: str) -> None:
    plan = plan_of(lesson, POINTER_CHECKS)
    seed = 0
    for B, H, S, D in plan["cases"]:
        for kind, causal in masks():
            check_case(lesson, f"{kind}-b{B}-h{H}-s{S}-d{D}", B, H, S, D, causal,
                       device, seed, **plan["blocks"])
            seed += 1
    check_case(lesson, "causal-bm-gt-bn-s100", 1, 1, 100, 64, True, device, seed,
               **plan["diagonal"])
    for kind, causal in masks():
        check_tail(lesson, f"{kind}-tail-poison-s100", 100, 64, causal, device,
                   seed + 1, **plan["blocks"])


# snippet: tma-checks
# The TMA kernel through the same kinds of case. BLOCK_M = 2 * BLOCK_N,
# so the causal diagonal spans two key blocks. Every case has B * H > 1
# and most a ragged S, so a copy that ran past S into the next head's
# rows would show; in the tail checks the memory past row S holds poison,
# so the descriptor's shape, not the end of the buffer, must stop a copy.
TMA_CHECKS = {
    "interpreter": {
        "cases": [(1, 2, 128, 64), (2, 2, 100, 32)],
        "blocks": {"block_m": 64, "block_n": 32},
    },
    "gpu": {
        "cases": [(1, 2, 128, 64), (2, 2, 1000, 128), (1, 32, 1024, 128)],
        "blocks": {"block_m": 128, "block_n": 64, "num_warps": 8, "num_stages": 3},
    },
    "sanitize": {
        "cases": [(1, 2, 128, 64), (2, 2, 100, 32)],
        "blocks": {"block_m": 128, "block_n": 64, "num_warps": 8, "num_stages": 3},
    },
}
# end snippet


def check_tma_kernel(lesson: Lesson, device: str) -> None:
    plan = plan_of(lesson, TMA_CHECKS)
    seed = 12
    for B, H, S, D in plan["cases"]:
        for kind, causal in masks():
            check_case(lesson, f"tma-{kind}-b{B}-h{H}-s{S}-d{D}", B, H, S, D, causal,
                       device, seed, fn=attention_tma, **plan["blocks"])
            seed += 1
    for kind, causal in masks():
        check_tail(lesson, f"tma-{kind}-tail-poison-s100", 100, 64, causal, device,
                   seed, fn=attention_tma, **plan["blocks"])


# The shape of a large-model prefill: batch 4, 32 heads, 4096 tokens, head
# dimension 128, fp16.
B, H, S, D = 4, 32, 4096, 128


def bench_inputs(lesson: Lesson, device: str):
    torch.manual_seed(1234)
    shape = lesson.size(gpu=(B, H, S, D), smoke=(1, 2, 128, D))
    return [torch.randn(shape, device=device, dtype=torch.float16) for _ in range(3)]


def show_compiled_code(lesson: Lesson) -> None:
    """Pointer loads against TMA, same tile: what each costs in registers."""
    q, k, v = bench_inputs(lesson, "cuda")
    out = torch.empty_like(q)
    scale = LOG2E / math.sqrt(D)
    # The inputs' own sequence length and head count, not the benchmark's S and
    # H: at smoke size they differ, and a kernel told S = 4096 reads past the
    # end of a 128-token K (compute-sanitizer's memcheck caught it).
    _, heads, seq_len, _ = q.shape
    tile = {"HEAD_DIM": D, "BLOCK_M": 128, "BLOCK_N": 128, "CAUSAL": False,
            "num_warps": 8, "num_stages": 3}
    # One program of each is enough: a launch returns the compiled kernel.
    pointer = attn_fwd_kernel[(1, 1)](
        q, k, v, out, seq_len, heads, scale, *q.stride()[:3], *k.stride()[:3],
        *v.stride()[:3], *out.stride()[:3], **tile)
    descs = [TensorDescriptor.from_tensor(t, [1, 1, 128, D]) for t in (q, k, v, out)]
    tma = attn_fwd_tma_kernel[(1, 1)](*descs, seq_len, heads, scale, **tile)
    rows = []
    for name, compiled in (("pointer", pointer), ("TMA", tma)):
        ptx = compiled.asm["ptx"]
        rows.append([
            name,
            getattr(compiled, "n_regs", None),
            getattr(compiled, "n_spills", None),
            round(compiled.metadata.shared / 1024, 1),
            len(re.findall(r"cp\.async\.c[ag]\.shared\.global", ptx)),
            len(re.findall(r"cp\.async\.bulk\.tensor", ptx)),
            len(re.findall(r"wgmma\.mma_async", ptx)),
        ])
    lesson.table(
        "compiled",
        ["kernel", "registers / thread", "spilled registers", "shared memory KiB",
         "cp.async", "TMA copies", "wgmma"],
        rows,
        f"The two kernels compiled for the same tile ({tile['BLOCK_M']}x"
        f"{tile['BLOCK_N']}, D = {D}, {tile['num_warps']} warps, "
        f"{tile['num_stages']} stages, non-causal); instruction counts are static, "
        "in the PTX.",
    )


def race_configs(lesson: Lesson, device: str) -> dict:
    """Every configuration against SDPA at the benchmark shape; the fastest per
    mask goes on to the benchmark. A configuration that does not fit is left
    out of its mask's rounds."""
    # snippet: race
    q, k, v = bench_inputs(lesson, device)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    race = {}
    for kind, causal in masks():
        fns = {"SDPA": lambda c=causal: sdpa(q, k, v, is_causal=c)}
        for cfg in GPU_CONFIGS:
            # Compile it first: a config whose tiles and pipeline buffers need
            # more shared memory than an SM has fails here. The table records
            # it; the race goes on without it.
            try:
                cfg(q, k, v, causal)
            except OutOfResources as err:
                print(f"  {kind} {cfg.label()} does not fit: {err}")
                continue
            fns[cfg] = lambda c=causal, cfg=cfg: cfg(q, k, v, c)
        # SDPA and every config take turns, round after round, so clock drift
        # under sustained load does not favour whichever is timed first. Three
        # rounds pick the fastest; the benchmark below measures it afresh.
        race[kind] = bench_interleaved(fns, rounds=3)
    # end snippet
    return race


def fastest(race) -> dict:
    return {kind: min((c for c in race[kind] if c != "SDPA"), key=race[kind].median)
            for kind, _ in masks()}


def check_benchmark_shape(lesson: Lesson, device: str, best: dict) -> None:
    """Correctness at the benchmark shape, with the configurations that won:
    against SDPA's own fp16 output on every head (both round the same way, so
    the two differ by about twice the error of each), and against the fp64
    reference on the first four heads of batch 0. Under compute-sanitizer SDPA
    runs its FlashAttention-2 or memory-efficient kernel: cuDNN's stores are
    TMA's, which initcheck does not see, so reading them back there would be
    reported as reading uninitialized memory."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q, k, v = bench_inputs(lesson, device)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    plain = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]
    for kind, causal in masks():
        cfg = best[kind]
        got = cfg(q, k, v, causal, out=torch.full_like(q, float("nan")))
        with sdpa_kernel(plain) if lesson.sanitize else contextlib.nullcontext():
            want = sdpa(q, k, v, is_causal=causal)
        lesson.close(f"{kind}-bench-shape-vs-sdpa", got, want, rtol=2 * TOL,
                     atol=2 * TOL * float(want.abs().max()),
                     why=f"{cfg.label()}; both fp16; the bound doubles the reference "
                     "tolerance")
        ref = reference_on(lesson, q[:1, :4], k[:1, :4], v[:1, :4], causal)
        lesson.close(f"{kind}-bench-shape-vs-fp64", got[:1, :4], ref, rtol=TOL,
                     atol=TOL * float(ref.abs().max()),
                     why=f"{cfg.label()}; batch 0, heads 0-3, fp64 reference, "
                     f"atol = {TOL:g} * max|ref|")
        del got, want, ref


def bench_name(kind: str) -> str:
    return f"{kind}-b{B}-h{H}-s{S}-d{D}-vs-sdpa"


def benchmark(lesson: Lesson, device: str, best: dict) -> dict:
    """The fastest configuration of each mask against SDPA; returns the
    rounds of each mask, which the race's table and figure show too."""
    q, k, v = bench_inputs(lesson, device)
    # snippet: benchmark
    # The fastest configuration of each mask against SDPA, measured afresh:
    # 15 rounds of the two taking turns. FLOPs count the two matmuls only
    # (causal: half). The non-causal run also times what fusion saves: the
    # same attention as three PyTorch ops, which write and read the S x S
    # matrix (B * H * S * S fp16 values, 4.3 GB here).
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def unfused():
        s = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(D))
        return torch.softmax(s, dim=-1) @ v

    contenders = {}
    for kind, causal in masks():
        contenders[kind] = {
            "triton": lambda c=causal, cfg=best[kind]: cfg(q, k, v, c),
            "SDPA": lambda c=causal: sdpa(q, k, v, is_causal=c)}
        if not causal and not lesson.sanitize:  # torch's own: not under the tool
            contenders[kind]["unfused"] = unfused
    # end snippet
    # Under compute-sanitizer the unfused baseline is left out: it is torch's,
    # not the lesson's, and initcheck does not see cuBLAS's TMA stores, so the
    # softmax reading the scores back would be reported as uninitialized.
    ms = {kind: bench_interleaved(fns) for kind, fns in contenders.items()}
    for kind, causal in masks():
        flop = attention_flops(B, H, S, D, causal)
        lesson.benchmark(
            bench_name(kind),
            f"fused attention vs SDPA, {kind}, B{B} H{H} S{S} D{D} fp16",
            ms[kind], "triton", "SDPA", unit="TFLOP/s", work=flop,
            baseline_name="torch SDPA", threshold=0.6, stretch=0.9,
            note=f"fastest of {len(GPU_CONFIGS)} configurations in the race: "
            f"{best[kind].label()}",
        )
        if "unfused" in contenders[kind]:
            lesson.benchmark(
                f"{kind}-b{B}-h{H}-s{S}-d{D}-vs-unfused",
                f"fused attention vs unfused torch, {kind}, B{B} H{H} S{S} D{D}",
                ms[kind], "triton", "unfused", unit="TFLOP/s", work=flop,
                baseline_name="unfused torch (matmul, softmax, matmul)", gate=False,
                note="informational: the cost of materialising the score matrix; "
                f"{best[kind].label()}",
            )
    return ms


def rounds_of(race: dict, bench: dict, best: dict, kind: str, name):
    """Where the race's row or bar for `name` comes from: (timings, its key
    there, the benchmark's name or ""). SDPA and the configuration the
    benchmark measured are the benchmark's rounds; the others the race's."""
    if name == "SDPA":
        return bench[kind], "SDPA", bench_name(kind)
    if name == best[kind]:
        return bench[kind], "triton", bench_name(kind)
    return race[kind], name, ""


def race_table(lesson: Lesson, race: dict, bench: dict, best: dict) -> None:
    """Every configuration's time and rate, after the benchmark: the rows it
    measured (SDPA and each mask's fastest) are its rounds, not the race's."""
    rows = []
    for kind, causal in masks():
        flop = attention_flops(B, H, S, D, causal)
        for name in race[kind]:
            timings, key, said = rounds_of(race, bench, best, kind, name)
            ms = timings.median(key)
            label = "torch SDPA" if name == "SDPA" else name.label()
            kernel = "SDPA" if name == "SDPA" else name.kernel
            rows.append([kind, kernel, label, ms, flop / ms * 1e-9, len(timings[key]),
                         said])
        rows += [[kind, cfg.kernel, cfg.label(), "does not fit", "", "", ""]
                 for cfg in GPU_CONFIGS if cfg not in race[kind]]
    lesson.table(
        "configs",
        ["mask", "kernel", "configuration", "ms", "TFLOP/s", "rounds", "benchmark"],
        rows,
        f"B={B}, H={H}, S={S}, D={D}, fp16: each the median of its rounds, the "
        "race's, in which SDPA and every configuration took turns, or, for SDPA "
        "and the fastest of each mask, those of the benchmark named in the last "
        "column",
    )


def plot_race(lesson: Lesson, race: dict, bench: dict, best: dict) -> None:
    """Each configuration's speed as a fraction of SDPA's, full and causal side
    by side, with the lesson's two targets; the title names the winners. Each
    bar is the median of the per-round ratios with its interval, the winners'
    from the benchmark's rounds (the benchmark's own ratio)."""
    configs = [c for c in GPU_CONFIGS if all(c in race[kind] for kind, _ in masks())]

    def ratio(kind, cfg) -> tuple[float, float, float]:
        timings, key, _ = rounds_of(race, bench, best, kind, cfg)
        return median_interval([sdpa / ms for ms, sdpa in
                                zip(timings[key], timings["SDPA"], strict=True)])

    winners = {best[kind].label() for kind, _ in masks()}
    title = (f"fastest, both masks: {winners.pop()}" if len(winners) == 1 else
             "\n".join(f"fastest, {kind}: {best[kind].label()}"
                       for kind, _ in masks()))

    def draw(fig):
        ax = fig.subplots()
        height = 0.38
        ys = range(len(configs))
        for i, (kind, _) in enumerate(masks()):
            mid, low, high = zip(*(ratio(kind, c) for c in configs), strict=True)
            err = [[m - lo for m, lo in zip(mid, low, strict=True)],
                   [hi - m for m, hi in zip(mid, high, strict=True)]]
            bars = ax.barh([y + (i - 0.5) * height for y in ys], mid, height,
                           xerr=err, capsize=2, label=kind)
            if best[kind] in configs:  # the winner, outlined
                bars[configs.index(best[kind])].set_edgecolor(ax.yaxis.label.get_color())
                bars[configs.index(best[kind])].set_linewidth(2)
        right = max(1.15, 1.1 * max(ratio(kind, c)[2] for kind, _ in masks()
                                    for c in configs))
        for x, style, text in ((1.0, "-", "SDPA"), (0.9, "--", "stretch 0.9"),
                               (0.6, ":", "gate 0.6")):
            ax.axvline(x, color="gray", linestyle=style, linewidth=1, label=text)
        ax.set_yticks(list(ys), [f"{c.kernel} {c.block_m}x{c.block_n}, "
                                 f"{c.num_warps}w {c.num_stages}s" for c in configs])
        ax.invert_yaxis()  # the first configuration on top
        ax.set_xlim(0, right)
        ax.set_xlabel("speed / SDPA's (SDPA = 1)")
        fig.suptitle(f"B={B}, H={H}, S={S}, D={D}, fp16\n{title}")
        handles, labels = ax.get_legend_handles_labels()  # lines first: bars first
        fig.legend(handles[3:] + handles[:3], labels[3:] + labels[:3],
                   loc="outside lower center", ncols=3)

    lesson.plot("tflops-by-config", "Each kernel and configuration as a fraction of "
                "SDPA's speed in the same rounds, non-causal and causal (w: warps, s: "
                "pipeline stages): the median of the per-round ratios, with the range "
                "of the race's 3 rounds; the outlined bar of each mask is the "
                "fastest, drawn from the benchmark's rounds with its confidence "
                "interval.", draw, size=(7.0, 5.6))


def main() -> int:
    lesson = Lesson("fused-attention")
    device = lesson.device()
    if lesson.step("compiled-code", needs_gpu="the interpreter compiles nothing",
                   smoke=False):
        show_compiled_code(lesson)
    with lesson.step("correctness"):
        check_pointer_kernel(lesson, device)
        check_tma_kernel(lesson, device)
    if lesson.step("race", needs_gpu="the configurations race on GPU time"):
        race = race_configs(lesson, device)
        best = fastest(race)
        check_benchmark_shape(lesson, device, best)
    if lesson.step("benchmark", needs_gpu="timings need a GPU"):
        bench = benchmark(lesson, device, best)
        race_table(lesson, race, bench, best)
        plot_race(lesson, race, bench, best)
    return lesson.finish()


if __name__ == "__main__":
    sys.exit(main())
