"""Split-K: a skinny matmul that gives every SM something to do.

C = A @ B with A of 16 x 16384 and B of 16384 x 4096 in FP16, an FP32
accumulator and an FP16 result: the shape of a decoding step, where 16
tokens meet a weight matrix. The tiled kernel of the fp16-matmul lesson owns
one BLOCK_M x BLOCK_N tile of C per program and walks all of K. Here C has
only 16 rows, so there is one row of tiles: with BLOCK_N = 64 that is 64
programs, with 128 only 32, for an H200's 132 SMs. Half the chip or more sits
idle, and every busy SM walks all 16384 steps of K alone.

Split-K cuts K as well. Program (n, s) computes the partial product of
tile n over the s-th slice of K, so the grid grows by the split count S, and
the S partial tiles are added afterwards: with atomic adds into an FP32
buffer (fast, but the order of the additions changes from run to run), or
by writing each partial tile and summing them in a second small kernel in a
fixed order (deterministic). Stream-K, the last variant, gives every program
an equal share of all tiles' K steps, so the number of programs can be the
number of SMs whatever the shape.

The product is memory-bound: 2 * 16 * 4096 * 16384 = 2.1 GFLOP on 134 MB of
B (A and C are under 1 MB), 16 FLOP per byte, far below the ~200 FLOP/byte
where an H200 stops waiting for memory. What decides the speed is how many
SMs stream B at once, and how many bytes each keeps in flight.

Run it:
    TRITON_INTERPRET=1 python split_k.py   # any machine: checks on the CPU
    python split_k.py                      # a CUDA GPU: checks, TFLOP/s, sweep
"""

import sys
from functools import partial
from pathlib import Path

import torch
import triton
import triton.language as tl

# lessonkit.py sits beside this file in a download, one folder up in the repository.
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]
from lessonkit import Lesson, bench_interleaved, bench_ms, scaled_rtol, tflops  # noqa: E402

SHAPE = (16, 4096, 16384)  # M, N, K of the benchmark


# snippet: tiled-kernel
@triton.jit
def matmul_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    # One program per BLOCK_M x BLOCK_N tile of C; it walks all of K.
    pid_n = tl.program_id(0)
    pid_m = tl.program_id(1)
    # Offsets wrapped with % and marked contiguous, as in the fp16-matmul
    # lesson: loads need no mask along M or N, only the store does.
    offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_n = tl.max_contiguous(tl.multiple_of(offs_n, BLOCK_N), BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn
    mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask)


# end snippet


# snippet: split-k-kernel
@triton.jit
def matmul_split_k_kernel(
    a_ptr, b_ptr, ws_ptr, M, N, K, k_per_split,
    stride_am, stride_ak, stride_bk, stride_bn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    ATOMIC: tl.constexpr,
):
    # Program (n, m, s) computes tile (m, n) over the s-th slice of K:
    # k in [s * k_per_split, (s + 1) * k_per_split), cut short at K.
    pid_n = tl.program_id(0)
    pid_m = tl.program_id(1)
    pid_s = tl.program_id(2)
    k_start = pid_s * k_per_split
    k_end = tl.minimum(k_start + k_per_split, K)
    offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_n = tl.max_contiguous(tl.multiple_of(offs_n, BLOCK_N), BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    ks = k_start + offs_k  # this slice's first BLOCK_K step
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + ks[None, :] * stride_ak
    b_ptrs = b_ptr + ks[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(k_start, k_end, BLOCK_K):
        # The mask ends the slice at k_end: at K for the last slice, and at
        # the next slice's start for the others (k_per_split is a multiple
        # of BLOCK_K, so there it is all ones).
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_end - k, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_end - k, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tile = offs_cm[:, None] * N + offs_cn[None, :]  # the workspace is M x N, dense
    if ATOMIC:
        # Every slice adds into one FP32 M x N buffer. "relaxed": only the
        # sum matters, not its order relative to other memory operations.
        tl.atomic_add(ws_ptr + tile, acc, mask=mask, sem="relaxed")
    else:
        # Every slice writes its own M x N partial; sum_splits_kernel adds.
        tl.store(ws_ptr + pid_s * M * N + tile, acc, mask=mask)


# end snippet


# snippet: sum-splits-kernel
@triton.jit
def sum_splits_kernel(ws_ptr, c_ptr, MN, SPLITS, BLOCK: tl.constexpr):
    # C = sum over s of ws[s], in the order s = 0, 1, 2, ...: the same
    # additions in the same order on every run, so the same bits.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < MN
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    s = 0
    while s < SPLITS:
        acc += tl.load(ws_ptr + s * MN + offs, mask=mask, other=0.0)
        s += 1
    tl.store(c_ptr + offs, acc.to(c_ptr.dtype.element_ty), mask=mask)


# end snippet


# snippet: stream-k-kernel
@triton.jit
def matmul_stream_k_kernel(
    a_ptr, b_ptr, ws_ptr, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    # Number every (tile, K step) pair of the whole product in one line,
    # tile by tile, and give each program an equal run of that line. A run
    # may end inside a tile and the next program's run start there: both
    # add their partial sums into the same FP32 tile of the workspace.
    pid = tl.program_id(0)
    tiles_n = tl.cdiv(N, BLOCK_N)
    k_steps = tl.cdiv(K, BLOCK_K)
    total = tl.cdiv(M, BLOCK_M) * tiles_n * k_steps
    it = pid * total // tl.num_programs(0)
    end = (pid + 1) * total // tl.num_programs(0)
    offs_k = tl.arange(0, BLOCK_K)
    while it < end:
        tile = it // k_steps
        step = it % k_steps
        stop = tl.minimum(end, (tile + 1) * k_steps)  # this tile's part of the run
        pid_m = tile // tiles_n
        pid_n = tile % tiles_n
        offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
        offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
        offs_n = tl.max_contiguous(tl.multiple_of(offs_n, BLOCK_N), BLOCK_N)
        k0 = step * BLOCK_K
        ks = k0 + offs_k
        a_ptrs = a_ptr + offs_m[:, None] * stride_am + ks[None, :] * stride_ak
        b_ptrs = b_ptr + ks[:, None] * stride_bk + offs_n[None, :] * stride_bn
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(k0, k0 + (stop - it) * BLOCK_K, BLOCK_K):
            a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k, other=0.0)
            b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k, other=0.0)
            acc = tl.dot(a, b, acc)
            a_ptrs += BLOCK_K * stride_ak
            b_ptrs += BLOCK_K * stride_bk
        offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
        ws = ws_ptr + offs_cm[:, None] * N + offs_cn[None, :]
        tl.atomic_add(ws, acc, mask=mask, sem="relaxed")
        it = stop


# end snippet


# snippet: configs
# BLOCK_M = 16 is the smallest tile tl.dot accepts, and C has 16 rows: one
# row of tiles. BLOCK_K = 128 steps: 128 x 64 x 2 bytes = 16 KiB of B per
# step and tile (32 KiB at BLOCK_N = 128), 4 of them in flight in a
# 4-stage pipeline. The interpreter ignores warps and stages and runs the
# same kernels on small shapes with smaller tiles.
GPU_TILES = {
    64: dict(BLOCK_M=16, BLOCK_N=64, BLOCK_K=128, num_warps=4, num_stages=4),
    128: dict(BLOCK_M=16, BLOCK_N=128, BLOCK_K=128, num_warps=4, num_stages=4),
}
INTERPRETER_TILES = {64: dict(BLOCK_M=16, BLOCK_N=64, BLOCK_K=64)}


# end snippet


# snippet: launch
def matmul_tiled(a, b, tile):
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=torch.float16)
    grid = (triton.cdiv(N, tile["BLOCK_N"]), triton.cdiv(M, tile["BLOCK_M"]))
    matmul_kernel[grid](
        a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
        c.stride(0), c.stride(1), **tile,
    )
    return c


def split_plan(K: int, splits: int, block_k: int) -> tuple[int, int]:
    """(k_per_split, splits actually used): slices are whole BLOCK_K steps,
    so 7 splits of 16 steps become 6 slices of 3 steps and one empty one;
    the empty one is dropped rather than launched."""
    steps = triton.cdiv(K, block_k)
    k_per_split = triton.cdiv(steps, splits) * block_k
    return k_per_split, triton.cdiv(K, k_per_split)


def matmul_split_k(a, b, tile, splits, combine="reduce"):
    M, K = a.shape
    N = b.shape[1]
    k_per_split, splits = split_plan(K, splits, tile["BLOCK_K"])
    grid = (triton.cdiv(N, tile["BLOCK_N"]), triton.cdiv(M, tile["BLOCK_M"]), splits)
    args = (M, N, K, k_per_split, a.stride(0), a.stride(1), b.stride(0), b.stride(1))
    if combine == "atomic":
        ws = torch.zeros((M, N), device=a.device, dtype=torch.float32)  # a memset
        matmul_split_k_kernel[grid](a, b, ws, *args, ATOMIC=True, **tile)
        return ws.to(torch.float16)  # and a third kernel, the cast
    ws = torch.empty((splits, M, N), device=a.device, dtype=torch.float32)
    matmul_split_k_kernel[grid](a, b, ws, *args, ATOMIC=False, **tile)
    c = torch.empty((M, N), device=a.device, dtype=torch.float16)
    sum_splits_kernel[(triton.cdiv(M * N, 1024),)](ws, c, M * N, splits, BLOCK=1024)
    return c


def matmul_stream_k(a, b, tile, programs):
    M, K = a.shape
    N = b.shape[1]
    ws = torch.zeros((M, N), device=a.device, dtype=torch.float32)
    matmul_stream_k_kernel[(programs,)](
        a, b, ws, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), **tile
    )
    return ws.to(torch.float16)


# end snippet


# snippet: tolerance
def tolerance(K, want):
    """(rtol, atol, why): FP16 output rounding, plus the FP32 sum over K.

    Split-K adds the same K products in a different order (S sums of K/S,
    then a sum of S), which the length-scaled bound covers: it is taken
    relative to max|want|, so outputs that cancel to near zero are judged
    on the scale of the result.
    """
    acc_rtol, acc_why = scaled_rtol(0.0, 2.0**-23, K)
    atol = acc_rtol * float(want.abs().max())
    return 2.0**-11, atol, f"fp16 output 2^-11; fp32 sum {acc_why} (x max|want|)"


# end snippet


def make_inputs(M, N, K, device, seed=0):
    g = torch.Generator(device).manual_seed(seed)
    a = torch.randn((M, K), generator=g, device=device, dtype=torch.float16)
    b = torch.randn((K, N), generator=g, device=device, dtype=torch.float16)
    return a, b


# snippet: checks
# K = 1000 is not a multiple of BLOCK_K, and 3 and 7 splits do not divide its
# steps (7 leaves empty slices, which are dropped); N = 200 ends in a partial
# tile, M = 5 is less than BLOCK_M. The GPU adds the benchmark's shape, with
# both tiles it times. Stream-K runs with program counts that do not divide
# the work, so runs end inside tiles. Each case: ((M, N, K), BLOCK_Ns).
CHECK_PLAN = {
    "interpreter": {"cases": [((5, 200, 1000), (64,)), ((16, 256, 640), (64,))],
                    "splits": (1, 3, 7), "stream_programs": (5,)},
    "gpu": {"cases": [((5, 200, 1000), (64,)), ((16, 4096, 16384), (64, 128))],
            "splits": (1, 3, 7, 16, 32), "stream_programs": (5, 396)},
}
# end snippet


def check_correctness(lesson: Lesson, device: str) -> dict:
    tiles = INTERPRETER_TILES if lesson.interpret else GPU_TILES
    plan = CHECK_PLAN["interpreter" if lesson.interpret else "gpu"]
    for seed, ((M, N, K), block_ns) in enumerate(plan["cases"]):
        a, b = make_inputs(M, N, K, device, seed)
        want = a.double() @ b.double()  # exact products, float64 sums
        rtol, atol, why = tolerance(K, want)
        for bn in block_ns:
            tile, name = tiles[bn], f"{M}x{N}x{K}-bn{bn}"
            c = matmul_tiled(a, b, tile)
            lesson.close(f"tiled-{name}", c, want, rtol, atol, why)
            for splits in plan["splits"]:
                for combine in ("reduce", "atomic"):
                    c = matmul_split_k(a, b, tile, splits, combine)
                    lesson.close(f"split{splits}-{combine}-{name}", c, want, rtol, atol,
                                 why)
            for programs in plan["stream_programs"]:
                c = matmul_stream_k(a, b, tile, programs)
                lesson.close(f"stream-k-{programs}-{name}", c, want, rtol, atol, why)
    return tiles


def check_determinism(lesson: Lesson, device: str, tile: dict) -> None:
    M, N, K, splits, repeats = (*SHAPE, 16, 8)
    if lesson.interpret:
        M, N, K, splits, repeats = 16, 64, 512, 4, 3
    # snippet: determinism
    # The same product several times: the fixed-order reduction must give
    # the same bits every time. The atomic version adds the partial tiles
    # in whatever order the programs finish; on a GPU that order changes.
    a, b = make_inputs(M, N, K, device, seed=11)
    runs = {c: [matmul_split_k(a, b, tile, splits, c) for _ in range(repeats)]
            for c in ("reduce", "atomic")}
    same = {c: sum(torch.equal(r, rs[0]) for r in rs[1:]) for c, rs in runs.items()}
    # end snippet
    lesson.check(
        "reduce-is-deterministic", same["reduce"] == repeats - 1,
        f"{splits} slices, fixed-order sum: {same['reduce']} of {repeats - 1} "
        "repeats bit-identical to the first",
    )
    differ = [int((r != runs["atomic"][0]).sum()) for r in runs["atomic"][1:]]
    if not lesson.not_on_interpreter(
        "atomic run-to-run variation",
        "the interpreter runs programs one after another, so atomics add in one order",
    ):
        lesson.table(
            "atomic-repeats", ["combine", "repeats bit-identical to the first",
                               "elements that differ, per repeat"],
            [["reduce (fixed order)", f"{same['reduce']} of {repeats - 1}", "0"],
             ["atomic", f"{same['atomic']} of {repeats - 1}",
              ", ".join(map(str, differ))]],
            f"Split-K with {splits} slices, {M}x{N}x{K}, the same inputs "
            f"{repeats} times",
        )


def occupancy_table(lesson: Lesson, sms: int) -> None:
    """Programs against SMs: why the tiled kernel starves."""
    M, N, K = SHAPE
    rows = []
    for bn in (64, 128):
        tiles = triton.cdiv(N, bn) * triton.cdiv(M, 16)
        rows.append(["tiled", bn, 1, tiles, sms, tiles / sms, K])
        for splits in (2, 4, 8, 16):
            kps, used = split_plan(K, splits, 128)
            rows.append(["split-K", bn, used, tiles * used, sms, tiles * used / sms,
                         kps])
    lesson.table(
        "programs-vs-sms",
        ["kernel", "BLOCK_N", "splits", "programs", "SMs", "programs per SM",
         "K per program"],
        rows,
        f"M={M}, N={N}, K={K}, BLOCK_M=16, BLOCK_K=128: one row of tiles",
    )


def try_this(lesson: Lesson, device: str, tile: dict) -> None:
    # snippet: solution-swap
    # Exercise: C^T = B^T A^T. The same kernel, handed transposed views
    # (strides do the transposing), computes the 4096 x 16 product, where
    # the long side is the tile's M and the short side its N.
    a, b = make_inputs(16, 256, 640, device, seed=5)
    want = (a.double() @ b.double()).t()
    c_t = matmul_split_k(b.t(), a.t(), tile, splits=3)
    # end snippet
    rtol, atol, why = tolerance(640, want)
    lesson.close("exercise-swap-operands", c_t, want, rtol, atol, why)

    # snippet: solution-empty-slices
    # Exercise: how many slices does split_plan use for K = 16384,
    # BLOCK_K = 128 and 48 requested splits? 128 steps / 48 -> 3 steps per
    # slice -> 43 slices, the last of 2 steps; 48 would leave 5 empty.
    k_per_split, used = split_plan(16384, 48, 128)
    # end snippet
    lesson.check("exercise-empty-slices", (k_per_split, used) == (384, 43),
                 f"48 requested: {used} slices of {k_per_split}")


def resident_per_sm(kernel_obj, num_warps: int) -> int:
    """Programs of this compiled kernel that fit on one H100/H200 SM at once."""
    by_smem = (228 * 1024) // (kernel_obj.metadata.shared + 1024)  # 1 KiB reserved
    by_regs = 65536 // max(1, kernel_obj.n_regs * 32 * num_warps)
    return max(1, min(by_smem, by_regs, 64 // num_warps, 32))


def show_compiled_code(lesson: Lesson, a, b, sms: int) -> dict:
    """What the compiler made of each kernel: MMA kind, shared memory, residency."""
    import re

    if lesson.not_on_interpreter("compiled code", "the interpreter compiles nothing"):
        # A smoke run goes on to the sweep with one program per SM.
        kernels = ("tiled", "split-K", "stream-K")
        return {(k, bn): 1 for k in kernels for bn in GPU_TILES}
    M, K = a.shape
    N = b.shape[1]
    ws = torch.zeros((16, M, N), device=a.device, dtype=torch.float32)
    c = torch.empty((M, N), device=a.device, dtype=torch.float16)
    rows, resident = [], {}
    for bn, tile in GPU_TILES.items():
        kernels = {
            "tiled": matmul_kernel[(1, 1)](
                a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                c.stride(0), c.stride(1), **tile),
            "split-K": matmul_split_k_kernel[(1, 1, 1)](
                a, b, ws, M, N, K, K, a.stride(0), a.stride(1), b.stride(0),
                b.stride(1), ATOMIC=False, **tile),
            "stream-K": matmul_stream_k_kernel[(sms,)](
                a, b, ws, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                **tile),
        }
        for name, k in kernels.items():
            ptx = k.asm["ptx"]
            per_sm = resident_per_sm(k, tile["num_warps"])
            resident[name, bn] = per_sm
            rows.append([
                name, bn, len(re.findall(r"wgmma\.mma_async", ptx)),
                len(re.findall(r"mma\.sync", ptx)),
                len(re.findall(r"cp\.async\.c[ag]\.shared\.global", ptx)),
                k.metadata.shared, k.n_regs, per_sm,
            ])
    lesson.table(
        "compiled",
        ["kernel", "BLOCK_N", "wgmma", "mma.sync", "cp.async", "shared bytes",
         "registers", "programs per SM"],
        rows,
        "Static PTX counts; programs per SM from shared memory and registers",
    )
    return resident


def sweep(lesson: Lesson, a, b, sms: int, resident: dict) -> dict:
    M, K = a.shape
    N = b.shape[1]
    flop = 2 * M * N * K
    # snippet: sweep
    # Every split count with both tiles and both ways of combining slices.
    cublas = tflops(flop, bench_ms(partial(torch.matmul, a, b)))
    splits_list = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32]
    curves = {}  # (BLOCK_N, combine) -> TFLOP/s at each split count
    for bn, tile in GPU_TILES.items():
        for combine in ("reduce", "atomic"):
            curves[bn, combine] = [
                tflops(flop, bench_ms(partial(matmul_split_k, a, b, tile, splits,
                                              combine), rep_ms=25))
                for splits in splits_list
            ]
    # end snippet
    rows = []
    for bn in GPU_TILES:
        slots = sms * resident["split-K", bn]
        for i, splits in enumerate(splits_list):
            programs = triton.cdiv(N, bn) * split_plan(K, splits, 128)[1]
            reduce, atomic = curves[bn, "reduce"][i], curves[bn, "atomic"][i]
            rows.append([bn, splits, programs, programs / slots, reduce, atomic,
                         max(reduce, atomic) / cublas])
    lesson.table(
        "split-sweep",
        ["BLOCK_N", "splits", "programs", "waves", "reduce TFLOP/s",
         "atomic TFLOP/s", "best vs cuBLAS"],
        rows,
        f"{M}x{N}x{K} fp16; cuBLAS {cublas:.1f} TFLOP/s; "
        "waves = programs / (SMs x programs per SM)",
    )
    # The H200's datasheet bandwidth over the bytes of A, B and C: no kernel
    # that reads B once can beat this.
    bandwidth = 4.8e12
    floor_s = 2 * (M * K + K * N + M * N) / bandwidth
    roof = flop / floor_s / 1e12

    def draw(fig):
        ax = fig.subplots()
        for (bn, combine), values in curves.items():
            style = "o-" if combine == "reduce" else "s--"
            ax.plot(splits_list, values, style, label=f"BLOCK_N = {bn}, {combine}")
        ax.axhline(cublas, color="gray", linestyle="--", label="cuBLAS (torch.matmul)")
        ax.axhline(roof, color="gray", linestyle=":",
                   label=f"{bandwidth / 1e12:g} TB/s roof (datasheet)")
        ax.set_xscale("log", base=2)
        ax.set_xticks(splits_list)
        ax.set_xticklabels([str(s) for s in splits_list])
        ax.set_ylim(bottom=0)
        ax.set_xlabel("splits of K (1 = the tiled kernel's grid)")
        ax.set_ylabel("TFLOP/s (fp16 in, fp32 accumulate)")
        fig.legend(loc="outside lower center", ncols=2)

    lesson.plot("split-sweep", f"Split-K at {M}x{N}x{K}: TFLOP/s against the split "
                "count", draw, size=(7.0, 5.8))
    # The best (BLOCK_N, splits, TFLOP/s) of each way of combining.
    best = {}
    for combine in ("reduce", "atomic"):
        best[combine] = max(
            ((bn, splits, curves[bn, combine][i]) for bn in GPU_TILES
             for i, splits in enumerate(splits_list)),
            key=lambda p: p[2],
        )
    return best


def benchmark(lesson: Lesson, a, b, best: dict, sms: int, resident: dict) -> None:
    M, K = a.shape
    N = b.shape[1]
    # snippet: benchmark
    # The sweep's best split-K is timed against cuBLAS, with the best of the
    # other way of combining, stream-K (one program per resident slot on
    # every SM) and the tiled kernel's 64 programs. 2*M*N*K FLOP per call.
    first = max(best, key=lambda c: best[c][2])
    second = "atomic" if first == "reduce" else "reduce"
    (bn, splits, _), (bn2, splits2, _) = best[first], best[second]
    flop = 2 * M * N * K
    # The prediction, from the bytes: B is read once at a copy's rate (4.3
    # TB/s on an H200), which caps the rate at FLOPs / that time.
    floor_ms = K * N * b.element_size() / 4.3e9
    contenders = {
        "cublas": partial(torch.matmul, a, b),
        "split-k": partial(matmul_split_k, a, b, GPU_TILES[bn], splits, first),
        "split-k-2": partial(matmul_split_k, a, b, GPU_TILES[bn2], splits2, second),
        "stream-k": partial(matmul_stream_k, a, b, GPU_TILES[bn],
                            sms * resident["stream-K", bn]),
        "tiled": partial(matmul_tiled, a, b, GPU_TILES[64]),
    }
    # end snippet
    lesson.predict("split-k-tflops-16x4096x16384", flop / floor_ms * 1e-9,
                   "the bandwidth roof: B's 134 MB read once at 4.3 TB/s, an "
                   "H200's copy rate", 0.15, of="split-k-vs-cublas-16x4096x16384",
                   quantity="kernel")
    ms = bench_interleaved(contenders)
    common = dict(unit="TFLOP/s", work=flop, baseline_name="cuBLAS (torch.matmul)")
    lesson.benchmark(
        "split-k-vs-cublas-16x4096x16384",
        f"split-K ({splits} slices, BLOCK_N {bn}, {first}) vs cuBLAS, "
        "16x4096x16384 fp16",
        ms, "split-k", "cublas", threshold=0.9, stretch=1.1, **common,
    )
    lesson.benchmark(
        "split-k-other-combine-vs-cublas",
        f"split-K ({splits2} slices, BLOCK_N {bn2}, {second}) vs cuBLAS",
        ms, "split-k-2", "cublas", note="informational", **common,
    )
    lesson.benchmark(
        "stream-k-vs-cublas", f"stream-K (BLOCK_N {bn}, atomic adds) vs cuBLAS",
        ms, "stream-k", "cublas", note="informational", **common,
    )
    lesson.benchmark(
        "tiled-vs-cublas-16x4096x16384", "tiled, no split (64 programs) vs cuBLAS",
        ms, "tiled", "cublas", note="informational: the starving grid", **common,
    )


def main() -> int:
    lesson = Lesson("split-k")
    device = lesson.device()
    tile = (INTERPRETER_TILES if lesson.interpret else GPU_TILES)[64]
    if lesson.step("occupancy", needs_gpu="it counts the GPU's SMs"):
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        occupancy_table(lesson, sms)
    with lesson.step("determinism"):
        check_determinism(lesson, device, tile)
    if lesson.step("compiled-code", needs_gpu="the interpreter compiles nothing"):
        a, b = make_inputs(*lesson.size(gpu=SHAPE, smoke=(16, 128, 512)), device, 100)
        resident = show_compiled_code(lesson, a, b, sms)
    with lesson.step("correctness"):
        check_correctness(lesson, device)
    if lesson.step("sweep", needs_gpu="timings need a GPU"):
        best = sweep(lesson, a, b, sms, resident)
    if lesson.step("benchmark", needs_gpu="timings need a GPU"):
        benchmark(lesson, a, b, best, sms, resident)
    with lesson.step("exercises"):
        try_this(lesson, device, tile)
    return lesson.finish()


if __name__ == "__main__":
    sys.exit(main())
