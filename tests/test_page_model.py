"""One page model (issue 46, item 3): a page is parsed once, by site/page.py, into prose, fences, `::` directives
with their bodies, and Material's blocks, each with its line. The build, the check before a run, the notebook
and the prose lint read pages through it, and no other module scans the page format itself. Before, four
modules each had their own fence rule (one closed a fence on any line starting with its backticks), and a fence
never closed silently turned the rest of a page into code."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from verified_triton.author import prose_lint
from verified_triton.site import directives
from verified_triton.site import page as page_model
from verified_triton.site.page import Block, Command, Fence, PageFormatError, Text, parse

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "tools" / "verified_triton"


def kinds(model) -> list[tuple[str, int]]:
    return [(type(part).__name__, part.line) for part in model.parts]


def test_a_fence_holding_directive_lines_is_code():
    model = parse(textwrap.dedent("""\
        Prose.

        ````markdown
        ::snippet code/x/x.py region
        ```
        ::status
        ````
        ::status
        """))
    assert kinds(model) == [("Text", 1), ("Text", 2), ("Fence", 3), ("Command", 8), ("Text", 9)]
    fence = model.parts[2]
    assert fence.code == ("::snippet code/x/x.py region", "```", "::status")  # the shorter fence does not close it
    assert fence.info == "markdown"
    assert [c.name for c in model.commands()] == ["status"]


@pytest.mark.parametrize("closing, closes", [("```", True), ("````", True), ("```   ", True), ("~~~", False),
                                             ("``` python", False), ("    ```", True)])
def test_a_fence_closes_on_its_own_character_at_least_as_long_and_nothing_else(closing, closes):
    text = f"```\ncode\n{closing}\nafter\n"
    if closes:
        assert kinds(parse(text))[:2] == [("Fence", 1), ("Text", 4)]
    else:
        with pytest.raises(PageFormatError):
            parse(text)


def test_a_fence_title_may_hold_a_backtick():
    """The site's Markdown (pymdownx.superfences) opens a fence whose attributes hold a backtick, as a source
    page's title does when a file's name has one; so does the model."""
    model = parse('```python title="a `b` c.py" linenums="1"\n::status\n```\nafter\n')
    assert kinds(model) == [("Fence", 1), ("Text", 4), ("Text", 5)]


def test_an_unterminated_fence_is_an_error_at_its_line():
    text = "---\nlesson: x\n---\n\n# T\n\n```python\nx = 1\n\n::status\n"
    with pytest.raises(PageFormatError) as info:
        parse(text)
    assert info.value.line == 7 and "never closed" in info.value.message


def test_the_build_names_the_line_of_an_unterminated_fence():
    site = directives.Site(Path("code"), Path("evidence"), [], {})
    page = directives.Page(site, "page.md", None)
    with pytest.raises(directives.PageError) as info:
        directives.expand_page("# T\n\n~~~~\ncode\n~~~\n", page, first_line=4)
    assert info.value.line == 6 and "the fence ~~~~ opened here is never closed" in str(info.value.error)


def test_the_prose_lint_names_the_line_of_an_unterminated_fence():
    found = prose_lint.lint("page.md", "# T\n\nWords.\n\n```\ncode\n", [])
    assert [str(f) for f in found] == [
        "page.md:5: [page] the fence ``` opened here is never closed: add a line ``` where the code ends (else the "
        "rest of the page is code)"]


def test_front_matter_and_line_numbers():
    text = "---\ntitle: T\nlesson: 'vector-add'  # the lesson\n---\n\n# Title\n::status\n"
    model = parse(text)
    assert model.lesson == "vector-add" and model.first_line == 5
    assert model.front_matter == ("---", "title: T", "lesson: 'vector-add'  # the lesson", "---")
    assert [(row.number, row.text) for row in model.rows()] == [(5, ""), (6, "# Title"), (7, "::status"), (8, "")]
    assert model.body == "\n# Title\n::status\n"
    offset = parse("# Title\n::status\n", first_line=5, front_matter=False)
    assert [(type(p).__name__, p.line) for p in offset.parts] == [("Text", 5), ("Command", 6), ("Text", 7)]


def test_front_matter_ends_with_dots_too_and_is_none_without_its_end():
    assert parse("---\nlesson: a\n...\ntext\n").lesson == "a"
    unended = parse("---\nlesson: a\ntext\n")
    assert unended.lesson == "" and unended.first_line == 1 and unended.parts[0].text == "---"


def test_a_directive_body_is_the_lines_indented_under_it():
    text = "::prediction speed\n    It was slower:\n\n\tthe loads.\n\nAfter.\n::prediction other\nNext.\n"
    model = parse(text, bodies={"prediction"})
    first, *_ = model.parts
    assert isinstance(first, Command) and first.args == "speed"
    assert first.body_lines == ("    It was slower:", "", "\tthe loads.")  # a tab counts 4 columns
    assert parse("::prediction x\n      a\n    b\n", bodies={"prediction"}).parts[0].body == "  a\nb"  # dedented
    assert [(type(p).__name__, p.line) for p in model.parts[1:]] == [
        ("Text", 5), ("Text", 6), ("Command", 7), ("Text", 8), ("Text", 9)]
    assert model.parts[3].body_lines == ()  # nothing indented under it: an empty body
    plain = parse(text)  # a directive that takes no body: its indented lines are prose
    assert [type(p).__name__ for p in plain.parts[:3]] == ["Command", "Text", "Text"]


def test_nested_folds_and_tabs_and_where_each_part_lies():
    text = textwrap.dedent('''\
        === "Tab one"

            ??? success "Solution"

                ::snippet code/x/x.py answer

                ```python
                ::not-a-directive
                ```

            Back in the tab.

        Outside.
        !!! note
            ???+ tip
                deep
        ''')
    model = parse(text)
    tab, fold = model.parts[0], model.parts[2]
    assert isinstance(tab, Block) and tab.tab and tab.title == "Tab one" and not tab.folded
    assert isinstance(fold, Block) and fold.folded and fold.kind == "success" and fold.title == "Solution"
    assert fold.within == (tab,)
    snippet = next(model.commands())
    assert snippet.line == 5 and snippet.within == (tab, fold) and snippet.indent == " " * 8
    fence = next(p for p in model.parts if isinstance(p, Fence))
    assert fence.line == 7 and fence.within == (tab, fold)
    back = next(p for p in model.parts if isinstance(p, Text) and p.text.strip() == "Back in the tab.")
    assert back.line == 11 and back.within == (tab,)
    outside = next(p for p in model.parts if isinstance(p, Text) and p.text == "Outside.")
    assert outside.within == ()
    note, tip = [p for p in model.parts if isinstance(p, Block)][2:]
    assert note.kind == "note" and note.title is None and tip.marker == "???+" and tip.within == (note,)
    deep = next(p for p in model.parts if isinstance(p, Text) and p.text.strip() == "deep")
    assert deep.line == 16 and deep.within == (note, tip)


def test_every_row_belongs_to_one_part_and_the_rows_are_the_page():
    text = (ROOT / "docs" / "lessons" / "gluon-attention.md").read_text(encoding="utf-8")
    model = directives.parse(text)
    rows = list(model.rows())
    assert [row.number for row in rows] == list(range(model.first_line, model.first_line + len(rows)))
    assert "\n".join(model.front_matter + tuple(row.text for row in rows)) == text
    assert sum(isinstance(p, Command) for p in model.parts) > 10 and model.lesson == "gluon-attention"


# -- no module but the page model scans the page format -----------------------------------------------------------

REGEX_CALLS = {"compile", "match", "search", "fullmatch", "findall", "finditer", "sub", "subn", "split"}
# what a regular expression that reads the page format holds: a fence, a directive line, a block's marker, the
# front matter's edge or its lesson line
FORMAT_IN_PATTERN = ("`{3", "~{3", "```", "~~~", r"\?\?\?", "!!!", "===", "---", "lesson:", "::")
FORMAT_LITERALS = ("```", "~~~", "---", "...", "???", "!!!", "===", "::")
MODEL_RULES = {"FENCE", "COMMAND", "ADMONITION", "TAB", "FRONT_MATTER_LESSON", "_fence_end", "_body_end",
               "_front_matter_end"}


def format_scans(source: str) -> list[tuple[int, str]]:
    """(line, what) of every place a module's code reads the page format by itself: a regular expression holding
    its marks, a startswith/endswith/comparison against one, or one of the model's own rules used directly."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            func, first = node.func, node.args[0] if node.args else None
            text = first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None
            if isinstance(func.value, ast.Name) and func.value.id == "re" and func.attr in REGEX_CALLS and text:
                found += [(node.lineno, f"re.{func.attr}({text!r})") for mark in FORMAT_IN_PATTERN if mark in text][:1]
            if func.attr in ("startswith", "endswith") and text and text.startswith(FORMAT_LITERALS):
                found.append((node.lineno, f"{func.attr}({text!r})"))
        if isinstance(node, ast.Compare):
            values = [node.left, *node.comparators]
            values += [e for v in values if isinstance(v, (ast.Tuple, ast.List, ast.Set)) for e in v.elts]
            found += [(node.lineno, f"== {v.value!r}") for v in values
                      if isinstance(v, ast.Constant) and v.value in FORMAT_LITERALS]
        if isinstance(node, ast.Attribute) and node.attr in MODEL_RULES:
            found.append((node.lineno, f"the page model's {node.attr}"))
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("verified_triton.site"):
            found += [(node.lineno, f"the page model's {a.name}") for a in node.names if a.name in MODEL_RULES]
    return found


def test_the_guard_sees_a_scan_of_the_page_format():
    """The guard below is able to fail: each way the four readers used to scan pages is seen."""
    assert format_scans('import re\nFENCE = re.compile(r"^\\s*(`{3,}|~{3,})")\n')
    assert format_scans('import re\nLINE = re.compile(r"^(?P<indent>[ \\t]*)::(?P<name>[a-z-]+)")\n')
    assert format_scans('if lines[0].strip() == "---":\n    pass\n')
    assert format_scans('ok = line.strip().startswith("???")\n')
    assert format_scans('from verified_triton.site.directives import FENCE\n')
    assert format_scans('opened = page.FENCE.match(line)\n')
    assert not format_scans('table = [Md("---"), Md("---:")]\nfence = "`" * 4\nCOMMAND = "verify {name}"\n')


def test_no_module_outside_the_page_model_scans_the_page_format():
    found = [f"{path.relative_to(ROOT)}:{line}: {what}"
             for path in sorted((ROOT / "tools").rglob("*.py")) if path != PACKAGE / "site" / "page.py"
             for line, what in format_scans(path.read_text(encoding="utf-8"))]
    assert found == [], "read pages through tools/verified_triton/site/page.py:\n" + "\n".join(found)


def test_the_page_model_holds_the_rules():
    assert {name for name in MODEL_RULES if hasattr(page_model, name)} == MODEL_RULES
