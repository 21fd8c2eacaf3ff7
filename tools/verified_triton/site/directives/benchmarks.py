"""::benchmarks (one lesson) and ::benchmark-table (every lesson): ratios with their intervals.

A ratio is the median over paired rounds of kernel / baseline with a 95 %
interval. A target is "met" when the interval's lower bound clears it, "not
met" when its upper bound stays below, "within noise" otherwise; a gate fails
the run only when not met. The machine and date of a run are stated once,
under its table, not on every row.
"""

from __future__ import annotations

from verified_triton.core.kit import OPTIONAL_SKIP, Benchmark
from verified_triton.judge.evidence import HistoryPoint, Record
from verified_triton.judge.status import LessonStatus, target_words
from verified_triton.site.directives import Page, directive, notebook_form
from verified_triton.site.directives.common import STALE_MARK, gpu_first, stale_note, where
from verified_triton.site.door import Md, raw_html_text, text, url
from verified_triton.site.record_page import link_from
from verified_triton.site.render import admonition, bounded_rows, interval, number, ratio

VERDICT = {"met": Md(":material-check: met"), "within noise": Md("≈ within noise"), "not met": Md("**not met**")}
ALIGN = [Md("---"), Md("---:"), Md("---:"), Md("---:"), Md("---")]
EXPLAIN = ("ratio: median of paired rounds, kernel over baseline, with its 95 % interval; a target is met when "
           "the whole interval clears it, within noise when the interval straddles it, not met when the whole "
           "interval is below it (only then does a gate fail the run)")


def target_cell(b: Benchmark) -> Md:
    parts = []
    if b.threshold is not None:
        kind = "gate" if b.gate else "goal"
        parts.append(Md("{} {}: {}").format(kind, ratio(b.threshold), VERDICT.get(b.verdict, text(b.verdict))))
    if b.stretch is not None:
        parts.append(Md("stretch {}: {}").format(ratio(b.stretch),
                                                  VERDICT.get(b.stretch_verdict, text(b.stretch_verdict))))
    return Md("<br>").join(parts) or Md("informational")


def ratio_cell(b: Benchmark) -> Md:
    return Md("**{}** <small>({})</small>").format(ratio(b.ratio), interval(b.ratio_low, b.ratio_high))


def label_cell(b: Benchmark) -> Md:
    return text(b.label) + (Md("<br><small>{}</small>").format(b.note) if b.note else Md(""))


def usual_method(record: Record) -> str:
    return most_common([b.method for b in record.benchmarks if b.method])


def most_common(methods: list[str]) -> str:
    return max(sorted(set(methods)), key=methods.count) if methods else ""  # ties: the same pick every build


def method_note(b: Benchmark, usual: str) -> Md:
    """A row timed otherwise than the table's caption says carries its own method."""
    return Md("<br><small>timed: {}</small>").format(b.method) if b.method != usual else Md("")


def record_rows(record: Record) -> list[list[Md]]:
    usual = usual_method(record)
    rows = []
    for b in record.benchmarks:
        label = label_cell(b) + method_note(b, usual)
        rows.append([label, Md("{} {}").format(number(b.measured), b.unit),
                     Md("{} {}<br><small>{}</small>").format(number(b.baseline), b.unit, b.baseline_name),
                     ratio_cell(b), target_cell(b)])
    return rows


def rounds(record: Record) -> str:
    """How the run timed its benchmarks, as the record says (rounds, graph replay or events, warm-up)."""
    usual = usual_method(record)
    if usual:
        return f"timing, as recorded: {usual}"
    counts = sorted({b.samples for b in record.benchmarks})
    return "/".join(str(c) for c in counts) + (" paired round" if counts == [1] else " paired rounds")


@directive("benchmarks", "the lesson's recorded benchmarks: ratio with its interval, each target's verdict "
           "(folded: a line of verdicts; history: the record's form, with the machine, the timing and each "
           "ratio's history)", flags=("folded", "history"))
def benchmarks(page: Page, flags: frozenset[str] = frozenset()) -> Md:
    shown = benchmarks_markdown(page, "record" if "history" in flags else "lesson")
    records = [r for r in gpu_first(page.lesson) if r.benchmarks]
    if "folded" not in flags or not records:
        return shown
    return Md("{}\n\n{}").format(verdict_line(page.lesson, records),
                                   admonition("abstract", "The benchmarks: kernel, baseline, ratio and target",
                                              shown, folded=True))


def verdict_line(st: LessonStatus, records: list[Record]) -> Md:
    """'**2 benchmarks**: both gates met, 0 of 2 stretch goals met.' (no figure: the page shows its results once,
    in the table or the figure it chose). A current GPU run's machine is the status line's to name, once a page;
    an older run's, or the interpreter, is named here, where it differs from what the status line says."""
    parts = []
    for r in records:
        n = len(r.benchmarks)
        words = target_words(r) or ["no targets: informational"]
        current = st.is_current(r)
        where = Md("") if r.mode == "gpu" and current else Md(" on {}{}").format(
            r.env.device_name if r.mode == "gpu" else "the interpreter", "" if current else f" ({STALE_MARK})")
        parts.append(Md("**{} {}**{}: {}").format(n, "benchmark" if n == 1 else "benchmarks", where,
                                                  ", ".join(words)))
    return Md("; ").join(parts) + Md(".")


def benchmarks_markdown(page: Page, form: str = "notebook") -> Md:
    """Each record's benchmarks as a table, with a caption that depends on where it is shown:
    - "record" (the record page): the machine, versions and date, the timing, what the interval means, and a
      column with each ratio's history;
    - "lesson" (a lesson page, which says the machine and date once, in its status line): the table, and a link
      to the record for the rest (an older source's run still says where and when it ran);
    - "notebook": the machine, versions and date, the timing and what the interval means."""
    st = page.lesson
    out = []
    for record in gpu_first(st):
        if not record.benchmarks:
            continue
        columns = ["Benchmark", "Kernel", "Baseline", "Ratio (95 % interval)", "Target"]
        rows, align = record_rows(record), ALIGN
        if form == "record":
            columns.append("History")
            rows = [row + [sparkline(record.history.get(b.name, []), record, b)]
                    for row, b in zip(rows, record.benchmarks, strict=True)]
            align = [*ALIGN, Md("---")]
        table = bounded_rows(columns, rows, align, "benchmarks")
        if form == "lesson":
            older = Md("") if st.is_current(record) else Md("{} · ").format(where(record))
            caption = Md("<small>{}Medians of paired rounds, kernel over baseline; the machine, the timing and each "
                         "ratio's history are in [the record]({}).</small>").format(
                older, url(link_from(page.src_uri, st.lesson)))
        else:
            history = Md(" History: this GPU model's earlier recordings of the same benchmark, oldest first, the "
                         "newest in colour.") if form == "record" else Md("")
            caption = Md("<small>{} · {} · {}.{}</small>").format(where(record), rounds(record), EXPLAIN, history)
        block = Md("{}\n\n{}").format(table, caption)
        note = stale_note(st, record)
        out.append(admonition("vt-stale", STALE_MARK, Md("{}\n\n{}").format(note, block)) if note else block)
    return Md("\n\n").join(out) or Md("_No benchmarks recorded yet: benchmarks run on a GPU only._")


# -- every lesson --------------------------------------------------------------------------

@directive("benchmark-table", "every benchmark of every lesson by GPU, with a ratio chart and each one's history",
           needs_lesson=False)
def benchmark_table(page: Page) -> Md:
    groups: dict[str, list[tuple[LessonStatus, Record]]] = {}
    for st in page.site.statuses.values():
        for record in gpu_first(st):
            if record.benchmarks:
                groups.setdefault(record.key if record.mode == "gpu" else "interpreter", []).append((st, record))
    if not groups:
        return Md("_No benchmarks recorded yet: benchmarks run on a GPU only._")
    out = []
    for items in groups.values():
        first = items[0][1]
        rows, bars = [], []
        usual = most_common([b.method for _, r in items for b in r.benchmarks if b.method])
        for st, record in items:
            link = Md("[{}]({})").format(st.lesson.title, url(page.root + st.lesson.page))
            mark = "" if st.is_current(record) else f" ({STALE_MARK})"
            for i, b in enumerate(record.benchmarks):
                lesson_cell = Md("{}<br><small>{}{}</small>").format(link, record.date, mark) if i == 0 else ""
                rows.append([lesson_cell, label_cell(b) + method_note(b, usual), ratio_cell(b), target_cell(b),
                             sparkline(record.history.get(b.name, []), record, b)])
                bars.append((f"{st.lesson.name}: {b.label}", b))
        versions = {(r.env.triton, r.env.torch) for _, r in items}
        machine = text(first.env.device_name if first.mode == "gpu" else "Interpreter (CPU)")
        if len(versions) == 1:
            triton, torch = versions.pop()
            machine += text(f" · Triton {triton} · torch {torch}")
        out.append(Md("### {}\n\n{}\n\n").format(machine, ratio_chart(bars))
                   + bounded_rows(["Lesson", "Benchmark", "Ratio (95 % interval)", "Target", "History"], rows,
                                  [Md("---"), Md("---"), Md("---:"), Md("---"), Md("---")], "benchmarks")
                   + Md("\n\n<small>{}. History: this GPU model's earlier recordings of the same "
                        "benchmark, oldest first, the newest in colour.").format(EXPLAIN)
                   + (Md(" Timing, as recorded: {}; a row timed otherwise says so.").format(usual) if usual else "")
                   + Md("</small>"))
    return Md("\n\n").join(out)


@directive("library-table", "every comparison with what practitioners use instead of the lesson's kernel (a library "
           "such as Liger-Kernel, or torch.compile), one row each with its interval", needs_lesson=False)
def library_table(page: Page) -> Md:
    groups: dict[str, list[tuple[LessonStatus, Record]]] = {}
    for st in page.site.statuses.values():
        for record in gpu_first(st):
            if record.mode == "gpu":
                groups.setdefault(record.key, []).append((st, record))
    out = []
    for items in groups.values():
        rows, versions, skipped = [], set(), []
        for st, record in items:
            link = Md("[{}]({})").format(st.lesson.title, url(page.root + st.lesson.page))
            mark = Md("") if st.is_current(record) else Md("<br><small>{}</small>").format(STALE_MARK)
            versions |= {f"{package} {version}" for package, version in record.env.baselines.items()}
            if any(b.library == "torch.compile" for b in record.benchmarks):
                versions.add(f"torch.compile of torch {record.env.torch}")
            skipped += [Md("{}: {}").format(st.lesson.title, c.message) for c in record.checks
                        if c.status == "skip" and c.name.startswith(OPTIONAL_SKIP)]
            mine = [b for b in record.benchmarks if b.library]
            rows += [[Md("{}<br><small>{}</small>{}").format(link, record.date, mark) if i == 0 else "", label_cell(b),
                      Md("{}<br><small>{}</small>").format(b.library, b.baseline_name), ratio_cell(b), target_cell(b)]
                     for i, b in enumerate(mine)]
        if not rows and not skipped:
            continue
        out.append(Md("### {}\n\n").format(items[0][1].env.device_name)
                   + (bounded_rows(["Lesson", "Comparison", "Against", "Ratio (95 % interval)", "Target"], rows,
                                   [Md("---"), Md("---"), Md("---"), Md("---:"), Md("---")], "comparisons") if rows
                      else Md("_No comparison with a library recorded on this GPU._"))
                   + Md("\n\n<small>{}.").format(EXPLAIN)
                   + (Md(" Versions in these runs: {}.").format(", ".join(sorted(versions))) if versions else "")
                   + Md("</small>")
                   + Md("").join(Md("\n\n**Skipped:** {}").format(line) for line in skipped))
    return Md("\n\n").join(out) or Md("_No comparison with a library recorded yet: benchmarks run on a GPU only._")


def sparkline(points: list[HistoryPoint], record: Record, b: Benchmark) -> Md:
    """A small inline SVG: each recording's ratio with its interval, oldest first."""
    series = [(p.started_utc[:10], p.ratio, p.ratio_low, p.ratio_high) for p in points]
    series.append((record.date, b.ratio, b.ratio_low, b.ratio_high))
    if len(series) == 1:
        return Md("<small>first recording</small>")
    lo = min(s[2] for s in series)
    hi = max(s[3] for s in series)
    span = (hi - lo) or 1.0
    w, h, pad = 16 * len(series) + 8, 30, 4

    def y(v: float) -> str:  # a coordinate inside the drawing, whatever the value
        return f"{pad + (h - 2 * pad) * (1 - min(max((v - lo) / span, 0.0), 1.0)):.1f}"

    parts = [Md('<svg class="vt-spark" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" '
                'aria-label="history of this ratio">').format(w=w, h=h)]
    title = Md("; ").join(Md("{}: {} ({})").format(d, ratio(r), interval(a, z)) for d, r, a, z in series)
    parts.append(Md("<title>{}</title>").format(title))
    for i, (_, r, a, z) in enumerate(series):
        x = 8 + 16 * i
        cls = "vt-spark-now" if i == len(series) - 1 else "vt-spark-old"
        parts.append(Md('<line x1="{}" y1="{}" x2="{}" y2="{}" class="{}"/>').format(x, y(a), x, y(z), cls))
        parts.append(Md('<circle cx="{}" cy="{}" r="2.5" class="{}"/>').format(x, y(r), cls))
    parts.append(Md("</svg>"))
    return Md("").join(parts)


def ratio_chart(bars: list[tuple[str, Benchmark]], clip: float = 2.0) -> Md:
    """One bar per benchmark with its interval, a line at 1.0, ticks at its targets: HTML and CSS.

    Built from evidence at build time, so it needs no plotting library and
    cannot disagree with the table under it. Every label is escaped. A list,
    not a drawing: at 1440 px the labels sit beside their bars, on a phone
    above them, and the text stays text (verified.css, .vt-chart). A raw HTML
    block: Markdown reads nothing in it, so its labels are HTML-escaped text
    on one line (door.raw_html_text).
    """
    if not bars:
        return Md("")

    def x(value: float) -> str:  # a position on the bar's track, in percent
        return f"{100 * min(max(value, 0.0), clip) / clip:.1f}%"

    ticks = [t for t in (0.5, 1.0, 1.5, 2.0) if t <= clip]
    grid = ", ".join(f"linear-gradient(to right, transparent calc({x(t)} - 1px), "
                     f"var(--vt-{'one' if t == 1.0 else 'grid'}) calc({x(t)} - 1px) {x(t)}, transparent {x(t)})"
                     for t in ticks)
    axis = Md("").join(Md('<span style="left:{}">{}×</span>').format(x(t), f"{t:.1f}") for t in ticks)
    rows = []
    for label, b in bars:
        verdicts = [v for v in (b.verdict, b.stretch_verdict) if v is not None]
        cls = ("vt-bar-info" if not verdicts else "vt-bar-missed" if "not met" in verdicts
               else "vt-bar-noise" if "within noise" in verdicts else "vt-bar-met")
        marks = [Md('<span class="{}" style="width:{}"></span>').format(cls, x(b.ratio)),
                 Md('<span class="vt-err" style="left:{low};width:calc({high} - {low})"></span>').format(
                     low=x(b.ratio_low), high=x(b.ratio_high))]
        for target, kind in ((b.threshold, "vt-gate"), (b.stretch, "vt-stretch")):
            if target is not None:
                marks.append(Md('<span class="{}" style="left:{}"></span>').format(kind, x(target)))
        shown = ratio(b.ratio) + (" ›" if b.ratio > clip else "")
        marks.append(Md('<span class="vt-value" style="left:{}">{}<span class="vt-sr"> ({})</span></span>').format(
            x(max(b.ratio, b.ratio_high)), shown, interval(b.ratio_low, b.ratio_high)))
        rows.append(Md('<li><span class="vt-label">{}</span><span class="vt-track">{}</span></li>').format(
            raw_html_text(label[:80]), Md("").join(marks)))
    caption = ("Measured / baseline for every benchmark, with its 95 % interval as a line. Green: every target "
               "met; blue: a target within noise; amber: a target not met; grey: informational. Dark tick: the "
               f"gate or goal; dashed tick: the stretch target. Bars past {clip:.1f}× are cut, with the value "
               "printed.")
    return Md('<figure class="vt-chart" style="--vt-ticks:{}">\n'
              '<div class="vt-axis" aria-hidden="true"><span class="vt-track">{}</span></div>\n'
              '<ol class="vt-ratio-chart" aria-label="Benchmark ratios: measured over baseline, with 95 % '
              'intervals">{}</ol>\n<figcaption>{}</figcaption>\n</figure>').format(
                  grid, axis, Md("").join(rows), raw_html_text(caption))


@notebook_form("benchmarks")
def benchmarks_notebook(page: Page) -> Md:
    # An older record's table stays in its `!!! vt-stale` block: the notebook's Markdown makes its title bold
    # and takes the block's indent off (notebook.for_jupyter), so the table is a table, not indented code.
    return benchmarks_markdown(page).replace(Md(":material-check: "), Md("✓ "))
