"""Gluon attention: exercises. Fill in each "Your code here", then check them:

    TRITON_INTERPRET=1 python exercises.py   # any CPU: the models' exercises
    python exercises.py                      # a Hopper GPU: the Gluon one too

The first three run on attention_model.py, the CPU model of the kernel: its
online softmax in float64, its ping-pong protocol under many random schedules
and its program schedule. The Gluon exercise needs a GPU (Gluon has no
interpreter) and says so elsewhere. Each prints one line: passed, or what is
wrong and a hint. --only NAME checks one; --solutions checks solutions.py.
"""

import math
import sys
from pathlib import Path

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

# practice.py one folder up and gluon-basics' ring_model.py (lesson.toml's `uses`)
# in its folder, in the repo; beside this file in a download.
HERE = Path(__file__).resolve().parent
sys.path += [str(HERE.parent), str(HERE.parent / "gluon-basics")]
from attention_model import causal_balance, operands_right, protocol_run  # noqa: E402
from ring_model import Deadlock  # noqa: E402

import practice  # noqa: E402

SEEDS = 30  # random schedules per configuration


def expect_rows(name, got, want, case, rtol=1e-9):
    """Wrong unless got (a model's output) is finite and within rtol of max|want|."""
    bad = ~torch.isfinite(got)
    if bad.any():
        row = int(bad.nonzero()[0][0])
        raise practice.Wrong(f"{name} ({case}): computed NaN or inf at "
                             f"{int(bad.sum())} of {got.numel()} elements, from row "
                             f"{row} on: an "
                             "exponential that overflowed, or a row that summed "
                             "nothing (0 / 0)")
    practice.expect(name, practice.guarded(got), want,
                    atol=rtol * float(want.abs().max()), case=case)


# snippet: pipelined-softmax
def pipelined_softmax(s_blocks, v_blocks, qk_scale):
    """One consumer warpgroup's rows, in the kernel's order, in float64.

    s_blocks[j] holds the raw scores of key block j (-inf where masked; every
    row sees a key in block 0), v_blocks[j] its values; qk_scale carries
    log2 e. Step j computes block j's softmax: the new running max (of the
    scaled scores), alpha, P_j, the running sum. Only then does it issue the
    product one block behind, O = O * alpha_{j-1} + P_{j-1} V_{j-1}, as the
    kernel issues S_j before P_{j-1} V_{j-1}. Return O / l.
    """
    rows, d = s_blocks[0].shape[0], v_blocks[0].shape[1]
    m = torch.full((rows,), -math.inf, dtype=torch.float64)  # noqa: F841 - yours
    l_sum = torch.zeros(rows, dtype=torch.float64)
    o = torch.zeros(rows, d, dtype=torch.float64)
    p_prev = v_prev = alpha_prev = None  # noqa: F841 - yours
    for _s, _v in zip(s_blocks, v_blocks, strict=True):
        pass  # Your code here, and the last block's product after the loop
    return o / l_sum[:, None]


# end snippet


# snippet: check-pipelined-softmax
@practice.exercise("pipelined-softmax", hint="m_new = max(m, max(s) * qk_scale); "
                   "alpha = exp2(m - m_new); p = exp2(s * qk_scale - m_new); l = l * "
                   "alpha + sum(p); then, from block 1 on, o = o * alpha_prev + p_prev "
                   "@ v_prev; after the loop the last block's product alone")
def check_pipelined_softmax(m):
    torch.manual_seed(0)
    for keys, block, spread, causal in ((44, 8, 30.0, False), (44, 8, 3.0, False),
                                        (40, 8, 3.0, True), (16, 16, 1.0, False)):
        q = torch.randn(16, 16, dtype=torch.float64) * spread  # spread 30: exp2 of
        k = torch.randn(keys, 16, dtype=torch.float64) * spread  # thousands, far past
        v = torch.randn(keys, 16, dtype=torch.float64)  # float64's range
        s = q @ k.T
        if causal:  # query row i sees keys up to 24 + i
            future = torch.arange(keys)[None, :] > 24 + torch.arange(16)[:, None]
            s = s.masked_fill(future, -math.inf)
        qk_scale = math.log2(math.e) / 4.0
        want = torch.softmax(s * qk_scale * math.log(2.0), dim=-1) @ v
        got = m.pipelined_softmax(list(s.split(block, dim=1)), list(v.split(block)),
                                  qk_scale)
        expect_rows("o", got, want, f"{keys} keys in blocks of {block}, inputs x "
                    f"{spread}" + (", causal" if causal else ""))


# end snippet


# snippet: turn-parity
def turn_parity(c, wg):
    """The parity warpgroup wg waits on, on its barrier turn[wg], before it issues
    the products of key block c (counted over the program's walk).

    Each warpgroup arrives on the other's barrier once it has issued, so every
    turn completes one phase of the other's barrier. A fresh barrier passes
    wait(1) at once and blocks wait(0). Warpgroup 0 takes the first turn, and
    then they alternate, wg0, wg1, wg0, ...
    """
    return 0  # Your code here


# end snippet


# snippet: check-turn-parity
@practice.exercise("turn-parity", hint="warpgroup 0's first wait must pass at once "
                   "(parity 1), warpgroup 1's must wait for warpgroup 0's first "
                   "arrival (parity 0), and each flips every block: (c & 1) ^ wg ^ 1")
def check_turn_parity(m):
    for stages, tiles in ((2, [7, 2, 5]), (3, [4])):
        stuck = out_of_turn = wrong = 0
        for seed in range(SEEDS):
            try:
                pr = protocol_run(stages, tiles, seed, parity=m.turn_parity)
            except Deadlock:
                stuck += 1
                continue
            out_of_turn += pr.issues != [0, 1] * sum(tiles)
            wrong += not operands_right(pr)
        case = f"{stages} stages, tiles of {tiles} key blocks"
        if stuck:
            raise practice.Wrong(f"{case}: deadlock in {stuck} of {SEEDS} random "
                                 "schedules: both warpgroups wait on a turn no one "
                                 "will give, and the producer on a full ring")
        if out_of_turn or wrong:
            raise practice.Wrong(f"{case}: issued out of turn in {out_of_turn} of "
                                 f"{SEEDS} random schedules (the S products must go "
                                 "wg0, wg1, wg0, ...)")


# end snippet


# snippet: tile-order
def tile(t, n_q, heads, group, causal):
    """Tile t of the n_q * heads (query block, batch * head) tiles -> (query
    block, head), as the kernel's _tile numbers them.

    Tiles come in groups of `group` heads (the last group may hold fewer);
    inside a group the heads take turns, query block by query block, so that
    tiles that run together share K and V in L2. Causal: inside each group the
    longest query blocks (the last ones, which see the most keys) come first.
    """
    return t % n_q, t // n_q  # Your code here


# end snippet


# snippet: check-tile-order
@practice.exercise("tile-order", hint="per_group = group * n_q; g, r = divmod(t, "
                   "per_group); heads_here = min(heads - g * group, group); head = g "
                   "* group + r % heads_here; q_block = r // heads_here, counted from "
                   "the end (n_q - 1 - q_block) when causal")
def check_tile_order(m):
    for n_q, heads, group in ((32, 128, 8), (3, 10, 4), (5, 7, 8)):
        for causal in (False, True):
            case = f"n_q = {n_q}, {heads} heads, groups of {group}" + (
                ", causal" if causal else "")
            got = [m.tile(t, n_q, heads, group, causal) for t in range(n_q * heads)]
            every = {(qb, h) for qb in range(n_q) for h in range(heads)}
            if set(got) != every or len(got) != len(every):
                missing = sorted(every - set(got))
                raise practice.Wrong(f"{case}: {len(missing)} of {len(every)} tiles "
                                     f"never computed (the first, {missing[:1]}), "
                                     f"{len(got) - len(set(got))} computed twice")
            per_group = group * n_q
            for t0 in range(0, len(got), per_group):
                chunk = got[t0:t0 + per_group]
                first = t0 // per_group * group
                heads_here = set(range(first, min(first + group, heads)))
                if {h for _, h in chunk} != heads_here:
                    raise practice.Wrong(f"{case}: tiles {t0} to {t0 + len(chunk) - 1} "
                                         f"hold heads {sorted({h for _, h in chunk})}, "
                                         "not one group's")
                work = [qb + 1 for qb, _ in chunk]
                longer = [i for i in range(len(work) - 1) if work[i] < work[i + 1]]
                if causal and longer:
                    at = longer[0]
                    raise practice.Wrong(f"{case}: tile {t0 + at + 1} goes to a longer "
                                         "causal block than the tile before it "
                                         f"({chunk[at]} then {chunk[at + 1]})")
    balance = causal_balance(32, 128, 8, 132, tile=m.tile)
    if balance > 1.05:
        raise practice.Wrong(f"132 persistent walks over 4,096 causal tiles: the "
                             f"longest is {balance:.3f} x the mean (at most 1.05)")


# end snippet


# snippet: row-softmax
@gluon.jit
def row_softmax_kernel(S, P, qk_scale, ROWS: gl.constexpr, COLS: gl.constexpr):
    """P = exp2(S * qk_scale - the row's max of it), as _softmax_step does it.

    S and P are fp32 (ROWS, COLS), contiguous. The tile's layout is written;
    a row statistic lives in its SliceLayout along the columns, so that it
    broadcasts back onto the tile without moving.
    """
    layout: gl.constexpr = gl.BlockedLayout([1, 4], [4, 8], [gl.num_warps(), 1], [1, 0])
    rows = gl.arange(0, ROWS, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, COLS, layout=gl.SliceLayout(0, layout))
    offs = rows[:, None] * COLS + cols[None, :]
    s = gl.load(S + offs)
    p = s  # Your code here
    gl.store(P + offs, p)


# end snippet


# snippet: check-row-softmax
@practice.exercise("row-softmax", hint="m = gl.max(s, axis=1) * qk_scale, a value per "
                   "row in SliceLayout(1, layout); p = gl.exp2(s * qk_scale - "
                   "m[:, None])", needs_gpu="Gluon has no interpreter: this one runs "
                   "on a Hopper GPU")
def check_row_softmax(m):
    for spread in (1.0, 300.0):  # 300: scores far past where exp2 overflows float32
        s = practice.guarded(torch.randn(64, 128) * spread)
        p = practice.output(64, 128)
        qk_scale = math.log2(math.e) / math.sqrt(128)
        m.row_softmax_kernel[(1,)](s, p, qk_scale, 64, 128, num_warps=4)
        scaled = s.double() * qk_scale
        want = torch.exp2(scaled - scaled.max(dim=1, keepdim=True).values)
        expect_rows("p", p, want, f"64 x 128, scores x {spread}", rtol=1e-5)


# end snippet


if __name__ == "__main__":
    sys.exit(practice.main())
