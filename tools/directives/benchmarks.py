"""::benchmarks (one lesson) and ::benchmark-table (every lesson): ratios with their intervals.

A ratio is the median over paired rounds of kernel / baseline with a 95 %
interval. A target is "met" when the interval's lower bound clears it, "not
met" when its upper bound stays below, "within noise" otherwise; a gate fails
the run only when not met. The machine and date of a run are stated once,
under its table, not on every row.
"""

from __future__ import annotations

import html

from directives import Page, directive, notebook_form
from directives.common import STALE_MARK, gpu_first, stale_note, where
from evidence import HistoryPoint, Record
from kit import Benchmark
from render import admonition, bounded_rows, interval, number, ratio, text
from status import LessonStatus

VERDICT = {"met": ":material-check: met", "within noise": "≈ within noise", "not met": "**not met**"}
ALIGN = ["---", "---:", "---:", "---:", "---"]
EXPLAIN = ("ratio: median of paired rounds, kernel over baseline, with its 95 % interval; a target is met when "
           "the whole interval clears it, within noise when the interval straddles it, not met when the whole "
           "interval is below it (only then does a gate fail the run)")


def target_cell(b: Benchmark) -> str:
    parts = []
    if b.threshold is not None:
        kind = "gate" if b.gate else "goal"
        parts.append(f"{kind} {ratio(b.threshold)}: {VERDICT.get(b.verdict, text(b.verdict))}")
    if b.stretch is not None:
        parts.append(f"stretch {ratio(b.stretch)}: {VERDICT.get(b.stretch_verdict, text(b.stretch_verdict))}")
    return "<br>".join(parts) or "informational"


def ratio_cell(b: Benchmark) -> str:
    return f"**{ratio(b.ratio)}** <small>({interval(b.ratio_low, b.ratio_high)})</small>"


def label_cell(b: Benchmark) -> str:
    return text(b.label) + (f"<br><small>{text(b.note)}</small>" if b.note else "")


def usual_method(record: Record) -> str:
    methods = [b.method for b in record.benchmarks if b.method]
    return max(sorted(set(methods)), key=methods.count) if methods else ""  # ties: the same pick every build


def record_rows(record: Record) -> list[list[str]]:
    usual = usual_method(record)
    rows = []
    for b in record.benchmarks:
        label = label_cell(b) + (f"<br><small>timed: {text(b.method)}</small>" if b.method != usual else "")
        rows.append([label, f"{number(b.measured)} {text(b.unit)}",
                     f"{number(b.baseline)} {text(b.unit)}<br><small>{text(b.baseline_name)}</small>",
                     ratio_cell(b), target_cell(b)])
    return rows


def rounds(record: Record) -> str:
    usual = usual_method(record)
    if usual:
        return f"timed in {usual}"
    counts = sorted({b.samples for b in record.benchmarks})
    return "/".join(str(c) for c in counts) + (" paired round" if counts == [1] else " paired rounds")


@directive("benchmarks", "the lesson's recorded benchmarks: ratio with its interval, and each target's verdict")
def benchmarks(page: Page) -> str:
    st = page.lesson
    out = []
    for record in gpu_first(st):
        if not record.benchmarks:
            continue
        table = bounded_rows(["Benchmark", "Kernel", "Baseline", "Ratio (95 % interval)", "Target"],
                             record_rows(record), ALIGN, "benchmarks")
        caption = f"<small>{where(record)} · {text(rounds(record))} · {text(EXPLAIN)}.</small>"
        block = f"{table}\n\n{caption}"
        note = stale_note(st, record)
        out.append(admonition("vt-stale", STALE_MARK, f"{note}\n\n{block}") if note else block)
    return "\n\n".join(out) or "_No benchmarks recorded yet: benchmarks run on a GPU only._"


# -- every lesson --------------------------------------------------------------------------

@directive("benchmark-table", "every benchmark of every lesson by GPU, with a ratio chart and each one's history",
           needs_lesson=False)
def benchmark_table(page: Page) -> str:
    groups: dict[str, list[tuple[LessonStatus, Record]]] = {}
    for st in page.site.statuses.values():
        for record in gpu_first(st):
            if record.benchmarks:
                groups.setdefault(record.key if record.mode == "gpu" else "interpreter", []).append((st, record))
    if not groups:
        return "_No benchmarks recorded yet: benchmarks run on a GPU only._"
    out = []
    for items in groups.values():
        first = items[0][1]
        rows, bars = [], []
        for st, record in items:
            link = f"[{text(st.lesson.title)}]({page.root}{st.lesson.page})"
            mark = "" if st.is_current(record) else f" ({STALE_MARK})"
            for i, b in enumerate(record.benchmarks):
                lesson_cell = f"{link}<br><small>{text(record.date)}{mark}</small>" if i == 0 else ""
                rows.append([lesson_cell, label_cell(b), ratio_cell(b), target_cell(b),
                             sparkline(record.history.get(b.name, []), record, b)])
                bars.append((f"{st.lesson.name}: {b.label}", b))
        versions = {(r.env.triton, r.env.torch) for _, r in items}
        machine = text(first.env.device_name if first.mode == "gpu" else "Interpreter (CPU)")
        if len(versions) == 1:
            triton, torch = versions.pop()
            machine += text(f" · Triton {triton} · torch {torch}")
        out.append(f"### {machine}\n\n{ratio_chart(bars)}\n\n"
                   + bounded_rows(["Lesson", "Benchmark", "Ratio (95 % interval)", "Target", "History"], rows,
                                  ["---", "---", "---:", "---", "---"], "benchmarks")
                   + f"\n\n<small>{text(EXPLAIN)}. History: this GPU model's earlier recordings of the same "
                     "benchmark, oldest first, the newest in colour.</small>")
    return "\n\n".join(out)


def sparkline(points: list[HistoryPoint], record: Record, b: Benchmark) -> str:
    """A small inline SVG: each recording's ratio with its interval, oldest first."""
    series = [(p.started_utc[:10], p.ratio, p.ratio_low, p.ratio_high) for p in points]
    series.append((record.date, b.ratio, b.ratio_low, b.ratio_high))
    if len(series) == 1:
        return "<small>first recording</small>"
    lo = min(s[2] for s in series)
    hi = max(s[3] for s in series)
    span = (hi - lo) or 1.0
    w, h, pad = 16 * len(series) + 8, 30, 4

    def y(v: float) -> float:
        return pad + (h - 2 * pad) * (1 - (v - lo) / span)

    parts = [f'<svg class="vt-spark" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" '
             f'aria-label="history of this ratio">']
    title = "; ".join(f"{d}: {ratio(r)} ({interval(a, z)})" for d, r, a, z in series)
    parts.append(f"<title>{html.escape(title)}</title>")
    for i, (_, r, a, z) in enumerate(series):
        x = 8 + 16 * i
        cls = "vt-spark-now" if i == len(series) - 1 else "vt-spark-old"
        parts.append(f'<line x1="{x}" y1="{y(a):.1f}" x2="{x}" y2="{y(z):.1f}" class="{cls}"/>')
        parts.append(f'<circle cx="{x}" cy="{y(r):.1f}" r="2.5" class="{cls}"/>')
    parts.append("</svg>")
    return "".join(parts)


def ratio_chart(bars: list[tuple[str, Benchmark]], clip: float = 2.0) -> str:
    """An inline SVG: one bar per benchmark with its interval, a line at 1.0, ticks at its targets.

    Built from evidence at build time, so it needs no plotting library and
    cannot disagree with the table under it. Every label is escaped.
    """
    if not bars:
        return ""
    row_h, label_w, plot_w, top = 22, 440, 360, 24
    height = top + row_h * len(bars) + 10

    def x(value: float) -> float:
        return label_w + plot_w * min(max(value, 0.0), clip) / clip

    parts = [f'<svg class="vt-ratio-chart" viewBox="0 0 {label_w + plot_w + 70} {height}" role="img" '
             f'aria-label="Benchmark ratios: measured over baseline, with 95 % intervals">']
    for tick in (0.5, 1.0, 1.5, 2.0):
        if tick <= clip:
            parts.append(f'<line x1="{x(tick):.1f}" y1="{top - 6}" x2="{x(tick):.1f}" y2="{height - 6}" '
                         f'class="{"vt-one" if tick == 1.0 else "vt-grid"}"/>')
            parts.append(f'<text x="{x(tick):.1f}" y="{top - 10}" class="vt-axis">{tick:.1f}×</text>')
    for i, (label, b) in enumerate(bars):
        yy = top + i * row_h
        verdicts = [v for v in (b.verdict, b.stretch_verdict) if v is not None]
        cls = ("vt-bar-info" if not verdicts else "vt-bar-missed" if "not met" in verdicts
               else "vt-bar-noise" if "within noise" in verdicts else "vt-bar-met")
        parts.append(f'<text x="{label_w - 8}" y="{yy + 14}" class="vt-label">{html.escape(label[:80])}</text>')
        tip = f"{label[:80]}: {ratio(b.ratio)} ({interval(b.ratio_low, b.ratio_high)})"
        parts.append(f'<rect x="{label_w}" y="{yy + 3}" width="{x(b.ratio) - label_w:.1f}" height="{row_h - 8}" '
                     f'class="{cls}"><title>{html.escape(tip)}</title></rect>')
        mid = yy + row_h / 2 - 1
        parts.append(f'<line x1="{x(b.ratio_low):.1f}" y1="{mid:.1f}" x2="{x(b.ratio_high):.1f}" y2="{mid:.1f}" '
                     'class="vt-err"/>')
        for target, kind in ((b.threshold, "vt-gate"), (b.stretch, "vt-stretch")):
            if target is not None:
                parts.append(f'<line x1="{x(target):.1f}" y1="{yy + 1}" x2="{x(target):.1f}" y2="{yy + row_h - 3}" '
                             f'class="{kind}"/>')
        shown = ratio(b.ratio) + (" ›" if b.ratio > clip else "")
        parts.append(f'<text x="{x(max(b.ratio, b.ratio_high)) + 4:.1f}" y="{yy + 14}" class="vt-value">'
                     f"{shown}</text>")
    parts.append("</svg>")
    caption = ("Measured / baseline for every benchmark, with its 95 % interval as a line. Green: every target "
               "met; blue: a target within noise; amber: a target not met; grey: informational. Dark tick: the "
               f"gate or goal; dashed tick: the stretch target. Bars past {clip:.1f}× are cut, with the value "
               "printed.")
    return (f'<figure class="vt-chart">\n{"".join(parts)}\n<figcaption>{html.escape(caption)}</figcaption>\n'
            f"</figure>")


@notebook_form("benchmarks")
def benchmarks_notebook(page: Page) -> str:
    md = benchmarks(page).replace(":material-check: ", "✓ ")
    return md.replace(f'!!! vt-stale "{STALE_MARK}"', f"**{STALE_MARK}**")
