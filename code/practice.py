"""Check your answers to a lesson's exercises (exercises.py runs this).

    TRITON_INTERPRET=1 python exercises.py              # your answers, on any CPU
    TRITON_INTERPRET=1 python exercises.py --only NAME  # one exercise
    TRITON_INTERPRET=1 python exercises.py --solutions  # the checks on solutions.py
    TRITON_INTERPRET=1 python exercises.py --mistakes   # on each mistake it lists
On a GPU, leave out TRITON_INTERPRET=1. Each exercise prints one line: passed,
or what is wrong and a hint; the exit code is 1 while one fails. A check sees
what the interpreter hides: outputs start as NaN, so an element never written
stays NaN, and every buffer sits between bands of POISON, so a write past
either end shows.
"""

import argparse
import importlib
import itertools
import json
import linecache
import os
import sys
import traceback
import types
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

POISON = -7777.0  # the guard bands: finite, so a value read past the end shows too
BAND = 4096  # elements of POISON at least, before and after every buffer
CHECKS = {}  # exercise name -> Exercise, in the order exercises.py poses them
ON_GPU = torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1"
DEVICE = "cuda" if ON_GPU else "cpu"
MUTANTS = itertools.count(1)  # each mistake loads as a module of its own


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


def guarded(data, gap=0):
    """`data` inside a bigger buffer, POISON before and after it (and in `gap`
    columns after each row, for strides that are not the shape's)."""
    data = torch.as_tensor(data).to(DEVICE)
    cols = data.shape[-1]
    size = data.numel() // cols * (cols + gap)
    band = max(BAND, size)  # a wild write lands in the band, not in another buffer
    base = torch.full((2 * band + size,), POISON, dtype=data.dtype, device=DEVICE)
    strides = [cols + gap, 1][-data.dim():]
    for size in reversed(data.shape[1:-1]):  # outer dimensions, row-major
        strides.insert(0, strides[0] * size)
    return base.as_strided(data.shape, strides, band).copy_(data)


def output(*shape, dtype=torch.float32, gap=0):
    """A guarded output that starts as NaN: an element never written stays NaN."""
    return guarded(torch.full(shape, float("nan"), dtype=dtype), gap)


def expect(name, got, want, rtol=0.0, atol=0.0, case=""):
    """Raise Wrong unless the guarded output `got` equals `want` (within rtol and
    atol) and nothing around it changed; it names the elements at fault, and the
    sizes the check used (`case`)."""
    said = f"{name} ({case})" if case else name
    base = got if got._base is None else got._base
    mine = torch.zeros(base.numel(), dtype=torch.bool, device=got.device)
    mine.as_strided(got.shape, got.stride(), got.storage_offset()).fill_(True)
    hit = ((base != POISON) & ~mine).nonzero().flatten()
    if len(hit):
        start, end = got.storage_offset(), mine.nonzero().max()
        where = {"after its end": int((hit > end).sum()),
                 "before its start": int((hit < start).sum())}
        where["between its rows"] = len(hit) - sum(where.values())
        raise Wrong(f"{said}: wrote past the end: " + ", ".join(
            f"{k} element(s) {w}" for w, k in where.items() if k) + " changed")
    want = torch.as_tensor(want).to(got.device, got.dtype)
    never = (got.isnan() & ~want.isnan()).nonzero().tolist()
    if never:
        span = f"{name}{never[0]}" + (f" to {name}{never[-1]}" * (len(never) > 1))
        raise Wrong(f"{said}: never written at {len(never)} of {got.numel()} elements, "
                    f"{span} (still NaN)")
    bad = ~torch.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    if bad.any():
        err = torch.where(bad, (got.double() - want.double()).abs(), -1.0)
        at = torch.unravel_index(err.argmax(), got.shape)
        raise Wrong(f"{said}: wrong at {int(bad.sum())} of {got.numel()} elements; the "
                    f"worst, {name}{[int(i) for i in at]}: expected "
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
    """'TypeError at exercises.py:12: ...': the line of `m`, or of its kernel as
    the interpreter runs it ("<string>", the same line numbers), that raised it."""
    while exc.__cause__ is not None:  # the interpreter wraps a kernel's own error
        exc = exc.__cause__
    lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__)
             if f.filename in (getattr(m, "__file__", None), "<string>")]
    where = f" at {Path(m.__file__).name}:{lines[-1]}" if lines else ""
    return f"{type(exc).__name__}{where}: {str(exc).strip()[:300]}"


def mutant(path, mistake):
    """solutions.py with `mistake` made, loaded as a module of its own."""
    code, declared, rest = path.read_text(encoding="utf-8").partition("\nMISTAKES = ")
    if code.count(mistake.find) != 1:  # above the declarations, which quote it
        raise Wrong(f"{mistake.find!r} occurs {code.count(mistake.find)} times in "
                    f"{path.name} above MISTAKES, not once")
    number = next(MUTANTS)
    text = code.replace(mistake.find, mistake.replace) + declared + rest
    file = f"{path.name}:{number}"
    linecache.cache[file] = (len(text), None, text.splitlines(True), file)  # for Triton
    name = f"solutions_mistake_{number}"
    module = sys.modules[name] = types.ModuleType(name)
    module.__file__ = file
    exec(compile(text, file, "exec"), module.__dict__)
    return module


def prove(names):
    """Each exercise against the starter, the solutions and every declared mistake."""
    solutions, proof = importlib.import_module("solutions"), []
    path = Path(solutions.__file__)
    for name in names:
        ex, entry = CHECKS[name], {"name": name, "hint": CHECKS[name].hint}
        for who, m in (("starter", sys.modules["__main__"]), ("solution", solutions)):
            entry[who] = dict(zip(("status", "message"), attempt(ex, m), strict=True))
        entry |= {"needs_gpu": ex.needs_gpu, "mistakes": []}
        for mistake in getattr(solutions, "MISTAKES", {}).get(name, []):
            try:
                status, message = attempt(ex, mutant(path, mistake))
            except Exception as exc:  # noqa: BLE001 - a declaration that cannot load
                status, message = "error", raised(exc, None)
            entry["mistakes"].append(asdict(mistake) | {"status": status,
                                                        "message": message})
        proof.append(entry)
    return proof


def main(argv=None):
    parser = argparse.ArgumentParser(description="Check the exercises.")
    parser.add_argument("--only", choices=list(CHECKS), help="check one exercise")
    parser.add_argument("--solutions", action="store_true", help="check solutions.py")
    parser.add_argument("--mistakes", action="store_true",
                        help="check each mistake solutions.py lists: is it caught?")
    parser.add_argument("--record", type=Path, help=argparse.SUPPRESS)  # verify.py's
    args = parser.parse_args(argv)
    names = [args.only] if args.only else list(CHECKS)
    if args.record or args.mistakes:
        proof, missed = prove(names), 0
        if args.record:
            args.record.write_text(json.dumps({"exercises": proof}, indent=1))
        for mistake in (m | {"of": e["name"]} for e in proof for m in e["mistakes"]):
            caught = mistake["status"] == "failed" and mistake["says"] in mistake[
                "message"]
            missed += not caught
            print(f"{mistake['of']}, {mistake['name']}: "
                  f"{'caught' if caught else 'NOT CAUGHT'}: {mistake['message']}")
        return int(bool(missed) and not args.record)
    m = sys.modules["__main__"]
    m = importlib.import_module("solutions") if args.solutions else m
    return int(any([report(name, m) == "failed" for name in names]))


def report(name, m=None):
    """Check exercise `name` (in a notebook: against the cells above); one line."""
    status, message = attempt(CHECKS[name], m or sys.modules["__main__"])
    print(f"{name}: {status}" + (f": {message}" if message else ""))
    return status
