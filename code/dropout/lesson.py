"""Low-memory dropout, as the course records it: the checks and benchmarks of the page.

The kernels, their launcher and the autograd function are in dropout.py, which
runs alone. This file checks them the way the course checks every lesson
(statistics of the mask with their bounds, bit-exact scaling, the backward
pass from the seed, tails that are not multiples of the block, a NumPy Philox
that reproduces both masks), reads what the compiler made of each kernel,
measures the memory autograd keeps, and times both kernels against torch,
through the course's kit (lessonkit.py), which keeps the record.

Run it:
    TRITON_INTERPRET=1 python lesson.py   # any machine: the checks on the CPU
    python lesson.py                      # a CUDA GPU: checks, PTX facts, timings
"""

import math
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
import triton

# lessonkit.py sits beside this file in a download, one folder up in the repository.
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]
from dropout import SeededDropout, dropout, dropout4x_kernel, dropout_kernel  # noqa: E402
from lessonkit import Lesson, bench_interleaved, bench_ms  # noqa: E402

SEED = 1234


def scale32(p: float, device: str) -> torch.Tensor:
    """1 / (1 - p) rounded to float32, as the kernel receives it."""
    return torch.tensor(1.0 / (1.0 - p), dtype=torch.float32, device=device)


KERNELS = {"rand": False, "rand4x": True}  # name -> `four`


# snippet: statistics
def kept_fraction(out, p):
    """The fraction of `out` kept, what a sound generator keeps (q), and sigma:
    the kept count of n elements is Binomial(n, q), sd of the fraction
    sqrt(p q / n). The checks allow 5 sigma (by chance: 6e-7)."""
    n, q = out.numel(), 1.0 - p
    return (out != 0).double().mean().item(), q, math.sqrt(p * q / n)


# end snippet


# snippet: seeds
def seed_facts(x, four, p=0.5):
    """The same seed gives the same output, bit for bit. Another seed gives
    an independent mask: two independent masks agree where both keep or both
    drop, a fraction a = q^2 + p^2, with standard deviation
    sqrt(a (1 - a) / n); again within 5 sigma. Returns (same bits, the
    fraction two seeds agree on, a, sigma)."""
    first = dropout(x, p, SEED, four=four)
    again = dropout(x, p, SEED, four=four)
    other = dropout(x, p, SEED + 1, four=four)
    agree = ((first != 0) == (other != 0)).double().mean().item()
    a = p * p + (1 - p) * (1 - p)
    return torch.equal(first, again), agree, a, math.sqrt(a * (1 - a) / x.numel())


# end snippet


def check_statistics(lesson: Lesson, device: str) -> None:
    """The kept fraction, the exact scaling, and what a seed decides."""
    # 2^24 on a GPU; under compute-sanitizer (lesson.size's smoke value) and
    # the interpreter 2^16, where 5 sigma is still below 0.01.
    n = lesson.size(gpu=1 << 24, smoke=1 << 16) if device == "cuda" else 1 << 16
    torch.manual_seed(0)
    x = torch.randn(n, device=device)
    # `out != 0` must be exactly the kept set, so no input may be 0 itself
    # (16 M normal draws in fp32 can hold an exact zero: the GPU's did).
    x[x == 0] = 1.0
    for name, four in KERNELS.items():
        for p in (0.1, 0.5, 0.8):
            out = dropout(x, p, SEED, four=four)
            frac, q, sigma = kept_fraction(out, p)
            lesson.check(
                f"kept-fraction-{name}-p{p}",
                abs(frac - q) <= 5 * sigma,
                f"n={n}: kept {frac:.5f}, expected {q:.2f}, "
                f"|diff| = {abs(frac - q) / sigma:.2f} sigma <= 5 sigma",
            )
            keep = out != 0
            s = scale32(p, device)
            exact = torch.equal(out[keep], x[keep] * s) and bool(
                (out[~keep] == 0).all()
            )
            lesson.check(
                f"kept-scaled-exactly-{name}-p{p}",
                exact,
                "kept values == x * float32(1/(1-p)) bit for bit; dropped == 0",
            )
        same, agree, a, sigma = seed_facts(x, four)
        lesson.check(
            f"same-seed-bit-identical-{name}", same,
            "two runs with seed 1234: torch.equal",
        )
        lesson.check(
            f"other-seed-independent-mask-{name}",
            agree < 1.0 and abs(agree - a) <= 5 * sigma,
            f"seeds 1234 and 1235 agree on {agree:.5f} of the mask, "
            f"independent masks {a:.2f} (5 sigma = {5 * sigma:.1e})",
        )


def check_backward(lesson: Lesson, device: str) -> None:
    # snippet: backward-check
    # The backward pass, run by autograd from the seed alone, must equal
    # the forward pass's mask times the incoming gradient times the scale.
    # x has no zeros, so the forward's mask is exactly `out != 0`.
    n = lesson.size(gpu=1 << 22, smoke=50_000) if device == "cuda" else 50_000
    p = 0.3
    torch.manual_seed(1)
    x = torch.randn(n, device=device)
    x[x == 0] = 1.0  # an exact 0 (the GPU's draws held one) would hide a kept element
    x.requires_grad_()
    dy = torch.randn(n, device=device)
    out = SeededDropout.apply(x, p, SEED)
    out.backward(dy)
    forward_mask = out.detach() != 0
    want = torch.where(forward_mask, dy * scale32(p, device), 0.0)
    ok = torch.equal(x.grad, want)
    # end snippet
    lesson.check(
        "backward-from-seed-equals-forward-mask",
        ok,
        f"n={n}, p={p}: x.grad == (out != 0) * dy * scale, bit for bit",
    )


def check_tails(lesson: Lesson, device: str) -> None:
    """Sizes that are not multiples of the block (nor of 4, for rand4x)."""
    sizes = [1, 1000, 4097, 98_433]
    if device == "cuda":
        sizes.append(lesson.size(gpu=(1 << 24) + 3, smoke=200_003))
    p = 0.25
    s = scale32(p, device)
    for name, four in KERNELS.items():
        for i, n in enumerate(sizes):
            torch.manual_seed(10 + i)
            longer = torch.randn(n + 517, device=device)
            x = longer[:n].contiguous()
            out = torch.full_like(x, float("nan"))  # poison: unwritten fails
            dropout(x, p, SEED, four=four, out=out)
            # Every element written, and either dropped or scaled exactly
            # (a NaN left behind equals neither).
            valid = bool(((out == 0) | (out == x * s)).all())
            # The mask is a function of (seed, index), not of n: the first n
            # elements of a longer vector are dropped the same way, so the
            # partial last block drew the numbers a full block would have.
            same = torch.equal(out, dropout(longer, p, SEED, four=four)[:n])
            lesson.check(
                f"tail-{name}-n{n}",
                valid and same,
                f"{n} elements: all written, 0 or x * scale; "
                f"equals the first {n} of a vector of {n + 517}",
            )


# snippet: philox
def philox4x32(seed: int, counters: np.ndarray, rounds: int = 10):
    """Philox4x32-10 as tl.randint4x runs it: counter (c, 0, 0, 0), key = seed."""
    m32 = np.uint64(0xFFFFFFFF)
    c0 = counters.astype(np.uint64)
    c1 = np.zeros_like(c0)
    c2 = np.zeros_like(c0)
    c3 = np.zeros_like(c0)
    k0, k1 = np.uint64(seed & 0xFFFFFFFF), np.uint64(seed >> 32)
    mul_a, mul_b = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
    for _ in range(rounds):
        # Two 32 x 32 -> 64-bit products; their halves are mixed with the
        # other two words and the key. Then the key moves on (a Weyl step).
        prod_b, prod_a = mul_b * c2, mul_a * c0  # < 2^64: exact in uint64
        c0, c1, c2, c3 = (
            (prod_b >> np.uint64(32)) ^ c1 ^ k0,
            prod_b & m32,
            (prod_a >> np.uint64(32)) ^ c3 ^ k1,
            prod_a & m32,
        )
        k0 = (k0 + np.uint64(0x9E3779B9)) & m32
        k1 = (k1 + np.uint64(0xBB67AE85)) & m32
    return c0, c1, c2, c3


def uniform(words: np.ndarray) -> np.ndarray:
    """tl.rand's map from 32 random bits to a float32 in [0, 1)."""
    i = words.astype(np.uint32).view(np.int32).astype(np.int64)
    i = np.where(i < 0, -i - 1, i)  # fold the sign away: 0 .. 2^31 - 1
    return i.astype(np.float32) * np.float32(4.6566127342e-10)


# end snippet


def check_counters(lesson: Lesson, device: str) -> None:
    """What "a function of (seed, index)" promises: the block size changes
    nothing, and Philox written in NumPy draws both kernels' masks."""
    torch.manual_seed(2)
    x = torch.randn(3000, device=device)
    p = 0.4
    # The programs change with the block, the numbers do not: element i still
    # asks Philox for (seed, i) (or, with rand4x, word i % 4 of counter i // 4).
    same = all(
        torch.equal(
            dropout(x, p, SEED, four=four, block=256),
            dropout(x, p, SEED, four=four, block=4096),
        )
        for four in (False, True)
    )
    lesson.check("block-size-changes-nothing", same, "blocks of 256 and 4096 agree")
    # snippet: philox-check
    # tl.rand: word 0 of counter i for element i. tl.rand4x: word j of
    # counter k for element 4k + j. Dropout of ones is the mask, times scale.
    n = 4096
    keep_rand = uniform(philox4x32(SEED, np.arange(n))[0]) > np.float32(p)
    words = philox4x32(SEED, np.arange(n // 4))  # four arrays of n/4
    keep_4x = np.stack([uniform(w) for w in words], axis=1).reshape(-1)
    keep_4x = keep_4x > np.float32(p)
    ones = torch.ones(n, device=device)
    got_rand = (dropout(ones, p, SEED, four=False) != 0).cpu().numpy()
    got_4x = (dropout(ones, p, SEED, four=True) != 0).cpu().numpy()
    # end snippet
    lesson.check(
        "philox-in-numpy-draws-both-masks",
        bool((got_rand == keep_rand).all() and (got_4x == keep_4x).all()),
        f"{n} elements: NumPy Philox4x32-10 gives the masks of tl.rand and tl.rand4x",
    )


def compiled_code_facts(lesson: Lesson) -> None:
    """What the compiler made of each kernel: counts in the PTX."""
    n = 1 << 20
    x = torch.randn(n, device="cuda")
    out = torch.empty_like(x)
    kernels = {"tl.rand": dropout_kernel, "tl.rand4x": dropout4x_kernel}
    compiled = {
        name: kernel[(triton.cdiv(n, 1024),)](x, out, n, 0.1, 1 / 0.9, SEED, BLOCK=1024)
        for name, kernel in kernels.items()
    }
    # The kernels have no loops, so static counts are what each thread
    # executes: 8 elements each (BLOCK = 1024 over 4 warps of 32 threads).
    lesson.compiled_table(
        "ptx", compiled,
        {"mul.hi.u32 per thread": r"mul\.hi\.u32",
         "mul.lo.s32 per thread": r"mul\.lo\.s32",
         "16-byte loads per thread": r"ld\.global(?:\.[\w:]+)*\.v4\.b32"},
        "Instructions in the PTX of each kernel (BLOCK = 1024, 8 elements a "
        "thread): Philox's multiplies, and how x is loaded",
    )


def benchmark(lesson: Lesson, device: str) -> None:
    n, p = lesson.size(gpu=1 << 27, smoke=4096), 0.1
    # snippet: benchmark
    # 2^27 float32 values (512 MiB), p = 0.1. Bytes per element, counted:
    #   Triton, either kernel:        read x 4 + write out 4             =  8
    #   torch F.dropout (fused):      read x 4 + write out 4 + mask 1    =  9
    #   eager x * (rand_like > p) * s: rand 4, compare 4+1, multiply
    #                                 4+1+4, scale 4+4                   = 26
    #   torch's backward:             read dy 4 + mask 1 + write dx 4    =  9
    # torch's forward returns only `out`, but it writes the bool mask
    # anyway (native_dropout computes both), so it moves 9 bytes.
    torch.manual_seed(3)
    x = torch.randn(n, device=device)
    dy = torch.randn(n, device=device)
    scale = 1.0 / (1.0 - p)
    _, mask = torch.ops.aten.native_dropout(x, p, True)
    contenders = {
        "rand4x": lambda: dropout(x, p, SEED),
        "rand": lambda: dropout(x, p, SEED, four=False),
        "torch": lambda: F.dropout(x, p, training=True),
        "eager": lambda: x * (torch.rand_like(x) > p) * scale,
        "torch-backward": lambda: torch.ops.aten.native_dropout_backward(
            dy, mask, scale
        ),
    }
    # end snippet
    # The prediction from those counts: memory-bound at one bandwidth, the
    # tl.rand4x kernel takes 8/9 of PyTorch's time.
    lesson.predict("dropout-rand4x-vs-torch-2^27-fp32", 9 / 8,
                   "bytes per element at one bandwidth: PyTorch's 9 (with the "
                   "mask) over the kernel's 8", 0.15)
    ms = bench_interleaved(contenders)
    note = "time per call: torch also writes a 1-byte mask per element"
    lesson.benchmark(
        "dropout-rand4x-vs-torch-2^27-fp32",
        "dropout, tl.rand4x vs torch, 2²⁷ fp32",
        ms,
        "rand4x",
        "torch",
        unit="ms",
        baseline_name="torch.nn.functional.dropout",
        threshold=1.0,
        stretch=1.1,
        note=note,
    )
    lesson.benchmark(
        "dropout-rand-vs-torch-2^27-fp32",
        "dropout, tl.rand vs torch, 2²⁷ fp32",
        ms,
        "rand",
        "torch",
        unit="ms",
        baseline_name="torch.nn.functional.dropout",
        note="informational: one Philox evaluation per element; " + note,
    )
    rows = []
    for label, key, fwd, bwd, held in (
        ("Triton, tl.rand4x (seed)", "rand4x", 8, 8, "8 bytes (the seed)"),
        ("Triton, tl.rand (seed)", "rand", 8, 8, "8 bytes (the seed)"),
        ("torch F.dropout (fused)", "torch", 9, 9, f"{n // 2**20} MiB (bool mask)"),
        ("eager rand_like > p", "eager", 26, 9, f"{n // 2**20} MiB (bool mask)"),
    ):
        t = ms.median(key)
        rows.append([label, fwd, bwd, held, round(t, 4), round(fwd * n / t / 1e6, 1)])
    t = ms.median("torch-backward")
    rows.append(
        [
            "torch backward (from the mask)",
            "-",
            9,
            "-",
            round(t, 4),
            round(9 * n / t / 1e6, 1),
        ]
    )
    lesson.table(
        "bytes",
        [
            "approach",
            "forward bytes/element",
            "backward bytes/element",
            "kept for backward",
            "ms per call",
            "GB/s (its own bytes)",
        ],
        rows,
        f"What each approach moves and keeps, and its time, at n = 2²⁷ fp32, p={p}",
    )


def memory_held(lesson: Lesson) -> None:
    """Measure what autograd keeps between the passes: torch's mask, our seed."""
    if lesson.not_under_sanitizer("memory held", "torch.cuda.memory_allocated counts "
                                  "nothing with the caching allocator off"):
        return
    n, p = 1 << 24, 0.1
    x = torch.randn(n, device="cuda", requires_grad=True)
    held = {}
    for name, fn in (
        ("torch", lambda: F.dropout(x, p, training=True)),
        ("seeded", lambda: SeededDropout.apply(x, p, SEED)),
    ):
        fn()  # first call outside the measurement
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated()
        out = fn()
        torch.cuda.synchronize()
        held[name] = torch.cuda.memory_allocated() - before
        del out
    # The caching allocator may hand out a cached block up to 1 MiB larger
    # than asked for (it does not split off less), hence the 2 MiB slack;
    # the mask being looked for is 16 MiB.
    slack = 2 << 20
    lesson.check(
        "torch-keeps-a-mask",
        abs(held["torch"] - 5 * n) <= slack,
        f"after F.dropout of {n} fp32 values with autograd on: "
        f"{held['torch']} bytes held; out {4 * n} + bool mask {n} = {5 * n}",
    )
    lesson.check(
        "seeded-keeps-only-the-output",
        abs(held["seeded"] - 4 * n) <= slack,
        f"after SeededDropout: {held['seeded']} bytes held; out alone {4 * n}",
    )


def sweep_and_plot(lesson: Lesson, device: str) -> None:
    sizes = lesson.size(gpu=[1 << k for k in range(16, 28, 2)], smoke=[256, 1024])
    p = 0.1
    gbs = {"rand4x": [], "rand": [], "torch": []}
    for n in sizes:
        x = torch.randn(n, device=device)
        fns = {
            "rand4x": (lambda x=x: dropout(x, p, SEED), 8),
            "rand": (lambda x=x: dropout(x, p, SEED, four=False), 8),
            "torch": (lambda x=x: F.dropout(x, p, training=True), 9),
        }
        for key, (fn, per_elem) in fns.items():
            gbs[key].append(per_elem * n / bench_ms(fn, warmup_ms=5, rep_ms=10) / 1e6)

    def draw(fig):
        ax = fig.subplots()
        for key, label in (
            ("rand4x", "Triton, tl.rand4x (8 B/elem)"),
            ("rand", "Triton, tl.rand (8 B/elem)"),
            ("torch", "torch F.dropout (9 B/elem)"),
        ):
            ax.plot(sizes, gbs[key], marker="o", label=label)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("elements (fp32)")
        ax.set_ylabel("GB/s, each counting its own bytes")
        ax.set_ylim(bottom=0)
        fig.legend(loc="outside lower center", ncols=1)

    lesson.plot(
        "bandwidth-vs-size",
        "Dropout bandwidth against vector length, each approach counting "
        "the bytes it moves",
        draw,
        size=(7.0, 5.4),
    )


def main() -> int:
    lesson = Lesson("dropout")
    device = lesson.device()
    if lesson.step("compiled-code", needs_gpu="the interpreter compiles no PTX",
                   smoke=False):
        compiled_code_facts(lesson)
    with lesson.step("correctness"):
        check_statistics(lesson, device)
        check_backward(lesson, device)
        check_tails(lesson, device)
        check_counters(lesson, device)
    if lesson.step("memory", needs_gpu="torch.cuda's memory statistics need a GPU",
                   smoke=False):
        memory_held(lesson)
    if lesson.step("benchmark", needs_gpu="timings need a GPU"):
        benchmark(lesson, device)
    if lesson.step("sweep", needs_gpu="timings need a GPU"):
        sweep_and_plot(lesson, device)
    return lesson.finish()


if __name__ == "__main__":
    sys.exit(main())
