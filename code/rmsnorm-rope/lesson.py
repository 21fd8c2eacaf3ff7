"""RMSNorm + RoPE, as the course records it: the checks and benchmarks of the page.

The kernel, its launcher, the eager function it replaces and the cos/sin
table are in rmsnorm_rope.py, which runs alone. This file checks the kernel
the way every lesson is checked (outputs filled with NaN first, token and
head counts no block divides, head_dim 96, views of a fused qkv tensor,
against a float64 reference that shares nothing with the kernel) and times it
against eager PyTorch, torch.compile, a plain copy and Liger-Kernel, through
the course's kit (lessonkit.py), which keeps the record.

Run it:
    TRITON_INTERPRET=1 python lesson.py   # any machine: the checks on the CPU
    python lesson.py                      # a CUDA GPU: checks, GB/s, figure
"""

import sys
import time
from functools import partial
from pathlib import Path

import torch

# lessonkit.py sits beside this file in a download, one folder up in the repository.
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]
from rmsnorm_rope import (  # noqa: E402
    BASE,
    EPS,
    MAX_POS,
    rmsnorm_rope,
    rmsnorm_rope_eager,
    rope_cache,
)

from lessonkit import Lesson, bench_interleaved, gbps, median_interval  # noqa: E402

LIGER = "liger-kernel"  # the optional baseline (lesson.toml [requires.optional])


# snippet: liger
def liger_rms_norm(rms, x, w):
    """Liger-Kernel's RMSNorm (`rms`: liger_kernel.ops.rms_norm) over head_dim.

    Its "gemma" casting mode with offset 0 computes x * rstd * w in float32
    and rounds once, as rmsnorm_rope_eager does before its rotation (the
    default "llama" mode rounds x * rstd before multiplying by w).
    """
    return rms.LigerRMSNormFunction.apply(x, w, EPS, 0.0, "gemma")


def liger_rope_(rope, q, k, cos, sin, seqs):
    """Liger-Kernel's RoPE (`rope`: liger_kernel.ops.rope), in place on q and k.

    q: (tokens, q heads, D) and k: (tokens, kv heads, D), contiguous, hold
    `seqs` sequences of equal length whose positions run 0, 1, 2 ... Liger
    takes (batch, heads, seq, D) views of that memory, and one cos/sin row
    per position of a sequence. Our tables hold each angle once (D / 2
    wide); rotary_dim=D says so, where Hugging Face duplicates them.
    """
    T, D = q.shape[0], q.shape[-1]
    S = T // seqs

    def heads_first(t):
        return t.view(seqs, S, t.shape[1], D).transpose(1, 2)

    rope.LigerRopeFunction.apply(heads_first(q), heads_first(k), cos[None, :S],
                                 sin[None, :S], None, 1, D)


def liger_rmsnorm_rope(rms_norm, rope, q, k, wq, wk, cos, sin, seqs):
    """The QK-norm path with Liger's kernels: RMSNorm of q and of k, each
    rounded to the input type, then one RoPE launch over both."""
    yq, yk = rms_norm(q, wq), rms_norm(k, wk)
    liger_rope_(rope, yq, yk, cos, sin, seqs)
    return yq, yk


# end snippet


def rms_norm_stand_in(x, w):
    """What liger_rms_norm computes, in torch: for the interpreter, which cannot
    run Liger's RMSNorm kernel (see check_liger)."""
    xf = x.float()
    n = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + EPS) * w.float()
    return n.to(x.dtype)


def check_liger_close(lesson, name, got, want, dtype):
    # Liger rounds the normalized head to `dtype` before rotating it, and the
    # rotation mixes the two halves: that rounding (half an ulp of each of
    # n1, n2) moves an output by up to sqrt(2) half-ulps of the pair's
    # length, itself at most sqrt(2) * max|want|. So one ulp relative, as
    # for our kernel, plus 1.5 ulp of max|want| absolute.
    rtol = RTOL[dtype]
    atol = 1.5 * rtol * float(want.abs().max())
    lesson.close(name, got, want, rtol, atol,
                 f"{str(dtype).removeprefix('torch.')}, rounded twice; atol = 1.5 ulp "
                 "of max|want|")


# snippet: reference
def reference64(x, weight, positions, eps=EPS, base=BASE):
    """Float64 from the rounded inputs; angles from the positions, in float64.

    Nothing here shares code or tables with the kernel: not even the
    cos/sin cache, which the kernel reads in float32.
    """
    x64 = x.detach().to("cpu", torch.float64)
    w64 = weight.detach().to("cpu", torch.float64)
    D = x.shape[-1]
    n = x64 / torch.sqrt(x64.pow(2).mean(dim=-1, keepdim=True) + eps) * w64
    inv_freq = base ** (-2.0 * torch.arange(D // 2, dtype=torch.float64) / D)
    angle = positions.to("cpu", torch.float64)[:, None] * inv_freq[None, :]
    c, s = angle.cos()[:, None, :], angle.sin()[:, None, :]
    n1, n2 = n[..., : D // 2], n[..., D // 2 :]
    return torch.cat((n1 * c - n2 * s, n2 * c + n1 * s), dim=-1)


# end snippet


# One ulp at 1.0 of each 16-bit output type: a result computed in float32
# and rounded once to it is off by at most half of that, relative. A
# float32 output keeps the float32 roundings themselves: the sum of D
# squares (4 * 2^-24 * sqrt(D) for D = 128 is 3e-6), rsqrt (an
# approximate instruction on the GPU) and the rotation; 1e-5 bounds them.
RTOL = {torch.float16: 2.0**-10, torch.bfloat16: 2.0**-7, torch.float32: 1e-5}


def make_inputs(T, H, D, dtype, device, seed, max_pos=MAX_POS):
    """Heads with their own scale (so rstd differs), a weight near 1, and
    random positions anywhere in the cache (packed sequences, decode)."""
    g = torch.Generator(device=device).manual_seed(seed)
    scale = torch.rand(T, H, 1, generator=g, device=device) * 3.0 + 0.25
    x = (torch.randn(T, H, D, generator=g, device=device) * scale).to(dtype)
    weight = (1.0 + 0.3 * torch.randn(D, generator=g, device=device)).to(dtype)
    positions = torch.randint(0, max_pos, (T,), generator=g, device=device)
    return x, weight, positions


def check_close(lesson, name, got, want, dtype):
    # Relative to each value: RTOL above. Where o1 = n1*c - n2*s cancels
    # to near zero, the float32 roundings of the two terms remain: 2^-20 of
    # the largest value bounds them, far below an ulp of the large values.
    rtol = RTOL[dtype]
    atol = 2.0**-20 * float(want.abs().max())
    lesson.close(name, got, want, rtol, atol,
                 f"{str(dtype).removeprefix('torch.')} output; atol = 2⁻²⁰ max|want|")


# snippet: checks
# (tokens, heads, head_dim, dtype): token counts that are not multiples of
# the rows per program, head counts that do not divide it, and head_dim 96,
# whose halves (48) are not a power of two, so the column masks have work to
# do. The GPU adds bf16 (the interpreter has none) and larger shapes.
CHECK_CASES = [(37, 8, 128, torch.float16), (5, 5, 96, torch.float16),
               (1, 32, 64, torch.float32), (19, 3, 128, torch.float32)]
GPU_CHECK_CASES = [(1000, 32, 128, torch.float16), (4097, 8, 128, torch.bfloat16),
                   (333, 5, 96, torch.bfloat16), (1, 32, 128, torch.bfloat16)]


def views_of_qkv(T, Hq, Hkv, D, dtype, device) -> dict:
    """q and k as views of one fused qkv projection: rows of q are not
    contiguous (the token stride is (Hq + 2 Hkv) * D), which is why the kernel
    takes strides."""
    g = torch.Generator().manual_seed(99)
    qkv = torch.randn(T, (Hq + 2 * Hkv) * D, generator=g).to(device, dtype)
    return {"q": qkv[:, : Hq * D].view(T, Hq, D),
            "k": qkv[:, Hq * D : (Hq + Hkv) * D].view(T, Hkv, D)}


# end snippet


def check_correctness(lesson: Lesson, device: str) -> None:
    cases = list(CHECK_CASES)
    if not lesson.not_on_interpreter(
            "bfloat16 inputs", "the interpreter has no bfloat16; the GPU run "
            "checks bf16 (and larger shapes), the interpreter fp16 and fp32"):
        # Under compute-sanitizer (lesson.size's smoke value), bf16 on fewer
        # tokens: the tool runs every kernel many times slower.
        cases += lesson.size(gpu=GPU_CHECK_CASES, smoke=[
            (45, 8, 128, torch.bfloat16), (33, 5, 96, torch.bfloat16),
            (1, 32, 128, torch.bfloat16)])
    tables = {}
    for seed, (T, H, D, dtype) in enumerate(cases):
        x, w, pos = make_inputs(T, H, D, dtype, device, seed)
        if D not in tables:
            tables[D] = rope_cache(D, device)
        cos, sin = tables[D]
        tag = f"{T}x{H}x{D}-{str(dtype).removeprefix('torch.')}"
        want = reference64(x, w, pos)
        out = torch.full_like(x, float("nan"))  # poison: a skipped row fails
        rmsnorm_rope(x, w, cos, sin, pos, out=out)
        check_close(lesson, f"fused-{tag}", out, want, dtype)
        # The eager baseline computes the same thing, to the same bound.
        check_close(lesson, f"eager-{tag}", rmsnorm_rope_eager(x, w, cos, sin, pos),
                    want, dtype)
    T, Hq, Hkv, D = 21, 6, 2, 128
    dtype = torch.float16 if device == "cpu" else torch.bfloat16
    _, w, pos = make_inputs(T, 1, D, dtype, device, 98)
    cos, sin = tables[128]
    for name, t in views_of_qkv(T, Hq, Hkv, D, dtype, device).items():
        out = rmsnorm_rope(t, w, cos, sin, pos)
        check_close(lesson, f"fused-{name}-view-of-qkv", out, reference64(t, w, pos),
                    dtype)


def check_liger(lesson: Lesson, device: str) -> None:
    """Liger's RMSNorm then RoPE against float64, on q and k of 3 sequences."""
    rms = lesson.optional(LIGER, "liger_kernel.ops.rms_norm")
    rope = lesson.optional(LIGER, "liger_kernel.ops.rope")
    if rms is None or rope is None:
        return
    rms_norm = partial(liger_rms_norm, rms)
    if lesson.interpret:
        lesson.skip(
            "liger-rms-norm",
            "Liger's RMSNorm kernel calls eps.to(tl.float32) on its float "
            "argument; the interpreter passes a float argument as a Python "
            "float, which has no .to(), so the kernel runs only compiled. Here "
            "Liger's RoPE gets the same norm from torch; the GPU run checks both",
        )
        rms_norm = rms_norm_stand_in
    seqs, S, Hq, Hkv, D = 3, 7, 6, 2, 128
    dtypes = [torch.float16] if lesson.interpret else [torch.float16, torch.bfloat16]
    cos, sin = rope_cache(D, device)
    pos = torch.arange(seqs * S, device=device) % S
    for seed, dtype in enumerate(dtypes, start=60):
        q, wq, _ = make_inputs(seqs * S, Hq, D, dtype, device, seed)
        k, wk, _ = make_inputs(seqs * S, Hkv, D, dtype, device, seed + 10)
        yq, yk = liger_rmsnorm_rope(rms_norm, rope, q, k, wq, wk, cos, sin, seqs)
        what = "rope" if lesson.interpret else "rmsnorm-rope"
        tag = f"{seqs}x{S}-{str(dtype).removeprefix('torch.')}"
        check_liger_close(lesson, f"liger-{what}-q-{tag}", yq,
                          reference64(q, wq, pos), dtype)
        check_liger_close(lesson, f"liger-{what}-k-{tag}", yk,
                          reference64(k, wk, pos), dtype)


def fused_bytes(x, positions) -> int:
    """What the fused kernel must move: read x, write out, read each
    position and, once, the cos/sin rows the positions use; the weight is
    a few hundred bytes."""
    half = x.shape[-1] // 2
    distinct = int(torch.unique(positions).numel())
    return (2 * x.numel() * x.element_size()
            + positions.numel() * positions.element_size()
            + 2 * distinct * half * 4 + x.shape[-1] * x.element_size())


def benchmark(lesson: Lesson, device: str):
    """The comparisons of the page; their rounds by shape (T, H, D), for the
    token-count sweep, and what the comparison with Liger-Kernel needs."""
    T, H, D = lesson.size(gpu=(32768, 32, 128), smoke=(64, 4, 128))
    dtype = lesson.size(gpu=torch.bfloat16, smoke=torch.float16)  # CPU: no bf16
    # snippet: benchmark
    # A prefill of 8 sequences of 4096 tokens (positions 0..4095 each),
    # 32 query heads of 128, bf16: x is 256 MiB, and the output as much.
    x, w, _ = make_inputs(T, H, D, dtype, device, 5)
    pos = torch.arange(T, device=device) % 4096
    cos, sin = rope_cache(D, device)
    args = (x, w, cos, sin, pos)
    out, dst = torch.empty_like(x), torch.empty_like(x)
    fns = {"fused": lambda: rmsnorm_rope(*args, out=out),
           "eager": lambda: rmsnorm_rope_eager(*args),
           "copy": lambda: dst.copy_(x)}
    # end snippet
    # snippet: measure
    # torch.compile of the same eager function, for one fixed shape.
    # Its compile time counts, so it is measured; a failure is recorded.
    compiled, compile_s = None, 0.0
    try:
        t0 = time.perf_counter()
        compiled = torch.compile(rmsnorm_rope_eager, dynamic=False)
        compiled(*args)
        torch.cuda.synchronize()
        compile_s = time.perf_counter() - t0
        fns["compiled"] = lambda: compiled(*args)
    except Exception as e:  # noqa: BLE001 - any failure becomes a skip
        lesson.skip("torch-compile", f"torch.compile failed: {type(e).__name__}: "
                    f"{str(e).splitlines()[0][:200] if str(e) else ''}")
    # Predictions from the bytes, all memory-bound at one rate: the fused
    # kernel moves a copy's bytes; eager moves about 76 bytes per element
    # of x (the page counts them) against the fused kernel's 4.
    shape = f"{T}x{H}x{D}-bf16"
    lesson.predict(f"fused-vs-copy-{shape}", 1.0,
                   "memory-bound, moving a copy's bytes at a copy's rate", 0.10)
    lesson.predict(f"fused-vs-eager-{shape}", 76 / 4,
                   "bytes per element of x at one bandwidth: eager's 76 over the "
                   "fused kernel's 4", 0.25)
    ms = bench_interleaved(fns)
    nbytes = fused_bytes(x, pos)
    # end snippet

    # What is timed must be right: every 64th token of the timed outputs.
    sl = slice(None, None, 64)
    want = reference64(x[sl], w, pos[sl])
    rmsnorm_rope(*args, out=out)
    check_close(lesson, "fused-benchmark-shape", out[sl], want, dtype)
    if compiled is not None:
        check_close(lesson, "compiled-benchmark-shape", compiled(*args)[sl], want,
                    dtype)

    lesson.benchmark(f"fused-vs-eager-{shape}",
                     f"fused vs eager torch, {T} x {H} x {D}", ms, "fused", "eager",
                     unit="GB/s", work=nbytes,
                     baseline_name="eager PyTorch (same function)",
                     threshold=1.5, stretch=3.0)
    if compiled is not None:
        lesson.benchmark(f"fused-vs-compile-{shape}",
                         f"fused vs torch.compile, {T} x {H} x {D}",
                         ms, "fused", "compiled", unit="GB/s", work=nbytes,
                         baseline_name="torch.compile(dynamic=False)", gate=False,
                         note=f"report only; first call (compile) took "
                         f"{compile_s:.1f} s", library="torch.compile")
    lesson.benchmark(f"fused-vs-copy-{shape}", f"fused vs a copy of x, {T} x {H} x {D}",
                     ms, "fused", "copy", unit="GB/s",
                     work=(nbytes, 2 * x.numel() * x.element_size()),
                     baseline_name="device-to-device copy of x",
                     note="the ceiling: a copy reads and writes x and computes nothing")
    copy_bytes = 2 * x.numel() * x.element_size()
    # The shape the comparison with Liger-Kernel times, too.
    return {(T, H, D): (ms, nbytes, copy_bytes)}, (cos, sin, T, dtype)


def compare_with_liger(lesson: Lesson, device: str, cos, sin, T: int, dtype) -> None:
    """Queries and keys of the same prefill (T tokens of `dtype`), against
    Liger's RMSNorm and RoPE."""
    rms = lesson.optional(LIGER, "liger_kernel.ops.rms_norm")
    rope = lesson.optional(LIGER, "liger_kernel.ops.rope")
    if rms is None or rope is None:
        return
    # snippet: liger-benchmark
    # Liger's RoPE rotates q and k in one launch, so both sides get both:
    # 32 query heads and 8 key heads (grouped-query attention), each with
    # its own norm weight, for 8 sequences of 4096 tokens. Ours is two
    # launches of the fused kernel; Liger's is three: RMSNorm of q, of k,
    # then RoPE of both in place. Its own rounds: nothing it does can change
    # how the comparisons above are timed.
    Hq, Hkv = lesson.size(gpu=(32, 8), smoke=(4, 2))
    D, seqs = 128, 8
    q, wq, _ = make_inputs(T, Hq, D, dtype, device, 6)
    k, wk, _ = make_inputs(T, Hkv, D, dtype, device, 7)
    pos = torch.arange(T, device=device) % (T // seqs)
    oq, ok = torch.empty_like(q), torch.empty_like(k)

    def fused():
        rmsnorm_rope(q, wq, cos, sin, pos, out=oq)
        rmsnorm_rope(k, wk, cos, sin, pos, out=ok)

    def liger():
        return liger_rmsnorm_rope(partial(liger_rms_norm, rms), rope, q, k, wq, wk,
                                  cos, sin, seqs)

    ms = bench_interleaved({"fused": fused, "liger": liger})
    nbytes = fused_bytes(q, pos) + fused_bytes(k, pos)
    # end snippet
    # What is timed must be right: every 64th token of both outputs.
    sl = slice(None, None, 64)
    fused()
    yq, yk = liger()
    for name, got, x, w in (("q", oq, q, wq), ("k", ok, k, wk)):
        check_close(lesson, f"fused-{name}-liger-shape", got[sl],
                    reference64(x[sl], w, pos[sl]), dtype)
    for name, got, x, w in (("q", yq, q, wq), ("k", yk, k, wk)):
        check_liger_close(lesson, f"liger-{name}-benchmark-shape", got[sl],
                          reference64(x[sl], w, pos[sl]), dtype)
    kind = str(dtype).removeprefix("torch.").replace("bfloat", "bf")
    lesson.benchmark(f"qk-fused-vs-liger-{T}x{Hq}-{Hkv}x{D}-{kind}",
                     f"fused q and k vs Liger-Kernel RMSNorm + RoPE, {T} tokens, "
                     f"{Hq} + {Hkv} heads of {D}",
                     ms, "fused", "liger", unit="GB/s", work=nbytes,
                     baseline_name="Liger-Kernel LigerRMSNormFunction (gemma "
                     "casting) on q and k, then LigerRopeFunction on both",
                     threshold=0.95, library="Liger-Kernel",
                     note="Liger rotates q and k in one launch, ours in two; Liger "
                     "rounds the normed heads to bf16 before rotating them")


def measure_tokens(T: int, H: int, D: int, dtype, cos, sin, device) -> tuple:
    """Rounds of fused, eager and a copy at T tokens, taking turns; the bytes
    of a fused call and of a copy."""
    x, w, _ = make_inputs(T, H, D, dtype, device, T)
    pos = torch.arange(T, device=device) % 4096
    out, dst = torch.empty_like(x), torch.empty_like(x)
    ms = bench_interleaved({
        "fused": lambda: rmsnorm_rope(x, w, cos, sin, pos, out=out),
        "eager": lambda: rmsnorm_rope_eager(x, w, cos, sin, pos),
        "copy": lambda: dst.copy_(x)}, rounds=5, rep_ms=10, warm_s=0.1)
    return ms, fused_bytes(x, pos), 2 * x.numel() * x.element_size()


def rate(ms, name: str, nbytes: int) -> tuple[float, float, float]:
    """GB/s as a benchmark reports it: the rate at the median time, and the
    95 % interval of the rates of its rounds."""
    _, low, high = median_interval([gbps(nbytes, t) for t in ms[name]])
    return gbps(nbytes, ms.median(name)), low, high


def sweep_and_plot(lesson: Lesson, device: str, measured: dict) -> None:
    # snippet: sweep
    # From a decode step's handful of tokens to a long prefill: 32 heads of
    # 128, bf16, the fused kernel against eager torch and a copy. At the
    # benchmark's shape, the benchmark's own rounds.
    H, D = lesson.size(gpu=(32, 128), smoke=(4, 128))
    dtype = lesson.size(gpu=torch.bfloat16, smoke=torch.float16)  # CPU: no bf16
    cos, sin = rope_cache(D, device)
    timed = {}
    for T in lesson.size(gpu=(64, 512, 4096, 32768), smoke=(8, 64)):
        if (T, H, D) in measured:
            timed[T] = measured[T, H, D]
        else:
            timed[T] = measure_tokens(T, H, D, dtype, cos, sin, device)
    # end snippet
    # GB/s of each contender, as (median, low, high): the fused kernel's bytes
    # for fused and eager, a copy's for the copy.
    points = {T: {k: rate(ms, k, copy_bytes if k == "copy" else nbytes)
                  for k in ("fused", "eager", "copy")}
              for T, (ms, nbytes, copy_bytes) in timed.items()}
    bench_T = next((T for T, h, d in measured if (h, d) == (H, D)), None)
    rows = []
    for T, (ms, _, _) in timed.items():
        _, low, high = points[T]["fused"]
        rows.append([T, *(1e3 * ms.median(k) for k in ("fused", "eager", "copy")),
                     *(points[T][k][0] for k in ("fused", "eager", "copy")),
                     f"[{low:.4g}, {high:.4g}]", len(ms["fused"]),
                     f"fused-vs-eager-{T}x{H}x{D}-bf16" if T == bench_T else ""])
    lesson.table("tokens",
                 ["tokens", "fused us", "eager us", "copy us", "fused GB/s",
                  "eager GB/s", "copy GB/s", "fused 95 % interval", "rounds",
                  "benchmark"],
                 rows, f"RMSNorm + RoPE of {H} heads of {D} in bf16 by token count: "
                 "medians; at the benchmark's shape its own rounds (the copy's are "
                 "fused-vs-copy's, the same rounds), elsewhere 5 interleaved rounds "
                 "of their own")

    def draw(fig):
        ax = fig.subplots()
        ts = list(points)
        for key, style, label in (("fused", "o-", "fused Triton kernel"),
                                  ("eager", "s-", "eager PyTorch"),
                                  ("copy", "--", "copy of x (ceiling)")):
            mid = [points[t][key][0] for t in ts]
            err = [[points[t][key][0] - points[t][key][1] for t in ts],
                   [points[t][key][2] - points[t][key][0] for t in ts]]
            ax.errorbar(ts, mid, yerr=err, fmt=style, capsize=2, label=label,
                        **({"color": "gray"} if key == "copy" else {}))
        ax.set_xscale("log", base=2)
        ax.set_xticks(ts, [str(t) for t in ts])
        ax.set_xlabel(f"tokens ({H} heads x {D}, {str(dtype).removeprefix('torch.')})")
        ax.set_ylabel("GB/s")
        ax.set_ylim(bottom=0)
        fig.legend(loc="outside lower center", ncols=2)

    lesson.plot("gbps-by-tokens",
                "RMSNorm + RoPE bandwidth by token count: fused, eager, copy; GB/s "
                "counts the bytes the fused kernel must move; medians with their "
                f"confidence intervals, the benchmark's rounds at {bench_T} tokens",
                draw, size=(7.0, 5.0))


def main() -> int:
    lesson = Lesson("rmsnorm-rope")
    device = lesson.device()
    with lesson.step("correctness"):
        check_correctness(lesson, device)
    if lesson.step("benchmark", needs_gpu="timings need a GPU"):
        measured, timed_shape = benchmark(lesson, device)
    if lesson.step("sweep", needs_gpu="timings need a GPU"):
        sweep_and_plot(lesson, device, measured)
    with lesson.step("libraries"):  # Liger-Kernel's kernels, when installed
        check_liger(lesson, device)
        if not lesson.interpret or lesson.smoke:  # untimed in a smoke run
            compare_with_liger(lesson, device, *timed_shape)
    return lesson.finish()


if __name__ == "__main__":
    sys.exit(main())
