"""Gluon basics: the answers to exercises.py, and the classic mistakes its checks catch.

    TRITON_INTERPRET=1 python exercises.py --solutions   # these answers pass
"""

import sys
from pathlib import Path

from triton.experimental import gluon
from triton.experimental.gluon import language as gl

sys.path.append(str(Path(__file__).resolve().parent.parent))  # practice.py, in the repo
from practice import Mistake  # noqa: E402


# snippet: masked-copy
@gluon.jit
def copy_masked_kernel(src, dst, n, BLOCK: gl.constexpr, VEC: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([VEC], [32], [gl.num_warps()], [0])
    offs = gl.program_id(0) * BLOCK + gl.arange(0, BLOCK, layout=layout)
    mask = offs < n
    gl.store(dst + offs, gl.load(src + offs, mask=mask), mask=mask)


# end snippet


# snippet: store-wait
def pending_stores(stages, ahead):
    # The next load reuses the slot of the tile stored stages - ahead stores
    # before the newest; the stores after it may stay pending.
    return stages - ahead


# end snippet


# snippet: parity
def ws_loader(copier, tiles, ready, empty):
    stages = len(ready)
    for i in range(tiles):
        s, lap = i % stages, (i // stages) & 1
        # Lap 0 waits on parity 1, which a fresh barrier passes at once; lap k
        # waits for the phase the storer's k-th release completes.
        yield empty[s].wait(lap ^ 1)
        copier.load(i, s, ready[s])


# end snippet


# Each mistake is an edit of this file's text; the check must fail it and say `says`.
MISTAKES = {
    "masked-copy": [
        Mistake("the store without its mask", find="mask=mask), mask=mask)",
                replace="mask=mask))", says="wrote past the end"),
        Mistake("one lane too many", find="mask = offs < n", replace="mask = offs <= n",
                says="wrote past the end"),
    ],
    "store-wait": [
        Mistake("one store too many in flight", find="return stages - ahead",
                replace="return stages - ahead + 1", says="overwritten"),
        Mistake("the loads ahead forgotten", find="return stages - ahead",
                replace="return stages", says="overwritten"),
        Mistake("waiting for every store", find="return stages - ahead",
                replace="return 0", says="more stores than it must"),
    ],
    "parity": [
        Mistake("the lap's own parity", find="wait(lap ^ 1)", replace="wait(lap)",
                says="deadlock"),
        Mistake("a parity never flipped", find="wait(lap ^ 1)", replace="wait(1)",
                says="deadlock"),
    ],
}
