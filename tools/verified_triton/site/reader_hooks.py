"""MkDocs hooks for what a reader downloads: lighter code markup, code lines that wrap, the figures' lightbox.

- Pygments wraps every run of spaces between tokens in <span class="w">, and every name in
  <span class="n">; Material colours neither (a name takes the code's own colour, --md-code-hl-name-color):
  the text is kept, those two spans dropped. Together they were a fifth of a lesson's HTML. Punctuation
  (<span class="p">) and operators ("o") are drawn in the code's own colour too, not Material's lighter
  one: their spans were another tenth of a lesson's HTML, and the lighter grey was the faintest text
  in a code block.
- Each code line carries a line anchor (`__codelineno-0-N`, mkdocs.yml `line_anchors`; in a block without
  line numbers, such as recorded output, the anchor is an empty link to itself) and a line span with an
  id (`__span-0-N`). Links land on those of the full-source pages (source/...); nothing links to
  a line of any other page, so there the anchors go and the line spans keep no id (the spans stay: they
  are the lines that wrap on a phone).
- Material writes an icon (:material-check:) as a whole inline SVG each time it is used, a hundred
  times on a page of checks: each icon used more than once is written once per page, as a <symbol>,
  and each use points at it.
- Line numbers: Pygments writes an empty <span class="linenos" data-linenos="N "> into every line, which
  Material draws; a block of consecutive numbers instead gets class vt-lines and its first number, and
  verified.css counts its lines (a CSS counter, drawn as Material draws the numbers).
- On a phone, long code lines wrap under their own start (verified.css): each line with leading spaces
  says how many (style="--i:N").
- The glossary's definitions (the `abbr` extension, docs/includes/abbreviations.md) are written into a
  title attribute at every use of a term: a quarter of a long lesson's HTML. The first use of each term on
  a page keeps its definition (hover or long-press it); later uses are plain text.
- What a step of main() printed (`::step`) is recorded output: its tabs stay out of the search index, as
  the full log's do (the tabbed set is marked data-search-exclude, which Material's search skips).
- A figure opens full size on a tap with GLightbox, the lightbox of the Material ecosystem, as the pinned
  mkdocs-glightbox package ships it. Its plugin is not enabled: it adds 70 KB of script and style to every
  page and re-writes each page through its HTML parser. The two files are published under
  assets/glightbox/, and assets/javascripts/reader.js loads them on the first tap on a figure.
"""

from __future__ import annotations

import importlib.util
import re
from collections import Counter
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

PLAIN_SPAN = re.compile(r'<span class="[wnpo]">([^<]*)</span>')
# Pygments makes the anchor of a line without a number a link to itself: an empty link, a nameless Tab stop.
LINE_ANCHOR = re.compile(r'<a id="__codelineno-\d+-\d+" name="__codelineno-\d+-\d+"'
                         r'(?: href="#__codelineno-\d+-\d+")?></a>')
LINE_SPAN_ID = re.compile(r'<span id="__span-\d+-\d+">')
NUMBERED_CODE = re.compile(r'<code>((?:(?!</code>).)*?<span class="linenos" .*?)</code>', re.S)
LINENO = re.compile(r'<span class="linenos" data-linenos=" *(\d+) "></span>')
INDENTED_LINE = re.compile(r'(<span(?: id="__span-\d+-\d+")?)>((?:<a id="__codelineno-[^"]+" name="[^"]+"></a>)?'
                           r'(?:<span class="[\w ]+">)?)( +)')

ABBR = re.compile(r'<abbr title="([^"]*)">([^<]*)</abbr>')
# Inside a folded block (??? note) Markdown wraps the step's label paragraph in another <p>: invalid HTML, which a
# browser repairs into the label and an empty paragraph, so the label no longer sits just before its tabs.
NESTED_STEP_LABEL = re.compile(r'<p>(<p class="vt-step-label">(?:(?!</p>).)*</p>)</p>', re.S)
STEP_TABS = re.compile(r'(<p class="vt-step-label">(?:(?!</p>).)*</p>\s*<div) (class="tabbed-set)', re.S)

ICON = re.compile(r'<span class="twemoji"><svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24">'
                  r'(<path d="[^"<>]*"/>)</svg></span>')


def is_source_page(page) -> bool:
    return page.file.src_uri.startswith("source/")


def on_page_content(html: str, page, config, files) -> str:
    html = PLAIN_SPAN.sub(r"\1", html)
    if not is_source_page(page):
        html = LINE_SPAN_ID.sub("<span>", LINE_ANCHOR.sub("", html))
    html = NUMBERED_CODE.sub(counted_lines, html)
    html = STEP_TABS.sub(r"\1 data-search-exclude \2", NESTED_STEP_LABEL.sub(r"\1", html))
    return shared_icons(first_definitions(html))


def first_definitions(html: str) -> str:
    """Each glossary term keeps its <abbr title> at its first use on the page; later uses are its text."""
    seen: set[str] = set()

    def once(m: re.Match) -> str:
        term = m.group(2).lower()
        if term in seen:
            return m.group(2)
        seen.add(term)
        return m.group(0)

    return ABBR.sub(once, html)


def counted_lines(block: re.Match) -> str:
    """A code block whose lines are numbered N, N+1, ...: numbered by CSS, each indented line marked."""
    numbers = [int(n) for n in LINENO.findall(block[1])]
    if numbers != list(range(numbers[0], numbers[0] + len(numbers))):
        return block[0]  # not a plain run of numbers: as Pygments wrote it
    body = INDENTED_LINE.sub(lambda m: f'{m[1]} style="--i:{min(len(m[3]), 40)}">{m[2]}{m[3]}',
                             LINENO.sub("", block[1]))
    return (f'<code class="vt-lines" style="counter-reset:vt-line {numbers[0] - 1};'
            f'--vt-digits:{len(str(numbers[-1]))}">{body}</code>')


def shared_icons(html: str) -> str:
    """Each icon drawn more than once on the page: one <symbol>, and a <use> where it was."""
    paths = [m[1] for m in ICON.finditer(html)]
    repeated = sorted(p for p, n in Counter(paths).items() if n > 1)
    if not repeated:
        return html
    ids = {path: f"vt-icon-{i}" for i, path in enumerate(repeated)}

    def use(m: re.Match) -> str:
        if m[1] not in ids:
            return m[0]
        return f'<span class="twemoji"><svg viewBox="0 0 24 24"><use href="#{ids[m[1]]}"/></svg></span>'

    symbols = "".join(f'<symbol id="{ids[p]}" viewBox="0 0 24 24">{p}</symbol>' for p in repeated)
    return ICON.sub(use, html) + f'\n<svg class="vt-icons" aria-hidden="true" hidden>{symbols}</svg>'


GLIGHTBOX_FILES = ("glightbox.min.js", "glightbox.min.css")


def glightbox_dir() -> Path:
    spec = importlib.util.find_spec("mkdocs_glightbox")
    folder = Path(spec.origin).parent / "glightbox" if spec and spec.origin else None
    if folder is None or not all((folder / name).is_file() for name in GLIGHTBOX_FILES):
        raise PluginError("mkdocs-glightbox is not installed (it ships the figures' lightbox): "
                          "pip install -e '.[site]'")
    return folder


def on_files(files: Files, config) -> Files:
    folder = glightbox_dir()
    for name in GLIGHTBOX_FILES:
        files.append(File.generated(config, f"assets/glightbox/{name}", abs_src_path=str(folder / name)))
    return files
