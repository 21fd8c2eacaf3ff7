"""Run one small launch of each Gluon kernel (and a planted out-of-bounds control), for compute-sanitizer.

An experiment, not a lesson: the first look at what memcheck, synccheck, initcheck and racecheck
report on the course's warp-specialized and TMA kernels, before the sanitize mode records it.

    compute-sanitizer --tool racecheck --racecheck-report all --strip-paths no \
        python3 experiments/gluon_sanitize.py attention|matmul|copy|oob|all

Each part checks its own result (float64 reference or bit for bit) and prints one line; shapes are
small so every tool finishes in seconds. `oob` is the control: a kernel whose mask lets it write 64
elements past the end of a 1,000-element tensor (memcheck must see it with the caching allocator off).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CODE = ROOT / "code"
sys.path[:0] = [str(ROOT / "experiments"), str(CODE), str(CODE / "gluon-basics"), str(CODE / "gluon-matmul"),
                str(CODE / "gluon-attention")]

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402


@triton.jit
def oob_store_kernel(out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, 1.0, mask=offs < n + 64)  # the planted bug: 64 elements past the end


def part_oob():
    out = torch.zeros(1000, device="cuda")
    oob_store_kernel[(triton.cdiv(1064, 256),)](out, 1000, BLOCK=256)
    torch.cuda.synchronize()
    print("oob: ran (memcheck should report the writes past element 999)")


def part_attention():
    import gluon_attention as ak

    import attention_persistent as ap
    sdpa = torch.nn.functional.scaled_dot_product_attention
    for D in (64, 128):
        for causal in (False, True):
            q, k, v = (torch.randn(1, 2, 256, D, device="cuda", dtype=torch.float16) for _ in range(3))
            want = sdpa(q.double(), k.double(), v.double(), is_causal=causal)
            for name, fn in (("lesson", ak.attention_ws), ("persistent", ap.attention_persistent)):
                got = fn(q, k, v, causal)
                err = float((got.double() - want).abs().max() / want.abs().max())
                print(f"attention {name} D{D} causal={causal}: rel err {err:.2e}", flush=True)


def part_matmul():
    import gluon_matmul as mk
    num_sms = torch.cuda.get_device_properties(0).multi_processor_count
    a = torch.randn(512, 512, device="cuda", dtype=torch.float16)
    b = torch.randn(512, 512, device="cuda", dtype=torch.float16)
    c = mk.matmul_ws(a, b, num_sms)
    want = a.double() @ b.double()
    print(f"matmul 512^3: rel err {float((c.double() - want).abs().max() / want.abs().max()):.2e}", flush=True)


def part_copy():
    import gluon_basics as ck
    num_sms = torch.cuda.get_device_properties(0).multi_processor_count
    src = torch.randn(1024, 2048, device="cuda", dtype=torch.float16)
    for name, fn in (("ws", ck.copy_ws), ("pipelined", ck.copy_tma_pipelined)):
        dst = torch.zeros_like(src)
        fn(src, dst, num_sms)
        torch.cuda.synchronize()
        print(f"copy {name}: equal={bool(torch.equal(src, dst))}", flush=True)


PARTS = {"oob": part_oob, "attention": part_attention, "matmul": part_matmul, "copy": part_copy}

if __name__ == "__main__":
    for part in (PARTS if sys.argv[1:] == ["all"] else sys.argv[1:]):
        PARTS[part]()
