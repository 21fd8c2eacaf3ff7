"""Cross-entropy: exercises. Fill in each "Your code here", then check your answers:

    TRITON_INTERPRET=1 python exercises.py   # any CPU (on a GPU: python exercises.py)

Each exercise prints one line: passed, or what is wrong and a hint. With --only NAME
it checks one; --solutions checks the answers in solutions.py.
"""

import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.append(str(Path(__file__).resolve().parent.parent))  # practice.py, in the repo
from cross_entropy import IGNORE_INDEX  # noqa: E402

import practice  # noqa: E402


# snippet: online-lse
@triton.jit
def row_loss_kernel(X, stride, T, Loss, V, BLOCK: tl.constexpr):
    """Loss[r] = logsumexp(x_r) - x_r[T[r]] for row r of X, one row per program.

    X is float32, its rows `stride` elements apart; V is not a multiple of
    BLOCK. Walk the row once, BLOCK logits at a time, keeping the largest
    logit so far, m, and d = sum(exp(x - m)) over the logits so far: when a
    block raises m, the d of the blocks before must be rescaled. Then
    logsumexp = m + log(d). (Every target here is a real class.)
    """
    row = tl.program_id(0)
    m = float("-inf")  # the largest logit so far
    d = 0.0  # sum(exp(x - m)) over the logits so far
    # Your code here: walk the row in blocks of BLOCK (what must the padding
    # lanes hold?), then the loss.
    tl.store(Loss + row, m + d)


# end snippet


def logits(n_rows, V, spread, offset, gap=0):
    """Guarded float32 logits, rows `gap` elements longer than V, and targets."""
    x = (spread * torch.randn(n_rows, V) + offset).double()
    t = torch.randint(0, V, (n_rows,))
    t[0], t[-1] = 0, V - 1  # the first and last columns are targets too
    return x, practice.guarded(x.float(), gap=gap), practice.guarded(t)


# snippet: check-online-lse
@practice.exercise("online-lse", hint="load with other=float('-inf'); m_new = "
                   "tl.maximum(m, tl.max(x, axis=0)); d = d * tl.exp(m - m_new) + "
                   "tl.sum(tl.exp(x - m_new), axis=0); then loss = m + tl.log(d) - "
                   "x[target], the target's logit loaded on its own")
def check_online_lse(m):
    # Three blocks of 1024 for 3000 logits, the last one partial; rows 7
    # elements longer than V; one case of logits near 100, where exp(x)
    # overflows float32 unless the maximum is subtracted first.
    for n_rows, V, spread, offset in ((6, 3000, 2.0, 0.0), (5, 77, 1.0, 0.0),
                                      (4, 2500, 1.0, 100.0)):
        x64, x, t = logits(n_rows, V, spread, offset, gap=7)
        loss = practice.output(n_rows)
        m.row_loss_kernel[(n_rows,)](x, x.stride(0), t, loss, V, BLOCK=1024)
        want = torch.logsumexp(x64, 1) - x64.gather(1, t.cpu()[:, None])[:, 0]
        # An fp32 log-sum-exp of V terms: 4 * 2^-24 * sqrt(V), and room.
        practice.expect("loss", loss, want, 1e-5, 1e-5,
                        case=f"{n_rows} x {V}, logits {spread} * randn + {offset}, "
                        "BLOCK = 1024")


# end snippet


# snippet: grad-in-place
@triton.jit
def grad_kernel(X, stride, T, Lse, Denom, V, ignore_index, BLOCK: tl.constexpr):
    """Overwrite row r of X with d(mean loss)/dx = (softmax(x_r) - onehot(T[r])) / n.

    Lse[r] is the row's logsumexp (pass 1, done), so softmax(x)_j =
    exp(x_j - Lse[r]); n = Denom[0], the number of rows whose target is not
    ignore_index. A row whose target is ignore_index has no loss: its gradient
    is 0 everywhere, and the zeros must be written, since the buffer still
    holds the row's logits. X is float32, its rows `stride` elements apart.
    """
    # Your code here: walk the row in blocks of BLOCK, writing each block's
    # gradient over the logits it came from.
    pass


# end snippet


# snippet: check-grad-in-place
@practice.exercise("grad-in-place", hint="scale = 1 / Denom; per block: g = tl.exp(x "
                   "- lse) * scale - tl.where(cols == y, scale, 0.0), stored over x "
                   "with mask=cols < V; for y == ignore_index, store zeros instead")
def check_grad_in_place(m):
    for n_rows, V in ((8, 3000), (5, 77)):
        x64, x, t = logits(n_rows, V, 2.0, 0.0, gap=5)
        t[1::3] = IGNORE_INDEX  # padding rows: a third of them
        valid = (t != IGNORE_INDEX).cpu()
        lse = practice.guarded(torch.logsumexp(x64, 1).float())
        denom = valid.sum().to(x.device)
        m.grad_kernel[(n_rows,)](x, x.stride(0), t, lse, denom, V, IGNORE_INDEX,
                                 BLOCK=1024)
        want = torch.softmax(x64, 1)
        safe = torch.where(valid, t.cpu(), 0)
        want[torch.arange(n_rows), safe] -= 1
        want = want * valid[:, None] / valid.sum()
        # One float32 exp and product per element, rounded once.
        practice.expect("grad", x, want, 1e-5, 1e-7,
                        case=f"{n_rows} x {V}, rows {torch.where(~valid)[0].tolist()} "
                        f"ignored, BLOCK = 1024")


# end snippet


if __name__ == "__main__":
    sys.exit(practice.main())
