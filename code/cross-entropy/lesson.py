"""Cross-entropy, as the course records it: the checks, benchmarks and memory.

The kernel, its launcher and the autograd wrapper are in cross_entropy.py,
which runs alone. This file checks them the way every lesson is checked
(vocabularies no block divides, padding rows, poisoned outputs, a float64
reference, tolerances from the roundings), and times them and measures their
peak memory against F.cross_entropy + backward and Liger-Kernel's own kernel,
through the course's kit (lessonkit.py), which keeps the record.

Run it:
    TRITON_INTERPRET=1 python lesson.py   # any machine: the checks on the CPU
    python lesson.py                      # a CUDA GPU: checks, time, memory
"""

import math
import statistics
import sys
from functools import partial
from pathlib import Path

import torch
import torch.nn.functional as F
import triton

# lessonkit.py sits beside this file in a download, one folder up in the repository.
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]
from cross_entropy import (  # noqa: E402
    IGNORE_INDEX,
    FusedCrossEntropy,
    cross_entropy_,
    cross_entropy_kernel,
)

from lessonkit import (  # noqa: E402
    Lesson,
    bench_interleaved,
    bench_ms,
    median_interval,
    scaled_rtol,
)

LIGER = "liger-kernel"  # the optional baseline (lesson.toml [requires.optional])


def bench_shape(lesson: Lesson) -> tuple[int, int, torch.dtype]:
    """(rows, V, dtype) of the benchmark, which the sweeps share: 8192 tokens
    of a 131072-word vocabulary in bf16; tiny in a smoke run (a CPU: no bf16)."""
    n_rows, V = lesson.size(gpu=(8192, 131072), smoke=(64, 3000))
    return n_rows, V, lesson.size(gpu=torch.bfloat16, smoke=torch.float32)


# snippet: reference
def reference(logits, target, ignore_index=IGNORE_INDEX, reduction="mean"):
    """Per-row loss and the gradient in float64, from the same logits."""
    x = logits.double()
    valid = target != ignore_index
    safe = torch.where(valid, target, 0)
    lse = torch.logsumexp(x, dim=1)
    loss_rows = torch.where(valid, lse - x.gather(1, safe[:, None])[:, 0], 0.0)
    grad = torch.softmax(x, dim=1)
    grad[torch.arange(len(x), device=x.device), safe] -= 1.0
    grad *= valid[:, None]
    denom = valid.sum() if reduction == "mean" else 1
    return loss_rows, loss_rows.sum() / denom, grad / denom


# end snippet


# snippet: tolerance
def tolerances(dtype: torch.dtype, V: int) -> tuple[float, float, str]:
    """(rtol, atol, why) for the gradient in `dtype`.

    The kernel works in fp32: the sum d over V terms drifts like sqrt(V)
    roundings (the kit's 4 * eps * sqrt(V) bound), and the gradient is then
    rounded once to the logits' type. fp16's smallest numbers are
    subnormal, spaced 2^-24 apart, so a tiny gradient can be off by half
    of that in absolute terms.
    """
    acc, acc_why = scaled_rtol(0.0, 2.0**-23, V)
    unit = {torch.float32: 2.0**-24, torch.float16: 2.0**-11, torch.bfloat16: 2.0**-8}
    atol = 2.0**-25 if dtype == torch.float16 else 0.0
    why = f"{dtype}: rounding {unit[dtype]:.3g}; fp32 sum {acc_why}"
    return unit[dtype] + acc, atol, why


# end snippet


# snippet: liger
def liger_cross_entropy_(ce, logits, target, n_valid):
    """Liger-Kernel's kernel on the same job; `ce`: liger_kernel.ops.cross_entropy.

    Launched with the arguments its cross_entropy_forward gives it for plain
    cross-entropy: mean reduction, no class weights, no label smoothing, no
    z-loss, no softcap, blocks of up to 32768 logits and its warps (32, or 8
    for 16-bit logits on Blackwell). cross_entropy_forward also counts the
    valid rows with .item() and checks the targets' range on the host: host
    syncs, which no CUDA graph can hold. Here the count comes in as
    `n_valid`, made once.
    """
    n_rows, V = logits.shape
    blackwell = ce.infer_device_arch().startswith("blackwell")
    warps = 8 if logits.element_size() == 2 and blackwell else 32
    loss_rows = torch.zeros(n_rows, dtype=logits.dtype, device=logits.device)
    ce.liger_cross_entropy_kernel[(n_rows,)](
        X_ptr=logits, X_stride=logits.stride(0), Y_ptr=target, Y_stride=1,
        weight_ptr=None, loss_ptr=loss_rows, z_loss_ptr=None, loss_stride=1,
        token_accuracy_ptr=None, token_accuracy_stride=0,
        predicted_tokens_ptr=None, predicted_tokens_stride=0,
        n_cols=V, n_non_ignore=n_valid, sum_non_ignore_weight=n_valid,
        weight_sum=0.0, ignore_index=IGNORE_INDEX, lse_square_scale=0.0,
        label_smoothing=0.0, reduction="mean", softcap=None,
        RETURN_Z_LOSS=False, RETURN_TOKEN_ACCURACY=False,
        RETURN_PREDICTED_TOKENS=False,
        BLOCK_SIZE=min(ce.MAX_FUSED_SIZE, triton.next_power_of_2(V)),
        HAS_WEIGHT=False, HAS_SOFTCAPPING=False, HAS_GRADIENTS=True,
        num_warps=warps,
    )
    # Each row's loss is already divided by n_valid, in the logits' type.
    return loss_rows.sum()


# end snippet


def make_inputs(n_rows, V, dtype, device, ignored=0.1, spread=2.0, seed=0):
    """Random logits (never zeros) and targets; about `ignored` of them padding."""
    g = torch.Generator(device).manual_seed(seed)
    x = torch.randn(n_rows, V, generator=g, device=device, dtype=dtype).mul_(spread)
    t = torch.randint(0, V, (n_rows,), generator=g, device=device)
    t[torch.rand(n_rows, generator=g, device=device) < ignored] = IGNORE_INDEX
    t[0] = 0  # the first and last columns are targets too
    if n_rows > 1:
        t[1] = V - 1
    if n_rows > 2:  # and at least one row is padding, however few rows there are
        t[-1] = IGNORE_INDEX
    return x, t


def check_one(lesson, n_rows, V, dtype, device, block=None, seed=0):
    x, t = make_inputs(n_rows, V, dtype, device, seed=seed)
    # Under compute-sanitizer the reference runs on the CPU: no library kernel
    # of torch's to instrument beside the lesson's own.
    ref = (x.cpu(), t.cpu()) if lesson.sanitize else (x, t)
    want_rows, want_loss, want_grad = reference(*ref)
    grad = x.clone()
    loss_rows = torch.full((n_rows,), float("nan"), device=device)  # poison
    loss = cross_entropy_(grad, t, block=block, loss_rows=loss_rows)
    tag = f"{n_rows}x{V}-{str(dtype).removeprefix('torch.')}" + (
        f"-block{block}" if block else ""
    )
    # The loss is an fp32 log-sum-exp: its error is about the relative error
    # of the sum d, the same 4 * eps * sqrt(V) bound.
    rtol, why = scaled_rtol(2.0**-20, 2.0**-23, V)
    lesson.close(f"loss-rows-{tag}", loss_rows, want_rows, rtol, rtol, why)
    lesson.close(f"loss-mean-{tag}", loss, want_loss, rtol, rtol, why)
    rtol, atol, why = tolerances(dtype, V)
    lesson.close(f"grad-{tag}", grad, want_grad, rtol, atol, why)
    ignored = t == IGNORE_INDEX
    lesson.check(
        f"ignored-rows-zero-{tag}",
        bool(ignored.any()) and bool((grad[ignored] == 0).all()),
        f"{int(ignored.sum())} of {n_rows} rows have target {IGNORE_INDEX}: "
        "their gradient is all 0",
    )


# snippet: checks
# (rows, V, dtype, block) of the checks: vocabularies that are not multiples
# of the block (3000 = 2 blocks of 1024 + 952), one shorter than a single
# block (77), and the block chosen by the launcher (None). Rows mix real
# targets with ignore_index.
CHECK_CASES = {
    "interpreter": [(32, 3000, torch.float32, 1024), (32, 3000, torch.float16, 1024),
                    (16, 77, torch.float16, None), (8, 5000, torch.float16, None)],
    "gpu": [(64, 3000, torch.float16, 1024), (257, 50257, torch.float16, None),
            (257, 50257, torch.bfloat16, None), (64, 131072, torch.bfloat16, 4096),
            (300, 100_000, torch.bfloat16, None)],
    # Under compute-sanitizer: the same vocabularies on few rows.
    "sanitize": [(64, 3000, torch.float16, 1024), (9, 50257, torch.float16, None),
                 (9, 50257, torch.bfloat16, None), (4, 131072, torch.bfloat16, 4096),
                 (5, 100_000, torch.bfloat16, None)],
}
# end snippet


def check_correctness(lesson: Lesson, device: str) -> None:
    cases = CHECK_CASES["interpreter"] if lesson.interpret else lesson.size(
        gpu=CHECK_CASES["gpu"], smoke=CHECK_CASES["sanitize"])
    for seed, (n_rows, V, dtype, block) in enumerate(cases):
        check_one(lesson, n_rows, V, dtype, device, block, seed)
    lesson.not_on_interpreter(
        "bfloat16 logits", "the interpreter has no bfloat16; fp16 and fp32 stand in"
    )

    # The autograd wrapper gives the same gradient through .backward().
    x, t = make_inputs(16, 3000, torch.float16, device, seed=9)
    _, want_loss, want_grad = reference(x, t)
    logits = x.clone().requires_grad_()
    work = logits * 1  # a non-leaf, like the output of the last matmul
    loss = FusedCrossEntropy.apply(work, t)
    loss.backward()
    rtol, atol, why = tolerances(torch.float16, 3000)
    lesson.close("autograd-wrapper-grad", logits.grad, want_grad, rtol, atol, why)


def interpreter_refused(exc: Exception) -> str:
    return (f"this Triton's interpreter could not run Liger's kernel "
            f"({type(exc).__name__}: {str(exc)[:200]}); Triton 3.6's cannot take "
            "a runtime bound in range() under NumPy 2.4, and Liger's loops have "
            "one. The GPU run checks it")


def check_liger(lesson: Lesson, device: str) -> None:
    """Liger-Kernel's kernel, launched as above, against float64 and against
    its own autograd function (the entry point its loss module calls)."""
    ce = lesson.optional(LIGER, "liger_kernel.ops.cross_entropy")
    if ce is None:
        return
    if lesson.interpret:
        cases = [(32, 3000, torch.float32), (32, 3000, torch.float16)]
    else:
        cases = lesson.size(  # few rows under compute-sanitizer
            gpu=[(257, 50257, torch.bfloat16), (64, 131072, torch.bfloat16)],
            smoke=[(9, 50257, torch.bfloat16), (4, 131072, torch.bfloat16)])
    for seed, (n_rows, V, dtype) in enumerate(cases, start=20):
        x, t = make_inputs(n_rows, V, dtype, device, seed=seed)
        tag = f"{n_rows}x{V}-{str(dtype).removeprefix('torch.')}"
        _, want_loss, want_grad = reference(x, t)
        grad = x.clone()
        try:
            loss = liger_cross_entropy_(ce, grad, t, int((t != IGNORE_INDEX).sum()))
        except Exception as exc:  # noqa: BLE001 - only the interpreter may refuse it
            if not lesson.interpret:
                raise
            lesson.skip("liger-under-the-interpreter", interpreter_refused(exc))
            return
        # Its loss: each row's, divided by n_valid, rounded to the logits'
        # type, then a sum rounded to it again: two roundings of that type.
        unit = {torch.float32: 2.0**-24, torch.float16: 2.0**-11,
                torch.bfloat16: 2.0**-8}[dtype]
        rtol, why = scaled_rtol(2.0**-20, 2.0**-23, V)
        lesson.close(f"liger-loss-mean-{tag}", loss, want_loss, 2 * unit + rtol,
                     2 * unit + rtol, f"two roundings to {dtype}; {why}")
        rtol, atol, why = tolerances(dtype, V)
        lesson.close(f"liger-grad-{tag}", grad, want_grad, rtol, atol, why)
        # The same kernel through LigerCrossEntropyFunction: the same bits.
        leaf = x.clone().requires_grad_()
        api_loss = ce.LigerCrossEntropyFunction.apply(leaf, t, None, IGNORE_INDEX)[0]
        api_loss.backward()
        lesson.check(
            f"liger-launch-as-its-autograd-function-{tag}",
            torch.equal(api_loss, loss) and torch.equal(leaf.grad, grad),
            "the launch above gives LigerCrossEntropyFunction's loss and gradient, "
            "bit for bit",
        )


def check_full_shape(lesson: Lesson, device: str) -> None:
    """The benchmark's shape: loss over all rows, gradient on a subset."""
    n_rows, V, dtype = bench_shape(lesson)
    x, t = make_inputs(n_rows, V, dtype, device, seed=42)
    grad = x.clone()
    loss = cross_entropy_(grad, t)
    valid = t != IGNORE_INDEX
    lse = torch.cat([torch.logsumexp(c.double(), 1) for c in x.split(512)])
    x_y = x.gather(1, torch.where(valid, t, 0)[:, None])[:, 0].double()
    want = torch.where(valid, lse - x_y, 0.0).sum() / valid.sum()
    rtol, why = scaled_rtol(2.0**-20, 2.0**-23, V)
    lesson.close("loss-mean-8192x131072-bf16", loss, want, rtol, rtol, why)
    rows = torch.cat([torch.arange(0, 48), torch.arange(n_rows - 16, n_rows)])
    rows = rows.to(device)
    _, _, want_grad = reference(x[rows], t[rows])
    want_grad *= int((t[rows] != IGNORE_INDEX).sum()) / int(valid.sum())
    rtol, atol, why = tolerances(torch.bfloat16, V)
    lesson.close("grad-8192x131072-bf16-64-rows", grad[rows], want_grad, rtol, atol,
                 why)


def show_compiled_code(lesson: Lesson) -> None:
    """What the compiler made of the kernel, at the benchmark's launch."""
    x = torch.randn(4, 131072, device="cuda", dtype=torch.bfloat16)
    t = torch.zeros(4, dtype=torch.int64, device="cuda")
    loss_rows = torch.empty(4, device="cuda")
    denom = torch.ones((), dtype=torch.int64, device="cuda")
    compiled = {
        f"BLOCK {block}, {warps} warps": cross_entropy_kernel[(4,)](
            x, x.stride(0), t, loss_rows, denom, 1.0, 131072, IGNORE_INDEX,
            BLOCK=block, num_warps=warps)
        for block, warps in ((32768, 32), (4096, 4))
    }
    lesson.compiled_table("ptx", compiled, {
        "16-byte loads": r"ld\.global(?:\.(?!v\d)[\w:]+)*\.v4\.b32",
        "16-byte stores": r"st\.global(?:\.(?!v\d)[\w:]+)*\.v4\.b32",
        "ex2.approx": r"ex2\.approx",
        "bar.sync": r"bar\.sync",
    }, "Static counts in the PTX of cross_entropy_kernel (bf16, V = 131072)")


def backward_of(leaf: torch.Tensor, target: torch.Tensor) -> None:
    F.cross_entropy(leaf, target).backward()


def measure_peak(fn) -> float:
    """Bytes allocated at the peak of fn(), above what was allocated before;
    NaN where torch.cuda keeps no statistics (a smoke run, on the CPU)."""
    if not torch.cuda.is_available():
        fn()
        return math.nan
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    fn()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - before


def benchmark(lesson: Lesson, device: str):
    """The comparisons with PyTorch and the peak memory. Returns the rounds
    (the sweeps draw their points at this shape from them) and the inputs the
    comparison with Liger-Kernel times."""
    n_rows, V, dtype = bench_shape(lesson)
    # snippet: benchmark
    # 8192 tokens x 131072 words in bf16: 2 GiB of logits. The fused kernel
    # destroys its input, so every call of either side starts by restoring
    # the same logits from a pristine copy (2 GiB read + 2 GiB written).
    # Both sides pay that copy; the copy alone is timed too, so it can be
    # subtracted round by round.
    x0, t = make_inputs(n_rows, V, dtype, device, seed=1)
    work = torch.empty_like(x0)
    leaf = torch.empty_like(x0).requires_grad_()

    def restore():
        work.copy_(x0)

    def fused():
        work.copy_(x0)
        cross_entropy_(work, t)  # work now holds the gradient

    def torch_ce():
        with torch.no_grad():
            leaf.copy_(x0)
        leaf.grad = None  # a fresh gradient tensor, as in a training step
        F.cross_entropy(leaf, t).backward()

    contenders = {"fused": fused, "torch": torch_ce, "copy": restore}
    # The model, in passes over the logits: PyTorch at least 6, the kernel 3
    # (two reads, one write), the restore 2. At one bandwidth, time is
    # proportional to passes; the kernel's own time is 3 passes at a copy's
    # rate (4.3 TB/s on an H200).
    by_torch, by_fused, by_copy = 6, 3, 2
    # end snippet
    # snippet: measure
    size = x0.numel() * x0.element_size()
    lesson.predict("fused-vs-torch-8192x131072-bf16",
                   (by_torch + by_copy) / (by_fused + by_copy),
                   "passes over the logits at one bandwidth: (6 + 2) / (3 + 2), "
                   "the restore's 2 on both sides", 0.15)
    lesson.predict("fused-vs-torch-net-of-copy", by_torch / by_fused,
                   "passes over the logits at one bandwidth: 6 for PyTorch, 3 for "
                   "the kernel", 0.15)
    lesson.predict("fused-ms-net-of-copy", by_fused * size / 4.3e9,
                   "3 passes over 2 GiB of logits at 4.3 TB/s, an H200's copy rate",
                   0.15, of="fused-vs-torch-net-of-copy", quantity="kernel")
    ms = bench_interleaved(contenders)
    lesson.benchmark(
        "fused-vs-torch-8192x131072-bf16",
        "loss + gradient vs F.cross_entropy + backward, 8192x131072 bf16, "
        "both after a 2 GiB restore",
        ms, "fused", "torch", unit="ms",
        baseline_name="F.cross_entropy(logits, target).backward()",
        threshold=1.0, stretch=1.5,
        note="each call of both sides first copies the logits from a pristine copy",
    )
    # The same rounds with the copy taken out of both sides.
    net = type(ms)(
        fused=[f - c for f, c in zip(ms["fused"], ms["copy"], strict=True)],
        torch=[b - c for b, c in zip(ms["torch"], ms["copy"], strict=True)],
    )
    net.method = ms.method + "; the copy's time of the same round subtracted"
    lesson.benchmark(
        "fused-vs-torch-net-of-copy",
        "the same, the restore's time subtracted from both",
        net, "fused", "torch", unit="ms",
        baseline_name="F.cross_entropy(logits, target).backward()",
        note="informational: (copy + X) - copy, round by round",
    )
    # end snippet

    # snippet: memory
    # Peak memory above the inputs (logits and targets already allocated).
    # The fused side allocates 4 bytes of loss per row and little else;
    # autograd keeps a log-softmax, builds the gradient of the loss with
    # respect to it, and then the logits' gradient, all of the logits' size.
    work.copy_(x0)
    fused_peak = measure_peak(lambda: cross_entropy_(work, t))
    leaf.grad = None
    torch_peak = measure_peak(lambda: F.cross_entropy(leaf, t).backward())
    # end snippet
    size = x0.numel() * x0.element_size()
    rows = [
        ["fused (in place)", fused_peak / 2**20, fused_peak / size],
        ["F.cross_entropy + backward", torch_peak / 2**20, torch_peak / size],
    ]
    lesson.table(
        "peak-memory",
        ["approach", "peak above inputs (MiB)", "x logits' size"],
        rows,
        f"8192 x 131072 bf16 logits ({size / 2**20:.0f} MiB): "
        "torch.cuda.max_memory_allocated() above what was allocated before",
    )
    if not (lesson.not_on_interpreter("peak memory", "a CPU keeps no torch.cuda "
                                      "memory statistics")
            or lesson.not_under_sanitizer("peak memory", "torch.cuda's memory "
                                          "statistics count nothing with the "
                                          "caching allocator off")):
        lesson.check(
            "peak-memory-at-most-half",
            fused_peak <= 0.5 * torch_peak,
            f"fused {fused_peak / 2**20:.2f} MiB vs torch {torch_peak / 2**20:.0f} "
            f"MiB above the inputs: {fused_peak / torch_peak:.2g}x (target <= 0.5x)",
        )
    leaf.grad = None  # 2 GiB given back before the next comparison
    return ms, (x0, t, work)


def compare_with_liger(lesson: Lesson, x0, t, work) -> None:
    """The same job against Liger-Kernel's kernel, on the benchmark's inputs."""
    ce = lesson.optional(LIGER, "liger_kernel.ops.cross_entropy")
    if ce is None:
        return
    # snippet: liger-benchmark
    # Both sides restore the logits first, as above. Liger's launch is
    # isolated in its own rounds: whatever it does can never change how the
    # comparisons with torch are timed.
    n_valid = int((t != IGNORE_INDEX).sum())  # once: the targets never change

    def fused():
        work.copy_(x0)
        cross_entropy_(work, t)

    def liger():
        work.copy_(x0)
        liger_cross_entropy_(ce, work, t, n_valid)

    contenders = {"fused": fused, "liger": liger, "copy": lambda: work.copy_(x0)}
    # end snippet
    ms = bench_interleaved(contenders)
    # What is timed must be right: Liger's loss next to ours (checked
    # against float64 above), its gradient on 64 rows against float64.
    work.copy_(x0)
    ours = float(cross_entropy_(work, t))
    work.copy_(x0)
    theirs = float(liger_cross_entropy_(ce, work, t, n_valid))
    rtol, why = scaled_rtol(2.0**-20, 2.0**-23, x0.shape[1])
    lesson.check(
        "liger-loss-8192x131072-bf16",
        abs(theirs - ours) <= (2 * 2.0**-8 + 2 * rtol) * abs(ours),
        f"Liger {theirs:.6g} vs ours {ours:.6g}: within two bf16 roundings "
        f"(2 * 2⁻⁸) and twice our bound ({why})",
    )
    rows = torch.cat([torch.arange(0, 48), torch.arange(len(t) - 16, len(t))])
    rows = rows.to(t.device)
    _, _, want_grad = reference(x0[rows], t[rows])
    want_grad *= int((t[rows] != IGNORE_INDEX).sum()) / n_valid
    rtol, atol, why = tolerances(torch.bfloat16, x0.shape[1])
    lesson.close("liger-grad-8192x131072-bf16-64-rows", work[rows], want_grad, rtol,
                 atol, why)
    lesson.benchmark(
        "fused-vs-liger-8192x131072-bf16",
        "loss + gradient vs Liger-Kernel's kernel, 8192x131072 bf16, both after "
        "a 2 GiB restore",
        ms, "fused", "liger", unit="ms",
        baseline_name="Liger-Kernel liger_cross_entropy_kernel, launched as "
        "LigerCrossEntropyFunction launches it",
        threshold=0.95, library="Liger-Kernel",
        note="the same algorithm; each call of both sides first restores the logits",
    )
    net = type(ms)(
        fused=[f - c for f, c in zip(ms["fused"], ms["copy"], strict=True)],
        liger=[b - c for b, c in zip(ms["liger"], ms["copy"], strict=True)],
    )
    net.method = ms.method + "; the copy's time of the same round subtracted"
    lesson.benchmark(
        "fused-vs-liger-net-of-copy",
        "the same, the restore's time subtracted from both",
        net, "fused", "liger", unit="ms",
        baseline_name="Liger-Kernel liger_cross_entropy_kernel",
        library="Liger-Kernel",
        note="informational: (copy + X) - copy, round by round",
    )


def block_sweep(lesson: Lesson, device: str, rounds) -> None:
    """Block size and warps at the benchmark's shape: every row is 32 values
    per thread, so only the programs per SM and the reduction width change.
    The launcher's own block is the benchmark's kernel: that row is the
    benchmark's rounds, net of the copy, not a timing of its own."""
    n_rows, V, dtype = bench_shape(lesson)
    x0, t = make_inputs(n_rows, V, dtype, device, seed=2)
    work = torch.empty_like(x0)
    copy_ms = bench_ms(lambda: work.copy_(x0))
    # cross_entropy_'s choice for this vocabulary, with block // 1024 warps.
    launched = min(32768, triton.next_power_of_2(V))
    # Bytes the kernel must move: read the row twice, write it once.
    moved = 3 * x0.numel() * x0.element_size()
    rows = []
    for block, warps in ((4096, 4), (8192, 8), (16384, 16), (32768, 32)):
        if block == launched:  # the benchmark's median, its copy subtracted
            ms = statistics.median(
                f - c for f, c in zip(rounds["fused"], rounds["copy"], strict=True))
            said = "fused-vs-torch-net-of-copy"
        else:

            def run(block=block, warps=warps):
                work.copy_(x0)
                cross_entropy_(work, t, block=block, num_warps=warps)

            ms, said = bench_ms(run) - copy_ms, ""
        rows.append([block, warps, ms, moved / ms * 1e-6, said])
    lesson.table(
        "block-sweep",
        ["BLOCK", "warps", "ms (copy subtracted)", "GB/s (2 reads + 1 write)",
         "benchmark"],
        rows,
        f"{n_rows} x {V} {str(dtype).removeprefix('torch.')}: the kernel's time "
        "at four block sizes, less the copy's; the launcher's block is the "
        "benchmark named in the last column (the median of its rounds), the "
        "others one timing each",
    )


# The vocabulary sweep's curves: (marker, label, colour).
CURVES = {"torch": ("s-", "F.cross_entropy + backward", None),
          "fused": ("o-", "fused, in place", None),
          "copy": ("--", "the restore copy", "gray")}


def vocab_sweep(lesson: Lesson, device: str, rounds) -> None:
    """Time and peak memory of both sides against the vocabulary size. At the
    benchmark's vocabulary the times are the benchmark's rounds (the median
    and its interval), not a timing of their own."""
    n_rows, bench_v, dtype = bench_shape(lesson)
    vocab = lesson.size(gpu=[16384, 32768, 65536, 131072], smoke=[1000, 3000])
    curves = {"torch": [], "fused": [], "copy": []}  # in CURVES' order
    peaks = {"torch": [], "fused": []}
    for V in vocab:
        x0, t = make_inputs(n_rows, V, dtype, device, seed=3)
        work = torch.empty_like(x0)
        leaf = torch.empty_like(x0).requires_grad_()

        def fused(work=work, x0=x0, t=t):
            work.copy_(x0)
            cross_entropy_(work, t)

        def torch_ce(leaf=leaf, x0=x0, t=t):
            with torch.no_grad():
                leaf.copy_(x0)
            leaf.grad = None
            F.cross_entropy(leaf, t).backward()

        if V == bench_v:
            for name, values in curves.items():
                values.append(statistics.median(rounds[name]))
        else:
            curves["copy"].append(bench_ms(lambda work=work, x0=x0: work.copy_(x0)))
            curves["fused"].append(bench_ms(fused))
            curves["torch"].append(bench_ms(torch_ce))
        work.copy_(x0)
        peaks["fused"].append(measure_peak(partial(cross_entropy_, work, t)) / 2**30)
        with torch.no_grad():  # the benchmark's vocabulary timed nothing here:
            leaf.copy_(x0)  # give PyTorch's side real logits too
        leaf.grad = None
        peaks["torch"].append(measure_peak(partial(backward_of, leaf, t)) / 2**30)
    benched = {name: median_interval(rounds[name]) for name in curves}

    kind = f"{n_rows} rows of {str(dtype).removeprefix('torch.')} logits"

    def draw(fig):
        top, bottom = fig.subplots(2, 1, sharex=True)
        for ax, values, intervals, unit in (
                (top, curves, benched, "ms per call (restore included)"),
                (bottom, peaks, {}, "peak above inputs (GiB)")):
            for name in values:
                style, label, color = CURVES[name]
                line, = ax.plot(vocab, values[name], style, label=label, color=color)
                if name in intervals:  # the benchmark's point: its interval
                    mid, low, high = intervals[name]
                    ax.errorbar([bench_v], [mid], yerr=[[mid - low], [high - mid]],
                                fmt="none", capsize=4, color=line.get_color())
            ax.set_xscale("log", base=2)
            ax.set_xticks(vocab, [str(v) for v in vocab])
            ax.set_ylim(bottom=0)
            ax.set_ylabel(unit)
        bottom.set_xlabel("vocabulary size V")
        fig.legend(*top.get_legend_handles_labels(), loc="outside lower center",
                   ncols=2)

    lesson.plot(
        "vocab-sweep",
        f"Time (top) and peak memory (bottom) against the vocabulary size, {kind}; "
        f"the times at V = {bench_v} are the benchmark's rounds (the median with its "
        "confidence interval), the others one timing each",
        draw, size=(7.0, 7.5),
    )


def main() -> int:
    lesson = Lesson("cross-entropy")
    device = lesson.device()
    if lesson.step("compiled-code", needs_gpu="the interpreter compiles nothing",
                   smoke=False):
        show_compiled_code(lesson)
    with lesson.step("correctness"):
        check_correctness(lesson, device)
    if lesson.step("full-shape", needs_gpu="the 8192 x 131072 bf16 shape needs a GPU"):
        check_full_shape(lesson, device)
    if lesson.step("benchmark",
                   needs_gpu="timings and torch.cuda's memory statistics need a GPU"):
        rounds, timed_inputs = benchmark(lesson, device)
    if lesson.step("sweep", needs_gpu="timings need a GPU"):
        block_sweep(lesson, device, rounds)
        vocab_sweep(lesson, device, rounds)
    with lesson.step("libraries"):  # Liger-Kernel's kernel, when installed
        check_liger(lesson, device)
        if not lesson.interpret or lesson.smoke:  # untimed in a smoke run
            compare_with_liger(lesson, *timed_inputs)
    return lesson.finish()


if __name__ == "__main__":
    sys.exit(main())
