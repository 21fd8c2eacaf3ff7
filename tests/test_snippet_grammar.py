"""One snippet-marker grammar (issue 46, item 3): the site (site/snippets.py) and the kit (lessonkit.py, which
resolves `sanitizer_known(..., ["kernels.py:NAME"], ...)`) read `# snippet: NAME` ... `# end snippet` alike,
hostile input included. The kit ships in lesson zips and imports nothing from tools/, so the grammar is the
kit's (`snippet_regions`) and the site reads regions through it. Before, the kit matched the exact text
`# snippet: NAME` and took the first `# end snippet` after it: a duplicate region gave the kit the first and the
site an error, a nested or unclosed one gave the kit lines the site refused, and `#snippet: x` was a region to the
site and none to the kit."""

from __future__ import annotations

from pathlib import Path

import pytest

from verified_triton.core.kit import kit
from verified_triton.site import snippets
from verified_triton.site.snippets import SnippetError, parse_regions

pytestmark = pytest.mark.unit

HOSTILE = {
    "plain": "x = 1\n# snippet: a\ny = 2\n# end snippet\n",
    "trailing spaces": "# snippet: a   \ny = 2\n# end snippet  \t\n",
    "tabs": "def f():\n\t# snippet: body\n\tx = 1\n\t# end snippet\n",
    "tight and spaced": "#snippet:tight\na = 1\n#end snippet\n  #  snippet:   spaced   \nb = 2\n  #   end snippet\n",
    "crlf": "x = 1\r\n# snippet: a\r\n\r\ny = 2\r\n\r\n# end snippet\r\nz = 3\r\n",
    "cr alone": "x = 1\r# snippet: a\ry = 2\r# end snippet\r",
    "form feed and U+2028 do not end lines": "x = 1\n\x0c\n# snippet: a\ns = 'a\u2028b'\ny = 2\n# end snippet\n",
    "blank lines at the ends": "# snippet: a\n\n\ny = 2\n\n# end snippet\n",
    "empty": "a = 1\n# snippet: nothing\n# end snippet\nb = 2\n",
    "no final newline": "a = 1\n# snippet: last\nb = 2\n# end snippet",
    "two regions": "# snippet: one\na\n# end snippet\n# snippet: two\nb\n# end snippet\n",
    "a marker inside a string": 'DOC = """\n# snippet: a\n"""\nx = 1\n# end snippet\n',
    "a marker after code": "x = 1  # snippet: inline\ny = 2  # end snippet\n",
    "duplicate": "# snippet: twice\na\n# end snippet\n\n# snippet: twice\nb\n# end snippet\n",
    "nested": "# snippet: outer\na\n    # snippet: inner\nb\n# end snippet\n# end snippet\n",
    "unterminated": "a = 1\n# snippet: open\nb = 2\n",
    "end without start": "a = 1\n\n# end snippet\n",
    "end twice": "# snippet: a\nx\n# end snippet\n# end snippet\n",
    "malformed": "a = 1\n# Snippet: x\n",
    "end with a name": "# snippet: a\nx\n# end snippet: a\n",
    "a bad name": "# snippet: My_Region\nx\n# end snippet\n",
    "no name": "# snippet:\nx\n# end snippet\n",
}


def site_reading(text: str):
    """{name: (first, last)} as the site reads it, or ('error', line, message)."""
    try:
        return {name: (r.start, r.end) for name, r in parse_regions(text, "x.py").items()}
    except SnippetError as exc:
        return ("error", exc.line, exc.message)


def kit_reading(folder: Path, text: str, names: list[str]):
    """The same, as the kit's sanitizer_known reads the file: each name the site found, through _resolve_place."""
    (folder / "x.py").write_bytes(text.encode("utf-8"))
    try:
        spans = {name: kit._resolve_place(folder, f"x.py:{name}") for name in names}
        kit._resolve_place(folder, "x.py:no-such-region-or-function")
    except kit.FormatError as exc:
        return ("error", exc.line, exc.message)
    except ValueError as exc:
        assert "no snippet region or function named 'no-such-region-or-function'" in str(exc)
    assert all(span.file == "code/lesson/x.py" for span in spans.values())
    return {name: (span.first, span.last) for name, span in spans.items()}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_the_kit_and_the_site_read_regions_alike(tmp_path, case):
    folder = tmp_path / "code" / "lesson"
    folder.mkdir(parents=True)
    text = HOSTILE[case]
    site = site_reading(text)
    names = list(site) if isinstance(site, dict) else []
    if isinstance(site, tuple):  # an error: the kit meets it whatever it looks for
        names = ["a"]
    assert kit_reading(folder, text, names) == site


def test_the_readings_are_what_the_grammar_says():
    """The cases above are not vacuous: they hold regions, line numbers counted as Python counts them, and
    errors at the marker's line."""
    assert site_reading(HOSTILE["crlf"]) == {"a": (4, 4)}
    assert site_reading(HOSTILE["form feed and U+2028 do not end lines"]) == {"a": (4, 5)}
    assert site_reading(HOSTILE["tight and spaced"]) == {"tight": (2, 2), "spaced": (5, 5)}
    # the grammar reads lines, not Python: a marker in a string is a marker
    assert site_reading(HOSTILE["a marker inside a string"]) == {"a": (3, 4)}
    assert site_reading(HOSTILE["a marker after code"]) == {}
    assert site_reading(HOSTILE["empty"]) == {"nothing": (3, 2)}
    assert site_reading(HOSTILE["duplicate"]) == ("error", 5, "duplicate region 'twice' (first defined at line 1)")
    assert site_reading(HOSTILE["nested"])[:2] == ("error", 3)
    assert site_reading(HOSTILE["unterminated"]) == ("error", 2, "region 'open' is never closed with '# end snippet'")
    assert site_reading(HOSTILE["end twice"])[:2] == ("error", 4)
    assert "malformed snippet marker '# end snippet: a'" in site_reading(HOSTILE["end with a name"])[2]


def test_a_kit_error_names_the_file_and_line(tmp_path):
    folder = tmp_path / "code" / "lesson"
    folder.mkdir(parents=True)
    (folder / "x.py").write_text(HOSTILE["unterminated"])
    with pytest.raises(kit.FormatError) as info:
        kit._resolve_place(folder, "x.py:open")
    assert str(info.value) == "code/lesson/x.py:2: region 'open' is never closed with '# end snippet'"


def test_the_site_has_no_grammar_of_its_own():
    assert snippets.START is kit.SNIPPET_START and snippets.END is kit.SNIPPET_END
    assert snippets.MARKER_LIKE is kit.SNIPPET_LIKE
    source = Path(snippets.__file__).read_text(encoding="utf-8")
    assert "re.compile" not in source and "import re\n" not in source
