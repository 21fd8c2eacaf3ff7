"""Autotuning: the answers to exercises.py, and the classic mistakes its checks catch.

    TRITON_INTERPRET=1 python exercises.py --solutions   # these answers pass
"""

import sys
from pathlib import Path

import triton

sys.path.append(str(Path(__file__).resolve().parent.parent))  # practice.py, in the repo

from practice import Mistake  # noqa: E402


# snippet: grid
def matmul_autotuned(tuned, a, b, out):
    M, K = a.shape
    N = b.shape[1]

    def grid(meta):  # called with the config the autotuner picked
        return (triton.cdiv(M, meta["BLOCK_M"]) *
                triton.cdiv(N, meta["BLOCK_N"]),)

    tuned[grid](a, b, out, M, N, K, a.stride(0), a.stride(1), b.stride(0),
                b.stride(1), out.stride(0), out.stride(1))


# end snippet


# snippet: prune
def pipeline_bytes(cfg) -> int:
    kw = cfg.kwargs
    return cfg.num_stages * (kw["BLOCK_M"] + kw["BLOCK_N"]) * kw["BLOCK_K"] * 2


def fits_shared_memory(configs, named_args, budget=99 * 1024, **kwargs):
    kept = [cfg for cfg in configs if pipeline_bytes(cfg) <= budget]
    return kept or [min(configs, key=pipeline_bytes)]  # never prune to nothing


# end snippet


# Each mistake is an edit of this file's text; the check must fail it and say `says`.
MISTAKES = {
    "grid": [
        Mistake("the grid from a fixed tile, not the autotuner's",
                find='triton.cdiv(M, meta["BLOCK_M"])', replace="triton.cdiv(M, 32)",
                says="never written"),
        Mistake("a grid that misses the last block",
                find='triton.cdiv(N, meta["BLOCK_N"]),)',
                replace='(N // meta["BLOCK_N"]),)', says="never written"),
    ],
    "prune": [
        Mistake("the pipeline's stages forgotten", find="cfg.num_stages * (",
                replace="(", says="over the budget"),
        Mistake("only A's tile counted",
                find='(kw["BLOCK_M"] + kw["BLOCK_N"]) * kw["BLOCK_K"]',
                replace='kw["BLOCK_M"] * kw["BLOCK_K"]', says="over the budget"),
        Mistake("pruned to nothing",
                find="return kept or [min(configs, key=pipeline_bytes)]",
                replace="return kept", says="kept nothing"),
    ],
}
