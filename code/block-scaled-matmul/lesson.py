"""Block-scaled matmul, as the course records it: the checks of the page.

The quantizer, the kernel and its launcher are in block_scaled_matmul.py,
which runs alone. This file checks the MX arithmetic against a float64
dequantization, tl.dot_scaled against the float64 product (on Blackwell, or
under an interpreter that has it), compiles the kernel for sm_100 and sm_90
without a GPU and reads the PTX, and times it against bf16 cuBLAS on
Blackwell, through the course's kit (lessonkit.py), which keeps the record.

This lesson's GPU part needs a Blackwell GPU; the course's GPU is an H200,
where it declines by design.

Run it:
    TRITON_INTERPRET=1 python lesson.py   # any machine: the above
    python lesson.py                      # Blackwell: checks, TFLOP/s
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import torch
import triton

# lessonkit.py sits beside this file in a download, one folder up in the repository.
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]
from block_scaled_matmul import (  # noqa: E402
    BLOCK_K,
    BLOCK_M,
    BLOCK_N,
    E4M3_MAX,
    MX_BLOCK,
    NUM_STAGES,
    NUM_WARPS,
    dequantize_mxfp8,
    mx_matmul,
    mx_matmul_kernel,
    quantize_mxfp8,
    varied_blocks,
)

from lessonkit import Lesson, bench_interleaved, scaled_rtol, tflops  # noqa: E402


def check_quantization(lesson: Lesson) -> None:
    """The MX arithmetic in float64, and what block scales buy."""
    x = varied_blocks(256, 1024, seed=0)
    x64 = x.double()
    q, s = quantize_mxfp8(x)
    d = dequantize_mxfp8(q, s)
    X = (s.double() - 127).repeat_interleave(MX_BLOCK, dim=1)
    # snippet: roundtrip-bound
    # Rounding to nearest e4m3 (3 mantissa bits) is off by at most half a
    # step: 2^-4 of the value for normal e4m3 numbers, and half the
    # subnormal step, 2^-10, times the block's scale 2^X, below e4m3's
    # smallest normal (2^-6). No element overflows: amax / 2^X <= 448.
    err = (d - x64).abs()
    bound = torch.maximum(2.0**-4 * x64.abs(), torch.exp2(X - 10))
    within = bool((err <= bound).all())
    scale_ok = bool(((q.float().abs() <= E4M3_MAX) & q.float().isfinite()).all())
    # end snippet
    lesson.check(
        "mx-roundtrip-bound",
        within and scale_ok,
        "every element within max(2⁻⁴ |x|, 2⁽ˣ⁻¹⁰⁾) of x, all finite, "
        "|q| <= 448; 256 x 1024 values",
    )
    # snippet: block-vs-tensor
    # The same values with one scale for the whole tensor (the fp8 lesson's
    # per-tensor scaling): blocks 2^16 below the largest fall into e4m3's
    # subnormals or to zero. Count the elements that lose more than e4m3's
    # half step, 2^-4 relative.
    per_tensor = x64.abs().max() / E4M3_MAX
    t = (x64 / per_tensor).to(torch.float8_e4m3fn).double() * per_tensor
    rel_mx = (err / x64.abs() > 2.0**-4).double().mean().item()
    rel_tensor = ((t - x64).abs() / x64.abs() > 2.0**-4).double().mean().item()
    # end snippet
    lesson.check(
        "block-scales-beat-a-tensor-scale",
        rel_mx <= 1e-3 and rel_tensor >= 0.1,
        f"elements off by more than 2⁻⁴: {rel_mx:.2e} with MX block scales, "
        f"{rel_tensor:.2%} with one scale per tensor",
    )
    zeros = (t == 0).double().mean().item()
    lesson.table(
        "quantization",
        ["scaling", "scales stored", "elements off by > 2⁻⁴", "flushed to 0"],
        [
            ["MXFP8, one E8M0 per 32", f"{s.numel()} bytes", rel_mx,
             (d == 0).double().mean().item()],
            ["e4m3, one fp32 per tensor", "4 bytes", rel_tensor, zeros],
        ],
        "256 x 1024 normal values whose magnitude varies by up to 2⁸ either "
        "way from one 32-block to the next",
    )  # fmt: skip


def check_dot_scaled(lesson: Lesson, device: str) -> None:
    """tl.dot_scaled against the float64 product of the dequantized operands."""
    from triton.runtime import interpreter

    if lesson.interpret and not hasattr(
        interpreter.InterpreterBuilder, "create_dot_scaled"
    ):
        lesson.not_on_interpreter(
            "tl.dot_scaled",
            f"this Triton's interpreter ({triton.__version__}) has no "
            "dot_scaled (Triton 3.9's has); the quantization checks still run",
        )
        return
    if device == "cuda":
        # Under compute-sanitizer: one ragged shape, small enough for every tool.
        shapes = lesson.size(gpu=[(1000, 1016, 1024), (8192, 8192, 8192)],
                             smoke=[(200, 136, 256)])
        configs = [None]
    else:
        # Small tiles first, then the GPU's own 128-wide tiles on a shape
        # that leaves partial tiles along M and N.
        shapes = [(96, 80, 256), (200, 136, 256)]
        configs = [(64, 64, 128, 4, 1), None]
    for i, (M, N, K) in enumerate(shapes):
        a_q, a_s = quantize_mxfp8(varied_blocks(M, K, seed=10 + i, device=device))
        bt_q, b_s = quantize_mxfp8(varied_blocks(N, K, seed=20 + i, device=device))
        # The exact product of the values the operands stand for, in float64
        # (on the CPU under compute-sanitizer: no library kernel under the tool).
        a64, b64 = dequantize_mxfp8(a_q, a_s), dequantize_mxfp8(bt_q, b_s)
        if lesson.sanitize:
            want = (a64.cpu() @ b64.cpu().T).to(device)
        else:
            want = a64 @ b64.T
        for config in configs:
            c = torch.full((M, N), float("nan"), device=device)  # poison
            mx_matmul(a_q, a_s, bt_q, b_s, config=config, out=c)
            # snippet: tolerance
            # Products of two e4m3 values (4 significant bits each) and two
            # powers of two are exact in fp32; what rounds is the sum of K
            # of them. The interpreter sums in fp32: the kit's
            # length-scaled bound. Blackwell's block-scaled MMA accumulates
            # with a width this lesson has not measured: it gets the fp8
            # lesson's bound for Hopper's fast fp8 accumulation,
            # ceil(K/32) * 2^-13 relative to the largest |C|.
            if device == "cuda":
                rtol = max(2.0**-10, -(-K // 32) * 2.0**-13)
                why = f"rtol = ceil(K/32) * 2⁻¹³ = {rtol:.3g} at K={K}"
            else:
                rtol, why = scaled_rtol(1e-6, 2.0**-24, K)
            atol = rtol * float(want.abs().max())
            # end snippet
            tiles = "x".join(str(v) for v in (config or (BLOCK_M, BLOCK_N))[:2])
            lesson.close(
                f"dot-scaled-{M}x{N}x{K}-tiles-{tiles}", c, want, rtol, atol, why
            )


# -- what the compiler makes of the kernel, compiled without a GPU ----------


def compile_facts() -> list[list]:
    """Compile the kernel for sm_100 and sm_90 (no GPU needed); count the MMAs."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    kernel = mx_matmul_kernel
    signature = {
        "a_ptr": "*fp8e4nv", "a_scale_ptr": "*u8", "bt_ptr": "*fp8e4nv",
        "b_scale_ptr": "*u8", "c_ptr": "*fp32", "M": "i32", "N": "i32", "K": "i32",
        "BLOCK_M": "constexpr", "BLOCK_N": "constexpr", "BLOCK_K": "constexpr",
    }  # fmt: skip
    # Pointers 16-byte aligned and sizes multiples of 16, as a real launch
    # at 8192^3 is specialized.
    aligned = [k for k, v in signature.items() if v != "constexpr"]
    attrs = {(kernel.arg_names.index(k),): [["tt.divisibility", 16]] for k in aligned}
    constexprs = {"BLOCK_M": BLOCK_M, "BLOCK_N": BLOCK_N, "BLOCK_K": BLOCK_K}
    rows = []
    for arch, cap in (("sm_100 (Blackwell)", 100), ("sm_90 (Hopper)", 90)):
        compiled = triton.compile(
            ASTSource(kernel, signature, constexprs, attrs),
            target=GPUTarget("cuda", cap, 32),
            options={"num_warps": NUM_WARPS, "num_stages": NUM_STAGES},
        )
        ptx = compiled.asm["ptx"]
        scaled = re.findall(r"tcgen05\.mma\S*block_scale\S*", ptx)
        rows.append(
            [
                arch,
                sorted(set(scaled))[0] if scaled else "-",
                len(scaled),
                len(re.findall(r"wgmma\.mma_async", ptx)),
                compiled.metadata.shared,
            ]
        )
    return rows


def record_compile_facts(lesson: Lesson) -> None:
    # The interpreter replaces Triton's language with NumPy, so the compile
    # runs in a child process without TRITON_INTERPRET (and without the
    # kit's result files, which belong to this process).
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("TRITON_INTERPRET", "VT_RESULTS", "VT_FIGURES")
    }
    script = globals().get("__file__")  # a notebook has no file to start again
    if script is None:
        lesson.skip("compiles-to-block-scaled-mma-on-sm100",
                    "the compile runs the lesson file in a child process; no file here")
        return
    done = subprocess.run(
        [sys.executable, str(Path(script).resolve()), "--compile-facts"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("[")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:]
        lesson.skip("compiles-for-sm100", f"could not compile here: {tail}")
        return
    rows = json.loads(lines[-1])
    blackwell, hopper = rows
    lesson.check(
        "compiles-to-block-scaled-mma-on-sm100",
        blackwell[2] > 0 and blackwell[3] == 0,
        f"sm_100: {blackwell[2]} x {blackwell[1]}; sm_90: {hopper[3]} wgmma, "
        f"{hopper[2]} block-scaled MMA",
    )
    lesson.table(
        "compiled",
        ["target", "block-scaled MMA instruction", "count", "wgmma", "shared bytes"],
        rows,
        f"mx_matmul_kernel compiled without a GPU, {BLOCK_M}x{BLOCK_N}x{BLOCK_K} "
        f"tiles, {NUM_WARPS} warps, {NUM_STAGES} stages (Triton {triton.__version__})",
    )


def benchmark(lesson: Lesson, device: str) -> None:
    size = lesson.size(gpu=8192, smoke=256)
    # snippet: benchmark
    # 8192^3: 2 * 8192^3 FLOP per call. The baseline is torch.matmul in
    # bfloat16 (cuBLAS): what MXFP8 buys over the usual 16-bit format.
    a_q, a_s = quantize_mxfp8(varied_blocks(size, size, seed=30, device=device))
    bt_q, b_s = quantize_mxfp8(varied_blocks(size, size, seed=31, device=device))
    a16 = torch.randn(size, size, device=device, dtype=torch.bfloat16)
    b16 = torch.randn(size, size, device=device, dtype=torch.bfloat16)
    contenders = {
        "mxfp8": lambda: mx_matmul(a_q, a_s, bt_q, b_s),
        "bf16": lambda: torch.matmul(a16, b16),
    }
    flop = 2 * size**3
    # end snippet
    ms = bench_interleaved(contenders)
    lesson.benchmark(
        "mxfp8-vs-bf16-cublas-8192",
        "MXFP8 tl.dot_scaled vs bf16 torch.matmul, 8192³",
        ms,
        "mxfp8",
        "bf16",
        unit="TFLOP/s",
        work=flop,
        baseline_name="torch.matmul, bfloat16 (cuBLAS)",
        note="informational: no Blackwell run has set a target yet",
    )
    print(f"  mxfp8: {tflops(flop, ms.median('mxfp8')):.0f} TFLOP/s")


def main() -> int:
    lesson = Lesson("block-scaled-matmul")
    device = lesson.device()  # declines (exit 3) below compute capability 10.0
    with lesson.step("quantization"):
        check_quantization(lesson)
    with lesson.step("compiled-code"):
        if lesson.interpret:  # compiled for sm_100 in a child process, with no GPU
            record_compile_facts(lesson)
    with lesson.step("correctness"):
        check_dot_scaled(lesson, device)
    if lesson.step("benchmark", needs_gpu="timings need a GPU"):
        benchmark(lesson, device)
    return lesson.finish()


if __name__ == "__main__":
    if "--compile-facts" in sys.argv:  # the child process of record_compile_facts
        print(json.dumps(compile_facts()))
        sys.exit(0)
    sys.exit(main())
