"""Gluon matmul: exercises. Fill in each "Your code here", then check your answers:

    TRITON_INTERPRET=1 python exercises.py   # any CPU: the scheduler's and the ring's
    python exercises.py                      # a Hopper GPU: the Gluon one too

The scheduler's exercise is its integer arithmetic; the ring's runs on
matmul_model.py, the CPU model of the kernel, in many random schedules (on
gluon-basics' model of an mbarrier); the ring's depth needs a GPU (Gluon has no
interpreter) and says so elsewhere. Each prints one line: passed, or what is
wrong and a hint. --only NAME checks one; --solutions checks solutions.py.
"""

import sys
from pathlib import Path

import torch

# practice.py, and gluon-basics' ring_model.py (lesson.toml's `uses`): beside
# this file in a download, one folder up and in gluon-basics/ in the repository.
REPO_CODE = Path(__file__).resolve().parent.parent
sys.path += [str(REPO_CODE), str(REPO_CODE / "gluon-basics")]
from gluon_matmul import BLOCK, CONSUMER_WARPS, matmul_ws  # noqa: E402
from matmul_model import ring_feeds_every_product  # noqa: E402
from ring_model import Deadlock  # noqa: E402

import practice  # noqa: E402

SEEDS = 30  # random schedules per configuration


# snippet: grouped-order
def tile_id_of(pid_m, pid_n, num_pid_m, num_pid_n, group_m):
    """At which step of the kernel's grouped order tile (pid_m, pid_n) comes:
    the inverse of tile_coords, for a num_pid_m x num_pid_n grid of tiles.

    The grid is cut into bands of group_m tile rows (the last band may be
    shorter). The order walks the bands top to bottom; inside a band, column
    by column, and down the band's rows inside a column: tiles computed at
    about the same time then share their rows of A and columns of B in L2.
    """
    return pid_m * num_pid_n + pid_n  # Your code here: row-major is not it


# end snippet


# snippet: check-grouped-order
@practice.exercise("grouped-order", hint="the band is pid_m // group_m; the bands "
                   "above hold group_m * num_pid_n tiles each; inside the band, "
                   "pid_n columns of min(num_pid_m - first row, group_m) tiles come "
                   "first, then the row's place in the band")
def check_grouped_order(m):
    for num_pid_m, num_pid_n, group_m in ((7, 3, 4), (32, 8, 8), (18, 8, 8)):
        order = [(r, c) for band in range(0, num_pid_m, group_m)
                 for c in range(num_pid_n)
                 for r in range(band, min(band + group_m, num_pid_m))]
        case = f"{num_pid_m} x {num_pid_n} tiles, bands of {group_m}"
        for step, (r, c) in enumerate(order):
            got = m.tile_id_of(r, c, num_pid_m, num_pid_n, group_m)
            if got != step:
                raise practice.Wrong(f"{case}: tile ({r}, {c}) comes at step {step} "
                                     f"of the grouped order, not {got}")


# end snippet


# snippet: release
def mainloop(ring, it, k_tiles):
    """The consumer's K loop of one tile in the ring model: _mainloop of
    gluon_matmul.py, step by step. `it` counts the steps of the tiles before.

    Each step waits for its slot's `ready` phase and issues its product, which
    the tensor cores read later (ring.issue). Complete it: a slot goes back to
    the producer (ring.empty[slot].arrive()) only once the product that reads
    it has finished (yield ring.mma.wait(n): until at most n products are in
    flight), and every slot the tile used goes back, the last one too; one
    product may stay in flight while the next one is issued.
    """
    stages = len(ring.slots)
    for kk in range(k_tiles):  # noqa: B007 - yours to use
        s = it % stages
        yield ring.ready[s].wait((it // stages) & 1)
        ring.issue(it, s)
        # Your code here.
        it += 1
    return it


# end snippet


# snippet: check-release
@practice.exercise("release", hint="after issuing step it: yield ring.mma.wait(1), "
                   "then (from the tile's second step on) arrive on the empty barrier "
                   "of slot (it - 1) % stages; after the loop, wait(0) and hand back "
                   "the last slot")
def check_release(m):
    for stages in (2, 3, 4):
        tiles, k_tiles = [0, 132, 264], 5  # one program's three tiles
        case = f"{stages} stages, {len(tiles)} tiles of {k_tiles} steps"
        for seed in range(SEEDS):
            try:
                ring = ring_feeds_every_product(stages, tiles, k_tiles, seed,
                                                m.mainloop)
            except Deadlock as stuck:
                raise practice.Wrong(f"{case}: deadlock: no role can go on ({stuck} "
                                     "waiting) and no copy or product is in flight"
                                     ) from None
            wrong = [i for i, got in enumerate(ring.used) if got != ring.work[i]]
            if wrong:
                i = wrong[0]
                raise practice.Wrong(f"{case}: in schedule {seed}, the product of step "
                                     f"{i} {ring.work[i]} read the operands of step "
                                     f"{ring.used[i]}: its slot was refilled first")
        if max(ring.mma.waits, default=0) == 0:
            raise practice.Wrong(f"{case}: every product is right, but each one is "
                                 "waited for before the next is issued: one may stay "
                                 "in flight")


# end snippet


# snippet: ring-depth
def ring_config():
    """The deepest ring the 128 x 256 x 64 tiles of gluon_matmul.py can have.

    One stage holds a 128 x 64 tile of A and a 64 x 256 tile of B in fp16;
    the epilogue stages the output tile (whole, epi_split = 1, or in halves,
    epi_split = 2) in shared memory too, and a Hopper thread block may have
    227 KiB. matmul_model.smem_bytes counts it. Return matmul_ws's keyword
    arguments `stages` and `epi_split` for the most stages that fit.
    """
    return {"stages": 2, "epi_split": 1}  # Your code here


# end snippet


# snippet: check-ring-depth
@practice.exercise("ring-depth", hint="a stage is 48 KiB and a whole fp16 output tile "
                   "64 KiB: four stages fit only with the epilogue in halves",
                   needs_gpu="Gluon has no interpreter: this one runs on a Hopper GPU")
def check_ring_depth(m):
    cfg = m.ring_config()
    num_sms = torch.cuda.get_device_properties(0).multi_processor_count
    M, N, K = 777, 1032, 776  # no multiple of the tiles
    a = practice.guarded(torch.randn(M, K, dtype=torch.float16))
    b = practice.guarded(torch.randn(K, N, dtype=torch.float16))
    c = practice.output(M, N, dtype=torch.float16)
    matmul_ws(a, b, num_sms, out=c, block=BLOCK, num_warps=CONSUMER_WARPS, **cfg)
    want = a.double() @ b.double()
    rtol = max(1e-3, 4 * 2.0**-23 * K**0.5)
    practice.expect("c", c, want, rtol, rtol * float(want.abs().max()),
                    case=f"{M}x{N}x{K}, {cfg}")
    if cfg["stages"] < 4:
        raise practice.Wrong(f"{cfg}: right, and it fits, but a deeper ring fits too")
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
    return lambda: matmul_ws(a, a, num_sms, block=BLOCK, num_warps=CONSUMER_WARPS,
                             **cfg)


# end snippet


if __name__ == "__main__":
    sys.exit(practice.main())
