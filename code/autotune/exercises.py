"""Autotuning: exercises. Fill in each "Your code here", then check your answers:

    TRITON_INTERPRET=1 python exercises.py   # any CPU (on a GPU: python exercises.py)

Each exercise prints one line: passed, or what is wrong and a hint. With --only NAME
it checks one; --solutions checks the answers in solutions.py.
"""

import sys
from pathlib import Path

import torch
import triton

sys.path.append(str(Path(__file__).resolve().parent.parent))  # practice.py, in the repo
import practice  # noqa: E402
from autotune import CONFIGS, config, describe, matmul_kernel  # noqa: E402


# snippet: grid
def matmul_autotuned(tuned, a, b, out):
    """out = a @ b through `tuned`, an autotuned matmul_kernel.

    The tile is the autotuner's choice, made when the kernel is called, so the
    grid cannot be a number fixed in advance: pass a function of the chosen
    config's meta-parameters (meta["BLOCK_M"], ...) that returns one program
    per BLOCK_M x BLOCK_N tile of out.
    """
    M, K = a.shape
    N = b.shape[1]
    grid = (1,)  # Your code here: a function of meta
    tuned[grid](a, b, out, M, N, K, a.stride(0), a.stride(1), b.stride(0),
                b.stride(1), out.stride(0), out.stride(1))


# end snippet


# snippet: check-grid
@practice.exercise("grid", hint="grid = lambda meta: (triton.cdiv(M, meta['BLOCK_M']) "
                   "* triton.cdiv(N, meta['BLOCK_N']),): the autotuner calls it with "
                   "the config it picked")
def check_grid(m):
    M, N, K = 100, 72, 40  # a multiple of none of the tiles
    a, b = practice.guarded(torch.randn(M, K).half()), practice.guarded(
        torch.randn(K, N).half())
    want = a.double() @ b.double()
    # One config per autotuner: nothing to time, so it runs on a CPU too.
    for tile in ((32, 16, 16), (16, 64, 32), (64, 32, 16)):
        tuned = triton.autotune(configs=[config(*tile, warps=4, stages=3, group=2)],
                                key=["M", "N", "K"])(matmul_kernel)
        out = practice.output(M, N, dtype=torch.float16)
        m.matmul_autotuned(tuned, a, b, out)
        practice.expect("out", out, want, 2.0**-10, 1e-3,
                        case=f"{M}x{N}x{K}, the autotuner's tile {tile}")


# end snippet


# snippet: prune
def fits_shared_memory(configs, named_args, budget=99 * 1024, **kwargs):
    """An early_config_prune: keep the configs whose pipeline buffers fit `budget`
    bytes of shared memory; the autotuner then times only those.

    A config's pipeline holds num_stages K steps of one BLOCK_M x BLOCK_K tile of
    A and one BLOCK_K x BLOCK_N tile of B, in FP16 (2 bytes). If none fits, keep
    the config that needs least: the autotuner needs one to run.
    """
    return configs  # Your code here


# end snippet


def kib(cfg):
    """What a config's pipeline holds, in KiB: stages of an A and a B tile, FP16."""
    kw = cfg.kwargs
    return cfg.num_stages * (kw["BLOCK_M"] + kw["BLOCK_N"]) * kw["BLOCK_K"] * 2 / 1024


def judge_kept(got, want, budget):
    """Raise practice.Wrong naming the configs kept or dropped wrongly."""
    said = f"budget {budget / 1024:g} KiB"
    names = {describe(c) for c in got}
    if not got:
        raise practice.Wrong(f"{said}: kept nothing; the autotuner needs one config, "
                             f"the one that needs least ({describe(want[0])})")
    over = [c for c in got if describe(c) not in {describe(w) for w in want}]
    if over:
        listed = ", ".join(f"{describe(c)} ({kib(c):g} KiB)" for c in over)
        raise practice.Wrong(f"{said}: kept {len(over)} config(s) over the budget, "
                             f"{listed}")
    dropped = [c for c in want if describe(c) not in names]
    if dropped:
        listed = ", ".join(f"{describe(c)} ({kib(c):g} KiB)" for c in dropped)
        raise practice.Wrong(f"{said}: dropped {len(dropped)} config(s) that fit, "
                             f"{listed}")


# snippet: check-prune
@practice.exercise("prune", hint="bytes = cfg.num_stages * (BLOCK_M + BLOCK_N) * "
                   "BLOCK_K * 2 from cfg.kwargs; keep those <= budget, or [the config "
                   "with the fewest bytes] when none fits")
def check_prune(m):
    # The lesson's seven configs need 144, 144, 128, 80, 96, 96 and 40 KiB.
    for budget, kept in ((99 * 1024, [3, 4, 5, 6]), (128 * 1024, [2, 3, 4, 5, 6]),
                         (96 * 1024 - 1, [3, 6]), (228 * 1024, [0, 1, 2, 3, 4, 5, 6]),
                         (16 * 1024, [6])):
        got = m.fits_shared_memory(list(CONFIGS), {}, budget=budget)
        judge_kept(list(got), [CONFIGS[i] for i in kept], budget)


# end snippet


if __name__ == "__main__":
    sys.exit(practice.main())
