"""Grouped GEMM: many matmuls of different shapes in one launch.

A mixture-of-experts layer sends each token to a few experts, so every step
it multiplies a different number of rows by each expert's weights: G
independent products C_g = A_g @ B_g, each with its own M, N and K. A
Python loop over `torch.matmul` launches G kernels, and when the products
are small each launch leaves most of the GPU idle while the CPU prepares
the next one. `torch.bmm` cannot help: its matrices must share one shape.

The grouped kernel takes the whole list at once. The host writes one row
per group into a small device table (three addresses, M, N, K and three row
strides) and launches a fixed number of programs, one or two per SM. The
output tiles of all groups are numbered one after another, group 0's first,
and program p computes tiles p, p + P, p + 2P, ... (P programs in all),
walking the table to find which group each tile belongs to and reading that
group's pointers and strides from it. Every tile is an ordinary FP16 tile
of the matmul lesson: FP32 accumulator, K loop with a tail mask, rows and
columns wrapped with % M and % N, FP16 store.

What is new is what the compiler cannot see. Pointers and strides loaded
from memory carry no alignment, so without help Triton moves A and B two
bytes at a time and cannot pipeline the loads. The host checks what it can
promise (16-byte aligned bases, row strides and N and K multiples of 8) and
the kernel states it with tl.multiple_of; a group that breaks the promise
sends the whole launch down the slow, general path.

Run it:
    TRITON_INTERPRET=1 python grouped_gemm.py   # any machine: checks on the CPU
    python grouped_gemm.py                      # a GPU: checks, speed, sweep
"""

import random
import re
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

# lessonkit.py sits beside this file in a download, one folder up in the repository.
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]
from lessonkit import Lesson, bench_interleaved, scaled_rtol  # noqa: E402

# snippet: table
# One row of int64 per group. Columns:
A_PTR, B_PTR, C_PTR, M_, N_, K_, LDA, LDB, LDC = range(9)
ROW = 9


def problem_row(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> list[int]:
    """C = A @ B for one group: A (M, K), B (K, N), C (M, N), unit column stride."""
    (M, K), (K2, N) = a.shape, b.shape
    assert K == K2 and c.shape == (M, N) and a.dtype == b.dtype == c.dtype
    assert a.stride(1) == b.stride(1) == c.stride(1) == 1, "rows must be contiguous"
    row = [0] * ROW
    row[A_PTR], row[B_PTR], row[C_PTR] = a.data_ptr(), b.data_ptr(), c.data_ptr()
    row[M_], row[N_], row[K_] = M, N, K
    row[LDA], row[LDB], row[LDC] = a.stride(0), b.stride(0), c.stride(0)
    return row


def problem_table(groups) -> torch.Tensor:
    """The table for a list of (A, B, C), on the host."""
    return torch.tensor([problem_row(a, b, c) for a, b, c in groups],
                        dtype=torch.int64)


def aligned(table: torch.Tensor) -> bool:
    """What the fast path assumes: 16-byte aligned bases, and row strides, N
    and K that are multiples of 8 elements (16 bytes of fp16 or bf16)."""
    t = table.cpu()
    return bool((t[:, [A_PTR, B_PTR, C_PTR]] % 16 == 0).all()
                and (t[:, [N_, K_, LDA, LDB, LDC]] % 8 == 0).all())
# end snippet


# snippet: kernel
@triton.jit(do_not_specialize=["n_groups"])
def grouped_matmul_kernel(problems, n_groups, DTYPE: tl.constexpr,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                          BLOCK_K: tl.constexpr, ALIGNED: tl.constexpr):
    # Tiles of all groups are numbered in one sequence, group 0's first.
    # This program computes tiles pid, pid + P, pid + 2P, ... (P programs).
    tile = tl.program_id(0)
    n_programs = tl.num_programs(0)
    first = 0  # number of the first tile of group g
    for g in range(n_groups):
        row = problems + g * 9
        M = tl.load(row + 3).to(tl.int32)
        N = tl.load(row + 4).to(tl.int32)
        K = tl.load(row + 5).to(tl.int32)
        tiles_n = tl.cdiv(N, BLOCK_N)
        end = first + tl.cdiv(M, BLOCK_M) * tiles_n
        if tile < end:  # this group has tiles for this program
            a_ptr = tl.load(row + 0).to(tl.pointer_type(DTYPE))
            b_ptr = tl.load(row + 1).to(tl.pointer_type(DTYPE))
            c_ptr = tl.load(row + 2).to(tl.pointer_type(DTYPE))
            lda = tl.load(row + 6).to(tl.int32)
            ldb = tl.load(row + 7).to(tl.int32)
            ldc = tl.load(row + 8).to(tl.int32)
            if ALIGNED:
                # Values loaded from memory carry no alignment facts. The
                # host checked these (see `aligned`); saying so is what
                # lets Triton use 16-byte copies and pipeline them.
                a_ptr = tl.multiple_of(a_ptr, 16)
                b_ptr = tl.multiple_of(b_ptr, 16)
                c_ptr = tl.multiple_of(c_ptr, 16)
                lda = tl.multiple_of(lda, 8)
                ldb = tl.multiple_of(ldb, 8)
                ldc = tl.multiple_of(ldc, 8)
                N = tl.multiple_of(N, 8)
                K = tl.multiple_of(K, 8)
            while tile < end:
                # The tile's place in group g, row-major over its tile grid.
                local = tile - first
                pid_m = local // tiles_n
                pid_n = local % tiles_n
                c = _matmul_tile(a_ptr, b_ptr, M, N, K, lda, ldb, pid_m, pid_n,
                                 BLOCK_M, BLOCK_N, BLOCK_K)
                offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
                offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
                c_ptrs = c_ptr + offs_cm[:, None] * ldc + offs_cn[None, :]
                mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
                tl.store(c_ptrs, c.to(DTYPE), mask=mask)
                tile += n_programs
        first = end
# end snippet


# snippet: tile
@triton.jit
def _matmul_tile(a_ptr, b_ptr, M, N, K, lda, ldb, pid_m, pid_n,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 BLOCK_K: tl.constexpr):
    # The FP16 matmul lesson's tile: rows and columns wrapped with % M and
    # % N (every address in bounds, runs of consecutive offsets), only the
    # K tail masked, FP32 accumulation inside the MMA.
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_am = tl.max_contiguous(tl.multiple_of(offs_am, BLOCK_M), BLOCK_M)
    offs_bn = tl.max_contiguous(tl.multiple_of(offs_bn, BLOCK_N), BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_am[:, None] * lda + offs_k[None, :]
    b_ptrs = b_ptr + offs_k[:, None] * ldb + offs_bn[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * ldb
    return acc
# end snippet


# snippet: launch
# 128x128x64 tiles, 4 warps, 3 stages: the products here are small (M, N up
# to 1024 make at most 64 tiles each), so a smaller tile than the big-matmul
# lessons' 128x256 gives more tiles to share out. The general path moves
# A and B two bytes at a time through registers; it gets a shorter K step
# and 8 warps, which keep its many addresses out of local memory. The
# interpreter runs one program at a time and ignores warps and stages:
# small tiles there.
GPU = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_warps=4, num_stages=3)
GENERAL = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=32, num_warps=8, num_stages=3)
INTERPRETER = dict(BLOCK_M=32, BLOCK_N=32, BLOCK_K=32)
DTYPES = {torch.float16: tl.float16, torch.bfloat16: tl.bfloat16}


def grouped_matmul(problems: torch.Tensor, dtype: torch.dtype, config: dict,
                   programs: int, fast: bool):
    """Every C_g = A_g @ B_g of the device table in one launch of `programs`
    programs; `fast` only if `aligned(problems)` holds."""
    grouped_matmul_kernel[(programs,)](problems, problems.shape[0],
                                       DTYPE=DTYPES[dtype], ALIGNED=fast, **config)


def grouped(groups, config=None, programs=None):
    """Convenience: build the table for (A, B, C) triples and launch once."""
    a0 = groups[0][0]
    host = problem_table(groups)  # checked on the host: no synchronisation
    fast = aligned(host)
    cpu = a0.device.type == "cpu"
    config = config or (INTERPRETER if cpu else GPU if fast else GENERAL)
    programs = programs or (4 if cpu else 2 * sm_count())
    grouped_matmul(host.to(a0.device), a0.dtype, config, programs, fast)
    return host


def sm_count() -> int:
    return torch.cuda.get_device_properties(0).multi_processor_count
# end snippet


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


def check_groups(lesson, name, groups):
    """Each group against float64 on the same (rounded) inputs."""
    ok = True
    for g, (a, b, c) in enumerate(groups):
        if c.numel() == 0:
            continue  # an empty group: the groups after it show it shifted nothing
        want = a.double() @ b.double()
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
        groups = make_groups(ragged_shapes(16), device, seed=4)
        grouped(groups)
        check_groups(lesson, "bench-shapes", groups)
        groups = make_groups(shapes, device, dtype=torch.bfloat16, seed=5)
        grouped(groups)
        check_groups(lesson, "bf16", groups)


# snippet: moe
def moe_problems(x, w, out, counts):
    """The table for a mixture-of-experts layer, built on the device.

    x (T, K): tokens sorted by expert; w (E, K, N): one weight per expert;
    out (T, N); counts (E,): tokens per expert, on the device. Group e is
    rows [start_e, start_e + counts[e]) of x and out against w[e]. No value
    leaves the GPU, so a router's counts never cost a synchronisation.
    """
    E, K, N = w.shape
    es = x.element_size()
    counts = counts.to(torch.int64)
    starts = torch.cumsum(counts, 0) - counts
    table = torch.empty((E, ROW), dtype=torch.int64, device=x.device)
    table[:, A_PTR] = x.data_ptr() + starts * (x.stride(0) * es)
    table[:, B_PTR] = w.data_ptr() + torch.arange(E, device=x.device) * (
        w.stride(0) * es)
    table[:, C_PTR] = out.data_ptr() + starts * (out.stride(0) * es)
    table[:, M_] = counts
    table[:, N_], table[:, K_] = N, K
    table[:, LDA], table[:, LDB], table[:, LDC] = x.stride(0), w.stride(1), N
    return table
# end snippet


def moe_reference(x, w, sizes):
    """Each expert's rows against its own weight, in float64."""
    starts = [sum(sizes[:e]) for e in range(len(sizes))]
    return torch.cat([x[s:s + m].double() @ w[e].double()
                      for e, (s, m) in enumerate(zip(starts, sizes, strict=True))])


def try_this(lesson: Lesson, device: str) -> None:
    cpu = device == "cpu"
    config = INTERPRETER if cpu else GPU
    shapes = [(40, 24, 72), (100, 64, 40), (1, 8, 16), (64, 64, 64)]

    # snippet: solution-one-program
    # Exercise: one program walks every tile of every group. Each tile is
    # computed by the same instructions in the same order whoever runs it,
    # so the result must be identical, bit for bit.
    many = make_groups(shapes, device, seed=6)
    one = [(a, b, c.clone()) for a, b, c in many]
    grouped(many, config, programs=4 if cpu else 2 * sm_count())
    grouped(one, config, programs=1)
    same = all(torch.equal(c1, c2) for (_, _, c1), (_, _, c2) in zip(many, one,
                                                                     strict=True))
    # end snippet
    lesson.check("exercise-one-program", same, "1 program vs many: bit-identical")

    # snippet: solution-moe
    # Exercise: 4 experts, 70 tokens routed unevenly (one expert gets none).
    torch.manual_seed(7)
    E, T, K, N = 4, 70, 48, 40
    counts = torch.tensor([30, 0, 25, 15], device=device)
    x = torch.randn((T, K), device=device).half()
    w = torch.randn((E, K, N), device=device).half()
    out = torch.full((T, N), float("nan"), device=device, dtype=torch.float16)
    table = moe_problems(x, w, out, counts)
    grouped_matmul(table, x.dtype, config, 4 if cpu else sm_count(), aligned(table))
    want = moe_reference(x, w, counts.tolist())
    # end snippet
    rtol, atol, why = tolerance(K, want)
    lesson.close("exercise-moe", out, want, rtol, atol, why)


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


def race_configs(lesson: Lesson, device: str) -> tuple[dict, int]:
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
    rows = [[name, 1e3 * ms.median(name), ms.median("loop") / ms.median(name)]
            for name in candidates]
    best = min((n for n in candidates if candidates[n][2]), key=ms.median)
    lesson.table("configs", ["configuration", "us per launch", "speed-up vs loop"],
                 rows, f"16 ragged fp16 groups; medians of 5 rounds taking turns "
                 f"with the loop of torch.matmul. Used below: {best}.")
    config, programs, _ = candidates[best]
    return config, programs


def benchmark(lesson: Lesson, device: str, config: dict, programs: int) -> None:
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
    want = moe_reference(x, w, sizes)
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


def sweep_and_plot(lesson: Lesson, device: str, config: dict, programs: int) -> None:
    """1 to 64 groups: where does one launch start to pay?"""
    all_shapes = lesson.size(gpu=ragged_shapes(64), smoke=ragged_shapes(8, lo=8, hi=32))
    counts = lesson.size(gpu=[1, 2, 4, 8, 16, 32, 64], smoke=[1, 8])
    rows, us = [], {"grouped": [], "loop": []}
    for n in counts:
        shapes = all_shapes[:n]
        groups = make_groups(shapes, device, seed=12)
        table = problem_table(groups).to(device)
        ms = bench_interleaved({
            "grouped": lambda: grouped_matmul(table, torch.float16, config,  # noqa: B023
                                              programs, True),
            "loop": loop_of_matmuls(groups),
        }, rounds=5, rep_ms=10, warm_s=0.2, method="events")
        g, lp = 1e3 * ms.median("grouped"), 1e3 * ms.median("loop")
        flop = sum(2.0 * M * N * K for M, N, K in shapes)
        us["grouped"].append(g)
        us["loop"].append(lp)
        rows.append([n, g, lp, lp / g, flop / g * 1e-6, flop / lp * 1e-6])
    lesson.table("groups-sweep",
                 ["groups", "grouped us", "loop us", "speed-up",
                  "grouped TFLOP/s", "loop TFLOP/s"], rows,
                 "The first n of 64 ragged fp16 groups (M, N, K in [256, 1024], "
                 "seed 2024); medians of 5 rounds taking turns.")

    def draw(fig):
        left, right = fig.subplots(2, 1, sharex=True)  # stacked: a phone's column
        left.plot(counts, us["grouped"], "o-", label="one grouped launch")
        left.plot(counts, us["loop"], "s--", label="loop of torch.matmul")
        for ax in (left, right):
            ax.set_xscale("log", base=2)
            ax.set_xticks(counts, [str(c) for c in counts])
        right.set_xlabel("number of groups")
        left.set_yscale("log")
        left.set_ylabel("µs per call")
        fig.legend(loc="outside lower center", ncols=2)
        right.plot(counts, [r[3] for r in rows], "o-", color="tab:green")
        right.axhline(1.0, color="gray", linewidth=0.8)
        right.set_ylabel("speed-up")
        right.set_ylim(bottom=0)

    lesson.plot("groups-sweep", "Time per call (top) and speed-up of the grouped "
                "launch (bottom) against the number of groups (fp16, M, N, K in "
                "[256, 1024])", draw,
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
        config, programs = race_configs(lesson, device)
    if lesson.step("benchmark", needs_gpu="timings need a GPU"):
        benchmark(lesson, device, config, programs)
    if lesson.step("sweep", needs_gpu="timings need a GPU"):
        sweep_and_plot(lesson, device, config, programs)
    if lesson.step("moe-benchmark", needs_gpu="timings need a GPU"):
        moe_benchmark(lesson, device, config, programs)
    with lesson.step("exercises"):
        try_this(lesson, device)
    return lesson.finish()


if __name__ == "__main__":
    sys.exit(main())
