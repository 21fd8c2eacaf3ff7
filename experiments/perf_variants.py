#!/usr/bin/env python3
"""Measure candidate improvements for three kernels below their goals, and compare timing methods.

One script, four parts (``--part attention|tf32|tma|timing|all``), each with its own time budget:

* attention: forward attention against torch SDPA at B=4, H=32, S=4096, D=128 fp16, full and causal.
  The lesson's TMA kernel as reference, Triton's tutorial-06 structure, and variants that express
  FlashAttention-3 ideas as far as Triton 3.6 allows (see attention_variants() for the list and why).
* tf32: FP32-input matmul with input_precision="tf32" and B column-major against cuBLAS TF32, 2048^3, 4096^3.
* tma: the persistent TMA FP16 matmul against cuBLAS at 4096^3 (tile, stages, GROUP_M, epilogue, flatten, ...).
* timing: four timing methods compared for stability on four kernel/baseline pairs.

Every variant is compiled first (in parallel worker processes, so that a compiler crash such as an
assertion in warp specialisation only kills a worker), checked once against torch at the benchmark
shape (max error recorded), then timed in rounds that interleave it with its baseline (do_bench
medians, L2 flushed); ratio = baseline time / variant time, with the kit's 95 % interval of the median.
The best few of each case are then re-timed with lessonkit.bench_interleaved (the kit's default
method), which is what a lesson would record.

Runs:
    OUT=/some/dir python3 experiments/perf_variants.py --part all          # GPU (H200): ~5 min
    python3 experiments/perf_variants.py --compile-only --part all         # no GPU: sm_90 compile facts
    python3 experiments/perf_variants.py --tiny --part all                 # no GPU: interpreter numerics
    python3 experiments/perf_variants.py --tiny --fake-timing --part all   # + every non-GPU code path

Outputs: $OUT/perf_variants.json (every number) and $OUT/perf_variants.log (the printed output).
"""

from __future__ import annotations

import os
import sys

# Mode switches that must precede the import of triton: the interpreter is chosen when
# triton.jit decorates a function, and --compile-only needs the real compiler.
if "--tiny" in sys.argv:
    os.environ["TRITON_INTERPRET"] = "1"
if "--compile-only" in sys.argv:
    os.environ.pop("TRITON_INTERPRET", None)

import argparse  # noqa: E402
import contextlib  # noqa: E402
import hashlib  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from types import SimpleNamespace  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
import triton.testing  # noqa: E402
from triton.tools.tensor_descriptor import TensorDescriptor  # noqa: E402

HERE = Path(__file__).resolve()
ROOT = HERE.parents[1]
CODE = ROOT / "code"
sys.path.insert(0, str(CODE))
import lessonkit  # noqa: E402  (imports only the standard library at import time)
from lessonkit import median_interval  # noqa: E402

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
LOG2E = 1.4426950408889634
SHARED_LIMIT = 232448  # bytes of shared memory one block may use on sm_90
PARTS = ("attention", "tf32", "tma", "timing")
DEFAULT_BUDGET_S = {"attention": 80.0, "tf32": 35.0, "tma": 35.0, "timing": 125.0}
GOALS = {"attention": 0.9, "tf32": 0.9, "tma": 1.0}  # baseline time / variant time the lessons aim for
MODE = "gpu"  # gpu | worker | compile | tiny; set in main()


# == Small helpers ==================================================================================


def now() -> float:
    return time.monotonic()


def sync() -> None:
    if MODE in ("gpu", "worker") and torch.cuda.is_available():
        torch.cuda.synchronize()


def first_line(exc: BaseException, limit: int = 400) -> str:
    text = f"{type(exc).__name__}: {exc}".strip().replace("\n", " | ")
    return text[:limit]


def jsonable(value):
    """Floats that JSON cannot hold (nan, inf) become strings; tuples become lists."""
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    return str(value)


class Tee:
    """Write everything printed to the console and to the log file."""

    def __init__(self, stream, log):
        self.stream, self.log = stream, log

    def write(self, text):
        self.stream.write(text)
        self.log.write(text)
        return len(text)

    def flush(self):
        self.stream.flush()
        self.log.flush()

    def isatty(self):
        return False


def load_lesson(folder: str, file: str, name: str):
    """Import a lesson file by path (its folder name has a dash); None if it fails."""
    spec = importlib.util.spec_from_file_location(name, CODE / folder / file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


_LESSONS: dict = {}


def lesson(name: str):
    """The lesson modules whose kernels are the references (loaded once, lazily)."""
    files = {
        "fa": ("fused-attention", "fused_attention.py", "fused_attention"),
        "sfm": ("softmax-fp32-matmul", "softmax_fp32_matmul.py", "softmax_fp32_matmul"),
        "ptm": ("persistent-tma-matmul", "persistent_tma_matmul.py", "persistent_tma_matmul"),
        "ln": ("layer-norm", "layer_norm.py", "layer_norm"),
        "va": ("vector-add", "vector_add.py", "vector_add"),
    }
    if name not in _LESSONS:
        _LESSONS[name] = load_lesson(*files[name])
    return _LESSONS[name]


def gpu_facts() -> dict:
    """Clocks, power and temperature from nvidia-smi, when it is there (recorded around each part)."""
    query = "clocks.sm,clocks.mem,clocks.max.sm,power.draw,temperature.gpu"
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10)
        return {"nvidia_smi": out.stdout.strip() or out.stderr.strip()[:200]}
    except (OSError, subprocess.SubprocessError) as exc:
        return {"nvidia_smi": f"unavailable: {first_line(exc, 100)}"}


# == Compile facts ===================================================================================
#
# Every first call of a variant runs inside `record_compiles()`, which wraps JITFunction.run and keeps
# the compiled kernel of each launch: on the GPU its registers, spills and shared memory come from the
# driver; in --compile-only mode the launch is replaced by an ahead-of-time compile for sm_90 (the same
# signature, specialisation and options the JIT would use) and ptxas -v reports registers and spills.

_RECORDERS: list[list] = []


def _ptx_counts(ptx: str) -> dict:
    return {
        "wgmma": len(re.findall(r"wgmma\.mma_async", ptx)),
        "mma.sync": len(re.findall(r"mma\.sync", ptx)),
        "tma": len(re.findall(r"cp\.async\.bulk\.tensor", ptx)),
        "setmaxnreg": len(re.findall(r"setmaxnreg", ptx)),
        # the largest N in `wgmma.wait_group N`: 0 means no wgmma is ever left in flight across other work
        "wgmma_wait_max": max((int(n) for n in re.findall(r"wgmma\.wait_group\.sync\.aligned (\d+)", ptx)),
                              default=None),
        "ex2_f16x2": len(re.findall(r"ex2\.approx\.f16x2", ptx)),
    }


def _facts_of(kernel, compiled) -> dict:
    meta = compiled.metadata
    facts = {"kernel": getattr(meta, "name", str(kernel)), "num_warps": getattr(meta, "num_warps", None),
             "num_stages": getattr(meta, "num_stages", None), "shared_bytes": getattr(meta, "shared", None),
             "registers": getattr(compiled, "n_regs", None), "spill_bytes": getattr(compiled, "n_spills", None)}
    maxnreg = getattr(meta, "maxnreg", None)
    if maxnreg:
        facts["maxnreg"] = maxnreg
    with contextlib.suppress(Exception):
        ptx = compiled.asm["ptx"]
        facts.update(_ptx_counts(ptx))
        facts["ptx_sha"] = hashlib.sha256(ptx.encode()).hexdigest()[:12]  # equal hashes: the same kernel
    if facts["shared_bytes"] is not None:
        facts["fits"] = facts["shared_bytes"] <= SHARED_LIMIT
    return facts


@contextlib.contextmanager
def record_compiles():
    """Collect the compile facts of every Triton launch inside the block (list of dicts)."""
    facts: list = []
    if INTERPRET:
        yield facts
        return
    from triton.runtime.jit import JITFunction

    _RECORDERS.append(facts)
    if MODE == "compile":
        try:
            yield facts
        finally:
            _RECORDERS.pop()
        return
    original = JITFunction.run

    def run(self, *args, grid, warmup, **kwargs):
        compiled = original(self, *args, grid=grid, warmup=warmup, **kwargs)
        if compiled is not None and _RECORDERS:
            _RECORDERS[-1].append(_facts_of(self, compiled))
        return compiled

    JITFunction.run = run
    try:
        yield facts
    finally:
        JITFunction.run = original
        _RECORDERS.pop()


def install_aot_compiler() -> None:
    """--compile-only: every launch becomes a compile for sm_90 (no GPU needed), facts from ptxas -v."""
    from triton import knobs
    from triton.backends.compiler import GPUTarget
    from triton.compiler.compiler import ASTSource, make_backend
    from triton.runtime.jit import JITFunction, create_function_from_signature

    target = GPUTarget("cuda", 90, 32)
    ptxas = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"

    def aot_run(self, *args, grid, warmup, **kwargs):
        kwargs["debug"] = kwargs.get("debug", self.debug) or knobs.runtime.debug
        kwargs["instrumentation_mode"] = knobs.compilation.instrumentation_mode
        backend = make_backend(target)
        binder = create_function_from_signature(self.signature, self.params, backend)
        bound_args, specialization, options = binder(*args, **kwargs)
        options, signature, constexprs, attrs = self._pack_args(backend, kwargs, bound_args, specialization, options)
        compiled = triton.compile(ASTSource(self, signature, constexprs, attrs), target=target,
                                  options=options.__dict__)
        facts = _facts_of(self, compiled)
        with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
            f.write(compiled.asm["ptx"])
        try:
            out = subprocess.run([str(ptxas), "-v", "--gpu-name", "sm_90a", f.name, "-o", os.devnull],
                                 capture_output=True, text=True, timeout=300)
        finally:
            os.unlink(f.name)
        regs = re.findall(r"Used (\d+) registers", out.stderr)
        spills = re.findall(r"(\d+) bytes spill stores", out.stderr)
        facts["registers"] = int(regs[-1]) if regs else None
        facts["spill_bytes"] = int(spills[-1]) if spills else None
        if out.returncode != 0:
            facts["ptxas_error"] = out.stderr.strip()[-300:]
        if _RECORDERS:
            _RECORDERS[-1].append(facts)
        return compiled

    JITFunction.run = aot_run


def facts_summary(facts: list) -> str:
    parts = []
    for f in facts:
        spill = f.get("spill_bytes")
        wait = f.get("wgmma_wait_max")
        parts.append(f"{f.get('registers')}r/{spill if spill is not None else '?'}sp/"
                     f"{(f.get('shared_bytes') or 0) // 1024}KiB" + (f"/w{wait}" if wait is not None else ""))
    return " ".join(parts)


def facts_flags(facts: list) -> list[str]:
    flags = []
    for f in facts:
        if f.get("spill_bytes"):
            flags.append(f"spills {f['spill_bytes']} B")
        if f.get("fits") is False:
            flags.append(f"shared {f['shared_bytes']} B > {SHARED_LIMIT}")
    return flags


# == Part 1: attention kernels =======================================================================
#
# All own kernels use 2-D descriptors over the flattened (B*H*S, D) tensors and take the sequence length
# as a constexpr (N_CTX), as Triton's tutorial 06 does: the loop bounds are then compile-time constants
# and S must be a multiple of BLOCK_M and BLOCK_N (true at the benchmark shape; the launchers assert it).
# The scale carries log2(e) (qk_scale = sm_scale * log2 e, applied once per score inside one FMA), the
# causal mask sets -1e6 (as the tutorial) and only the diagonal blocks pay for it (STAGE scheme:
# STAGE 3 = causal = off-band loop then on-band loop, STAGE 1 = full), P goes to fp16 before the P @ V dot.

LAZY_TAU = tl.constexpr(8.0)  # lazy rescaling: let the running max lag the true max by up to 2^8
EX2H_PTX = tl.constexpr(not INTERPRET)  # the interpreter runs no inline PTX: it emulates ex2.approx.f16x2


@triton.jit
def _exp2_fp16(x, EXP16: tl.constexpr):
    """p = 2**x as fp16 (the P @ V operand) and its row sum in fp32."""
    if EXP16:
        if EX2H_PTX:
            # Two exponentials per MUFU instruction: ex2.approx.f16x2 on packed halves (sm_75+).
            p = tl.inline_asm_elementwise("ex2.approx.f16x2 $0, $1;", "=r,r", [x.to(tl.float16)],
                                          dtype=tl.float16, is_pure=True, pack=2)
        else:  # the same roundings (fp16 in, fp16 out) for the interpreter's numerics check
            p = tl.math.exp2(x.to(tl.float16).to(tl.float32)).to(tl.float16)
        l_blk = tl.sum(p.to(tl.float32), 1)
    else:
        p32 = tl.math.exp2(x)
        l_blk = tl.sum(p32, 1)
        p = p32.to(tl.float16)
    return p, l_blk


@triton.jit
def _softmax_update(qk, m_i, l_i, acc, qk_scale, keep,
                    MASKED: tl.constexpr, LAZY: tl.constexpr, EXP16: tl.constexpr):
    """Fold one block of raw scores into the running (m_i, l_i, acc); returns P in fp16."""
    if MASKED:
        # A select, not the tutorial's additive tl.where(mask, 0, -1e6) tile: no extra fp32 tile alive.
        qk = tl.where(keep, qk * qk_scale, -1.0e6)
        m_blk = tl.max(qk, 1)
    else:
        # qk_scale > 0: scale the row maxima, not the tile; the shift is folded into one FMA below.
        m_blk = tl.max(qk, 1) * qk_scale
    m_new = tl.maximum(m_i, m_blk)
    if LAZY:
        # Rescale acc and l_i only when some row's max grew by more than 2^LAZY_TAU (one uniform
        # branch per block); otherwise keep the stale max: p <= 2^8 stays exact in fp16 and fp32.
        if tl.max(m_new - m_i, 0) > LAZY_TAU:
            alpha = tl.math.exp2(m_i - m_new)
            acc = acc * alpha[:, None]
            l_i = l_i * alpha
            m_i = m_new
    else:
        alpha = tl.math.exp2(m_i - m_new)
        acc = acc * alpha[:, None]
        l_i = l_i * alpha
        m_i = m_new
    if MASKED:
        x = qk - m_i[:, None]
    else:
        x = qk * qk_scale - m_i[:, None]
    p, l_blk = _exp2_fp16(x, EXP16)
    return p, acc, l_i + l_blk, m_i


@triton.jit
def _tut_inner(acc, l_i, m_i, q, desc_k, desc_v, row0, start_m, qk_scale, offs_m,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, STAGE: tl.constexpr, N_CTX: tl.constexpr,
               WS: tl.constexpr, UNROLL: tl.constexpr, LAZY: tl.constexpr, EXP16: tl.constexpr):
    # STAGE 1: keys left of the diagonal block; 2: the diagonal block (masked); 3: all keys (full).
    if STAGE == 1:
        lo, hi = 0, start_m * BLOCK_M
    elif STAGE == 2:
        lo, hi = start_m * BLOCK_M, (start_m + 1) * BLOCK_M
        lo = tl.multiple_of(lo, BLOCK_M)
    else:
        lo, hi = 0, N_CTX
    MASKED: tl.constexpr = STAGE == 2
    offs_n = tl.arange(0, BLOCK_N)
    for start_n in tl.range(lo, hi, BLOCK_N, warp_specialize=WS, loop_unroll_factor=UNROLL):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        k = desc_k.load([row0 + start_n, 0]).T
        qk = tl.dot(q, k)
        if MASKED:
            keep = offs_m[:, None] >= start_n + offs_n[None, :]
        else:
            keep = 0
        p, acc, l_i, m_i = _softmax_update(qk, m_i, l_i, acc, qk_scale, keep, MASKED, LAZY, EXP16)
        v = desc_v.load([row0 + start_n, 0])
        acc = tl.dot(p, v, acc)
    return acc, l_i, m_i


@triton.jit
def attn_tut_kernel(desc_q, desc_k, desc_v, desc_o, qk_scale,
                    N_CTX: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                    STAGE: tl.constexpr, ORDER: tl.constexpr, WS: tl.constexpr, UNROLL: tl.constexpr,
                    LAZY: tl.constexpr, EXP16: tl.constexpr):
    """Tutorial-06 structure. ORDER 0: grid (query block, head); 1: same, query blocks heaviest first
    (causal: the long rows start early, the short ones fill the tail); 2: grid (head, query block)."""
    NUM_M: tl.constexpr = N_CTX // BLOCK_M
    if ORDER == 2:
        off_bh = tl.program_id(0)
        start_m = tl.program_id(1)
    else:
        start_m = tl.program_id(0)
        off_bh = tl.program_id(1)
        if ORDER == 1:
            start_m = NUM_M - 1 - start_m
    row0 = off_bh * N_CTX
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    q = desc_q.load([row0 + start_m * BLOCK_M, 0])
    FIRST: tl.constexpr = 4 - STAGE
    if STAGE & 1:
        acc, l_i, m_i = _tut_inner(acc, l_i, m_i, q, desc_k, desc_v, row0, start_m, qk_scale, offs_m,
                                   BLOCK_M, BLOCK_N, FIRST, N_CTX, WS, UNROLL, LAZY, EXP16)
    if STAGE & 2:
        acc, l_i, m_i = _tut_inner(acc, l_i, m_i, q, desc_k, desc_v, row0, start_m, qk_scale, offs_m,
                                   BLOCK_M, BLOCK_N, 2, N_CTX, False, 1, LAZY, EXP16)
    desc_o.store([row0 + start_m * BLOCK_M, 0], (acc / l_i[:, None]).to(tl.float16))


@triton.jit
def _overlap_inner(acc, l_i, m_i, q, desc_k, desc_v, row0, lo, hi, qk_scale,
                   BLOCK_N: tl.constexpr, LAZY: tl.constexpr, EXP16: tl.constexpr):
    """FA3's intra-warpgroup overlap, written by hand: the scores of block j+1 (an async wgmma) are
    issued before the softmax of block j, so the tensor cores and the exp units can work at once.
    Needs hi > lo (at least one block)."""
    k = desc_k.load([row0 + lo, 0]).T
    qk = tl.dot(q, k)
    for start_n in tl.range(lo + BLOCK_N, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        k = desc_k.load([row0 + start_n, 0]).T
        qk_next = tl.dot(q, k)
        p, acc, l_i, m_i = _softmax_update(qk, m_i, l_i, acc, qk_scale, 0, False, LAZY, EXP16)
        v = desc_v.load([row0 + start_n - BLOCK_N, 0])
        acc = tl.dot(p, v, acc)
        qk = qk_next
    p, acc, l_i, m_i = _softmax_update(qk, m_i, l_i, acc, qk_scale, 0, False, LAZY, EXP16)
    v = desc_v.load([row0 + hi - BLOCK_N, 0])
    acc = tl.dot(p, v, acc)
    return acc, l_i, m_i


@triton.jit
def attn_overlap_kernel(desc_q, desc_k, desc_v, desc_o, qk_scale,
                        N_CTX: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                        STAGE: tl.constexpr, LAZY: tl.constexpr, EXP16: tl.constexpr):
    NUM_M: tl.constexpr = N_CTX // BLOCK_M
    start_m = tl.program_id(0)
    if STAGE == 3:
        start_m = NUM_M - 1 - start_m  # heaviest query blocks first
    row0 = tl.program_id(1) * N_CTX
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    q = desc_q.load([row0 + start_m * BLOCK_M, 0])
    if STAGE == 1:
        acc, l_i, m_i = _overlap_inner(acc, l_i, m_i, q, desc_k, desc_v, row0, 0, N_CTX, qk_scale,
                                       BLOCK_N, LAZY, EXP16)
    else:
        if start_m > 0:
            acc, l_i, m_i = _overlap_inner(acc, l_i, m_i, q, desc_k, desc_v, row0, 0, start_m * BLOCK_M,
                                           qk_scale, BLOCK_N, LAZY, EXP16)
        acc, l_i, m_i = _tut_inner(acc, l_i, m_i, q, desc_k, desc_v, row0, start_m, qk_scale, offs_m,
                                   BLOCK_M, BLOCK_N, 2, N_CTX, False, 1, LAZY, EXP16)
    desc_o.store([row0 + start_m * BLOCK_M, 0], (acc / l_i[:, None]).to(tl.float16))


@triton.jit
def _softmax_stats(qk, m_i, l_i, qk_scale, EXP16: tl.constexpr):
    """P, alpha and the new (m, l) of one unmasked block, leaving acc alone: the caller applies
    acc *= alpha only after the P @ V still in flight has finished with acc."""
    m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
    alpha = tl.math.exp2(m_i - m_new)
    p, l_blk = _exp2_fp16(qk * qk_scale - m_new[:, None], EXP16)
    return p, alpha, l_i * alpha + l_blk, m_new


@triton.jit
def _fa3_inner(acc, l_i, m_i, q, desc_k, desc_v, row0, lo, hi, qk_scale,
               BLOCK_N: tl.constexpr, EXP16: tl.constexpr):
    """FA3's intra-warpgroup schedule as far as Triton 3.6 allows. Triton waits for a score dot at
    once (its result feeds no dot), but keeps a P @ V dot in flight until acc is next read. So each
    iteration issues QK^T of block j+1, then P @ V of block j, and only then computes the softmax
    of block j+1: the exponentials run while the tensor cores do P @ V. acc *= alpha moves to the
    top of the next iteration, after that P @ V is done. Needs hi > lo."""
    k = desc_k.load([row0 + lo, 0]).T
    qk = tl.dot(q, k)
    p, alpha, l_i, m_i = _softmax_stats(qk, m_i, l_i, qk_scale, EXP16)
    for start_n in tl.range(lo + BLOCK_N, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        acc = acc * alpha[:, None]
        k = desc_k.load([row0 + start_n, 0]).T
        qk = tl.dot(q, k)
        v = desc_v.load([row0 + start_n - BLOCK_N, 0])
        acc = tl.dot(p, v, acc)
        p, alpha, l_i, m_i = _softmax_stats(qk, m_i, l_i, qk_scale, EXP16)
    acc = acc * alpha[:, None]
    v = desc_v.load([row0 + hi - BLOCK_N, 0])
    acc = tl.dot(p, v, acc)
    return acc, l_i, m_i


@triton.jit
def attn_fa3_kernel(desc_q, desc_k, desc_v, desc_o, qk_scale,
                    N_CTX: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                    STAGE: tl.constexpr, EXP16: tl.constexpr):
    NUM_M: tl.constexpr = N_CTX // BLOCK_M
    start_m = tl.program_id(0)
    if STAGE == 3:
        start_m = NUM_M - 1 - start_m  # heaviest query blocks first
    row0 = tl.program_id(1) * N_CTX
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    q = desc_q.load([row0 + start_m * BLOCK_M, 0])
    if STAGE == 1:
        acc, l_i, m_i = _fa3_inner(acc, l_i, m_i, q, desc_k, desc_v, row0, 0, N_CTX, qk_scale, BLOCK_N, EXP16)
    else:
        if start_m > 0:
            acc, l_i, m_i = _fa3_inner(acc, l_i, m_i, q, desc_k, desc_v, row0, 0, start_m * BLOCK_M, qk_scale,
                                       BLOCK_N, EXP16)
        acc, l_i, m_i = _tut_inner(acc, l_i, m_i, q, desc_k, desc_v, row0, start_m, qk_scale, offs_m,
                                   BLOCK_M, BLOCK_N, 2, N_CTX, False, 1, False, EXP16)
    desc_o.store([row0 + start_m * BLOCK_M, 0], (acc / l_i[:, None]).to(tl.float16))


@triton.jit
def _pingpong_inner(acc0, l0, m0, acc1, l1, m1, q0, q1, desc_k, desc_v, row0, start_m, qk_scale,
                    offs_m0, offs_m1, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, STAGE: tl.constexpr,
                    N_CTX: tl.constexpr, LAZY: tl.constexpr, EXP16: tl.constexpr):
    """Two query sub-tiles share each K/V block. Both score dots are issued first; the softmax of
    sub-tile 0 then overlaps the score dot of sub-tile 1, and the softmax of sub-tile 1 overlaps the
    P @ V dot of sub-tile 0: FA3's ping-pong schedule inside one instruction stream."""
    if STAGE == 1:
        lo, hi = 0, start_m * BLOCK_M
    elif STAGE == 2:
        lo, hi = start_m * BLOCK_M, (start_m + 1) * BLOCK_M
        lo = tl.multiple_of(lo, BLOCK_M)
    else:
        lo, hi = 0, N_CTX
    MASKED: tl.constexpr = STAGE == 2
    offs_n = tl.arange(0, BLOCK_N)
    for start_n in tl.range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        k = desc_k.load([row0 + start_n, 0]).T
        qk0 = tl.dot(q0, k)
        qk1 = tl.dot(q1, k)
        if MASKED:
            mask0 = offs_m0[:, None] >= start_n + offs_n[None, :]
            mask1 = offs_m1[:, None] >= start_n + offs_n[None, :]
        else:
            mask0 = 0
            mask1 = 0
        p0, acc0, l0, m0 = _softmax_update(qk0, m0, l0, acc0, qk_scale, mask0, MASKED, LAZY, EXP16)
        v = desc_v.load([row0 + start_n, 0])
        acc0 = tl.dot(p0, v, acc0)
        p1, acc1, l1, m1 = _softmax_update(qk1, m1, l1, acc1, qk_scale, mask1, MASKED, LAZY, EXP16)
        acc1 = tl.dot(p1, v, acc1)
    return acc0, l0, m0, acc1, l1, m1


@triton.jit
def attn_pingpong_kernel(desc_q, desc_k, desc_v, desc_o, qk_scale,
                         N_CTX: tl.constexpr, HEAD_DIM: tl.constexpr, SUB_M: tl.constexpr, BLOCK_N: tl.constexpr,
                         STAGE: tl.constexpr, LAZY: tl.constexpr, EXP16: tl.constexpr):
    BLOCK_M: tl.constexpr = 2 * SUB_M
    NUM_M: tl.constexpr = N_CTX // BLOCK_M
    start_m = tl.program_id(0)
    if STAGE == 3:
        start_m = NUM_M - 1 - start_m
    row0 = tl.program_id(1) * N_CTX
    offs_m0 = start_m * BLOCK_M + tl.arange(0, SUB_M)
    offs_m1 = offs_m0 + SUB_M
    m0 = tl.full([SUB_M], float("-inf"), tl.float32)
    m1 = tl.full([SUB_M], float("-inf"), tl.float32)
    l0 = tl.zeros([SUB_M], tl.float32)
    l1 = tl.zeros([SUB_M], tl.float32)
    acc0 = tl.zeros([SUB_M, HEAD_DIM], tl.float32)
    acc1 = tl.zeros([SUB_M, HEAD_DIM], tl.float32)
    q0 = desc_q.load([row0 + start_m * BLOCK_M, 0])
    q1 = desc_q.load([row0 + start_m * BLOCK_M + SUB_M, 0])
    FIRST: tl.constexpr = 4 - STAGE
    if STAGE & 1:
        acc0, l0, m0, acc1, l1, m1 = _pingpong_inner(acc0, l0, m0, acc1, l1, m1, q0, q1, desc_k, desc_v, row0,
                                                     start_m, qk_scale, offs_m0, offs_m1, BLOCK_M, BLOCK_N,
                                                     FIRST, N_CTX, LAZY, EXP16)
    if STAGE & 2:
        acc0, l0, m0, acc1, l1, m1 = _pingpong_inner(acc0, l0, m0, acc1, l1, m1, q0, q1, desc_k, desc_v, row0,
                                                     start_m, qk_scale, offs_m0, offs_m1, BLOCK_M, BLOCK_N,
                                                     2, N_CTX, LAZY, EXP16)
    desc_o.store([row0 + start_m * BLOCK_M, 0], (acc0 / l0[:, None]).to(tl.float16))
    desc_o.store([row0 + start_m * BLOCK_M + SUB_M, 0], (acc1 / l1[:, None]).to(tl.float16))


@triton.jit
def attn_persistent_kernel(desc_q, desc_k, desc_v, Out, qk_scale, n_bh,
                           NUM_PROGS: tl.constexpr, N_CTX: tl.constexpr, HEAD_DIM: tl.constexpr,
                           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, STAGE: tl.constexpr,
                           LAZY: tl.constexpr, EXP16: tl.constexpr):
    """A fixed grid of NUM_PROGS programs walks the (head, query block) tiles, heaviest block of each
    head first when causal: no launch tail, and the next tile's Q load follows the last store at once.
    The output leaves through tl.store from registers: a TMA store would need its own 32 KiB staging
    buffer beside the next tile's loads (128 KiB in all: one CTA per SM instead of two)."""
    NUM_M: tl.constexpr = N_CTX // BLOCK_M
    FIRST: tl.constexpr = 4 - STAGE
    offs_d = tl.arange(0, HEAD_DIM)
    for tile in tl.range(tl.program_id(0), n_bh * NUM_M, NUM_PROGS):
        off_bh = tile // NUM_M
        start_m = tile % NUM_M
        if STAGE == 3:
            start_m = NUM_M - 1 - start_m
        row0 = off_bh * N_CTX
        offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
        m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
        l_i = tl.zeros([BLOCK_M], tl.float32)
        acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
        q = desc_q.load([row0 + start_m * BLOCK_M, 0])
        if STAGE & 1:
            acc, l_i, m_i = _tut_inner(acc, l_i, m_i, q, desc_k, desc_v, row0, start_m, qk_scale, offs_m,
                                       BLOCK_M, BLOCK_N, FIRST, N_CTX, False, 1, LAZY, EXP16)
        if STAGE & 2:
            acc, l_i, m_i = _tut_inner(acc, l_i, m_i, q, desc_k, desc_v, row0, start_m, qk_scale, offs_m,
                                       BLOCK_M, BLOCK_N, 2, N_CTX, False, 1, LAZY, EXP16)
        rows = (row0 + offs_m).to(tl.int64)
        tl.store(Out + rows[:, None] * HEAD_DIM + offs_d[None, :], (acc / l_i[:, None]).to(tl.float16))


def _attn_descs(q, k, v, out, block_q, block_kv):
    B, H, S, D = q.shape
    for t in (q, k, v, out):
        assert t.is_contiguous(), "the flattened (B*H*S, D) descriptors need contiguous tensors"
    rows = B * H * S
    return (TensorDescriptor.from_tensor(q.view(rows, D), [block_q, D]),
            TensorDescriptor.from_tensor(k.view(rows, D), [block_kv, D]),
            TensorDescriptor.from_tensor(v.view(rows, D), [block_kv, D]),
            TensorDescriptor.from_tensor(out.view(rows, D), [block_q, D]))


def _launch_opts(warps, stages, maxnreg):
    opts = {"num_warps": warps, "num_stages": stages}
    if maxnreg and not INTERPRET:
        opts["maxnreg"] = maxnreg
    return opts


def attn_tut(ctx, causal, out=None, *, bm, bn, warps, stages, ws=False, unroll=1, lazy=False, exp16=False,
             order=0, maxnreg=None):
    q, k, v = ctx.q, ctx.k, ctx.v
    B, H, S, D = q.shape
    assert S % bm == 0 and S % bn == 0, "N_CTX is a constexpr: S must be a multiple of both blocks"
    out = torch.empty_like(q) if out is None else out
    descs = _attn_descs(q, k, v, out, bm, bn)
    grid = (B * H, S // bm) if order == 2 else (S // bm, B * H)
    attn_tut_kernel[grid](*descs, ctx.qk_scale, N_CTX=S, HEAD_DIM=D, BLOCK_M=bm, BLOCK_N=bn,
                          STAGE=3 if causal else 1, ORDER=order, WS=ws, UNROLL=unroll, LAZY=lazy, EXP16=exp16,
                          **_launch_opts(warps, stages, maxnreg))
    return out


def attn_overlap(ctx, causal, out=None, *, bm, bn, warps, stages, lazy=False, exp16=False, maxnreg=None):
    q, k, v = ctx.q, ctx.k, ctx.v
    B, H, S, D = q.shape
    assert S % bm == 0 and S % bn == 0
    out = torch.empty_like(q) if out is None else out
    descs = _attn_descs(q, k, v, out, bm, bn)
    attn_overlap_kernel[(S // bm, B * H)](*descs, ctx.qk_scale, N_CTX=S, HEAD_DIM=D, BLOCK_M=bm, BLOCK_N=bn,
                                          STAGE=3 if causal else 1, LAZY=lazy, EXP16=exp16,
                                          **_launch_opts(warps, stages, maxnreg))
    return out


def attn_fa3(ctx, causal, out=None, *, bm, bn, warps, stages, exp16=False, maxnreg=None):
    q, k, v = ctx.q, ctx.k, ctx.v
    B, H, S, D = q.shape
    assert S % bm == 0 and S % bn == 0
    out = torch.empty_like(q) if out is None else out
    descs = _attn_descs(q, k, v, out, bm, bn)
    attn_fa3_kernel[(S // bm, B * H)](*descs, ctx.qk_scale, N_CTX=S, HEAD_DIM=D, BLOCK_M=bm, BLOCK_N=bn,
                                      STAGE=3 if causal else 1, EXP16=exp16, **_launch_opts(warps, stages, maxnreg))
    return out


def attn_pingpong(ctx, causal, out=None, *, sub, bn, warps, stages, lazy=False, exp16=False, maxnreg=None):
    q, k, v = ctx.q, ctx.k, ctx.v
    B, H, S, D = q.shape
    assert S % (2 * sub) == 0 and S % bn == 0
    out = torch.empty_like(q) if out is None else out
    descs = _attn_descs(q, k, v, out, sub, bn)
    attn_pingpong_kernel[(S // (2 * sub), B * H)](*descs, ctx.qk_scale, N_CTX=S, HEAD_DIM=D, SUB_M=sub,
                                                  BLOCK_N=bn, STAGE=3 if causal else 1, LAZY=lazy, EXP16=exp16,
                                                  **_launch_opts(warps, stages, maxnreg))
    return out


def attn_persistent(ctx, causal, out=None, *, bm, bn, warps, stages, per_sm=2, lazy=False, exp16=False):
    q, k, v = ctx.q, ctx.k, ctx.v
    B, H, S, D = q.shape
    assert S % bm == 0 and S % bn == 0
    out = torch.empty_like(q) if out is None else out
    descs = _attn_descs(q, k, v, out, bm, bn)
    programs = min(per_sm * ctx.num_sms, B * H * (S // bm))
    attn_persistent_kernel[(programs,)](*descs[:3], out, ctx.qk_scale, B * H, NUM_PROGS=programs, N_CTX=S, HEAD_DIM=D,
                                        BLOCK_M=bm, BLOCK_N=bn, STAGE=3 if causal else 1, LAZY=lazy, EXP16=exp16,
                                        **_launch_opts(warps, stages, None))
    return out


def attn_reference64(q, k, v, causal):
    """The unfused definition in float64 (the tiny checks)."""
    q, k, v = (t.double() for t in (q, k, v))
    S, D = q.shape[-2], q.shape[-1]
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(D)
    if causal:
        scores = scores.masked_fill(torch.ones(S, S, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


# == Parts 2 and 3: matmul kernels ===================================================================


@triton.jit
def _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    # Grouped order (as the lessons): GROUP_M tile rows walked column by column share A and B in L2.
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = tile_id // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + (tile_id % group_size_m)
    pid_n = (tile_id % num_pid_in_group) // group_size_m
    return pid_m, pid_n


@triton.jit
def _halves(acc, BM: tl.constexpr, BN: tl.constexpr):
    # View BM x BN as BM x 2 x BN/2, move the 2 last and split it off: the left and right halves.
    return tl.split(tl.permute(tl.reshape(acc, (BM, 2, BN // 2)), (0, 2, 1)))


@triton.jit
def _store_tile(c_desc, off_m, off_n, acc, BM: tl.constexpr, BN: tl.constexpr, SPLIT: tl.constexpr,
                OUT_FP16: tl.constexpr):
    """Epilogue subtiling: SPLIT (1, 2, 4) TMA stores of BM x BN/SPLIT; the staging buffer shrinks with it."""
    if SPLIT == 1:
        if OUT_FP16:
            c_desc.store([off_m, off_n], acc.to(tl.float16))
        else:
            c_desc.store([off_m, off_n], acc)
    elif SPLIT == 2:
        a0, a1 = _halves(acc, BM, BN)
        if OUT_FP16:
            c_desc.store([off_m, off_n], a0.to(tl.float16))
            c_desc.store([off_m, off_n + BN // 2], a1.to(tl.float16))
        else:
            c_desc.store([off_m, off_n], a0)
            c_desc.store([off_m, off_n + BN // 2], a1)
    else:
        a0, a1 = _halves(acc, BM, BN)
        a00, a01 = _halves(a0, BM, BN // 2)
        a10, a11 = _halves(a1, BM, BN // 2)
        Q: tl.constexpr = BN // 4
        if OUT_FP16:
            c_desc.store([off_m, off_n], a00.to(tl.float16))
            c_desc.store([off_m, off_n + Q], a01.to(tl.float16))
            c_desc.store([off_m, off_n + 2 * Q], a10.to(tl.float16))
            c_desc.store([off_m, off_n + 3 * Q], a11.to(tl.float16))
        else:
            c_desc.store([off_m, off_n], a00)
            c_desc.store([off_m, off_n + Q], a01)
            c_desc.store([off_m, off_n + 2 * Q], a10)
            c_desc.store([off_m, off_n + 3 * Q], a11)


@triton.jit
def mm_tma_kernel(a_desc, b_desc, c_desc, M, N, K,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                  SPLIT: tl.constexpr, B_KMAJOR: tl.constexpr, TF32: tl.constexpr):
    """One tile per program, operands by TMA. B_KMAJOR: b_desc describes B^T (N x K, K contiguous)."""
    pid_m, pid_n = _tile_coords(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)
    off_m = pid_m * BLOCK_M
    off_n = pid_n * BLOCK_N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for ki in range(tl.cdiv(K, BLOCK_K)):
        a = a_desc.load([off_m, ki * BLOCK_K])
        if B_KMAJOR:
            b = b_desc.load([off_n, ki * BLOCK_K]).T
        else:
            b = b_desc.load([ki * BLOCK_K, off_n])
        if TF32:
            acc = tl.dot(a, b, acc, input_precision="tf32")
        else:
            acc = tl.dot(a, b, acc)
    _store_tile(c_desc, off_m, off_n, acc, BLOCK_M, BLOCK_N, SPLIT, not TF32)


@triton.jit
def mm_persistent_kernel(a_desc, b_desc, c_desc, M, N, K,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                         GROUP_M: tl.constexpr, NUM_PROGS: tl.constexpr, SPLIT: tl.constexpr,
                         FLATTEN: tl.constexpr, WS: tl.constexpr, B_KMAJOR: tl.constexpr, TF32: tl.constexpr):
    """The persistent TMA matmul of the lesson, with its choices as parameters."""
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    for tile_id in tl.range(tl.program_id(0), num_pid_m * num_pid_n, NUM_PROGS, flatten=FLATTEN,
                            warp_specialize=WS):
        pid_m, pid_n = _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            a = a_desc.load([off_m, ki * BLOCK_K])
            if B_KMAJOR:
                b = b_desc.load([off_n, ki * BLOCK_K]).T
            else:
                b = b_desc.load([ki * BLOCK_K, off_n])
            if TF32:
                acc = tl.dot(a, b, acc, input_precision="tf32")
            else:
                acc = tl.dot(a, b, acc)
        _store_tile(c_desc, off_m, off_n, acc, BLOCK_M, BLOCK_N, SPLIT, not TF32)


def mm_tma(a, b, out=None, *, bm, bn, bk, group, warps, stages, split, b_kmajor, tf32):
    """C = A @ B. With b_kmajor, `b` is B stored column-major (its transpose is contiguous)."""
    M, K = a.shape
    N = b.shape[1]
    out = torch.empty((M, N), device=a.device, dtype=torch.float32 if tf32 else torch.float16) if out is None else out
    b_desc = (TensorDescriptor.from_tensor(b.t(), [bn, bk]) if b_kmajor else TensorDescriptor.from_tensor(b, [bk, bn]))
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
    mm_tma_kernel[grid](TensorDescriptor.from_tensor(a, [bm, bk]), b_desc,
                        TensorDescriptor.from_tensor(out, [bm, bn // split]), M, N, K,
                        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=group, SPLIT=split, B_KMAJOR=b_kmajor, TF32=tf32,
                        num_warps=warps, num_stages=stages)
    return out


def mm_persistent(a, b, num_sms, out=None, *, bm, bn, bk, group, warps, stages, split, b_kmajor, tf32,
                  flatten=True, ws=False, grid_mult=1, ctas=1):
    M, K = a.shape
    N = b.shape[1]
    out = torch.empty((M, N), device=a.device, dtype=torch.float32 if tf32 else torch.float16) if out is None else out
    b_desc = (TensorDescriptor.from_tensor(b.t(), [bn, bk]) if b_kmajor else TensorDescriptor.from_tensor(b, [bk, bn]))
    programs = min(grid_mult * num_sms, triton.cdiv(M, bm) * triton.cdiv(N, bn))
    mm_persistent_kernel[(programs,)](TensorDescriptor.from_tensor(a, [bm, bk]), b_desc,
                                      TensorDescriptor.from_tensor(out, [bm, bn // split]), M, N, K,
                                      BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=group, NUM_PROGS=programs,
                                      SPLIT=split, FLATTEN=flatten, WS=ws, B_KMAJOR=b_kmajor, TF32=tf32,
                                      num_warps=warps, num_stages=stages, **({"num_ctas": ctas} if ctas > 1 else {}))
    return out


# == Part 4: the lessons' kernels (layer norm, vector add) =============================================
# The layer-norm backward's two kernels and vector add are the lessons' own, imported (issue 46: no copies): the
# same source as the kernels this part measured. The forward below is the one the part measured; the lesson's
# has changed since (its rows per program and warps are parameters now), so it stays as it was.


@triton.jit
def layer_norm_fwd_kernel(X, Y, W, B, Mean, Rstd, stride_x, stride_y, M, N, eps,
                          BLOCK_N: tl.constexpr, ROWS: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_N)
    row_ok = rows < M
    col_ok = cols < N
    mask = row_ok[:, None] & col_ok[None, :]
    x = tl.load(X + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=1) / N
    xc = tl.where(mask, x - mean[:, None], 0.0)
    var = tl.sum(xc * xc, axis=1) / N
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(W + cols, mask=col_ok, other=0.0).to(tl.float32)
    b = tl.load(B + cols, mask=col_ok, other=0.0).to(tl.float32)
    y = xc * rstd[:, None] * w[None, :] + b[None, :]
    tl.store(Y + rows[:, None] * stride_y + cols[None, :], y.to(Y.dtype.element_ty), mask=mask)
    tl.store(Mean + rows, mean, mask=row_ok)
    tl.store(Rstd + rows, rstd, mask=row_ok)


def ln_forward_config(N: int, element_size: int) -> tuple[int, int, int]:
    BLOCK_N = triton.next_power_of_2(N)
    ROWS = max(1, min(2, 2048 // BLOCK_N))
    num_warps = min(max(BLOCK_N * element_size // 1024, 4), 8)
    return BLOCK_N, ROWS, num_warps


def ln_fwd(x, weight, bias, eps=1e-5):
    M, N = x.shape
    y = torch.empty_like(x)
    mean = torch.empty(M, device=x.device, dtype=torch.float32)
    rstd = torch.empty(M, device=x.device, dtype=torch.float32)
    BLOCK_N, ROWS, warps = ln_forward_config(N, x.element_size())
    layer_norm_fwd_kernel[(triton.cdiv(M, ROWS),)](x, y, weight, bias, mean, rstd, x.stride(0), y.stride(0), M, N,
                                                   eps, BLOCK_N=BLOCK_N, ROWS=ROWS, num_warps=warps)
    return y, mean, rstd


def ln_bwd(dy, x, weight, mean, rstd, num_sms, programs_per_sm=4):
    M, N = x.shape
    BLOCK_N, _, warps = ln_forward_config(N, x.element_size())
    ROWS = 2 if BLOCK_N <= 1024 else 1
    rows_per_program = triton.cdiv(triton.cdiv(M, programs_per_sm * num_sms), ROWS) * ROWS
    G = triton.cdiv(M, rows_per_program)
    dx, dw, db = torch.empty_like(x), torch.empty_like(weight), torch.empty_like(weight)
    dw_part = torch.empty(G, N, device=x.device, dtype=torch.float32)
    db_part = torch.empty(G, N, device=x.device, dtype=torch.float32)
    ln = lesson("ln")  # the lesson's two backward kernels, launched as the lesson did when this was measured
    ln.layer_norm_bwd_dx_kernel[(G,)](x, dy, dx, weight, mean, rstd, dw_part, db_part, x.stride(0), M, N,
                                      rows_per_program, BLOCK_N=BLOCK_N, ROWS=ROWS, num_warps=warps)
    ln.layer_norm_bwd_dwdb_kernel[(triton.cdiv(N, 64),)](dw_part, db_part, dw, db, G, N, BLOCK_G=32, BLOCK_C=64,
                                                        num_warps=4)
    return dx, dw, db


def vadd(x, y, block_size=1024):
    out = torch.empty_like(x)
    n = x.numel()
    lesson("va").add_kernel[(triton.cdiv(n, block_size),)](x, y, out, n, BLOCK_SIZE=block_size)
    return out


# == Variants =========================================================================================


@dataclass
class Variant:
    id: str
    fn: Callable  # fn(ctx, case, out) -> output tensor; `out` (poisoned with NaN) may be ignored
    idea: str  # what it tests and the gain expected
    cases: tuple | None = None  # None: every case of the part
    risky: bool = False  # may crash the compiler (never compiled in the main process unless a worker succeeded)
    tiny_ok: bool = True  # runs under the interpreter
    reference: bool = False  # the lesson's current kernel: the row the others are compared with
    dropped: str = ""  # why --compile-only ruled it out (skipped unless --include-dropped)


def _attn_lesson(bm, bn, warps, stages):
    def fn(ctx, case, out):
        return lesson("fa").attention_tma(ctx.q, ctx.k, ctx.v, case == "causal", block_m=bm, block_n=bn,
                                          num_warps=warps, num_stages=stages)
    return fn


def _attn(launcher, **kw):
    def fn(ctx, case, out):
        return launcher(ctx, case == "causal", out, **kw)
    return fn


NO_OVERLAP = ("no overlap to measure: the sm_90 PTX (Triton 3.6) waits for every wgmma with wait_group 0 before "
              "the softmax (a dot whose result feeds no dot is never left in flight); {} is kept as the representative")


def attention_variants() -> list[Variant]:
    T = "tut"  # Triton tutorial 06's forward structure (Hopper path), without its autotuner
    r128 = "maxnreg=128 lets two 8-warp CTAs share an SM (2 x 256 threads x 128 registers = the register file; " \
           "2 x 96 KiB shared): four independent warpgroups per SM instead of two"
    return [
        Variant("lesson-tma-128x128-w8-s3", _attn_lesson(128, 128, 8, 3), reference=True,
                idea="the lesson's recorded best (4-D descriptors, runtime seq_len): the row to beat"),
        Variant("lesson-tma-128x64-w4-s2", _attn_lesson(128, 64, 4, 2),
                idea="the lesson kernel in the config that measured 0.84-0.86x (one warpgroup, 2 CTAs/SM)"),
        Variant(f"{T}-128x64-w4-s2", _attn(attn_tut, bm=128, bn=64, warps=4, stages=2),
                idea="tutorial structure: N_CTX constexpr (constant trip counts), 2-D descriptors, "
                     "no tail loop; expect = lesson 128x64 or slightly better"),
        Variant(f"{T}-128x64-w4-s3", _attn(attn_tut, bm=128, bn=64, warps=4, stages=3),
                idea="a third K/V stage; 128 KiB shared leaves one CTA per SM (expect a loss: the measured "
                     "best has two)"),
        Variant(f"{T}-128x128-w8-s2", _attn(attn_tut, bm=128, bn=128, warps=8, stages=2),
                idea="two warpgroups of 64 rows (FA3's consumer shape), 128-key blocks, one CTA per SM"),
        Variant(f"{T}-128x64-w8-s2", _attn(attn_tut, bm=128, bn=64, warps=8, stages=2),
                idea="two warpgroups of 64 rows, 64-key blocks: 138 registers, so still one CTA per SM"),
        Variant(f"{T}-128x64-w8-s2-r128", _attn(attn_tut, bm=128, bn=64, warps=8, stages=2, maxnreg=128),
                idea=r128 + "; the hardware interleaves their softmax and MMA phases (FA3's ping-pong, "
                     "left to the warp schedulers)"),
        Variant(f"{T}-lazy-128x64-w4-s2", _attn(attn_tut, bm=128, bn=64, warps=4, stages=2, lazy=True),
                idea="lazy rescaling (FA4): skip acc*alpha (128x128 FMULs, twice the exp count at BLOCK_N=64) "
                     "unless a row max grows by > 2^8; random data almost never does after block 0 (costs a "
                     "CTA-wide max per block)"),
        Variant(f"{T}-ex2h-128x64-w4-s2", _attn(attn_tut, bm=128, bn=64, warps=4, stages=2, exp16=True),
                idea="exp2 as ex2.approx.f16x2 (2 per MUFU op): halves the exp-unit time, the FA3 bottleneck "
                     "at D=128 besides MMA; error ~1e-3 of max|O|"),
        Variant(f"{T}-ex2h-lazy-128x64-w4-s2",
                _attn(attn_tut, bm=128, bn=64, warps=4, stages=2, exp16=True, lazy=True),
                idea="both softmax savings together"),
        Variant(f"{T}-ex2h-128x64-w8-s2-r128",
                _attn(attn_tut, bm=128, bn=64, warps=8, stages=2, exp16=True, maxnreg=128),
                idea="f16x2 exponentials on the four-warpgroup config"),
        Variant(f"{T}-lazy-128x64-w8-s2-r128",
                _attn(attn_tut, bm=128, bn=64, warps=8, stages=2, lazy=True, maxnreg=128),
                idea="lazy rescaling on the four-warpgroup config"),
        Variant(f"{T}-reverse-128x64-w4-s2", _attn(attn_tut, bm=128, bn=64, warps=4, stages=2, order=1),
                idea="causal: heaviest query blocks launched first (shorter tail); full: same kernel as "
                     "tut-128x64-w4-s2 (a noise control)"),
        Variant(f"{T}-headsmajor-128x64-w4-s2", _attn(attn_tut, bm=128, bn=64, warps=4, stages=2, order=2),
                idea="grid (head, query block): neighbours in launch order read different K/V (less L2 reuse); "
                     "expect a loss, measured to settle the question"),
        Variant("persistent-128x64-w4-s2", _attn(attn_persistent, bm=128, bn=64, warps=4, stages=2, per_sm=2),
                idea="persistent grid of 2 CTAs/SM over (head, query block) tiles, heaviest first when causal"),
        Variant("overlap-128x64-w8-s2", _attn(attn_overlap, bm=128, bn=64, warps=8, stages=2),
                idea="FA3 intra-warpgroup overlap by hand: QK^T of block j+1 issued before softmax of block j. "
                     "The PTX shows Triton waits for it at once (wait_group 0): measured to confirm"),
        Variant("fa3-128x64-w8-s2", _attn(attn_fa3, bm=128, bn=64, warps=8, stages=2),
                idea="FA3's schedule: QK^T(j+1), P@V(j), then softmax(j+1) with acc*alpha deferred; the PTX "
                     "again waits for P@V before the softmax: measured to confirm"),
        Variant("fa3-128x64-w8-s2-r128", _attn(attn_fa3, bm=128, bn=64, warps=8, stages=2, maxnreg=128),
                idea="the FA3 schedule at 2 CTAs/SM (" + r128.split(":")[0] + ")"),
        Variant("pingpong-2x64-w4-s2", _attn(attn_pingpong, sub=64, bn=64, warps=4, stages=2),
                idea="two 64-row Q sub-tiles per program sharing each K/V block, their dots and softmaxes "
                     "interleaved in one instruction stream (FA3's ping-pong written in one warpgroup)"),
        Variant("pingpong-2x128-w8-s2", _attn(attn_pingpong, sub=128, bn=64, warps=8, stages=2),
                idea="ping-pong with 128-row sub-tiles over two warpgroups: 256 query rows per program, half "
                     "the K/V traffic per FLOP"),
        # Ruled out by --compile-only (kept for the record; --include-dropped compiles and runs them).
        Variant(f"{T}-ws-128x64-w4-s2", _attn(attn_tut, bm=128, bn=64, warps=4, stages=2, ws=True), risky=True,
                idea="tl.range(warp_specialize=True): producer warp for TMA, consumers for MMA+softmax (FA3's "
                     "producer/consumer split)",
                dropped="does not compile for sm_90 with Triton 3.6: RuntimeError: PassManager::run failed"),
        Variant(f"{T}-ws-128x128-w8-s2", _attn(attn_tut, bm=128, bn=128, warps=8, stages=2, ws=True), risky=True,
                idea="warp specialisation with two consumer warpgroups",
                dropped="warp_specialize is ignored here on sm_90: PTX identical to tut-128x128-w8-s2"),
        Variant(f"{T}-unroll2-128x64-w4-s2", _attn(attn_tut, bm=128, bn=64, warps=4, stages=2, unroll=2),
                idea="loop_unroll_factor=2: two blocks per iteration for the scheduler to interleave",
                dropped="spills 64 B (full) / 72 B (causal) and needs 160 KiB shared (one CTA per SM)"),
        Variant(f"{T}-lazy-128x128-w8-s2", _attn(attn_tut, bm=128, bn=128, warps=8, stages=2, lazy=True),
                idea="lazy rescaling, two warpgroups, 128-key blocks",
                dropped="superseded by tut-lazy-128x64-w8-s2-r128 (same idea at 2 CTAs/SM)"),
        Variant(f"{T}-ex2h-128x128-w8-s2", _attn(attn_tut, bm=128, bn=128, warps=8, stages=2, exp16=True),
                idea="f16x2 exponentials, two warpgroups, 128-key blocks",
                dropped="superseded by tut-ex2h-128x64-w8-s2-r128 (same idea at 2 CTAs/SM)"),
        Variant("overlap-128x64-w8-s3", _attn(attn_overlap, bm=128, bn=64, warps=8, stages=3),
                idea="overlap with a third K/V stage", dropped=NO_OVERLAP.format("overlap-128x64-w8-s2")),
        Variant("overlap-128x128-w8-s2", _attn(attn_overlap, bm=128, bn=128, warps=8, stages=2),
                idea="overlap with 128-key blocks", dropped=NO_OVERLAP.format("overlap-128x64-w8-s2")),
        Variant("overlap-lazy-ex2h-128x64-w8-s2",
                _attn(attn_overlap, bm=128, bn=64, warps=8, stages=2, lazy=True, exp16=True),
                idea="overlap plus both softmax savings", dropped=NO_OVERLAP.format("overlap-128x64-w8-s2")),
        Variant("fa3-128x128-w8-s2", _attn(attn_fa3, bm=128, bn=128, warps=8, stages=2),
                idea="the FA3 schedule with 128-key blocks", dropped=NO_OVERLAP.format("fa3-128x64-w8-s2")),
        Variant("fa3-128x64-w4-s2", _attn(attn_fa3, bm=128, bn=64, warps=4, stages=2),
                idea="the FA3 schedule in one 128-row warpgroup", dropped=NO_OVERLAP.format("fa3-128x64-w8-s2")),
        Variant("fa3-ex2h-128x64-w8-s2", _attn(attn_fa3, bm=128, bn=64, warps=8, stages=2, exp16=True),
                idea="the FA3 schedule with f16x2 exponentials", dropped=NO_OVERLAP.format("fa3-128x64-w8-s2")),
        Variant("pingpong-2x64-w8-s2-r128", _attn(attn_pingpong, sub=64, bn=64, warps=8, stages=2, maxnreg=128),
                idea="ping-pong of two 64-row sub-tiles at 2 CTAs/SM",
                dropped="spills 292 B (full) / 552 B (causal) at 128 registers"),
        Variant(f"{T}-64x64-w4-s2", _attn(attn_tut, bm=64, bn=64, warps=4, stages=2),
                idea="64-row blocks in one warpgroup (138 registers)",
                dropped="80 KiB shared still allows only 2 CTAs/SM (as 128x64), with twice the K/V traffic"),
    ]


def _tf32_lesson(cfg):
    def fn(ctx, case, out):
        a, b = ctx.inputs[case]
        return lesson("sfm").matmul(a, b, cfg, False, out=out)
    return fn


def _tf32_tma(**kw):
    def fn(ctx, case, out):
        a, b = ctx.inputs[case]
        return mm_tma(a, b, out, b_kmajor=True, tf32=True, **kw)
    return fn


def _tf32_persistent(**kw):
    def fn(ctx, case, out):
        a, b = ctx.inputs[case]
        return mm_persistent(a, b, ctx.num_sms, out, b_kmajor=True, tf32=True, **kw)
    return fn


def tf32_variants() -> list[Variant]:
    return [
        Variant("lesson-ptr-128x256x32-g8-w8-s3", _tf32_lesson((128, 256, 32, 8, 8, 3)), reference=True,
                idea="the lesson's pointer kernel in its best recorded tile (B column-major)"),
        Variant("lesson-ptr-128x256x32-g8-w8-s4", _tf32_lesson((128, 256, 32, 8, 8, 4)),
                idea="one more stage (4 x 48 KiB)"),
        Variant("lesson-ptr-256x128x32-g8-w8-s3", _tf32_lesson((256, 128, 32, 8, 8, 3)),
                idea="the transposed tile: A is the wide operand"),
        Variant("lesson-ptr-128x128x64-g8-w8-s3", _tf32_lesson((128, 128, 64, 8, 8, 3)),
                idea="deeper K step, fewer barriers per FLOP, smaller accumulator"),
        Variant("lesson-ptr-128x256x64-g8-w8-s2", _tf32_lesson((128, 256, 64, 8, 8, 2)),
                idea="wide tile with deep K step, only 2 stages fit"),
        Variant("tma-128x256x32-g8-w8-s4-e4", _tf32_tma(bm=128, bn=256, bk=32, group=8, warps=8, stages=4, split=4),
                idea="TMA loads (no address math, no masks; B^T descriptor = K-major for wgmma tf32), "
                     "epilogue in 4 TMA stores"),
        Variant("tma-128x128x64-g8-w8-s3-e2", _tf32_tma(bm=128, bn=128, bk=64, group=8, warps=8, stages=3, split=2),
                idea="TMA with the 128x128x64 tile"),
        Variant("ptma-128x256x32-g8-w8-s3-e4",
                _tf32_persistent(bm=128, bn=256, bk=32, group=8, warps=8, stages=3, split=4),
                idea="persistent TMA (the fp16 lesson's recipe): epilogue of tile i overlaps loads of tile i+1, "
                     "no launch tail; expected the largest gain at 4096^3"),
        Variant("ptma-128x256x32-g8-w8-s4-e4",
                _tf32_persistent(bm=128, bn=256, bk=32, group=8, warps=8, stages=4, split=4),
                idea="persistent, 4 stages"),
        Variant("ptma-256x128x32-g8-w8-s3-e4",
                _tf32_persistent(bm=256, bn=128, bk=32, group=8, warps=8, stages=3, split=4),
                idea="persistent, 256x128 tile"),
        Variant("ptma-128x128x64-g8-w8-s3-e2",
                _tf32_persistent(bm=128, bn=128, bk=64, group=8, warps=8, stages=3, split=2),
                idea="persistent, 128x128x64 (4 tiles per SM at 2048^3 instead of 1)"),
        Variant("ptma-128x256x32-g16-w8-s4-e4",
                _tf32_persistent(bm=128, bn=256, bk=32, group=16, warps=8, stages=4, split=4),
                idea="persistent, GROUP_M 16 (taller L2 band)"),
        Variant("ptma-128x256x32-g8-w8-s3-e2",
                _tf32_persistent(bm=128, bn=256, bk=32, group=8, warps=8, stages=3, split=2),
                idea="persistent, epilogue in 2 stores (64 KiB staging)"),
        Variant("ptma-ws-128x256x32-g8-w8-s3-e4",
                _tf32_persistent(bm=128, bn=256, bk=32, group=8, warps=8, stages=3, split=4, ws=True), risky=True,
                idea="persistent with warp_specialize=True",
                dropped="warp_specialize is ignored on sm_90 here: PTX identical to ptma-128x256x32-g8-w8-s3-e4"),
    ]


def _fp16_lesson():
    def fn(ctx, case, out):
        a, b = ctx.inputs[case]
        return lesson("ptm").matmul_persistent_tma(a, b, ctx.num_sms, out=out)
    return fn


def _fp16_persistent(**kw):
    cfg = {"bm": 128, "bn": 256, "bk": 64, "group": 8, "warps": 8, "stages": 4, "split": 2, "flatten": True,
           "ws": False, "grid_mult": 1}
    cfg.update(kw)

    def fn(ctx, case, out):
        a, b = ctx.inputs[case]
        return mm_persistent(a, b, ctx.num_sms, out, b_kmajor=False, tf32=False, **cfg)
    return fn


def tma_variants() -> list[Variant]:
    P = _fp16_persistent
    return [
        Variant("lesson-128x256x64-g8-s4-e2", _fp16_lesson(), reference=True,
                idea="the lesson's persistent TMA kernel as recorded (0.99-1.00x)"),
        Variant("copy-128x256x64-g8-s4-e2", P(),
                idea="this script's copy with the lesson's choices: should equal the lesson (noise control)"),
        Variant("copy-128x256x64-g8-s3-e2", P(stages=3), idea="3 stages: less smem, faster prologue per tile"),
        Variant("copy-128x256x64-g4-s4-e2", P(group=4), idea="GROUP_M 4"),
        Variant("copy-128x256x64-g16-s4-e2", P(group=16), idea="GROUP_M 16"),
        Variant("copy-128x256x64-g8-s4-e4", P(split=4),
                idea="epilogue in 4 stores (tutorial 09's EPILOGUE_SUBTILE, one level further)"),
        Variant("copy-128x256x64-g8-s3-e1", P(stages=3, split=1), idea="one whole-tile store (64 KiB staging)"),
        Variant("copy-128x256x64-g8-s4-e2-noflat", P(flatten=False),
                idea="flatten=False: tile loop not fused with the K loop (measures what flatten buys)"),
        Variant("copy-ws-128x256x64-g8-s4-e2", P(ws=True), risky=True,
                idea="warp_specialize=True on the tile loop (tutorial 09 says Blackwell only; tried anyway)",
                dropped="warp_specialize is ignored on sm_90 here: PTX identical to copy-128x256x64-g8-s4-e2"),
        Variant("copy-256x128x64-g8-s4-e2", P(bm=256, bn=128), idea="the transposed tile"),
        Variant("copy-128x128x64-g8-w8-s5-e2", P(bn=128, stages=5), idea="smaller tile, 5 stages, 4 tiles per SM"),
        Variant("copy-128x128x64-g8-w4-s4-e1", P(bn=128, warps=4, stages=4, split=1),
                idea="one warpgroup owning a 128x128 tile (162 registers; 160 KiB shared: one CTA per SM)"),
        Variant("copy-128x256x64-g8-s4-e2-grid2x", P(grid_mult=2),
                idea="grid = 2 x SMs (second CTA per SM cannot fit by smem: queues as a second wave)"),
        Variant("copy-128x256x64-g8-s4-e2-cta2", P(ctas=2), risky=True,
                idea="num_ctas=2: CTA pairs (cuBLAS runs 2x1 clusters that share operand loads by TMA multicast)",
                dropped="does not compile for sm_90 with Triton 3.6: RuntimeError: PassManager::run failed"),
    ]


def _timing_attention(ctx, case, out):
    return lesson("fa").attention_tma(ctx.q, ctx.k, ctx.v, False, block_m=128, block_n=128, num_warps=8,
                                      num_stages=3)


def timing_variants() -> list[Variant]:
    """The Triton side of each timing benchmark (precompiled like the variants)."""
    return [
        Variant("attention-full", _timing_attention, idea="the lesson's TMA kernel 128x128 w8 s3 vs SDPA"),
        Variant("ln-bwd", lambda ctx, case, out: ln_bwd(ctx.dy, ctx.x1, ctx.w1, ctx.mean1, ctx.rstd1, ctx.num_sms),
                idea="layer-norm backward (the lesson's kernels) vs aten, 32768x1024 fp16"),
        Variant("ln-fwd", lambda ctx, case, out: ln_fwd(ctx.x2, ctx.w2, ctx.b2)[0],
                idea="layer-norm forward (copied kernel) vs F.layer_norm, 8192x4096 fp16"),
        Variant("vadd", lambda ctx, case, out: vadd(ctx.vx, ctx.vy), idea="vector add 2^28 fp32 vs x + y: control"),
    ]


VARIANTS = {"attention": attention_variants, "tf32": tf32_variants, "tma": tma_variants, "timing": timing_variants}


def selected(part: str, args) -> list[Variant]:
    """The variants of a part this run measures: --only filters; dropped ones need --include-dropped."""
    return [v for v in VARIANTS[part]()
            if (part == "timing" or re.search(args.only, v.id)) and (args.include_dropped or not v.dropped)]


def dropped(part: str) -> list[dict]:
    return [{"id": v.id, "why": v.dropped, "idea": v.idea} for v in VARIANTS[part]() if v.dropped]


# == Contexts: inputs per part and mode ===============================================================


def device_for_mode() -> str:
    return {"gpu": "cuda", "worker": "cuda", "compile": "meta", "tiny": "cpu"}[MODE]


def num_sms() -> int:
    if MODE in ("gpu", "worker"):
        return torch.cuda.get_device_properties(0).multi_processor_count
    return 132 if MODE == "compile" else 4


def make_ctx(part: str) -> SimpleNamespace:
    dev = device_for_mode()
    tiny = MODE == "tiny"
    torch.manual_seed(1234)
    ctx = SimpleNamespace(part=part, device=dev, num_sms=num_sms())
    if part == "attention" or part == "timing":
        B, H, S, D = (1, 2, 512, 128) if tiny else (4, 32, 4096, 128)
        ctx.shape = (B, H, S, D)
        ctx.q, ctx.k, ctx.v = (torch.randn(B, H, S, D, device=dev, dtype=torch.float16) for _ in range(3))
        if tiny:
            # Keys that grow along the sequence: the running row max keeps rising by more than 2^8 (in
            # log2 units), so every rescale path (the lazy one's branch included) does real work.
            ramp = 1.0 + 6.0 * torch.arange(S, device=dev, dtype=torch.float32) / S
            ctx.k = (ctx.k.float() * ramp[:, None]).half()
        ctx.sm_scale = 1.0 / math.sqrt(D)
        ctx.qk_scale = ctx.sm_scale * LOG2E
        ctx.cases = ("full", "causal")
    if part in ("tf32", "tma"):
        sizes = (320,) if tiny else ((2048, 4096) if part == "tf32" else (4096,))
        ctx.cases = sizes
        ctx.inputs = {}
        for n in sizes:
            if part == "tf32":
                a = torch.randn(n, n, device=dev, dtype=torch.float32)
                b = torch.randn(n, n, device=dev, dtype=torch.float32).t().contiguous().t()  # column-major B
            else:
                a = torch.randn(n, n, device=dev, dtype=torch.float16)
                b = torch.randn(n, n, device=dev, dtype=torch.float16)
            ctx.inputs[n] = (a, b)
    if part == "timing":
        ctx.cases = ("timing",)
        M1, N1 = (64, 1024) if tiny else (32768, 1024)
        M2, N2 = (16, 4096) if tiny else (8192, 4096)
        nv = (1 << 12) if tiny else (1 << 28)
        ctx.x1 = torch.randn(M1, N1, device=dev, dtype=torch.float16)
        ctx.dy = torch.randn(M1, N1, device=dev, dtype=torch.float16)
        ctx.w1 = (1.0 + 0.5 * torch.randn(N1, device=dev)).half()
        ctx.b1 = (0.5 * torch.randn(N1, device=dev)).half()
        ctx.x2 = torch.randn(M2, N2, device=dev, dtype=torch.float16)
        ctx.w2 = (1.0 + 0.5 * torch.randn(N2, device=dev)).half()
        ctx.b2 = (0.5 * torch.randn(N2, device=dev)).half()
        ctx.vx = torch.rand(nv, device=dev)
        ctx.vy = torch.rand(nv, device=dev)
        if MODE == "compile":
            ctx.mean1 = torch.empty(M1, device=dev)
            ctx.rstd1 = torch.empty(M1, device=dev)
        else:
            _, ctx.mean1, ctx.rstd1 = ln_fwd(ctx.x1, ctx.w1, ctx.b1)
    return ctx


def case_list(ctx, v: Variant) -> tuple:
    return v.cases if v.cases is not None else ctx.cases


def poisoned_out(ctx, case):
    if ctx.part == "attention":
        return torch.full_like(ctx.q, float("nan"))
    if ctx.part in ("tf32", "tma"):
        a, b = ctx.inputs[case]
        dtype = torch.float32 if ctx.part == "tf32" else torch.float16
        return torch.full((a.shape[0], b.shape[1]), float("nan"), device=a.device, dtype=dtype)
    return None


def baseline_fn(ctx, case) -> Callable:
    if ctx.part == "attention":
        causal = case == "causal"
        return lambda: F.scaled_dot_product_attention(ctx.q, ctx.k, ctx.v, is_causal=causal)
    a, b = ctx.inputs[case]
    return lambda: torch.matmul(a, b)  # cuBLAS; for tf32 the part sets allow_tf32 = True


def baseline_name(part: str) -> str:
    return {"attention": "torch SDPA", "tf32": "cuBLAS TF32 (torch.matmul, allow_tf32)",
            "tma": "cuBLAS (torch.matmul)"}[part]


# == Correctness =======================================================================================


def check_output(ctx, case, got, cache: dict) -> dict:
    """Max error of one output against torch, normalised by max|reference|, and a pass/fail."""
    if got is None:
        return {"ok": False, "error": "no output"}
    got = got.detach()
    nonfinite = int((~torch.isfinite(got.float())).sum())
    key = ("ref", case)
    if ctx.part == "attention":
        if key not in cache:
            if MODE == "tiny":
                cache[key] = attn_reference64(ctx.q, ctx.k, ctx.v, case == "causal")
            else:
                cache[key] = F.scaled_dot_product_attention(ctx.q, ctx.k, ctx.v, is_causal=case == "causal")
        want = cache[key]
        # Tiny: against float64 with the lesson's TOL (4e-3 of max|ref|). GPU: against SDPA's own fp16
        # output, which rounds as the kernel does: the bound doubles (as the lesson's bench-shape check).
        bound = 4e-3 if MODE == "tiny" else 8e-3
        err = float((got.double() - want.double()).abs().max() / want.double().abs().max())
        return {"ok": nonfinite == 0 and err <= bound, "max_err_rel": err, "bound": bound,
                "nonfinite": nonfinite, "against": "fp64" if MODE == "tiny" else "SDPA fp16 output"}
    a, b = ctx.inputs[case]
    if key not in cache:
        want = a.double() @ b.double()
        scale = float(want.abs().max())
        info = {}
        if MODE == "gpu":  # cuBLAS's own error at the same precision, to judge the kernel's against
            ref_fn = baseline_fn(ctx, case)
            info["cublas_err_rel"] = float((ref_fn().double() - want).abs().max()) / scale
        cache[key] = (want, scale, info)
    want, scale, info = cache[key]
    err = float((got.double() - want).abs().max()) / scale
    if ctx.part == "tf32":
        # TF32 keeps 10 mantissa bits of each input: the error is cuBLAS's order; allow 4x cuBLAS's,
        # and under the interpreter (which may compute in full fp32) a flat 2e-2.
        bound = max(4 * info.get("cublas_err_rel", 0.0), 1e-3) if MODE == "gpu" else 2e-2
    else:
        bound = 1e-3  # fp16 output: 2^-11 relative rounding, under the persistent lesson's 1e-3 table value
    return {"ok": nonfinite == 0 and err <= bound, "max_err_rel": err, "bound": bound, "nonfinite": nonfinite,
            "against": "fp64", **info}


# == Timing ============================================================================================


def bench(fn, rep_ms: float, warmup_ms: float = 2) -> float:
    """do_bench median (L2 flushed before every call)."""
    return triton.testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median")


def summarize_pair(base_ms: list, ms: list) -> dict:
    ratios = [b / k for b, k in zip(base_ms, ms, strict=True)]
    med, low, high = median_interval(ratios)
    return {"ratio": med, "ratio_low": low, "ratio_high": high, "rounds": len(ratios),
            "ms": statistics.median(ms), "base_ms": statistics.median(base_ms), "ms_rounds": ms,
            "base_ms_rounds": base_ms}


def race(entries: list, max_rounds: int, rep_ms: float, deadline: float, min_rounds: int = 3) -> dict:
    """entries: (key, base_fn, fn). Every round times each pair back to back (order alternating by
    round), so every variant meets its baseline under the same clocks, and the rounds spread every
    variant over the whole run. Stops after min_rounds once the deadline has passed. A pair that
    raises is dropped from later rounds (its error is kept); the others go on."""
    failed: dict = {}
    seen = set()
    for key, base, fn in entries:  # warm-up: every function a few times before any round
        for f in (base, fn):
            if id(f) in seen:
                continue
            seen.add(id(f))
            try:
                bench(f, rep_ms=5, warmup_ms=1)
            except Exception as exc:
                failed[key] = first_line(exc)
    times = {key: ([], []) for key, _, _ in entries}
    for r in range(max_rounds):
        if r >= min_rounds and now() > deadline:
            break
        for key, base, fn in entries:
            if key in failed:
                continue
            b_ms, k_ms = times[key]
            try:
                if r % 2 == 0:
                    b_ms.append(bench(base, rep_ms))
                    k_ms.append(bench(fn, rep_ms))
                else:
                    k_ms.append(bench(fn, rep_ms))
                    b_ms.append(bench(base, rep_ms))
            except Exception as exc:
                failed[key] = first_line(exc)
                n = min(len(b_ms), len(k_ms))
                del b_ms[n:], k_ms[n:]
    out = {}
    for key, (b_ms, k_ms) in times.items():
        out[key] = summarize_pair(b_ms, k_ms) if b_ms else {}
        if key in failed:
            out[key]["error"] = failed[key]
    return out


def confirm(base, fn) -> dict:
    """The kit's own method (lessonkit.bench_interleaved defaults: 15 rounds x 20 ms after 0.5 s warm-up)."""
    timed = lessonkit.bench_interleaved({"base": base, "kernel": fn})
    out = summarize_pair(timed["base"], timed["kernel"])
    out["method"] = timed.method
    return out


# == Parts 1-3: compile, check, race, confirm ==========================================================


def run_variant_part(part: str, budget_s: float, pre: dict, args) -> dict:
    t_start = now()
    deadline = t_start + budget_s
    print(f"\n=== part {part}: budget {budget_s:.0f} s, mode {MODE} ===", flush=True)
    result: dict = {"budget_s": budget_s, "baseline": baseline_name(part), "variants": {},
                    "dropped_after_compile_only": dropped(part), "gpu_before": gpu_facts() if MODE == "gpu" else {}}
    variants = selected(part, args)
    saved_tf32 = torch.backends.cuda.matmul.allow_tf32
    if part == "tf32":
        torch.backends.cuda.matmul.allow_tf32 = True
    try:
        ctx = make_ctx(part)
        result["cases"] = [str(c) for c in ctx.cases]
        if part == "attention" and MODE == "gpu":
            result["sdpa_backends"] = sdpa_backends(ctx, deadline)
        cache: dict = {}
        runnable = []
        # Step 1: first call (compile or load from the cache the workers filled), facts, correctness.
        for v in variants:
            rec = result["variants"][v.id] = {"idea": v.idea, "reference": v.reference, "cases": {}}
            status = pre.get(f"{part}:{v.id}")
            if status is not None:
                rec["precompile"] = {k: status[k] for k in ("state", "seconds", "error") if k in status}
                if status.get("facts"):
                    rec["facts"] = status["facts"]
                if status.get("state") == "not-started":
                    status = None  # the workers ran out of time: compile it here (unless risky)
            if MODE == "compile":
                if status is None or status.get("state") != "ok":
                    if v.risky and status is None:
                        rec["skipped"] = "risky (may crash the compiler): compile it with workers (--jobs > 0)"
                        continue
                    if status is None:
                        compile_in_process(ctx, v, rec)
                print_facts_line(v.id, rec)
                continue
            if MODE == "tiny" and not v.tiny_ok:
                rec["skipped"] = "not on the interpreter (inline PTX)"
                print(f"  {v.id}: skipped under the interpreter (inline PTX)")
                continue
            if status is not None and status.get("state") != "ok":
                rec["skipped"] = f"precompile {status.get('state')}: {status.get('error', '')}"[:500]
                print(f"  {v.id}: skipped ({rec['skipped'][:160]})")
                continue
            if v.risky and MODE == "gpu" and status is None:
                rec["skipped"] = "risky and not precompiled in a worker"
                continue
            if now() > deadline:
                rec["skipped"] = "time budget used before its first call"
                continue
            ok_cases = first_calls_and_checks(ctx, v, rec, cache)
            if ok_cases:
                runnable.append((v, ok_cases))
        if MODE == "tiny" and args.fake_timing:
            pass  # fall through: the timing code below runs with the fake do_bench
        elif MODE != "gpu":
            return result
        # Step 2: the race. Step 3: the kit's method on the best three per case.
        entries = []
        for v, ok_cases in runnable:
            for case in ok_cases:
                entries.append(((v.id, case), baseline_fn(ctx, case), bind_variant(ctx, v, case)))
        max_rounds = {"attention": 7, "tf32": 5, "tma": 11}[part]
        reserve = {"attention": 12.0, "tf32": 10.0, "tma": 6.0}[part]
        raced = race(entries, max_rounds, args.rep_ms, deadline - reserve) if entries else {}
        for (vid, case), numbers in raced.items():
            result["variants"][vid]["cases"].setdefault(str(case), {})["race"] = numbers
        confirm_best(part, ctx, runnable, result, deadline, args)
    except Exception as exc:  # a broken part must not stop the others
        result["part_error"] = first_line(exc, 2000)
        result["part_traceback"] = traceback.format_exc()[-4000:]
        print(f"part {part} stopped: {first_line(exc)}", flush=True)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved_tf32
    result["seconds"] = now() - t_start
    if MODE == "gpu":
        result["gpu_after"] = gpu_facts()
    return result


def bind_variant(ctx, v: Variant, case) -> Callable:
    return lambda: v.fn(ctx, case, None)


def compile_in_process(ctx, v: Variant, rec: dict) -> None:
    facts, t0 = [], now()
    try:
        for case in case_list(ctx, v):
            with record_compiles() as got:
                v.fn(ctx, case, None)
            facts += [{"case": str(case), **f} for f in got]
        rec["facts"] = facts
    except Exception as exc:
        rec["compile_error"] = first_line(exc, 1500)
    rec["compile_s"] = now() - t0


def print_facts_line(vid: str, rec: dict) -> None:
    facts = rec.get("facts") or []
    flags = facts_flags(facts)
    err = rec.get("compile_error") or (rec.get("precompile") or {}).get("error")
    state = (rec.get("precompile") or {}).get("state", "in-process")
    error = f"ERROR {err[:200]}" if err else ""
    print(f"  {vid:38s} {state:9s} {facts_summary(facts):40s} {'; '.join(flags)} {error}", flush=True)


def first_calls_and_checks(ctx, v: Variant, rec: dict, cache: dict) -> list:
    ok_cases = []
    for case in case_list(ctx, v):
        entry = rec["cases"].setdefault(str(case), {})
        t0 = now()
        try:
            out = poisoned_out(ctx, case)
            with record_compiles() as got:
                y = v.fn(ctx, case, out)
                sync()
            entry["first_call_s"] = now() - t0
            if got:
                entry["facts"] = got
                flags = facts_flags(got)
                if flags:
                    entry["flags"] = flags
            entry["check"] = check_output(ctx, case, y, cache)
            del y, out
        except Exception as exc:
            entry["error"] = first_line(exc, 1500)
            print(f"  {v.id} [{case}]: error {entry['error'][:200]}", flush=True)
            continue
        chk = entry["check"]
        print(f"  {v.id:38s} [{case}] {'ok ' if chk['ok'] else 'BAD'} err {chk.get('max_err_rel', float('nan')):.2e}"
              f" (<= {chk.get('bound', float('nan')):.0e}) {facts_summary(entry.get('facts', []))}"
              f" {'; '.join(entry.get('flags', []))} {entry['first_call_s']:.1f}s", flush=True)
        if chk["ok"]:
            ok_cases.append(case)
    return ok_cases


def confirm_best(part, ctx, runnable, result, deadline, args) -> None:
    """Re-time the best `--confirm` variants of each case with lessonkit.bench_interleaved."""
    for case in ctx.cases:
        ranked = []
        for v, ok_cases in runnable:
            race_numbers = result["variants"][v.id]["cases"].get(str(case), {}).get("race")
            if case in ok_cases and race_numbers and "ratio" in race_numbers:
                ranked.append((race_numbers["ratio"], v))
        ranked.sort(key=lambda item: -item[0])
        chosen = [v for _, v in ranked[: args.confirm]]
        refs = [v for v, ok in runnable if v.reference and case in ok and v not in chosen]
        for v in chosen + refs[:1]:
            if now() > deadline:
                result.setdefault("confirm_skipped", []).append(f"{v.id} [{case}]: budget")
                continue
            try:
                numbers = confirm(baseline_fn(ctx, case), bind_variant(ctx, v, case))
            except Exception as exc:
                numbers = {"error": first_line(exc)}
            result["variants"][v.id]["cases"].setdefault(str(case), {})["confirm"] = numbers


def sdpa_backends(ctx, deadline) -> dict:
    """Which SDPA backend is the default here, and how fast each is (one short race per mask)."""
    out: dict = {}
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as exc:
        return {"error": first_line(exc)}
    for causal in (False, True):
        fns = {}
        for name in ("FLASH_ATTENTION", "CUDNN_ATTENTION", "EFFICIENT_ATTENTION"):
            backend = getattr(SDPBackend, name, None)
            if backend is None:
                continue

            def fn(backend=backend, causal=causal):
                with sdpa_kernel(backend):
                    return F.scaled_dot_product_attention(ctx.q, ctx.k, ctx.v, is_causal=causal)
            try:
                fn()
                sync()
                fns[name] = fn
            except Exception as exc:
                out[f"{name}-{'causal' if causal else 'full'}"] = {"error": first_line(exc, 200)}
        default = baseline_fn(ctx, "causal" if causal else "full")
        entries = [(name, default, fn) for name, fn in fns.items()]
        if entries and now() < deadline:
            for name, numbers in race(entries, 3, 10, deadline).items():
                if "ratio" not in numbers:
                    out[f"{name}-{'causal' if causal else 'full'}"] = numbers
                    continue
                out[f"{name}-{'causal' if causal else 'full'}"] = {"default_over_backend_time": numbers["ratio"],
                                                                   "ms": numbers["ms"],
                                                                   "default_ms": numbers["base_ms"]}
    return out


# == Part 4: timing methods ============================================================================


def method_a(fns: dict) -> dict:
    """The kit before this change: warm each once (do_bench 25 ms warm-up), 5 rounds x 50 ms."""
    for fn in fns.values():
        bench(fn, rep_ms=10, warmup_ms=25)
    times = {name: [] for name in fns}
    for _ in range(5):
        for name, fn in fns.items():
            times[name].append(bench(fn, rep_ms=50, warmup_ms=5))
    return times


def method_b(fns: dict) -> dict:
    return dict(lessonkit.bench_interleaved(fns))  # 15 rounds x 20 ms after 0.5 s warm-up (the kit's default)


def method_c(fns: dict) -> dict:
    return dict(lessonkit.bench_interleaved(fns, rounds=30, rep_ms=10, warm_s=1.5))


def method_d(fns: dict) -> dict:
    """CUDA graphs: do_bench_cudagraph (median of 10 replays of a ~5 ms graph; no L2 flush) in 15 rounds."""
    times = {name: [] for name in fns}
    for _ in range(15):
        for name, fn in fns.items():
            times[name].append(triton.testing.do_bench_cudagraph(fn, rep=5, return_mode="median"))
    return times


METHODS = {
    "a-5x50ms-nowarm": (method_a, "5 rounds x 50 ms do_bench, no warm-up beyond do_bench's own (the old kit)"),
    "b-15x20ms-warm0.5s": (method_b, "15 rounds x 20 ms after 0.5 s warm-up (lessonkit.bench_interleaved default)"),
    "c-30x10ms-warm1.5s": (method_c, "30 rounds x 10 ms after 1.5 s warm-up"),
    "d-cudagraph-15": (method_d, "15 rounds of do_bench_cudagraph(rep=5 ms), median of 10 replays, no L2 flush"),
}


def timing_benches(ctx) -> dict:
    """name -> (kernel fn, baseline fn)."""
    N1 = ctx.x1.shape[1]
    _, mean_t, rstd_t = torch.ops.aten.native_layer_norm(ctx.x1, [N1], ctx.w1, ctx.b1, 1e-5)
    vs = {v.id: v for v in timing_variants()}
    return {
        "attention-full": (bind_variant(ctx, vs["attention-full"], "timing"),
                           lambda: F.scaled_dot_product_attention(ctx.q, ctx.k, ctx.v)),
        "ln-bwd": (bind_variant(ctx, vs["ln-bwd"], "timing"),
                   lambda: torch.ops.aten.native_layer_norm_backward(ctx.dy, ctx.x1, [N1], mean_t, rstd_t, ctx.w1,
                                                                     ctx.b1, [True, True, True])),
        "ln-fwd": (bind_variant(ctx, vs["ln-fwd"], "timing"),
                   lambda: F.layer_norm(ctx.x2, (ctx.x2.shape[1],), ctx.w2, ctx.b2, 1e-5)),
        "vadd": (bind_variant(ctx, vs["vadd"], "timing"), lambda: ctx.vx + ctx.vy),
    }


def timing_checks(ctx, benches: dict) -> dict:
    """Each kernel's output against its baseline's, once (they are lesson kernels: a sanity check)."""
    out = {}
    for name, (kfn, bfn) in benches.items():
        try:
            got, want = kfn(), bfn()
            if isinstance(got, tuple):
                got = got[0]
            if isinstance(want, tuple):
                want = want[0]
            err = float((got.double() - want.double()).abs().max() / want.double().abs().max())
            out[name] = {"max_err_rel_vs_baseline": err, "ok": err <= 8e-3}
        except Exception as exc:
            out[name] = {"error": first_line(exc)}
    return out


def burst(seconds: float, a, b) -> None:
    """Sustained tensor-core load between measurements, to disturb clocks as a real recording does."""
    end = now() + seconds
    while now() < end:
        for _ in range(8):
            torch.matmul(a, b)
        sync()


def run_timing_part(budget_s: float, pre: dict, args) -> dict:
    t_start = now()
    deadline = t_start + budget_s
    print(f"\n=== part timing: budget {budget_s:.0f} s, mode {MODE} ===", flush=True)
    result: dict = {"budget_s": budget_s, "methods": {k: d for k, (_, d) in METHODS.items()},
                    "gpu_before": gpu_facts() if MODE == "gpu" else {}}
    try:
        for v in timing_variants():
            status = pre.get(f"timing:{v.id}")
            if status is not None:
                result.setdefault("precompile", {})[v.id] = status
        ctx = make_ctx("timing")
        if MODE == "compile":
            for v in timing_variants():
                st = pre.get(f"timing:{v.id}")
                if st is None or st.get("state") == "not-started":
                    rec: dict = {}
                    compile_in_process(ctx, v, rec)
                    result.setdefault("compile", {})[v.id] = rec
                    print_facts_line(v.id, rec)
                else:
                    print_facts_line(v.id, {"facts": pre[f"timing:{v.id}"].get("facts"),
                                            "precompile": pre[f"timing:{v.id}"]})
            return result
        benches = timing_benches(ctx)
        for name in list(benches):
            state = pre.get(f"timing:{name}", {}).get("state", "ok")
            if state not in ("ok", "not-started"):
                result.setdefault("skipped", {})[name] = f"precompile {state}"
                del benches[name]
        result["checks"] = timing_checks(ctx, benches)
        print(f"  checks: {json.dumps(jsonable(result['checks']))}", flush=True)
        if MODE == "tiny" and not args.fake_timing:
            return result
        n = 8192 if MODE == "gpu" else 64
        burst_a = torch.randn(n, n, device=ctx.device, dtype=torch.float16 if MODE == "gpu" else torch.float32)
        burst_b = torch.randn_like(burst_a)
        names = list(METHODS)
        data = {m: {b: [] for b in benches} for m in names}
        cost = {m: 0.0 for m in names}
        repeats = args.timing_repeats
        for rep in range(repeats):
            if rep >= 2 and now() > deadline:
                result["stopped_after_repeats"] = rep
                break
            order = names[rep % len(names):] + names[: rep % len(names)]  # each method first after a burst once
            for bname, (kfn, bfn) in benches.items():
                burst(args.burst_s, burst_a, burst_b)
                for m in order:
                    t0 = now()
                    try:
                        timed = METHODS[m][0]({"kernel": kfn, "base": bfn})
                        summary = summarize_pair(timed["base"], timed["kernel"])
                        summary["repeat"], summary["position_after_burst"] = rep, order.index(m)
                    except Exception as exc:
                        summary = {"error": first_line(exc), "repeat": rep}
                    summary["wall_s"] = now() - t0
                    cost[m] += summary["wall_s"]
                    data[m][bname].append(summary)
            print(f"  timing repeat {rep + 1}/{repeats} done at {now() - t_start:.0f} s", flush=True)
        result["repeats"] = data
        result["summary"] = timing_summary(data, cost)
    except Exception as exc:
        result["part_error"] = first_line(exc, 2000)
        result["part_traceback"] = traceback.format_exc()[-4000:]
        print(f"part timing stopped: {first_line(exc)}", flush=True)
    result["seconds"] = now() - t_start
    if MODE == "gpu":
        result["gpu_after"] = gpu_facts()
    return result


def timing_summary(data: dict, cost: dict) -> dict:
    out = {}
    for m, per_bench in data.items():
        out[m] = {"wall_s_total": cost[m]}
        for bname, reps in per_bench.items():
            good = [r for r in reps if "ratio" in r]
            if not good:
                out[m][bname] = {"error": "; ".join(r.get("error", "") for r in reps)[:300]}
                continue
            medians = [r["ratio"] for r in good]
            mid = statistics.median(medians)
            widths = [r["ratio_high"] - r["ratio_low"] for r in good]
            out[m][bname] = {"ratio_per_repeat": medians, "spread": (max(medians) - min(medians)) / mid,
                             "mean_ci_width": statistics.fmean(widths), "rounds": good[0]["rounds"],
                             "wall_s_mean": statistics.fmean(r["wall_s"] for r in good)}
    return out


# == Precompile in worker processes =====================================================================


def precompile(parts: list, args) -> dict:
    """Compile every variant of the requested parts in `--jobs` worker processes (fresh interpreters that
    run the variant's first call). The workers fill Triton's on-disk cache, so the main process then loads
    each kernel in milliseconds; and a compiler crash kills only a worker: the variant it was compiling is
    marked 'crashed' and the rest of its chunk goes to a new worker."""
    items = [f"{p}:{v.id}" for p in parts for v in selected(p, args)]
    if MODE == "tiny" or args.jobs <= 0 or not items:
        return {}
    t0 = now()
    deadline = t0 + args.precompile_timeout
    print(f"\n=== precompile: {len(items)} variants in up to {args.jobs} workers ===", flush=True)
    workdir = Path(tempfile.mkdtemp(prefix="perf-variants-"))
    chunk = max(1, math.ceil(len(items) / args.jobs))
    queue = [items[i:i + chunk] for i in range(0, len(items), chunk)]
    status: dict = {}
    attempts: dict = {}
    running = []
    serial = 0
    while queue or running:
        while queue and len(running) < args.jobs and now() < deadline:
            todo = queue.pop(0)
            serial += 1
            st_path, log_path = workdir / f"w{serial}.jsonl", workdir / f"w{serial}.log"
            cmd = [sys.executable, str(HERE), "--worker", "--items", ",".join(todo), "--status", str(st_path)]
            if MODE == "compile":
                cmd.append("--compile-only")
            with open(log_path, "w") as log:
                proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=str(ROOT))
            running.append((proc, todo, st_path, log_path))
        time.sleep(0.2)
        still = []
        for proc, todo, st_path, log_path in running:
            if proc.poll() is None and now() < deadline:
                still.append((proc, todo, st_path, log_path))
                continue
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            events = read_status(st_path)
            rest = []
            for item in todo:
                ev = events.get(item)
                if ev and ev.get("state"):
                    status[item] = ev
                elif ev:  # started, never finished: this item killed the worker (or the deadline did)
                    why = "timeout" if now() >= deadline else "crashed"
                    tail = log_path.read_text(errors="replace")[-1500:] if log_path.exists() else ""
                    status[item] = {"state": why, "error": f"worker exit {proc.returncode}; log tail: {tail}",
                                    "seconds": ev.get("seconds")}
                else:
                    rest.append(item)
            if rest:
                for item in rest:
                    attempts[item] = attempts.get(item, 0) + 1
                retry = [i for i in rest if attempts[i] < 3]
                for item in rest:
                    if item not in retry:  # never started in 3 workers: their environment, not this variant
                        tail = log_path.read_text(errors="replace")[-800:] if log_path.exists() else ""
                        status[item] = {"state": "not-started", "error": f"workers failed, exit {proc.returncode}: "
                                                                         f"{tail}"}
                if retry and now() < deadline:
                    queue.insert(0, retry)
                elif retry:
                    for item in retry:
                        status[item] = {"state": "not-started", "error": "precompile deadline before it started"}
        running = still
        if now() >= deadline and not running:
            for todo in queue:
                for item in todo:
                    status.setdefault(item, {"state": "not-started",
                                             "error": "precompile deadline before it started"})
            queue = []
    counts: dict = {}
    for st in status.values():
        counts[st["state"]] = counts.get(st["state"], 0) + 1
    print(f"precompile: {counts} in {now() - t0:.1f} s", flush=True)
    for item, st in status.items():
        if st["state"] != "ok":
            print(f"  {item}: {st['state']}: {str(st.get('error', ''))[:300]}", flush=True)
    status["_seconds"] = now() - t0
    shutil.rmtree(workdir, ignore_errors=True)  # what mattered (log tails of failures) is in `status`
    return status


def read_status(path: Path) -> dict:
    events: dict = {}
    if not path.exists():
        return events
    for line in path.read_text(errors="replace").splitlines():
        with contextlib.suppress(json.JSONDecodeError):
            ev = json.loads(line)
            events.setdefault(ev["item"], {}).update(ev)
    return events


def worker_main(args) -> int:
    items = [i for i in args.items.split(",") if i]
    ctxs: dict = {}
    with open(args.status, "a") as st:
        def emit(ev):
            st.write(json.dumps(jsonable(ev)) + "\n")
            st.flush()
            os.fsync(st.fileno())

        for item in items:
            part, vid = item.split(":", 1)
            emit({"item": item, "started": True})
            t0 = now()
            if os.environ.get("PERF_VARIANTS_ABORT_ON") == item:  # tests the crash handling: abort like an assert
                os.abort()
            try:
                if part not in ctxs:
                    ctxs[part] = make_ctx(part)
            except Exception as exc:  # the worker's environment, not the variant: the main process compiles it
                emit({"item": item, "state": "not-started", "error": f"worker set-up failed: {first_line(exc)}"})
                continue
            try:
                ctx = ctxs[part]
                v = next(x for x in VARIANTS[part]() if x.id == vid)
                facts = []
                for case in case_list(ctx, v):
                    with record_compiles() as got:
                        v.fn(ctx, case, None)
                        sync()
                    facts += [{"case": str(case), **f} for f in got]
                emit({"item": item, "state": "ok", "facts": facts, "seconds": now() - t0})
            except Exception as exc:
                emit({"item": item, "state": "error", "error": first_line(exc, 1500), "seconds": now() - t0})
                if MODE == "worker" and not cuda_healthy():
                    return 3  # a sticky CUDA error: the rest of this chunk goes to a fresh worker
    return 0


def cuda_healthy() -> bool:
    try:
        torch.cuda.synchronize()
        torch.zeros(1, device="cuda").add_(1).item()
        return True
    except Exception:
        return False


# == Report ================================================================================================


def print_part_table(part: str, res: dict) -> None:
    print(f"\n--- {part}: ratio = {res.get('baseline', 'baseline')} time / variant time "
          "(race: median [95% interval] over rounds; confirm: lessonkit.bench_interleaved) ---")
    for case in res.get("cases", []):
        rows = []
        for vid, rec in res.get("variants", {}).items():
            c = rec.get("cases", {}).get(case, {})
            race_n, conf = c.get("race"), c.get("confirm")
            facts = c.get("facts") or rec.get("facts") or []
            if not race_n or "ratio" not in race_n:
                chk = c.get("check") or {}
                checked = f"check {'ok' if chk.get('ok') else 'FAILED'} err {chk.get('max_err_rel', float('nan')):.1e}"
                why = (rec.get("skipped") or c.get("error") or (race_n or {}).get("error")
                       or (checked + ("" if MODE == "gpu" else ", not timed") if chk else ""))
                rows.append((-1.0, f"  {vid:38s} {'-':>22s} {'':>22s}  {facts_summary(facts):28s} {why[:70]}"))
                continue
            conf_txt = "" if not conf or "ratio" not in conf else \
                f"{conf['ratio']:.3f} [{conf['ratio_low']:.3f},{conf['ratio_high']:.3f}]"
            mark = "*" if rec.get("reference") else " "
            err = (c.get("check") or {}).get("max_err_rel", float("nan"))
            interval = f"{race_n['ratio']:.3f} [{race_n['ratio_low']:.3f},{race_n['ratio_high']:.3f}]"
            rows.append((race_n["ratio"], f"{mark} {vid:38s} {interval:>22s} {conf_txt:>22s}  "
                         f"{facts_summary(facts):28s} ms {race_n['ms']:.4f} err {err:.1e}"))
        print(f" case {case}:   {'race':>22s} {'confirm':>22s}  regs/spill/smem")
        for _, line in sorted(rows, key=lambda r: -r[0]):
            print(line)
        confirmed = [(c["confirm"]["ratio"], vid, c["confirm"]) for vid, rec in res.get("variants", {}).items()
                     if "ratio" in (c := rec.get("cases", {}).get(case, {})).get("confirm", {})]
        if confirmed:
            _, vid, best = max(confirmed, key=lambda item: item[0])
            goal = GOALS[part]
            print(f"   best confirmed: {vid} {best['ratio']:.3f} [{best['ratio_low']:.3f}, {best['ratio_high']:.3f}]; "
                  f"goal {goal}: {lessonkit.verdict(best['ratio_low'], best['ratio_high'], goal)}")


def print_timing_table(res: dict) -> None:
    summary = res.get("summary")
    if not summary:
        return
    print("\n--- timing methods: median ratio (baseline/kernel) per repeat, spread = (max-min)/median across "
          "repeats, mean width of the 95% interval within a repeat ---")
    for m, per in summary.items():
        print(f" {m} ({per.get('wall_s_total', 0):.0f} s in all)")
        for bname, s in per.items():
            if not isinstance(s, dict):
                continue
            if "error" in s:
                print(f"   {bname:16s} error: {s['error'][:150]}")
                continue
            reps = " ".join(f"{x:.3f}" for x in s["ratio_per_repeat"])
            print(f"   {bname:16s} repeats {reps:32s} spread {s['spread']:.3f}  CI width {s['mean_ci_width']:.3f}"
                  f"  ({s['rounds']} rounds, {s['wall_s_mean']:.1f} s each)")


# == Fake timing (--fake-timing, no GPU) =====================================================================


def install_fake_timing() -> None:
    """Replace do_bench and do_bench_cudagraph by a CPU stand-in, so every timing code path (rounds,
    races, confirm, the four methods, summaries, tables, JSON) runs without a GPU. Each function is
    really called (and wall-clock timed) the first time it is seen; later calls return that time with
    a little noise, so that interpreter-speed kernels do not make the test take hours."""
    import random

    first: dict = {}

    def fake_do_bench(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, return_mode="mean"):
        if id(fn) not in first:
            t0 = time.perf_counter()
            fn()
            first[id(fn)] = (fn, (time.perf_counter() - t0) * 1e3)  # keep fn alive: ids stay unique
        return first[id(fn)][1] * random.uniform(0.97, 1.03)

    def fake_do_bench_cudagraph(fn, rep=20, grad_to_none=None, quantiles=None, return_mode="mean"):
        return fake_do_bench(fn)

    triton.testing.do_bench = fake_do_bench
    triton.testing.do_bench_cudagraph = fake_do_bench_cudagraph


# == Main ==================================================================================================


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--part", choices=[*PARTS, "all"], default="all")
    p.add_argument("--budget-s", type=float, default=None,
                   help="time budget of each part in seconds (default: " +
                        ", ".join(f"{k} {v:.0f}" for k, v in DEFAULT_BUDGET_S.items()) + ")")
    p.add_argument("--compile-only", action="store_true", help="no GPU: compile every variant for sm_90 and report")
    p.add_argument("--tiny", action="store_true", help="no GPU: tiny shapes under TRITON_INTERPRET=1 (numerics)")
    p.add_argument("--fake-timing", action="store_true", help="with --tiny: run the timing code with a CPU timer")
    p.add_argument("--only", default="", help="regular expression: only variants whose id matches")
    p.add_argument("--include-dropped", action="store_true", help="also the variants --compile-only ruled out")
    p.add_argument("--jobs", type=int, default=None, help="precompile workers (default: min(12, CPUs - 2); 0: none)")
    p.add_argument("--precompile-timeout", type=float, default=150.0)
    p.add_argument("--rep-ms", type=float, default=20.0, help="do_bench time per measurement in the races")
    p.add_argument("--confirm", type=int, default=3, help="best variants per case re-timed with the kit's method")
    p.add_argument("--timing-repeats", type=int, default=4)
    p.add_argument("--burst-s", type=float, default=1.0, help="matmul burst before each timing measurement group")
    p.add_argument("--out", default=None, help="output folder (default: $OUT)")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--items", default="", help=argparse.SUPPRESS)
    p.add_argument("--status", default="", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.fake_timing and not args.tiny:
        p.error("--fake-timing needs --tiny")
    if args.compile_only and args.tiny:
        p.error("--compile-only and --tiny exclude each other")
    if args.jobs is None:
        args.jobs = max(1, min(12, (os.cpu_count() or 2) - 2))
    return args


def main(argv=None) -> int:
    global MODE
    args = parse_args(argv)
    if args.worker:
        MODE = "compile" if args.compile_only else "worker"
        if MODE == "compile":
            install_aot_compiler()
        return worker_main(args)
    MODE = "compile" if args.compile_only else ("tiny" if args.tiny else "gpu")
    if MODE == "gpu" and not torch.cuda.is_available():
        print("no CUDA device: use --compile-only or --tiny on a machine without a GPU", file=sys.stderr)
        return 2
    out_dir = Path(args.out or os.environ.get("OUT") or Path(tempfile.gettempdir()) / "perf_variants")
    out_dir.mkdir(parents=True, exist_ok=True)
    suffix = {"gpu": "", "compile": "_compile_only", "tiny": "_tiny"}[MODE]
    json_path, log_path = out_dir / f"perf_variants{suffix}.json", out_dir / f"perf_variants{suffix}.log"
    log = open(log_path, "w", buffering=1)  # noqa: SIM115  (closed at exit)
    sys.stdout, sys.stderr = Tee(sys.__stdout__, log), Tee(sys.__stderr__, log)
    if MODE == "compile":
        install_aot_compiler()
    if MODE == "tiny" and args.fake_timing:
        install_fake_timing()
    parts = list(PARTS) if args.part == "all" else [args.part]
    t0 = now()
    report: dict = {"meta": {
        "argv": sys.argv, "mode": MODE, "parts": parts, "python": platform.python_version(),
        "torch": torch.__version__, "triton": triton.__version__, "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "interpret": INTERPRET}}
    if MODE == "gpu":
        props = torch.cuda.get_device_properties(0)
        report["meta"].update({"gpu": props.name, "sms": props.multi_processor_count,
                               "capability": f"{props.major}.{props.minor}", "cuda": torch.version.cuda,
                               **gpu_facts()})
    print(f"perf_variants: mode {MODE}, parts {parts}, torch {torch.__version__}, triton {triton.__version__}; "
          f"output {json_path}", flush=True)

    def save():
        report["meta"]["seconds"] = now() - t0
        tmp = json_path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(jsonable(report), indent=1))
        os.replace(tmp, json_path)

    try:
        pre = precompile(parts, args)
        report["precompile"] = pre
        save()
        for part in parts:
            budget = args.budget_s if args.budget_s is not None else DEFAULT_BUDGET_S[part]
            if part == "timing":
                report[part] = run_timing_part(budget, pre, args)
            else:
                report[part] = run_variant_part(part, budget, pre, args)
            save()
            if MODE == "gpu":
                torch.cuda.empty_cache()
        print("\n================ summary ================")
        for part in parts:
            if part == "timing":
                print_timing_table(report[part])
            else:
                print_part_table(part, report[part])
    finally:
        save()
        print(f"\nwrote {json_path} and {log_path} after {now() - t0:.0f} s", flush=True)
        sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
        log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
