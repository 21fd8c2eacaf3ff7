"""Compile the course's Gluon kernels for Hopper (sm_90) on a machine without a GPU.

An experiment's tool, not a lesson. A Gluon kernel cannot run under TRITON_INTERPRET, and device time
is scarce, so a compile error, a spill or too much shared memory used to cost a device call to find.
Here a fake driver stands in for CUDA: a launch compiles the kernel all the way to a cubin (Triton's
own ptxas included) for compute capability 9.0, then stops before anything would run, and the
compiled kernel's registers, spill bytes (stack), shared memory and wgmma count are printed.
Numerics, hangs and speed still need the GPU; this only moves the compile to the CPU.

It needs the Triton release the GPU machine has (3.6: Gluon's API changes between releases). The
release matrix (`tools/verify.py --matrix`) leaves one under .cache/triton/3.6.0/site:

    PYTHONPATH=.cache/triton/3.6.0/site .venv/bin/python experiments/compile_sm90.py [attention|nwg|backward|all]

In a script of your own: `import compile_sm90` first (it installs the fake driver), then launch, and
catch `compile_sm90.Compiled` (its `.kernel`, with `resources(kernel)`).
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.runtime import driver

ROOT = Path(__file__).resolve().parents[1]
SM90 = GPUTarget("cuda", 90, 32)
NUM_SMS = 132  # the H200's


class Compiled(Exception):  # noqa: N818 - it is how a launch ends here, not an error
    """Raised where a launch would load the kernel: `.kernel` is the CompiledKernel (asm: ttgir, ptx, cubin)."""

    def __init__(self, kernel):
        super().__init__("compiled")
        self.kernel = kernel


class FakeCudaDriver:
    """Just enough of Triton's CUDA driver for the JIT to compile: device 0, stream 0, sm_90."""

    launcher_cls = None

    def is_active(self):
        return True

    def get_current_device(self):
        return 0

    def set_current_device(self, device):
        pass

    def get_current_stream(self, device=None):
        return 0

    def get_current_target(self):
        return SM90

    def get_active_torch_device(self):
        return torch.device("cpu")

    def get_device_interface(self):
        return torch.cuda

    def get_benchmarker(self):
        return None

    def get_empty_cache_for_benchmark(self):
        return None

    def clear_cache(self, cache):
        pass


def _stop_at_load(kernel):
    raise Compiled(kernel)


def install() -> None:
    """Every launch from here on compiles for sm_90 and raises Compiled instead of running."""
    triton.compiler.compiler.CompiledKernel._init_handles = _stop_at_load
    driver.set_active(FakeCudaDriver())
    # The launchers ask for the SM count (persistent grids): the H200's.
    torch.cuda.get_device_properties = lambda device=None: type("Props", (), {"multi_processor_count": NUM_SMS})()


def resources(kernel) -> dict:
    """Registers at launch, stack (spill) bytes and static shared memory from the cubin; dynamic shared
    memory from the metadata; the wgmma instructions in the PTX."""
    cuobjdump = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    with tempfile.TemporaryDirectory() as tmp:
        cubin = Path(tmp) / "kernel.cubin"
        cubin.write_bytes(kernel.asm["cubin"])
        usage = subprocess.run([str(cuobjdump), "--dump-resource-usage", str(cubin)],
                               capture_output=True, text=True, timeout=60).stdout
    found = re.search(r"REG:(\d+) STACK:(\d+) SHARED:(\d+)", usage)
    regs, stack, static = (int(x) for x in found.groups()) if found else (None, None, None)
    ptx = kernel.asm["ptx"]
    return {"regs": regs, "stack": stack, "shared": kernel.metadata.shared + (static or 0),
            "wgmma": ptx.count("wgmma.mma_async"),
            "setmaxnreg": [int(n) for n in re.findall(r"setmaxnreg\.\w+\.sync\.aligned\.u32\s+(\d+)", ptx)]}


def compile_one(label: str, launch) -> dict | None:
    """Run `launch()` (which launches one kernel) and print what the compile gave, or why it failed."""
    try:
        launch()
    except Compiled as done:
        got = resources(done.kernel)
        print(f"{label:48s} regs {got['regs']}, stack {got['stack']} B, shared {got['shared']:,} B, "
              f"wgmma {got['wgmma']}", flush=True)
        return got
    except Exception as exc:  # a compile error: the message names the kernel's line
        print(f"{label:48s} FAILED: {type(exc).__name__}: {str(exc).strip()[-800:]}", flush=True)
        return None
    print(f"{label:48s} launched nothing", flush=True)
    return None


def _inputs(D: int, S: int = 512):
    return [torch.randn(1, 2, S, D, dtype=torch.float16) for _ in range(3)]


def attention() -> None:
    sys.path.insert(0, str(ROOT / "code" / "gluon-attention"))
    import gluon_attention as ak
    for D in (128, 64):
        for causal in (False, True):
            compile_one(f"gluon-attention D{D} {'causal' if causal else 'full'}",
                        lambda D=D, c=causal: ak.attention_ws(*_inputs(D), c))


def nwg() -> None:
    sys.path.insert(0, str(ROOT / "experiments"))
    import attention_nwg as an
    for cfg in ({"nwg": 2, "fold": True}, {"nwg": 3, "fold": True, "consumer_regs": 160}):
        for D in (128, 64):
            compile_one(f"attention_nwg {cfg} D{D}", lambda D=D, cfg=cfg: an.attention_ws(*_inputs(D), True, **cfg))


def backward() -> None:
    sys.path.insert(0, str(ROOT / "code" / "gluon-attention-backward"))
    import gluon_attention_backward as gb
    for D in (128, 64):
        for causal in (False, True):
            q, k, v = _inputs(D)
            o, do = torch.randn_like(q), torch.randn_like(q)
            lse = torch.zeros(2, q.shape[2], dtype=torch.float32)
            for part in ("dkdv", "dq"):
                compile_one(f"backward {part} D{D} {'causal' if causal else 'full'}",
                            lambda q=q, k=k, v=v, o=o, do=do, lse=lse, c=causal, p=part:
                            gb.attention_bwd_gluon(q, k, v, o, do, lse, c, kernels=(p,),
                                                   delta=torch.zeros_like(lse)))


PARTS = {"attention": attention, "nwg": nwg, "backward": backward}


def main(argv: list[str]) -> int:
    wanted = argv or ["all"]
    unknown = [w for w in wanted if w != "all" and w not in PARTS]
    if unknown:
        print(f"compile_sm90: unknown part {unknown[0]!r}; choose from {', '.join(PARTS)} or all", file=sys.stderr)
        return 2
    if not triton.__version__.startswith("3.6"):
        print(f"compile_sm90: note: Triton {triton.__version__} here; the GPU machine has 3.6 "
              "(PYTHONPATH=.cache/triton/3.6.0/site)", file=sys.stderr)
    install()
    for name, part in PARTS.items():
        if "all" in wanted or name in wanted:
            part()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
