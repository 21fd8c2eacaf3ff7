"""The MkDocs hooks for readers mkdocs.yml names (figures, tables on phones): verified_triton/site/reader_hooks.py."""

from verified_triton.site.reader_hooks import on_files, on_page_content

__all__ = ["on_files", "on_page_content"]
