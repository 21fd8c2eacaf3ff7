"""How long each lesson page is and what it repeats, from the built site (issue 32's numbers).

    .venv/bin/mkdocs build -d /tmp/site && .venv/bin/python tests/page_metrics.py /tmp/site [OUT.json] [--shots DIR]
    .venv/bin/python tests/page_metrics.py --reading /tmp/site     # issue 51's reading goals, per lesson page

Per lesson page, in Debian's Chromium (Playwright), the page as it opens (every fold closed, the first tab
of each set shown) and with every fold and tab open:
- words of prose and tables (code blocks left out) in the default view, and counting folded parts;
- lines of code shown in the default view, and counting folded parts;
- screens: the page's height over the window's at 1440x900 and at 390x844, default view;
- repeats: how many times each recorded result (every benchmark's measured and baseline value of the
  records the page shows) appears in the default view's text, code and output included (figures are
  pictures, not counted);
- caption ranges: snippet captions ("lines 29-41") against the first and last line numbers their block
  shows, right and wrong (from the HTML alone: `caption_ranges`);
and for the whole site the search-index entries with raw LaTeX (`raw_latex_entries`).

With --shots DIR it also writes screenshots of the home page and two lesson pages at 1440 and 390, light
and dark: the first screen (NAME-WIDTH[-dark].png) and the whole page (NAME-WIDTH[-dark]-full.png).
The two functions that read only files are what tests/test_site.py asserts on.
"""

from __future__ import annotations

import base64
import html as htmllib
import json
import math
import re
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHOT_PAGES = ("index.md", "lessons/fused-attention.md", "lessons/gluon-basics.md")


# -- from the HTML alone ------------------------------------------------------------------------

CAPTIONED_BLOCK = re.compile(
    r'<span class="filename">(?P<title>[^<]*)</span><pre><span></span>'
    r'<code class="vt-lines" style="counter-reset:vt-line (?P<before>\d+);[^"]*">(?P<body>.*?)</code></pre>', re.S)
CAPTION_RANGE = re.compile(r", lines? (?P<first>\d+)(?:-(?P<last>\d+))?$")


@dataclass(frozen=True)
class Caption:
    title: str
    named: tuple[int, int]  # the first and last line the caption names
    shown: tuple[int, int]  # the first and last line number the block shows

    @property
    def right(self) -> bool:
        return self.named == self.shown


def caption_ranges(page_html: str) -> list[Caption]:
    """Every snippet block of a built page whose caption names lines: what it names, what it shows.

    A numbered block is `code.vt-lines` (tools/verified_triton/site/reader_hooks.py): its first number is
    the counter's reset plus one, and each line of code is one child span."""
    out = []
    for m in CAPTIONED_BLOCK.finditer(page_html):
        title = htmllib.unescape(m["title"])
        named = CAPTION_RANGE.search(title)
        if not named:
            continue
        lines = m["body"].count("\n</span>") or (1 if m["body"].strip() else 0)
        first = int(m["before"]) + 1
        last_named = int(named["last"] or named["first"])
        out.append(Caption(title, (int(named["first"]), last_named), (first, first + lines - 1)))
    return out


MATH = re.compile(r"\\\(|\\\[|\\begin\{")
CODE = re.compile(r"<(code|pre)\b.*?</\1>", re.S)


def raw_latex_entries(index: dict) -> list[str]:
    """The locations of search-index entries whose text (code left out) holds a LaTeX delimiter."""
    return [e["location"] for e in index["docs"] if MATH.search(CODE.sub("", e.get("text", "")))]


# -- in the browser --------------------------------------------------------------------------------

# Words of prose and tables (code blocks hidden) and lines of code, as the page opens or with every fold
# and tab open; innerText leaves out what is not rendered (a closed fold's body, a hidden tab).
MEASURE = """(open) => {
  const article = document.querySelector('.md-content__inner');
  const style = document.createElement('style');
  document.head.appendChild(style);
  if (open) {
    article.querySelectorAll('details').forEach(d => { d.open = true; });
    style.textContent = '.tabbed-set > .tabbed-content > .tabbed-block { display: block !important; }';
  }
  const codeLines = [...article.querySelectorAll('pre > code')].filter(c => c.offsetParent !== null)
    .reduce((n, c) => n + c.innerText.replace(/\\n$/, '').split('\\n').length, 0);
  const all = article.innerText;
  style.textContent += ' .md-content pre { display: none !important; }';
  const prose = article.innerText;
  style.remove();
  const words = prose.split(/\\s+/).filter(w => /[\\p{L}\\p{N}]/u.test(w)).length;
  return {words, codeLines, text: all};
}"""


def recorded_numbers(lesson) -> list[tuple[str, float]]:
    """(label, value) of each benchmark's measured and baseline value in the records the page shows."""
    from verified_triton.judge.status import judge
    from verified_triton.site.directives.common import gpu_first

    st = judge(lesson, ROOT / "evidence")
    out = []
    for record in gpu_first(st):
        for b in record.benchmarks:
            out += [(f"{b.label} ({record.mode})", b.measured), (f"{b.label} baseline ({record.mode})", b.baseline)]
    return out


NUMBER = re.compile(r"(?<![\w.])\d{1,3}(?:,\d{3})+(?:\.\d+)?|(?<![\w.,])\d+(?:\.\d+)?")


def written_as(value: float, token: str) -> bool:
    """Whether `token` (a number as the page writes it, with at least 3 significant digits) is `value` written to
    the token's decimals (4,020 and 4020.3 are both 4020.31; 4.0 is not)."""
    digits = token.replace(",", "")
    decimals = len(digits.split(".")[1]) if "." in digits else 0
    if len(digits.replace(".", "").lstrip("0")) < 3:
        return False
    return abs(round(value, decimals) - float(digits)) < 0.5 * 10 ** -decimals + 1e-12 \
        and f"{round(value, decimals):.{decimals}f}" == digits


def appearances(value: float, text: str, others: Sequence[float] = ()) -> float:
    """How many numbers in `text` are `value` as written. A number that several measured values of the record
    (`others`, `value` among them) read as alike counts as a share of one each: 3.62 is both 3.616 and 3.620 when
    one kernel is timed against two baselines, and shown once per comparison."""
    count = 0.0
    for token in NUMBER.findall(text):
        if written_as(value, token):
            count += 1 / max(1, sum(1 for other in others if written_as(other, token)))
    return count


def measure_pages(site: Path, shots: Path | None) -> dict:
    sys.path[:0] = [str(ROOT / "tools"), str(ROOT / "tests")]
    from test_browser import PHONE, WIDE, chromium, open_page, page_url, serve, toggle_palette
    from verified_triton.core.lessons import discover

    lessons = discover(ROOT / "code")
    out: dict = {}
    with serve(site) as base, chromium() as browser:
        for width, viewport in (("1440", WIDE), ("390", PHONE)):
            ctx = browser.new_context(viewport=viewport, color_scheme="light")
            page = open_page(ctx, base).page
            for lesson in lessons:
                page.goto(page_url(base, lesson.page), wait_until="load")
                row = out.setdefault(lesson.name, {})
                height = page.evaluate("() => document.documentElement.scrollHeight")
                row[f"screens_{width}"] = round(height / viewport["height"], 1)
                if width != "1440":
                    continue
                shut, opened = page.evaluate(MEASURE, False), page.evaluate(MEASURE, True)
                row.update(words=shut["words"], words_all=opened["words"], code=shut["codeLines"],
                           code_all=opened["codeLines"])
                counts = {label: appearances(value, shut["text"]) for label, value in recorded_numbers(lesson)}
                row["results"] = len(counts)
                row["repeats_max"] = max(counts.values(), default=0)
                row["repeats_mean"] = round(sum(counts.values()) / len(counts), 1) if counts else 0
                row["repeated"] = sorted(((n, label) for label, n in counts.items() if n > 1), reverse=True)[:3]
                captions = caption_ranges((site / page_url("", lesson.page) / "index.html").read_text("utf-8"))
                row["captions_right"] = sum(c.right for c in captions)
                row["captions_wrong"] = len(captions) - row["captions_right"]
            ctx.close()
        if shots:
            take_shots(browser, base, shots, page_url, open_page, toggle_palette, WIDE, PHONE)
    index = json.loads((site / "search" / "search_index.json").read_text("utf-8"))
    raw = raw_latex_entries(index)
    return {"pages": out, "search_entries": len(index["docs"]), "search_raw_latex": len(raw)}


def take_shots(browser, base, shots: Path, page_url, open_page, toggle_palette, wide, phone) -> None:
    shots.mkdir(parents=True, exist_ok=True)
    for doc in SHOT_PAGES:
        name = Path(doc).stem.replace("index", "home")
        for width, viewport in (("1440", wide), ("390", phone)):
            ctx = browser.new_context(viewport=viewport, color_scheme="light")
            page = open_page(ctx, base).page
            for dark in (False, True):
                page.goto(page_url(base, doc), wait_until="networkidle")
                toggle_palette(page, "slate" if dark else "default")
                page.evaluate("() => document.querySelectorAll('img').forEach(i => { i.loading = 'eager'; })")
                page.wait_for_load_state("networkidle")
                page.wait_for_timeout(200)
                stem = f"{name}-{width}" + ("-dark" if dark else "")
                page.screenshot(path=str(shots / f"{stem}.png"))
                cdp = ctx.new_cdp_session(page)
                size = cdp.send("Page.getLayoutMetrics")["cssContentSize"]
                shot = cdp.send("Page.captureScreenshot", {
                    "format": "png", "captureBeyondViewport": True, "optimizeForSpeed": True,
                    "clip": {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}})
                (shots / f"{stem}-full.png").write_bytes(base64.b64decode(shot["data"]))
                cdp.detach()
            ctx.close()


# -- the reading goals (issue 51 item 2; issue 48 item 2) ---------------------------------------------

# The converted lessons are tests/converted.py's CONVERTED, the one list a lesson helper extends when it converts a
# lesson (docs/writing-a-lesson.md, "Converting a lesson"): the goals below hold for each of them, and the course's
# median height once every lesson is there. Goals that depend on what the GPU run recorded (the GPU named, a
# headline number repeated, a recorded label's caret) are held once that run is current: until the recording
# round, a page shows its older run's machine and date beside each of its results, marked as older.
# A goal a converted page does not meet yet, with why; the lesson's helper empties it (a met one fails too).
# ("course", "median_height_1440") is the course-wide median's entry.
NOT_YET: dict[tuple[str, str], str] = {}
COURSE = "course"


def converted_lessons() -> tuple[str, ...]:
    from converted import CONVERTED  # tests/converted.py

    return tuple(CONVERTED)


@dataclass(frozen=True)
class Goals:
    median_height: int = 8_000  # px at 1440x900, every fold closed, over the course's lesson pages
    max_height: int = 12_000  # px at 1440x900, every fold closed, any converted lesson page
    gpu_mentions: int = 3  # the GPU model named in the page's visible text
    interval_mentions: int = 2  # "95 % interval" in the page's visible text
    headline_repeats: int = 1  # each headline number (a benchmark's ratio, its kernel's value) shown at most
    status_words: int = 30  # visible words of the status line, its link to the record included (its badge is
    # the chip before it)


GOALS = Goals()

# What a reader sees as the page opens: the article's visible text (a closed fold shows its title only, a tab
# set its first tab), the page's height, and the status line's words (its badge's chip left out).
READING = """() => {
  const article = document.querySelector('.md-content__inner');
  const status = article.querySelector('.admonition.vt-status');
  let statusText = '';
  if (status) {  // what shows of it (a closed fold inside shows its title only), its badge's chip left out
    const title = status.querySelector(':scope > .admonition-title');
    statusText = status.innerText.replace(title ? title.innerText : '', '');
  }
  // the prose a reader sees: no code, no maths, no closed fold's body, no hidden tab
  const prose = article.cloneNode(true);
  prose.querySelectorAll('pre, code, .arithmatex, .katex, details:not([open]) > :not(summary), '
                         + '.tabbed-content > .tabbed-block:not(:first-child)').forEach(e => e.remove());
  return {height: document.documentElement.scrollHeight, text: article.innerText, statusText,
          prose: prose.textContent, recordLink: status ? !!status.querySelector('a.vt-record-link') : false};
}"""
INTERVAL_WORDS = re.compile(r"95\s*%\s*(?:confidence\s+)?interval", re.I)
CARET_WORD = re.compile(r"\S*[\w)\]}]\^[-+]?[\w({]\S*")  # a power written with a caret, as prose_lint's rule


def words(text: str) -> int:
    return sum(1 for w in text.split() if re.search(r"[^\W_]", w))


def gpu_models(evidence: Path) -> list[str]:
    """The GPU models the course's records name ("H200", "H100"), as prose names them: the device's name
    without the vendor and the memory ("NVIDIA H100 80GB HBM3" is the H100)."""
    models = set()
    for path in sorted(evidence.glob("*/*.json")):
        try:
            device = json.loads(path.read_text("utf-8")).get("env", {}).get("device_name", "")
        except (OSError, ValueError):
            continue
        parts = [p for p in device.split() if p.upper() not in ("NVIDIA", "TESLA", "GEFORCE")]
        if parts and parts[0] != "CPU":
            models.add(parts[0])
    return sorted(models)


def mentions(names: list[str], text: str) -> int:
    return sum(len(re.findall(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text)) for name in names)


def headline_numbers(lesson) -> list[tuple[str, str, float | None, float | None]]:
    """(label, ratio as the page writes it, kernel value, baseline value) of each benchmark of the GPU record the
    page shows (its current one, else one of an older source, which the page shows marked)."""
    from verified_triton.core.numfmt import fixed
    from verified_triton.judge.status import judge
    from verified_triton.site.directives.common import gpu_first

    record = next((r for r in gpu_first(judge(lesson, ROOT / "evidence")) if r.mode == "gpu"), None)
    return [(b.label, fixed(b.ratio), b.measured, b.baseline) for b in record.benchmarks] \
        if record else []


def gpu_current(lesson) -> bool:
    """Whether the lesson's GPU run is recorded for its current source."""
    from verified_triton.judge.status import judge

    st = judge(lesson, ROOT / "evidence")
    record = st.modes["gpu"].record
    return record is not None and st.is_current(record)


THRESHOLD_WORDS = ("gate", "goal", "stretch")  # a goal's threshold as results write it: "gate 0.95×"


def ratio_appearances(shown: str, text: str) -> int:
    """How often a ratio as written ('0.96') appears as a ratio ('0.96×', '0.96x') in `text`; a goal's threshold
    that happens to be the same number ('gate 0.96×', 'stretch 0.96×') is the lesson's goal, not a measure."""
    return sum(1 for m in re.finditer(rf"(?<![\d.]){re.escape(shown)}\s?[×x](?![\w])", text)
               if not text[:m.start()].rstrip().endswith(THRESHOLD_WORDS))


def headline_repeats(lesson, text: str, numbers=None) -> tuple[int, str]:
    """The most times one headline number appears in `text`, and which; a ratio (a value) that several benchmarks
    (several kernel or baseline values of the record) share counts once per benchmark (value) that has it: one
    kernel measured against two baselines shows its value once per comparison."""
    numbers = headline_numbers(lesson) if numbers is None else numbers
    values = [v for _, _, kernel, base in numbers for v in (kernel, base) if v]
    worst, which = 0, ""
    for label, shown, value, _ in numbers:
        same = sum(1 for _, other, _, _ in numbers if other == shown)
        for n, what in ((ratio_appearances(shown, text) / same, f"{shown}× ({label})"),
                        (appearances(value, text, values) if value else 0, f"{value:.4g} ({label})")):
            if n > worst:
                worst, which = n, what
    return math.ceil(worst - 1e-9), which  # one more than its share shows as a repeat


def reading_measures(browser, base: str, lessons, wide: dict, phone: dict, page_url) -> dict[str, dict]:
    """Each lesson page's reading measures, as it opens: height at 1440 and 390, GPU and interval mentions,
    the most repeated headline number and the status line's words (at 1440)."""
    models = gpu_models(ROOT / "evidence")
    out: dict[str, dict] = {}
    for width, viewport in (("1440", wide), ("390", phone)):
        ctx = browser.new_context(viewport=viewport, color_scheme="light")
        page = ctx.new_page()
        for lesson in lessons:
            page.goto(page_url(base, lesson.page), wait_until="load")
            seen = page.evaluate(READING)
            row = out.setdefault(lesson.name, {})
            row[f"height_{width}"] = seen["height"]
            if width != "1440":
                continue
            repeats, which = headline_repeats(lesson, seen["text"])
            row["current"] = gpu_current(lesson)
            row.update(gpu=mentions(models, seen["text"]), interval=len(INTERVAL_WORDS.findall(seen["text"])),
                       repeats=repeats, repeated=which, status_words=words(seen["statusText"]),
                       record_link=seen["recordLink"], carets=sorted({m.group(0) for m in CARET_WORD.finditer(
                           seen["prose"])}))
        ctx.close()
    return out


def reading_table(measures: dict[str, dict], converted: tuple[str, ...] | None = None) -> str:
    """The measures as a Markdown table, each page's, then the course's median and max heights."""
    converted = converted_lessons() if converted is None else converted
    head = ("| Lesson | Converted | Height 1440 | Height 390 | GPU named | \"95 % interval\" | Most repeated "
            "headline number | Status words | Carets in prose |")
    lines = [head, "|" + " --- |" * (head.count("|") - 1)]
    for name, r in measures.items():
        mark = ("yes" if r.get("current", True) else "yes, GPU run awaited") if name in converted else ""
        lines.append(f"| {name} | {mark} | {r['height_1440']:,} | "
                     f"{r['height_390']:,} | {r['gpu']} | {r['interval']} | {r['repeats']}"
                     f"{' (' + r['repeated'] + ')' if r['repeats'] > 1 else ''} | {r['status_words']} | "
                     f"{', '.join(r['carets'][:4]) or 0} |")
    for width in ("1440", "390"):
        heights = [r[f"height_{width}"] for r in measures.values()]
        lines.append(f"\nat {width} px: median height {statistics.median(heights):,.0f} px, max {max(heights):,} px "
                     f"({max(measures, key=lambda n: measures[n][f'height_{width}'])})")
    return "\n".join(lines)


def goal_problems(measures: dict[str, dict], converted: tuple[str, ...] | None = None, goals: Goals = GOALS,
                  not_yet: dict[tuple[str, str], str] | None = None) -> list[str]:
    """What misses a goal: on every lesson page, the status line (at most 30 words, a link to the record); on
    each converted page, its height and "95 % interval", and once its GPU run is current the GPU named, repeated
    headline numbers and carets in its prose (recorded labels and captions included); once every lesson is
    converted, the course's median height. A miss NOT_YET lists is no problem; a listed goal that is met is one."""
    converted = converted_lessons() if converted is None else converted
    not_yet = NOT_YET if not_yet is None else not_yet
    problems, missed = [], set()
    for name, r in measures.items():
        if r["status_words"] > goals.status_words:
            problems.append(f"{name}: the status line has {r['status_words']} words (at most {goals.status_words})")
        if not r["record_link"]:
            problems.append(f"{name}: the status line does not link the record")
        if name not in converted:
            continue
        held = [("height_1440", goals.max_height, "px tall at 1440 px"),
                ("interval", goals.interval_mentions, 'times "95 % interval"')]
        if r.get("current", True):
            held += [("gpu", goals.gpu_mentions, "mentions of the GPU model"),
                     ("repeats", goals.headline_repeats, "times one headline number")]
        for key, most, what in held:
            if r[key] > most:
                missed.add((name, key))
                extra = f": {r['repeated']}" if key == "repeats" else ""
                if (name, key) not in not_yet:
                    problems.append(f"{name}: {r[key]:,} {what} (at most {most:,}){extra}")
        if r.get("current", True) and r["carets"]:  # a recorded label or caption too: 4096³, not 4096^3
            missed.add((name, "carets"))
            if (name, "carets") not in not_yet:
                problems.append(f"{name}: carets in the prose a reader sees: {', '.join(r['carets'][:5])}")
    problems += [f"NOT_YET lists {name}'s {key}, which it meets now: take it off" for name, key in not_yet
                 if name in measures and (name, key) not in missed]
    problems += [f"CONVERTED names '{name}', which is no lesson" for name in sorted(set(converted) - set(measures))]
    if measures and set(measures) <= set(converted):
        median = statistics.median(r["height_1440"] for r in measures.values())
        if median > goals.median_height:
            missed.add((COURSE, "median_height_1440"))
            if (COURSE, "median_height_1440") not in not_yet:
                problems.append(f"the course's median height at 1440 px is {median:,.0f} px (at most "
                                f"{goals.median_height:,})")
        elif (COURSE, "median_height_1440") in not_yet:
            problems.append("NOT_YET lists the course's median height, which it meets now: take it off")
    return problems


def table(result: dict) -> str:
    """The per-page table, Markdown, and the site's totals."""
    head = ("| Lesson | Words shown | Words with folds | Code lines shown | Code with folds | Screens 1440 | "
            "Screens 390 | Results | Max repeats | Mean repeats | Captions right/wrong |")
    lines = [head, "|" + " --- |" * (head.count("|") - 1)]
    pages = result["pages"]
    for name, r in pages.items():
        lines.append(f"| {name} | {r['words']:,} | {r['words_all']:,} | {r['code']} | {r['code_all']} | "
                     f"{r['screens_1440']} | {r['screens_390']} | {r['results']} | {r['repeats_max']} | "
                     f"{r['repeats_mean']} | {r['captions_right']}/{r['captions_wrong']} |")
    right = sum(r["captions_right"] for r in pages.values())
    wrong = sum(r["captions_wrong"] for r in pages.values())
    over = sorted(name for name, r in pages.items() if r["words"] > 3500)
    lines += ["", f"captions: {right + wrong} with a line range, {wrong} naming other lines than they show",
              f"pages over 3,500 words in the default view: {len(over)} ({', '.join(over)})",
              f"search: {result['search_raw_latex']} of {result['search_entries']} entries hold raw LaTeX"]
    return "\n".join(lines)


def print_reading(site: Path) -> None:
    """Each lesson page's reading measures for a built site, and what misses a goal."""
    sys.path[:0] = [str(ROOT / "tools"), str(ROOT / "tests")]
    from test_browser import PHONE, WIDE, chromium, page_url, serve
    from verified_triton.core.lessons import discover

    with serve(site) as base, chromium() as browser:
        measures = reading_measures(browser, base, discover(ROOT / "code"), WIDE, PHONE, page_url)
    print(reading_table(measures))
    print("\n".join(["", "goals missed:", *goal_problems(measures)]) if goal_problems(measures) else "\nall goals met")


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["--reading"] and len(args) == 2:
        print_reading(Path(args[1]))
        sys.exit(0)
    shots = None
    if "--shots" in args:
        i = args.index("--shots")
        shots = Path(args[i + 1])
        del args[i:i + 2]
    if not args:
        sys.exit(__doc__.split("\n\n")[1])
    result = measure_pages(Path(args[0]), shots)
    print(table(result))
    if len(args) > 1:
        Path(args[1]).write_text(json.dumps(result, indent=1), encoding="utf-8")
