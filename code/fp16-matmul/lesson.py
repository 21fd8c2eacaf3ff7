"""FP16 matmul: tiles, grouped order, and why two lines decide the speed.

C = A @ B with A (M x K) and B (K x N) in FP16. Each Triton program owns one
BLOCK_M x BLOCK_N tile of C. It walks K in steps of BLOCK_K, loads a
BLOCK_M x BLOCK_K tile of A and a BLOCK_K x BLOCK_N tile of B, multiplies
them on the tensor cores with `tl.dot`, and accumulates in FP32. Only at the
end is the tile rounded to FP16 and stored.

The lesson runs two kernels that compute the same thing:

* the *seed* kernel, as the notebook this lesson grew from wrote it: it keeps
  out-of-range rows and columns in bounds with `tl.where(offs < M, offs, 0)`
  and accumulates with `acc += tl.dot(a, b)`;
* the *recommended* kernel: it wraps offsets with `% M`, states their
  contiguity with `tl.multiple_of` / `tl.max_contiguous`, masks only the K
  tail, and accumulates with `acc = tl.dot(a, b, acc)`.

Everything else (the grid, the grouped order, the K loop) is shared, and on a
GPU the two are an order of magnitude apart. The page explains why.

Run it:
    TRITON_INTERPRET=1 python fp16_matmul.py   # any machine: checks on the CPU
    python fp16_matmul.py                      # a CUDA GPU: checks, TFLOP/s, sweep
"""

import math
import re
import statistics
import sys
from functools import partial
from pathlib import Path

import torch
import triton
import triton.language as tl

# lessonkit.py sits beside this file in a download, one folder up in the repository.
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]
from lessonkit import Lesson, bench_interleaved, bench_ms, scaled_rtol  # noqa: E402


# snippet: grouped-order
@triton.jit
def tile_coordinates(pid, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                     GROUP_SIZE_M: tl.constexpr):
    """Map the 1-D program id to the (pid_m, pid_n) tile it computes.

    Row-major order (pid_m = pid // num_pid_n) would sweep one row of C
    tiles at a time: every program of that row reads the same A rows but a
    different B column block, so all of B streams through L2 for every row
    of tiles. Grouped order walks GROUP_SIZE_M rows of tiles column by
    column instead. Programs that run at the same time then share both A
    row blocks and B column blocks, and far fewer tiles are fetched from
    DRAM more than once.
    """
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    # The last group may have fewer than GROUP_SIZE_M rows of tiles.
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    return pid_m, pid_n
# end snippet


@triton.jit
def tile_order_kernel(pid_m_ptr, pid_n_ptr, M, N, BLOCK_M: tl.constexpr,
                      BLOCK_N: tl.constexpr, GROUP_SIZE_M: tl.constexpr):
    """Each program stores the tile tile_coordinates gives it: the order, as data."""
    pid = tl.program_id(0)
    pid_m, pid_n = tile_coordinates(pid, M, N, BLOCK_M, BLOCK_N, GROUP_SIZE_M)
    tl.store(pid_m_ptr + pid, pid_m)
    tl.store(pid_n_ptr + pid, pid_n)


def tile_order(tiles_m, tiles_n, group_size_m, device):
    """[(pid_m, pid_n) of program 0, of program 1, ...] on a tiles_m x tiles_n
    grid of 128 x 128 tiles, from the kernels' own tile_coordinates."""
    pid_m = torch.empty(tiles_m * tiles_n, dtype=torch.int32, device=device)
    pid_n = torch.empty_like(pid_m)
    tile_order_kernel[(tiles_m * tiles_n,)](pid_m, pid_n, tiles_m * 128,
                                            tiles_n * 128, BLOCK_M=128, BLOCK_N=128,
                                            GROUP_SIZE_M=group_size_m)
    return list(zip(pid_m.tolist(), pid_n.tolist(), strict=True))


# snippet: seed-kernel
@triton.jit
def matmul_kernel_seed(
    a_ptr, b_ptr, c_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
):
    pid_m, pid_n = tile_coordinates(tl.program_id(0), M, N, BLOCK_M, BLOCK_N,
                                    GROUP_SIZE_M)
    offs_am = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_bn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    # Rows and columns past the edge are sent to index 0 so that every
    # pointer stays inside the tensors; the masks below drop those lanes.
    # Correct, but the offsets are now a select, not an arange.
    offs_am_safe = tl.where(offs_am < M, offs_am, 0)
    offs_bn_safe = tl.where(offs_bn < N, offs_bn, 0)
    a_ptrs = a_ptr + offs_am_safe[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn_safe[None, :] * stride_bn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_mask = offs_k + k * BLOCK_K < K
        a = tl.load(a_ptrs, mask=(offs_am[:, None] < M) & k_mask[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=k_mask[:, None] & (offs_bn[None, :] < N), other=0.0)
        acc += tl.dot(a, b)  # a product, then a separate add
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    c = acc.to(tl.float16)
    c_ptrs = c_ptr + offs_am[:, None] * stride_cm + offs_bn[None, :] * stride_cn
    tl.store(c_ptrs, c, mask=(offs_am[:, None] < M) & (offs_bn[None, :] < N))
# end snippet


# snippet: kernel
@triton.jit
def matmul_kernel(
    a_ptr, b_ptr, c_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
):
    pid_m, pid_n = tile_coordinates(tl.program_id(0), M, N, BLOCK_M, BLOCK_N,
                                    GROUP_SIZE_M)
    # Wrap instead of clamp: each tile's offsets stay one run of consecutive
    # indices (only the last tile wraps around to row/column 0), and every
    # address is in bounds, so A and B need no mask along M or N at all.
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    # Tell the compiler what it may assume: each run of BLOCK offsets is
    # contiguous and starts at a multiple of BLOCK. This is what lets it
    # issue 16-byte vector loads and asynchronous copies into shared memory.
    offs_am = tl.max_contiguous(tl.multiple_of(offs_am, BLOCK_M), BLOCK_M)
    offs_bn = tl.max_contiguous(tl.multiple_of(offs_bn, BLOCK_N), BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        # Only the K tail needs a mask: zeros past K add nothing to the dot.
        k_remaining = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_remaining, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_remaining, other=0.0)
        # Accumulate inside the MMA: the tensor cores add into acc in place.
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    c = acc.to(tl.float16)  # FP32 accumulator, FP16 output
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn
    # The store is where the wrapped rows and columns are dropped.
    tl.store(c_ptrs, c, mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))
# end snippet


# snippet: launch
# Tile shapes and launch settings. On the GPU the recommended kernel uses
# 128x256x64 tiles with 8 warps and a 3-stage pipeline; the seed kernel keeps
# the notebook's 128x128x64 (Triton's defaults: 4 warps, 3 stages). The
# interpreter runs one numpy program per tile and ignores warps and stages,
# so there the same kernels run with small 32x32x32 tiles.
RECOMMENDED = dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_SIZE_M=8,
                   num_warps=8, num_stages=3)
SEED = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_SIZE_M=8,
            num_warps=4, num_stages=3)
INTERPRETER = dict(BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, GROUP_SIZE_M=4)


def matmul(a, b, kernel=matmul_kernel, config=RECOMMENDED, out=None):
    """C = A @ B in FP16 through `kernel` with launch `config`."""
    assert a.dtype == b.dtype == torch.float16 and a.shape[1] == b.shape[0]
    M, K = a.shape
    _, N = b.shape
    if out is None:
        out = torch.empty((M, N), device=a.device, dtype=torch.float16)
    # A 1-D grid: one program per output tile; tile_coordinates decides
    # which tile each program id gets.
    grid = (triton.cdiv(M, config["BLOCK_M"]) * triton.cdiv(N, config["BLOCK_N"]),)
    kernel[grid](a, b, out, M, N, K,
                 a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                 out.stride(0), out.stride(1), **config)
    return out
# end snippet


# snippet: intensity
def arithmetic_intensity(M, N, K, bytes_per_element=2):
    """FLOP per byte of DRAM traffic if A and B are read once and C written once."""
    return 2 * M * N * K / (bytes_per_element * (M * K + K * N + M * N))


# H200 SXM datasheet: ~990 TFLOP/s dense FP16/BF16 tensor-core rate over
# 4.8 TB/s of HBM3e. Below this many FLOP per byte a kernel is memory-bound.
H200_RIDGE = 990e12 / 4.8e12  # ~206 FLOP/byte
# end snippet


# snippet: tolerance
def tolerance(K, want):
    """(rtol, atol, why) for an FP16 matmul with an FP32 accumulator.

    Two errors reach the output. The final cast to FP16 rounds each element
    once, by at most half an ulp: 2^-11 relative to the element. The FP32
    sum over K drifts like sqrt(K) roundings of size 2^-24 relative to the
    partial sums; the kit's rule bounds it by 4 * 2^-23 * sqrt(K), taken
    relative to max|want| so that elements which cancel to near zero are
    judged on the scale of the result, not on their own tiny size.
    """
    rtol = 2.0 ** -11
    acc_rtol, acc_why = scaled_rtol(0.0, 2.0 ** -23, K)
    scale = float(want.abs().max())
    return rtol, acc_rtol * scale, (f"fp16 output rounding 2^-11; fp32 accumulation "
                                    f"{acc_why} (x max|want|)")
# end snippet


def random_fp16(rows, cols, device):
    return torch.randn((rows, cols), device=device).half()


def check_shape(lesson, name, kernel, config, M, N, K, device, rng_seed):
    torch.manual_seed(rng_seed)
    a = random_fp16(M, K, device)
    b = random_fp16(K, N, device)
    c = torch.full((M, N), float("nan"), device=device, dtype=torch.float16)  # poison
    matmul(a, b, kernel, config, out=c)
    want = a.double() @ b.double()  # exact products of the FP16 inputs, float64 sums
    rtol, atol, why = tolerance(K, want)
    lesson.close(f"{name}-{M}x{N}x{K}", c, want, rtol, atol, why)


def check_roofline(lesson: Lesson) -> None:
    # snippet: roofline-check
    # Is 70 % of cuBLAS a reasonable goal at all? Only if the work is
    # compute-bound: then both kernels chase the same tensor-core ceiling
    # and the ratio measures the kernel, not the memory system.
    ai = arithmetic_intensity(4096, 4096, 4096)
    compute_bound = ai > H200_RIDGE
    # end snippet
    lesson.check("workload-is-compute-bound", compute_bound,
                 f"4096^3 fp16: {ai:.0f} FLOP/byte vs H200 ridge "
                 f"{H200_RIDGE:.0f} FLOP/byte")


def show_tile_order(lesson: Lesson, device: str) -> None:
    """The order tile_coordinates gives the programs, row-major (GROUP_SIZE_M = 1)
    and grouped (8), on a grid small enough to draw; and what the first programs
    to run together read between them."""
    tiles_m, tiles_n, together = 12, 16, 32
    orders = {group: tile_order(tiles_m, tiles_n, group, device) for group in (1, 8)}
    every_tile = sorted((m, n) for m in range(tiles_m) for n in range(tiles_n))
    reads = {}
    for group, order in orders.items():
        lesson.check(f"tile-order-group-{group}-covers-every-tile-once",
                     sorted(order) == every_tile,
                     f"{tiles_m} x {tiles_n} tiles, GROUP_SIZE_M = {group}")
        first = order[:together]
        rows, cols = len({m for m, _ in first}), len({n for _, n in first})
        reads[group] = (rows, cols)
        print(f"  GROUP_SIZE_M = {group}: programs 0-{together - 1} compute tiles in "
              f"{rows} rows and {cols} columns of C, so they read {rows} row blocks "
              f"of A and {cols} column blocks of B: {rows + cols} blocks")
    lesson.check("grouped-order-reads-fewer-blocks",
                 sum(reads[8]) < sum(reads[1]),
                 f"the first {together} programs read {sum(reads[8])} blocks grouped, "
                 f"{sum(reads[1])} row-major")
    plot_tile_order(lesson, orders, tiles_m, tiles_n, together, reads)


def plot_tile_order(lesson: Lesson, orders, tiles_m, tiles_n, together, reads):
    def draw(fig):
        axes = fig.subplots(2, 1)
        for ax, (group, order) in zip(axes, orders.items(), strict=True):
            launch = [[0] * tiles_n for _ in range(tiles_m)]
            for pid, (m, n) in enumerate(order):
                launch[m][n] = pid
            ax.imshow(launch, cmap="viridis")
            first = order[:together]  # the path of the first programs, in order
            ax.plot([n for _, n in first], [m for m, _ in first], color="white",
                    linewidth=1.5, marker="o", markersize=4)
            rows, cols = reads[group]
            ax.set_title(f"GROUP_SIZE_M = {group}: programs 0-{together - 1} read "
                         f"{rows} + {cols} = {rows + cols} blocks")
            ax.set_xticks([0, tiles_n - 1])
            ax.set_yticks([0, tiles_m - 1])
            ax.set_xlabel("pid_n (column of tiles)")
            ax.set_ylabel("pid_m")
            ax.grid(False)
            # Thin borders between the tiles, in the page's background colour.
            ax.set_xticks([x - 0.5 for x in range(1, tiles_n)], minor=True)
            ax.set_yticks([y - 0.5 for y in range(1, tiles_m)], minor=True)
            ax.grid(which="minor", color=ax.get_facecolor(), linewidth=1)
            ax.tick_params(which="minor", length=0)

    lesson.plot("tile-order",
                f"Which program computes which tile of a {tiles_m} x {tiles_n} grid, "
                "as tile_coordinates orders them: colour is the program id, dark "
                f"first; the white path joins programs 0 to {together - 1}, which "
                "start together. Row-major order at the top, grouped at the bottom; "
                "each title counts the blocks of A and B those programs read.",
                draw, size=(7.0, 9.0))


def check_correctness(lesson: Lesson, device: str) -> None:
    # Shapes that are not multiples of any tile, so the wrapping, the K-tail
    # masks and the store masks all have work to do; plus one that is.
    if lesson.interpret:
        shapes = [(200, 136, 72), (64, 64, 64), (33, 100, 17)]
        configs = {"seed": (matmul_kernel_seed, INTERPRETER),
                   "recommended": (matmul_kernel, INTERPRETER)}
    else:
        shapes = [(200, 136, 72), (256, 256, 256), (1000, 1000, 1000),
                  (1000, 1016, 984)]
        configs = {"seed": (matmul_kernel_seed, SEED),
                   "recommended": (matmul_kernel, RECOMMENDED)}
    for rng_seed, (M, N, K) in enumerate(shapes):
        for name, (kernel, config) in configs.items():
            check_shape(lesson, name, kernel, config, M, N, K, device, rng_seed)
    if lesson.interpret:
        # The GPU's own tile sizes too (warps and stages mean nothing here):
        # every 256-wide tile on a 136-wide matrix wraps along N, and the
        # second row of 128-row tiles wraps along M as well.
        for name, kernel, config in (
                ("seed-gpu-tiles", matmul_kernel_seed, SEED),
                ("recommended-gpu-tiles", matmul_kernel, RECOMMENDED)):
            check_shape(lesson, name, kernel, config, 200, 136, 72, device, 7)
    else:
        # The benchmarked shape is checked too: what is timed must be right.
        for name, (kernel, config) in configs.items():
            check_shape(lesson, name, kernel, config, 4096, 4096, 4096, device, 100)


def ptx_facts(kernel, config, device):
    """Count the loads and MMAs in the PTX Triton generated for a 4096^3 launch.

    PTX global loads look like `ld.global[.cache hints].v4.b32` (16 bytes) or
    `ld.global[.cache hints].b16` (one FP16 value); asynchronous copies into
    shared memory are `cp.async.cg/ca.shared.global`; Hopper's tensor-core
    instructions are `wgmma.mma_async`. Counts are static (instructions in the
    code, not executions).
    """
    a = random_fp16(4096, 4096, device)
    compiled = kernel[(1,)](a, a, torch.empty_like(a), 4096, 4096, 4096,
                            4096, 1, 4096, 1, 4096, 1, **config)
    ptx = compiled.asm["ptx"]
    return [
        len(re.findall(r"ld\.global(?:\.(?!v\d)[\w:]+)*\.v4\.b32", ptx)),
        len(re.findall(r"ld\.global(?:\.(?!v\d)[\w:]+)*\.b16\b", ptx)),
        len(re.findall(r"cp\.async\.c[ag]\.shared\.global", ptx)),
        len(re.findall(r"wgmma\.mma_async", ptx)),
    ]


def show_compiled_code(lesson: Lesson, device: str) -> None:
    rows = [[label, *ptx_facts(kernel, config, device)]
            for label, kernel, config in (("seed", matmul_kernel_seed, SEED),
                                          ("recommended", matmul_kernel, RECOMMENDED))]
    lesson.table("ptx", ["kernel", "16-byte ld.global", "2-byte ld.global",
                         "cp.async", "wgmma"], rows,
                 "Instructions in the PTX of each kernel (as compiled for 4096^3): "
                 "how A and B reach the tensor cores")


def benchmark(lesson: Lesson, device: str) -> None:
    torch.manual_seed(0)
    size = lesson.size(gpu=4096, smoke=256)
    # snippet: benchmark
    # Random FP16 inputs; cuBLAS (torch.matmul) is timed in the same run.
    # TFLOP/s = 2*M*N*K / time: each of the M*N outputs is K multiply-adds.
    a = random_fp16(size, size, device)
    b = random_fp16(size, size, device)
    flop = 2 * size**3
    # The prediction, from the roofline and the tile count: compute-bound like
    # cuBLAS, on the same tensor cores, the kernel loses the pipeline's fill
    # and the epilogue of each tile (about 3 of 64 + 3 K steps) and the idle
    # part of its last wave (512 tiles of 128 x 256 are 3.9 waves of 132 SMs).
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    tiles = (size // RECOMMENDED["BLOCK_M"]) * (size // RECOMMENDED["BLOCK_N"])
    steps = size // RECOMMENDED["BLOCK_K"]
    waves = tiles / sms
    predicted = steps / (steps + 3) * waves / math.ceil(waves)
    # Five contenders. The last two swap the kernels' configurations: is the
    # difference the code or the tile?
    contenders = {
        "cublas": lambda: torch.matmul(a, b),
        "recommended": lambda: matmul(a, b, matmul_kernel, RECOMMENDED),
        "seed": lambda: matmul(a, b, matmul_kernel_seed, SEED),
        "recommended, seed config": lambda: matmul(a, b, matmul_kernel, SEED),
        "seed, recommended config": lambda: matmul(a, b, matmul_kernel_seed,
                                                   RECOMMENDED),
    }
    # end snippet
    # snippet: measure
    lesson.predict(
        "recommended-vs-cublas-4096", predicted,
        f"cuBLAS's rate, less 3 of {steps + 3} K steps per tile (fill, epilogue) "
        f"and the idle part of {waves:.2f} waves of {sms} SMs",
        0.10,
    )
    # All five take turns in each of ten rounds.
    ms = bench_interleaved(contenders, rounds=10)
    lesson.benchmark("recommended-vs-cublas-4096",
                     "recommended kernel vs cuBLAS, 4096^3 fp16", ms, "recommended",
                     "cublas", unit="TFLOP/s", work=flop,
                     baseline_name="cuBLAS (torch.matmul)", threshold=0.70,
                     stretch=0.85)
    lesson.benchmark("seed-vs-cublas-4096", "seed kernel vs cuBLAS, 4096^3 fp16", ms,
                     "seed", "cublas", unit="TFLOP/s", work=flop,
                     baseline_name="cuBLAS (torch.matmul)",
                     note="informational: the notebook's kernel")
    # end snippet

    # Code or configuration? Each kernel with each configuration, from the
    # same rounds: TFLOP/s of the median time, and the median per-round ratio.
    rows = []
    for kernel in ("seed", "recommended"):
        for cfg_name, config in (("seed", SEED), ("recommended", RECOMMENDED)):
            name = kernel if cfg_name == kernel else f"{kernel}, {cfg_name} config"
            ratio = statistics.median(
                c / k for k, c in zip(ms[name], ms["cublas"], strict=True))
            shape = (f"{config['BLOCK_M']}x{config['BLOCK_N']}x{config['BLOCK_K']}, "
                     f"{config['num_warps']} warps")
            rows.append([kernel, shape, flop / ms.median(name) * 1e-9, ratio])
    lesson.table("code-or-config",
                  ["kernel", "config (3 stages)", "TFLOP/s", "vs cuBLAS"], rows,
                  "4096^3 FP16: each kernel with each configuration, "
                  "medians of the same interleaved rounds as the benchmarks")


def sweep_and_plot(lesson: Lesson, device: str) -> None:
    sizes = lesson.size(gpu=[512, 1024, 2048, 4096, 8192], smoke=[64, 128])
    # snippet: sweep
    # A table and a figure, not a target: one do_bench median per point.
    curves = {"seed": [], "recommended": [], "cuBLAS": []}
    for size in sizes:
        a = random_fp16(size, size, device)
        b = random_fp16(size, size, device)
        flop = 2 * size**3
        fns = {"cuBLAS": partial(torch.matmul, a, b),
               "recommended": partial(matmul, a, b, matmul_kernel, RECOMMENDED),
               "seed": partial(matmul, a, b, matmul_kernel_seed, SEED)}
        for name, fn in fns.items():
            curves[name].append(flop / bench_ms(fn) * 1e-9)
    # end snippet
    rows = [[s, curves["seed"][i], curves["recommended"][i], curves["cuBLAS"][i],
             curves["recommended"][i] / curves["cuBLAS"][i]]
            for i, s in enumerate(sizes)]
    lesson.table("sweep", ["M=N=K", "seed TFLOP/s", "recommended TFLOP/s",
                           "cuBLAS TFLOP/s", "recommended / cuBLAS"], rows,
                 "Square FP16 matmuls, do_bench medians")
    plot_sweep(lesson, sizes, curves)


def plot_sweep(lesson: Lesson, sizes: list, curves: dict) -> None:
    styles = {"cuBLAS": ("o", "cuBLAS (torch.matmul)"),
              "recommended": ("s", "recommended kernel"),
              "seed": ("^", "seed kernel")}

    def draw(fig):
        left, right = fig.subplots(2, 1, sharex=True)  # stacked: a phone's column
        for name, values in curves.items():
            marker, label = styles[name]
            left.plot(sizes, values, marker=marker, label=label)
            if name != "cuBLAS":
                right.plot(sizes, [v / c for v, c in zip(values, curves["cuBLAS"],
                                                          strict=True)],
                           marker=marker, label=label)
        for ax in (left, right):
            ax.set_xscale("log", base=2)
            ax.set_xticks(sizes, [str(s) for s in sizes])
        right.set_xlabel("M = N = K")
        left.set_ylabel("TFLOP/s")
        fig.legend(*left.get_legend_handles_labels(), loc="outside lower center",
                   ncols=2)
        left.set_ylim(bottom=0)
        right.axhline(1.0, color="grey", linewidth=1, linestyle="--")
        right.set_ylabel("ratio to cuBLAS")
        right.set_ylim(bottom=0, top=max(1.2, 1.1 * right.get_ylim()[1]))

    lesson.plot("tflops-vs-size",
                "TFLOP/s (fp16 in, fp32 accumulate) of the seed and recommended "
                "kernels and cuBLAS at square sizes (top), and each kernel's ratio "
                "to cuBLAS (bottom)", draw, size=(7.0, 7.4))


def try_this(lesson: Lesson, device: str) -> None:
    config = INTERPRETER if lesson.interpret else RECOMMENDED
    # Ragged against every tile; on the GPU every size is also a multiple of
    # 16, so these launches run the same compiled code as the benchmark.
    M, N, K = (200, 136, 72) if lesson.interpret else (784, 656, 400)
    torch.manual_seed(11)
    x = random_fp16(M, K, device)
    # snippet: solution-transposed-weight
    # Exercise: y = x @ W.T, with W stored N x K as nn.Linear keeps its
    # weight. W.T is a view with strides (1, K): the kernel reads B through
    # the strides it is given, so no copy is needed.
    weight = random_fp16(N, K, device)
    y = matmul(x, weight.t(), config=config)
    # end snippet
    want = x.double() @ weight.double().t()
    rtol, atol, why = tolerance(K, want)
    lesson.close("exercise-transposed-weight", y, want, rtol, atol,
                 f"B = W.T, strides {tuple(weight.t().stride())}; {why}")

    b = random_fp16(K, N, device)
    # snippet: solution-group-size-one
    # Exercise: GROUP_SIZE_M = 1 is plain row-major tile order. Every tile is
    # still computed once, by the same code with the same K loop, so the
    # output must be identical bit for bit; only the timing can change.
    grouped = matmul(x, b, config=config)
    row_major = matmul(x, b, config={**config, "GROUP_SIZE_M": 1})
    same = torch.equal(grouped, row_major)
    # end snippet
    lesson.check("exercise-group-size-one", same,
                 f"{M}x{N}x{K}: GROUP_SIZE_M {config['GROUP_SIZE_M']} and 1 "
                 "give the same bits")


def main() -> int:
    lesson = Lesson("fp16-matmul")
    device = lesson.device()
    with lesson.step("roofline"):
        check_roofline(lesson)
    with lesson.step("tile-order"):
        show_tile_order(lesson, device)
    if lesson.step("compiled-code", needs_gpu="the interpreter compiles no PTX",
                   smoke=False):
        show_compiled_code(lesson, device)
    with lesson.step("correctness"):
        check_correctness(lesson, device)
    if lesson.step("benchmark", needs_gpu="timings need a GPU"):
        benchmark(lesson, device)
    if lesson.step("sweep", needs_gpu="timings need a GPU"):
        sweep_and_plot(lesson, device)
    with lesson.step("exercises"):
        try_this(lesson, device)
    return lesson.finish()


if __name__ == "__main__":
    sys.exit(main())
