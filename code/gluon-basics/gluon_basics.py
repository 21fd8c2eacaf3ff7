"""Gluon basics: a matrix copy four ways, one Gluon idea at a time.

1. through registers, with the layout written out (16-byte accesses);
2. one tile through shared memory by TMA, waited for on an mbarrier;
3. persistent and pipelined: a ring of shared-memory stages, loads running
   ahead of stores;
4. the same ring warp-specialized: one warp loads, the others store.

Gluon kernels compile straight to GPU code: there is no interpreter for them,
so they run on a Hopper GPU only. Written against Triton 3.6's Gluon API
(`tma.async_copy_global_to_shared`, `mbarrier.expect(bar, bytes)`,
`gl.warp_specialize(functions_and_args, worker_num_warps, worker_num_regs)`).

Run it:
    python gluon_basics.py   # a Hopper GPU: each copy checked bit for bit, one timing

Beside it: copy_model.py runs the rings of steps 3 and 4 on any CPU;
exercises.py poses exercises on them; lesson.py is the run the course records.
"""

import os

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

# -- Step 1: a copy through registers, with the layout written out --------------


# snippet: blocked-copy
@gluon.jit
def copy_blocked_kernel(src, dst, n, BLOCK: gl.constexpr, VEC: gl.constexpr):
    # In `tl` the compiler picks how a block is spread over the threads. In
    # Gluon the kernel says it: VEC consecutive elements per thread (VEC = 8
    # fp16 values is one 16-byte access), 32 threads per warp side by side,
    # the warps after one another. A block of BLOCK elements wraps around
    # that layout BLOCK / (VEC * 32 * num_warps) times.
    layout: gl.constexpr = gl.BlockedLayout(
        size_per_thread=[VEC],
        threads_per_warp=[32],
        warps_per_cta=[gl.num_warps()],
        order=[0],
    )
    offs = gl.program_id(0) * BLOCK + gl.arange(0, BLOCK, layout=layout)
    mask = offs < n
    gl.store(dst + offs, gl.load(src + offs, mask=mask), mask=mask)


# end snippet


def copy_blocked(src, dst, block=4096, vec=8, num_warps=4, with_kernel=False):
    n = src.numel()
    k = copy_blocked_kernel[(triton.cdiv(n, block),)](
        src, dst, n, block, vec, num_warps=num_warps
    )
    return (dst, k) if with_kernel else dst


# -- Step 2: one tile through shared memory, moved by TMA ----------------------


# snippet: tma-one-tile
@gluon.jit
def copy_tma_tile_kernel(in_desc, out_desc, TILES_N: gl.constexpr):
    # One program moves one tile. Shared memory is allocated by the kernel,
    # in the swizzled layout the descriptor names; the mbarrier is an 8-byte
    # object in shared memory that counts the bytes the copy engine delivers.
    pid = gl.program_id(0)
    row = (pid // TILES_N) * in_desc.block_type.shape[0]
    col = (pid % TILES_N) * in_desc.block_type.shape[1]
    smem = gl.allocate_shared_memory(
        in_desc.dtype, in_desc.block_type.shape, in_desc.layout
    )
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    # Arm the barrier with the bytes to expect, start the copy, wait for phase
    # 0 of the barrier to complete: then every byte of the tile has landed.
    mbarrier.expect(bar, in_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(in_desc, [row, col], bar, smem)
    mbarrier.wait(bar, 0)
    # The store reads shared memory through the same (async) proxy as the
    # load wrote it, so no fence is needed between them.
    tma.async_copy_shared_to_global(out_desc, [row, col], smem)
    tma.store_wait(0)
    mbarrier.invalidate(bar)


# end snippet


# -- Step 3: a persistent, pipelined copy: a ring of STAGES tiles ----------------


# snippet: tma-pipelined
@gluon.jit
def copy_tma_pipelined_kernel(in_desc, out_desc, num_tiles, TILES_N: gl.constexpr,
                              STAGES: gl.constexpr, AHEAD: gl.constexpr):
    BR: gl.constexpr = in_desc.block_type.shape[0]
    BC: gl.constexpr = in_desc.block_type.shape[1]
    bufs = gl.allocate_shared_memory(in_desc.dtype, [STAGES, BR, BC], in_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for k in gl.static_range(STAGES):
        mbarrier.init(ready.index(k), count=1)
    # Program p copies tiles p, p + G, p + 2G, ... (G programs): `mine` of them.
    pid = gl.program_id(0)
    G = gl.num_programs(0)
    mine = (num_tiles - pid + G - 1) // G
    # AHEAD loads run ahead of the stores (AHEAD < STAGES): the other
    # STAGES - AHEAD slots belong to stores still reading shared memory.
    # Prologue: the first AHEAD loads.
    for i in gl.static_range(AHEAD):
        t = pid + i * G
        where = [(t // TILES_N) * BR, (t % TILES_N) * BC]
        mbarrier.expect(ready.index(i), in_desc.block_type.nbytes, pred=i < mine)
        tma.async_copy_global_to_shared(
            in_desc, where, ready.index(i), bufs.index(i), pred=i < mine)
    for i in range(mine):
        s = i % STAGES
        t = pid + i * G
        # Tile i landed when phase (i // STAGES) of its slot's barrier completed.
        mbarrier.wait(ready.index(s), (i // STAGES) & 1)
        where = [(t // TILES_N) * BR, (t % TILES_N) * BC]
        tma.async_copy_shared_to_global(out_desc, where, bufs.index(s))
        # The next load, tile i + AHEAD, goes into the slot tile
        # i + AHEAD - STAGES used: its store must have finished reading, so
        # at most STAGES - AHEAD stores (the later ones) may still be pending.
        tma.store_wait(STAGES - AHEAD)
        nxt = i + AHEAD
        ns = nxt % STAGES
        tn = pid + nxt * G
        where = [(tn // TILES_N) * BR, (tn % TILES_N) * BC]
        mbarrier.expect(ready.index(ns), in_desc.block_type.nbytes, pred=nxt < mine)
        tma.async_copy_global_to_shared(
            in_desc, where, ready.index(ns), bufs.index(ns), pred=nxt < mine)
    tma.store_wait(0)
    for k in gl.static_range(STAGES):
        mbarrier.invalidate(ready.index(k))


# end snippet


# -- Step 4: the same ring, warp-specialized -----------------------------------


# snippet: ws-copy
@gluon.jit
def _ws_loader(in_desc, bufs, ready, empty, num_tiles, TILES_N: gl.constexpr):
    # One warp that only issues loads. It waits for a slot to be empty (the
    # barriers start in phase 0, so waiting on parity 1 of a fresh barrier
    # returns at once: the ring starts empty), arms `ready` and copies.
    STAGES: gl.constexpr = bufs.type.shape[0]
    BR: gl.constexpr = bufs.type.shape[1]
    BC: gl.constexpr = bufs.type.shape[2]
    pid = gl.program_id(0)
    G = gl.num_programs(0)
    for i in range((num_tiles - pid + G - 1) // G):
        s = i % STAGES
        t = pid + i * G
        mbarrier.wait(empty.index(s), ((i // STAGES) & 1) ^ 1)
        where = [(t // TILES_N) * BR, (t % TILES_N) * BC]
        mbarrier.expect(ready.index(s), in_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(in_desc, where, ready.index(s), bufs.index(s))


@gluon.jit
def _ws_storer(out_desc, bufs, ready, empty, num_tiles, TILES_N: gl.constexpr):
    # The default partition: waits for a tile, stores it, and hands the slot
    # of the tile before back to the loader once that store has read it.
    STAGES: gl.constexpr = bufs.type.shape[0]
    BR: gl.constexpr = bufs.type.shape[1]
    BC: gl.constexpr = bufs.type.shape[2]
    pid = gl.program_id(0)
    G = gl.num_programs(0)
    for i in range((num_tiles - pid + G - 1) // G):
        s = i % STAGES
        t = pid + i * G
        mbarrier.wait(ready.index(s), (i // STAGES) & 1)
        where = [(t // TILES_N) * BR, (t % TILES_N) * BC]
        tma.async_copy_shared_to_global(out_desc, where, bufs.index(s))
        tma.store_wait(1)
        mbarrier.arrive(empty.index((i + STAGES - 1) % STAGES), count=1, pred=i > 0)
    tma.store_wait(0)


@gluon.jit
def copy_ws_kernel(in_desc, out_desc, num_tiles, TILES_N: gl.constexpr,
                   STAGES: gl.constexpr):
    BR: gl.constexpr = in_desc.block_type.shape[0]
    BC: gl.constexpr = in_desc.block_type.shape[1]
    bufs = gl.allocate_shared_memory(in_desc.dtype, [STAGES, BR, BC], in_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for k in gl.static_range(STAGES):
        mbarrier.init(ready.index(k), count=1)
        mbarrier.init(empty.index(k), count=1)
    # The default partition (this kernel's warps) stores; one worker warp
    # loads. Workers take no register tensors: descriptors, shared memory,
    # barriers, scalars and constexprs only.
    gl.warp_specialize(
        [
            (_ws_storer, (out_desc, bufs, ready, empty, num_tiles, TILES_N)),
            (_ws_loader, (in_desc, bufs, ready, empty, num_tiles, TILES_N)),
        ],
        [1],  # warps of the worker: the loader
        [24],  # its registers per thread (setmaxnreg): the fewest there are
    )


# end snippet


# -- launchers -------------------------------------------------------------------


def descriptors(src, dst, block):
    """Host-side tensor maps of a 2-D fp16/fp32 tensor and its copy, `block` tiles."""
    dtype = gl.float16 if src.element_size() == 2 else gl.float32
    layout = gl.NVMMASharedLayout.get_default_for(block, dtype)
    return (
        TensorDescriptor.from_tensor(src, block, layout),
        TensorDescriptor.from_tensor(dst, block, layout),
    )


def copy_tma_tile(src, dst, block=(64, 128), with_kernel=False):
    in_desc, out_desc = descriptors(src, dst, list(block))
    tiles_n = triton.cdiv(src.shape[1], block[1])
    grid = (triton.cdiv(src.shape[0], block[0]) * tiles_n,)
    k = copy_tma_tile_kernel[grid](in_desc, out_desc, tiles_n, num_warps=1)
    return (dst, k) if with_kernel else dst


def copy_tma_pipelined(
    src,
    dst,
    num_sms,
    block=(64, 256),
    stages=4,
    ahead=None,
    per_sm=1,
    num_warps=1,
    with_kernel=False,
):
    in_desc, out_desc = descriptors(src, dst, list(block))
    tiles_n = triton.cdiv(src.shape[1], block[1])
    num_tiles = triton.cdiv(src.shape[0], block[0]) * tiles_n
    grid = (min(num_sms * per_sm, num_tiles),)
    k = copy_tma_pipelined_kernel[grid](
        in_desc,
        out_desc,
        num_tiles,
        tiles_n,
        stages,
        stages - 1 if ahead is None else ahead,
        num_warps=num_warps,
    )
    return (dst, k) if with_kernel else dst


def copy_ws(
    src,
    dst,
    num_sms,
    block=(64, 256),
    stages=4,
    per_sm=1,
    num_warps=4,
    with_kernel=False,
):
    in_desc, out_desc = descriptors(src, dst, list(block))
    tiles_n = triton.cdiv(src.shape[1], block[1])
    num_tiles = triton.cdiv(src.shape[0], block[0]) * tiles_n
    grid = (min(num_sms * per_sm, num_tiles),)
    k = copy_ws_kernel[grid](
        in_desc, out_desc, num_tiles, tiles_n, stages, num_warps=num_warps
    )
    return (dst, k) if with_kernel else dst


# snippet: self-check
def self_check() -> None:
    """Each copy, bit for bit, on a matrix no tile shape divides; one timing."""
    if not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") == "1":
        print("Gluon kernels run on a GPU only (compute capability 9.0, Hopper): "
              "nothing to check here. On a CPU, run exercises.py: the rings' models.")
        return
    num_sms = torch.cuda.get_device_properties(0).multi_processor_count
    torch.manual_seed(0)
    src = torch.randn(4160, 8200, device="cuda", dtype=torch.float16)
    copies = {
        "registers": lambda s, d: copy_blocked(s.view(-1), d.view(-1)),
        "TMA, one tile": lambda s, d: copy_tma_tile(s, d, block=(128, 256)),
        "TMA ring": lambda s, d: copy_tma_pipelined(s, d, num_sms, (32, 256), 8, 6),
        "warp-specialized": lambda s, d: copy_ws(s, d, num_sms, (64, 256), 6),
    }
    for name, copy in copies.items():
        dst = torch.full_like(src, float("nan"))  # a tile never written stays NaN
        copy(src, dst)
        torch.testing.assert_close(dst, src, rtol=0, atol=0)
        print(f"{name}: 4160 x 8200 copied bit for bit")
    dst = torch.empty_like(src)
    ms = triton.testing.do_bench(lambda: copies["TMA ring"](src, dst))
    print(f"TMA ring: {ms:.3f} ms, {2 * src.numel() * 2 / ms / 1e6:.0f} GB/s")


# end snippet


if __name__ == "__main__":
    self_check()
