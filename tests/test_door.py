"""The one door, by type (issue 30, "one door"): escaping is a type, not a habit.

`door.Md` is site Markdown, `door.PlainMd` Markdown read outside the site,
markupsafe's Markup what a template prints, `terminal()` what a terminal
prints. Formatting, concatenating and joining a safe value escapes every
plain part; a directive that returns a plain str is a TypeError at build
time; only the door module constructs a safe value from anything but a
literal. And the plain-Markdown escape is proved with markdown-it-py (GFM
with linkify, as Jupyter and GitHub read it): the text a reader sees is the
text that was given, for hostile and for ordinary strings, and ordinary
prose keeps no backslash.
"""

from __future__ import annotations

import ast
import html
import re
from html.parser import HTMLParser

import markupsafe
import pytest
from markdown_it import MarkdownIt

from conftest import REPO, bench, fake_record
from verified_triton.core import numfmt
from verified_triton.core.terminal import safe
from verified_triton.judge.evidence import write_record
from verified_triton.site import directives, door
from verified_triton.site.door import Md, PlainMd, markdown_text, text

pytestmark = pytest.mark.unit

SITE = REPO / "tools" / "verified_triton" / "site"
HOSTILE = ['<img src=x onerror=alert(1)>', '"><svg onload=alert(2)>', "*x*", "`x`", "[a](javascript:x)",
           "{{ x }}", "$x$", ":x:", "\x1b[31mred\x1b[0m", "a\u202eb", "**b** _e_ ~~s~~ ~t~", "&amp; &#60;",
           "<!-- c --> <?p?> <!d>", "https://evil.example/p www.evil.example a@evil.example",
           "![i](https://e.x/i.png)", "[r]: https://e.x", "<https://e.x>", "\\*not\\* \\", "__init__ *a*b*",
           "x <b>y</b> z", "| a | b |", "[^1] [!NOTE]"]
ORDINARY = ["Layer norm: row statistics, a fused epilogue and a two-stage backward",
            "silu(a) * b, fused", "vector_add.py and tl.dot_scaled on sm_100", "dw/db summed in two stages",
            "3 < 4 and 5 > 2", "AT&T, 50 % and C++", "x = y + 1", "a - b", "torch 2.13.0+cpu",
            "(plain loads, stores and row reductions: FP16 in memory)", "snake_case and CamelCase", "1.5x ~ 2x"]


# -- the types --------------------------------------------------------------------------------

def test_formatting_concatenating_and_joining_escape_every_plain_part():
    bad = "<img src=x onerror=alert(1)>"
    assert Md("<b>{}</b>").format(bad) == f"<b>{text(bad)}</b>" and "<img" not in Md("<b>{}</b>").format(bad)
    assert Md("<b>") + bad == Md("<b>") + text(bad) and "<img" not in Md("x") + bad
    assert "<img" not in bad + Md("x")  # on the right, too
    joined = Md(", ").join([bad, Md("<i>kept</i>")])
    assert "<img" not in joined and "<i>kept</i>" in joined
    assert isinstance(Md("{}").format(bad), Md) and isinstance(joined, Md)
    assert "*" not in Md("{}").format("*x*") and "&#42;x&#42;" in Md("{}").format("*x*")
    assert str(Md("{x}").format(x="`x`")) == "&#96;x&#96;"


def test_the_two_markdown_types_do_not_vouch_for_each_other():
    site, plain = text("*x*"), markdown_text("*x*")
    assert PlainMd("{}").format(site) != site  # a site value is escaped again for a plain reader
    assert Md("{}").format(plain) == text(str(plain))
    assert Md("{}").format(markupsafe.Markup("<b>x</b>")) == text("<b>x</b>")  # plain Markup is not Md
    assert markupsafe.escape(PlainMd("\\<b>")) == "\\&lt;b&gt;"  # PlainMd is no HTML


def test_numbers_pass_numfmt_whatever_the_format():
    for x in (9.99e299, -1e300, 1e-300, 123456789.123, -0.000123456):
        for shown in (Md("{}").format(x), text(x), PlainMd("{}").format(x)):
            assert len(shown) <= numfmt.WIDEST, shown
    assert text(10**300) == text(numfmt.number(10**300)) and len(text(10**300)) <= numfmt.WIDEST
    assert text(42) == "42" and text(True) == "True"


def test_html_text_is_what_a_template_may_print():
    shown = door.html_text('<img src=x onerror=alert(1)> "q"\n\n**b** \x1b[31m')
    assert isinstance(shown, markupsafe.Markup)
    assert "<" not in shown and '"' not in shown and "\n" not in shown and "\x1b" not in shown


def test_a_link_target_leaves_the_site_only_for_https():
    assert door.url("../lessons/vector-add.md#__codelineno-0-3") == "../lessons/vector-add.md#__codelineno-0-3"
    assert door.url("x y)[z]|{w}") == "x%20y%29%5Bz%5D%7C%7Bw%7D"
    for bad in ("javascript:alert(1)", "data:text/html,x", "http://x"):
        with pytest.raises(ValueError):
            door.url(bad)


# -- the build refuses what did not pass the door -----------------------------------------------

@pytest.fixture
def planted():
    """A directive (and a notebook form) returning a plain str, registered for one test."""
    @directives.directive("plain-str", "returns a plain str", needs_lesson=False)
    def plain(page):
        return "<b>a plain str</b>"

    @directives.notebook_form("plain-str")
    def plain_notebook(page):
        return "<b>a plain str</b>"

    yield
    del directives.REGISTRY["plain-str"]


@pytest.mark.parametrize("notebook", [False, True])
def test_a_directive_returning_a_plain_str_is_a_type_error_naming_it(planted, notebook):
    page = directives.Page(directives.Site(None, None, [], {}), "x.md", None, notebook=notebook)
    with pytest.raises(TypeError, match="plain-str.*returned str, not Md"):
        directives.expand("plain-str", "", page)


def test_every_registered_directive_returns_md(project):
    """Each directive, called as the hook calls it, site form and notebook form, returns Md."""
    project.add("good", "import sys\nsys.exit(0)\n", kit=False)
    b = bench("b", 1.2, 1.1, 1.3)
    b.library = "Lib"
    rec = fake_record(project.lesson("good"), "gpu", benchmarks=[b])
    write_record(project.evidence, rec)
    from verified_triton.core.lessons import discover
    from verified_triton.judge.status import judge

    lessons = discover(project.code)
    site = directives.Site(project.code, project.evidence, lessons, {x.name: judge(x, project.evidence)
                                                                    for x in lessons})
    site.docs_dir = REPO / "docs"
    args = {"NAME": "b", "REGION": "none", "code/<lesson>/<file>.py": "code/good/good.py"}
    shown = 0
    for d in directives.REGISTRY.values():
        for notebook, form in ((False, d.render), (True, d.notebook)):
            if form is None:
                continue
            page = directives.Page(site, "lessons/good.md", site.status("good"), notebook=notebook)
            try:
                out = form(page, *[args[a] for a in d.args])
            except Exception:  # noqa: BLE001 - a missing region, step or table: not what this test is about
                continue
            assert isinstance(out, Md), f"::{d.name} ({'notebook' if notebook else 'site'}) returned {type(out)}"
            shown += 1
    assert shown >= len(directives.REGISTRY)


def _constructions(tree: ast.AST):
    """Calls Md(x) / PlainMd(x) / Markup(x) whose argument is not a string literal."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        name = node.func.id if isinstance(node.func, ast.Name) else \
            node.func.attr if isinstance(node.func, ast.Attribute) else ""
        if name in ("Md", "PlainMd", "Markup") and not (
                isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            yield node.lineno


def test_only_the_door_blesses_a_value():
    """Md("...") with a literal is the author's markup; Md(value) would vouch for a field: the door only."""
    found = []
    for path in sorted(SITE.rglob("*.py")):
        if path.name == "door.py":
            continue
        found += [f"{path.relative_to(REPO)}:{line}" for line in _constructions(ast.parse(path.read_text()))]
    assert found == [], "a safe type built from a value outside door.py: " + ", ".join(found)
    assert list(_constructions(ast.parse("Md(x)\nMd('ok')\nPlainMd(f'{x}')\nmarkupsafe.Markup(y)"))) == [1, 3, 4]


# -- the terminal ------------------------------------------------------------------------------

def test_the_terminal_door_shows_every_control_character():
    assert safe("red \x1b[31mtext\x1b[0m\tand a bell\x07") == "red \\x1b[31mtext\\x1b[0m\\x09and a bell\\x07"
    assert safe("a\nb") == "a\\x0ab" and safe("a\nb\x1b", lines=True) == "a\nb\\x1b"
    assert safe("bidi \u202e here") == "bidi \\u202e here" and safe("plain ✓") == "plain ✓"
    assert safe("x" * 30, limit=10) == "x" * 10 + " [... 20 more characters]"
    assert door.terminal is safe


def test_the_log_filter_makes_every_record_it_prints_safe():
    import logging

    from verified_triton.core.terminal import SafeRecords

    record = logging.LogRecord("mkdocs", logging.ERROR, __file__, 1, "main = %r\nnext", ("\x1b]0;t\x07",), None)
    assert SafeRecords().filter(record) and record.getMessage() == "main = '\\x1b]0;t\\x07'\nnext"


# -- plain Markdown: what Jupyter and GitHub render is what was given ---------------------------

def gfm() -> MarkdownIt:
    """CommonMark with GFM's tables, strikethrough and autolinks (linkify-it), as Jupyter and GitHub read."""
    return MarkdownIt("gfm-like")


class _Rendered(HTMLParser):
    def __init__(self, source: str):
        super().__init__(convert_charrefs=True)
        self.tags, self.text, self.links, self.in_link = [], [], [], False
        self.feed(source)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag == "a":
            self.links.append("")
            self.in_link = True

    def handle_endtag(self, tag):
        self.in_link = self.in_link and tag != "a"

    def handle_data(self, data):
        self.text.append(data)
        if self.in_link:
            self.links[-1] += data


def rendered(markdown: str) -> tuple[list, str]:
    doc = _Rendered(gfm().render(markdown))
    return doc.tags, "".join(doc.text).strip()


def autolinks(markdown: str) -> list[str]:
    """The links GFM and Jupyter would make of bare text: www., scheme:// and e-mail addresses. linkify-it
    also links bare domains (a.py), which neither does: those are not counted."""
    links = _Rendered(gfm().render(markdown)).links
    return [t for t in links if t.lower().startswith("www.") or "://" in t or "@" in t]


def expected(value: str) -> str:
    """What a reader should see: the value on one line, terminal codes dropped, controls pictured."""
    return str(door.visible(door.ANSI.sub("", value).replace("\n", " "))).strip()


@pytest.mark.parametrize("value", HOSTILE + ORDINARY)
@pytest.mark.parametrize("template, line_start, wrap", [
    ("{}", True, ""), ("Said: {} and more.", False, ""), ("*{}*", False, "em"), ("- {}", False, "li"),
    ("# {}", False, "h1")])
def test_plain_markdown_renders_as_the_text_it_was_given(value, template, line_start, wrap):
    md = PlainMd(template).format(markdown_text(value, line_start=line_start))
    tags, shown = rendered(md)
    literal = PlainMd(template.replace("{}", "VALUE"))
    _, frame = rendered(literal)
    assert shown == frame.replace("VALUE", expected(value)), md
    assert [t for t, _ in tags if t != "a"] == [t for t, _ in rendered(literal)[0]], f"markup from {value!r}: {md}"
    assert not autolinks(md), md
    assert "$" not in re.sub(r"\\\$", "", md), f"an unescaped $ starts math in Jupyter: {md}"


def test_the_proof_can_fail():
    """Unescaped, the hostile strings do become markup: the renderer sees what Jupyter would."""
    assert autolinks("see www.x.com, https://x.y and a@b.co") == ["www.x.com", "https://x.y", "a@b.co"]
    assert autolinks("a.py") == []  # a bare domain: linkify-it's, not GFM's
    assert [t for t, _ in rendered("*x* <b>y</b> [a](javascript:x)")[0]] == ["p", "em", "b"]
    assert rendered("&amp; `c`")[1] == "& c"


@pytest.mark.parametrize("value", ORDINARY)
def test_ordinary_prose_reads_as_itself_in_plain_text(value):
    assert markdown_text(value) == value  # no backslash where nothing could start


def test_plain_markdown_escapes_only_where_something_could_start():
    assert markdown_text("a*b*c") == "a\\*b\\*c" and markdown_text("a * b") == "a * b"
    assert markdown_text("tl.dot_scaled") == "tl.dot_scaled" and markdown_text("_x_") == "\\_x\\_"
    assert markdown_text("see www.x.org") == "see www\\.x.org" and markdown_text("awww.x") == "awww.x"
    assert markdown_text("https://x") == "https\\://x" and markdown_text("at a@b.c") == "at a\\@b.c"
    assert markdown_text("@triton.autotune") == "@triton.autotune"
    assert markdown_text("<b> < 3") == "\\<b> < 3" and markdown_text("&amp; & b") == "\\&amp; & b"
    assert markdown_text("[a] b") == "\\[a\\] b" and markdown_text("a [ b") == "a [ b"
    assert markdown_text("# h", line_start=True) == "\\# h" and markdown_text("1. x", line_start=True) == "1\\. x"
    assert markdown_text("# h") == "# h"  # inside a line a '#' starts nothing
    assert markdown_text("costs 5 $ each") == "costs 5 \\$ each"  # Jupyter's MathJax pairs any two, spaced or not
    assert len(markdown_text("x" * 10_000)) < 4100 and "\n" not in markdown_text("a\n\nb")


def test_a_readme_command_line_is_shown_as_written():
    assert door.plain_code("TRITON_INTERPRET=1 python x_y.py") == "TRITON_INTERPRET=1 python x_y.py"
    assert "\x1b" not in door.plain_code("\x1b[31mx.py") and "\n" not in door.plain_code("a\nb")
    assert html.unescape(text("x")) == "x"


# Issue 47.8: JupyterLab's math pass runs before Markdown (its removeMath): these are its delimiters. An escaped
# dollar (\$) and an escaped brace are tokens it steps over.
JUPYTER_MATH = re.compile(r"\$\$?|\\(?:begin|end)\{[a-z]*\*?\}|\\[{}$]|\\\\(?:\(|\)|\[|\])", re.I)
MATH_LIKE = [r"a\(b\)c", r"\[x^2\]", r"\\(y", r"\begin{align}x\end{align}", r"\BEGIN{x}", r"$x$ and $$y$$",
             r"see \(1 + 2\) and \)", r"tl.dot(a, b)[0]", "\\"]


def jupyter_math(markdown: str) -> list[str]:
    """The math delimiters JupyterLab's math pass finds in a cell's source."""
    return [m for m in JUPYTER_MATH.findall(markdown) if not re.fullmatch(r"\\[{}$]", m)]


def test_the_proof_of_the_math_pass_can_fail():
    assert jupyter_math(r"\\(x\\)") == [r"\\(", r"\\)"] and jupyter_math(r"$x$") == ["$", "$"]
    assert jupyter_math(r"\begin{align}") == [r"\begin{align}"] and jupyter_math(r"\$5") == []


@pytest.mark.parametrize("value", MATH_LIKE + HOSTILE)
def test_plain_markdown_starts_no_math_in_jupyter_and_still_reads_as_itself(value):
    md = markdown_text(value)
    assert jupyter_math(md) == [], md
    assert rendered(md)[1] == expected(value), md
