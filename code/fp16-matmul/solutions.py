"""FP16 matmul: the answers to exercises.py, and the classic mistakes its checks catch.

    TRITON_INTERPRET=1 python exercises.py --solutions   # these answers pass
"""

import sys
from pathlib import Path

import triton
import triton.language as tl

sys.path.append(str(Path(__file__).resolve().parent.parent))  # practice.py, in the repo
from practice import Mistake  # noqa: E402


# snippet: column-groups
@triton.jit
def column_group_order_kernel(pid_m_ptr, pid_n_ptr, num_pid_m, num_pid_n,
                              GROUP_SIZE_N: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_in_group = GROUP_SIZE_N * num_pid_m  # a group: its columns, every row
    group_id = pid // num_pid_in_group
    first_pid_n = group_id * GROUP_SIZE_N
    # The last group may have fewer than GROUP_SIZE_N columns of tiles.
    group_size_n = min(num_pid_n - first_pid_n, GROUP_SIZE_N)
    local = pid % num_pid_in_group
    pid_n = first_pid_n + local % group_size_n
    pid_m = local // group_size_n
    tl.store(pid_m_ptr + pid, pid_m)
    tl.store(pid_n_ptr + pid, pid_n)


# end snippet


# snippet: k-loop
@triton.jit
def tile_matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                       stride_am, stride_ak, stride_bk, stride_bn,
                       stride_cm, stride_cn,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                       BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):  # the last step may be partial
        k_remaining = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_remaining, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_remaining, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn
    mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, acc.to(tl.float16), mask=mask)


# end snippet


# Each mistake is an edit of this file's text; the check must fail it and say `says`.
MISTAKES = {
    "column-groups": [
        Mistake("the last group taken as full",
                find="group_size_n = min(num_pid_n - first_pid_n, GROUP_SIZE_N)",
                replace="group_size_n = GROUP_SIZE_N", says="outside"),
        Mistake("a group counted along the wrong axis",
                find="num_pid_in_group = GROUP_SIZE_N * num_pid_m",
                replace="num_pid_in_group = GROUP_SIZE_N * num_pid_n",
                says="outside"),
        Mistake("a group walked down its columns, not along its rows",
                find="pid_n = first_pid_n + local % group_size_n\n"
                     "    pid_m = local // group_size_n",
                replace="pid_n = first_pid_n + local // num_pid_m\n"
                        "    pid_m = local % num_pid_m",
                says="expected"),
    ],
    "k-loop": [
        Mistake("a K loop that misses the last partial tile",
                find="range(0, tl.cdiv(K, BLOCK_K))", replace="range(0, K // BLOCK_K)",
                says="wrong at"),
        Mistake("an FP16 accumulator",
                find="acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
                replace="acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float16)",
                says="wrong at"),
        Mistake("B assumed contiguous (a wrong stride)",
                find="offs_bn[None, :] * stride_bn\n    acc",
                replace="offs_bn[None, :]\n    acc", says="wrong at"),
    ],
}
