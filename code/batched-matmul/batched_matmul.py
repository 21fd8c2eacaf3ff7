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
    python batched_matmul.py                      # a Hopper GPU: checks, a timing

Beside it: exercises.py (check your own kernels) and lesson.py (the run the
course records: every check, the races, the benchmarks against torch.bmm).
"""

import os

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

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


# snippet: self-check
def self_check() -> None:
    """Both steps against torch.bmm on a batch ragged against every tile, in the
    three layouts step 1 takes (step 2 hands the strided views to step 1)."""
    on_gpu = torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1"
    device = "cuda" if on_gpu else "cpu"
    torch.manual_seed(0)
    batch, M, N, K = 3, 50, 40, 72
    a = torch.randn((batch, M, K), device=device).half()
    b = torch.randn((batch, K, N), device=device).half()
    views = {"contiguous": (a, b),
             "transposed B": (a, b.transpose(1, 2).contiguous().transpose(1, 2)),
             "broadcast A": (a[:1].expand(batch, M, K), b)}
    for x, y in views.values():
        want = torch.bmm(x.float(), y.float()).half()  # FP32 sums, one FP16 rounding
        for run in (bmm, bmm_persistent):
            torch.testing.assert_close(run(x, y), want, rtol=2**-9, atol=1e-2)
    # Each matrix of the batch is computed as if it were alone: the same bits.
    assert torch.equal(bmm(a, b)[1:2], bmm(a[1:2], b[1:2]))
    print(f"steps 1 and 2 match torch.bmm on {batch}x{M}x{N}x{K}, contiguous, with "
          "B transposed and with A broadcast; a batch and its matrix alone agree "
          "bit for bit")
    if on_gpu:
        a = torch.randn((64, 1024, 1024), device=device).half()
        b = torch.randn((64, 1024, 1024), device=device).half()
        ms = triton.testing.do_bench(lambda: bmm_persistent(a, b))
        print(f"step 2, 64 x 1024^3 fp16: {ms:.3f} ms, "
              f"{2 * 64 * 1024**3 / ms * 1e-9:.0f} TFLOP/s")
# end snippet


if __name__ == "__main__":
    self_check()
