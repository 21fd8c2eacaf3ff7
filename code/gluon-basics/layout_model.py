"""Gluon's register layouts and register budget, as arithmetic.

Which thread of which warp holds which element of a tensor, in which of its
registers, for the layouts the three Gluon lessons use: a BlockedLayout, the
layout wgmma writes its accumulator in (NVMMADistributedLayout version 3),
the layout of wgmma's A operand in registers (DotOperandLayout) and the
layout of a row statistic (SliceLayout). Plain Python, no Gluon: the
lessons' interpreter runs check and draw from these functions, and
tests/test_gluon_layouts.py checks them against Triton's own layout objects
(`to_linear_layout`), element by element.

Every function returns (warp, lane, register): the warp of the program,
the thread's lane in its warp (0-31; its thread id is 32 * warp + lane) and
the index of the register in that thread.
"""

from __future__ import annotations


# snippet: blocked-layout
def blocked_owner(
    coord, size_per_thread, threads_per_warp, warps_per_cta, order, shape
):
    """(warp, lane, register) that holds element `coord` of a BlockedLayout.

    Along every dimension the same three levels: each thread owns a run of
    size_per_thread elements, threads_per_warp threads sit side by side, then
    warps_per_cta warps; a tensor larger than that block repeats it, in
    more registers of the same threads. `order` lists the dimensions fastest
    first: lanes, warps and registers are numbered along it.
    """
    lane = warp = register = repeat = 0
    lanes = warps = registers = repeats = 1  # the place values so far
    for d in order:
        spt, tpw, wpc = size_per_thread[d], threads_per_warp[d], warps_per_cta[d]
        block = spt * tpw * wpc
        rep, x = divmod(coord[d], block)
        w, x = divmod(x, spt * tpw)
        t, r = divmod(x, spt)
        lane, lanes = lane + t * lanes, lanes * tpw
        warp, warps = warp + w * warps, warps * wpc
        register, registers = register + r * registers, registers * spt
        repeat, repeats = repeat + rep * repeats, repeats * -(-shape[d] // block)
    return warp, lane, repeat * registers + register


# end snippet


# snippet: wgmma-accumulator
def wgmma_acc_owner(row, col, shape, warps=4, instr_n=None):
    """(warp, lane, register) of element (row, col) of a wgmma accumulator:
    NVMMADistributedLayout(version=[3, 0], warps_per_cta=[warps, 1],
    instr_shape=[16, instr_n, 16]) on a shape[0] x shape[1] FP32 tile.

    Each warp owns 16 rows. In them the 32 lanes form 8 groups of 4: lane
    4 * g + q holds rows g and g + 8, columns 2q and 2q + 1 of every block
    of 8 columns. A thread's registers run along its row (two columns), then
    to the row 8 below, then on to the next block of 8 columns.
    """
    instr_n = instr_n or shape[1]
    warp, r = (row // 16) % warps, row % 16
    lane = 4 * (r % 8) + (col % 8) // 2
    register = 4 * ((col % instr_n) // 8) + 2 * (r // 8) + col % 2
    per_instr = instr_n // 2  # registers of one instruction's 16 x instr_n tile
    register += per_instr * (col // instr_n)  # repeated along N first,
    register += per_instr * (shape[1] // instr_n) * (row // (16 * warps))  # then M
    return warp, lane, register


# end snippet


# snippet: dot-operand
def dot_a_owner(row, col, shape, warps=4, k_width=2):
    """(warp, lane, register) of element (row, col) of wgmma's A operand held
    in registers: DotOperandLayout(operand_index=0, parent=<an accumulator
    layout as above>, k_width). k_width = 2 for FP16: two halves per 32-bit
    register, so a thread holds 8 halves of each 16 x 16 step of K.
    """
    w = k_width
    warp, r = (row // 16) % warps, row % 16
    lane = 4 * (r % 8) + (col % (4 * w)) // w
    register = col % w + w * (r // 8) + 2 * w * ((col % (8 * w)) // (4 * w))
    per_step = 4 * w  # registers of one 16 x 8w step of K
    register += per_step * (col // (8 * w))  # along K first,
    register += per_step * (shape[1] // (8 * w)) * (row // (16 * warps))  # then M
    return warp, lane, register


def row_owners(row, rows, warps=4):
    """Every (warp, lane, register) holding entry `row` of a row statistic (the
    running max or sum of each row): SliceLayout(1, <an accumulator layout>)
    on `rows` entries. The four lanes that share the row in the accumulator
    all hold its statistic, so a reduction along a row needs only shuffles
    among those four."""
    warp, r = (row // 16) % warps, row % 16
    register = r // 8 + 2 * (row // (16 * warps))
    return [(warp, 4 * (r % 8) + q, register) for q in range(4)]


# end snippet


# snippet: register-budget
REGISTERS_PER_SM = 65536  # 32-bit registers in one Hopper SM's register file


def register_split(default_warps: int, workers: list[tuple[int, int]]) -> dict:
    """The registers a warp-specialized kernel launches with and hands out.

    The hardware allocates registers per warpgroup (4 warps, 128 threads),
    by `setmaxnreg` in multiples of 8 per thread, from 24 up to 256. Every
    partition here fills whole warpgroups, an idle warp padding a one-warp
    partition. `workers`: (warps, registers per thread) of each worker
    partition; the default partition gets what the workers leave of the
    SM's registers, and the launch limit is what every thread could have.
    """
    groups = [-(-warps // 4) for warps, _ in workers]
    default_groups = -(-default_warps // 4)
    threads = 128 * (default_groups + sum(groups))
    taken = sum(128 * n * regs for n, (_, regs) in zip(groups, workers, strict=True))
    left = (REGISTERS_PER_SM - taken) // (128 * default_groups)
    return {
        "threads": threads,
        "launch": min(256, REGISTERS_PER_SM // threads // 8 * 8),
        "default": min(256, left // 8 * 8),
        "workers": [regs for _, regs in workers],
    }


# end snippet
