"""Persistent TMA matmul: the last ten percent on Hopper.

The tiled FP16 matmul of the previous lesson launches one program per
128x256 output tile and lets each program compute its addresses, load its
operands through pointers, run its K loop, write its tile and exit. On an
H100 or H200 that already lands within reach of cuBLAS, but not on it. Two
Hopper habits close the gap, and this lesson adds them one at a time:

1. TMA, the Tensor Memory Accelerator. A *tensor descriptor* tells the
   hardware the shape, strides and tile size of a matrix once; after that
   one thread issues a bulk copy of a whole tile between global and shared
   memory.
   The threads no longer compute 128x64 addresses, no longer carry masks,
   and out-of-bounds reads come back as zeros by themselves.
2. A persistent grid. Instead of one program per tile, launch exactly one
   program per streaming multiprocessor (132 on an H200) and let each one
   loop over tiles. The per-tile launch and prologue disappear, and since
   the compiler flattens the tile loop and the K loop into one pipelined
   loop, the loads of the next tile are already in flight while the last
   tile's epilogue is still writing.

Last, the epilogue is stored in two halves, which halves the shared memory
it needs and lets the pipeline keep four stages.

Run it:
    TRITON_INTERPRET=1 python persistent_tma_matmul.py   # any machine: checks
    python persistent_tma_matmul.py                      # Hopper: checks, TFLOP/s
"""

import math
import re
import sys
from functools import partial
from pathlib import Path

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

# lessonkit.py sits beside this file in a download, one folder up in the repository.
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]
from lessonkit import Lesson, bench_interleaved, median_interval, scaled_rtol  # noqa: E402


# snippet: tile-coords
@triton.jit
def tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_SIZE_M: tl.constexpr):
    # Grouped order, as in the tiled lesson: walk the output tiles in bands of
    # GROUP_SIZE_M tile rows, column by column inside a band, so that the
    # tiles computed at about the same time share A rows and B columns in L2.
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = tile_id // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + (tile_id % group_size_m)
    pid_n = (tile_id % num_pid_in_group) // group_size_m
    return pid_m, pid_n
# end snippet


# -- Step 0: the tiled kernel of the previous lesson ---------------------------
#
# One program per output tile; pointer loads; `% M` wraps the row offsets of
# the last tile back into the matrix so the A and B loads need no row mask,
# and the multiple_of/max_contiguous hints let the compiler vectorise them.

# snippet: tiled-kernel
@triton.jit
def matmul_tiled_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                        stride_am, stride_ak, stride_bk, stride_bn,
                        stride_cm, stride_cn,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                        BLOCK_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr):
    pid_m, pid_n = tile_coords(tl.program_id(axis=0), tl.cdiv(M, BLOCK_M),
                               tl.cdiv(N, BLOCK_N), GROUP_SIZE_M)
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_am = tl.max_contiguous(tl.multiple_of(offs_am, BLOCK_M), BLOCK_M)
    offs_bn = tl.max_contiguous(tl.multiple_of(offs_bn, BLOCK_N), BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn
    mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, acc.to(tl.float16), mask=mask)
# end snippet


# -- Step 1: the same tile, moved by TMA ---------------------------------------
#
# Each program still owns one tile, but its operands arrive through tensor
# descriptors. `a_desc.load([row, col])` is a bulk copy of a BLOCK_M x
# BLOCK_K tile starting at that element; the block shape lives in the
# descriptor, not in the call. Rows or columns past the end of the matrix
# read as zero (the K tail and the M/N edges need no masks), and a store
# drops whatever falls outside the matrix.

# snippet: tma-kernel
@triton.jit
def matmul_tma_kernel(a_desc, b_desc, c_desc, M, N, K,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                      BLOCK_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr):
    pid_m, pid_n = tile_coords(tl.program_id(axis=0), tl.cdiv(M, BLOCK_M),
                               tl.cdiv(N, BLOCK_N), GROUP_SIZE_M)
    off_m = pid_m * BLOCK_M
    off_n = pid_n * BLOCK_N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(tl.cdiv(K, BLOCK_K)):
        a = a_desc.load([off_m, k * BLOCK_K])  # a BLOCK_M x BLOCK_K tile of A
        b = b_desc.load([k * BLOCK_K, off_n])  # a BLOCK_K x BLOCK_N tile of B
        acc = tl.dot(a, b, acc)
    c_desc.store([off_m, off_n], acc.to(tl.float16))
# end snippet


# -- Step 2: persistent, with a split epilogue ---------------------------------
#
# The grid is min(NUM_SMS, number of tiles) programs. Program p takes tiles
# p, p + NUM_SMS, p + 2*NUM_SMS, ... in the grouped order, so at any moment
# the machine works on NUM_SMS neighbouring tiles, as a full wave of the
# one-tile-per-program grid would. `flatten=True` asks the compiler to fuse
# the tile loop and the K loop into one software-pipelined loop: the TMA
# loads for the first K steps of the next tile are issued before the
# epilogue of the current one, so the tensor cores wait less between tiles.

# snippet: persistent-kernel
@triton.jit
def matmul_persistent_tma_kernel(a_desc, b_desc, c_desc, M, N, K,
                                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                                 BLOCK_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr,
                                 NUM_SMS: tl.constexpr):
    start_pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n
    k_tiles = tl.cdiv(K, BLOCK_K)
    for tile_id in tl.range(start_pid, num_tiles, NUM_SMS, flatten=True):
        pid_m, pid_n = tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_SIZE_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            a = a_desc.load([off_m, ki * BLOCK_K])
            b = b_desc.load([ki * BLOCK_K, off_n])
            acc = tl.dot(a, b, acc)
        # Split epilogue: view the BLOCK_M x BLOCK_N accumulator as
        # BLOCK_M x 2 x BLOCK_N/2, move the "2" last and split it off. acc0 is
        # the left half of the tile, acc1 the right half. Each half is staged
        # in shared memory and written by its own TMA store, so the staging
        # buffer is half a tile, and the second half's conversion overlaps
        # the first half's store.
        acc = tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1))
        acc0, acc1 = tl.split(acc)
        c_desc.store([off_m, off_n], acc0.to(tl.float16))
        c_desc.store([off_m, off_n + BLOCK_N // 2], acc1.to(tl.float16))
# end snippet


# -- launchers -------------------------------------------------------------------

# One configuration for all three kernels, so the steps differ only in what
# the lesson changes. 128x256x64 with 8 warps is the tiled lesson's winner.
BLOCK_M, BLOCK_N, BLOCK_K, GROUP_SIZE_M, NUM_WARPS = 128, 256, 64, 8, 8
BLOCKS = (BLOCK_M, BLOCK_N, BLOCK_K)


def _out(a, b, out):
    M, K = a.shape
    K2, N = b.shape
    assert K == K2, f"inner dimensions differ: {K} != {K2}"
    assert a.dtype == b.dtype == torch.float16
    if out is None:
        out = torch.empty((M, N), device=a.device, dtype=torch.float16)
    assert out.shape == (M, N) and out.dtype == torch.float16
    return M, N, K, out


def matmul_tiled(a, b, out=None, blocks=BLOCKS, num_stages=3, with_kernel=False):
    M, N, K, c = _out(a, b, out)
    bm, bn, bk = blocks
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
    compiled = matmul_tiled_kernel[grid](
        a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
        c.stride(0), c.stride(1), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
        GROUP_SIZE_M=GROUP_SIZE_M, num_warps=NUM_WARPS, num_stages=num_stages)
    return (c, compiled) if with_kernel else c


# snippet: descriptors
def tma_descriptors(a, b, c, bm, bn, bk, c_block_n):
    # A host-side descriptor records the base pointer, shape and strides of
    # a matrix plus the tile it moves. TMA wants the base 16-byte aligned,
    # the last dimension contiguous and every other stride a multiple of 16
    # bytes: for fp16 row-major storage, rows of a multiple of 8 values.
    # TensorDescriptor checks this and fails loudly otherwise.
    for t in (a, b, c):
        assert t.stride(-1) == 1, "TMA needs a unit stride in the last dimension"
    return (TensorDescriptor.from_tensor(a, [bm, bk]),
            TensorDescriptor.from_tensor(b, [bk, bn]),
            TensorDescriptor.from_tensor(c, [bm, c_block_n]))
# end snippet


def matmul_tma(a, b, out=None, blocks=BLOCKS, num_stages=3, with_kernel=False):
    M, N, K, c = _out(a, b, out)
    bm, bn, bk = blocks
    a_desc, b_desc, c_desc = tma_descriptors(a, b, c, bm, bn, bk, c_block_n=bn)
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
    compiled = matmul_tma_kernel[grid](
        a_desc, b_desc, c_desc, M, N, K, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
        GROUP_SIZE_M=GROUP_SIZE_M, num_warps=NUM_WARPS, num_stages=num_stages)
    return (c, compiled) if with_kernel else c


# snippet: persistent-launch
def matmul_persistent_tma(a, b, num_sms, out=None, blocks=BLOCKS, num_stages=4,
                          programs=None, with_kernel=False):
    M, N, K, c = _out(a, b, out)
    bm, bn, bk = blocks
    # The output descriptor moves half a tile: the epilogue stores in two halves.
    a_desc, b_desc, c_desc = tma_descriptors(a, b, c, bm, bn, bk, c_block_n=bn // 2)
    num_tiles = triton.cdiv(M, bm) * triton.cdiv(N, bn)
    # One program per SM, never more programs than tiles.
    grid = (programs or min(num_sms, num_tiles),)
    compiled = matmul_persistent_tma_kernel[grid](
        a_desc, b_desc, c_desc, M, N, K, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
        GROUP_SIZE_M=GROUP_SIZE_M, NUM_SMS=num_sms, num_warps=NUM_WARPS,
        num_stages=num_stages)
    return (c, compiled) if with_kernel else c
# end snippet


# -- checks ----------------------------------------------------------------------

FP16_RTOL = 1e-3  # the output is rounded to fp16: 2**-11 relative, under this value
F32_EPS = 2.0**-23  # the accumulator is fp32


def reference(a, b):
    """The same fp16 inputs multiplied in float64, and the course's tolerance.

    What is left between the kernel and this is its fp32 accumulation and its
    fp16 output.
    """
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
def step_results(M, N, K, device, blocks, num_sms):
    """Each step's C of random fp16 inputs, into poison, beside the float64
    product and its bound: {step: (got, want, rtol, atol, why)}."""
    torch.manual_seed(M * 7 + N * 3 + K)
    a = torch.randn((M, K), device=device, dtype=torch.float16)
    b = torch.randn((K, N), device=device, dtype=torch.float16)
    want, rtol, atol, why = reference(a, b)
    return {name: (run(a, b, out=nan_output(M, N, device), blocks=blocks), want,
                   rtol, atol, why)
            for name, run in steps(num_sms).items()}


# end snippet


def check_correctness(lesson, device, shapes, blocks, num_sms):
    for M, N, K in shapes:
        for name, result in step_results(M, N, K, device, blocks, num_sms).items():
            lesson.close(f"{name}-{M}x{N}x{K}", *result)


def show_compiled_code(lesson, device, num_sms):
    """What Triton made of each step at 4096^3: registers, shared memory, copies."""
    a = torch.randn((4096, 4096), device=device, dtype=torch.float16)
    rows = []
    for name, run in steps(num_sms).items():
        _, compiled = run(a, a, with_kernel=True)
        ptx = compiled.asm["ptx"]
        rows.append([
            STEPS[name], getattr(compiled, "n_regs", None),
            compiled.metadata.shared // 1024,
            len(re.findall(r"cp\.async\.c[ag]\.shared\.global", ptx)),
            len(re.findall(r"cp\.async\.bulk\.tensor\.\dd\.shared\S*\.global", ptx)),
            len(re.findall(r"cp\.async\.bulk\.tensor\.\dd\.global\.shared", ptx)),
            len(re.findall(r"wgmma\.mma_async", ptx))])
    lesson.table("compiled", ["kernel", "registers per thread", "shared memory KiB",
                              "cp.async (pointer copies)", "TMA loads", "TMA stores",
                              "wgmma"], rows,
                 "What Triton compiled for each step at 4096^3 (instructions counted "
                 "in the PTX, not executions)")


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
                                 f"{STEPS[name]} vs cuBLAS, 4096^3 fp16", ms, name,
                                 "cublas", unit="TFLOP/s", work=flop,
                                 baseline_name="torch.matmul (cuBLAS)", note=step,
                                 **goal)
        if n == large:
            lesson.benchmark("persistent-tma-vs-cublas-8192",
                             "persistent TMA vs cuBLAS, 8192^3 fp16", ms,
                             "persistent-tma", "cublas", unit="TFLOP/s", work=flop,
                             baseline_name="torch.matmul (cuBLAS)",
                             threshold=0.95, stretch=1.0, note="step 2 at 8192^3")
    rows = [[f"{n}^3", r["tiled"], r["tma"], r["persistent-tma"], r["cublas"],
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
                "cuBLAS. Bottom, from 2048^3 up: "
                "each step's ratio to cuBLAS, the median of the per-round ratios "
                "with its 95 % interval (at 2048^3, the range of 3 rounds)", draw,
                size=(7.0, 7.6))


# -- try this ----------------------------------------------------------------------

def exercise_odd_n(lesson, device, blocks, num_sms):
    M, N, K = (90, 201, 88) if lesson.interpret else (1000, 1001, 776)
    torch.manual_seed(30)
    a = torch.randn((M, K), device=device, dtype=torch.float16)
    b_dense = torch.randn((K, N), device=device, dtype=torch.float16)
    try:  # rows of N = 1001 fp16 values are 2002 bytes: not a multiple of 16
        TensorDescriptor.from_tensor(b_dense, [blocks[2], blocks[1]])
        refused = False
    except AssertionError:
        refused = True
    # snippet: solution-odd-n
    # Exercise: N that is not a multiple of 8. TMA needs every row to start on
    # a 16-byte boundary, not the matrix to be a multiple of the tile: store
    # B and C in rows padded to a multiple of 8 values and hand the kernel
    # views of the real width. The descriptors get shape N and the padded
    # row stride; boxes that reach past column N read zeros and store nothing.
    padded = triton.cdiv(N, 8) * 8
    b = torch.empty((K, padded), device=device, dtype=torch.float16)[:, :N]
    b.copy_(b_dense)
    c = torch.full((M, padded), float("nan"), device=device,
                   dtype=torch.float16)[:, :N]
    matmul_persistent_tma(a, b, num_sms, out=c, blocks=blocks)
    # end snippet
    want, rtol, atol, why = reference(a, b_dense)
    ok = lesson.close("exercise-odd-n", c, want, rtol, atol,
                      f"N = {N} in rows of {padded}; {why}")
    lesson.check("exercise-odd-n-refused", refused,
                 f"TensorDescriptor refuses a dense {K} x {N} fp16 B"
                 + ("" if ok else "; the padded product failed"))


def exercise_fewer_programs(lesson, device, blocks, num_sms):
    M, N, K = (90, 72, 88) if lesson.interpret else (4096, 2048, 256)
    torch.manual_seed(31)
    a = torch.randn((M, K), device=device, dtype=torch.float16)
    b = torch.randn((K, N), device=device, dtype=torch.float16)
    # snippet: solution-fewer-programs
    # Exercise: launch half as many programs as NUM_SMS says (other work
    # holds the other SMs, say). Program p still steps by NUM_SMS, so the
    # tiles p + i * NUM_SMS with p >= programs belong to no one: they stay
    # NaN. Predict how many, then count.
    programs = num_sms // 2
    c = matmul_persistent_tma(a, b, num_sms, out=nan_output(M, N, device),
                              blocks=blocks, programs=programs)
    tiles_m, tiles_n = triton.cdiv(M, blocks[0]), triton.cdiv(N, blocks[1])
    predicted = sum(t % num_sms >= programs for t in range(tiles_m * tiles_n))
    unwritten = sum(
        bool(c[i * blocks[0]:(i + 1) * blocks[0],
               j * blocks[1]:(j + 1) * blocks[1]].isnan().any())
        for i in range(tiles_m) for j in range(tiles_n))
    # The fix: step by tl.num_programs(0) instead of NUM_SMS.
    # end snippet
    want, rtol, atol, _ = reference(a, b)
    written = ~c.isnan()
    diff = (c.double() - want).abs()[written]
    right = bool((diff <= atol + rtol * want.abs()[written]).all())
    lesson.check("exercise-fewer-programs", unwritten == predicted and right,
                 f"{programs} programs, NUM_SMS = {num_sms}: {unwritten} of "
                 f"{tiles_m * tiles_n} tiles unwritten, {predicted} predicted; "
                 f"the written ones {'match' if right else 'do NOT match'} float64")


def try_this(lesson, device, blocks, num_sms):
    exercise_odd_n(lesson, device, blocks, num_sms)
    exercise_fewer_programs(lesson, device, blocks, num_sms)


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
        num_sms = torch.cuda.get_device_properties(0).multi_processor_count
        blocks = BLOCKS
        # 1000x1032: 40 tiles, fewer than the SMs; 4096^2: 512 tiles, an
        # uneven 3 or 4 per program; 777 rows: a ragged last tile row.
        shapes = [(1000, 1032, 776), (777, 520, 4104), (4096, 4096, 4096)]
    print(f"NUM_SMS = {num_sms}, blocks {blocks}")
    with lesson.step("correctness"):
        check_correctness(lesson, device, shapes, blocks, num_sms)
    if lesson.step("compiled-code", needs_gpu="the interpreter compiles nothing",
                   smoke=False):
        show_compiled_code(lesson, device, num_sms)
    if lesson.step("benchmark", needs_gpu="timings need a GPU"):
        benchmark_and_sweep(lesson, device, num_sms)
    with lesson.step("exercises"):
        try_this(lesson, device, blocks, num_sms)
    return lesson.finish()


if __name__ == "__main__":
    sys.exit(main())
