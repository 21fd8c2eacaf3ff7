"""The site in a real browser: badges, output tabs, source links, figures, search, and no errors.

The real site is built once (mkdocs build --strict), served on 127.0.0.1 from a
thread, and opened in Debian's Chromium through Playwright. Without
/usr/bin/chromium (or the playwright package) these tests skip, unless
VT_REQUIRE_BROWSER=1, when they fail. Full-page screenshots of every lesson page,
the home, status and benchmarks pages go to test-artifacts/screenshots/.

The helpers `chromium`, `serve` and `open_page` are shared with test_hostile.py.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ROOT / "tools"
if str(TOOLS) not in sys.path:
    sys.path.insert(0, str(TOOLS))

from evidence import lesson_records  # noqa: E402
from lessons import discover  # noqa: E402
from render import clean_output, mode_label  # noqa: E402
from snippets import extract  # noqa: E402

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic"]
VIEWPORT = {"width": 1280, "height": 900}
SCREENSHOTS = ROOT / "test-artifacts" / "screenshots"
MKDOCS_ENV = dict(os.environ, NO_MKDOCS_2_WARNING="1")
TIMEOUT_MS = 15_000


# -- shared helpers ------------------------------------------------------------------

def _no_browser(reason: str):
    if os.environ.get("VT_REQUIRE_BROWSER") == "1":
        pytest.fail(f"{reason}, and VT_REQUIRE_BROWSER=1 asks for the browser tests to run")
    pytest.skip(f"{reason}: browser tests need Debian's chromium and the playwright package "
                f"(set VT_REQUIRE_BROWSER=1 to make this a failure)")


@contextmanager
def chromium():
    """A headless Chromium, or a skip (a failure with VT_REQUIRE_BROWSER=1) when there is none."""
    if not CHROMIUM.is_file():
        _no_browser(f"{CHROMIUM} is missing")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _no_browser("the playwright package is not installed")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format, *args):
        pass


@contextmanager
def serve(directory: Path) -> Iterator[str]:
    """Serve a built site on 127.0.0.1 at a free port; yields the base URL ending in '/'."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


# The built site asks one outside host for something: Material's default theme fonts
# (fonts.googleapis.com, which then loads from fonts.gstatic.com). The test machine is
# offline, so those requests are answered here with an empty stylesheet/font instead of
# failing with a console error; the page falls back to system fonts. Every other request
# to a host that is not the test server is aborted and shows up as an error below.
FONT_HOSTS = ("fonts.googleapis.com", "fonts.gstatic.com")


@dataclass
class Watched:
    """A page with everything that went wrong on it: console errors, page errors, dialogs, bad requests."""
    page: object
    errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)

    def assert_clean(self, where: str) -> None:
        assert not self.dialogs, f"{where}: a dialog opened: {self.dialogs}"
        assert not self.errors, f"{where}: browser errors:\n" + "\n".join(self.errors)


def open_page(context, base_url: str) -> Watched:
    """A new page in `context` that records console errors, uncaught exceptions, dialogs and failed requests."""
    page = context.new_page()
    watched = Watched(page)

    def on_console(msg):
        if msg.type == "error":
            watched.errors.append(f"console error: {msg.text} ({msg.location.get('url', '')})")

    def on_dialog(dialog):
        watched.dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()

    def on_response(response):
        if response.status >= 400:
            watched.errors.append(f"HTTP {response.status}: {response.url}")

    def route(r):
        host = urlsplit(r.request.url).hostname or ""
        if r.request.url.startswith(base_url) or r.request.url.startswith(("data:", "blob:")):
            r.continue_()
        elif host in FONT_HOSTS:
            r.fulfill(status=200, body="", content_type="text/css" if "googleapis" in host else "font/woff2")
        else:
            watched.errors.append(f"request to an outside host: {r.request.url}")
            r.abort()

    page.on("console", on_console)
    page.on("pageerror", lambda exc: watched.errors.append(f"uncaught exception: {exc}"))
    page.on("dialog", on_dialog)
    page.on("response", on_response)
    page.route("**/*", route)
    page.set_default_timeout(TIMEOUT_MS)
    return watched


def screenshot(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True, animations="disabled")


def page_url(base_url: str, doc: str) -> str:
    """docs-relative 'lessons/x.md' -> the built page's URL."""
    doc = doc.removesuffix(".md")
    return base_url + ("" if doc == "index" else doc.removesuffix("/index") + "/")


# -- fixtures ------------------------------------------------------------------------

@pytest.fixture(scope="session")
def real_site(tmp_path_factory) -> Path:
    site = tmp_path_factory.mktemp("browser-site")
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"),
                             "-d", str(site)], capture_output=True, text=True, env=MKDOCS_ENV, cwd=ROOT, timeout=300)
    assert result.returncode == 0, "the real site does not build:\n" + result.stdout + result.stderr
    return site


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


@pytest.fixture(scope="module")
def site_url(real_site) -> Iterator[str]:
    with serve(real_site) as url:
        yield url


@pytest.fixture
def context(browser):
    ctx = browser.new_context(viewport=VIEWPORT)
    yield ctx
    ctx.close()


@pytest.fixture(scope="module")
def statuses() -> dict[str, str]:
    """Each lesson's badge as `tools/verify.py --status --json` reports it."""
    result = subprocess.run([sys.executable, str(TOOLS / "verify.py"), "--status", "--json"],
                            capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stderr
    return {entry["lesson"]: entry["status"] for entry in json.loads(result.stdout)}


LESSONS = discover(ROOT / "code")


# -- lesson pages ----------------------------------------------------------------------

def _first_line(stream: str) -> str:
    lines = [line.strip() for line in clean_output(stream).split("\n") if line.strip()]
    return lines[0] if lines else "(nothing)"


def check_badge(page, lesson, statuses: dict[str, str]) -> None:
    from playwright.sync_api import expect

    title = page.locator(".md-content .admonition.vt-status > .admonition-title")
    expect(title).to_have_count(1)
    expect(title).to_be_visible()
    assert title.inner_text().strip() == statuses[lesson.name], \
        f"{lesson.page}: badge {title.inner_text()!r}, verify.py --status says {statuses[lesson.name]!r}"


def check_output_tabs(page, lesson, evidence_dir: Path) -> None:
    """Every recorded run has a tab; clicking it shows that run's output and hides the others."""
    from playwright.sync_api import expect

    records = sorted(lesson_records(evidence_dir, lesson.name), key=lambda r: (r.mode != "interpreter", r.key))
    content = page.locator(".md-content")
    if not records:
        expect(content.get_by_text("Nothing has been recorded for this lesson yet.")).to_be_visible()
        return
    labels = [mode_label(r) for r in records]
    tabbed = page.locator(".md-content .tabbed-set").filter(
        has=page.locator(".tabbed-labels > label", has_text=labels[0]))
    expect(tabbed).to_have_count(1)
    tab_labels = tabbed.locator(":scope > .tabbed-labels > label")
    blocks = tabbed.locator(":scope > .tabbed-content > .tabbed-block")
    assert tab_labels.all_inner_texts() == labels, f"{lesson.page}: output tabs {tab_labels.all_inner_texts()}"
    # Click them in reverse, so that with two runs the second click really switches back.
    for i in reversed(range(len(records))):
        tab_labels.nth(i).click()
        expect(blocks.nth(i)).to_be_visible()
        expect(blocks.nth(i).get_by_text(_first_line(records[i].stdout), exact=False).first).to_be_visible()
        for j in range(len(records)):
            if j != i:
                expect(blocks.nth(j)).to_be_hidden()
    if not any(r.mode == "gpu" for r in records):
        expect(content.get_by_text("No GPU run has been recorded for this lesson.")).to_be_visible()


def check_result_tables(page, lesson, evidence_dir: Path) -> None:
    """Check and benchmark names show as recorded (as code), not as escaped or reformatted text."""
    from playwright.sync_api import expect

    records = lesson_records(evidence_dir, lesson.name)
    names = {c.name for r in records for c in r.checks} | {b.name for r in records for b in r.benchmarks}
    for summary in page.locator(".md-content details:not([open]) > summary").all():
        summary.click()  # a long checks table is folded behind its summary, as a reader would open it
    for name in sorted(names):
        expect(page.locator(".md-content table code").get_by_text(name, exact=True).first).to_be_visible()


def check_snippets(page, other, lesson) -> None:
    """Each region carries its source title; its full-source link lands on the line; the download is the file."""
    from playwright.sync_api import expect

    markdown = (ROOT / "docs" / lesson.page).read_text(encoding="utf-8")
    shown = re.findall(r"^[ \t]*::snippet[ \t]+(\S+)[ \t]+(\S+)[ \t]*$", markdown, re.M)
    assert shown, f"{lesson.page} shows no region"
    titles = page.locator(".md-content span.filename").all_inner_texts()
    downloads = page.locator(".md-content a.vt-source-link", has_text="download").evaluate_all(
        "links => links.map(a => a.href)")
    fetched: set[str] = set()
    for rel, name in shown:
        region = extract(ROOT / rel, name)
        lines = f"line {region.start}" if region.start == region.end else f"lines {region.start}-{region.end}"
        assert f"{rel}, {lines}" in titles, f"{lesson.page}: no code block titled {rel}, {lines} (titles: {titles})"
        source_link = page.locator(f'a.vt-source-link[href$="#__codelineno-0-{region.start}"]',
                                   has_text=rel).first
        expect(source_link).to_be_visible()
        href = source_link.evaluate("a => a.href")
        other.page.goto(href)  # the same source page again is only a change of #fragment
        anchor = other.page.locator(f"[id='__codelineno-0-{region.start}']")
        expect(anchor).to_have_count(1)
        expect(other.page.locator(".md-content h1")).to_contain_text(rel)
        expect(other.page.locator(".md-content span.filename").first).to_have_text(rel)
        # the anchored line is the region's first line, as it is in the file, scrolled into view
        file_line = (ROOT / rel).read_text(encoding="utf-8").split("\n")[region.start - 1]
        expect(other.page.locator(f"[id='__span-0-{region.start}']")).to_contain_text(file_line.strip())
        expect(anchor).to_be_in_viewport()
        other.assert_clean(f"source page {href}")
        raw = next((h for h in downloads if h.endswith("/" + rel)), None)
        assert raw, f"{lesson.page}: no download link for {rel} (links: {downloads})"
        if raw not in fetched:
            fetched.add(raw)
            response = page.request.get(raw)
            assert response.ok, f"{raw}: HTTP {response.status}"
            assert response.body() == (ROOT / rel).read_bytes(), f"{raw} is not the bytes of {rel}"


def check_images(page, where: str) -> None:
    broken = page.locator(".md-content img").evaluate_all(
        "imgs => imgs.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src)")
    assert not broken, f"{where}: images that did not load: {broken}"


@pytest.mark.parametrize("lesson", LESSONS, ids=[lesson.name for lesson in LESSONS])
def test_lesson_page_in_the_browser(lesson, site_url, context, statuses):
    watched, other = open_page(context, site_url), open_page(context, site_url)
    page = watched.page
    page.goto(page_url(site_url, lesson.page))
    check_badge(page, lesson, statuses)
    check_result_tables(page, lesson, ROOT / "evidence")
    check_output_tabs(page, lesson, ROOT / "evidence")
    check_snippets(page, other, lesson)
    check_images(page, lesson.page)
    # a fresh load (first tab, top of the page) for a screenshot of the page as a reader first sees it
    page.goto(page_url(site_url, lesson.page))
    screenshot(page, lesson.name)
    watched.assert_clean(lesson.page)


@pytest.mark.parametrize("doc", ["index.md", "status.md", "benchmarks.md"])
def test_site_page_in_the_browser(doc, site_url, context, statuses):
    from playwright.sync_api import expect

    watched = open_page(context, site_url)
    page = watched.page
    page.goto(page_url(site_url, doc))
    expect(page.locator(".md-content h1")).to_be_visible()
    check_images(page, doc)
    if doc == "status.md":
        # every lesson is a row, with the badge verify.py --status gives it
        for lesson in LESSONS:
            row = page.locator(".md-content table tr", has=page.locator(f'a[href$="{lesson.page[:-3]}/"]'))
            expect(row.first.locator(".vt-badge")).to_have_text(statuses[lesson.name])
    overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 0, f"{doc}: the page scrolls sideways by {overflow}px"
    # the site's own tables (badges, status, benchmarks) fit the column: no hidden last column
    hidden = page.locator(".md-content .md-typeset__scrollwrap").evaluate_all(
        "wraps => wraps.filter(w => w.scrollWidth > w.clientWidth + 1).map(w => w.querySelector('tr').innerText)")
    assert not hidden, f"{doc}: tables wider than the page, scrolled sideways: {hidden}"
    screenshot(page, doc.removesuffix(".md").replace("index", "home"))
    watched.assert_clean(doc)


def test_search_finds_a_lesson_by_a_word_of_its_prose(site_url, context):
    from playwright.sync_api import TimeoutError, expect

    lesson = next(lesson for lesson in LESSONS if lesson.name == "vector-add")
    prose = (ROOT / "docs" / lesson.page).read_text(encoding="utf-8")
    watched = open_page(context, site_url)
    page = watched.page
    page.goto(site_url)
    for word in ("coalesced", "masks"):
        assert re.search(rf"\b{word}\b", prose), f"{lesson.page} no longer says {word!r}; pick another word"
        search = page.locator("input.md-search__input")
        search.click()
        search.fill("")
        search.type(word, delay=20)
        # Material's search runs in a web worker over search/search_index.json: wait for its results.
        results = page.locator(".md-search-result__item a.md-search-result__link")
        target = urlsplit(page_url(site_url, lesson.page)).path
        try:
            page.wait_for_function(
                "path => [...document.querySelectorAll('.md-search-result__item a.md-search-result__link')]"
                ".some(a => new URL(a.href).pathname === path)", arg=target)
        except TimeoutError as exc:
            hrefs = results.evaluate_all("links => links.map(a => a.href)")
            raise AssertionError(f"search for {word!r} did not find {target}; results: {hrefs}") from exc
        expect(results.filter(has_text=re.compile(word, re.I)).first).to_be_visible()
        page.keyboard.press("Escape")
    watched.assert_clean("search")
