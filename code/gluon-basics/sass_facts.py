"""What ptxas kept of a Gluon kernel's schedule, read off its SASS.

Gluon decides the order of a kernel's PTX; ptxas, which turns the PTX into
the machine code (SASS) the GPU runs, may still move instructions. One move
matters to an attention kernel. Two wgmma products are issued, the first is
waited for (`warpgroup_mma_wait(1)`: at most one still running), and the
exponentials that read the first's result should then run while the second
is on the tensor cores, until a second wait (`warpgroup_mma_wait(0)`). In the
SASS those waits are `WARPGROUP.DEPBAR.LE gsb0, 0x1` and `..., 0x0`, the
products' issue starts at `WARPGROUP.ARRIVE`, and an exponential is one
`MUFU.EX2`. Counting the exponentials between the two waits says whether the
overlap the source asks for survived.

Triton disassembles a compiled kernel with its own cuobjdump:
`kernel.asm["sass"]` (a GPU run only). The gluon-attention and
gluon-attention-backward lessons read their kernels' SASS with this module.
"""

import re

WAIT = re.compile(r"WARPGROUP\.DEPBAR\.LE\s+gsb0,\s*0x([0-9a-f]+)")


# snippet: overlap
def exps_under_product(sass: str) -> tuple[int, int] | None:
    """From the first wait that leaves one product in flight to the next
    products' issue: (the exponentials before the wait for that product too,
    all the exponentials). None if the SASS has no such wait."""
    events = []
    for line in sass.splitlines():
        wait = WAIT.search(line)
        if wait:
            events.append("wait" + str(int(wait.group(1), 16)))
        elif "WARPGROUP.ARRIVE" in line:
            events.append("issue")
        elif "MUFU.EX2" in line:
            events.append("exp")
    if "wait1" not in events:
        return None
    step = events[events.index("wait1") + 1:]
    if "issue" in step:
        step = step[: step.index("issue")]
    under = step[: step.index("wait0")] if "wait0" in step else step
    return under.count("exp"), step.count("exp")


# end snippet


def registers_named(sass: str) -> int | None:
    """How many registers the code uses: one more than the highest it names
    (R0 is the first). With setmaxnreg a partition may use more than the
    count the kernel is launched with."""
    found = [int(r) for r in re.findall(r"\bR(\d+)\b", sass)]
    return max(found) + 1 if found else None


def sass_of(kernel) -> str:
    """The compiled kernel's SASS, or "" (and why, printed) where Triton's
    cuobjdump cannot give it: a missing fact, not a failed run."""
    try:
        return kernel.asm["sass"]
    except Exception as exc:  # noqa: BLE001 - any failure of the tool
        print(f"  no SASS ({type(exc).__name__}: {exc})"[:300])
        return ""
