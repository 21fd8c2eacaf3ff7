"""Turn regions and evidence into Markdown for the site.

One job: text in, Markdown out. Everything that came from a run or an author's
declaration goes through `text()` or `code_block()`, so recorded output
containing HTML, Markdown, template braces or terminal escapes shows as text.
"""

from __future__ import annotations

import html
import math
import re
from dataclasses import dataclass

from evidence import Benchmark, Record
from snippets import Region
from status import LessonStatus

ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
MAX_LINE = 1000  # characters of one output line shown on a page
MAX_LINES = 400  # lines of one stream shown on a page (head and tail)
COLLAPSE_CHECKS_OVER = 12  # a longer checks table folds away behind its summary
MAX_TEXT = 4000  # characters of one inline value (a check message, a table cell, a reason) shown on a page

BADGE_CLASS = {
    "VERIFIED": "vt-verified",
    "PARTIALLY VERIFIED": "vt-partial",
    "FAILED": "vt-failed",
    "STALE": "vt-stale",
    "UNVERIFIED": "vt-unverified",
}


# -- escaping -------------------------------------------------------------------

def text(value: object) -> str:
    """Inline text that Markdown, HTML and the template engine all leave alone.

    Every ASCII punctuation character becomes a numeric character reference,
    so nothing in it can open a tag, a link, emphasis, a table cell or an
    emoji shortcode; the browser shows the same characters.
    """
    s = CONTROL.sub(_control_picture, ANSI.sub("", str(value))).replace("\n", " ")
    if len(s) > MAX_TEXT:
        s = s[:MAX_TEXT] + f" [... {len(s) - MAX_TEXT} more characters]"
    return "".join(f"&#{ord(c)};" if (c.isascii() and not c.isalnum() and c != " ") else c for c in s)


def code(value: object) -> str:
    """Inline code of `text(value)`: HTML <code>, because a Markdown code span would show the
    character references literally (`&#45;` for '-')."""
    return f"<code>{text(value)}</code>"


def _control_picture(match: re.Match) -> str:
    point = ord(match.group())
    return chr(0x2421) if point == 0x7F else chr(0x2400 + point)


def clean_output(raw: str) -> str:
    """Recorded output as plain text: escapes stripped, controls made visible, size bounded."""
    s = ANSI.sub("", raw.replace("\r\n", "\n"))
    lines = []
    for line in s.split("\n"):
        line = line.rsplit("\r", 1)[-1]  # a progress bar's last state, as a terminal shows it
        line = CONTROL.sub(_control_picture, line.replace("\t", "    "))
        if len(line) > MAX_LINE:
            line = line[:MAX_LINE] + f" [... {len(line) - MAX_LINE} more characters]"
        lines.append(line)
    if len(lines) > MAX_LINES:
        head, tail = lines[: MAX_LINES * 3 // 4], lines[-(MAX_LINES // 4):]
        lines = head + [f"[... {len(lines) - len(head) - len(tail)} lines not shown; "
                        "the evidence file has them ...]"] + tail
    return "\n".join(lines).rstrip("\n")


def code_block(body: str, lang: str = "text", attrs: str = "", indent: str = "") -> str:
    """A fenced block whose fence is longer than any backtick run inside it."""
    body = body.replace("\r\n", "\n").replace("\r", "\n")  # Markdown ends lines at \r too: indent every one
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    fence = "`" * max(3, longest + 1)
    head = f"{fence}{lang}" + (f" {attrs}" if attrs else "")
    lines = [head, *body.split("\n"), fence]
    return "\n".join(indent + line if line else line for line in lines)


def indent_block(markdown: str, indent: str) -> str:
    return "\n".join(indent + line if line else line for line in markdown.split("\n"))


# -- regions ----------------------------------------------------------------------

@dataclass(frozen=True)
class SourceLinks:
    page: str  # link to the full-source page, relative to the current page
    raw: str  # link to the downloadable file, relative to the current page


def snippet(region: Region, rel_path: str, links: SourceLinks) -> str:
    lines = f"line {region.start}" if region.start == region.end else f"lines {region.start}-{region.end}"
    title = f"{rel_path}, {lines}"
    block = code_block(region.text.rstrip("\n"), "python",
                       f'title="{_attr(title)}" linenums="{region.start}"')
    link = (f"[:material-file-code-outline: full source of `{rel_path}` from line {region.start}]"
            f"({links.page}#__codelineno-0-{region.start}){{ .vt-source-link }} · "
            f"[:material-download: download]({links.raw}){{ .vt-source-link }}")
    return f"{block}\n\n{link}"


def _attr(s: str) -> str:
    return s.replace("\\", "/").replace('"', "'")


def source_page(rel_path: str, source: str, regions: list[Region], raw_link: str) -> str:
    out = [f"# `{rel_path}`", "", f"[:material-download: Download `{rel_path}`]({raw_link})", ""]
    if regions:
        out.append("Regions shown on the lesson page: " + ", ".join(
            f"[`{r.name}`](#__codelineno-0-{r.start}) (lines {r.start}-{r.end})" for r in regions) + ".")
        out.append("")
    out.append(code_block(source.rstrip("\n"), "python", f'title="{_attr(rel_path)}" linenums="1"'))
    return "\n".join(out) + "\n"


# -- status -------------------------------------------------------------------------

def badge(status: str) -> str:
    return f'<span class="vt-badge {BADGE_CLASS[status]}">{status}</span>'


def status_admonition(st: LessonStatus, root: str) -> str:
    sentence = st.sentence.split(": ", 1)[1] if ": " in st.sentence else st.sentence
    body = text(sentence[:1].upper() + sentence[1:])
    short = st.source_hash[:12]
    return (f'!!! {BADGE_CLASS[st.status]} vt-status "{st.status}"\n'
            f"    {body}\n\n"
            f"    <small>Source hash {short}: the lesson file, `lesson.toml` and the local modules it "
            f"imports. [How verification works]({root}verification.md)</small>")


# -- output tabs ------------------------------------------------------------------

def mode_label(record: Record) -> str:
    return "Interpreter (CPU)" if record.mode == "interpreter" else f"GPU: {record.env.device_name}"


def environment_line(record: Record, current_hash: str) -> str:
    env = record.env
    parts = [f"Ran {record.started_utc.replace('T', ' ').replace('Z', ' UTC')}",
             f"on {env.device_name}" + (f" (compute capability {env.capability})" if env.capability else ""),
             f"Python {env.python}", f"torch {env.torch}", f"Triton {env.triton}"]
    if env.cuda:
        parts.append(f"CUDA {env.cuda}")
    if env.driver:
        parts.append(f"driver {env.driver}")
    parts.append(f"outcome {record.outcome}" + (f" (exit {record.exit_code})" if record.exit_code is not None else ""))
    parts.append(f"{record.wall_s:.1f} s")
    line = text(" · ".join(parts))
    command = text(record.command)
    stale = "" if record.source_hash == current_hash else (
        "\n\n**This run was for an older version of the source; it is shown for reference only.**")
    return f"{line}  \nCommand: <code>{command}</code>{stale}"


def output_tabs(st: LessonStatus) -> str:
    records = sorted(st.records, key=lambda r: (r.mode != "interpreter", r.key))
    if not records:
        return '!!! vt-unverified "No recorded runs"\n    Nothing has been recorded for this lesson yet.'
    out = []
    for record in records:
        out.append(f'=== "{text(mode_label(record))}"\n')  # a device name is recorded text, like any other
        body = [environment_line(record, st.source_hash), ""]
        if record.skipped_parts:
            items = "; ".join(f"{p.get('part', '')} ({p.get('reason', '')})" for p in record.skipped_parts)
            body += [f"Not run here: {text(items)}", ""]
        body.append("Standard output:\n")
        body.append(code_block(clean_output(record.stdout) or "(nothing)"))
        if record.stdout_omitted:
            body.append(f"\n{record.stdout_omitted} bytes of standard output were not kept.")
        if record.stderr.strip():
            body += ["", "Standard error:\n", code_block(clean_output(record.stderr))]
        out.append(indent_block("\n".join(body), "    "))
        out.append("")
    interp = st.lesson.modes["interpreter"]
    if not interp.supported:
        out.append(f'!!! note "Interpreter"\n    This lesson does not run under the interpreter: {text(interp.reason)}')
    if not any(r.mode == "gpu" for r in records):
        out.append('!!! note "GPU"\n    No GPU run has been recorded for this lesson.')
    return "\n".join(out).rstrip() + "\n"


# -- tables ------------------------------------------------------------------------

def md_table(columns: list[str], rows: list[list[str]], align: list[str] | None = None) -> str:
    align = align or ["---"] * len(columns)
    lines = ["| " + " | ".join(columns) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(cell or " " for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def checks_table(st: LessonStatus) -> str:
    records = sorted(st.records, key=lambda r: (r.mode != "interpreter", r.key))
    names: dict[str, None] = {}
    for record in records:
        for check in record.checks:
            names.setdefault(check.name)
    if not names:
        return "_No checks recorded._"
    mark = {"pass": ":material-check: pass", "fail": ":material-close: **fail**", "skip": ":material-minus: skip"}
    rows = []
    for name in names:
        row = [code(name)]
        for record in records:
            found = [c for c in record.checks if c.name == name]
            row.append(f"{mark.get(found[0].status, text(found[0].status))}: {text(found[0].message)}"
                       if found else "not run")
        rows.append(row)
    table = md_table(["Check"] + [text(mode_label(r)) for r in records], rows)
    if len(rows) <= COLLAPSE_CHECKS_OVER:
        return table
    # A long table folds away behind a summary; a failed or skipped check is never folded.
    counts = "; ".join(f"{text(mode_label(r))}: " + ", ".join(
        f"{sum(c.status == status for c in r.checks)} {status}" for status in ("pass", "fail", "skip")
        if any(c.status == status for c in r.checks)) for r in records if r.checks)
    out = [f"**{len(rows)} checks** recorded ({counts})."]
    notable = [row for row in rows if any(":material-close:" in cell or ":material-minus:" in cell for cell in row)]
    if notable:
        out += ["", "Failed or skipped:", "", md_table(["Check"] + [text(mode_label(r)) for r in records], notable)]
    out += ["", f'??? abstract "All {len(rows)} checks"', "", indent_block(table, "    ")]
    return "\n".join(out)


def fmt(x: float | None, digits: int = 4) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:.{digits}g}"


def _ratio(x: float | None) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.2f}x"


def target_cell(b: Benchmark) -> str:
    parts = []
    if b.threshold is not None:
        kind = "gate" if b.gate else "goal"
        parts.append(f"{kind} ≥ {b.threshold:.2f}x: " + ("met" if b.met else "**not met**"))
    if b.stretch is not None:
        parts.append(f"stretch ≥ {b.stretch:.2f}x: " + ("met" if b.stretch_met else "**not met**"))
    return "; ".join(parts) or "none (informational)"


def benchmark_rows(records: list[Record], with_lesson: bool = False, lesson_link: str = "") -> list[list[str]]:
    rows = []
    for record in records:
        for b in record.benchmarks:
            row = [lesson_link] if with_lesson else []
            row += [code(b.name), f"{fmt(b.measured)} {text(b.unit)}",
                    f"{fmt(b.baseline)} {text(b.unit)} ({text(b.baseline_name or 'baseline')})",
                    f"**{_ratio(b.ratio)}**", target_cell(b),
                    text(f"{record.env.device_name}, Triton {record.env.triton}, torch {record.env.torch}, "
                         f"{record.date}")]
            rows.append(row)
    return rows


BENCH_COLUMNS = ["Benchmark", "Measured", "Baseline", "Ratio", "Target", "Where and when"]


def benchmarks_table(st: LessonStatus) -> str:
    rows = benchmark_rows(sorted(st.records, key=lambda r: r.key))
    if not rows:
        return "_No benchmarks recorded yet: benchmarks run on a GPU only._"
    return md_table(BENCH_COLUMNS, rows, ["---", "---:", "---:", "---:", "---", "---"])


def result_table(st: LessonStatus, name: str) -> str | None:
    """A table a lesson recorded, from its newest GPU record (or interpreter); None when absent."""
    for record in sorted(st.records, key=lambda r: (r.mode == "interpreter", r.started_utc)):
        for table in record.tables:
            if table.name == name:
                caption = f"{text(table.caption)} " if table.caption else ""
                where = text(f"{mode_label(record)}, {record.date}")
                rows = [[text(fmt(c) if isinstance(c, float) else c) for c in row] for row in table.rows]
                return f"{md_table([text(c) for c in table.columns], rows)}\n\n<small>{caption}({where})</small>"
    return None


def figures(st: LessonStatus, link_prefix: str) -> str:
    out = []
    for record in sorted(st.records, key=lambda r: (r.mode == "interpreter", r.key)):
        for fig in record.figures:
            caption = text(fig.caption or fig.name)
            where = text(f"{mode_label(record)}, {record.date}")
            out.append(f'<figure markdown="span">\n  ![{caption}]({link_prefix}{st.lesson.name}/{fig.file})\n'
                       f"  <figcaption>{caption} ({where})</figcaption>\n</figure>")
    return "\n\n".join(out) or "_No figures recorded yet._"


# -- the ratio chart on the benchmarks page -------------------------------------------

def ratio_chart(bars: list[tuple[str, Benchmark]], clip: float = 2.0) -> str:
    """An inline SVG: one bar per benchmark (measured / baseline), a line at 1.0, ticks at its targets.

    Built from evidence at build time, so it needs no plotting library and
    cannot disagree with the table under it. Every label is escaped.
    """
    if not bars:
        return ""
    row_h, label_w, plot_w, top = 22, 440, 360, 24
    height = top + row_h * len(bars) + 10

    def x(ratio: float) -> float:
        return label_w + plot_w * min(max(ratio, 0.0), clip) / clip

    parts = [f'<svg class="vt-ratio-chart" viewBox="0 0 {label_w + plot_w + 60} {height}" role="img" '
             f'aria-label="Benchmark ratios: measured over baseline">']
    for tick in (0.5, 1.0, 1.5, 2.0):
        if tick <= clip:
            parts.append(f'<line x1="{x(tick):.1f}" y1="{top - 6}" x2="{x(tick):.1f}" y2="{height - 6}" '
                         f'class="{"vt-one" if tick == 1.0 else "vt-grid"}"/>')
            parts.append(f'<text x="{x(tick):.1f}" y="{top - 10}" class="vt-axis">{tick:.1f}x</text>')
    for i, (label, b) in enumerate(bars):
        y = top + i * row_h
        ratio = b.ratio if isinstance(b.ratio, (int, float)) and not math.isnan(b.ratio) else 0.0
        missed = (b.met is False) or (b.stretch_met is False)
        cls = "vt-bar-missed" if missed else ("vt-bar-info" if b.threshold is None else "vt-bar-met")
        parts.append(f'<text x="{label_w - 8}" y="{y + 14}" class="vt-label">{html.escape(label)}</text>')
        parts.append(f'<rect x="{label_w}" y="{y + 3}" width="{x(ratio) - label_w:.1f}" height="{row_h - 8}" '
                     f'class="{cls}"><title>{html.escape(f"{label}: {ratio:.3f}x")}</title></rect>')
        for target, kind in ((b.threshold, "vt-gate"), (b.stretch, "vt-stretch")):
            if target is not None:
                parts.append(f'<line x1="{x(target):.1f}" y1="{y + 1}" x2="{x(target):.1f}" y2="{y + row_h - 3}" '
                             f'class="{kind}"/>')
        shown = f"{ratio:.2f}x" + (" ›" if ratio > clip else "")
        parts.append(f'<text x="{x(ratio) + 4:.1f}" y="{y + 14}" class="vt-value">{shown}</text>')
    parts.append("</svg>")
    caption = ("Measured / baseline for every benchmark above. Green: every target met; amber: a goal or "
               "stretch target missed; grey: informational. Dark tick: the gate or goal; light tick: the stretch "
               f"target. Bars past {clip:.1f}x are cut, with the value printed.")
    return (f'<figure class="vt-chart">\n{"".join(parts)}\n<figcaption>{html.escape(caption)}</figcaption>\n'
            f"</figure>")
