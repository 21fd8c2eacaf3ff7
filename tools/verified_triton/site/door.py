"""The one door: whatever reaches a page, a notebook, a README or a template passes here, and comes out typed.

Everything read from code/, evidence/, a bundle or the configuration is text
that must show as the characters it is. Escaping is done by type, not by
care: a safe value is an instance of a class from this module, and the
places that publish refuse anything else.

    Md        site Markdown and HTML (pages, and the directives' notebook forms). A subclass of
              markupsafe.Markup whose `escape` is `text()` below: Md("<b>{}</b>").format(x),
              Md("x") + x and Md(", ").join(xs) escape every x that is not already Md, so an
              interpolated field can only arrive escaped. Every directive returns Md and
              directives.expand refuses a plain str (TypeError naming the directive).
    PlainMd   Markdown read outside the site (a notebook's own cells, an archive's README): escaped
              by `markdown_text()`, which backslash-escapes only what could start markup where it
              stands, so the file reads cleanly as plain text too. Not HTML: its __html__ escapes it.
    Markup    markupsafe's own type, for a template (MkDocs' Jinja does not autoescape): `html_text()`.

One function per target: `text()` (site, inline), `markdown_text()` (plain Markdown), `html_text()`
(a template), and `terminal()` (verified_triton.core.terminal.safe: the terminal). The rest are the
same doors for one place each: `code()`, `code_span()`, `code_block()`, `attr()`, `url()`,
`indent()`, `raw_html_text()`, `plain_code()`, and `clean_output()` for text shown as text (a fenced
block's body, a notebook's stream output). Constructing Md or PlainMd from a value, not a literal,
happens only in this module (tests/test_door.py reads the package's source to hold that): Md("...")
with a literal is the author's own markup, never a field.
"""

from __future__ import annotations

import html
import re
import unicodedata

import markupsafe

from verified_triton.core import numfmt
from verified_triton.core.limits import LIMITS
from verified_triton.core.terminal import safe as terminal

__all__ = ["Md", "PlainMd", "text", "code", "code_span", "code_block", "attr", "url", "indent", "visible",
           "clean_output", "page_markdown", "snippet_safe", "markdown_text", "plain_code", "plain_code_block",
           "html_text", "raw_html_text", "terminal", "require", "NavTitle", "nav_title"]

ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
MAX_LINE = 1000  # characters of one output line shown on a page
MAX_LINES = 400  # lines of one stream shown on a page (head and tail)
MAX_TEXT = LIMITS.string  # characters of one inline value (a check message, a table cell, a reason)


# -- the types ------------------------------------------------------------------------

class Md(markupsafe.Markup):
    """Markdown (and HTML) safe for a site page: the author's literal markup, or a field escaped by `text()`."""

    __slots__ = ()

    @classmethod
    def escape(cls, s: object) -> Md:
        return s if isinstance(s, Md) else text(s)


class PlainMd(markupsafe.Markup):
    """Markdown safe for any reader outside the site (Jupyter, Colab, GitHub, an editor): `markdown_text()`."""

    __slots__ = ()

    @classmethod
    def escape(cls, s: object) -> PlainMd:
        return s if isinstance(s, PlainMd) else markdown_text(s)

    def __html__(self) -> markupsafe.Markup:
        return markupsafe.escape(str(self))  # as HTML it is text: its backslashes do not escape anything there


def require(value: object, kind: type, what: str) -> None:
    """A TypeError naming `what` unless `value` is of the safe type `kind` (a plain str is not)."""
    if not isinstance(value, kind):
        raise TypeError(f"{what} returned {type(value).__name__}, not {kind.__name__}: build it through "
                        f"verified_triton.site.door ({kind.__name__}('...').format(...), text(), code(), ...), "
                        "so that every field in it is escaped")


class NavTitle(str):
    """A title from lesson.toml (a lesson's, a part's) as Material's templates write it, safe each way.

    The templates are not autoescaped and write a navigation title three ways: as it is (`{{ title }}`: the
    sidebar, the footer), through `| e` (aria-labels) and through `| striptags` (the page's <title>),
    which unescapes what it keeps. The string is the text escaped once, for the first; `__html__`, which
    the other two read, is it escaped once more, so `| e` gives what MkDocs' own heading titles give and
    `striptags` leaves the text escaped once: no title can open a tag or close <title>. Invisible
    format characters show as marks (visible), as everywhere else on the site.
    """

    def __html__(self) -> str:
        return html.escape(str(self))


def nav_title(value: object) -> NavTitle:
    """A lesson's or a part's title for the navigation (MkDocs' templates): see NavTitle."""
    return NavTitle(html.escape(visible(" ".join(str(value).split()))))



# -- site Markdown and HTML -------------------------------------------------------------

def visible(s: str) -> str:
    """Control and invisible format characters as visible marks: a bidirectional override
    (Trojan Source) shows as ⟨U+202E⟩ instead of reordering what follows it."""
    s = CONTROL.sub(_control_picture, s)
    if not s.isascii() and any(unicodedata.category(c) == "Cf" for c in s):  # no ASCII character is one
        s = "".join(f"⟨U+{ord(c):04X}⟩" if unicodedata.category(c) == "Cf" else c for c in s)
    return s


def _control_picture(match: re.Match) -> str:
    point = ord(match.group())
    return chr(0x2421) if point == 0x7F else chr(0x2400 + point)


# The characters that can mean something to HTML (& < > " '), to Markdown and its
# extensions here (code, emphasis, links, table cells, attribute lists, emoji
# shortcodes, math, escapes, headings) or to a template engine ({ }). Each becomes a
# numeric character reference; other punctuation (. , ; / ( ) + - % ?) cannot
# start anything on its own and stays as it is, which keeps pages of long
# evidence tables cheap to build.
# '@' and the '.' of "www." too: Jupyter's and GitHub's Markdown make a link of a bare address (GFM
# autolinks), and the directives' text also reaches notebooks.
SPECIAL = frozenset('&<>"\'`*_[]|{}:\\$~^=!#@')
_ESCAPES = {ord(c): f"&#{ord(c)};" for c in SPECIAL | {"\t"}}
WWW = re.compile(r"(?i)(www)\.")


def _shown(value: object) -> str:
    """A value as text; a number through numfmt (bounded width), whatever format it came in."""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return numfmt.number(value)
    if isinstance(value, int):
        return str(value) if abs(value) < numfmt.GROUPED_BELOW else numfmt.number(value)
    return str(value)


def text(value: object, limit: int = MAX_TEXT) -> Md:
    """Inline text that Markdown, HTML and the template engine all leave alone.

    Every character in SPECIAL becomes a numeric character reference, so
    nothing in it can open a tag, a link, emphasis, a table cell, math or an
    emoji shortcode; the browser shows the same characters. Past `limit`
    characters the rest is cut, and the cut is said (a second copy of a text
    on one page, such as an alt text, takes a short limit: no amplification).
    A number is written by numfmt.
    """
    s = _cut(visible(_one_line(_shown(value))), limit)
    return Md(WWW.sub(r"\1&#46;", s.translate(_ESCAPES)))


def _one_line(value: object) -> str:
    """The text of `value` without terminal colour codes, its line breaks as spaces."""
    return ANSI.sub("", str(value)).replace("\r\n", " ").replace("\n", " ").replace("\r", " ")


def _cut(s: str, limit: int) -> str:
    """`s` up to `limit` characters, the cut said."""
    return s[:limit] + f" [... {numfmt.counted(len(s) - limit, 'more character')}]" if len(s) > limit else s


def code(value: object) -> Md:
    """Inline code of `text(value)`: HTML <code>, because a Markdown code span would show the
    character references literally (`&#45;` for '-')."""
    return Md("<code>{}</code>").format(text(value))


def code_span(value: object, limit: int = MAX_TEXT) -> Md:
    """A Markdown code span of `value` (a file name in a heading or a link): everything in it is literal
    to Markdown, so nothing needs a reference; its fence is longer than any backtick run inside."""
    s = _cut(visible(_one_line(value)), limit)
    longest = max((len(run) for run in re.findall(r"`+", s)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return Md(f"{fence}{pad}{s}{pad}{fence}")


LANG = re.compile(r"[\w+.-]*")
NO_ATTRS = Md("")


def code_block(body: str, lang: str = "text", attrs: Md = NO_ATTRS, indent: str = "") -> Md:
    """A fenced block of `body`, shown as text: its fence is longer than any backtick run inside it.

    `attrs` is an attribute list the code writes (Md), `lang` a language name."""
    require(attrs, Md, "code_block's attrs")
    return Md(_fenced(body, lang, str(attrs), indent))


def plain_code_block(body: str, lang: str = "text") -> PlainMd:
    """`code_block` for plain Markdown (a notebook's own cell): no attribute list, which only the site reads."""
    return PlainMd(_fenced(body, lang, "", ""))


def _fenced(body: str, lang: str, attrs: str, indent: str) -> str:
    if not LANG.fullmatch(lang):
        raise ValueError(f"code_block: {lang!r} is no language name")
    _require_blank(indent)
    body = str(body).replace("\r\n", "\n").replace("\r", "\n")  # Markdown ends lines at \r too: indent every one
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    fence = "`" * max(3, longest + 1)
    head = f"{fence}{lang}" + (f" {attrs}" if attrs else "")
    lines = [head, *body.split("\n"), fence]
    return "\n".join(indent + line if line else line for line in lines)


def indent(markdown: Md, prefix: str) -> Md:
    """Safe Markdown with every non-empty line indented by `prefix` (spaces or tabs only)."""
    require(markdown, Md, "indent's markdown")
    _require_blank(prefix)
    return Md("\n".join(prefix + line if line else line for line in str(markdown).split("\n")))


def _require_blank(prefix: str) -> None:
    if prefix.strip(" \t"):
        raise ValueError(f"an indent is spaces or tabs, not {prefix!r}")


def attr(s: object) -> Md:
    """A value for a Markdown attribute in double quotes (a code block's title)."""
    return Md(visible(_one_line(s)).replace("\\", "/").replace('"', "'"))


# A link target the code builds (a page, a figure, a download, a notebook on Colab): characters that
# could end the target, open markup or a template are percent-encoded; only https:// leaves the site.
_URL_KEEP = re.compile(r"[A-Za-z0-9\-._~:/?#=+,;%@!$*]")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


def url(target: object, plain: bool = False) -> Md | PlainMd:
    """A relative link or an https:// address, as the target of a Markdown link (PlainMd with `plain`)."""
    s = str(target)
    if _SCHEME.match(s) and not s.startswith("https://"):
        raise ValueError(f"a link leaves the site only for https://, not {s[:80]!r}")
    encoded = "".join(c if _URL_KEEP.fullmatch(c) else "".join(f"%{b:02X}" for b in c.encode()) for c in s)
    return PlainMd(encoded) if plain else Md(encoded)


def html_text(value: object, limit: int = MAX_TEXT) -> markupsafe.Markup:
    """Text for a template (a navigation title): one line, controls visible, bounded, HTML-escaped.
    MkDocs' templates do not autoescape; Markup is what Jinja knows as already escaped."""
    return markupsafe.Markup(html.escape(_cut(visible(_one_line(value)), limit)))


def raw_html_text(value: object, limit: int = MAX_TEXT) -> Md:
    """`html_text` for a raw HTML block that Markdown does not read (no `markdown` attribute): one line,
    so no blank line can end the block and hand the rest to Markdown."""
    return Md(html_text(value, limit))


def page_markdown(markdown: str, plain: bool = False) -> Md | PlainMd:
    """Markdown the page's author wrote (a directive's body indented under its line, the page's title):
    as much the author's as the rest of the page, which is Markdown already. Never for code/ or
    evidence/ text. PlainMd with `plain` (a notebook's title cell)."""
    return PlainMd(markdown.strip()) if plain else Md(markdown.strip())


def snippet_safe(markdown: Md) -> Md:
    """Markdown from code or evidence with pymdownx.snippets' markers escaped.

    The snippets extension (which appends the glossary's abbreviations to
    every page) reads every line of a page, inside code blocks too: a line
    `--8<-- "file"` pulls a file in, a line `--8<--` starts a list of files,
    and a `--8<-- [start:name]` marker is deleted. Its own escape, a `;`
    before the marker, is removed again when the page is converted, so the
    reader sees the line as it was recorded.
    """
    require(markdown, Md, "snippet_safe's markdown")
    if "8<-" not in markdown:
        return markdown
    from pymdownx.snippets import SnippetPreprocessor as Snippets

    lines = str(markdown).split("\n")
    for i, line in enumerate(lines):
        if "8<-" not in line:
            continue
        whole = Snippets.RE_ALL_SNIPPETS.match(line)
        section = None if whole else Snippets.RE_SNIPPET_SECTION.match(line)
        at = whole.end("space") if whole else section.start("escape") if section else -1
        if at >= 0:
            lines[i] = line[:at] + ";" + line[at:]
    return Md("\n".join(lines))


def clean_output(raw: str) -> str:
    """Recorded output as plain text: escapes stripped, controls made visible, size bounded.
    For a fenced block's body (code_block) or a notebook's stream output: places that read no markup."""
    s = ANSI.sub("", str(raw).replace("\r\n", "\n"))
    lines = []
    for line in s.split("\n"):
        line = line.rsplit("\r", 1)[-1]  # a progress bar's last state, as a terminal shows it
        line = visible(line.replace("\t", "    "))
        if len(line) > MAX_LINE:
            line = line[:MAX_LINE] + f" [... {numfmt.counted(len(line) - MAX_LINE, 'more character')}]"
        lines.append(line)
    if len(lines) > MAX_LINES:
        head, tail = lines[: MAX_LINES * 3 // 4], lines[-(MAX_LINES // 4):]
        lines = head + [f"[... {numfmt.counted(len(lines) - len(head) - len(tail), 'line')} not shown; "
                        "the evidence file has them ...]"] + tail
    return "\n".join(lines).rstrip("\n")


# -- plain Markdown: notebooks' own cells and archive READMEs ------------------------------

# Read outside the site (Jupyter, Colab, GitHub, an editor), where a backslash before ASCII punctuation
# makes it literal (CommonMark) and reads better as plain text than a character reference. So only a
# character that could start or end something where it stands is escaped: emphasis, code, links,
# raw HTML and autolinks, entities, strikethrough, math, GFM's bare URLs, www. and e-mail addresses,
# and at a line start a heading, list, quote, rule or fence. A value's neighbours outside it are
# unknown, so at its ends the escape assumes the worst. A template must not put a value inside a
# link's brackets.
_PUNCT = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
_FLANKING = frozenset("*_~")  # emphasis and strikethrough delimiters: escaped where a run could open or close
_WORDISH = re.compile(r"[\w.+-]")
_ENTITY = re.compile(r"&(?:#[0-9]*|#[xX][0-9a-fA-F]*|[A-Za-z][A-Za-z0-9]*)?(?:;|\Z)")
LINE_START = re.compile(r"\A(?:[#+=>-]|[0-9]{1,9}(?=[.)]))")  # a heading, list, quote or setext line start


def markdown_text(value: object, limit: int = MAX_TEXT, line_start: bool = False) -> PlainMd:
    """Text that any Markdown reader shows as the characters it is, and that reads as itself as plain text:
    no HTML, link, image, bare URL or address, emphasis, code, math or strikethrough; one line, controls
    and invisible characters visible, bounded. For lesson.toml text and evidence fields in notebooks and
    archive READMEs; `line_start` where the text begins a line (where '# ', '- ' or '1. ' would start a
    heading or a list). 'Layer norm: y = silu(a) * b' stays as it is."""
    s = _cut(visible(_one_line(_shown(value)).replace("\t", " ")).strip(), limit)
    escape = [_needs_escape(s, i) for i in range(len(s))]
    for start, end in _runs(s):
        if _run_can_delimit(s, start, end):
            escape[start:end] = [True] * (end - start)
    out = "".join(_JUPYTER_BACKSLASH if c == "\\" and _JUPYTER_MATH_AFTER.match(s, i + 1) else f"\\{c}" if e else c
                  for i, (c, e) in enumerate(zip(s, escape, strict=True)))
    if line_start:
        out = LINE_START.sub(lambda m: m.group() + "\\" if m.group()[0].isdigit() else "\\" + m.group(), out)
    return PlainMd(out)


# Jupyter's own grammar over Markdown's: JupyterLab (and Colab, nbconvert) cut math out of a cell before Markdown
# reads it, and take \\( \\) \\[ \\] (two backslashes in the source, which Markdown would make one) and
# \begin{...} \end{...} as its delimiters. A backslash escaped the Markdown way before one of those became a
# delimiter, and the text after it red TeX (issue 47.8); written as a character reference, it is a backslash to
# Markdown and nothing to the math pass.
_JUPYTER_MATH_AFTER = re.compile(r"[()\[\]]|(?i:begin|end)\{")
_JUPYTER_BACKSLASH = "&#92;"


def _needs_escape(s: str, i: int) -> bool:
    """Whether s[i] could start markup where it stands (emphasis runs are decided by `_run_can_delimit`)."""
    c = s[i]
    before = s[i - 1] if i else None  # None: outside the value, unknown
    after = s[i + 1] if i + 1 < len(s) else None
    if c in "`$":  # a code span, or math in Jupyter and on GitHub (MathJax pairs any two)
        return True
    if c == "\\":  # an escape itself, or a line break at the end of a line
        return after is None or after in _PUNCT
    if c == "<":  # a tag, a comment, a declaration, an autolink
        return after is None or after.isascii() and (after.isalpha() or after in "/!?")
    if c == "&":  # an entity or a character reference (or its start, where the value ends)
        return bool(_ENTITY.match(s, i))
    if c == "[":
        return "]" in s[i + 1:]
    if c == "]":
        return "[" in s[:i]
    if c == ":":  # a bare URL (GFM): scheme://
        return s[i + 1:i + 3] == "//" and before is not None and before.isalnum()
    if c == "." and i >= 3 and s[i - 3:i].lower() == "www":  # www. (GFM), unless inside a word
        return i == 3 or not s[i - 4].isalnum()
    if c == "@":  # an e-mail address (GFM) needs a local part: a template never glues a word to a value
        return before is not None and bool(_WORDISH.match(before)) and (after is None or bool(_WORDISH.match(after)))
    return False


def _runs(s: str):
    """(start, end) of every run of one emphasis or strikethrough delimiter character."""
    i = 0
    while i < len(s):
        if s[i] in _FLANKING:
            j = i
            while j < len(s) and s[j] == s[i]:
                j += 1
            yield i, j
            i = j
        else:
            i += 1


def _run_can_delimit(s: str, start: int, end: int) -> bool:
    """Whether a run of '*', '_' or '~' could open or close emphasis (CommonMark's flanking rules): not
    between two spaces, and for '_' not inside a word either (snake_case)."""
    before = s[start - 1] if start else None
    after = s[end] if end < len(s) else None
    if before is not None and after is not None and before.isspace() and after.isspace():
        return False
    if s[start] == "_" and before is not None and after is not None and before.isalnum() and after.isalnum():
        return False
    return True


def plain_code(value: object, limit: int = MAX_TEXT) -> PlainMd:
    """Text for an indented code block of plain Markdown (a README's commands): Markdown reads nothing
    there, so nothing is escaped; one line, controls visible, bounded."""
    return PlainMd(_cut(visible(_one_line(value)), limit))
