"""Check your answers to a lesson's exercises (exercises.py runs this).

    TRITON_INTERPRET=1 python exercises.py              # your answers, on any CPU
    TRITON_INTERPRET=1 python exercises.py --only NAME  # one exercise
    TRITON_INTERPRET=1 python exercises.py --solutions  # the checks on solutions.py
On a GPU, leave out TRITON_INTERPRET=1. Each exercise prints one line: passed,
or what is wrong and a hint; the exit code is 1 while one fails. A check sees
what the interpreter hides: outputs start as NaN, so an element never written
stays NaN, and every buffer sits between bands of POISON, so a write past
either end shows. A check is proven by the mistakes it catches: solutions.py
lists the classic ones (`Mistake`), and the course's verify.py runs each.
"""

import argparse
import importlib
import os
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

import torch

POISON = -7777.0  # inputs' guard bands: finite, so a value read past the end shows too
OUT_POISON = -9999.0  # outputs' bands: another, so a copy of an input's band shows
CHECKS = {}  # exercise name -> Exercise, in the order exercises.py poses them
ON_GPU = torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1"
DEVICE = "cuda" if ON_GPU else "cpu"


class Wrong(Exception):
    """What a check raises: what is wrong with the answer, in a sentence."""


@dataclass
class Exercise:
    name: str
    check: object  # check(m) raises Wrong; m holds the answers (exercises or solutions)
    hint: str
    needs_gpu: str = ""  # why it runs on a GPU only ("": anywhere)


@dataclass(frozen=True)
class Mistake:
    """A classic mistake as a small edit of solutions.py: `find` becomes `replace`.
    The check must fail it, saying `says`."""

    name: str
    find: str
    replace: str
    says: str


def exercise(name, hint, needs_gpu=""):
    """Register the function it decorates as the check of exercise `name`."""
    def register(check):
        CHECKS[name] = Exercise(name, check, hint, needs_gpu)
        return check
    return register


def guarded(data, gap=0, poison=POISON):
    """`data` inside a bigger buffer, `poison` before and after it (and in `gap`
    columns after each row, for strides that are not the shape's)."""
    data = torch.as_tensor(data).to(DEVICE)
    cols = data.shape[-1]
    size = data.numel() // cols * (cols + gap)
    band = max(4096, size)  # a wild write lands in the band, not in another buffer
    base = torch.full((2 * band + size,), poison, dtype=data.dtype, device=DEVICE)
    strides = [cols + gap, 1][-data.dim():]
    for rows in reversed(data.shape[1:-1]):  # outer dimensions, row-major
        strides.insert(0, strides[0] * rows)
    return base.as_strided(data.shape, strides, band).copy_(data)


def output(*shape, dtype=torch.float32, gap=0):
    """A guarded output that starts as NaN: an element never written stays NaN."""
    return guarded(torch.full(shape, float("nan"), dtype=dtype), gap, OUT_POISON)


def expect(name, got, want, rtol=0.0, atol=0.0, case=""):
    """Raise Wrong unless the guarded output `got` equals `want` (within rtol and
    atol) and nothing around it changed. Names the elements at fault, and the
    sizes the check used (`case`)."""
    said = f"{name} ({case})" if case else name
    base = got if got._base is None else got._base
    mine = torch.zeros(base.numel(), dtype=torch.bool, device=got.device)
    mine.as_strided(got.shape, got.stride(), got.storage_offset()).fill_(True)
    band = base[0].item()  # the buffer's own poison (4096 elements before its start)
    hit = ((base != band) & ~mine).nonzero().flatten()
    if len(hit):
        copied = band != POISON and bool((base[hit] == POISON).any())
        where = {"after its end": int((hit > mine.nonzero().max()).sum()),
                 "before its start": int((hit < got.storage_offset()).sum())}
        where["between its rows"] = len(hit) - sum(where.values())
        raise Wrong(f"{said}: wrote past the end: " + ", ".join(
            f"{k} element(s) {w}" for w, k in where.items() if k) + " changed"
            + " (to an input's band: it read past an input's end too)" * copied)
    want = torch.as_tensor(want).to(got.device, got.dtype)
    never = (got.isnan() & ~want.isnan()).nonzero().tolist()
    if never:
        span = f"{name}{never[0]}" + f" to {name}{never[-1]}" * (len(never) > 1)
        raise Wrong(f"{said}: never written at {len(never)} of {got.numel()} "
                    f"elements, {span} (still NaN, or a NaN computed there)")
    bad = ~torch.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    if bad.any():
        at = torch.unravel_index(torch.where(bad, (got - want).abs(), -1).argmax(),
                                 got.shape)
        raise Wrong(f"{said}: wrong at {int(bad.sum())} of {got.numel()} elements; "
                    f"the worst, {name}{[int(i) for i in at]}: expected "
                    f"{want[at].item():.6g}, got {got[at].item():.6g}")


def attempt(ex, m):
    """(status, message) of exercise `ex` on the answers in module `m`."""
    if ex.needs_gpu and not ON_GPU:
        return "needs a GPU", ex.needs_gpu
    torch.manual_seed(0)
    try:
        timed = ex.check(m)
    except Wrong as wrong:
        return "failed", f"{wrong}. Hint: {ex.hint}"
    except Exception as exc:  # noqa: BLE001 - the answer's exception is its mistake
        return "failed", f"your code raised {raised(exc, m)}. Hint: {ex.hint}"
    if ON_GPU and callable(timed):  # a check about speed returns the call to time
        from triton.testing import do_bench
        return "passed", f"{do_bench(timed):.4f} ms"
    return "passed", ""


def raised(exc, m):
    """'NameError at exercises.py:12: ...': the line of `m`, or of its kernel as
    the interpreter runs it ("<string>", with the file's line numbers)."""
    while exc.__cause__ is not None:  # the interpreter wraps a kernel's own error
        exc = exc.__cause__
    file = getattr(m, "__file__", None)
    lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__)
             if f.filename in (file, "<string>")]
    where = f" at {Path(file).name}:{lines[-1]}" if lines else ""
    return f"{type(exc).__name__}{where}: {str(exc).strip()[:300]}"


def main(argv=None):
    parser = argparse.ArgumentParser(description="Check the exercises.")
    parser.add_argument("--only", choices=list(CHECKS), help="check one exercise")
    parser.add_argument("--solutions", action="store_true", help="check solutions.py")
    args = parser.parse_args(argv)
    m = importlib.import_module("solutions") if args.solutions else None
    names = [args.only] if args.only else list(CHECKS)
    return int("failed" in [said(name, m) for name in names])


def said(name, m=None):
    """Check exercise `name` on module `m` (the one run as a script by default), print
    one line, and return its status."""
    status, message = attempt(CHECKS[name], m or sys.modules["__main__"])
    print(f"{name}: {status}" + (f": {message}" if message else ""))
    return status


def report(name):
    """In a notebook: check exercise `name` against the cells above, in one line."""
    said(name)
