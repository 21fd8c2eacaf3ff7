"""`mkdocs serve` never hangs on a broken build: the error shows in the browser, as Vite's overlay does.

MkDocs' server holds every request while the last rebuild failed ("the server
will appear stuck until build errors are resolved"), and its duplicate-log
filter prints an error it has printed before only once. So while serving, an
error of ours never fails the build: the hook reports it here, with FILE:LINE
and the message, and carries on. Each report is printed every time; the page
that failed shows the error as its content; every HTML page the server sends
carries an overlay listing the build's errors; the next good build clears
them. A failure outside our hook (MkDocs itself, another plugin) is caught
around the server's builder, so the server answers then too.

This module is imported once per `mkdocs serve` process: what it holds
survives rebuilds. `mkdocs build` never comes here: its errors fail the build.
What it prints goes through the terminal door (core/terminal.py), what it shows
in the browser through html.escape.
"""

from __future__ import annotations

import html
import sys
import threading

from verified_triton.core.terminal import safe as terminal

ERROR_PAGE_ID = "vt-build-error-page"
OVERLAY_ID = "vt-build-error"

serving = False  # set by the hook's on_startup for `mkdocs serve`
_errors: list[str] = []
_error_pages: set[str] = set()  # output files written with an error as content: re-render them next time
_lock = threading.Lock()


def start_build() -> None:
    """A new build begins: the last build's errors no longer stand."""
    with _lock:
        _errors.clear()


def report(message: str) -> None:
    """Record an error of this build and print it (every time: no duplicate filter here)."""
    with _lock:
        if message in _errors:
            return
        _errors.append(message)
    print(f"ERROR   -  {terminal(message, lines=True)}\nINFO    -  mkdocs serve keeps answering: the error shows "
          "on the pages; save a fix and the next build replaces it", file=sys.stderr, flush=True)


def errors() -> list[str]:
    with _lock:
        return list(_errors)


def error_page_markdown(dest: str | None) -> str:
    """The content of a page that could not be built: the build's errors (raw HTML, escaped)."""
    if dest:
        with _lock:
            _error_pages.add(dest)
    return f'# Build error\n\n<div id="{ERROR_PAGE_ID}" markdown="0">\n{_listing(errors())}\n</div>\n'


def take_error_pages() -> list[str]:
    """Output files last written with an error as content; a dirty build must render them again."""
    with _lock:
        pages = sorted(_error_pages)
        _error_pages.clear()
    return pages


def _listing(messages: list[str]) -> str:
    items = "".join(f"<pre style=\"white-space:pre-wrap;margin:.4em 0\">{html.escape(m)}</pre>" for m in messages)
    return (f"<p><strong>The last build failed.</strong> Fix the file named below and save: the next good "
            f"build replaces this.</p>{items}")


def overlay_html(messages: list[str]) -> bytes:
    """A box over the page, styled inline so it shows whatever CSS the page has."""
    style = ("position:fixed;left:1rem;right:1rem;bottom:1rem;z-index:10000;max-height:60vh;overflow:auto;"
             "padding:.8rem 1rem;background:#fff4f4;color:#5c0000;border:2px solid #c62828;border-radius:6px;"
             "font:14px/1.4 ui-monospace,monospace;box-shadow:0 4px 16px rgba(0,0,0,.3)")
    return f'<div id="{OVERLAY_ID}" role="alert" style="{style}">{_listing(messages)}</div>'.encode()


def inject(page: bytes, messages: list[str]) -> bytes:
    """The page with the overlay before </body> (a page that shows the error as its content gets none)."""
    if not messages or ERROR_PAGE_ID.encode() in page:
        return page
    at = page.rfind(b"</body>")
    at = len(page) if at < 0 else at
    return page[:at] + overlay_html(messages) + page[at:]


def guard(builder):
    """The server's builder, reporting a failure instead of raising it (which would stall every request)."""
    def build(*args, **kwargs):
        try:
            builder(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - whatever failed, the server must keep answering
            if not errors():  # else an error of ours was reported already, and this is MkDocs' "Aborted ..."
                strict = " (warnings are printed above; bash tools/dev.sh serve serves with --no-strict)"
                report(f"the build failed: {exc}" + (strict if "strict mode" in str(exc) else ""))
    return build


def wrap_app(app):
    """A WSGI wrapper around the server's app: HTML responses carry the overlay while errors stand."""
    def serve(environ, start_response):
        messages = errors()
        if not messages:
            return app(environ, start_response)
        got: dict = {}

        def capture(status, headers, exc_info=None):
            got["status"], got["headers"] = status, headers
            return lambda data: None

        body = app(environ, capture)
        headers = got.get("headers", [])
        if not any(k.lower() == "content-type" and "text/html" in v for k, v in headers):
            start_response(got.get("status", "200 OK"), headers)
            return body
        try:
            data = inject(b"".join(body), messages)
        finally:
            if hasattr(body, "close"):
                body.close()
        headers = [(k, v) for k, v in headers if k.lower() != "content-length"]
        start_response(got["status"], headers + [("Content-Length", str(len(data)))])
        return [data]
    return serve
