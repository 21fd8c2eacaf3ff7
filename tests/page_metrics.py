"""How long each lesson page is and what it repeats, from the built site (issue 32's numbers).

    .venv/bin/mkdocs build -d /tmp/site && .venv/bin/python tests/page_metrics.py /tmp/site [OUT.json] [--shots DIR]

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
import re
import sys
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


def appearances(value: float, text: str) -> int:
    """How many numbers in `text` are `value` as written to some decimals, with at least 3 significant digits
    (4,020 and 4020.3 are both 4020.31; 4.0 is not)."""
    count = 0
    for token in NUMBER.findall(text):
        digits = token.replace(",", "")
        decimals = len(digits.split(".")[1]) if "." in digits else 0
        if len(digits.replace(".", "").lstrip("0")) < 3:
            continue
        if abs(round(value, decimals) - float(digits)) < 0.5 * 10 ** -decimals + 1e-12 \
                and f"{round(value, decimals):.{decimals}f}" == digits:
            count += 1
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


if __name__ == "__main__":
    args = sys.argv[1:]
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
