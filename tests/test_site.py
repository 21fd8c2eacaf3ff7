"""The real site builds from the lesson sources and the committed evidence; page errors fail the build.

The committed evidence may be stale (a kit change makes every record stale
until the lessons are re-recorded): nothing here requires a lesson to be
VERIFIED, only that the site builds, shows its regions, and links resolve.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from conftest import MKDOCS_ENV, Doc, SiteProject, make_site_project
from page_metrics import caption_ranges, raw_latex_entries
from verified_triton.core.lessons import discover
from verified_triton.site import directives
from verified_triton.site.render import text as escaped
from verified_triton.site.snippets import extract

ROOT = Path(__file__).resolve().parent.parent


MKDOCS = [sys.executable, "-m", "mkdocs"]


@pytest.fixture
def built_site(real_site) -> Path:
    """The run's one build of the real site (conftest.py)."""
    return real_site


def extra_page_project(tmp_path: Path, extra_page: str) -> SiteProject:
    """A small course (one lesson, vector-add, with a `kernel` region) and one more page, built with the real
    mkdocs.yml and hooks. The errors below are the hook's whatever the course's size; a copy of the real docs
    cost a build of the whole site each (the real site itself is built once per run: `real_site`)."""
    project = make_site_project(tmp_path / "project")
    project.add_lesson("vector-add")
    (project.docs / "extra.md").write_text(extra_page, encoding="utf-8")
    return project


def visible_text(html: str) -> str:
    """The text a reader sees in a page (tags dropped, entities decoded)."""
    class Text(HTMLParser):
        def __init__(self):
            super().__init__()
            self.parts: list[str] = []

        def handle_data(self, data):
            self.parts.append(data)

    parser = Text()
    parser.feed(html)
    return "".join(parser.parts)


@pytest.mark.integration
def test_every_lesson_page_shows_its_kernel_region(built_site):
    for lesson in discover(ROOT / "code"):
        page = built_site / lesson.page.removesuffix(".md") / "index.html"
        assert page.is_file(), f"{lesson.page} was not built"
        text = visible_text(page.read_text(encoding="utf-8"))
        markdown = (ROOT / "docs" / lesson.page).read_text(encoding="utf-8")
        shown = re.findall(r"^::snippet (\S+) (\S+)\s*$", markdown, re.M)
        assert shown, f"{lesson.page} shows no region"
        for rel, name in shown:
            region = extract(ROOT / rel, name)
            for line in region.text.strip().splitlines():
                assert line.strip() in text, f"{lesson.page}: line of {rel}#{name} missing: {line!r}"
            assert f"{rel}, line" in text, f"{lesson.page}: region {name} has no source title"


@pytest.mark.integration
def test_every_caption_names_the_lines_its_block_shows(built_site):
    """A snippet's caption ("code/x/y.py, lines 29-39") names exactly the first and last line numbers its block
    shows, on every page of the real site (issue 32 item 6: 95 of 247 named the region's markers' span)."""
    pages = [p for p in built_site.rglob("index.html") if "source" not in p.relative_to(built_site).parts[:1]]
    captions, wrong = 0, []
    for page in pages:
        for caption in caption_ranges(page.read_text(encoding="utf-8")):
            captions += 1
            if not caption.right:
                wrong.append(f"{page.relative_to(built_site)}: {caption.title!r} shows lines "
                             f"{caption.shown[0]}-{caption.shown[1]}")
    assert captions > 100, f"only {captions} captions with a line range found: is the block's HTML still parsed?"
    assert not wrong, f"{len(wrong)} of {captions} captions name other lines than they show:\n  " + \
        "\n  ".join(wrong[:20])


@pytest.mark.unit
def test_caption_ranges_reads_what_a_block_shows():
    block = ('<span class="filename">code/a/b.py, lines 29-41</span><pre><span></span><code class="vt-lines" '
             'style="counter-reset:vt-line 28;--vt-digits:2"><span>x\n</span><span>y\n</span></code></pre>')
    (caption,) = caption_ranges(block)
    assert caption.named == (29, 41) and caption.shown == (29, 30) and not caption.right
    (one,) = caption_ranges(block.replace("lines 29-41", "line 29").replace("<span>y\n</span>", ""))
    assert one.right


@pytest.mark.integration
def test_the_search_index_holds_maths_as_plain_text(built_site):
    """Issue 32 item 7: 104 of 302 entries held raw LaTeX (\\(2S^2D\\)); the page keeps KaTeX's source."""
    import json

    index = json.loads((built_site / "search" / "search_index.json").read_text(encoding="utf-8"))
    assert not raw_latex_entries(index), raw_latex_entries(index)[:5]
    text = "\n".join(e["text"] for e in index["docs"])
    assert "softmax(Q K^⊤ · scale)" in text  # attention-backward's first formula, as a reader types it
    page = (built_site / "lessons" / "attention-backward" / "index.html").read_text(encoding="utf-8")
    assert '<span class="arithmatex">\\(O = \\mathrm{softmax}' in page, "the page lost its maths"


@pytest.mark.unit
@pytest.mark.parametrize("latex, plain", [
    ("2S^2D", "2S^2D"),
    ("\\mathtt{BLOCK\\_N} \\cdot 2", "BLOCK_N · 2"),
    ("\\tfrac{1}{2} \\le x", "1/2 ≤ x"),
    ("a &lt; b", "a &lt; b"),  # HTML in, HTML out: the index holds HTML
    ("\\unknown{x}", "x"),
])
def test_maths_for_search_reads_as_typed(latex, plain):
    from verified_triton.site.hooks import plain_math

    assert plain_math(latex) == plain


@pytest.mark.unit
def test_maths_in_code_is_left_as_it_is():
    from verified_triton.site.hooks import searchable

    text = '<p>Cost \\(2S^2D\\).</p><pre><code>re.compile(r"\\(x\\)")</code></pre> <code>\\[1\\]</code>'
    assert searchable(text) == '<p>Cost 2S^2D.</p><pre><code>re.compile(r"\\(x\\)")</code></pre> <code>\\[1\\]</code>'


@pytest.mark.integration
def test_vector_add_kernel_is_in_the_built_html(built_site):
    html = (built_site / "lessons" / "vector-add" / "index.html").read_text(encoding="utf-8")
    text = visible_text(html)
    assert "def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):" in text
    assert "code/vector-add/vector_add.py, lines" in text
    # the link to the full source and the published file
    assert 'href="../../source/vector-add/vector_add/#__codelineno-0-' in html
    assert (built_site / "code" / "vector-add" / "vector_add.py").read_bytes() == \
        (ROOT / "code" / "vector-add" / "vector_add.py").read_bytes()


@pytest.mark.integration
def test_every_figure_carries_its_pixel_size(built_site):
    """A lazy figure without its size is a line of alt text until it loads: the page jumps under the reader,
    and a page measured as it opens (tests/page_metrics.py) is shorter than the one a reader scrolls."""
    figures = 0
    for page in sorted(built_site.glob("lessons/*/index.html")):
        for img in re.findall(r'<figure class="vt-figure">.*?</figure>', page.read_text("utf-8"), re.S):
            for tag in re.findall(r"<img [^>]*>", img):
                figures += 1
                size = re.search(r'width="(\d+)"', tag), re.search(r'height="(\d+)"', tag)
                assert all(size) and all(int(m.group(1)) > 0 for m in size), f"{page}: {tag[:160]}"
    assert figures > 20


@pytest.mark.integration
def test_a_page_naming_a_missing_region_fails_the_build(tmp_path):
    result = extra_page_project(tmp_path, "# Extra\n\nText.\n\n::snippet code/vector-add/vector_add.py "
                                          "no-such-region\n").build()
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "extra.md:5" in output, output
    assert "no region named 'no-such-region'" in output
    assert "Traceback" not in output


@pytest.mark.integration
def test_a_page_naming_a_missing_file_fails_the_build(tmp_path):
    result = extra_page_project(tmp_path, "# Extra\n\n::snippet code/vector-add/nope.py kernel\n").build()
    assert result.returncode != 0
    assert "extra.md:3" in result.stdout + result.stderr
    assert "code/vector-add/nope.py: not found" in result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr


@pytest.mark.integration
def test_unknown_directive_and_missing_lesson_fail_with_the_line(tmp_path):
    result = extra_page_project(tmp_path, "---\nlesson: no-such-lesson\n---\n# Extra\n\n::status\n").build()
    assert result.returncode != 0
    assert "docs/extra.md: front matter names lesson 'no-such-lesson', but there is no code/no-such-lesson/" \
        in result.stdout + result.stderr
    result = extra_page_project(tmp_path / "b", "# Extra\n\n::snippets code/vector-add/vector_add.py kernel\n").build()
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "extra.md:3: unknown directive '::snippets' (known: " in output
    assert all(f"::{name}" in output for name in directives.REGISTRY), "the error lists the registry"
    assert "Traceback" not in output


def next_page(site: Path, page: str) -> Path | None:
    """The page a built page's footer links to as "next", resolved."""
    folder = site / page.removesuffix(".md")
    found = re.search(r'<a href="([^"]+)" class="md-footer__link md-footer__link--next"',
                      (folder / "index.html").read_text(encoding="utf-8"))
    return (folder / found.group(1)).resolve() if found else None


@pytest.mark.integration
def test_the_lessons_section_of_the_navigation_comes_from_lesson_toml(built_site):
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert "  - Lessons: []" in config and "lessons/" not in config.split("\nnav:", 1)[1]
    lessons = discover(ROOT / "code")
    # the navigation's order is the course order: each lesson's "next" is the lesson after it
    for a, b in zip(lessons, lessons[1:], strict=False):
        assert next_page(built_site, a.page) == (built_site / b.page.removesuffix(".md")).resolve(), a.name
    html = (built_site / "index.html").read_text(encoding="utf-8")
    assert f'href="{lessons[0].page.removesuffix(".md")}/"' in html


@pytest.mark.integration
def test_the_authors_table_of_directives_lists_the_registry(built_site):
    text = visible_text((built_site / "writing-a-lesson" / "index.html").read_text(encoding="utf-8"))
    for d in directives.REGISTRY.values():
        assert d.usage in text and html_text(d.help) in text, d.name


@pytest.mark.integration
def test_the_limits_table_is_the_code(built_site):
    from verified_triton.core.limits import LIMITS

    text = visible_text((built_site / "verification" / "index.html").read_text(encoding="utf-8"))
    for what, limit, _ in LIMITS.rows():
        assert html_text(what) in text and limit in text


def html_text(value: str) -> str:
    """A value as a reader sees it once render.text() escaped it."""
    import html

    return html.unescape(escaped(value))


@pytest.mark.integration
def test_directives_inside_code_fences_are_left_alone(tmp_path):
    page = "# Extra\n\n```markdown\n::snippet code/vector-add/vector_add.py no-such-region\n```\n"
    project = extra_page_project(tmp_path, page)
    result = project.build()
    assert result.returncode == 0, result.stdout + result.stderr
    html = (project.site / "extra" / "index.html").read_text(encoding="utf-8")
    assert "no-such-region" in visible_text(html)


# -- links ---------------------------------------------------------------------------

class Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids: set[str] = set()
        self.links: list[tuple[str, str]] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for key in ("id", "name"):
            if attrs.get(key):
                self.ids.add(attrs[key])
        for key in ("href", "src"):
            if attrs.get(key):
                self.links.append((tag, attrs[key]))


@pytest.mark.integration
def test_every_internal_link_and_anchor_resolves(built_site):
    pages = {}
    for html in built_site.rglob("*.html"):
        parser = Links()
        parser.feed(html.read_text(encoding="utf-8"))
        pages[html] = parser
    broken = []
    for html, parser in pages.items():
        for _tag, link in parser.links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc or link.startswith(("mailto:", "javascript:", "data:")):
                continue
            if not parts.path:
                target = html
            elif parts.path.startswith("/"):  # 404.html links from the site root
                target = (built_site / unquote(parts.path).lstrip("/")).resolve()
            else:
                target = (html.parent / unquote(parts.path)).resolve()
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{html.relative_to(built_site)}: {link} (no such file)")
                continue
            if parts.fragment and target.suffix == ".html" and target in pages:
                if unquote(parts.fragment) not in pages[target].ids:
                    broken.append(f"{html.relative_to(built_site)}: {link} (no such anchor)")
    assert not broken, "\n".join(broken[:40])


# -- a dirty rebuild (`mkdocs serve --dirty`, bash tools/dev.sh serve) ----------------------------------

def _nav_and_footer(page_html: str) -> tuple[list[str], dict[str, str]]:
    """The sidebar's link texts and the footer's previous/next titles, as a reader sees them."""
    doc = Doc(page_html)
    links = [" ".join("".join(a.text).split()) for a in doc.find("a", "md-nav__link")
             if a.inside("nav", "md-nav--primary")]
    footer = {}
    for direction in ("prev", "next"):
        found = doc.find("a", f"md-footer__link--{direction}")
        if found:
            title = [e for e in doc.elements if e.tag == "div" and "md-ellipsis" in e.classes and found[0] in
                     e.ancestors]
            footer[direction] = " ".join("".join(title[0].text).split())
    return links, footer


@pytest.mark.integration
def test_a_dirty_rebuild_keeps_every_title_in_the_navigation_and_the_footer(site_project):
    """Before: after one page was saved under `mkdocs serve --dirty`, that page came back with the other
    lessons of its part titled "None" in the sidebar and "Next: None" in the footer, until a full rebuild:
    a dirty build does not read the pages it does not re-render, and the titles came from their headings."""
    # lesson.toml's titles, shown as text wherever the theme writes them (<title> too); the pages' own
    # headings are not where the navigation reads them
    titles = {"one": "One: the first", "two": "Two </title><b>bold</b> & more", "three": "Three: the last"}
    for order, (name, title) in enumerate(titles.items(), 1):
        site_project.add_lesson(name, title=title, order=order, toml='part = "A <i>part</i>"\n',
                                page=f"---\nlesson: {name}\n---\n\n# Page {name}\n\n::status\n")
    config = site_project.config()
    env = dict(MKDOCS_ENV, VT_CODE_DIR=str(site_project.code), VT_EVIDENCE_DIR=str(site_project.evidence))

    def mkdocs_build(*flags: str) -> None:
        result = subprocess.run([*MKDOCS, "build", *flags, "-f", str(config), "-d", str(site_project.site)],
                                capture_output=True, text=True, env=env, cwd=site_project.root, timeout=300)
        assert result.returncode == 0, result.stdout + result.stderr

    mkdocs_build("--strict")
    full = site_project.html("two")
    output = site_project.site / "lessons/two/index.html"
    os.utime(output, (0, 0))
    page = site_project.docs / "lessons/two.md"
    page.write_text(page.read_text(encoding="utf-8") + "\n", encoding="utf-8")  # one blank line, saved
    mkdocs_build("--dirty", "--no-strict")
    assert output.stat().st_mtime > 0, "the saved page was not rendered again"
    dirty = site_project.html("two")
    links, footer = _nav_and_footer(dirty)
    assert "None" not in links and footer == {"prev": titles["one"], "next": titles["three"]}, (links, footer)
    assert [t for t in links if t in titles.values()] == list(titles.values())
    assert _nav_and_footer(dirty) == _nav_and_footer(full)
    doc = Doc(dirty)
    assert not doc.find("b") and not doc.find("i"), "a title from lesson.toml made an element"
    assert "A <i>part</i>" in visible_text(dirty)
    head = next(e for e in doc.elements if e.tag == "title")
    assert "".join(head.text).startswith(titles["two"] + " - ")


# -- the licence (issue 32 item 8) ----------------------------------------------------------------------

@pytest.mark.unit
def test_the_repository_states_its_licences():
    code, docs = (ROOT / "LICENSE").read_text(encoding="utf-8"), (ROOT / "LICENSE-docs").read_text(encoding="utf-8")
    assert code.startswith("MIT License") and "Permission is hereby granted, free of charge" in code
    assert "Creative Commons Attribution 4.0 International Public License" in docs and "Section 8" in docs
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    licence = readme.split("\n## Licence\n", 1)[1].split("\n## ", 1)[0]
    assert "MIT" in licence and "CC BY 4.0" in licence and "LICENSE-docs" in licence


@pytest.mark.integration
def test_every_page_says_the_licence_in_its_footer(built_site):
    pages = sorted(built_site.rglob("index.html"))
    assert len(pages) > 30
    for page in pages:
        footer = page.read_text(encoding="utf-8").split('<div class="md-copyright">', 1)
        assert len(footer) == 2, f"{page.relative_to(built_site)}: no copyright line in the footer"
        said = visible_text(footer[1].split("</div>", 1)[0])
        assert "MIT" in said and "CC BY 4.0" in said, f"{page.relative_to(built_site)}: {said!r}"


@pytest.mark.integration
def test_every_zip_carries_the_licence_and_its_readme_says_so(built_site):
    import zipfile

    archives = sorted((built_site / "downloads").glob("*.zip"))
    assert len(archives) == len(discover(ROOT / "code"))
    licence = (ROOT / "LICENSE").read_bytes()
    for path in archives:
        with zipfile.ZipFile(path) as zf:
            name = path.stem
            assert zf.read(f"{name}/LICENSE") == licence, f"{path.name}: no LICENSE, or another one"
            readme = zf.read(f"{name}/README.md").decode()
            assert "## Licence" in readme and "MIT" in readme and "CC BY 4.0" in readme, path.name


@pytest.mark.integration
def test_the_home_pages_code_block_is_no_triton_block(built_site):
    """Issue 51: "Every code block" on the home page carried the glossary's definition of a Triton block; a
    lesson's own blocks keep theirs."""
    home = (built_site / "index.html").read_text(encoding="utf-8")
    assert "code block" in home and not re.search(r"code\s+<abbr[^>]*>block", home)
    lesson = (built_site / "lessons" / "vector-add" / "index.html").read_text(encoding="utf-8")
    assert re.search(r'<abbr title="The elements one program handles[^"]*">block</abbr>', lesson)


@pytest.mark.integration
def test_the_404_pages_links_are_not_root_absolute(built_site):
    """Issue 51: 404.html linked /assets/... and /lessons/..., which break when the site lives under a subpath.
    Without site_url its links are relative to the site's root (tests/test_browser.py opens it under one)."""
    page = (built_site / "404.html").read_text(encoding="utf-8")
    absolute = re.findall(r'(?:href|src)="(/(?!/)[^"]*)"', page)
    assert not absolute, f"root-absolute links in 404.html: {absolute[:5]}"
    assert '"base": "."' in page  # Material's search and scripts find the site's root from here


@pytest.mark.integration
def test_a_partial_by_design_is_told_apart_on_every_list(tmp_path):
    """Issue 48 item 3: a PARTIALLY VERIFIED by design (nothing missing) carries its own words and class on the
    lesson's status line, the home page's list and the status page; a partial that lacks evidence does not."""
    from conftest import build_output, make_partials_site

    project = make_partials_site(tmp_path / "partials")
    result = project.build()
    assert result.returncode == 0, build_output(result)

    def article(path: Path) -> str:  # the page's own content, not the navigation's links
        html = path.read_text(encoding="utf-8")
        return html[html.index("<article"):html.index("</article>")]

    home, status = article(project.site / "index.html"), article(project.site / "status" / "index.html")
    for name, label, designed in (("designed", "PARTIALLY VERIFIED · by design", True),
                                  ("lacking", "PARTIALLY VERIFIED", False), ("whole", "VERIFIED", False)):
        box = re.search(r'<div class="admonition ([^"]*vt-status[^"]*)">\s*<p class="admonition-title">([^<]*)<',
                        project.html(name))
        assert box and box.group(2) == label and ("vt-by-design" in box.group(1)) == designed, (name, box)
        for where, html in (("home", home), ("status", status)):
            row = re.search(re.escape(f"lessons/{name}/") + r'".*?<span class="vt-badge ([^"]*)">([^<]*)</span>',
                            html, re.S)
            assert row and row.group(2) == label and ("vt-by-design" in row.group(1)) == designed, (where, name)


@pytest.mark.integration
def test_every_lesson_has_its_record_out_of_search_and_after_it_in_the_navigation(built_site):
    """Issue 51 item 1: lessons/NAME/record/ is built for every lesson from its evidence, the lesson's status
    line links it, the navigation lists it right after its lesson, and the search index leaves it out (the
    lesson page is what a search should find)."""
    from verified_triton.site.hooks import course_nav, with_records

    lessons = discover(ROOT / "code")
    index = json.loads((built_site / "search" / "search_index.json").read_text(encoding="utf-8"))
    assert not [e["location"] for e in index["docs"] if "/record/" in e["location"]]
    for lesson in lessons:
        record = built_site / lesson.page.removesuffix(".md") / "record" / "index.html"
        assert record.is_file(), lesson.name
        html = record.read_text(encoding="utf-8")
        assert "Why this badge." in html and 'href="../"' in html, lesson.name  # the reason; back to the lesson
        page = (built_site / lesson.page.removesuffix(".md") / "index.html").read_text(encoding="utf-8")
        assert re.search(r'<a class="vt-record-link" href="record/">The record →</a>', page), lesson.name

    def flat(nav):
        for item in nav:
            value = next(iter(item.values()))
            yield from flat(value) if isinstance(value, list) else [value]

    pages = list(flat(with_records(course_nav(lessons), lessons)))
    for lesson in lessons:
        assert pages[pages.index(lesson.page) + 1] == lesson.page.removesuffix(".md") + "/record.md"
