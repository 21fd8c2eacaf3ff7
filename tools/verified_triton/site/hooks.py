"""MkDocs hooks: the course's navigation, its published sources and evidence, and `::` directives.

The hook is thin; each job lives elsewhere:
- the Lessons section of the navigation comes from lesson.toml (`order`), never from mkdocs.yml;
- every lesson source is published as a download and a full-source page (sources.py);
- every usable record and the figures it names are published, read through the schema and safefs;
- `::NAME ARGS` lines are expanded by the directive registry (tools/verified_triton/site/directives/);
- the search index holds maths as plain text (`on_post_build`: `2S^2D`, not `\\(2S^2D\\)`), while the page keeps
  the LaTeX KaTeX typesets.
Any error (a bad directive, a missing file or region, unusable evidence, a link
under code/ or evidence/) fails the build with the page's FILE:LINE or the file's path;
under `mkdocs serve` it shows in the browser instead, until the next good build (overlay.py).

What a template or the terminal receives goes through the door (door.py): the navigation's section
titles (lesson.toml `part`) are HTML-escaped Markup, and every message MkDocs' log prints passes
core/terminal.py's filter, so an escape sequence in lesson.toml or a record is printed as \x1b.
"""

from __future__ import annotations

import functools
import html
import json
import logging
import os
import re
from pathlib import Path

from markdown.extensions.abbr import AbbrBlockprocessor
from mkdocs.exceptions import Abort, PluginError
from mkdocs.structure.files import File, Files

from verified_triton.core.lessons import LessonError, discover
from verified_triton.core.limits import LIMITS
from verified_triton.core.paths import ROOT
from verified_triton.core.safefs import UnsafePathError, read_text
from verified_triton.core.terminal import guard_handlers
from verified_triton.judge.evidence import EvidenceError, figure_files, read_figure
from verified_triton.site import (
    directives,
    downloads,
    glossary,
    incremental,
    overlay,
    record_page,
    siteconfig,
    sources,
)
from verified_triton.site.directives.output import log_text, log_uri
from verified_triton.site.door import Md, code_span, nav_title, snippet_safe, text, url
from verified_triton.site.siteconfig import ConfigError, check_branch, check_repo_url
from verified_triton.site.snippets import SnippetError, read_regions

# Tests point the hook at a throw-away project; the site publishes them as code/ and evidence/ all the same.
CODE_DIR = Path(os.environ.get("VT_CODE_DIR") or ROOT / "code").absolute()
EVIDENCE_DIR = Path(os.environ.get("VT_EVIDENCE_DIR") or ROOT / "evidence").absolute()
LESSONS_SECTION = "Lessons"

_site: directives.Site | None = None
_lessons: list | None = None  # discovered once per build, in on_config
_records: frozenset[str] = frozenset()  # the record pages' uris, of _lessons: asked for by every page
_dirty = False  # `mkdocs serve --dirty`: generated files go through a cache folder (see incremental.py)


class _QuietCodeLineAnchors(logging.Filter):
    """MkDocs cannot see the highlighter's line anchors (#__codelineno-0-N) and logs each link to one;
    tests/test_site.py checks every anchor in the built HTML instead. Other messages pass."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "__codelineno-" not in record.getMessage()


def on_startup(command, dirty) -> None:
    logging.getLogger("mkdocs.structure.pages").addFilter(_QuietCodeLineAnchors())
    guard_handlers(logging.getLogger("mkdocs"))  # what MkDocs prints, our errors quoting lesson.toml among it
    os.environ["VT_DIRTY_SERVE"] = "1" if (dirty and command == "serve") else ""
    overlay.serving = command == "serve"


def on_serve(server, config, builder):
    """The server answers whatever a build does: failures are shown (overlay.py), never left to stall it."""
    server.builder = overlay.guard(server.builder)
    server.set_app(overlay.wrap_app(server.get_app()))
    return server


def on_build_error(error) -> None:
    if overlay.serving and not isinstance(error, Abort):  # another plugin's error: MkDocs prints it once at most
        overlay.report(str(error))


def _shown_while_serving(fallback):
    """Under `mkdocs serve`, a hook's error is reported to the overlay and the build goes on with
    `fallback(*args)`; a failed build would leave every request waiting. `mkdocs build` fails as before."""
    def wrap(hook):
        @functools.wraps(hook)
        def safe(*args, **kwargs):
            try:
                return hook(*args, **kwargs)
            except PluginError as exc:
                if not overlay.serving:
                    raise
                overlay.report(str(exc))
                return fallback(*args, **kwargs)
        return safe
    return wrap


class _Output:
    """Adds generated files to the build: in memory for a full build; through a cache folder,
    written only when changed, for a dirty serve (so MkDocs skips what did not change)."""

    def __init__(self, files: Files, config):
        self.files, self.config = files, config
        self.dirty = os.environ.get("VT_DIRTY_SERVE") == "1"
        self.root = Path(config["config_file_path"] or ROOT / "mkdocs.yml").parent  # nothing is written outside it
        self.cache = self.root / ".cache" / "site-files"

    def add(self, uri: str, content: str | bytes) -> None:
        if not self.dirty:
            self.files.append(File.generated(self.config, uri, content=content))
            return
        incremental.write_if_changed(self.cache / uri, content.encode() if isinstance(content, str) else content,
                                     self.root)
        self.files.append(File(uri, src_dir=str(self.cache), dest_dir=self.config["site_dir"],
                               use_directory_urls=self.config["use_directory_urls"]))


def _keep_config(config):
    global _lessons, _records
    _lessons, _records = None, frozenset()  # the course could not be read: the later hooks show the error instead
    return config


@_shown_while_serving(_keep_config)
def on_config(config):
    """Fill the Lessons section of the navigation from the lessons' own order and parts."""
    global _lessons, _records
    overlay.start_build()
    _lessons, _records = None, frozenset()
    try:
        _lessons = lessons = discover(CODE_DIR)
        _records = frozenset(record_page.record_uri(lesson) for lesson in lessons)
        pages = with_records(course_nav(lessons), lessons)
    except (LessonError, UnsafePathError) as exc:
        raise PluginError(str(exc)) from None
    config["mdx_configs"].setdefault("abbr", {})["glossary"] = glossary_terms(Path(config["docs_dir"]))
    nav = config.get("nav") or []
    for i, item in enumerate(nav):
        if isinstance(item, dict) and LESSONS_SECTION in item:
            nav[i] = {LESSONS_SECTION: pages}
            break
    else:
        nav.insert(1 if nav else 0, {LESSONS_SECTION: pages})
    config["nav"] = nav
    return config


def glossary_terms(docs_dir: Path) -> dict[str, str]:
    """The glossary (docs/includes/abbreviations.md) as the `abbr` extension's `glossary`: term -> definition, read
    once per build, as the extension reads definitions (its own pattern and rules, in file order; no file, none).

    The file used to be appended to every page's text (pymdownx.snippets' auto_append), where the Markdown parser
    took its hundred definitions one line at a time, testing each block processor against the rest of the file
    every time: about half of a strict build of 223 lessons, page for page the same."""
    try:
        text = read_text(docs_dir / glossary.ABBREVIATIONS, LIMITS.source_file, docs_dir)
    except UnsafePathError as exc:
        if not (docs_dir / glossary.ABBREVIATIONS).exists() and not (docs_dir / glossary.ABBREVIATIONS).is_symlink():
            return {}
        raise PluginError(str(exc)) from None
    terms: dict[str, str] = {}
    for m in AbbrBlockprocessor.RE.finditer(text):
        term, title = m.group("abbr").strip(), m.group("title").strip()
        if term and title:
            if title in ("''", '""'):
                terms.pop(term, None)
            else:
                terms[term] = title
    return terms


def course_nav(lessons) -> list:
    """Lesson pages in course order, each titled from its lesson.toml; consecutive lessons of one `part`
    form a sub-section.

    The title is given, not left to MkDocs: MkDocs takes an untitled page's title from its first heading,
    which it reads only when it renders the page, and a dirty build (`mkdocs serve --dirty`) renders only
    the pages that changed, so every other lesson's entry read "None" in the sidebar and the footer.
    With navigation.prune, a page carries only its own part's entries, so
    building a course of hundreds of lessons costs per page what a few dozen do.
    """
    nav: list = []
    previous = None
    for lesson in lessons:
        entry = {nav_title(lesson.title): lesson.page}
        part = nav_title(lesson.part)
        if not lesson.part:
            nav.append(entry)
        elif nav and isinstance(nav[-1].get(part), list):
            nav[-1][part].append(entry)
        else:
            _refuse_a_second_section(lesson, previous, lessons)
            nav.append({part: [entry]})
        previous = lesson
    return nav


def with_records(nav: list, lessons) -> list:
    """The course's navigation with each lesson's record right after its lesson, in the same section.

    MkDocs gives a page no children, so the record is the lesson's next sibling, titled "The record"; the
    site's style shows it, indented, only under the lesson being read or its record (verified.css), and
    on_nav keeps it out of the footer's chain from lesson to lesson."""
    records = {lesson.page: record_page.record_uri(lesson) for lesson in lessons}
    out: list = []
    for item in nav:
        title, value = next(iter(item.items()))
        if isinstance(value, list):
            out.append({title: with_records(value, lessons)})
            continue
        out.append(item)
        if value in records:
            out.append({nav_title(record_page.NAV_TITLE): records[value]})
    return out


def _record_uris() -> frozenset[str]:
    """The record pages' uris, made once per build (on_config): every page asks."""
    return _records


def on_nav(nav, config, files):
    """The footer leads from lesson to lesson, past the records: a lesson's "next" is the next lesson (or
    page), and a record's "previous" is its lesson and its "next" the lesson's next."""
    pages = nav.pages
    records = _record_uris()
    chain = [page for page in pages if page.file.src_uri not in records]
    for before, after in zip([None, *chain], [*chain, None], strict=True):
        if after is not None:
            after.previous_page = before
        if before is not None:
            before.next_page = after
    for i, page in enumerate(pages):
        if page.file.src_uri in records:
            lesson = pages[i - 1] if i else None
            page.previous_page, page.next_page = lesson, lesson.next_page if lesson else None
    return nav


def _refuse_a_second_section(lesson, previous, lessons) -> None:
    """A part's lessons must be consecutive in the course, or its section would show twice.

    The error names the lesson to move: one lesson of another part that splits this part's run is the
    stray (it is away from its own part too); otherwise the lesson that starts the part a second time.
    """
    index = lessons.index(lesson)
    earlier = [other for other in lessons[:index] if other.part == lesson.part]
    if not earlier:
        return
    last = earlier[-1]
    between = lessons[lessons.index(last) + 1:index]
    stray = between[0] if len(between) == 1 else None
    home = [other for other in lessons if stray and other.part == stray.part and other is not stray]
    if stray and stray.part and home:
        raise LessonError(
            f"{stray.folder / 'lesson.toml'}: '{stray.name}' ({stray.part}) sits between '{last.name}' and "
            f"'{lesson.name}', so part \"{lesson.part}\" would appear twice in the navigation. Keep a part's "
            f"lessons together: after = \"{home[-1].name}\" puts '{stray.name}' at the end of its part")
    following = lessons[lessons.index(last) + 1]
    by_order = (f" (or an order between {last.order:g} and {following.order:g})"
                if last.order < following.order else "")
    raise LessonError(
        f"{lesson.folder / 'lesson.toml'}: part \"{lesson.part}\" would appear twice in the navigation: "
        f"'{previous.name}' ({previous.part or 'no part'}) comes between '{last.name}' and '{lesson.name}'. "
        f"Keep a part's lessons together: after = \"{last.name}\"{by_order} puts '{lesson.name}' at the end "
        f"of its part")


def _no_site(config) -> None:
    global _site
    _site = None


@_shown_while_serving(_no_site)
def on_pre_build(config) -> None:
    global _site
    _site = None
    if _lessons is None:  # on_config reported why
        return
    extra = dict(config.get("extra") or {})
    try:  # both become links: a plain GitHub repository and a valid branch, or the build stops naming the setting
        repo, branch = check_repo_url(config.get("repo_url") or ""), check_branch(extra.get("branch", "main"))
    except ConfigError as exc:
        raise PluginError(str(exc)) from None
    try:
        _site = directives.Site.load(CODE_DIR, EVIDENCE_DIR, _lessons, repo, branch, extra)
    except (LessonError, EvidenceError, UnsafePathError) as exc:
        raise PluginError(str(exc)) from None
    _site.docs_dir = Path(config["docs_dir"]).absolute()
    problems = [p for st in _site.statuses.values() for p in st.problems]
    if problems:
        raise PluginError("unusable evidence (fix or re-record it):\n  " + "\n  ".join(problems))


def _files_as_they_are(files: Files, config) -> Files:
    return files  # the pages still render; the overlay on each says what is missing


@_shown_while_serving(_files_as_they_are)
def on_files(files: Files, config) -> Files:
    site = _site
    out = _Output(files, config)
    if out.dirty:  # pages last rendered as an error, or with another course's navigation: render again
        pages = overlay.take_error_pages()
        if incremental.course_changed(site.lessons if site else None):
            pages += [file.abs_dest_path for file in files.documentation_pages()]
        for dest in pages:
            incremental.mark_stale(dest)
    if site is None:
        return files
    imports = {lesson.name: [p for p in lesson.source_files() if p.suffix == ".py" and p != lesson.main]
               for lesson in site.lessons}
    try:
        published = sources.published(CODE_DIR)
        for path in published:
            rel = sources.site_path(CODE_DIR, path)
            text = read_text(path, LIMITS.source_file, CODE_DIR)
            out.add(rel, text)
            regions = list(read_regions(path, CODE_DIR).values())
            page_uri = sources.page_uri(rel)
            up = "../" * page_uri.count("/")
            links = _import_links(path, site, imports, up)
            content = sources.source_page(rel, text, regions, f"{up}{rel}", links)
            out.add(page_uri, snippet_safe(content))
        for st in site.statuses.values():
            for record in st.records:
                rec_uri = f"evidence/{record.lesson}/{record.key}.json"
                out.add(rec_uri, record.to_json())
                if record.steps:  # the ::output directive links to the whole log: only the tail is on the page
                    out.add(log_uri(record), log_text(record))
                for file in figure_files(record):
                    out.add(f"evidence/{record.lesson}/{record.key}/{file}", read_figure(EVIDENCE_DIR, record, file))
    except (SnippetError, EvidenceError, UnsafePathError) as exc:
        raise PluginError(str(exc)) from None
    for st in site.statuses.values():
        if files.get_file_from_path(st.lesson.page) is None:
            raise PluginError(f"{st.lesson.folder / 'lesson.toml'}: page = '{st.lesson.page}' "
                              f"does not exist under docs/")
        record = record_page.record_uri(st.lesson)
        if files.get_file_from_path(record) is not None:
            raise PluginError(f"docs/{record}: the record page of '{st.lesson.name}' is generated from its "
                              "evidence; remove this file")
        out.add(record, record_page.markdown(st.lesson))
    docs_dir = Path(config["docs_dir"])
    changed, fingerprints = incremental.changed(site.lessons, EVIDENCE_DIR, docs_dir)
    _publish_downloads(out, site, docs_dir, fingerprints)
    if out.dirty and changed:  # re-render the pages that show what changed
        for lesson in site.lessons:
            if lesson.name in changed:
                for uri in (lesson.page, record_page.record_uri(lesson)):
                    page = files.get_file_from_path(uri)
                    incremental.mark_stale(page.abs_dest_path if page else None)
        for file in files.documentation_pages():
            if "/" not in file.src_uri:  # home, status, benchmarks, ...: they list every lesson
                incremental.mark_stale(file.abs_dest_path)
    return files


def _publish_downloads(out: _Output, site, docs_dir: Path, fingerprints: dict[str, tuple]) -> None:
    """Each lesson as a zip that runs alone and as a notebook; the requirements box links them."""
    links = site.extra.setdefault("downloads", {})
    # The page shows the evidence of this build's commit: Colab opens that commit's notebook, not the branch's.
    commit = downloads.built_commit(site.branch)
    for lesson in site.lessons:
        try:
            links[lesson.name] = _publish_lesson_downloads(out, site, docs_dir, fingerprints, lesson, commit)
        except PluginError as exc:
            if not overlay.serving:
                raise
            overlay.report(str(exc))  # the other lessons' downloads are still published


def _publish_lesson_downloads(out: _Output, site, docs_dir: Path, fingerprints: dict[str, tuple],
                              lesson, commit: str) -> list[tuple[str, str]]:
    """One lesson's zip and notebook; the links its requirements box shows."""
    archive_uri = f"{downloads.ARCHIVES}/{lesson.name}.zip"
    notebook_uri = f"{siteconfig.NOTEBOOKS}/{lesson.name}.ipynb"
    key = (lesson.name, fingerprints[lesson.name], site.repo_url, site.branch)
    try:
        out.add(archive_uri, incremental.memo(("zip", *key), lambda lesson=lesson: downloads.archive(lesson, site)))
        out.add(notebook_uri, incremental.memo(
            ("ipynb", *key), lambda lesson=lesson: downloads.notebook_bytes(lesson, site, docs_dir)))
    except (SnippetError, EvidenceError, UnsafePathError, LessonError, ValueError) as exc:
        raise PluginError(f"{lesson.folder / lesson.main.name}: cannot make its download: {exc}") from None
    except directives.PageError as exc:
        raise PluginError(f"docs/{lesson.page}:{exc.line}: {exc.error}") from None
    entry = [(Md(":material-folder-zip-outline: Download the lesson (zip)"), archive_uri),
             (Md(":material-notebook-outline: Jupyter notebook"), notebook_uri)]
    colab = siteconfig.colab_url(site.repo_url, commit, lesson)
    if colab:
        entry.append((Md("Open in Colab"), colab))
    return entry


def _import_links(path: Path, site, imports: dict, up: str) -> list[tuple[Md, Md]]:
    """On a lesson file's page: the local modules it uses; on a module's page: the lessons that use it."""
    links = []
    for lesson in site.lessons:
        if path == lesson.main:
            links += [(code_span(m.name), url(f"{up}{sources.page_uri(sources.site_path(CODE_DIR, m))}"))
                      for m in imports[lesson.name]]
        elif path in imports[lesson.name]:
            links.append((text(lesson.title), url(f"{up}{lesson.page}")))
    return links


def _error_page(markdown: str, page, config, files) -> str:
    return overlay.error_page_markdown(page.file.abs_dest_path)


@_shown_while_serving(_error_page)
def on_page_markdown(markdown: str, page, config, files) -> str:
    if _site is None:  # the site could not be read (only while serving): every page shows why
        return _error_page(markdown, page, config, files)
    src = page.file.src_uri
    where = f"docs/{src}"
    if src in _record_uris():
        where = f"the record page of '{page.meta.get('lesson')}' (generated from its evidence: {src})"
    offset = _front_matter_lines(page, markdown)
    name = page.meta.get("lesson")
    lesson = None
    if name:
        lesson = _site.status(name)
        if lesson is None:
            raise PluginError(f"{where}: front matter names lesson '{name}', but there is no "
                              f"code/{name}/lesson.toml (lessons: {', '.join(_site.statuses) or 'none'})")
    ctx = directives.Page(_site, src, lesson)
    try:
        return directives.expand_page(markdown, ctx, 1 + offset)
    except directives.PageError as exc:
        if isinstance(exc.error, (SnippetError, EvidenceError, LessonError, UnsafePathError,
                                  directives.DirectiveError)):
            raise PluginError(f"{where}:{exc.line}: {exc.error}") from None
        raise exc.error from None


_CODE = re.compile(r"<code\b[^>]*>.*?</code>", re.S)
_ABBR = re.compile(r'<abbr title="[^"]*">(.*?)</abbr>', re.S)


def on_page_content(html: str, page, config, files) -> str:
    """The glossary's abbreviations stay out of code (the `abbr` extension skips Markdown code spans but
    not the text between the raw <code> tags that directives write around recorded names and commands), and
    off a term used in another sense ("code block": glossary.OTHER_SENSES)."""
    if "<abbr" not in html:
        return html
    html = _CODE.sub(lambda m: _ABBR.sub(r"\1", m.group(0)) if "<abbr" in m.group(0) else m.group(0), html)
    return glossary.in_own_sense(html)


def on_template_context(context, template_name, config):
    """The 404 page's links relative to the site's root, not root-absolute, when site_url is not set.

    MkDocs writes an error page's links from the server's root ("/assets/...", "/lessons/x/") unless site_url
    names where the site lives, so a site published under a subpath (https://OWNER.github.io/REPO/) showed
    its 404 page without styles, scripts or a working link. Relative links work wherever 404.html sits at the
    site's root; with site_url set, MkDocs' own absolute links, with the subpath, work at any depth."""
    if template_name != "404.html" or config.get("site_url"):
        return context
    from mkdocs.utils import normalize_url

    context["base_url"] = "."
    context["extra_css"] = [normalize_url(path, None, ".") for path in config.extra_css]
    context["extra_javascript"] = [normalize_url(str(path), None, ".") for path in config.extra_javascript]
    return context


def _front_matter_lines(page, markdown: str) -> int:
    try:
        source = Path(page.file.abs_src_path).read_text(encoding="utf-8")
    except (OSError, TypeError):
        return 0
    return max(0, source.count("\n") - markdown.count("\n"))


# -- search: maths as plain text ---------------------------------------------------------------------

# Material's search indexes each section's HTML as it is, and arithmatex writes maths as \\( ... \\) and
# \\[ ... \\] for KaTeX: 104 of 302 entries showed a reader raw LaTeX. After the build, each span of the index
# (outside code, where \\( can be a regular expression) is written as the plain text a reader would type.
INDEX_MATH = re.compile(r"\\\((?P<inline>.+?)\\\)|\\\[(?P<display>.+?)\\\]", re.S)
INDEX_CODE = re.compile(r"(<pre\b.*?</pre>|<code\b.*?</code>)", re.S)
OPERATOR = re.compile(r"\s*([=×·≤≥≈≠<>←→⟹∈⊕∘])\s*")  # a relation or an operator, spaced as it is read


@functools.cache
def _latex_to_text():
    """pylatexenc's LaTeX-to-text converter, knowing the few macros the lessons use that it reads otherwise
    (\\tfrac as a fraction; \\mathtt and kin as their letters, not Unicode's mathematical alphabets, which a
    search for BLOCK_N would not find)."""
    from pylatexenc import latex2text, latexwalker, macrospec

    letters = ("mathtt", "mathrm", "mathbf", "mathit", "mathsf", "texttt", "text", "operatorname")
    walker = latexwalker.get_default_latex_context_db()
    walker.add_context_category("verified-triton", prepend=True, macros=[
        *(macrospec.MacroSpec(name, "{") for name in letters),
        *(macrospec.MacroSpec(name, "{{") for name in ("tfrac", "dfrac"))])
    texts = latex2text.get_default_latex_context_db()
    fraction = texts.get_macro_spec("frac").simplify_repl
    texts.add_context_category("verified-triton", prepend=True, macros=[
        *(latex2text.MacroTextSpec(name, "%(1)s") for name in letters),
        *(latex2text.MacroTextSpec(name, fraction) for name in ("tfrac", "dfrac"))])
    return walker, latex2text.LatexNodes2Text(latex_context=texts, math_mode="text")


def plain_math(latex_html: str) -> str:
    """One span of maths, as the index holds it (HTML-escaped LaTeX), as plain text, HTML-escaped again."""
    from pylatexenc import latexwalker

    walker_db, to_text = _latex_to_text()
    latex = html.unescape(latex_html)
    try:
        nodes = latexwalker.LatexWalker(latex, latex_context=walker_db, tolerant_parsing=True).get_latex_nodes()[0]
        plain = to_text.nodelist_to_text(nodes)
    except Exception:  # whatever the converter makes of odd maths, the build goes on:
        # its letters, without the markup
        plain = re.sub(r"\\([A-Za-z]+)|[{}]", lambda m: m.group(1) or "", latex)
    plain = OPERATOR.sub(r" \1 ", plain)  # LaTeX drops the space after \le: '1/2 ≤ x', not '1/2 ≤x'
    return html.escape(" ".join(plain.split()), quote=False)


def searchable(text: str) -> str:
    """An index entry's HTML with its maths (outside code) as plain text."""
    parts = INDEX_CODE.split(text)
    for i in range(0, len(parts), 2):  # the pieces between code
        parts[i] = INDEX_MATH.sub(lambda m: plain_math(m.group("inline") or m.group("display")), parts[i])
    return "".join(parts)


def on_post_build(config) -> None:
    """The search index's maths as plain text (Material's search plugin wrote it before this hook runs)."""
    index = Path(config["site_dir"]) / "search" / "search_index.json"
    if not index.is_file():
        return
    data = json.loads(index.read_text(encoding="utf-8"))
    for entry in data.get("docs", []):
        for key in ("title", "text"):
            if isinstance(entry.get(key), str) and "\\" in entry[key]:
                entry[key] = searchable(entry[key])
    index.write_text(json.dumps(data, ensure_ascii=False, separators=(",", ":")), encoding="utf-8")
