"""Grouped GEMM: the answers to exercises.py, and the classic mistakes its checks catch.

    TRITON_INTERPRET=1 python exercises.py --solutions   # these answers pass
"""

import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.append(str(Path(__file__).resolve().parent.parent))  # practice.py, in the repo
from grouped_gemm import A_PTR, B_PTR, C_PTR, K_, LDA, LDB, LDC, M_, N_, ROW  # noqa: E402

from practice import Mistake  # noqa: E402


# snippet: tile-walk
@triton.jit
def tile_walk_kernel(sizes_ptr, n_groups, group_ptr, pid_m_ptr, pid_n_ptr, owner_ptr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    tile = tl.program_id(0)
    n_programs = tl.num_programs(0)
    first = 0  # the number of group g's first tile
    for g in range(n_groups):
        M = tl.load(sizes_ptr + 2 * g)
        N = tl.load(sizes_ptr + 2 * g + 1)
        tiles_n = tl.cdiv(N, BLOCK_N)
        end = first + tl.cdiv(M, BLOCK_M) * tiles_n
        while tile < end:  # this program's tiles in group g, if any
            local = tile - first
            tl.store(group_ptr + tile, g)
            tl.store(pid_m_ptr + tile, local // tiles_n)
            tl.store(pid_n_ptr + tile, local % tiles_n)
            tl.store(owner_ptr + tile, tl.program_id(0))
            tile += n_programs
        first = end  # every group moves the numbering on, this program's or not


# end snippet


# snippet: moe-table
def moe_table(x, w, out, counts):
    E, K, N = w.shape
    table = torch.zeros((E, ROW), dtype=torch.int64, device=x.device)
    es = x.element_size()
    counts = counts.to(torch.int64)
    starts = torch.cumsum(counts, 0) - counts  # where each expert's rows begin
    table[:, A_PTR] = x.data_ptr() + starts * (x.stride(0) * es)
    experts = torch.arange(E, device=x.device)
    table[:, B_PTR] = w.data_ptr() + experts * (w.stride(0) * es)
    table[:, C_PTR] = out.data_ptr() + starts * (out.stride(0) * es)
    table[:, M_] = counts
    table[:, N_], table[:, K_] = N, K
    table[:, LDA], table[:, LDB] = x.stride(0), w.stride(1)
    table[:, LDC] = out.stride(0)
    return table


# end snippet


# Each mistake is an edit of this file's text; the check must fail it and say `says`.
MISTAKES = {
    "tile-walk": [
        Mistake("first moved on only by the program's own groups",
                find="            tile += n_programs\n        first = end",
                replace="            tile += n_programs\n            first = end",
                says="never computed"),
        Mistake("every tile taken by every program", find="tile += n_programs",
                replace="tile += 1", says="owner"),
        Mistake("the tile's row and column from the wrong extent",
                find="local // tiles_n)", replace="local % tiles_n)", says="pid_m"),
    ],
    "moe-table": [
        Mistake("where each expert begins, off by one expert",
                find="starts = torch.cumsum(counts, 0) - counts",
                replace="starts = torch.cumsum(counts, 0)", says="wrote past the end"),
        Mistake("the element size forgotten (addresses are bytes)",
                find="starts * (x.stride(0) * es)", replace="starts * x.stride(0)",
                says="wrong at"),
        Mistake("a wrong stride between the experts' weights",
                find="experts * (w.stride(0) * es)",
                replace="experts * (w.stride(1) * es)",
                says="wrong at"),
    ],
}
