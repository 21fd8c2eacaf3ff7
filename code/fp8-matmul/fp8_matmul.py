"""FP8 matmul: one byte per operand, twice the tensor-core rate, and a scale.

Hopper's tensor cores multiply 8-bit floats at twice the rate of fp16. The
format used here, e4m3 (`torch.float8_e4m3fn`: 4 exponent bits, 3 mantissa
bits, no infinities), only reaches +-448 and keeps 3 bits of mantissa, so a
tensor is stored as fp8 values plus one fp32 *scale*. With per-tensor scales:

    scale_a = amax(|A|) / 448          A_fp8 = round(A / scale_a)
    scale_b = amax(|B|) / 448          B_fp8 = round(B / scale_b)
    C = (A_fp8 @ B_fp8) * (scale_a * scale_b)

The matmul runs on the raw fp8 values with an fp32 accumulator, and the two
scales become one multiply in the epilogue. The kernel is the persistent TMA
matmul of the previous lesson with the changes fp8 forces on it:

* B is passed as B^T, an (N, K) tensor, because Hopper's 8-bit wgmma reads
  both operands K-major from shared memory;
* the epilogue multiplies by scale_a * scale_b before rounding to fp16;
* Hopper's fp8 tensor cores accumulate with fewer bits than fp32. Triton
  accepts that by default on sm_90 (fast accumulation). A variant promotes
  the partial sum into a true fp32 accumulator once per BLOCK_K, as cuBLAS
  does unless asked for fast accumulation. The run measures what each costs.

lesson.py measures what fp8 costs in accuracy (against the float64 product
of the fp16 inputs, next to fp16 cuBLAS's own error) and what it buys in
speed (against `torch._scaled_mm`, cuBLAS's fp8 matmul, and `torch.matmul`
in fp16).

Run it:
    TRITON_INTERPRET=1 python fp8_matmul.py   # any machine: the kernel on fp16
                                              # stand-ins for the fp8 values
    python fp8_matmul.py                      # H100/H200: fp8 checks, a timing

Beside it: exercises.py (check your own answers) and lesson.py (the run the
course records: accuracy, the checks and the benchmarks on the lesson's page).
"""

import os
from typing import NamedTuple

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

E4M3_MAX = 448.0  # largest finite float8_e4m3fn: 1.75 * 2**8


# snippet: quantize
def quantize_e4m3(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-tensor scaling: the largest |x| lands exactly on e4m3's largest, 448."""
    # clamp: an all-zero tensor still gets a scale
    amax = x.abs().max().float().clamp(min=1e-12)
    scale = amax / E4M3_MAX
    # x / scale lies in [-448, 448] up to one fp32 rounding; the clamp keeps
    # that last ulp from overflowing into e4m3's NaN encoding.
    q = (x.float() / scale).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    # a 0-dim fp32 tensor on x's device, the form _scaled_mm takes
    return q, scale.reshape(())


# end snippet


def dequantize64(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return q.to(torch.float64) * scale.to(torch.float64)


# snippet: kernel
@triton.jit
def tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    # Grouped order, as in the previous lessons: bands of GROUP_M tile rows,
    # column by column inside a band, so tiles in flight share operands in L2.
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = tile_id // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + (tile_id % num_pid_in_group) % group_size_m
    pid_n = (tile_id % num_pid_in_group) // group_size_m
    return pid_m, pid_n


@triton.jit
def scaled_matmul_kernel(
    a_desc, bt_desc, c_desc,  # TMA descriptors: A (M, K), B^T (N, K), C (M, N)
    scale_a_ptr, scale_b_ptr,  # fp32 scalars on the device
    M, N, K,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr,
    SPLIT_EPILOGUE: tl.constexpr, PROMOTE_ACC: tl.constexpr,
):
    start_pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n
    k_tiles = tl.cdiv(K, BLOCK_K)
    # Both scales fold into one number, read once per program.
    scale = tl.load(scale_a_ptr) * tl.load(scale_b_ptr)

    # One program per SM walks tiles start_pid, start_pid + NUM_SMS, ...;
    # flatten=True fuses this loop with the K loop into one pipelined loop.
    for tile_id in tl.range(start_pid, num_tiles, NUM_SMS, flatten=True):
        pid_m, pid_n = tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            off_k = ki * BLOCK_K
            # TMA boxes past the tensor's edge read as zeros: no masks for
            # ragged M, N or K.
            a = a_desc.load([off_m, off_k])  # (BLOCK_M, BLOCK_K), K contiguous
            bt = bt_desc.load([off_n, off_k])  # (BLOCK_N, BLOCK_K), K contiguous
            # bt.T is a view, not a copy: it tells wgmma to read B K-major,
            # the only way 8-bit wgmma reads an operand from shared memory.
            if PROMOTE_ACC:
                # The tensor core sums this BLOCK_K slice in its own
                # (narrower) accumulator; the compiler then adds the slice
                # into acc with ordinary fp32 adds. Exact fp32 across
                # slices, at a cost.
                acc = tl.dot(a, bt.T, acc, max_num_imprecise_acc=BLOCK_K)
            else:
                # Triton's default on sm_90: the tensor core keeps
                # accumulating into acc itself, at its reduced fp8
                # accumulation precision.
                acc = tl.dot(a, bt.T, acc)
        # Epilogue: undo both quantizations with one multiply, round to fp16
        # and let TMA store the tile, clipping rows and columns past the edge.
        acc = acc * scale
        if SPLIT_EPILOGUE:
            # Two half-tile stores (as in the previous lesson): half the
            # shared memory for staging, which can buy one more stage.
            halves = tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1))
            acc0, acc1 = tl.split(halves)
            c_desc.store([off_m, off_n], acc0.to(tl.float16))
            c_desc.store([off_m, off_n + BLOCK_N // 2], acc1.to(tl.float16))
        else:
            c_desc.store([off_m, off_n], acc.to(tl.float16))


# end snippet


# snippet: configs
class Config(NamedTuple):
    block_m: int
    block_n: int
    block_k: int
    group_m: int
    num_warps: int
    num_stages: int
    split_epilogue: bool
    promote_acc: bool

    def label(self) -> str:
        return (
            f"{self.block_m}x{self.block_n}x{self.block_k}, {self.num_warps} warps, "
            f"{self.num_stages} stages"
            + (", split epilogue" if self.split_epilogue else "")
            + (", promote every BLOCK_K" if self.promote_acc else "")
        )


# Shared memory per stage at 128x256x128: 16 KiB of A + 32 KiB of B^T. Three
# stages and a whole 64 KiB fp16 output tile, or four stages and a half tile,
# stay within Hopper's 227 KiB. The run times the candidates, keeps the best.
FAST_CONFIGS = [
    Config(128, 256, 128, 8, 8, 3, split_epilogue=False, promote_acc=False),
    Config(128, 256, 128, 8, 8, 4, split_epilogue=True, promote_acc=False),
    Config(128, 256, 64, 8, 8, 4, split_epilogue=True, promote_acc=False),
]
# Promotion keeps a second fp32 accumulator of the tile in registers, so the
# tile is halved: 128x256 would need 256 accumulator registers per thread.
PROMOTED_CONFIG = Config(128, 128, 128, 8, 8, 4, split_epilogue=False, promote_acc=True)


# end snippet


# snippet: launch
def descriptors(a, bt, c, cfg: Config):
    # A descriptor holds the global shape and strides (each but the last a
    # multiple of 16 bytes: K % 16 == 0 for fp8 operands, N % 8 == 0 for the
    # fp16 output) and the box one load or store moves.
    c_box = [cfg.block_m, cfg.block_n // 2 if cfg.split_epilogue else cfg.block_n]
    return (
        TensorDescriptor.from_tensor(a, [cfg.block_m, cfg.block_k]),
        TensorDescriptor.from_tensor(bt, [cfg.block_n, cfg.block_k]),
        TensorDescriptor.from_tensor(c, c_box),
    )


def scaled_matmul(a, bt, scale_a, scale_b, cfg: Config, num_sms=None, out=None):
    """C (M, N) fp16 = (a @ bt.T) * scale_a * scale_b, for a (M, K) and
    bt (N, K), both K-contiguous."""
    M, K = a.shape
    N, K2 = bt.shape
    assert K == K2 and a.dtype == bt.dtype
    assert a.is_contiguous() and bt.is_contiguous()
    if out is None:
        out = torch.empty((M, N), device=a.device, dtype=torch.float16)
    if num_sms is None:
        num_sms = torch.cuda.get_device_properties(a.device).multi_processor_count
    # One program per SM, never more programs than tiles. NUM_SMS is the loop
    # stride; it stays the SM count (not the grid) so one compiled kernel
    # serves every shape.
    tiles = triton.cdiv(M, cfg.block_m) * triton.cdiv(N, cfg.block_n)
    scaled_matmul_kernel[(min(num_sms, tiles),)](
        *descriptors(a, bt, out, cfg), scale_a, scale_b, M, N, K,
        BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k,
        GROUP_M=cfg.group_m, NUM_SMS=num_sms,
        SPLIT_EPILOGUE=cfg.split_epilogue, PROMOTE_ACC=cfg.promote_acc,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )
    return out


# end snippet


# snippet: self-check
def self_check() -> None:
    """The kernel against float64, on shapes no tile divides: real e4m3 on a GPU;
    under the interpreter (no float8 there) the same e4m3 values held in fp16."""
    on_gpu = torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1"
    device = "cuda" if on_gpu else "cpu"
    torch.manual_seed(0)
    M, N, K = (1008, 1040, 784) if on_gpu else (77, 40, 56)
    a = torch.randn(M, K, device=device, dtype=torch.float16)
    bt = torch.randn(N, K, device=device, dtype=torch.float16) * 3  # B^T: (N, K)
    (qa, sa), (qb, sb) = quantize_e4m3(a), quantize_e4m3(bt)
    if on_gpu:
        configs = [FAST_CONFIGS[1], PROMOTED_CONFIG]
    else:  # every e4m3 value is exactly an fp16 value: the same products
        qa, qb = qa.to(torch.float16), qb.to(torch.float16)
        configs = [Config(32, 32, 32, 2, 4, 2, split_epilogue=split,
                          promote_acc=promote)
                   for split, promote in ((False, False), (True, True))]
    # The exact product of the values the kernel is given: only the sums round.
    want = dequantize64(qa, sa) @ dequantize64(qb, sb).T
    # Fast fp8 accumulation loses up to 2^-13 of the sum per 32 products.
    rtol = max(2.0**-10, -(-K // 32) * 2.0**-13)
    for cfg in configs:
        got = scaled_matmul(qa, qb, sa, sb, cfg, num_sms=None if on_gpu else 3)
        torch.testing.assert_close(got.double(), want, rtol=rtol,
                                   atol=rtol * float(want.abs().max()))
    kind = "e4m3" if on_gpu else "e4m3 values in fp16"
    print(f"scaled_matmul matches float64 on {M}x{N}x{K}, {kind} (rtol {rtol:.2g})")
    if on_gpu:
        n = 4096
        qa, sa = quantize_e4m3(torch.randn(n, n, device=device, dtype=torch.float16))
        qb, sb = quantize_e4m3(torch.randn(n, n, device=device, dtype=torch.float16))
        ms = triton.testing.do_bench(
            lambda: scaled_matmul(qa, qb, sa, sb, FAST_CONFIGS[1]))
        print(f"fp8 {n}^3: {ms:.3f} ms, {2 * n**3 / ms * 1e-9:.0f} TFLOP/s")


# end snippet


if __name__ == "__main__":
    self_check()
