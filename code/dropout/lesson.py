"""Low-memory dropout: a seed instead of a mask.

Dropout zeroes each element with probability p and scales the survivors by
1 / (1 - p). The backward pass must zero the same elements, so PyTorch's
fused dropout writes the mask it drew, one byte per element, and keeps it
until the backward pass reads it again.

A counter-based generator makes the mask unnecessary. Philox turns a key
and a counter into random bits with no state in between: keyed by a seed
and counting with the element's index, it gives element i the same number
every time it is asked, in any program, in any order. The forward kernel
draws the mask from (seed, i); the backward kernel draws it again. What is
kept between the two passes is one integer.

The lesson writes the kernel twice: with `tl.rand`, one Philox evaluation
per element (Triton's tutorial), and with `tl.rand4x`, which uses all four
32-bit words that one evaluation produces, a quarter of the integer work.
The compiled code shows the difference, and the benchmark whether it
matters at the speed of memory.

Run it:
    TRITON_INTERPRET=1 python dropout.py   # any machine: checks on the CPU
    python dropout.py                      # a CUDA GPU: checks, PTX facts, timings
"""

import math
import os
import re
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
import triton
import triton.language as tl

# lessonkit.py sits beside this file in a download, one folder up in the repository.
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]
from lessonkit import Lesson, bench_interleaved, bench_ms  # noqa: E402

SEED = 1234
# 1024 elements per program on a GPU: 8 per thread with 4 warps, two 16-byte
# loads each. The interpreter's cost is per program, not per element, so
# there a program takes 8192; the numbers drawn are the same either way
# (the exercise on block sizes checks it).
DEFAULT_BLOCK = 8192 if os.environ.get("TRITON_INTERPRET") == "1" else 1024


# snippet: kernel
@triton.jit
def dropout_kernel(x_ptr, out_ptr, n, p, scale, seed, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    # Philox, keyed by the seed, counting with the element's index: the
    # number for element i depends on (seed, i) and nothing else, not on the
    # block size, the program or what ran before. That is what lets the
    # backward pass draw the same mask again.
    r = tl.rand(seed, offsets)  # float32, uniform in [0, 1)
    keep = r > p
    # scale = 1 / (1 - p) comes from the host: a kept value is x * scale,
    # one float32 multiplication, exactly what torch computes.
    tl.store(out_ptr + offsets, tl.where(keep, x * scale, 0.0), mask=mask)


# end snippet


# snippet: kernel-4x
@triton.jit
def dropout4x_kernel(x_ptr, out_ptr, n, p, scale, seed, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    # One Philox evaluation yields four 32-bit words. Counter k serves the
    # four elements 4k .. 4k+3, so a block of BLOCK elements needs BLOCK/4
    # evaluations where tl.rand needs BLOCK.
    counters = pid * (BLOCK // 4) + tl.arange(0, BLOCK // 4)
    r0, r1, r2, r3 = tl.rand4x(seed, counters)
    # interleave(a, b) is a0 b0 a1 b1 ...; done twice it lays out
    # r0[k] r1[k] r2[k] r3[k] for each k: element 4k + j gets word j of
    # counter k, again a function of (seed, i) alone.
    r = tl.interleave(tl.interleave(r0, r2), tl.interleave(r1, r3))
    keep = r > p
    tl.store(out_ptr + offsets, tl.where(keep, x * scale, 0.0), mask=mask)


# end snippet


# snippet: launch
def dropout(x, p, seed, *, four=True, block=DEFAULT_BLOCK, out=None):
    """Dropout of a contiguous tensor; the mask is drawn from (seed, index)."""
    assert 0.0 <= p < 1.0 and x.is_contiguous() and x.numel() < 2**31
    out = torch.empty_like(x) if out is None else out
    n = x.numel()
    kernel = dropout4x_kernel if four else dropout_kernel
    grid = (triton.cdiv(n, block),)
    kernel[grid](x, out, n, p, 1.0 / (1.0 - p), seed, BLOCK=block)
    return out


class SeededDropout(torch.autograd.Function):
    """Dropout whose backward pass needs two numbers, not an n-element mask."""

    @staticmethod
    def forward(ctx, x, p, seed):
        ctx.p, ctx.seed = p, seed  # all the backward pass needs
        return dropout(x, p, seed)

    @staticmethod
    def backward(ctx, dy):
        # d out / d x is `scale` where the element was kept and 0 where it
        # was dropped: the same mask and the same scale, so the backward
        # pass is the forward kernel applied to dy.
        return dropout(dy.contiguous(), ctx.p, ctx.seed), None, None


# end snippet


def scale32(p: float, device: str) -> torch.Tensor:
    """1 / (1 - p) rounded to float32, as the kernel receives it."""
    return torch.tensor(1.0 / (1.0 - p), dtype=torch.float32, device=device)


KERNELS = {"rand": False, "rand4x": True}  # name -> `four`


# snippet: statistics
def kept_fraction(out, p):
    """The fraction of `out` kept, what a sound generator keeps, and sigma.

    A sound generator keeps each element independently with probability
    q = 1 - p, so the kept count K of n elements is Binomial(n, q): its
    fraction K/n has standard deviation sigma = sqrt(p q / n). The checks
    allow 5 sigma. For a fixed seed the result is deterministic (it passes
    or fails the same way every run); the bound says how far a fraction
    could stray by chance for *some* seed: beyond 5 sigma with probability
    6e-7.
    """
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
    n = 1 << 24 if device == "cuda" else 1 << 16
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
    n = 1 << 22 if device == "cuda" else 50_000
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
        sizes.append((1 << 24) + 3)
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


# snippet: solution-philox
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


def try_this(lesson: Lesson, device: str) -> None:
    torch.manual_seed(2)
    x = torch.randn(3000, device=device)
    x[x == 0] = 1.0  # `out != 0` below must be exactly the kept set
    p = 0.4

    # snippet: solution-block-size
    # Exercise: launch with blocks of 256 and of 4096. The programs change,
    # the numbers do not: element i still asks Philox for (seed, i) (or,
    # with rand4x, for word i % 4 of counter i // 4).
    same = all(
        torch.equal(
            dropout(x, p, SEED, four=four, block=256),
            dropout(x, p, SEED, four=four, block=4096),
        )
        for four in (False, True)
    )
    # end snippet
    lesson.check("exercise-block-size", same, "blocks of 256 and 4096 agree")

    # snippet: solution-mask-from-seed
    # Exercise: recover the mask of a forward pass from the seed alone, by
    # running dropout on ones: kept elements become `scale`, dropped ones 0.
    out = dropout(x, p, SEED)
    mask = dropout(torch.ones_like(x), p, SEED) != 0
    ok = torch.equal(mask, out != 0)
    # end snippet
    lesson.check("exercise-mask-from-seed", ok, "dropout(ones) != 0 is the mask")

    # snippet: solution-philox-check
    # Exercise: Philox in NumPy reproduces both kernels' masks bit for bit.
    # tl.rand: word 0 of counter i for element i. tl.rand4x: word j of
    # counter k for element 4k + j.
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
        "exercise-philox",
        bool((got_rand == keep_rand).all() and (got_4x == keep_4x).all()),
        f"{n} elements: NumPy Philox4x32-10 gives the masks of tl.rand and tl.rand4x",
    )


def compiled_code_facts(lesson: Lesson) -> None:
    """What the compiler made of each kernel: counts in the PTX."""
    n = 1 << 20
    x = torch.randn(n, device="cuda")
    out = torch.empty_like(x)
    rows = []
    for name, kernel in (("tl.rand", dropout_kernel), ("tl.rand4x", dropout4x_kernel)):
        compiled = kernel[(triton.cdiv(n, 1024),)](
            x, out, n, 0.1, 1 / 0.9, SEED, BLOCK=1024
        )
        ptx = compiled.asm["ptx"]
        per_thread = 1024 // (32 * compiled.metadata.num_warps)
        # The kernels have no loops, so static counts are what each thread
        # executes; divided by the elements a thread owns, they are per element.
        rows.append(
            [
                name,
                round(len(re.findall(r"mul\.hi\.u32", ptx)) / per_thread, 2),
                round(len(re.findall(r"mul\.lo\.s32", ptx)) / per_thread, 2),
                len(re.findall(r"ld\.global(?:\.[\w:]+)*\.v4\.b32", ptx)),
                getattr(compiled, "n_regs", None),
                compiled.metadata.shared,
            ]
        )
    lesson.table(
        "ptx",
        [
            "kernel",
            "mul.hi.u32 per element",
            "mul.lo.s32 per element",
            "16-byte loads per thread",
            "registers",
            "shared memory (bytes)",
        ],
        rows,
        "Instructions in the PTX of each kernel (BLOCK = 1024): Philox's "
        "multiplies per element, and how x is loaded",
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
        "dropout, tl.rand4x vs torch, 2^27 fp32",
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
        "dropout, tl.rand vs torch, 2^27 fp32",
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
        f"What each approach moves and keeps, and its time, at n = 2^27 fp32, p={p}",
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
    if lesson.step("memory", needs_gpu="torch.cuda's memory statistics need a GPU",
                   smoke=False):
        memory_held(lesson)
    if lesson.step("benchmark", needs_gpu="timings need a GPU"):
        benchmark(lesson, device)
    if lesson.step("sweep", needs_gpu="timings need a GPU"):
        sweep_and_plot(lesson, device)
    with lesson.step("exercises"):
        try_this(lesson, device)
    return lesson.finish()


if __name__ == "__main__":
    sys.exit(main())
