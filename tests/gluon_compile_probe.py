"""Compile the Gluon lessons' kernels for sm_90 on a CPU and print what tests/test_gluon_compiled.py checks.

Run as a child process (Triton's bindings report leaked objects when an interpreter exits normally, so this
ends with os._exit). Triton 3.9, the author environment's pin, compiles for an explicit target without a
GPU driver. The lessons are written against Triton 3.6 (their GPU runs use it), whose TMA names 3.9 removed:
they are aliased here, for this compile only. Prints one JSON object.
"""

import json
import os
import re
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp()
sys.dont_write_bytecode = True  # no __pycache__ in code/

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.experimental import gluon  # noqa: E402
from triton.experimental.gluon import language as gl  # noqa: E402
from triton.experimental.gluon._runtime import GluonASTSource  # noqa: E402
from triton.experimental.gluon.language.nvidia.hopper import tma  # noqa: E402

tma.async_copy_global_to_shared = tma.async_load
tma.async_copy_shared_to_global = tma.async_store

CODE = Path(__file__).resolve().parent.parent / "code"
for lesson in ("gluon-basics", "gluon-matmul", "gluon-attention", "gluon-attention-backward"):
    sys.path.insert(0, str(CODE / lesson))
import gluon_attention  # noqa: E402
import gluon_attention_backward  # noqa: E402
import gluon_basics  # noqa: E402
import gluon_matmul  # noqa: E402

TARGET = GPUTarget("cuda", 90, 32)


def desc(shape, dtype=gl.float16):
    layout = gl.NVMMASharedLayout.get_default_for(shape, dtype)
    return f"tensordesc<{dtype.name}[{','.join(map(str, shape))}],{layout!r}>"


def build(fn, signature, constexprs, num_warps):
    signature = {**signature, **dict.fromkeys(constexprs, "constexpr")}
    return triton.compile(GluonASTSource(fn, signature, constexprs=constexprs), target=TARGET,
                          options={"num_warps": num_warps})


def facts(kernel) -> dict:
    ptx, ttgir = kernel.asm["ptx"], kernel.asm["ttgir"]
    return {
        "launch": [int(x) for x in re.findall(r"\.maxnreg\s+(\d+)", ptx)],
        "setmaxnreg": sorted({int(x) for x in re.findall(r"setmaxnreg\.\w+\.sync\.aligned\.u32\s+(\d+)", ptx)}),
        "mma": sorted(set(re.findall(r"#ttg\.nvidia_mma<\{versionMajor = 3, versionMinor = 0, "
                                     r"warpsPerCTA = \[(\d+), (\d+)\], instrShape = \[(\d+), (\d+), \d+\]\}>", ttgir))),
        "shared": kernel.metadata.shared,
        "moves": len(re.findall(r"st\.shared|stmatrix|ld\.shared|ldmatrix|bar\.sync|shfl\.sync", ptx)),
    }


@gluon.jit
def convert_probe(src, dst, M: gl.constexpr, N: gl.constexpr, L_IN: gl.constexpr, L_OUT: gl.constexpr):
    # A tensor made in L_IN, converted to L_OUT as fp16, stored from L_OUT: what the conversion costs.
    x = gl.zeros([M, N], gl.float32, L_IN) + gl.load(src)
    y = gl.convert_layout(x.to(gl.float16), L_OUT)
    rows = gl.arange(0, M, layout=gl.SliceLayout(1, L_OUT))
    cols = gl.arange(0, N, layout=gl.SliceLayout(0, L_OUT))
    gl.store(dst + rows[:, None] * N + cols[None, :], y)


def convert(l_in, l_out, shape) -> dict:
    return facts(build(convert_probe, {"src": "*fp32", "dst": "*fp16"},
                       {"M": shape[0], "N": shape[1], "L_IN": l_in, "L_OUT": l_out}, 4))


def mma(warps, instr_n):
    return gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[warps, 1], instr_shape=[16, instr_n, 16])


out = {}
for regs in (24, 40):
    out[f"matmul producer {regs}"] = facts(build(
        gluon_matmul.matmul_ws_kernel,
        {"a_desc": desc([128, 64]), "b_desc": desc([64, 256]), "c_desc": desc([128, 128]),
         "M": "i32", "N": "i32", "K": "i32"},
        {"GROUP_M": 8, "STAGES": 4, "EPI_SPLIT": 2, "PRODUCER_REGS": regs}, 8))
out["copy ws"] = facts(build(
    gluon_basics.copy_ws_kernel, {"in_desc": desc([64, 256]), "out_desc": desc([64, 256]), "num_tiles": "i32"},
    {"TILES_N": 33, "STAGES": 6}, 4))
out["attention"] = facts(build(
    gluon_attention.attn_fwd_ws_kernel,
    {"q_desc": desc([64, 128]), "k_desc": desc([128, 128]), "v_desc": desc([128, 128]), "o_desc": desc([64, 128]),
     "seq_len": "i32", "n_heads_total": "i32", "n_tiles": "i32", "qk_scale": "fp32"},
    {"CAUSAL": False, "STAGES": 2, "PINGPONG": True, "CONSUMER_REGS": 240, "PRODUCER_REGS": 24,
     "GROUP_HEADS": 8, "MASK_ALL": False}, 4))
# The backward's two kernels at D = 128 (lesson CONFIGS: 64-row streamed blocks), L and Delta as 1-D tiles.
bwd = gluon_attention_backward.CONFIGS[128]
rows, f32 = gluon_attention_backward.WG_ROWS.value, gl.float32
out["backward dkdv"] = facts(build(
    gluon_attention_backward.dkdv_kernel,
    {"q_desc": desc([bwd["block_m"], 128]), "k_desc": desc([rows, 128]), "v_desc": desc([rows, 128]),
     "do_desc": desc([bwd["block_m"], 128]), "dk_desc": desc([rows, 128]), "dv_desc": desc([rows, 128]),
     "l_desc": desc([bwd["block_m"]], f32), "delta_desc": desc([bwd["block_m"]], f32),
     "seq_len": "i32", "sm_scale": "fp32", "qk_scale": "fp32"},
    {"CAUSAL": True, "STAGES": bwd["stages"], "CONSUMER_REGS": 240, "PRODUCER_REGS": 24}, 4))
out["backward dq"] = facts(build(
    gluon_attention_backward.dq_kernel,
    {"q_desc": desc([rows, 128]), "k_desc": desc([bwd["block_n"], 128]), "v_desc": desc([bwd["block_n"], 128]),
     "do_desc": desc([rows, 128]), "dq_desc": desc([rows, 128]), "L": "*fp32", "Delta": "*fp32",
     "seq_len": "i32", "sm_scale": "fp32", "qk_scale": "fp32"},
    {"CAUSAL": True, "STAGES": bwd["stages"], "CONSUMER_REGS": 240, "PRODUCER_REGS": 24}, 4))
s_layout, o_layout = mma(4, 128), mma(4, 64)
out["P to operand"] = convert(s_layout, gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2), [64, 128])
out["P to blocked"] = convert(s_layout, gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0]), [64, 128])
out["same layout"] = convert(s_layout, s_layout, [64, 128])
print(json.dumps(out))
sys.stdout.flush()
os._exit(0)
