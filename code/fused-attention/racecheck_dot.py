"""racecheck's limit in a few lines: a pipelined fp16 `tl.dot` loop.

It is the kind of kernel this lesson's matmuls are. On an H100 or H200, Triton
compiles the loop to asynchronous copies into shared memory that feed the
tensor cores (wgmma), and

    compute-sanitizer --tool racecheck python3 racecheck_dot.py

(2025.3.1) stops with "Internal Sanitizer Error: The Sanitizer failed to
handle a hardware exception." before it has analysed the kernel, as it does on
the lesson's own matmul kernels. The recording runs this file under racecheck
beside the lesson (lesson.toml, [[sanitize.not_applicable]]); while it fails
that way, racecheck is judged not applicable to the kernels named there, and
once a fixed tool finishes it, racecheck applies again.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def dot_loop_kernel(a_ptr, b_ptr, c_ptr, K, BLOCK: tl.constexpr,
                    BLOCK_K: tl.constexpr):
    rows = tl.arange(0, BLOCK)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptr + rows[:, None] * K + (k + ks)[None, :])
        b = tl.load(b_ptr + (k + ks)[:, None] * BLOCK + rows[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rows[:, None] * BLOCK + rows[None, :], acc)


if __name__ == "__main__":
    a = torch.randn(128, 512, device="cuda", dtype=torch.float16)
    b = torch.randn(512, 128, device="cuda", dtype=torch.float16)
    c = torch.empty(128, 128, device="cuda", dtype=torch.float32)
    dot_loop_kernel[(1,)](a, b, c, 512, BLOCK=128, BLOCK_K=64,
                          num_stages=3, num_warps=4)
    torch.cuda.synchronize()
    print("max |c - a @ b| =", (c - a.float() @ b.float()).abs().max().item())
