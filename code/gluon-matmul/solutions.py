"""Gluon matmul: the answers to exercises.py, and the mistakes its checks catch.

    TRITON_INTERPRET=1 python exercises.py --solutions   # these answers pass
"""

import sys
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent))  # practice.py, in the repo
from practice import Mistake  # noqa: E402


# snippet: grouped-order
def tile_id_of(pid_m, pid_n, num_pid_m, num_pid_n, group_m):
    group_id = pid_m // group_m  # the band, group_m tile rows tall
    first_pid_m = group_id * group_m
    group_size_m = min(num_pid_m - first_pid_m, group_m)  # the last band is shorter
    before = group_id * group_m * num_pid_n  # every tile of the bands above
    return before + pid_n * group_size_m + (pid_m - first_pid_m)


# end snippet


# snippet: release
def mainloop(ring, it, k_tiles):
    stages = len(ring.slots)
    for kk in range(k_tiles):
        s = it % stages
        yield ring.ready[s].wait((it // stages) & 1)
        ring.issue(it, s)
        # At most this product in flight: the one before has read its slot.
        yield ring.mma.wait(1)
        if kk > 0:
            ring.empty[(it - 1) % stages].arrive()
        it += 1
    yield ring.mma.wait(0)  # the tile's last product, then its slot
    ring.empty[(it - 1) % stages].arrive()
    return it


# end snippet


# snippet: ring-depth
def ring_config():
    # 4 x 48 KiB of stages + half a 64 KiB output tile = 224 KiB of 227;
    # with the whole tile, 256 KiB: too much.
    return {"stages": 4, "epi_split": 2}


# end snippet


# Each mistake is an edit of this file's text; the check must fail it and say `says`.
MISTAKES = {
    "grouped-order": [
        Mistake("the last band as tall as the others",
                find="group_size_m = min(num_pid_m - first_pid_m, group_m)",
                replace="group_size_m = group_m", says="of the grouped order"),
        Mistake("across the band's columns first, row by row",
                find="pid_n * group_size_m + (pid_m - first_pid_m)",
                replace="(pid_m - first_pid_m) * num_pid_n + pid_n",
                says="of the grouped order"),
        Mistake("the bands above counted as tall as this one",
                find="before = group_id * group_m * num_pid_n",
                replace="before = group_id * group_size_m * num_pid_n",
                says="of the grouped order"),
    ],
    "release": [
        Mistake("the slot handed back as soon as its product is issued",
                find="        # At most this product in flight: the one before has "
                     "read its slot.\n        yield ring.mma.wait(1)\n"
                     "        if kk > 0:\n"
                     "            ring.empty[(it - 1) % stages].arrive()\n"
                     "        it += 1\n"
                     "    yield ring.mma.wait(0)  # the tile's last product, then "
                     "its slot\n    ring.empty[(it - 1) % stages].arrive()\n",
                replace="        ring.empty[s].arrive()\n        it += 1\n",
                says="read the operands"),
        Mistake("the tile's last slot never handed back",
                find="    ring.empty[(it - 1) % stages].arrive()\n    return it",
                replace="    return it", says="deadlock"),
        Mistake("every product waited for before the next",
                find="yield ring.mma.wait(1)", replace="yield ring.mma.wait(0)",
                says="one may stay in flight"),
    ],
    "ring-depth": [
        Mistake("four stages and the whole output tile",
                find='{"stages": 4, "epi_split": 2}',
                replace='{"stages": 4, "epi_split": 1}',
                says="shared memory"),
        Mistake("five stages", find='{"stages": 4, "epi_split": 2}',
                replace='{"stages": 5, "epi_split": 2}', says="shared memory"),
    ],
}
