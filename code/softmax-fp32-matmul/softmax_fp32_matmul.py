"""Softmax and an FP32 matmul: two kernels written as programs over blocks.

Part 1 is a row softmax. One program takes one row, holds the whole row as a
single block value, and reduces it twice (a max, then a sum) with one call
each. The two details that make it correct are the padding value of the
masked lanes (-inf, never 0.0) and subtracting the row maximum before `exp`.

Part 2 is a matrix product with FP32 inputs, an FP32 accumulator and an FP32
output. It is compiled twice, once with `tl.dot(..., input_precision="ieee")`
and once with `"tf32"`. On compute capability 8.0 and newer that one string
decides whether the product runs on the ordinary FP32 multiply-add units or on
the tensor cores, which see only 10 of the 23 explicit mantissa bits. Triton's
default for an FP32 `tl.dot` is "tf32", so a kernel that never says which it
wants gets the faster, less accurate one. A persistent kernel reads B stored
column-major through TMA descriptors, the layout Hopper's tf32 tensor cores read.

Run it:
    TRITON_INTERPRET=1 python softmax_fp32_matmul.py   # any machine: checks on the CPU
    python softmax_fp32_matmul.py                      # a CUDA GPU: checks and timings

Beside it: exercises.py (check your own kernels) and lesson.py (the run the
course records: every check, the tile sweep, GB/s and TFLOP/s against torch,
cuBLAS, Liger-Kernel and torch.compile).
"""

import os

import torch
import triton
import triton.language as tl

# Tile shapes: (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages).
# The first is the one the correctness checks use; lesson.py sweeps them all.
CONFIGS = [
    (64, 64, 32, 8, 4, 3),
    (128, 128, 32, 8, 8, 3),
]
# A wider tile that suits Hopper's warpgroup tensor-core instructions; only
# worth trying for tf32 with B column-major (for ieee a 128 x 256
# accumulator would not fit in registers without spilling).
TF32_WIDE = [(128, 256, 32, 8, 8, 3)]


# snippet: softmax-kernel
@triton.jit
def softmax_kernel(
    out_ptr, in_ptr, out_row_stride, in_row_stride, n_rows, n_cols,
    BLOCK_COLS: tl.constexpr, STAGES: tl.constexpr,
):
    # BLOCK_COLS is the next power of two at or above n_cols: a block's
    # length must be a power of two, so a row of 1000 values is held in a
    # block of 1024 and the last 24 lanes are masked off.
    cols = tl.arange(0, BLOCK_COLS)
    mask = cols < n_cols
    # Program p handles rows p, p + P, p + 2P, ... where P is the grid size.
    # Launched with one program per row, the loop body runs exactly once.
    for row in tl.range(tl.program_id(0), n_rows, tl.num_programs(0),
                        num_stages=STAGES):
        # Masked lanes read -inf. It can never be the maximum, and after the
        # shift exp(-inf) = 0 adds nothing to the sum. A 0.0 pad would do
        # both wrong: on a row of negative numbers it would *be* the maximum,
        # and every padded lane would add exp(0 - max) to the denominator.
        x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask,
                    other=-float("inf"))
        # Subtracting the row maximum leaves the result unchanged in exact
        # arithmetic, and keeps every exponent <= 0, so exp cannot overflow.
        shifted = x - tl.max(x, axis=0)
        numerator = tl.exp(shifted)
        denominator = tl.sum(numerator, axis=0)
        tl.store(out_ptr + row * out_row_stride + cols, numerator / denominator,
                 mask=mask)
# end snippet


# snippet: softmax-launch
def softmax_warps(n_cols: int) -> int:
    # The whole row lives in registers, spread over the program's threads.
    # Keep it to at most 32 values per thread: 4 warps up to 4096 columns,
    # then 8, 16, 32 warps as the row doubles.
    block_cols = triton.next_power_of_2(n_cols)
    return min(32, max(4, block_cols // (32 * 32)))


def softmax(x: torch.Tensor, programs: int | None = None,
            out: torch.Tensor | None = None) -> torch.Tensor:
    """Row softmax of a 2-D tensor. programs=None: one program per row.

    With a number, that many programs each walk a stride of rows, and the
    loop is software-pipelined two deep so the next row's load is already in
    flight while this row is reduced.
    """
    n_rows, n_cols = x.shape
    out = torch.empty_like(x) if out is None else out
    grid = (n_rows if programs is None else min(programs, n_rows),)
    softmax_kernel[grid](out, x, out.stride(0), x.stride(0), n_rows, n_cols,
                         BLOCK_COLS=triton.next_power_of_2(n_cols),
                         STAGES=1 if programs is None else 2,
                         num_warps=softmax_warps(n_cols))
    return out
# end snippet


def persistent_programs(n_cols: int) -> int:
    """Enough programs to fill every multiprocessor once, counting threads.

    A multiprocessor holds 2048 threads, 64 warps.
    """
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    return sms * max(1, 64 // softmax_warps(n_cols))



# snippet: matmul-signature
@triton.jit
def matmul_kernel(
    a_ptr, b_ptr, c_ptr, m, n, k,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr, IEEE: tl.constexpr,
):
    # end snippet
    # Each program computes one BLOCK_M x BLOCK_N tile of C, walking K.
    #
    # snippet: group-order
    # Which tile does program `pid` take? Row-major order (pid_m = pid //
    # tiles_n) would have the programs running at the same moment sweep one
    # full row of C tiles: they share a strip of A but each needs a
    # different strip of B. Grouping walks GROUP_M tile rows down a column
    # before moving right, so the programs in flight together touch fewer
    # distinct strips of A and B and find more of them already in L2.
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(m, BLOCK_M)
    tiles_n = tl.cdiv(n, BLOCK_N)
    programs_per_group = GROUP_M * tiles_n
    group = pid // programs_per_group
    first_m = group * GROUP_M
    rows_in_group = min(tiles_m - first_m, GROUP_M)  # the last group can be short
    pid_m = first_m + (pid % programs_per_group) % rows_in_group
    pid_n = (pid % programs_per_group) // rows_in_group
    # end snippet

    # snippet: tile-offsets
    # Wrapping the row and column offsets (% m, % n) keeps every load in
    # bounds without a mask; the rows and columns that wrapped are simply
    # not stored at the end. The wrap hides from the compiler that each run
    # of offsets is contiguous and block-aligned, so we state it again: that
    # is what allows 16-byte vector loads and asynchronous copies.
    offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % m
    offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % n
    offs_m = tl.max_contiguous(tl.multiple_of(offs_m, BLOCK_M), BLOCK_M)
    offs_n = tl.max_contiguous(tl.multiple_of(offs_n, BLOCK_N), BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    # end snippet

    # snippet: dot-precision
    # The accumulator is FP32 in both variants; IEEE only decides how the
    # FP32 inputs are multiplied. IEEE is a tl.constexpr, so the `if` is
    # resolved at compile time and each compiled kernel holds one branch.
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for step in range(0, tl.cdiv(k, BLOCK_K)):
        k_left = k - step * BLOCK_K  # the last step may be partial: pad with zeros
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        if IEEE:
            # all 23 mantissa bits, on the FP32 FMA units
            acc = tl.dot(a, b, acc, input_precision="ieee")
        else:
            # tensor cores, inputs cut to a 10-bit mantissa
            acc = tl.dot(a, b, acc, input_precision="tf32")
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    # end snippet

    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn
    tl.store(c_ptrs, acc, mask=(rows[:, None] < m) & (cols[None, :] < n))


def matmul(a: torch.Tensor, b: torch.Tensor, config, ieee: bool,
           out: torch.Tensor | None = None, with_kernel: bool = False):
    """C = A @ B with FP32 inputs and output, one tile shape, one precision.

    with_kernel=True also returns the compiled kernel, whose PTX shows which
    multiply instruction the precision string turned into.
    """
    m, k = a.shape
    n = b.shape[1]
    block_m, block_n, block_k, group_m, warps, stages = config
    if out is None:
        out = torch.empty((m, n), device=a.device, dtype=torch.float32)
    grid = (triton.cdiv(m, block_m) * triton.cdiv(n, block_n),)
    compiled = matmul_kernel[grid](
        a, b, out, m, n, k,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1),
        out.stride(0), out.stride(1),
        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, GROUP_M=group_m,
        IEEE=ieee, num_warps=warps, num_stages=stages)
    return (out, compiled) if with_kernel else out


# snippet: persistent-tf32
@triton.jit
def tf32_persistent_kernel(
    a_desc, bt_desc, c_desc, m, n, k,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr, PROGRAMS: tl.constexpr,
):
    # One program per SM walks the tiles of C (the persistent TMA lesson's
    # recipe): the stores of one tile overlap the loads of the next, and
    # there is no tail of half-empty waves. B is read through a descriptor
    # of B^T: B stored column-major makes B^T row-major, so every
    # [BLOCK_N, BLOCK_K] tile arrives K-major, the layout 32-bit wgmma
    # reads, and `.T` only relabels it.
    tiles_m = tl.cdiv(m, BLOCK_M)
    tiles_n = tl.cdiv(n, BLOCK_N)
    per_group = GROUP_M * tiles_n
    for tile in tl.range(tl.program_id(0), tiles_m * tiles_n, PROGRAMS,
                         flatten=True):
        first_m = (tile // per_group) * GROUP_M
        rows = min(tiles_m - first_m, GROUP_M)
        off_m = (first_m + (tile % per_group) % rows) * BLOCK_M
        off_n = ((tile % per_group) // rows) * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for step in range(tl.cdiv(k, BLOCK_K)):
            a = a_desc.load([off_m, step * BLOCK_K])
            b = bt_desc.load([off_n, step * BLOCK_K]).T
            acc = tl.dot(a, b, acc, input_precision="tf32")
        # A 128 x 256 FP32 tile is 128 KiB: stored in four column slices,
        # the staging buffer needs a quarter of that beside the pipeline.
        left, right = halves(acc, BLOCK_M, BLOCK_N)
        q0, q1 = halves(left, BLOCK_M, BLOCK_N // 2)
        q2, q3 = halves(right, BLOCK_M, BLOCK_N // 2)
        c_desc.store([off_m, off_n], q0)
        c_desc.store([off_m, off_n + BLOCK_N // 4], q1)
        c_desc.store([off_m, off_n + BLOCK_N // 2], q2)
        c_desc.store([off_m, off_n + 3 * (BLOCK_N // 4)], q3)


@triton.jit
def halves(x, ROWS: tl.constexpr, COLS: tl.constexpr):
    # ROWS x COLS viewed as ROWS x 2 x COLS/2, the 2 moved last, split off.
    return tl.split(tl.permute(tl.reshape(x, (ROWS, 2, COLS // 2)), (0, 2, 1)))
# end snippet


# The tile that measured fastest of those tried on Hopper: BLOCK_M, BLOCK_N,
# BLOCK_K, GROUP_M, num_warps, num_stages.
PERSISTENT_TF32 = (128, 256, 32, 16, 8, 4)


def matmul_persistent_tf32(a: torch.Tensor, b_col: torch.Tensor,
                           config=PERSISTENT_TF32,
                           out: torch.Tensor | None = None) -> torch.Tensor:
    """C = A @ B in tf32 with B stored column-major (b_col.t() contiguous)."""
    from triton.tools.tensor_descriptor import TensorDescriptor  # Triton 3.4+

    m, k = a.shape
    n = b_col.shape[1]
    block_m, block_n, block_k, group_m, warps, stages = config
    if out is None:
        out = torch.empty((m, n), device=a.device, dtype=torch.float32)
    tiles = triton.cdiv(m, block_m) * triton.cdiv(n, block_n)
    programs = min(tiles, torch.cuda.get_device_properties(0).multi_processor_count
                   if a.is_cuda else 4)
    tf32_persistent_kernel[(programs,)](
        TensorDescriptor.from_tensor(a, [block_m, block_k]),
        TensorDescriptor.from_tensor(b_col.t(), [block_n, block_k]),
        TensorDescriptor.from_tensor(out, [block_m, block_n // 4]),
        m, n, k, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k,
        GROUP_M=group_m, PROGRAMS=programs, num_warps=warps, num_stages=stages)
    return out


def self_check() -> None:
    """Both kernels against float64, on shapes no tile divides."""
    on_gpu = torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1"
    device = "cuda" if on_gpu else "cpu"
    torch.manual_seed(0)
    # Rows of 1000 (24 masked lanes), all negative, or shifted up past exp's
    # overflow at 88.7: -inf padding and the max shift both matter here.
    x = torch.randn(64, 1000) + torch.linspace(-30.0, 100.0, 64)[:, None]
    want = torch.softmax(x.double(), dim=1)
    x = x.to(device)
    got = softmax(x)
    # A sum of 1000 exponentials, each rounded: about 1e-5 relative.
    torch.testing.assert_close(got, want.float().to(device), rtol=1e-5, atol=1e-7)
    # Sixteen programs walking the rows compute each row the same way.
    torch.testing.assert_close(softmax(x, 16), got, rtol=0, atol=0)
    m, n, k = 200, 300, 164  # no tile divides them; k ends in a partial step
    a, b = torch.randn(m, k), torch.randn(k, n)
    want = (a.double() @ b.double()).float().to(device)
    a, b = a.to(device), b.to(device)
    b_col = b.t().contiguous().t()  # the same B, column-major
    scale = float(want.abs().max())
    for ieee, rtol in ((True, 1e-5), (False, 1e-2)):  # 23 or 10 mantissa bits
        for b_in in (b, b_col):
            torch.testing.assert_close(matmul(a, b_in, CONFIGS[0], ieee), want,
                                       rtol=rtol, atol=rtol * scale)
    hopper = not on_gpu or torch.cuda.get_device_capability() >= (9, 0)
    if hopper:  # TMA descriptors: Hopper, or the interpreter
        cfg = PERSISTENT_TF32 if on_gpu else (64, 64, 32, 4, 4, 2)
        torch.testing.assert_close(matmul_persistent_tf32(a, b_col, cfg), want,
                                   rtol=1e-2, atol=1e-2 * scale)
    print("softmax within 1e-5 of float64 on 64 rows of 1000, the strided launch "
          "bit for bit the same; matmul 200x300x164, ieee within 1e-5 and tf32 "
          f"within 1e-2, B row- and column-major{', persistent TMA' * hopper}")
    if on_gpu:
        x = torch.randn(32768, 1024, device=device)
        ms = triton.testing.do_bench(lambda: softmax(x))
        print(f"softmax, 32768 x 1024 float32: {ms * 1e3:.0f} us, "
              f"{2 * x.numel() * 4 / ms / 1e6:.0f} GB/s")
        a, b = torch.randn(4096, 4096, device=device), torch.randn(4096, 4096,
                                                                   device=device)
        ms = triton.testing.do_bench(lambda: matmul(a, b, CONFIGS[1], ieee=False))
        print(f"matmul tf32, 4096^3: {ms:.3f} ms, {2 * 4096**3 / ms / 1e9:.0f} TFLOP/s")


if __name__ == "__main__":
    self_check()
