"""Persistent TMA matmul: the answers to exercises.py, and the mistakes it catches.

    TRITON_INTERPRET=1 python exercises.py --solutions   # these answers pass
"""

import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.append(str(Path(__file__).resolve().parent.parent))  # practice.py, in the repo
from persistent_tma_matmul import tile_coords  # noqa: E402

from practice import Mistake  # noqa: E402


# snippet: padded-rows
def padded(x):
    rows, n = x.shape
    width = triton.cdiv(n, 8) * 8  # 8 fp16 values are 16 bytes
    storage = torch.zeros((rows, width), dtype=x.dtype, device=x.device)
    view = storage[:, :n]  # the real width; its rows stay `width` apart
    view.copy_(x)
    return view


# end snippet


# snippet: persistent-loop
@triton.jit
def persistent_matmul_kernel(a_desc, b_desc, c_desc, M, N, K,
                             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                             BLOCK_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr):
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n
    k_tiles = tl.cdiv(K, BLOCK_K)
    # Step by the grid's size, not a constant: any number of programs works.
    for tile_id in tl.range(tl.program_id(0), num_tiles, tl.num_programs(0)):
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)  # a fresh sum per tile
        pid_m, pid_n = tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_SIZE_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        for ki in range(k_tiles):
            a = a_desc.load([off_m, ki * BLOCK_K])
            b = b_desc.load([ki * BLOCK_K, off_n])
            acc = tl.dot(a, b, acc)
        c_desc.store([off_m, off_n], acc.to(tl.float16))


# end snippet


# Each mistake is an edit of this file's text; the check must fail it and say `says`.
MISTAKES = {
    "padded-rows": [
        Mistake("rows padded by one value, not to 16 bytes",
                find="width = triton.cdiv(n, 8) * 8", replace="width = n + 1",
                says="not a multiple of 16"),
        Mistake("the padded storage handed over, not a view of the real width",
                find="    return view\n", replace="    return storage\n",
                says="not x's shape"),
        Mistake("the values never copied in", find="    view.copy_(x)\n", replace="",
                says="not x's"),
    ],
    "persistent-loop": [
        Mistake("a stride of 4, the SM count, not the grid's size",
                find="num_tiles, tl.num_programs(0))", replace="num_tiles, 4)",
                says="never written"),
        Mistake("one accumulator for all of a program's tiles",
                find="    for tile_id in tl.range(tl.program_id(0), num_tiles, "
                     "tl.num_programs(0)):\n        acc = tl.zeros((BLOCK_M, BLOCK_N), "
                     "dtype=tl.float32)  # a fresh sum per tile\n",
                replace="    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)\n"
                        "    for tile_id in tl.range(tl.program_id(0), num_tiles, "
                        "tl.num_programs(0)):\n",
                says="wrong at"),
        Mistake("the last tile left out", find="tl.range(tl.program_id(0), num_tiles,",
                replace="tl.range(tl.program_id(0), num_tiles - 1,",
                says="never written"),
        Mistake("B's box at [column, k]", find="b_desc.load([ki * BLOCK_K, off_n])",
                replace="b_desc.load([off_n, ki * BLOCK_K])", says="wrong at"),
    ],
}
