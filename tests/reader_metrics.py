"""What a reader on a phone, a keyboard or the search box gets from the built site, in numbers (issue 25).

The browser tests (tests/test_browser.py) assert on these measures; run on its own, this module prints
the figures the issue's closing note compares, before and after (tests/page_metrics.py prints issue 32's:
words, code lines and screens per lesson page, repeats, caption ranges and the search index's maths):

    .venv/bin/mkdocs build -d /tmp/site && .venv/bin/python tests/reader_metrics.py /tmp/site

It serves the site on 127.0.0.1, opens each page in Debian's Chromium (Playwright) at 390x844 and
1440x900, light and dark, and measures in the page: code lines hidden, tables cut, chart bars out of
view, figure scale (phones); axe-core's WCAG 2.1 A/AA violations and Tab presses to the first section
(accessibility); where the first sentence starts (above the fold); the rank of the expected page for the
searches in SEARCHES typed into Material's search box; the bytes each page loads (weight).

axe-core is not vendored: `tools/dev.sh test` unpacks the pinned npm package (AXE_VERSION) into
.cache/axe-core/ and the file is checked against AXE_SHA256 here, so every run measures with the
same rules.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
AXE_VERSION = "4.14.1"
AXE_SHA256 = "29348999450cdf2849a8e70b7912fc2da85a849da39c0d0d5394f51d4a9ed95c"
AXE_FILE = ROOT / ".cache" / "axe-core" / "axe.min.js"
WCAG = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]

# The queries of issue 25 and the page each must find in its first three results (docs-relative).
SEARCHES = {
    "associative_scan": "lessons/reductions-scans.md",
    "make_tensor_descriptor": "lessons/persistent-tma-matmul.md",
    "atomic_add": "lessons/split-k.md",
    "tl.dot": "lessons/fp16-matmul.md",
    "softmax": "lessons/softmax-fp32-matmul.md",  # first, not only in the top three
    "dropout": "lessons/dropout.md",
    "rope": "lessons/rmsnorm-rope.md",
    "split-k": "lessons/split-k.md",
    "grouped gemm": "lessons/grouped-gemm.md",
    "fp8": "lessons/fp8-matmul.md",
    "autotune": "lessons/autotune.md",
    "interpreter": "verification.md",
    # issue 32: a reader asking why a kernel is slow, or how to profile or debug one, lands on the lesson that
    # teaches it (its title, which Material's index boosts 1000-fold, has all three words: "Debugging and
    # profiling: wrong answers, bad memory, slow kernels"; lunr's stemmer makes "profile" match "profiling")
    "slow": "lessons/profiling-debugging.md",
    "profile": "lessons/profiling-debugging.md",
    "debug": "lessons/profiling-debugging.md",
}
FIRST_ONLY = {"softmax", "slow", "profile", "debug"}
# The pages axe-core checks: home, status, benchmarks, the verification page and three lessons.
AXE_PAGES = ["index.md", "status.md", "benchmarks.md", "verification.md", "lessons/vector-add.md",
             "lessons/fp16-matmul.md", "lessons/attention-backward.md", "lessons/gluon-attention.md",
             "lessons/fp16-matmul/record.md"]  # a partial by design's status line, and a lesson's record


def axe_source() -> str:
    """The pinned axe-core, or an error that says how to get it."""
    if not AXE_FILE.is_file():
        raise FileNotFoundError(f"{AXE_FILE} is missing: `bash tools/dev.sh test` unpacks axe-core {AXE_VERSION} "
                                f"there (npm pack axe-core@{AXE_VERSION})")
    data = AXE_FILE.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != AXE_SHA256:
        raise ValueError(f"{AXE_FILE}: sha256 {digest}, not axe-core {AXE_VERSION}'s {AXE_SHA256}")
    return data.decode("utf-8")


# -- phones ------------------------------------------------------------------------------------

# Code blocks that scroll sideways, and lines of lesson code (blocks with line numbers: Pygments' .linenos
# spans before issue 25, code.vt-lines after) whose end is past
# the block's visible right edge; the columns of code a block shows. Every fold and tab is opened first.
CODE_FIT = """() => {
  document.querySelectorAll('.md-content details').forEach(d => { d.open = true; });
  const out = {blocks: 0, scrolling: 0, lines: 0, hidden: 0, columns: null};
  const blocks = () => [...document.querySelectorAll('.md-content pre > code')].filter(c => c.offsetWidth);
  const seen = new Set(), range = document.createRange();
  const measure = () => {
    for (const code of blocks()) {
      if (seen.has(code)) continue;
      seen.add(code);
      out.blocks++;
      code.scrollLeft = 0;
      if (code.scrollWidth > code.clientWidth + 1) out.scrolling++;
      const box = code.getBoundingClientRect();
      const style = getComputedStyle(code);
      const right = box.left + code.clientLeft + code.clientWidth - parseFloat(style.paddingRight);
      const lines = code.classList.contains('vt-lines') ? [...code.querySelectorAll(':scope > span')]
        : [...code.querySelectorAll(':scope > span')].filter(l => l.querySelector('.linenos'));
      const scrolls = code.scrollWidth > code.clientWidth + 1;  // spaces left hanging at a wrap are not hidden
      for (const line of lines) {
        out.lines++;
        if (!scrolls) continue;
        range.selectNodeContents(line);  // the line's text, not its box (a line is display: block)
        const ends = [...range.getClientRects()].map(r => r.right);
        if (ends.length && Math.max(...ends) > right + 1) out.hidden++;
      }
      if (lines.length && out.columns === null) {
        const probe = document.createElement('span');
        probe.textContent = '0'.repeat(20);
        probe.style.cssText = 'white-space: pre; display: inline-block';
        lines[0].appendChild(probe);  // inside a line: code's own children are made blocks
        const ch = probe.getBoundingClientRect().width / 20;
        probe.remove();
        range.selectNodeContents(lines[0]);
        const number = lines[0].querySelector('.linenos');  // a span (Pygments), or none (a CSS counter)
        if (number) range.setStartAfter(number.parentElement === lines[0] ? number : number.parentElement);
        const start = Math.min(...[...range.getClientRects()].map(r => r.left));  // after the line number
        out.columns = Math.floor((right - start) / ch);
      }
    }
  };
  measure();
  for (const set of document.querySelectorAll('.md-content .tabbed-set')) {
    const inputs = [...set.querySelectorAll(':scope > input')];
    inputs.slice(1).forEach(input => { input.checked = true; measure(); });
    if (inputs.length) inputs[0].checked = true;
  }
  return out;
}"""

# Tables (not code) with columns past the right edge of what the reader sees without scrolling: the
# table's frame, and the window. `columns` lists, per cut table, how many header cells are in view;
# `unlabelled`, the tables shown as cards whose cells do not name their column.
TABLE_FIT = """async () => {
  // a table reflows (assets/javascripts/reader.js) when it gets its size: two frames after it is shown
  const settle = () => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)));
  document.querySelectorAll('.md-content details').forEach(d => { d.open = true; });
  await settle();
  const out = {tables: 0, cut: 0, cutTables: [], unlabelled: []};
  const seen = new Set();
  const measure = () => {
    for (const table of document.querySelectorAll('.md-content table')) {
      if (table.closest('.highlight') || !table.offsetWidth || seen.has(table)) continue;
      seen.add(table);
      out.tables++;
      const frame = table.closest('.md-typeset__scrollwrap') || table.parentElement;
      frame.scrollLeft = 0;
      const fr = frame.getBoundingClientRect();
      const right = Math.min(fr.left + frame.clientWidth, window.innerWidth);
      // a header row hidden from sight but kept for screen readers (a table shown as cards) is not cut
      const hidden = head => head && getComputedStyle(head).clipPath !== 'none';
      const shown = c => c.offsetWidth && !hidden(c.closest('thead'));
      const cells = [...table.querySelectorAll('th, td')].filter(shown);
      // a table shown as cards names each cell's column beside it (data-label): a card of bare numbers is
      // no table
      if (table.hasAttribute('data-vt-cards')) {
        const bare = [...table.querySelectorAll('tbody td')].filter(c => c.textContent.trim() && !c.dataset.label);
        const rows = table.querySelectorAll('tbody tr').length;
        if (bare.length) out.unlabelled.push(
          `${bare.length} cells of a table of ${rows} rows, first: ${bare[0].textContent.trim().slice(0, 30)}`);
      }
      const out_of_view = cells.filter(c => c.getBoundingClientRect().right > right + 1);
      if (out_of_view.length) {
        out.cut++;
        const heads = [...table.querySelectorAll('thead th')];
        out.cutTables.push({head: heads.map(h => h.innerText.trim()).join(' | ').slice(0, 80),
                            columns: heads.length,
                            inView: heads.filter(h => h.getBoundingClientRect().right <= right + 1).length});
      }
    }
  };
  measure();
  for (const set of document.querySelectorAll('.md-content .tabbed-set')) {
    const inputs = [...set.querySelectorAll(':scope > input')];
    for (const input of inputs.slice(1)) { input.checked = true; await settle(); measure(); }
    if (inputs.length) inputs[0].checked = true;
  }
  return out;
}"""

# The ratio chart's bars: how many lie wholly inside the window and the chart's frame, as drawn.
CHART_FIT = """() => [...document.querySelectorAll('.md-content .vt-chart')].map(chart => {
  const frame = chart.getBoundingClientRect();
  const left = Math.max(frame.left, 0), right = Math.min(frame.left + chart.clientWidth, window.innerWidth);
  const bars = [...chart.querySelectorAll('rect, [class^="vt-bar-"]')];  // SVG before issue 25, HTML after
  const inView = bars.filter(b => { const r = b.getBoundingClientRect();
                                    return r.left >= left - 1 && r.right <= right + 1 && r.height > 0; });
  const svg = chart.querySelector('svg');
  return {bars: bars.length, inView: inView.length, drawn: Math.round(svg ? svg.getBoundingClientRect().width
          : chart.scrollWidth), frame: Math.round(chart.clientWidth)};
})"""

# Each figure image shown: its drawn width over its natural width.
FIGURE_SCALE = """() => [...document.querySelectorAll('.md-content figure.vt-figure img')]
  .filter(i => i.offsetWidth && i.naturalWidth).map(i => i.offsetWidth / i.naturalWidth)"""


# -- accessibility -----------------------------------------------------------------------------

AXE_RUN = """async (tags) => {
  const result = await axe.run(document, {runOnly: {type: 'tag', values: tags}, resultTypes: ['violations']});
  return result.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.map(n => ({target: n.target.join(' '), summary: n.failureSummary,
                              html: n.html.slice(0, 160)}))}));
}"""


def axe_violations(page) -> list[dict]:
    """axe-core's WCAG 2.1 A/AA violations on the page as it is now."""
    if not page.evaluate("() => typeof axe !== 'undefined'"):
        page.add_script_tag(content=axe_source())
    return page.evaluate(AXE_RUN, WCAG)


def tab_stops(page, limit: int = 2000) -> dict:
    """Tab from the top of the page: presses until the first section heading (h2) of the content has focus,
    and the stops of one full round (line-number links counted apart)."""
    page.evaluate("() => { window.scrollTo(0, 0); document.activeElement && document.activeElement.blur(); }")
    page.keyboard.press("Tab")
    first_h2, stops, line_numbers, seen = None, 0, 0, set()
    for presses in range(1, limit + 1):
        where = page.evaluate("""() => { const e = document.activeElement;
          if (!e || e === document.body) return null;
          const h2 = document.querySelector('.md-content h2');
          return {key: e.outerHTML.slice(0, 200) + '@' + [...document.querySelectorAll('*')].indexOf(e),
                  h2: !!(h2 && (h2 === e || h2.contains(e))),
                  line: !!(e.closest('pre') && /__codelineno/.test(e.getAttribute('href') || ''))}; }""")
        if where is None or where["key"] in seen:
            break
        seen.add(where["key"])
        stops += 1
        line_numbers += where["line"]
        if where["h2"] and first_h2 is None:
            first_h2 = presses
        page.keyboard.press("Tab")
    return {"to_first_section": first_h2, "stops": stops, "line_numbers": line_numbers}


def tabs_to_first_section(page, limit: int = 40) -> int | None:
    """Tab presses from the top of the page (nothing focused) until the focus is in the article's first
    h2 (its permalink), or None within `limit` presses."""
    page.evaluate("() => { window.scrollTo(0, 0); document.activeElement && document.activeElement.blur(); }")
    for presses in range(1, limit + 1):
        page.keyboard.press("Tab")
        if page.evaluate("() => { const h2 = document.querySelector('.md-content h2');"
                         " return !!h2 && h2.contains(document.activeElement); }"):
            return presses
    return None


# -- above the fold ------------------------------------------------------------------------------

# The top of the first paragraph of prose: a <p> of the article itself, after the h1, outside any box.
FIRST_SENTENCE = """() => {
  const article = document.querySelector('.md-content__inner');
  const p = [...article.querySelectorAll(':scope > p')].find(p => p.innerText.trim().length > 40);
  window.scrollTo(0, 0);
  return p ? {top: Math.round(p.getBoundingClientRect().top + window.scrollY), text: p.innerText.slice(0, 60),
              screen: window.innerHeight} : null;
}"""


# -- search --------------------------------------------------------------------------------------

def search_results(page, base_url: str, query: str, timeout_ms: int = 15_000) -> list[str]:
    """The pages Material's search lists for `query`, typed into its box, best first, each once (docs-relative
    paths: 'lessons/x/' for lessons/x.md, '' for the home page)."""
    from urllib.parse import urlsplit

    page.goto(base_url + "status/")
    box = page.locator("input.md-search__input")
    box.click()
    box.press_sequentially(query, delay=15)
    links = ".md-search-result__list > li.md-search-result__item > a.md-search-result__link"
    try:
        page.wait_for_function(f"() => document.querySelectorAll('{links}').length > 0", timeout=timeout_ms)
    except Exception:
        return []
    page.wait_for_timeout(300)  # the last keystroke's results
    base = urlsplit(base_url).path
    pages = [urlsplit(h).path.removeprefix(base) for h in page.locator(links).evaluate_all(
        "links => links.map(a => a.href)")]
    return list(dict.fromkeys(pages))  # a page whose sections match apart is listed once, where it first is


def doc_path(doc: str) -> str:
    """'lessons/x.md' -> 'lessons/x/', 'index.md' -> ''."""
    doc = doc.removesuffix(".md")
    return "" if doc == "index" else doc + "/"


# -- weight --------------------------------------------------------------------------------------

def page_weight(context, url: str) -> dict:
    """Bytes of every response a fresh page load makes (no cache), and which of them are KaTeX. The lesson's
    figures are left out: they load lazily, so whether one near the first screen had arrived by the time the
    page went quiet depended on timing (fp16-matmul's page read 59 % one run and 61 % the next)."""
    page = context.new_page()
    responses = []
    page.on("response", lambda response: responses.append(response))
    page.goto(url, wait_until="networkidle")
    page.wait_for_timeout(1000)
    sizes: dict[str, int] = {}
    for response in responses:
        if response.request.resource_type == "image" and "/evidence/" in response.url:
            continue
        try:
            sizes[response.url] = len(response.body())
        except Exception:  # a redirect or an aborted request has no body
            sizes[response.url] = 0
    page.close()
    return {"total": sum(sizes.values()), "katex": sum(s for u, s in sizes.items() if "/katex" in u),
            "index": sum(s for u, s in sizes.items() if u.endswith("search_index.json")),
            "html": sizes.get(url, 0), "requests": len(sizes)}


def code_markup_share(html: str) -> float:
    """The share of a page's HTML that is the markup (not the text) of its highlighted code blocks."""
    import re
    from html import unescape

    markup = 0
    for block in re.findall(r'<div class="[^"]*highlight[^"]*">.*?</pre></div>', html, re.S):
        markup += len(block) - len(unescape(re.sub(r"<[^>]+>", "", block)))
    return markup / max(len(html), 1)


# -- the report ----------------------------------------------------------------------------------

def report(site: Path) -> dict:
    # Also run as a script (python tests/reader_metrics.py SITE), where pytest's pythonpath is not set.
    sys.path[:0] = [str(ROOT / "tools"), str(ROOT / "tests")]
    from test_browser import PHONE, WIDE, chromium, open_page, page_url, serve, toggle_palette
    from verified_triton.core.lessons import discover

    lessons = discover(ROOT / "code")
    out: dict = {}
    with serve(site) as base, chromium() as browser:
        ctx = browser.new_context(viewport=PHONE, color_scheme="light")
        page = open_page(ctx, base).page
        code = {"blocks": 0, "scrolling": 0, "lines": 0, "hidden": 0, "columns": set()}
        tables = {"tables": 0, "cut": 0, "cut_tables": []}
        scales = []
        fold = {}
        for doc in [lesson.page for lesson in lessons] + ["index.md", "status.md", "benchmarks.md"]:
            page.goto(page_url(base, doc))
            if doc.startswith("lessons/"):
                fold[doc] = {"390": page.evaluate(FIRST_SENTENCE)}
                page.evaluate("() => document.querySelectorAll('img').forEach(i => { i.loading = 'eager'; })")
                page.wait_for_load_state("networkidle")
                scales += page.evaluate(FIGURE_SCALE)
                c = page.evaluate(CODE_FIT)
                for key in ("blocks", "scrolling", "lines", "hidden"):
                    code[key] += c[key]
                if c["columns"] is not None:
                    code["columns"].add(c["columns"])
                page.goto(page_url(base, doc))
            t = page.evaluate(TABLE_FIT)
            tables["tables"] += t["tables"]
            tables["cut"] += t["cut"]
            tables["cut_tables"] += [dict(row, page=doc) for row in t["cutTables"]]
            if doc == "benchmarks.md":
                out["chart_390"] = page.evaluate(CHART_FIT)
        code["columns"] = sorted(code["columns"])
        out["code_390"], out["tables_390"] = code, tables
        out["figure_scale_390"] = [round(min(scales), 2), round(max(scales), 2)] if scales else None
        ctx.close()

        ctx = browser.new_context(viewport=WIDE, color_scheme="light")
        page = open_page(ctx, base).page
        for lesson in lessons:
            page.goto(page_url(base, lesson.page))
            fold[lesson.page]["1440"] = page.evaluate(FIRST_SENTENCE)
        out["first_sentence"] = {
            width: {"max": max(f[width]["top"] for f in fold.values() if f[width]),
                    "median": sorted(f[width]["top"] for f in fold.values() if f[width])[len(fold) // 2]}
            for width in ("1440", "390")}
        axe: dict = {}
        for doc in AXE_PAGES:
            for width, viewport, dark in (("1440", WIDE, False), ("1440-dark", WIDE, True), ("390", PHONE, False)):
                page.set_viewport_size(viewport)
                page.goto(page_url(base, doc))
                toggle_palette(page, "slate" if dark else "default")
                found = axe_violations(page)
                axe[f"{doc} {width}"] = {v["id"]: len(v["nodes"]) for v in found}
        page.set_viewport_size(WIDE)
        totals: dict[str, int] = {}
        for counts in axe.values():
            for rule, n in counts.items():
                totals[rule] = totals.get(rule, 0) + n
        out["axe"] = {"total_nodes": sum(totals.values()), "by_rule": totals,
                      "pages_with_violations": sorted(k for k, v in axe.items() if v)}
        out["tabs"] = {}
        for doc in ("lessons/vector-add.md", "lessons/fp16-matmul.md"):
            page.goto(page_url(base, doc))
            out["tabs"][doc] = tab_stops(page)
        ctx.close()

        ctx = browser.new_context(viewport=WIDE, color_scheme="light")
        page = open_page(ctx, base).page
        out["search"] = {}
        for query, want in SEARCHES.items():
            hits = search_results(page, base, query)
            rank = hits.index(doc_path(want)) + 1 if doc_path(want) in hits else None
            out["search"][query] = {"rank": rank, "top3": hits[:3]}
        weights = {}
        for doc in [lesson.page for lesson in lessons] + ["index.md", "status.md", "benchmarks.md",
                                                            "verification.md", "writing-a-lesson.md"]:
            weights[doc] = page_weight(ctx, page_url(base, doc))
        out["weight"] = weights
        ctx.close()
    shares = [code_markup_share((site / doc_path(lesson.page) / "index.html").read_text(encoding="utf-8"))
              for lesson in lessons]
    out["code_markup_share"] = round(sum(shares) / len(shares), 3)
    return out


def summary(r: dict) -> str:
    c, t = r["code_390"], r["tables_390"]
    lines = [
        f"phones: {c['scrolling']} of {c['blocks']} code blocks scroll sideways; {c['hidden']} of {c['lines']} "
        f"lesson code lines hidden ({100 * c['hidden'] / max(c['lines'], 1):.0f} %); columns shown {c['columns']}",
        f"phones: {t['cut']} of {t['tables']} tables cut at the right edge",
        f"phones: chart {r.get('chart_390')}; figures drawn at {r['figure_scale_390']} of their size",
        f"axe: {r['axe']['total_nodes']} nodes in violation: {r['axe']['by_rule']}",
        f"tabs: {r['tabs']}",
        f"first sentence (top, px): {r['first_sentence']}",
        "search: " + "; ".join(f"{q}: {v['rank']}" for q, v in r["search"].items()),
    ]
    w = r["weight"]
    lessons = {k: v for k, v in w.items() if k.startswith("lessons/")}
    lines.append(f"weight: lessons {min(v['total'] for v in lessons.values()):,}-"
                 f"{max(v['total'] for v in lessons.values()):,} B; every page >= "
                 f"{min(v['total'] for v in w.values()):,} B; pages with KaTeX "
                 f"{sum(1 for v in w.values() if v['katex'])} of {len(w)}; "
                 f"code markup share {r['code_markup_share']:.0%}")
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: python tests/reader_metrics.py BUILT_SITE [OUT.json]")
    result = report(Path(sys.argv[1]))
    print(summary(result))
    if len(sys.argv) > 2:
        Path(sys.argv[2]).write_text(json.dumps(result, indent=1, default=list), encoding="utf-8")
