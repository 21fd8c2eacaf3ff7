"""Persistent TMA matmul: exercises. Fill in each "Your code here", then check:

    TRITON_INTERPRET=1 python exercises.py   # any CPU (on a GPU: python exercises.py)

Each exercise prints one line: passed, or what is wrong and a hint. With --only NAME
it checks one; --solutions checks the answers in solutions.py. Under the
interpreter the kernels run with small tiles (32 x 32 x 16) on small matrices;
the interpreter runs tensor descriptors too, and checks their rules.
"""

import sys
from pathlib import Path

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

sys.path.append(str(Path(__file__).resolve().parent.parent))  # practice.py, in the repo
# tile_coords: the grouped order, for your kernel to call
from persistent_tma_matmul import matmul_persistent_tma, tile_coords  # noqa: E402, F401

import practice  # noqa: E402

BLOCKS = (32, 32, 16)  # small tiles: the interpreter is slow, the edges as ragged


def product(a, b):
    """The float64 product of the fp16 inputs, and the lesson's tolerance."""
    want = a.double() @ b.double()
    rtol = max(1e-3, 4 * 2.0**-23 * a.shape[1] ** 0.5)
    return want, rtol, rtol * float(want.abs().max())


# snippet: padded-rows
def padded(x):
    """x (rows, n) fp16, stored so that a tensor descriptor accepts it.

    TMA needs every row to start on a 16-byte boundary: for fp16, a row
    stride that is a multiple of 8 values. Return a tensor with x's shape and
    values whose rows are stored that far apart (padding after each row), so
    that the persistent kernel multiplies a B of any width N, unchanged.
    """
    return x  # Your code here: rows of n fp16 values are 2n bytes apart.


# end snippet


# snippet: check-padded-rows
@practice.exercise("padded-rows", hint="allocate (rows, cdiv(n, 8) * 8) values, "
                   "copy x into its first n columns and return that view, [:, :n]")
def check_padded_rows(m):
    for M, N, K in ((90, 201, 88), (37, 75, 40)):  # N: no multiple of 8
        x = torch.randn(K, N, dtype=torch.float16, device=practice.DEVICE)
        b = m.padded(x)
        case = f"B {K} x {N}"
        if tuple(b.shape) != (K, N):
            raise practice.Wrong(f"{case}: padded(x) is {list(b.shape)}, not x's "
                                 "shape: hand the kernel a view of the real width")
        if b.stride(0) * b.element_size() % 16 or b.stride(1) != 1:
            raise practice.Wrong(f"{case}: rows {b.stride(0) * b.element_size()} bytes "
                                 "apart, not a multiple of 16: TMA refuses it")
        if not torch.equal(b, x):
            raise practice.Wrong(f"{case}: padded(x)'s values are not x's")
        a = practice.guarded(torch.randn(M, K, dtype=torch.float16))
        # C's rows need padding too. A TMA store writes whole 16-byte chunks:
        # on a GPU it also writes the rest of each row's last chunk, C's own
        # padding up to `width` (the interpreter writes only the N columns).
        # The check forgives those values and no others: 8 more of POISON
        # follow each row's chunk.
        width = triton.cdiv(N, 8) * 8
        c = practice.output(M, N, dtype=torch.float16, gap=width - N + 8)
        matmul_persistent_tma(a, b, num_sms=4, out=c, blocks=BLOCKS)
        c.as_strided((M, width), c.stride())[:, N:] = practice.OUT_POISON  # forgiven
        want, rtol, atol = product(a, x)
        practice.expect("c", c, want, rtol, atol, case=f"{M}x{N}x{K}, rows of "
                        f"{width + 8}")


# end snippet


# snippet: persistent-loop
@triton.jit
def persistent_matmul_kernel(a_desc, b_desc, c_desc, M, N, K,
                             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                             BLOCK_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr):
    """C = A @ B (fp16 in, fp32 sums, fp16 out) with a persistent grid of any size.

    The grid may have fewer programs than there are tiles, and fewer than the
    GPU has SMs (other work holds the rest). Program p of G takes tiles p,
    p + G, p + 2G, ...: for each, tile_coords gives its place in the grouped
    order; a K loop of descriptor loads (A's BLOCK_M x BLOCK_K box at
    [row, k], B's BLOCK_K x BLOCK_N box at [k, column]) sums the products in
    fp32; one descriptor store writes the tile in fp16.
    """
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n  # noqa: F841 - yours to use
    k_tiles = tl.cdiv(K, BLOCK_K)  # noqa: F841 - yours to use
    # Your code here.
    pass


# end snippet


# snippet: check-persistent-loop
@practice.exercise("persistent-loop", hint="for tile_id in tl.range(tl.program_id(0), "
                   "num_tiles, tl.num_programs(0)), and a fresh fp32 accumulator "
                   "for each tile")
def check_persistent_loop(m):
    bm, bn, bk = BLOCKS
    cases = (((90, 72, 88), 4), ((37, 136, 200), 3), ((64, 40, 24), 1))
    for (M, N, K), programs in cases:  # fewer programs than tiles
        a = practice.guarded(torch.randn(M, K, dtype=torch.float16))
        b = practice.guarded(torch.randn(K, N, dtype=torch.float16))
        c = practice.output(M, N, dtype=torch.float16)
        descs = (TensorDescriptor.from_tensor(a, [bm, bk]),
                 TensorDescriptor.from_tensor(b, [bk, bn]),
                 TensorDescriptor.from_tensor(c, [bm, bn]))
        m.persistent_matmul_kernel[(programs,)](*descs, M, N, K, BLOCK_M=bm,
                                                BLOCK_N=bn, BLOCK_K=bk, GROUP_SIZE_M=2)
        tiles = triton.cdiv(M, bm) * triton.cdiv(N, bn)
        want, rtol, atol = product(a, b)
        practice.expect("c", c, want, rtol, atol,
                        case=f"{M}x{N}x{K}, {tiles} tiles, {programs} programs")


# end snippet


if __name__ == "__main__":
    sys.exit(practice.main())
