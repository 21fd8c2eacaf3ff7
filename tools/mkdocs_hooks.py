"""The MkDocs hooks mkdocs.yml names: the course's navigation, sources, evidence and `::` directives.

The work is in verified_triton/site/hooks.py. MkDocs runs the folder of this file on sys.path while it loads
it, and loads it afresh for every build of `mkdocs serve`; the package's module is reloaded with it, so the
hooks start every build with the state a fresh load gives.
"""

import importlib
import sys

if "verified_triton.site.hooks" in sys.modules:
    importlib.reload(sys.modules["verified_triton.site.hooks"])
from verified_triton.site.hooks import (  # noqa: E402
    on_build_error,
    on_config,
    on_files,
    on_nav,
    on_page_content,
    on_page_markdown,
    on_post_build,
    on_pre_build,
    on_serve,
    on_startup,
    on_template_context,
)

__all__ = ["on_build_error", "on_config", "on_files", "on_nav", "on_page_content", "on_page_markdown",
           "on_post_build", "on_pre_build", "on_serve", "on_startup", "on_template_context"]
