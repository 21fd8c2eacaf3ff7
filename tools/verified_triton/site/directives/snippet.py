"""::snippet FILE REGION — a region of a lesson source, titled, numbered, linked to the full source."""

from __future__ import annotations

from verified_triton.site.directives import DirectiveError, Page, directive, notebook_form
from verified_triton.site.door import Md, attr, code_block, code_span, url
from verified_triton.site.snippets import extract
from verified_triton.site.sources import page_uri, site_path


@directive("snippet", "a region of a lesson file, with its line numbers and a link to the full source",
           args=("code/<lesson>/<file>.py", "REGION"), needs_lesson=False)
def snippet(page: Page, rel: str, region_name: str) -> Md:
    rel, region = _region(page, rel, region_name)
    lines = f"line {region.start}" if region.start == region.end else f"lines {region.start}-{region.end}"
    # Lesson code is in the search index, so that an API name (tl.associative_scan) finds the lesson that
    # uses it (issue 25); recorded output is not (::output). The index is loaded only when a reader
    # searches (overrides/main.html). Line numbers are inline (mkdocs.yml, linenums_style): no number
    # reaches the index.
    block = code_block(region.text.rstrip("\n"), "",
                       Md('{{ .python title="{}" linenums="{}" }}').format(attr(f"{rel}, {lines}"), region.start))
    link = Md("[:material-file-code-outline: full source of {} from line {}]({}){{ .vt-source-link }} · "
              "[:material-download: download]({}){{ .vt-source-link }}").format(
                  code_span(rel), region.start, url(f"{page.root}{page_uri(rel)}#__codelineno-0-{region.start}"),
                  url(page.root + rel))
    return Md("{}\n\n{}").format(block, link)


def _region(page: Page, rel: str, region_name: str):
    return find_region(page.site.code_dir, rel, region_name)


def find_region(code_dir, rel: str, region_name: str):
    """(the file's path on the site, its region), or DirectiveError / SnippetError (also site/preflight.py)."""
    if not rel.startswith("code/") or not rel.endswith(".py") or ".." in rel.split("/"):
        raise DirectiveError(f"'::snippet' shows Python files under code/, not {rel!r}")
    path = code_dir / rel.removeprefix("code/")
    region = extract(path, region_name, code_dir)
    return site_path(code_dir, path), region


@notebook_form("snippet")
def snippet_notebook(page: Page, rel: str, region_name: str) -> Md:
    rel, region = _region(page, rel, region_name)
    head = f"# {rel.rsplit('/', 1)[-1]}, lines {region.start}-{region.end} (the whole file runs below)\n"
    return code_block(head + region.text.rstrip("\n"), "python")
