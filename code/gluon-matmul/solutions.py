"""Gluon matmul: the answers to exercises.py, and the mistakes its checks catch.

    TRITON_INTERPRET=1 python exercises.py --solutions   # these answers pass
"""

import sys
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent))  # practice.py, in the repo
from practice import Mistake  # noqa: E402


# snippet: grouped-order
def tile_coords(tile_id, num_pid_m, num_pid_n, group_m):
    num_pid_in_group = group_m * num_pid_n  # tiles in a full band
    group_id = tile_id // num_pid_in_group
    first_pid_m = group_id * group_m
    group_size_m = min(num_pid_m - first_pid_m, group_m)  # the last band is shorter
    pid_m = first_pid_m + tile_id % group_size_m  # down the band's rows first
    pid_n = (tile_id % num_pid_in_group) // group_size_m  # then the next column
    return pid_m, pid_n


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
                replace="group_size_m = group_m", says="outside the grid"),
        Mistake("the column without the band's modulo",
                find="pid_n = (tile_id % num_pid_in_group) // group_size_m",
                replace="pid_n = tile_id // group_size_m", says="outside the grid"),
        Mistake("across the band's columns first",
                find="pid_m = first_pid_m + tile_id % group_size_m",
                replace="pid_m = first_pid_m + (tile_id % num_pid_in_group) "
                        "// num_pid_n",
                says="the grouped order takes"),
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
