"""The Gluon lessons' pictures, drawn from their models (matplotlib, by lesson.plot).

Nothing here decides a fact: an ownership grid asks layout_model.py who
holds each element, a timeline replays a Trace of ring_model.py's actors.
The kit calls each `draw(fig)` twice, for the light and the dark page; the
cells use light fills with dark text, readable on both. Sizes are chosen to
stay legible when a phone shows the figure 350 px wide.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # as the kit's lesson.plot does: files, no window

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch, Rectangle  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

# Light fills (dark text on them in both themes): one per warp, or per register.
FILLS = [
    "#a6cee3",
    "#fdbf6f",
    "#b2df8a",
    "#fb9a99",
    "#cab2d6",
    "#ffff99",
    "#8dd3c7",
    "#fccde5",
    "#d9d9d9",
    "#bebada",
    "#80b1d3",
    "#ccebc5",
]
INK = "#1a1a1a"  # text on a fill
MOVED = "#bdbdbd"  # a cell whose element would change thread
# Points, for a figure 7 inches (840 pixels) wide: the site shows it at most 52rem
# wide, a phone about 350 pixels wide, where LABEL is still about 10 pixels.
WIDTH = 7.0
TITLE, LABEL, SMALL, CELL = 17, 15, 14, 12


def _ink():
    """The theme's text colour (outside the cells)."""
    return plt.rcParams["text.color"]


def _cell(ax, x, y, fill, label="", w=1.0, h=1.0, size=CELL):
    ax.add_patch(
        Rectangle((x, y), w, h, facecolor=fill, edgecolor="#555555", linewidth=0.4)
    )
    if label != "":
        ax.text(
            x + w / 2,
            y + h / 2,
            str(label),
            ha="center",
            va="center",
            fontsize=size,
            color=INK,
        )


def _grid_axes(ax, cols, rows):
    ax.set_xlim(0, cols)
    ax.set_ylim(rows, 0)
    ax.set_aspect("equal")
    ax.grid(False)
    for side in ("top", "right", "bottom", "left"):
        ax.spines[side].set_visible(False)


# -- ownership grids ------------------------------------------------------------


def blocked_1d(fig, owner, block, vec):
    """Step 1's BlockedLayout: one row per 32 x vec elements (one warp's access)."""
    per_row = 32 * vec
    rows = block // per_row
    ax = fig.subplots()
    _grid_axes(ax, 32, rows)
    ax.set_aspect("auto")
    for row in range(rows):
        for lane in range(32):
            warp, got_lane, register = owner(row * per_row + lane * vec)
            assert got_lane == lane, "a row of the picture is one warp's access"
            _cell(
                ax, lane, row, FILLS[warp] if lane % 2 == 0 else _lighter(FILLS[warp])
            )
        warp, _, register = owner(row * per_row)
        ax.text(
            -0.4,
            row + 0.5,
            f"warp {warp}, r{register}–{register + vec - 1}",
            ha="right",
            va="center",
            fontsize=SMALL,
        )
        ax.text(
            32.4,
            row + 0.5,
            f"{row * per_row}",
            ha="left",
            va="center",
            fontsize=SMALL,
        )
    ax.set_xticks(
        [0.5, 8.5, 16.5, 24.5, 31.5], ["0", "8", "16", "24", "31"], fontsize=LABEL
    )
    ax.xaxis.set_ticks_position("top")
    ax.xaxis.set_label_position("top")
    ax.set_xlabel(
        f"thread of the warp, {vec} elements each",
        fontsize=LABEL,
    )
    ax.set_yticks([])
    ax.text(
        16,
        rows + 0.4,
        f"a row: one load of a warp,\n{per_row * 2} contiguous bytes;"
        " right: its first element",
        ha="center",
        va="top",
        fontsize=LABEL,
    )


def _lighter(hex_colour):
    r, g, b = (int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))
    return "#" + "".join(f"{int(c + (255 - c) * 0.45):02x}" for c in (r, g, b))


def accumulator(fig, owner, shape, warps, zoom=(16, 8)):
    """The wgmma accumulator: which warp owns which rows, and the threads and
    registers inside the first corner of warp 0."""
    left, right = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1.15, 1]})
    rows, cols = shape
    left.set_xlim(0, cols)
    left.set_ylim(rows, 0)
    left.grid(False)
    for warp in range(warps):
        left.add_patch(
            Rectangle(
                (0, 16 * warp),
                cols,
                16,
                facecolor=FILLS[warp // 4],
                edgecolor="#555555",
                linewidth=0.6,
            )
        )
        left.text(
            cols / 2,
            16 * warp + 8,
            f"warp {warp}",
            ha="center",
            va="center",
            fontsize=LABEL,
            color=INK,
        )
    left.add_patch(
        Rectangle(
            (0, 0), zoom[1] * 4, zoom[0], fill=False, edgecolor="#d62728", linewidth=3
        )
    )
    left.set_xticks([0, cols], ["0", str(cols)], fontsize=LABEL)
    left.set_yticks([0, 64, rows], ["0", "64", str(rows)], fontsize=LABEL)
    left.set_title(f"the {rows} × {cols} tile:\n16 rows per warp", fontsize=TITLE)
    handles = [
        Patch(facecolor=FILLS[g], edgecolor="#555555", label=f"warpgroup {g}")
        for g in range(warps // 4)
    ]
    left.legend(
        handles=handles,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.06),
        ncol=1,
        fontsize=LABEL,
        frameon=False,
    )
    _owner_grid(right, owner, zoom)
    right.set_title(
        f"warp 0, rows 0–{zoom[0] - 1},\ncolumns 0–{zoom[1] - 1}: thread,\n"
        "register as colour",
        fontsize=TITLE,
    )
    _register_legend(right, owner, zoom)


def _owner_grid(ax, owner, zoom, moved=None):
    """A zoom[0] x zoom[1] corner: in each cell the thread (lane) holding it; its
    register as the fill, or grey where moved(r, c) says the element would
    have to move to another thread."""
    _grid_axes(ax, zoom[1], zoom[0])
    for r in range(zoom[0]):
        for c in range(zoom[1]):
            warp, lane, register = owner(r, c)
            away = moved is not None and moved(r, c)
            fill = MOVED if away else FILLS[register % len(FILLS)]
            _cell(ax, c, r, fill, lane, size=CELL)
    ax.set_xticks([0.5, zoom[1] - 0.5], ["0", str(zoom[1] - 1)], fontsize=SMALL)
    ax.set_yticks(
        [0.5, 7.5, 8.5, zoom[0] - 0.5],
        ["0", "7", "8", str(zoom[0] - 1)],
        fontsize=SMALL,
    )


def _register_legend(ax, owner, zoom):
    registers = sorted({owner(r, c)[2] for r in range(zoom[0]) for c in range(zoom[1])})
    if len(registers) > 8:
        return
    ax.legend(
        handles=[
            Patch(facecolor=FILLS[i % len(FILLS)], edgecolor="#555555", label=f"r{i}")
            for i in registers
        ],
        loc="upper center",
        bbox_to_anchor=(0.5, -0.03),
        ncol=4,
        fontsize=LABEL,
        handlelength=1.0,
        columnspacing=0.8,
        frameon=False,
    )


def conversions(fig, panels, strip, alike=None, zoom=(16, 8)):
    """The same corner of a tile in several layouts, side by side. panels:
    (title, owner(r, c) -> (warp, lane, register)); the first is where the
    data is. A cell of a later panel whose element sits in another thread
    there is grey: convert_layout must move it (a register renamed within
    a thread costs nothing). alike: (label, owner) of a layout compared
    with the first cell by cell, the count said under it. strip(row) ->
    [(warp, lane, register), ...]: the row statistic's layout, beside the
    first panel."""
    axes = fig.subplots(
        1,
        len(panels) + 1,
        gridspec_kw={"width_ratios": [zoom[1], 2.6] + [zoom[1]] * (len(panels) - 1)},
    )
    first = panels[0][1]
    cells = [(r, c) for r in range(zoom[0]) for c in range(zoom[1])]
    order = [axes[0]] + list(axes[2:])
    for ax, (title, owner) in zip(order, panels, strict=True):
        moved = {(r, c) for r, c in cells if owner(r, c)[:2] != first(r, c)[:2]}
        _owner_grid(ax, owner, zoom, moved=lambda r, c, m=moved: (r, c) in m)
        ax.set_title(title, fontsize=LABEL)
        if owner is not first:
            verdict = f"grey: {len(moved)} of {len(cells)}\nchange thread"
            ax.set_xlabel(verdict if moved else "none moves", fontsize=LABEL)
    if alike:
        label, owner = alike
        differ = sum(owner(r, c) != first(r, c) for r, c in cells)
        axes[0].set_xlabel(
            f"{label}:\n{f'{differ} differ' if differ else 'every cell alike'}",
            fontsize=LABEL,
        )
    ax = axes[1]
    _grid_axes(ax, 2.6, zoom[0])
    for r in range(zoom[0]):
        lanes = sorted(lane for _, lane, _ in strip(r))
        _cell(ax, 0.3, r, "#eeeeee", f"{lanes[0]}–{lanes[-1]}", w=2.2, size=CELL)
    ax.set_title("row\nstat.", fontsize=LABEL)
    ax.set_xticks([])
    ax.set_yticks([])


# -- timelines ------------------------------------------------------------------

PARITY_FILL = ["#c7dcef", "#fdd0a2"]  # a phase of parity 0, of parity 1


def ring_timeline(ax, trace, rows, waiters):
    """Each barrier's phases in time (fill: the phase's parity), and every
    wait an actor was blocked in: a bar above the barrier it waited on,
    labelled with the parity it asked for.

    rows: [(label, barrier name)], top to bottom; waiters: {actor: colour}.
    """
    end = trace.t
    row_of = {name: i for i, (_, name) in enumerate(rows)}
    for name, row in row_of.items():
        start = 0
        completions = [
            c.t + 1 for c in trace.changes if c.name == name and c.new[0] > c.old[0]
        ]
        for phase, t in enumerate(completions + [end]):
            _bar(
                ax,
                start,
                t,
                row,
                PARITY_FILL[phase % 2],
                str(phase) if t - start >= 2 else "",
            )
            start = t
    for actor, wait, t0, t1 in _blocked_spans(trace):
        name = trace.name_of(wait.on)
        if name in row_of:
            y = row_of[name] - 0.42
            ax.plot(
                [t0, t1 + 1],
                [y, y],
                color=waiters[actor],
                linewidth=5,
                solid_capstyle="butt",
            )
            ax.text(
                t0,
                y - 0.1,
                f"wait({wait.arg})",
                fontsize=SMALL,
                color=_ink(),
                va="bottom",
            )
    ax.set_yticks(range(len(rows)), [label for label, _ in rows], fontsize=LABEL)
    ax.set_ylim(len(rows) - 0.5, -1.0)
    ax.set_xlim(0, end)
    ax.set_xlabel("round of the model", fontsize=TITLE)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=6))
    ax.grid(axis="y", visible=False)
    ax.set_axisbelow(True)
    ax.tick_params(axis="x", labelsize=LABEL)
    handles = [
        Patch(
            facecolor=PARITY_FILL[p], edgecolor="#555555", label=f"phase of parity {p}"
        )
        for p in (0, 1)
    ]
    handles += [
        Patch(facecolor=colour, label=f"{actor} blocked")
        for actor, colour in waiters.items()
    ]
    ax.legend(
        handles=handles,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.14),
        ncol=2,
        fontsize=LABEL,
        frameon=False,
    )


def ring_laps(ax, trace, stages, roles=("storer", "loader")):
    """The ring by lap and parity: a row per slot, a column per lap; in each cell
    the tile that used that slot on that lap and the parity each role waited on
    for it, read from the waits the roles went past in `trace` (the k-th wait of
    a role is for tile k). Fill: the lap's parity."""
    waited = {role: [c.arg for t, who, c in trace.steps if who == role and c is not None
                     and trace.name_of(c.on).startswith(("ready", "empty"))]
              for role in roles}
    tiles = min(len(w) for w in waited.values())
    laps = -(-tiles // stages)
    _grid_axes(ax, laps, stages)
    ax.set_aspect("auto")
    for i in range(tiles):
        lap, slot = divmod(i, stages)
        said = "\n".join(f"{role} wait({waited[role][i]})" for role in roles)
        _cell(ax, lap, slot, PARITY_FILL[lap % 2], f"tile {i}\n{said}", size=SMALL)
    ax.set_xticks([lap + 0.5 for lap in range(laps)],
                  [f"lap {lap}" for lap in range(laps)], fontsize=LABEL)
    ax.xaxis.set_ticks_position("top")
    ax.set_yticks([s + 0.5 for s in range(stages)],
                  [f"slot {s}" for s in range(stages)], fontsize=LABEL)
    ax.tick_params(length=0)
    ax.legend(handles=[Patch(facecolor=PARITY_FILL[p], edgecolor="#555555",
                             label=f"lap of parity {p}") for p in (0, 1)],
              loc="upper center", bbox_to_anchor=(0.5, -0.02), ncol=2,
              fontsize=LABEL, frameon=False)


def _bar(ax, t0, t1, row, fill, label="", height=0.6):
    ax.add_patch(
        Rectangle(
            (t0, row - height / 2),
            t1 - t0,
            height,
            facecolor=fill,
            edgecolor="#555555",
            linewidth=0.5,
        )
    )
    if label:
        ax.text(
            (t0 + t1) / 2,
            row,
            label,
            ha="center",
            va="center",
            fontsize=SMALL,
            color=INK,
        )


def _blocked_spans(trace):
    """(actor, wait, first step, last step): each stretch blocked on one Wait."""
    open_, spans = {}, []
    for t, actor, wait in trace.blocked:
        if actor in open_ and open_[actor][0] is wait and open_[actor][2] == t - 1:
            open_[actor][2] = t
            continue
        if actor in open_:
            spans.append((actor, *open_[actor]))
        open_[actor] = [wait, t, t]
    spans += [(actor, *span) for actor, span in open_.items()]
    return sorted(spans, key=lambda s: s[2])


STEP_KINDS = {  # what a role's step did, as the trace shows it: fill, legend
    "tma": (FILLS[0], "TMA loads"),
    "mma": (FILLS[1], "wgmma"),
    "softmax": (FILLS[2], "softmax"),
    "arrive": (FILLS[4], "arrive"),
}


def step_kind(trace, t, who, consumed) -> str:
    """Classify one step of a role from what it changed (and what it went past)."""
    if consumed is not None and isinstance(consumed.on, str):
        return consumed.on
    mine = [c for c in trace.changes if c.t == t and c.who == who]
    if any(not c.barrier and len(c.new) > len(c.old) for c in mine):
        return "mma"  # a new asynchronous group: a wgmma was issued
    if any(c.barrier and c.new[2] > c.old[2] for c in mine):
        return "tma"  # bytes armed on a barrier: expect, then the copy
    if mine:
        return "arrive"
    return ""


def role_timeline(ax, trace, roles, engines):
    """Warp roles over the rounds of one schedule: what each step did, and
    when the role was blocked; below, what the copy engine and the tensor
    cores completed in each round.

    roles: [(actor, label)]; engines: [(label, change -> short text or "")].
    """
    end = trace.t
    labels = [label for _, label in roles] + [label for label, _ in engines]
    row = {actor: i for i, (actor, _) in enumerate(roles)}
    used = set()
    for t, who, consumed in trace.steps:
        kind = step_kind(trace, t, who, consumed) if who in row else ""
        if kind in STEP_KINDS:
            _bar(ax, t, t + 1, row[who], STEP_KINDS[kind][0])
            used.add(kind)
    for who, _wait, t0, t1 in _blocked_spans(trace):
        if who in row:
            ax.add_patch(
                Rectangle(
                    (t0, row[who] - 0.1),
                    t1 + 1 - t0,
                    0.2,
                    facecolor="#8c8c8c",
                    linewidth=0,
                )
            )
    for j, (_, what) in enumerate(engines, start=len(roles)):
        for change in trace.changes:
            text = what(change)
            if text:
                _bar(ax, change.t, change.t + 1, j, "#eeeeee", text)
    ax.set_yticks(range(len(labels)), labels, fontsize=LABEL)
    ax.set_ylim(len(labels) - 0.5, -0.6)
    ax.set_xlim(0, end)
    ax.set_xlabel("round of the model", fontsize=TITLE)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=6))
    ax.tick_params(axis="x", labelsize=LABEL)
    ax.grid(axis="y", visible=False)
    ax.set_axisbelow(True)
    handles = [
        Patch(facecolor=STEP_KINDS[k][0], edgecolor="#555555", label=STEP_KINDS[k][1])
        for k in STEP_KINDS
        if k in used
    ]
    handles.append(Patch(facecolor="#8c8c8c", label="blocked"))
    ax.legend(
        handles=handles,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.2),
        ncol=3,
        columnspacing=1.0,
        handlelength=1.2,
        fontsize=LABEL,
        frameon=False,
    )


def register_budget(ax, parts, total):
    """The SM's register file as one bar: each warpgroup's 128 threads times its
    registers per thread, and what is left unused (hatched)."""
    start = 0
    for i, (label, regs) in enumerate(parts):
        width = 128 * regs
        ax.add_patch(
            Rectangle(
                (start, 0),
                width,
                1,
                facecolor=FILLS[i],
                edgecolor="#555555",
                linewidth=0.6,
            )
        )
        ax.text(
            start + width / 2,
            0.5,
            f"{label}\n{regs}" if width > total / 6 else f"{regs}",
            ha="center",
            va="center",
            fontsize=SMALL,
            color=INK,
        )
        start += width
    ax.add_patch(
        Rectangle(
            (start, 0),
            total - start,
            1,
            facecolor="none",
            edgecolor="#555555",
            hatch="//",
            linewidth=0.6,
        )
    )
    ax.set_xlim(0, total)
    ax.set_ylim(0, 1)
    ax.set_yticks([])
    ax.set_xticks([0, total], ["0", f"{total:,}"], fontsize=SMALL)
    ax.grid(False)
    ax.set_title(
        f"an SM's registers: {start:,} of {total:,}", fontsize=LABEL
    )
