"""Gluon: a warp-specialized persistent FP16 matmul on Hopper.

The course's persistent TMA lesson reached cuBLAS with `tl`: the compiler
pipelined its loads and its wgmma for it, in one stream of instructions that
every warp executes. Gluon lets the kernel split the work by role, the way
cuBLAS and CUTLASS do on Hopper:

* a *producer*: one warp that only issues TMA loads of A and B tiles into a
  ring of shared-memory stages, and needs almost no registers;
* *consumers*: two warpgroups (8 warps) that only wait for a stage, issue
  wgmma on it, hand the stage back, and write each finished tile;
* an *mbarrier ring* between them: per stage, `ready` (the loads landed,
  counted in bytes) and `empty` (the consumers are done reading);
* a *persistent tile scheduler*: one program per SM walking the output
  tiles in grouped order, so the producer loads the next tile's operands
  while the consumers still write the last one.

Gluon kernels compile straight to GPU code: there is no interpreter for them,
so they run on a Hopper GPU only. Written against Triton 3.6's Gluon API.

Run it:
    python gluon_matmul.py   # a Hopper GPU: checked against float64, one timing

Beside it: matmul_model.py runs the scheduler and the ring on any CPU;
exercises.py poses exercises on them; lesson.py is the run the course records.
"""

import os

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor


# snippet: tile-coords
@gluon.jit
def tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M: gl.constexpr):
    # The grouped order of the tl lessons: bands of GROUP_M tile rows, column
    # by column inside a band, so tiles computed together share operands in L2.
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = tile_id // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + (tile_id % group_size_m)
    pid_n = (tile_id % num_pid_in_group) // group_size_m
    return pid_m, pid_n


# end snippet


# snippet: producer
@gluon.jit
def _producer(a_desc, b_desc, ring, shape, GROUP_M: gl.constexpr):
    # One warp. It walks the same tiles in the same order as the consumers and
    # keeps the ring full: wait for slot s to be empty, arm its `ready`
    # barrier with the bytes of one A and one B tile, start both copies.
    a_bufs, b_bufs, ready, empty = ring
    M, N, K = shape
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    BN: gl.constexpr = b_desc.block_type.shape[1]
    STAGES: gl.constexpr = a_bufs.type.shape[0]
    num_pid_m, num_pid_n, k_tiles = gl.cdiv(M, BM), gl.cdiv(N, BN), gl.cdiv(K, BK)
    nbytes: gl.constexpr = a_desc.block_type.nbytes + b_desc.block_type.nbytes
    it = 0  # loads issued so far: slot it % STAGES, lap it // STAGES
    for tile_id in range(gl.program_id(0), num_pid_m * num_pid_n, gl.num_programs(0)):
        pid_m, pid_n = tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M)
        for kk in range(k_tiles):
            s = it % STAGES
            # A fresh barrier is in phase 0; waiting on parity 1 returns at
            # once, so the first lap finds every slot empty.
            mbarrier.wait(empty.index(s), ((it // STAGES) & 1) ^ 1)
            mbarrier.expect(ready.index(s), nbytes)
            tma.async_copy_global_to_shared(
                a_desc, [pid_m * BM, kk * BK], ready.index(s), a_bufs.index(s))
            tma.async_copy_global_to_shared(
                b_desc, [kk * BK, pid_n * BN], ready.index(s), b_bufs.index(s))
            it += 1


# end snippet


# snippet: consumer
@gluon.jit
def _mainloop(ring, it, k_tiles, acc):
    # wgmma is asynchronous: issue the product of slot s, then wait until at
    # most one product is in flight, which means the one of the slot before
    # has finished reading shared memory: hand that slot back.
    a_bufs, b_bufs, ready, empty = ring
    STAGES: gl.constexpr = a_bufs.type.shape[0]
    for kk in range(k_tiles):
        s = it % STAGES
        mbarrier.wait(ready.index(s), (it // STAGES) & 1)
        acc = warpgroup_mma(a_bufs.index(s), b_bufs.index(s), acc, is_async=True)
        acc = warpgroup_mma_wait(1, deps=(acc,))
        mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), count=1, pred=kk > 0)
        it += 1
    acc = warpgroup_mma_wait(0, deps=(acc,))
    mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), count=1)
    return acc, it


@gluon.jit
def _consumer(c_desc, c_smem, ring, shape, GROUP_M: gl.constexpr,
              EPI_SPLIT: gl.constexpr):
    # The default partition: all its warps share one BM x BN accumulator
    # (two warpgroups for 128 x 256: 64 rows each). Between tiles it writes
    # the result while the producer already loads the next tile's operands.
    M, N, K = shape
    BM: gl.constexpr = c_desc.block_type.shape[0]
    BN: gl.constexpr = c_desc.block_type.shape[1] * EPI_SPLIT
    BK: gl.constexpr = ring[0].type.shape[2]
    mma_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[gl.num_warps(), 1], instr_shape=[16, BN, 16])
    num_pid_m, num_pid_n, k_tiles = gl.cdiv(M, BM), gl.cdiv(N, BN), gl.cdiv(K, BK)
    it = 0
    for tile_id in range(gl.program_id(0), num_pid_m * num_pid_n, gl.num_programs(0)):
        pid_m, pid_n = tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M)
        acc = gl.zeros([BM, BN], gl.float32, layout=mma_layout)
        acc, it = _mainloop(ring, it, k_tiles, acc)
        c = acc.to(gl.float16)
        if EPI_SPLIT == 1:
            tma.store_wait(0)  # the last tile's store has finished reading c_smem
            c_smem.store(c)  # registers -> shared memory: the generic proxy
            fence_async_shared()  # ordered before the TMA store (the async proxy)
            tma.async_copy_shared_to_global(c_desc, [pid_m * BM, pid_n * BN], c_smem)
        else:  # two halves of BN / 2 columns: the split only renames registers
            c0, c1 = c.reshape([BM, 2, BN // 2]).permute(0, 2, 1).split()
            tma.store_wait(0)
            c_smem.store(c0)
            fence_async_shared()
            tma.async_copy_shared_to_global(c_desc, [pid_m * BM, pid_n * BN], c_smem)
            tma.store_wait(0)
            c_smem.store(c1)
            fence_async_shared()
            tma.async_copy_shared_to_global(
                c_desc, [pid_m * BM, pid_n * BN + BN // 2], c_smem)
    tma.store_wait(0)


# end snippet


# snippet: kernel
@gluon.jit
def matmul_ws_kernel(a_desc, b_desc, c_desc, M, N, K, GROUP_M: gl.constexpr,
                     STAGES: gl.constexpr, EPI_SPLIT: gl.constexpr,
                     PRODUCER_REGS: gl.constexpr):
    f16: gl.constexpr = a_desc.dtype
    a_bufs = gl.allocate_shared_memory(
        f16, [STAGES] + a_desc.block_type.shape, a_desc.layout)
    b_bufs = gl.allocate_shared_memory(
        f16, [STAGES] + b_desc.block_type.shape, b_desc.layout)
    c_smem = gl.allocate_shared_memory(f16, c_desc.block_type.shape, c_desc.layout)
    bar: gl.constexpr = mbarrier.MBarrierLayout()
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], bar)
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], bar)
    for k in gl.static_range(STAGES):
        mbarrier.init(ready.index(k), count=1)
        mbarrier.init(empty.index(k), count=1)
    ring = (a_bufs, b_bufs, ready, empty)  # the stages and their barriers
    gl.warp_specialize(
        [
            (_consumer, (c_desc, c_smem, ring, (M, N, K), GROUP_M, EPI_SPLIT)),
            (_producer, (a_desc, b_desc, ring, (M, N, K), GROUP_M)),
        ],
        [1],  # warps of the worker: the producer
        [PRODUCER_REGS],  # its registers per thread (setmaxnreg)
    )


# end snippet


# -- launchers -------------------------------------------------------------------

BLOCK = (128, 256, 64)  # BM, BN, BK
CONSUMER_WARPS = 8  # the default partition: two warpgroups of 64 rows each
PRODUCER_REGS = 24  # registers per thread the producer warp asks for
CONFIGS = {  # name -> matmul_ws keyword arguments: the two rings the lesson runs
    name: dict(block=BLOCK, stages=stages, epi_split=epi, num_warps=CONSUMER_WARPS,
               producer_regs=PRODUCER_REGS)
    for name, stages, epi in (("ws-3stage", 3, 1), ("ws-4stage", 4, 2))
}


def _descs(a, b, c, bm, bn, bk, c_bn):
    for t in (a, b, c):
        assert t.stride(-1) == 1, "TMA needs a unit stride in the last dimension"
    f16 = gl.float16

    def desc(t, block):
        return TensorDescriptor.from_tensor(
            t, block, gl.NVMMASharedLayout.get_default_for(block, f16)
        )

    return desc(a, [bm, bk]), desc(b, [bk, bn]), desc(c, [bm, c_bn])


def matmul_ws(
    a,
    b,
    num_sms,
    out=None,
    block=(128, 256, 64),
    stages=4,
    epi_split=2,
    group_m=8,
    num_warps=8,
    producer_regs=24,
    maxnreg=None,
    programs=None,
    with_kernel=False,
):
    """C = A @ B, fp16 A (M, K), B (K, N): the cooperative warp-specialized kernel."""
    M, K = a.shape
    N = b.shape[1]
    c = out if out is not None else a.new_empty((M, N))
    bm, bn, bk = block
    a_desc, b_desc, c_desc = _descs(a, b, c, bm, bn, bk, bn // epi_split)
    tiles = triton.cdiv(M, bm) * triton.cdiv(N, bn)
    kw = {"maxnreg": maxnreg} if maxnreg else {}
    k = matmul_ws_kernel[(programs or min(num_sms, tiles),)](
        a_desc,
        b_desc,
        c_desc,
        M,
        N,
        K,
        group_m,
        stages,
        epi_split,
        producer_regs,
        num_warps=num_warps,
        **kw,
    )
    return (c, k) if with_kernel else c


# snippet: self-check
def self_check() -> None:
    """Both rings against float64, on shapes no tile divides; one timing."""
    if not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") == "1":
        print("Gluon kernels run on a GPU only (compute capability 9.0, Hopper): "
              "nothing to check here. On a CPU, run exercises.py: the scheduler's "
              "and the ring's models.")
        return
    num_sms = torch.cuda.get_device_properties(0).multi_processor_count
    torch.manual_seed(0)
    for M, N, K in ((1000, 1032, 776), (777, 520, 4104)):
        a = torch.randn(M, K, device="cuda", dtype=torch.float16)
        b = torch.randn(K, N, device="cuda", dtype=torch.float16)
        want = a.double() @ b.double()
        rtol = max(1e-3, 4 * 2.0**-23 * K**0.5)  # fp32 sums rounded to fp16
        for cfg in CONFIGS.values():
            c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
            matmul_ws(a, b, num_sms, out=c, **cfg)
            torch.testing.assert_close(c.double(), want, rtol=rtol,
                                       atol=rtol * float(want.abs().max()))
        print(f"both rings match float64 on {M}x{N}x{K} (rtol {rtol:.2g})")
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
    cfg = CONFIGS["ws-4stage"]
    ms = triton.testing.do_bench(lambda: matmul_ws(a, a, num_sms, **cfg))
    print(f"4 stages, 4096^3 fp16: {ms:.3f} ms, {2 * 4096**3 / ms * 1e-9:.0f} TFLOP/s")


# end snippet


if __name__ == "__main__":
    self_check()
