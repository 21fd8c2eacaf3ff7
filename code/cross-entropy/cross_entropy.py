"""Cross-entropy over a large vocabulary: loss and gradient in one kernel, in place.

The last layer of a language model turns every token's hidden state into one
logit per word of the vocabulary, and the loss is the cross-entropy of those
logits against the next token:

    loss_row = logsumexp(x) - x[target]
    grad_row = (softmax(x) - onehot(target)) / n_valid     (mean reduction)

At 8192 tokens and a 131072-word vocabulary the logits are 2 GiB in bf16.
PyTorch's `F.cross_entropy(...).backward()` keeps a log-softmax of the same
size for the backward pass, builds a one-hot gradient of that size, and then
a gradient of that size again: several copies of the biggest tensor of the
step. Liger-Kernel's cross-entropy keeps none of them. One program owns one
row (one token) and walks it twice:

1. an *online* max and sum over the vocabulary in blocks (the log-sum-exp of
   the row in one pass, however long the row), then the loss;
2. a second walk that turns every logit into its gradient and writes it over
   the logit, in place.

The gradient is known once the loss is, so the kernel computes it during the
forward pass, and the backward pass only hands it on. No fp32 copy of the
logits and no separate gradient tensor ever exist.

Run it:
    TRITON_INTERPRET=1 python cross_entropy.py   # any machine: checks on the CPU
    python cross_entropy.py                      # a CUDA GPU: checks and a timing

Beside it: exercises.py (check your own kernels) and lesson.py (the run the
course records: every check, benchmark and memory figure on the lesson's page).
"""

import os

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

IGNORE_INDEX = -100  # PyTorch's default: rows with this target are padding


# snippet: kernel
@triton.jit
def cross_entropy_kernel(
    x_ptr,  # logits, n_rows x V; overwritten with the gradient
    x_stride,  # elements between two rows
    target_ptr,  # n_rows int64 class indices
    loss_ptr,  # n_rows fp32: each row's loss (0 for ignored rows)
    denom_ptr,  # one number on the device: n_valid for "mean", 1 for "sum"
    grad_scale,  # a factor for the gradient (a loss scale), 1.0 by default
    V,  # vocabulary size
    ignore_index,
    BLOCK: tl.constexpr,
):
    # One program per row. 8192 x 131072 is 2^30 elements: row * stride
    # must be computed in 64 bits before it is added to a pointer.
    row = tl.program_id(0).to(tl.int64)
    row_ptr = x_ptr + row * x_stride
    offs = tl.arange(0, BLOCK)
    y = tl.load(target_ptr + row)

    # The loops over the row are `while` loops: Triton 3.6's interpreter
    # cannot take a runtime bound in range() under NumPy 2.4 (see the
    # reductions lesson). They compile to the same loop.
    if y == ignore_index:
        # Padding: no loss, and a gradient of exactly zero. The zeros must
        # be written, because the buffer still holds this row's logits.
        zero = tl.zeros((BLOCK,), dtype=x_ptr.dtype.element_ty)
        start = 0
        while start < V:
            tl.store(row_ptr + start + offs, zero, mask=start + offs < V)
            start += BLOCK
        tl.store(loss_ptr + row, 0.0)
        return

    x_y = tl.load(row_ptr + y).to(tl.float32)  # read before it is overwritten

    # Pass 1: the online log-sum-exp. m is the largest logit seen so far and
    # d = sum(exp(x - m)) over the logits seen so far. A block with a new
    # maximum rescales d by exp(m_old - m_new), so one walk over the row is
    # enough, however long it is. Padding lanes load -inf: they never win
    # the max and add exp(-inf) = 0 to the sum. Every exponential is written
    # as exp2(t * log2(e)): tl.exp2 is the hardware's ex2.approx.f32 itself.
    m = float("-inf")
    d = 0.0
    start = 0
    while start < V:
        cols = start + offs
        x = tl.load(row_ptr + cols, mask=cols < V, other=float("-inf"))
        x = x.to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        d = d * tl.exp2((m - m_new) * 1.4426950408889634) + tl.sum(
            tl.exp2((x - m_new) * 1.4426950408889634), axis=0
        )
        m = m_new
        start += BLOCK
    lse = m + tl.log(d)  # d >= 1: the largest term is exp(0)
    tl.store(loss_ptr + row, lse - x_y)

    # Pass 2: the gradient, written over the logits it came from.
    # d loss / d x_j = (softmax(x)_j - [j == y]) * scale. Each program reads
    # only its own row and writes each element after reading it, so the
    # overwrite is safe without any barrier.
    scale = grad_scale / tl.load(denom_ptr).to(tl.float32)
    p_scale = scale / d  # softmax(x)_j * scale = exp(x_j - m) * (scale / d)
    start = 0
    while start < V:
        cols = start + offs
        mask = cols < V
        x = tl.load(row_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        e = tl.exp2((x - m) * 1.4426950408889634)  # exp(x - m)
        g = e * p_scale - tl.where(cols == y, scale, 0.0)
        tl.store(row_ptr + cols, g.to(x_ptr.dtype.element_ty), mask=mask)
        start += BLOCK


# end snippet


# snippet: launch
def cross_entropy_(
    logits: torch.Tensor,
    target: torch.Tensor,
    ignore_index: int = IGNORE_INDEX,
    reduction: str = "mean",
    grad_scale: float = 1.0,
    block: int | None = None,
    num_warps: int | None = None,
    loss_rows: torch.Tensor | None = None,
) -> torch.Tensor:
    """The loss; `logits` is overwritten with d(loss)/d(logits) * grad_scale.

    The trailing underscore is PyTorch's mark of an in-place operation.
    """
    assert logits.ndim == 2 and logits.stride(1) == 1 and target.is_contiguous()
    n_rows, V = logits.shape
    if reduction == "mean":
        # Counted on the device: no .item(), so the host never waits.
        denom = (target != ignore_index).sum()
    elif reduction == "sum":
        denom = torch.ones((), dtype=torch.int64, device=logits.device)
    else:
        raise ValueError(f"reduction {reduction!r}: use 'mean' or 'sum'")
    # Liger-Kernel's choice: blocks of up to 32768 logits and 32 warps, so a
    # thread holds 32 values of a block. The sweep below tries smaller ones.
    block = block or min(32768, triton.next_power_of_2(V))
    num_warps = num_warps or max(1, min(32, block // 1024))
    if loss_rows is None:
        loss_rows = torch.empty(n_rows, dtype=torch.float32, device=logits.device)
    cross_entropy_kernel[(n_rows,)](
        logits, logits.stride(0), target, loss_rows, denom, grad_scale,
        V, ignore_index, BLOCK=block, num_warps=num_warps,
    )
    # The per-row losses are 4 bytes a row; their sum is a tiny reduction.
    return loss_rows.sum() / denom


# end snippet


# snippet: autograd
class FusedCrossEntropy(torch.autograd.Function):
    """F.cross_entropy(logits, target) for autograd, with the gradient computed
    (in place, in the logits' memory) during the forward pass."""

    @staticmethod
    def forward(ctx, logits, target):
        loss = cross_entropy_(logits, target)
        # The logits' buffer now holds the gradient. Save it detached: it is
        # data for backward, not a tensor autograd should track.
        ctx.save_for_backward(logits.detach())
        return loss

    @staticmethod
    def backward(ctx, grad_loss):
        (grad,) = ctx.saved_tensors
        # The loss was the last op (grad_loss == 1), except under a loss
        # scaler. Multiplying here rounds twice: grad_scale avoids that.
        return grad * grad_loss.to(grad.dtype), None


# end snippet


# snippet: self-check
def self_check() -> None:
    """Loss and gradient against torch's in float64, on vocabularies no block
    divides, with padding rows; on a GPU, one timing."""
    on_gpu = torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1"
    device = "cuda" if on_gpu else "cpu"
    torch.manual_seed(0)
    for n_rows, V, block in ((32, 3000, 1024), (16, 77, None)):
        x = (2 * torch.randn(n_rows, V)).to(device, torch.float16)
        t = torch.randint(0, V, (n_rows,), device=device)
        t[::5] = IGNORE_INDEX  # padding rows
        x64 = x.double().cpu().requires_grad_()
        want = F.cross_entropy(x64, t.cpu(), ignore_index=IGNORE_INDEX)
        want.backward()
        grad = x.clone()
        loss = cross_entropy_(grad, t, block=block)
        # An fp32 log-sum-exp over V terms, and a gradient rounded once to
        # fp16 (half an ulp, 2^-11, and fp16's subnormal spacing near zero).
        torch.testing.assert_close(loss.double().cpu(), want.detach(), rtol=1e-5,
                                   atol=0)
        torch.testing.assert_close(grad.double().cpu(), x64.grad, rtol=2**-10,
                                   atol=2**-24)
        print(f"loss and gradient match torch's within their tolerances at "
              f"{n_rows} x {V} fp16")
    if on_gpu:
        x0 = torch.randn(8192, 131072, device=device, dtype=torch.bfloat16)
        t = torch.randint(0, 131072, (8192,), device=device)
        work = torch.empty_like(x0)
        copy_ms = triton.testing.do_bench(lambda: work.copy_(x0))
        ms = triton.testing.do_bench(lambda: (work.copy_(x0), cross_entropy_(work, t)))
        print(f"8192 x 131072 bf16: {ms - copy_ms:.3f} ms (the restore copy "
              "subtracted)")


# end snippet


if __name__ == "__main__":
    self_check()
