"""::directives (the authors' table of directives) and ::limits (the size limits), from the code."""

from __future__ import annotations

from verified_triton.core.limits import LIMITS
from verified_triton.site.directives import REGISTRY, Page, directive
from verified_triton.site.door import Md, code, text
from verified_triton.site.render import md_table


@directive("directives", "the table of every directive, from the registry", needs_lesson=False)
def directives(page: Page) -> Md:
    rows = [[code(d.usage), "lesson page" if d.needs_lesson else "any page", text(d.help)]
            for d in sorted(REGISTRY.values(), key=lambda d: d.name)]
    return md_table(["Directive", "Where", "What it shows"], rows)


def directive_table_markdown() -> str:
    """The same table as plain Markdown, to read as text: docs/writing-a-lesson.md carries it between markers
    (so the file reads on its own) and tests/test_docs_commands.py keeps it equal to this. The registry's
    usage and help are the project's own words, not recorded input: only a table's '|' is escaped."""
    def cell(value: str) -> str:
        return value.replace("|", "\\|")

    rows = [f"| `{cell(d.usage)}` | {'lesson page' if d.needs_lesson else 'any page'} | {cell(d.help)} |"
            for d in sorted(REGISTRY.values(), key=lambda d: d.name)]
    return "\n".join(["| Directive | Where | What it shows |", "| --- | --- | --- |", *rows]) + "\n"


@directive("limits", "the size limits on untrusted input, from tools/verified_triton/core/limits.py",
           needs_lesson=False)
def limits(page: Page) -> Md:
    return md_table(["What", "Limit", "Enforced by"], [[text(a), text(b), text(c)] for a, b, c in LIMITS.rows()])
