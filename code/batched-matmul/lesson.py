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
    TRITON_INTERPRET=1 python batched_matmul.py   # any machine: checks on the CPU
    python batched_matmul.py                      # a Hopper GPU: checks and TFLOP/s
"""

import math
import re
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

# lessonkit.py sits beside this file in a download, one folder up in the repository.
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]
from lessonkit import Lesson, bench_interleaved, scaled_rtol, tflops  # noqa: E402

# -- Step 1: the tiled kernel, with the batch on grid axis 1 --------------------


# snippet: kernel
@triton.jit
def bmm_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K,
    stride_ab, stride_am, stride_ak,
    stride_bb, stride_bk, stride_bn,
    stride_cb, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
):
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
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, acc.to(tl.float16), mask=c_mask)


# end snippet


# snippet: configs
def tile_config(bm, bn, bk, warps, stages, group=8):
    """Tile sizes (compile-time constants) and launch options of one kernel."""
    return {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_SIZE_M": group,
            "num_warps": warps, "num_stages": stages}


# Four GPU configurations, all known to work on Hopper for FP16. The lesson
# times them at the target shape and uses the fastest; the table "configs"
# records the race. At 1024x1024 a matrix has 32 tiles of 128x256, or 64 of
# 128x128, so a batch of 64 is 2048 or 4096 programs: 15.5 or 31.0 waves
# over 132 SMs.
GPU_CONFIGS = {
    "128x256x64, 8 warps, 3 stages": tile_config(128, 256, 64, 8, 3),
    "128x256x64, 8 warps, 4 stages": tile_config(128, 256, 64, 8, 4),
    "256x128x64, 8 warps, 3 stages": tile_config(256, 128, 64, 8, 3),
    "128x128x64, 4 warps, 4 stages": tile_config(128, 128, 64, 4, 4),
}
# Under the interpreter every program is simulated in numpy: small tiles.
INTERPRETER_CONFIG = {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 16, "GROUP_SIZE_M": 4}
# end snippet


# snippet: launch
def bmm(a, b, out=None, config=None):
    """C[i] = A[i] @ B[i] for fp16 A (batch, M, K) and B (batch, K, N); any strides."""
    if config is None:
        on_cpu = a.device.type == "cpu"
        config = INTERPRETER_CONFIG if on_cpu else next(iter(GPU_CONFIGS.values()))
    batch, M, K = a.shape
    batch_b, K_b, N = b.shape
    assert batch == batch_b and K == K_b, f"{tuple(a.shape)} @ {tuple(b.shape)}?"
    assert a.dtype == b.dtype == torch.float16
    if out is None:
        out = torch.empty((batch, M, N), device=a.device, dtype=torch.float16)
    # Grid: (tiles of one C, batch). Every stride goes in as an argument, so
    # views (transposes, broadcasts with stride 0) need no copy.
    tiles = triton.cdiv(M, config["BLOCK_M"]) * triton.cdiv(N, config["BLOCK_N"])
    bmm_kernel[(tiles, batch)](
        a, b, out, M, N, K,
        a.stride(0), a.stride(1), a.stride(2),
        b.stride(0), b.stride(1), b.stride(2),
        out.stride(0), out.stride(1), out.stride(2),
        **config,
    )
    return out


# end snippet


# -- Step 2: persistent, with rank-3 TMA descriptors ----------------------------
#
# At batch 64 of 1024^2 outputs in 128x256 tiles, the step 1 grid is 2048
# programs, about 15.5 waves over an H200's 132 SMs. Each program is short
# (16 K steps of 64) and pays a full prologue (fill the pipeline) and
# epilogue (convert, store) during which its tensor cores wait. This kernel
# launches one program per SM instead. Program p takes the (batch, tile)
# pairs numbered p, p + NUM_SMS, p + 2*NUM_SMS, ... out of
# batch * tiles_per_matrix, and `flatten=True` fuses that loop with the K
# loop into one software-pipelined loop: the loads of the next tile, in the
# same matrix or the next one, are in flight while the current tile finishes.
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
def bmm_persistent_tma_kernel(
    a_desc, b_desc, c_desc, batch, M, N, K,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr, NUM_SMS: tl.constexpr,
):
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    tiles_per_matrix = num_pid_m * num_pid_n
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    k_tiles = tl.cdiv(K, BLOCK_K)
    # One stream of work items: every tile of every matrix of the batch.
    start = tl.program_id(axis=0)
    for tile_id in tl.range(start, batch * tiles_per_matrix, NUM_SMS, flatten=True):
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
        acc0 = acc0.to(tl.float16).reshape(1, BLOCK_M, BLOCK_N // 2)
        acc1 = acc1.to(tl.float16).reshape(1, BLOCK_M, BLOCK_N // 2)
        c_desc.store([pid_b, off_m, off_n], acc0)
        c_desc.store([pid_b, off_m, off_n + BLOCK_N // 2], acc1)


# end snippet


# snippet: persistent-configs
# Two GPU configurations for step 2, raced at the target shape like step 1's.
# 128x256x64 with 8 warps and 4 stages is the persistent TMA lesson's
# configuration: 4 stages of 48 KiB plus a half-tile epilogue buffer of
# 32 KiB fit in an H200's 227 KiB of shared memory per block.
PERSISTENT_GPU_CONFIGS = {
    "128x256x64, 8 warps, 4 stages": tile_config(128, 256, 64, 8, 4),
    "128x128x64, 8 warps, 4 stages": tile_config(128, 128, 64, 8, 4),
}
PERSISTENT_INTERPRETER_CONFIG = INTERPRETER_CONFIG
# Under the interpreter, a pretend machine of 4 SMs: fewer programs than
# (batch, tile) pairs, so the persistent loop really loops.
INTERPRETER_NUM_SMS = 4
# end snippet


# snippet: persistent-launch
def tma_compatible(*tensors: torch.Tensor) -> bool:
    """TMA's rules for a descriptor over a whole (batch, rows, cols) tensor."""
    # Contiguous (so the strides are (rows*cols, cols, 1)), a 16-byte-aligned
    # base, and rows a multiple of 16 bytes: for fp16, K and N multiples of 8.
    return all(
        t.is_contiguous()
        and t.data_ptr() % 16 == 0
        and (t.shape[-1] * t.element_size()) % 16 == 0
        for t in tensors
    )


def descriptors(a, b, out, config):
    """Rank-3 descriptors: the batch is a dimension, so boxes stop at the
    edge of each matrix. C's box is half a tile wide (split epilogue)."""
    bm, bn, bk = config["BLOCK_M"], config["BLOCK_N"], config["BLOCK_K"]
    (batch, M, K), N = a.shape, b.shape[2]
    return (
        TensorDescriptor(a, [batch, M, K], [M * K, K, 1], [1, bm, bk]),
        TensorDescriptor(b, [batch, K, N], [K * N, N, 1], [1, bk, bn]),
        TensorDescriptor(out, [batch, M, N], [M * N, N, 1], [1, bm, bn // 2]),
    )


def bmm_persistent(a, b, out=None, config=None, num_sms=None):
    """C[i] = A[i] @ B[i]: the persistent TMA kernel where TMA allows it,
    else the step 1 kernel."""
    on_cpu = a.device.type == "cpu"
    if config is None:
        gpu_default = next(iter(PERSISTENT_GPU_CONFIGS.values()))
        config = PERSISTENT_INTERPRETER_CONFIG if on_cpu else gpu_default
    batch, M, K = a.shape
    batch_b, K_b, N = b.shape
    assert batch == batch_b and K == K_b, f"{tuple(a.shape)} @ {tuple(b.shape)}?"
    assert a.dtype == b.dtype == torch.float16
    if out is None:
        out = torch.empty((batch, M, N), device=a.device, dtype=torch.float16)
    if not tma_compatible(a, b, out):
        # Transposed or broadcast views, odd row lengths: the tiled kernel
        # follows any strides, so it takes these.
        return bmm(a, b, out=out)
    if num_sms is None:
        props = None if on_cpu else torch.cuda.get_device_properties(a.device)
        num_sms = INTERPRETER_NUM_SMS if on_cpu else props.multi_processor_count
    # One program per SM, never more programs than (batch, tile) pairs.
    tiles = triton.cdiv(M, config["BLOCK_M"]) * triton.cdiv(N, config["BLOCK_N"])
    grid = (min(num_sms, batch * tiles),)
    bmm_persistent_tma_kernel[grid](
        *descriptors(a, b, out, config), batch, M, N, K, NUM_SMS=num_sms, **config
    )
    return out


# end snippet


FP16_RTOL = 1e-3  # fp16 output rounding is 2**-11 relative, under this table value
F32_EPS = 2.0**-23  # the accumulator is fp32
LAYOUTS = ("contiguous", "transposed-b", "broadcast-a")


# snippet: checks
def operands(batch, M, N, K, device, layout):
    """Random fp16 A (batch, M, K) and B (batch, K, N), laid out as `layout` says."""
    torch.manual_seed(batch + M + N + K)
    a = torch.randn((batch, M, K), device=device, dtype=torch.float16)
    b = torch.randn((batch, K, N), device=device, dtype=torch.float16)
    if layout == "transposed-b":
        # B stored as (batch, N, K) and viewed transposed: strides (N*K, 1, K).
        b = torch.randn((batch, N, K), device=device, dtype=torch.float16)
        b = b.transpose(1, 2)
    elif layout == "broadcast-a":
        # One A shared by the whole batch: expand() gives batch stride 0.
        a = torch.randn((1, M, K), device=device, dtype=torch.float16)
        a = a.expand(batch, M, K)
    return a, b


def result_and_bound(run, a, b, **kwargs):
    """run(a, b) into an output poisoned with NaN, float64 torch.bmm of the same
    fp16 inputs, and the bound: (got, want, rtol, atol, why)."""
    want = torch.bmm(a.to(torch.float64), b.to(torch.float64))
    K = a.shape[2]
    rtol, why = scaled_rtol(FP16_RTOL, F32_EPS, K)
    atol = rtol * float(want.abs().max())
    # Poison: an output tile of any batch entry that no program writes stays
    # NaN, and close() fails on non-finite elements.
    out = torch.full(want.shape, float("nan"), device=a.device, dtype=torch.float16)
    if run is bmm_persistent:  # say which path the launcher took
        tma = tma_compatible(a, b, out)
        why += "; " + ("TMA path" if tma else "not TMA-compatible: step 1 kernel")
    run(a, b, out=out, **kwargs)
    return out, want, rtol, atol, why


# end snippet


def check(lesson, name, run, a, b, **kwargs):
    return lesson.close(name, *result_and_bound(run, a, b, **kwargs))


def checks(lesson, device, shapes, run=bmm, prefix="", layouts=LAYOUTS, **kwargs):
    for batch, M, N, K in shapes:
        for layout in layouts:
            a, b = operands(batch, M, N, K, device, layout)
            name = f"{prefix}{layout}-{batch}x{M}x{N}x{K}"
            check(lesson, name, run, a, b, **kwargs)


def check_tiled(lesson: Lesson, device: str) -> None:
    """Step 1 on ragged shapes, strided views and every GPU configuration."""
    if lesson.interpret:
        # Batch 3, and sizes that are mostly not multiples of the 32x32x16
        # blocks: ragged last tiles in M and N, a K tail.
        checks(lesson, device, [(3, 50, 40, 72), (3, 64, 96, 24)])
        return
    # The default configuration on a ragged shape whose row strides are not
    # multiples of 16 bytes and on a mid-size batch, in all three layouts.
    checks(lesson, device, [(3, 333, 250, 77), (8, 1000, 1032, 776)],
           config=GPU_CONFIGS["128x256x64, 8 warps, 3 stages"], prefix="config1-")
    # Every configuration on a shape ragged against every tile (M = 2*128 + 80,
    # N = 256 + 16, K = 64 + 16) whose sizes and strides are multiples of 16,
    # so Triton compiles the same specialisation as at the benchmark shape:
    # the kernel checked here is the kernel raced below.
    for i, cfg in enumerate(GPU_CONFIGS.values(), start=1):
        checks(lesson, device, [(3, 336, 272, 80)], config=cfg,
               prefix=f"config{i}-", layouts=("contiguous",))


def check_persistent(lesson: Lesson, device: str) -> None:
    """Step 2: the TMA path across batch boundaries, and its fallback."""
    if lesson.interpret:
        # The same shapes (N and K are multiples of 8, so the contiguous case
        # takes the TMA path: 12 and 18 (batch, tile) pairs over 4 programs),
        # the two views through its fallback, and a contiguous batch whose N
        # and K are not multiples of 8.
        shapes = [(3, 50, 40, 72), (3, 64, 96, 24)]
        checks(lesson, device, shapes, run=bmm_persistent, prefix="persistent-")
        checks(lesson, device, [(2, 40, 36, 20)], run=bmm_persistent,
               prefix="persistent-", layouts=("contiguous",))
        return
    # Both configurations on the TMA path, ragged in M, N and K (in 128x256
    # tiles: 18 (batch, tile) pairs, fewer than the SMs; then 320, an uneven
    # 2 or 3 per program); then the fallback for the views and for rows that
    # are not multiples of 16 bytes.
    for i, cfg in enumerate(PERSISTENT_GPU_CONFIGS.values(), start=1):
        checks(lesson, device, [(3, 333, 264, 136), (8, 1000, 1032, 776)],
               run=bmm_persistent, prefix=f"persistent{i}-",
               layouts=("contiguous",), config=cfg)
    checks(lesson, device, [(3, 333, 250, 77)], run=bmm_persistent,
           prefix="persistent-")
    checks(lesson, device, [(8, 1000, 1032, 776)], run=bmm_persistent,
           prefix="persistent-", layouts=("transposed-b", "broadcast-a"))


def target_operands(batch, device, size=1024):
    # Random inputs, never zeros: tensor cores draw less power on zeros and
    # clock higher.
    a = torch.randn((batch, size, size), device=device, dtype=torch.float16)
    b = torch.randn((batch, size, size), device=device, dtype=torch.float16)
    return a, b


def race_configs(lesson: Lesson, device: str) -> tuple[dict, dict]:
    """Each step's configurations race at the target shape; the fastest wins."""
    batch, size = lesson.size(gpu=(64, 1024), smoke=(2, 64))
    a, b = target_operands(batch, device, size)
    flop = 2.0 * batch * size**3
    picked = []
    for table, kernel, configs in (
        ("configs", bmm, GPU_CONFIGS),
        ("persistent-configs", bmm_persistent, PERSISTENT_GPU_CONFIGS),
    ):
        # The configurations and torch.bmm take turns; 3 rounds pick a winner.
        fns = {name: (lambda c=c, f=kernel: f(a, b, config=c))
               for name, c in configs.items()}
        ms = bench_interleaved({**fns, "torch.bmm": lambda: torch.bmm(a, b)}, rounds=3)
        rate = {name: tflops(flop, ms.median(name)) for name in ms}
        best = max(configs, key=lambda name: rate[name])
        step = "Step 1, bmm_kernel" if kernel is bmm else "Step 2, persistent TMA"
        lesson.table(
            table,
            ["configuration", "Triton TFLOP/s", "torch.bmm TFLOP/s",
             "Triton / torch.bmm"],
            [[name, rate[name], rate["torch.bmm"], rate[name] / rate["torch.bmm"]]
             for name in configs],
            f"{step}: batch 64 of 1024x1024x1024, FP16; median of 3 rounds, taking "
            f"turns with torch.bmm. The fastest, {best}, is used below.",
        )
        picked.append(configs[best])
    tiled, persistent = picked
    # The configuration that is benchmarked, checked at the benchmark shape.
    checks(lesson, device, [(batch, size, size, size)], run=bmm_persistent,
           prefix="persistent-best-", layouts=("contiguous",), config=persistent)
    return tiled, persistent


def show_compiled_code(lesson: Lesson, device: str, tiled: dict, persistent: dict):
    """What the compiler made of each step: registers, shared memory, and how
    the tiles reach the tensor cores (cp.async by the threads, or TMA)."""
    M = N = K = 1024
    a, b = target_operands(1, device)
    c = torch.empty_like(a)
    num_sms = torch.cuda.get_device_properties(0).multi_processor_count
    # One launch of each (a single program is enough): the launch returns the
    # compiled kernel, with its PTX and the resources it was given.
    step1 = bmm_kernel[(1, 1)](a, b, c, M, N, K, *a.stride(), *b.stride(),
                               *c.stride(), **tiled)
    step2 = bmm_persistent_tma_kernel[(1,)](*descriptors(a, b, c, persistent),
                                            1, M, N, K, NUM_SMS=num_sms, **persistent)
    rows = []
    for step, compiled in (("1: bmm_kernel", step1), ("2: persistent TMA", step2)):
        ptx = compiled.asm["ptx"]
        rows.append([
            step,
            getattr(compiled, "n_regs", None),
            getattr(compiled, "n_spills", None),
            round(compiled.metadata.shared / 1024, 1),
            len(re.findall(r"cp\.async\.c[ag]\.shared\.global", ptx)),
            len(re.findall(r"cp\.async\.bulk\.tensor", ptx)),
            len(re.findall(r"wgmma\.mma_async", ptx)),
        ])
    lesson.table(
        "compiled",
        ["step", "registers / thread", "spilled registers", "shared memory KiB",
         "cp.async", "TMA copies", "wgmma"],
        rows,
        "What Triton compiled for the two configurations benchmarked below; "
        "instruction counts are static (in the PTX), not executions.",
    )


def benchmark(lesson: Lesson, device: str, tiled: dict, persistent: dict):
    """The target: batch 64 of 1024^3 in FP16, both steps against torch.bmm,
    and one launch against a loop of 64 launches."""
    batch, size = lesson.size(gpu=(64, 1024), smoke=(2, 64))
    # snippet: host-loop
    # The same 64 products as 64 launches of the single-matrix case (batch
    # 1 views of the same tensors): each launch has only the tiles of one
    # 1024x1024 C, too few to fill the GPU, and pays its own launch.
    a, b = target_operands(batch, device, size)
    c = torch.empty_like(a)

    def host_loop():
        for i in range(batch):
            bmm(a[i : i + 1], b[i : i + 1], out=c[i : i + 1], config=tiled)

    # end snippet

    # snippet: benchmark
    # Both steps, torch.bmm (cuBLAS's batched GEMM) and the host loop race.
    # Each product is 2 * 1024^3 FLOP (a multiply and an add per term).
    flop = 2.0 * batch * size**3
    contenders = {
        "persistent": lambda: bmm_persistent(a, b, config=persistent),
        "tiled": lambda: bmm(a, b, out=c, config=tiled),
        "torch.bmm": lambda: torch.bmm(a, b),
        "host loop": host_loop,
    }
    # The model of the predictions. Step 2 is the previous lesson's
    # persistent kernel, which matched cuBLAS on one matrix, with the batch as
    # one more index of its tile loop. Step 1 pays, per tile, the pipeline's
    # fill and epilogue (about 3 K steps) and idles in a part-empty last wave.
    # The host loop: 64 launches of one matrix's waves against one launch.
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    per_matrix = (triton.cdiv(size, tiled["BLOCK_M"])
                  * triton.cdiv(size, tiled["BLOCK_N"]))
    steps, waves = size // tiled["BLOCK_K"], batch * per_matrix / sms
    loop_waves = batch * math.ceil(per_matrix / sms)
    # end snippet
    # snippet: measure
    lesson.predict("bmm-vs-torch-64x1024", 1.0, "the persistent kernel that matched "
                   "cuBLAS on one matrix; the batch is one more tile index", 0.05)
    lesson.predict("tiled-bmm-vs-torch-64x1024",
                   steps / (steps + 3) * waves / math.ceil(waves),
                   f"cuBLAS's rate less 3 of {steps + 3} K steps per tile and the "
                   f"idle part of {waves:.1f} waves of {sms} SMs", 0.10)
    lesson.predict("one-launch-vs-host-loop-64x1024", loop_waves / math.ceil(waves),
                   f"GPU time in waves: {loop_waves} for 64 launches of one matrix, "
                   f"{math.ceil(waves)} for one launch", 0.25)
    # Each call timed on its own, launches included: the host loop's cost.
    ms = bench_interleaved(contenders, method="events")
    # end snippet
    step1 = config_name(GPU_CONFIGS, tiled)
    step2 = config_name(PERSISTENT_GPU_CONFIGS, persistent)
    lesson.benchmark(
        "bmm-vs-torch-64x1024",
        "step 2 (persistent TMA) vs torch.bmm, 64 x 1024^3 fp16",
        ms, "persistent", "torch.bmm", unit="TFLOP/s", work=flop,
        baseline_name="torch.bmm", threshold=0.80, stretch=0.95,
        note=f"FP16 in, FP32 accumulate, FP16 out; {step2}",
    )
    lesson.benchmark(
        "tiled-bmm-vs-torch-64x1024",
        "step 1 (one program per tile) vs torch.bmm, 64 x 1024^3 fp16",
        ms, "tiled", "torch.bmm", unit="TFLOP/s", work=flop,
        baseline_name="torch.bmm", note=f"for reference; {step1}",
    )
    lesson.benchmark(
        "one-launch-vs-host-loop-64x1024",
        "one launch vs 64 launches of one matrix each (step 1)",
        ms, "tiled", "host loop", unit="TFLOP/s", work=flop,
        baseline_name="64 launches, one matrix each",
        note=f"why the batch belongs in the grid; {step1}",
    )
    return ms


def config_name(configs: dict, chosen: dict) -> str:
    return next(name for name, cfg in configs.items() if cfg is chosen)


def sweep_and_plot(lesson: Lesson, device: str, tiled: dict, persistent: dict,
                   at_64) -> None:
    """Both steps and torch.bmm from batch 1 to 64: where does each fill the GPU?"""
    def contenders(a, b):
        return {
            "tiled": lambda: bmm(a, b, config=tiled),
            "persistent": lambda: bmm_persistent(a, b, config=persistent),
            "torch.bmm": lambda: torch.bmm(a, b),
        }

    size = lesson.size(gpu=1024, smoke=64)
    flop1 = 2.0 * size**3
    sweep = {}
    for batch in (1, 4, 16):
        ms = bench_interleaved(contenders(*target_operands(batch, device, size)),
                               rounds=3)
        sweep[batch] = {k: tflops(batch * flop1, ms.median(k)) for k in ms}
    sweep[64] = {k: tflops(64 * flop1, at_64.median(k))
                 for k in ("tiled", "persistent", "torch.bmm")}
    tiles = triton.cdiv(size, tiled["BLOCK_M"]) * triton.cdiv(size, tiled["BLOCK_N"])
    lesson.table(
        "batch-sweep",
        ["batch", "step 1 programs", "step 1 TFLOP/s", "step 2 TFLOP/s",
         "torch.bmm TFLOP/s", "step 1 / torch.bmm", "step 2 / torch.bmm"],
        [[batch, batch * tiles, r["tiled"], r["persistent"], r["torch.bmm"],
          r["tiled"] / r["torch.bmm"], r["persistent"] / r["torch.bmm"]]
         for batch, r in sweep.items()],
        f"FP16 batches of 1024x1024x1024 products; step 1 "
        f"{config_name(GPU_CONFIGS, tiled)}, step 2 "
        f"{config_name(PERSISTENT_GPU_CONFIGS, persistent)}; medians of 3 rounds "
        "taking turns (batch 64: the 15 rounds of the benchmark).",
    )
    batches = list(sweep)
    gpu = torch.cuda.get_device_name(0)

    def draw(fig):
        ax = fig.subplots()
        for key, style, name in (("tiled", "o-", "step 1: bmm_kernel (tiled)"),
                                 ("persistent", "^-", "step 2: persistent TMA"),
                                 ("torch.bmm", "s--", "torch.bmm (cuBLAS)")):
            ax.plot(batches, [sweep[x][key] for x in batches], style, label=name)
        ax.set_xscale("log", base=2)
        ax.set_xticks(batches, [str(x) for x in batches])
        ax.set_xlabel(f"batch (products of {size} x {size} x {size})")
        ax.set_ylabel("TFLOP/s")
        ax.set_ylim(bottom=0)
        ax.set_title(f"Batched FP16 matmul on {gpu}")
        fig.legend(loc="outside lower center", ncols=2)

    lesson.plot("batch-sweep", f"TFLOP/s against batch size, each product {size}^3 "
                "(FP16 in, FP32 accumulate): how many products it takes to fill the "
                "GPU.", draw,
                size=(7.0, 5.0))


def try_this(lesson: Lesson, device: str) -> None:
    batch, M, N, K = 2, 96, 80, 48
    torch.manual_seed(5)
    a = torch.randn((batch, M, K), device=device, dtype=torch.float16)
    w = torch.randn((1, K, N), device=device, dtype=torch.float16)
    want = torch.bmm(a.double(), w.double().expand(batch, K, N))
    rtol, why = scaled_rtol(FP16_RTOL, F32_EPS, K)
    atol = rtol * float(want.abs().max())

    # snippet: solution-shared-b
    # One weight matrix W (1, K, N) for the whole batch: expand() gives it
    # batch stride 0, and every program of the batch reads the same W.
    c = bmm(a, w.expand(batch, K, N))
    # end snippet
    lesson.close("exercise-shared-b", c, want, rtol, atol, why + "; B batch stride 0")

    # snippet: solution-fold-batch
    # With W shared, the batch is just more rows: (batch, M, K) viewed as
    # (1, batch * M, K) is one matrix product, with no batch axis at all.
    # It is contiguous, so the step 2 launcher takes the TMA path.
    rows = a.reshape(1, batch * M, K)
    assert tma_compatible(rows, w)
    c = bmm_persistent(rows, w).reshape(batch, M, N)
    # end snippet
    lesson.close("exercise-fold-batch", c, want, rtol, atol, why + "; one matrix")


def main() -> int:
    lesson = Lesson("batched-matmul")
    device = lesson.device()
    with lesson.step("correctness"):
        check_tiled(lesson, device)
        check_persistent(lesson, device)
    if lesson.step("race", needs_gpu="the configurations race on GPU time"):
        tiled, persistent = race_configs(lesson, device)
    if lesson.step("compiled-code", needs_gpu="the interpreter compiles nothing",
                   smoke=False):
        show_compiled_code(lesson, device, tiled, persistent)
    if lesson.step("benchmark", needs_gpu="timings need a GPU"):
        at_64 = benchmark(lesson, device, tiled, persistent)
    if lesson.step("sweep", needs_gpu="timings need a GPU"):
        sweep_and_plot(lesson, device, tiled, persistent, at_64)
    with lesson.step("exercises"):
        try_this(lesson, device)
    return lesson.finish()


if __name__ == "__main__":
    sys.exit(main())
