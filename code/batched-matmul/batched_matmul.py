"""Batched matmul: a second grid axis over the batch.

`torch.bmm(A, B)` multiplies B pairs of matrices at once: C[i] = A[i] @ B[i].
The tiled kernel of the FP16 matmul lesson already computes one C; batching
it takes one more launch-grid axis. Axis 0 still numbers the output tiles of
one matrix (in grouped order); axis 1 numbers the batch. A program reads
`pid_b = tl.program_id(1)` and moves its three base pointers by `pid_b`
times the batch stride of A, B and C. Nothing else in the kernel changes.

Why launch the batch in one grid instead of looping over it on the host? A
single 1024x1024 output has only 32 tiles of 128x256, so a launch for one
matrix busies 32 of an H200's 132 multiprocessors and leaves the rest idle.
With the batch in the grid, 64 matrices make 2048 programs: enough to fill
every SM many times over, from one launch.

Because the kernel takes every stride as an argument, a batch need not be
one contiguous block: a transposed view of B, or an A broadcast over the
batch with stride 0, run through the same kernel with no copy.

Step 2 replaces those 2048 short programs with one program per SM: a
persistent kernel in which each program walks its share of all
(batch, tile) pairs in one pipelined loop. Its operands arrive through
rank-3 TMA tensor descriptors of shape (batch, rows, columns), so a tile
never reads into the next matrix of the batch. TMA wants contiguous
matrices with rows a multiple of 16 bytes; anything else (the strided views
above included) goes to the step 1 kernel.

Run it:
    TRITON_INTERPRET=1 python code/batched-matmul/batched_matmul.py   # CPU, checks only
    python code/batched-matmul/batched_matmul.py                      # GPU, checks and TFLOP/s
"""

import sys
from pathlib import Path

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # code/, where lessonkit.py lives
from lessonkit import Lesson, bench_interleaved, bench_ms, scaled_rtol, tflops

# -- Step 1: the tiled kernel, with the batch on grid axis 1 --------------------

# snippet: kernel
@triton.jit
def bmm_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
               stride_ab, stride_am, stride_ak,
               stride_bb, stride_bk, stride_bn,
               stride_cb, stride_cm, stride_cn,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
               GROUP_SIZE_M: tl.constexpr):
    # Axis 1 is the batch: move to matrix pid_b of A, B and C. The offset is
    # taken in int64 because batch * stride can pass 2**31 elements long
    # before any single matrix does.
    pid_b = tl.program_id(axis=1).to(tl.int64)
    a_ptr += pid_b * stride_ab
    b_ptr += pid_b * stride_bb
    c_ptr += pid_b * stride_cb

    # From here on this is the single-matrix tiled kernel, unchanged.
    # Axis 0 numbers the tiles of one C in grouped order, for L2 reuse.
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + (pid % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    # `% M` wraps the last tile's rows back into the matrix, so the loads
    # need no M or N mask; the hints say each offset vector is one
    # contiguous run starting at a multiple of the block, so loads vectorise.
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_am = tl.max_contiguous(tl.multiple_of(offs_am, BLOCK_M), BLOCK_M)
    offs_bn = tl.max_contiguous(tl.multiple_of(offs_bn, BLOCK_N), BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn

    # FP16 operands, FP32 accumulator: tl.dot(a, b, acc) adds into acc on
    # the tensor cores. Only the K tail needs a mask (zeros add nothing).
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    # FP16 out; the store is masked, since wrapped rows must not be written.
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(tl.float16), mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))
# end snippet


# snippet: configs
# Four GPU configurations, all known to work on Hopper for FP16. The lesson
# times them at the target shape and uses the fastest; the table "configs"
# records the race. At 1024x1024 a matrix has 32 tiles of 128x256, or 64 of
# 128x128, so a batch of 64 is 2048 or 4096 programs: 15.5 or 31.0 waves
# over 132 SMs.
GPU_CONFIGS = {
    "128x256x64, 8 warps, 3 stages": {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_SIZE_M": 8,
                                      "num_warps": 8, "num_stages": 3},
    "128x256x64, 8 warps, 4 stages": {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_SIZE_M": 8,
                                      "num_warps": 8, "num_stages": 4},
    "256x128x64, 8 warps, 3 stages": {"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_SIZE_M": 8,
                                      "num_warps": 8, "num_stages": 3},
    "128x128x64, 4 warps, 4 stages": {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_SIZE_M": 8,
                                      "num_warps": 4, "num_stages": 4},
}
# Under the interpreter every program is simulated in numpy: small tiles.
INTERPRETER_CONFIG = {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 16, "GROUP_SIZE_M": 4}
# end snippet


# snippet: launch
def bmm(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None, config: dict | None = None):
    """C[i] = A[i] @ B[i] for fp16 A (batch, M, K) and B (batch, K, N); any strides."""
    config = config or (INTERPRETER_CONFIG if a.device.type == "cpu" else next(iter(GPU_CONFIGS.values())))
    batch, M, K = a.shape
    batch_b, K_b, N = b.shape
    assert batch == batch_b and K == K_b, f"shapes {tuple(a.shape)} and {tuple(b.shape)} do not multiply"
    assert a.dtype == b.dtype == torch.float16
    if out is None:
        out = torch.empty((batch, M, N), device=a.device, dtype=torch.float16)
    # Grid: (tiles of one C, batch). Every stride goes in as an argument, so
    # views (transposes, broadcasts with stride 0) need no copy.
    grid = (triton.cdiv(M, config["BLOCK_M"]) * triton.cdiv(N, config["BLOCK_N"]), batch)
    bmm_kernel[grid](a, b, out, M, N, K,
                     a.stride(0), a.stride(1), a.stride(2),
                     b.stride(0), b.stride(1), b.stride(2),
                     out.stride(0), out.stride(1), out.stride(2),
                     **config)
    return out
# end snippet


# -- Step 2: persistent, with rank-3 TMA descriptors ----------------------------
#
# At batch 64 of 1024^2 outputs in 128x256 tiles, the step 1 grid is 2048
# programs, about 15.5 waves over an H200's 132 SMs. Each program is short
# (16 K steps of 64) and pays a full prologue (fill the pipeline) and
# epilogue (convert, store) during which its tensor cores wait. This kernel
# launches one program per SM instead. Program p takes the (batch, tile) pairs numbered
# p, p + NUM_SMS, p + 2*NUM_SMS, ... out of batch * tiles_per_matrix, and
# `flatten=True` fuses that loop with the K loop into one software-pipelined
# loop: the loads of the next tile, in the same matrix or the next one, are
# in flight while the current tile finishes.
#
# The operands arrive through tensor descriptors (TMA) of rank 3: A is
# described as (batch, M, K), B as (batch, K, N), C as (batch, M, N), and a
# load moves a [1, BLOCK_M, BLOCK_K] box. Because the batch is a dimension of
# its own, the hardware bounds-checks rows and columns against M, N and K of
# one matrix: the K tail and the rows past M read as zeros, never as the
# start of the next matrix, and a store drops what falls outside C[b].

# snippet: persistent-kernel
# The sizes only count tiles here (the descriptors handle every edge), so
# they are not specialised on divisibility by 16: one compiled kernel per
# configuration serves every shape and batch.
@triton.jit(do_not_specialize=["batch", "M", "N", "K"])
def bmm_persistent_tma_kernel(a_desc, b_desc, c_desc, batch, M, N, K,
                              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                              GROUP_SIZE_M: tl.constexpr, NUM_SMS: tl.constexpr):
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    tiles_per_matrix = num_pid_m * num_pid_n
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    k_tiles = tl.cdiv(K, BLOCK_K)
    # One stream of work items: every tile of every matrix of the batch.
    for tile_id in tl.range(tl.program_id(axis=0), batch * tiles_per_matrix, NUM_SMS, flatten=True):
        pid_b = tile_id // tiles_per_matrix
        tile = tile_id % tiles_per_matrix
        # Grouped order within one matrix, as in step 1.
        group_id = tile // num_pid_in_group
        first_pid_m = group_id * GROUP_SIZE_M
        group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
        pid_m = first_pid_m + (tile % group_size_m)
        pid_n = (tile % num_pid_in_group) // group_size_m
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N

        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            # A [1, BLOCK_M, BLOCK_K] box of matrix pid_b, reshaped to the
            # 2-D tile tl.dot wants (Triton folds the reshape into the load).
            a = a_desc.load([pid_b, off_m, ki * BLOCK_K]).reshape(BLOCK_M, BLOCK_K)
            b = b_desc.load([pid_b, ki * BLOCK_K, off_n]).reshape(BLOCK_K, BLOCK_N)
            acc = tl.dot(a, b, acc)

        # Split epilogue: store the left and right halves of the tile with
        # two TMA stores, so the shared-memory staging buffer is half a tile
        # and four pipeline stages still fit.
        acc = tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1))
        acc0, acc1 = tl.split(acc)
        c_desc.store([pid_b, off_m, off_n], acc0.to(tl.float16).reshape(1, BLOCK_M, BLOCK_N // 2))
        c_desc.store([pid_b, off_m, off_n + BLOCK_N // 2], acc1.to(tl.float16).reshape(1, BLOCK_M, BLOCK_N // 2))
# end snippet


# snippet: persistent-configs
# Two GPU configurations for step 2, raced at the target shape like step 1's.
# 128x256x64 with 8 warps and 4 stages is the persistent TMA lesson's
# configuration: 4 stages of 48 KiB plus a half-tile epilogue buffer of
# 32 KiB fit in an H200's 227 KiB of shared memory per block.
PERSISTENT_GPU_CONFIGS = {
    "128x256x64, 8 warps, 4 stages": {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_SIZE_M": 8,
                                      "num_warps": 8, "num_stages": 4},
    "128x128x64, 8 warps, 4 stages": {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_SIZE_M": 8,
                                      "num_warps": 8, "num_stages": 4},
}
PERSISTENT_INTERPRETER_CONFIG = {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 16, "GROUP_SIZE_M": 4}
# Under the interpreter, a pretend machine of 4 SMs: fewer programs than
# (batch, tile) pairs, so the persistent loop really loops.
INTERPRETER_NUM_SMS = 4
# end snippet


# snippet: persistent-launch
def tma_compatible(*tensors: torch.Tensor) -> bool:
    """TMA's rules for a descriptor over a whole (batch, rows, cols) tensor."""
    # Contiguous (so the strides are (rows*cols, cols, 1)), a 16-byte-aligned
    # base, and rows a multiple of 16 bytes: for fp16, K and N multiples of 8.
    return all(t.is_contiguous() and t.data_ptr() % 16 == 0 and (t.shape[-1] * t.element_size()) % 16 == 0
               for t in tensors)


def bmm_persistent(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None, config: dict | None = None,
                   num_sms: int | None = None):
    """C[i] = A[i] @ B[i]: the persistent TMA kernel where TMA allows it, else the step 1 kernel."""
    on_cpu = a.device.type == "cpu"
    config = config or (PERSISTENT_INTERPRETER_CONFIG if on_cpu else next(iter(PERSISTENT_GPU_CONFIGS.values())))
    batch, M, K = a.shape
    batch_b, K_b, N = b.shape
    assert batch == batch_b and K == K_b, f"shapes {tuple(a.shape)} and {tuple(b.shape)} do not multiply"
    assert a.dtype == b.dtype == torch.float16
    if out is None:
        out = torch.empty((batch, M, N), device=a.device, dtype=torch.float16)
    if not tma_compatible(a, b, out):
        # Transposed or broadcast views, odd row lengths: the tiled kernel
        # follows any strides, so it takes these.
        return bmm(a, b, out=out)
    if num_sms is None:
        num_sms = INTERPRETER_NUM_SMS if on_cpu else torch.cuda.get_device_properties(a.device).multi_processor_count
    bm, bn, bk = config["BLOCK_M"], config["BLOCK_N"], config["BLOCK_K"]
    # Rank-3 descriptors: the batch is a dimension, so boxes stop at the
    # edge of each matrix. C's box is half a tile wide (split epilogue).
    a_desc = TensorDescriptor(a, [batch, M, K], [M * K, K, 1], [1, bm, bk])
    b_desc = TensorDescriptor(b, [batch, K, N], [K * N, N, 1], [1, bk, bn])
    c_desc = TensorDescriptor(out, [batch, M, N], [M * N, N, 1], [1, bm, bn // 2])
    # One program per SM, never more programs than (batch, tile) pairs.
    work = batch * triton.cdiv(M, bm) * triton.cdiv(N, bn)
    grid = (min(num_sms, work),)
    bmm_persistent_tma_kernel[grid](a_desc, b_desc, c_desc, batch, M, N, K, NUM_SMS=num_sms, **config)
    return out
# end snippet


FP16_RTOL = 1e-3  # the output is rounded to fp16: 2**-11 relative, under this table value
F32_EPS = 2.0**-23  # the accumulator is fp32
LAYOUTS = ("contiguous", "transposed-b", "broadcast-a")


# snippet: checks
def operands(batch, M, N, K, device, layout):
    """Random fp16 A (batch, M, K) and B (batch, K, N), laid out in memory as `layout` says."""
    torch.manual_seed(batch + M + N + K)
    a = torch.randn((batch, M, K), device=device, dtype=torch.float16)
    b = torch.randn((batch, K, N), device=device, dtype=torch.float16)
    if layout == "transposed-b":
        # B stored as (batch, N, K) and viewed transposed: strides (N*K, 1, K).
        b = torch.randn((batch, N, K), device=device, dtype=torch.float16).transpose(1, 2)
    elif layout == "broadcast-a":
        # One A shared by the whole batch: expand() gives batch stride 0.
        a = torch.randn((1, M, K), device=device, dtype=torch.float16).expand(batch, M, K)
    return a, b


def check(lesson, name, run, a, b, **kwargs):
    """run(a, b) against float64 torch.bmm of the same fp16 inputs, output poisoned with NaN."""
    want = torch.bmm(a.to(torch.float64), b.to(torch.float64))
    K = a.shape[2]
    rtol, why = scaled_rtol(FP16_RTOL, F32_EPS, K)
    atol = rtol * float(want.abs().max())
    # Poison: an output tile of any batch entry that no program writes stays
    # NaN, and close() fails on non-finite elements.
    out = torch.full(want.shape, float("nan"), device=a.device, dtype=torch.float16)
    if run is bmm_persistent:  # say which path the launcher took
        why += "; " + ("TMA path" if tma_compatible(a, b, out) else "not TMA-compatible: step 1 kernel")
    run(a, b, out=out, **kwargs)
    return lesson.close(name, out, want, rtol, atol, why)


def checks(lesson, device, shapes, run=bmm, prefix="", layouts=LAYOUTS, **kwargs):
    for batch, M, N, K in shapes:
        for layout in layouts:
            a, b = operands(batch, M, N, K, device, layout)
            check(lesson, f"{prefix}{layout}-{batch}x{M}x{N}x{K}", run, a, b, **kwargs)
# end snippet


# snippet: benchmark
def measure(batch, M, N, K, device, kernels):
    """TFLOP/s of each kernel in `kernels` and of torch.bmm (cuBLAS's batched GEMM), same inputs, same run."""
    # Random inputs, never zeros: tensor cores draw less power on zeros and clock higher.
    a = torch.randn((batch, M, K), device=device, dtype=torch.float16)
    b = torch.randn((batch, K, N), device=device, dtype=torch.float16)
    flop = 2.0 * batch * M * N * K
    # The kernels and torch.bmm take turns, round after round, so clock
    # drift under load does not favour whichever is timed first.
    fns = {name: (lambda run=run: run(a, b)) for name, run in kernels.items()}
    ms = bench_interleaved({**fns, "torch": lambda: torch.bmm(a, b)})
    return {name: tflops(flop, t) for name, t in ms.items()}
# end snippet


def main() -> int:
    lesson = Lesson("batched-matmul")
    device = lesson.device()

    if lesson.interpret:
        # Batch 3, and sizes that are mostly not multiples of the 32x32x16
        # blocks: ragged last tiles in M and N, a K tail. Step 1 first.
        shapes = [(3, 50, 40, 72), (3, 64, 96, 24)]
        checks(lesson, device, shapes)
        # Step 2 on the same shapes (N and K are multiples of 8, so the
        # contiguous case takes the TMA path: 12 and 18 (batch, tile) pairs
        # over 4 programs), the two views through its fallback, and a
        # contiguous batch whose N and K are not multiples of 8.
        checks(lesson, device, shapes, run=bmm_persistent, prefix="persistent-")
        checks(lesson, device, [(2, 40, 36, 20)], run=bmm_persistent, prefix="persistent-", layouts=("contiguous",))
        print("\nNo timings under the interpreter.")
        return lesson.finish()

    # Step 2's TMA descriptors need Hopper (compute capability 9.0) or newer.
    lesson.require_capability(9, 0, "step 2 moves its tiles with TMA tensor descriptors (Hopper)")

    # Step 1: every GPU configuration on a ragged shape whose row strides are
    # not multiples of 16 bytes, and on a mid-size batch.
    for i, config in enumerate(GPU_CONFIGS.values()):
        checks(lesson, device, [(3, 333, 250, 77), (8, 1000, 1032, 776)], config=config, prefix=f"config{i + 1}-")
    # Step 2: both configurations on the TMA path, ragged in M, N and K
    # (in 128x256 tiles: 18 (batch, tile) pairs, fewer than the SMs; then
    # 320, an uneven 2 or 3 per program); then the fallback for the views
    # and for rows that are not multiples of 16 bytes.
    for i, config in enumerate(PERSISTENT_GPU_CONFIGS.values()):
        checks(lesson, device, [(3, 333, 264, 136), (8, 1000, 1032, 776)], run=bmm_persistent,
               prefix=f"persistent{i + 1}-", layouts=("contiguous",), config=config)
    checks(lesson, device, [(3, 333, 250, 77)], run=bmm_persistent, prefix="persistent-")
    checks(lesson, device, [(8, 1000, 1032, 776)], run=bmm_persistent, prefix="persistent-",
           layouts=("transposed-b", "broadcast-a"))

    # The target: 64 matrices of 1024^3 in FP16, against torch.bmm timed in
    # the same run. First each step's configurations race at that shape.
    M = N = K = 1024

    def tiled(config):
        return lambda a, b: bmm(a, b, config=config)

    def persistent(config):
        return lambda a, b: bmm_persistent(a, b, config=config)

    race = {name: measure(64, M, N, K, device, {"triton": tiled(c)}) for name, c in GPU_CONFIGS.items()}
    best = max(race, key=lambda name: race[name]["triton"] / race[name]["torch"])
    lesson.table("configs", ["configuration", "Triton TFLOP/s", "torch.bmm TFLOP/s", "Triton / torch.bmm"],
                 [[name, r["triton"], r["torch"], r["triton"] / r["torch"]] for name, r in race.items()],
                 f"Step 1, bmm_kernel: batch 64 of 1024x1024x1024, FP16. The fastest, {best}, is used below.")
    config = GPU_CONFIGS[best]

    race2 = {name: measure(64, M, N, K, device, {"triton": persistent(c)})
             for name, c in PERSISTENT_GPU_CONFIGS.items()}
    best2 = max(race2, key=lambda name: race2[name]["triton"] / race2[name]["torch"])
    lesson.table("persistent-configs",
                 ["configuration", "Triton TFLOP/s", "torch.bmm TFLOP/s", "Triton / torch.bmm"],
                 [[name, r["triton"], r["torch"], r["triton"] / r["torch"]] for name, r in race2.items()],
                 f"Step 2, bmm_persistent_tma_kernel: batch 64 of 1024x1024x1024, FP16. "
                 f"The faster, {best2}, is used below.")
    config2 = PERSISTENT_GPU_CONFIGS[best2]
    # The configuration that is benchmarked, checked at the benchmark shape.
    checks(lesson, device, [(64, M, N, K)], run=bmm_persistent, prefix="persistent-best-",
           layouts=("contiguous",), config=config2)

    # Both steps and torch.bmm, taking turns, at batch 1 to 64; the batch 64
    # row gives the two benchmarks.
    kernels = {"tiled": tiled(config), "persistent": persistent(config2)}
    sweep = {batch: measure(batch, M, N, K, device, kernels) for batch in (1, 4, 16, 64)}
    r = sweep[64]
    lesson.benchmark("tiled-bmm-vs-torch-64x1024", r["tiled"], r["torch"], "TFLOP/s", threshold=None,
                     baseline_name="torch.bmm", note=f"step 1, bmm_kernel, one program per tile; {best}")
    lesson.benchmark("bmm-vs-torch-64x1024", r["persistent"], r["torch"], "TFLOP/s", threshold=0.80, stretch=0.95,
                     baseline_name="torch.bmm",
                     note=f"step 2, persistent TMA; batch 64 of 1024^3, FP16 in, FP32 accumulate, FP16 out; {best2}")
    tiles = triton.cdiv(M, config["BLOCK_M"]) * triton.cdiv(N, config["BLOCK_N"])
    num_sms = torch.cuda.get_device_properties(0).multi_processor_count
    lesson.table("batch-sweep",
                 ["batch", "step 1 programs", "step 1 TFLOP/s", "step 2 TFLOP/s", "torch.bmm TFLOP/s",
                  "step 1 / torch.bmm", "step 2 / torch.bmm"],
                 [[batch, batch * tiles, r["tiled"], r["persistent"], r["torch"],
                   r["tiled"] / r["torch"], r["persistent"] / r["torch"]] for batch, r in sweep.items()],
                 f"FP16 batches of 1024x1024x1024 products; step 1 {best}, step 2 {best2} "
                 f"(at most {num_sms} programs); median of triton.testing.do_bench, the three taking turns.")

    # snippet: host-loop
    # The same 64 products as 64 launches of the single-matrix case (batch
    # 1 views of the same tensors): each launch has only the tiles of one
    # 1024x1024 C, too few to fill the GPU, and pays its own launch.
    batch = 64
    a = torch.randn((batch, M, K), device=device, dtype=torch.float16)
    b = torch.randn((batch, K, N), device=device, dtype=torch.float16)
    c = torch.empty((batch, M, N), device=device, dtype=torch.float16)

    def host_loop():
        for i in range(batch):
            bmm(a[i:i + 1], b[i:i + 1], out=c[i:i + 1], config=config)

    flop = 2.0 * batch * M * N * K
    one_launch = tflops(flop, bench_ms(lambda: bmm(a, b, out=c, config=config)))
    loop = tflops(flop, bench_ms(host_loop))
    # end snippet
    lesson.benchmark("one-launch-vs-host-loop-64x1024", one_launch, loop, "TFLOP/s", threshold=None,
                     baseline_name="64 launches, one matrix each",
                     note="step 1 kernel; why the batch belongs in the grid")

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    batches = list(sweep)
    fig, ax = plt.subplots(figsize=(6.0, 3.6))
    ax.plot(batches, [sweep[x]["tiled"] for x in batches], "o-", label="step 1: bmm_kernel (tiled)")
    ax.plot(batches, [sweep[x]["persistent"] for x in batches], "^-", label="step 2: persistent TMA")
    ax.plot(batches, [sweep[x]["torch"] for x in batches], "k--", label="torch.bmm")
    ax.set_xscale("log", base=2)
    ax.set_xticks(batches, [str(x) for x in batches])
    ax.set_xlabel("batch (each 1024 x 1024 x 1024)")
    ax.set_ylabel("TFLOP/s (fp16 in, fp32 accumulate)")
    ax.set_title(f"Batched FP16 matmul on {torch.cuda.get_device_name(0)}")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    lesson.figure(fig, "batch-sweep", "TFLOP/s against batch size: one 1024^3 product cannot fill the GPU; 64 can.")
    return lesson.finish()


if __name__ == "__main__":
    sys.exit(main())
