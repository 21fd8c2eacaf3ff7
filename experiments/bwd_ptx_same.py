"""Do two versions of the Gluon backward's kernels compile to the same PTX? (compile_sm90.py's fake driver)

    git show c2150d7^:experiments/attention_bwd_gluon.py > /tmp/old/attention_bwd_gluon.py
    PYTHONPATH=.cache/triton/3.6.0/site .venv/bin/python experiments/bwd_ptx_same.py /tmp/old/attention_bwd_gluon.py

Compares the old file (the module the H200 checked first) with
code/gluon-attention-backward/gluon_attention_backward.py,
kernel by kernel, D 64 and 128, causal and full, the PTX up to its first `.section` without its `.loc` and `.file`
lines (those, and the debug sections, name the file and its lines). Prints "same" or how many lines differ.
"""

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "experiments"), str(ROOT / "code" / "gluon-attention-backward"),
                str(ROOT / "code" / "attention-backward")]
import compile_sm90 as c  # noqa: E402

c.install()
import gluon_attention_backward as new  # noqa: E402
import torch  # noqa: E402


def load(path: str):
    spec = importlib.util.spec_from_file_location("old_backward", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def ptx(module, D: int, causal: bool, part: str) -> list[str]:
    q, k, v = c._inputs(D)
    o, do = torch.randn_like(q), torch.randn_like(q)
    lse = torch.zeros(2, q.shape[2], dtype=torch.float32)
    extra = {"delta": torch.zeros_like(lse)} if module is new else {}  # the new one launches no preprocess then
    try:
        module.attention_bwd_gluon(q, k, v, o, do, lse, causal, kernels=(part,), **extra)
    except c.Compiled as done:
        code = done.kernel.asm["ptx"].split(".section")[0].splitlines()
        return [line for line in code if not line.strip().startswith((".loc", ".file"))]
    raise RuntimeError(f"{part} D{D}: launched nothing")


def main(old_path: str) -> int:
    old = load(old_path)
    differ = 0
    for D in (128, 64):
        for causal in (False, True):
            for part in ("dkdv", "dq"):
                a, b = ptx(old, D, causal, part), ptx(new, D, causal, part)
                lines = sum(x != y for x, y in zip(a, b, strict=False)) + abs(len(a) - len(b))
                differ += bool(lines)
                print(f"{part} D{D} {'causal' if causal else 'full'}: "
                      + ("same" if not lines else f"{lines} lines differ"), flush=True)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
