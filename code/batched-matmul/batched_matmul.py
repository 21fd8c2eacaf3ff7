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

Run it:
    TRITON_INTERPRET=1 python code/batched-matmul/batched_matmul.py   # CPU, checks only
    python code/batched-matmul/batched_matmul.py                      # GPU, checks and TFLOP/s
"""

import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # code/, where lessonkit.py lives
from lessonkit import Lesson, bench_interleaved, bench_ms, scaled_rtol, tflops


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


FP16_RTOL = 1e-3  # the output is rounded to fp16: 2**-11 relative, under this table value
F32_EPS = 2.0**-23  # the accumulator is fp32


# snippet: checks
def check(lesson, name, a, b, config=None):
    """bmm(a, b) against float64 torch.bmm of the same fp16 inputs, output poisoned with NaN."""
    want = torch.bmm(a.to(torch.float64), b.to(torch.float64))
    K = a.shape[2]
    rtol, why = scaled_rtol(FP16_RTOL, F32_EPS, K)
    atol = rtol * float(want.abs().max())
    # Poison: an output tile of any batch entry that no program writes stays
    # NaN, and close() fails on non-finite elements.
    out = torch.full(want.shape, float("nan"), device=a.device, dtype=torch.float16)
    bmm(a, b, out=out, config=config)
    return lesson.close(name, out, want, rtol, atol, why)


def checks(lesson, device, shapes, config=None, prefix=""):
    for batch, M, N, K in shapes:
        torch.manual_seed(batch + M + N + K)
        tag = f"{batch}x{M}x{N}x{K}"
        a = torch.randn((batch, M, K), device=device, dtype=torch.float16)
        b = torch.randn((batch, K, N), device=device, dtype=torch.float16)
        check(lesson, f"{prefix}contiguous-{tag}", a, b, config)
        # B stored as (batch, N, K) and viewed transposed: strides (N*K, 1, K).
        b_t = torch.randn((batch, N, K), device=device, dtype=torch.float16).transpose(1, 2)
        check(lesson, f"{prefix}transposed-b-{tag}", a, b_t, config)
        # One A shared by the whole batch: expand() gives batch stride 0.
        a_shared = torch.randn((1, M, K), device=device, dtype=torch.float16).expand(batch, M, K)
        check(lesson, f"{prefix}broadcast-a-{tag}", a_shared, b, config)
# end snippet


# snippet: benchmark
def measure(batch, M, N, K, device, config):
    """TFLOP/s of bmm and of torch.bmm (cuBLAS's batched GEMM), same random inputs, same run."""
    # Random inputs, never zeros: tensor cores draw less power on zeros and clock higher.
    a = torch.randn((batch, M, K), device=device, dtype=torch.float16)
    b = torch.randn((batch, K, N), device=device, dtype=torch.float16)
    flop = 2.0 * batch * M * N * K
    ms = bench_interleaved({"triton": lambda: bmm(a, b, config=config), "torch": lambda: torch.bmm(a, b)})
    return tflops(flop, ms["triton"]), tflops(flop, ms["torch"])
# end snippet


def main() -> int:
    lesson = Lesson("batched-matmul")
    device = lesson.device()

    if lesson.interpret:
        # Batch 3, and sizes that are not multiples of the 32x32x16 blocks:
        # ragged last tiles in M and N, a K tail.
        checks(lesson, device, [(3, 50, 40, 72), (3, 64, 96, 24)])
        print("\nNo timings under the interpreter.")
        return lesson.finish()

    # Every GPU configuration on a ragged shape whose row strides are not
    # multiples of 16 bytes, and on a mid-size batch.
    for i, config in enumerate(GPU_CONFIGS.values()):
        checks(lesson, device, [(3, 333, 250, 77), (8, 1000, 1032, 776)], config, prefix=f"config{i + 1}-")

    # The target: 64 matrices of 1024^3 in FP16, against torch.bmm timed in
    # the same run. First the configurations race at that shape.
    M = N = K = 1024
    race = {name: measure(64, M, N, K, device, config) for name, config in GPU_CONFIGS.items()}
    best = max(race, key=lambda name: race[name][0] / race[name][1])
    lesson.table("configs", ["configuration", "Triton TFLOP/s", "torch.bmm TFLOP/s", "Triton / torch.bmm"],
                 [[name, ours, ref, ours / ref] for name, (ours, ref) in race.items()],
                 f"Batch 64 of 1024x1024x1024, FP16. The faster, {best}, is used below.")
    config = GPU_CONFIGS[best]
    ours, ref = race[best]
    lesson.benchmark("bmm-vs-torch-64x1024", ours, ref, "TFLOP/s", threshold=0.80, stretch=0.95,
                     baseline_name="torch.bmm",
                     note=f"batch 64 of 1024^3, FP16 in, FP32 accumulate, FP16 out; {best}")

    sweep = {batch: measure(batch, M, N, K, device, config) for batch in (1, 4, 16)}
    sweep[64] = race[best]
    tiles = triton.cdiv(M, config["BLOCK_M"]) * triton.cdiv(N, config["BLOCK_N"])
    lesson.table("batch-sweep", ["batch", "programs", "Triton TFLOP/s", "torch.bmm TFLOP/s", "Triton / torch.bmm"],
                 [[batch, batch * tiles, ours, ref, ours / ref] for batch, (ours, ref) in sweep.items()],
                 f"FP16 batches of 1024x1024x1024 products, {best}; median of triton.testing.do_bench.")

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
                     note="why the batch belongs in the grid")

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    batches = list(sweep)
    fig, ax = plt.subplots(figsize=(6.0, 3.6))
    ax.plot(batches, [sweep[x][0] for x in batches], "o-", label="Triton bmm_kernel")
    ax.plot(batches, [sweep[x][1] for x in batches], "k--", label="torch.bmm")
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
