"""Why does the first CUDA-graph capture of an autograd backward fail? Three fresh processes.

Run on a GPU host from the repository root; README.md beside this file has the answer it gave.
"""
import subprocess
import sys
import textwrap

CASE = textwrap.dedent('''
import sys, traceback, torch
sys.path.insert(0, "code")
from lessonkit import _graph_timer
mode = sys.argv[1]
def sdpa_fn(B, H, S, D, causal):
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.float16, requires_grad=True) for _ in range(3))
    do = torch.randn_like(q)
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return lambda: torch.autograd.grad(out, (q, k, v), do, retain_graph=True)
if mode == "prime-tiny":
    x = torch.ones(8, device="cuda", requires_grad=True); y = (x * 2).sum()
    try:
        _graph_timer(lambda: torch.autograd.grad(y, x, retain_graph=True), 1); print("tiny prime captured")
    except Exception as e:
        print("tiny prime failed:", type(e).__name__, str(e)[:300])
if mode == "prime-sdpa":
    try:
        _graph_timer(sdpa_fn(1, 1, 128, 128, False), 1); print("small sdpa prime captured")
    except Exception as e:
        print("small sdpa prime failed:", type(e).__name__, str(e)[:300])
for causal in (False, True, False):
    fn = sdpa_fn(4, 16, 4096, 128, causal)
    fn()
    try:
        t = _graph_timer(fn, 10); print(mode, "causal" if causal else "full", "captured", round(t(), 3), "ms")
    except Exception as e:
        print(mode, "causal" if causal else "full", "FAILED", type(e).__name__, str(e)[:400])
        traceback.print_exc(limit=3)
''')
for mode in ("plain", "prime-tiny", "prime-sdpa"):
    print("==", mode, flush=True)
    r = subprocess.run([sys.executable, "-c", CASE, mode], capture_output=True, text=True)
    print(r.stdout[-2500:])
    print("stderr:", r.stderr[-2500:], flush=True)
