"""Issue 50: why persistent-tma-matmul's `padded-rows` check failed on an H100, and that the fix holds.

    python3 experiments/padded_rows_probe.py                     # from the repository root, on Hopper
    TRITON_INTERPRET=1 python3 experiments/padded_rows_probe.py  # any CPU (the interpreter's view)

The diagnosis: a TMA store writes a row in whole 16-byte chunks. C of N = 201 fp16 columns ends
400 bytes + 2 into its last chunk, so the store also writes that chunk's other 7 values (columns
201-207): the row's padding, where the old check kept POISON (90 rows x 7 = the 630 values that
changed). The interpreter clips a store at N exactly, which is why it passed there. The fix: the
check's C has 8 more values of POISON after each row's chunk and forgives the chunk's tail only.

1. A descriptor copy (host TensorDescriptor, and tl.make_tensor_descriptor in the kernel) of blocks
   hanging over N into out[:, :N] of a wider buffer: which columns past N change, and to what (a
   source whose padding holds 5 says whether loads too read whole chunks).
2. The lesson's matmul_persistent_tma into C in the check's new layout.
3. The exercise check on solutions.py passes; each of its MISTAKES fails, saying what it declares.
Exit 0 when nothing is written past a row's last 16-byte chunk, the solution passes and every
mistake fails as declared; 1 otherwise.
"""

import importlib.util
import os
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

ROOT = Path(__file__).resolve().parent.parent
LESSON = ROOT / "code" / "persistent-tma-matmul"
sys.path[:0] = [str(LESSON), str(LESSON.parent)]
import exercises  # noqa: E402  (registers the checks in practice.CHECKS)
import solutions  # noqa: E402
from persistent_tma_matmul import matmul_persistent_tma  # noqa: E402

import practice  # noqa: E402

DEVICE = practice.DEVICE
ROWS, BLOCK_N = 32, 64


@triton.jit
def copy_host(src_desc, dst_desc, N, BLOCK_N: tl.constexpr):
    for n in range(0, tl.cdiv(N, BLOCK_N)):
        dst_desc.store([0, n * BLOCK_N], src_desc.load([0, n * BLOCK_N]))


@triton.jit
def copy_device(src, dst, N, src_stride, dst_stride, ROWS: tl.constexpr, BLOCK_N: tl.constexpr):
    s = tl.make_tensor_descriptor(src, [ROWS, N], [src_stride, 1], [ROWS, BLOCK_N])
    d = tl.make_tensor_descriptor(dst, [ROWS, N], [dst_stride, 1], [ROWS, BLOCK_N])
    for n in range(0, tl.cdiv(N, BLOCK_N)):
        d.store([0, n * BLOCK_N], s.load([0, n * BLOCK_N]))


def past_n(out, n, chunk):
    """(changed in the chunk's tail, changed past the chunk, values in the tail) of `out` after n."""
    tail, rest = out[:, n:chunk], out[:, chunk:]
    changed = tail != 7
    return int(changed.sum()), int((rest != 7).sum()), sorted({float(v) for v in tail[changed]})


def copy_probe(how, dtype, n):
    chunk = triton.cdiv(n * dtype.itemsize, 16) * 16 // dtype.itemsize  # next 16-byte boundary
    src = torch.full((ROWS, 256), 5, dtype=dtype, device=DEVICE)
    src[:, :n] = 1
    out = torch.full((ROWS, 256), 7, dtype=dtype, device=DEVICE)
    if how == "host":
        descs = [TensorDescriptor.from_tensor(t[:, :n], [ROWS, BLOCK_N]) for t in (src, out)]
        copy_host[(1,)](*descs, n, BLOCK_N=BLOCK_N)
    else:
        copy_device[(1,)](src, out, n, 256, 256, ROWS=ROWS, BLOCK_N=BLOCK_N)
    tail, past, values = past_n(out, n, chunk)
    ok = bool((out[:, :n] == 1).all())
    span = f"tail {n}..{chunk - 1}" if chunk > n else "tail (none: N ends a chunk)"
    print(f"{how:6} {str(dtype)[6:]:7} N={n}: {tail:3} of {ROWS * (chunk - n):3} in the 16-byte "
          f"{span} changed, to {values}; {past} past it; [:, :N] right: {ok}")
    return past == 0 and ok


def matmul_probe(m, n, k):
    width = triton.cdiv(n, 8) * 8
    a = torch.randn(m, k, dtype=torch.float16, device=DEVICE)
    b = solutions.padded(torch.randn(k, n, dtype=torch.float16, device=DEVICE))
    c = torch.full((m, width + 8), 7, dtype=torch.float16, device=DEVICE)
    matmul_persistent_tma(a, b, num_sms=4, out=c[:, :n], blocks=exercises.BLOCKS)
    tail, past, values = past_n(c, n, width)
    print(f"matmul_persistent_tma {m}x{n}x{k}, C in rows of {width + 8}: {tail} of "
          f"{m * (width - n)} in the tails changed, to {values[:4]}; {past} past them")
    return past == 0


def exercise_proof():
    """The exercise proof's own module (tools/verified_triton/record/exercise_proof.py: stdlib only, run as the
    lesson's Python runs it), whose `mutant` makes a mistake of solutions.py as `verify` proves it."""
    spec = importlib.util.spec_from_file_location(
        "exercise_proof", ROOT / "tools" / "verified_triton" / "record" / "exercise_proof.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check_probe():
    ex, proof, path = practice.CHECKS["padded-rows"], exercise_proof(), Path(solutions.__file__)
    status, said = practice.attempt(ex, solutions)
    ok = status == "passed"
    print(f"check padded-rows on solutions.py: {status} {said[:120]}")
    for mistake in solutions.MISTAKES["padded-rows"]:
        status, said = practice.attempt(ex, proof.mutant(practice, path, mistake))
        caught = status == "failed" and mistake.says in said
        ok = ok and caught
        print(f"  mistake '{mistake.name}': {status}, says {mistake.says!r}: {caught}")
    return ok


def main():
    interp = os.environ.get("TRITON_INTERPRET") == "1"
    where = "interpreter" if interp else torch.cuda.get_device_name()
    print(f"{where}, torch {torch.__version__}, triton {triton.__version__}")
    if DEVICE == "cuda":  # a descriptor made in the kernel needs global scratch memory
        triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8,
                                                                     device="cuda"))
    torch.manual_seed(0)
    ok = [copy_probe(how, dtype, n) for how in ("host", "device")
          for dtype, n in ((torch.float16, 201), (torch.float16, 200), (torch.float32, 201))]
    ok += [matmul_probe(90, 201, 88), matmul_probe(37, 75, 40), check_probe()]
    print("fix holds" if all(ok) else "FAILED: see above")
    return 0 if all(ok) else 1


if __name__ == "__main__":
    sys.exit(main())
