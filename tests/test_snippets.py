"""Region extraction: `# snippet: NAME` ... `# end snippet`, and its command line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SNIPPETS
from verified_triton.site.snippets import Region, SnippetError, extract, parse_regions, read_regions

SOURCE = """\
import triton


# snippet: kernel
@triton.jit
def kernel(x_ptr):
    pid = tl.program_id(0)
# end snippet


def main():
    # snippet: launch
    grid = (4,)
    if True:
        kernel[grid](x)

    return grid
    # end snippet
"""


def write(tmp_path: Path, text: str, name: str = "lesson.py", newline: str = "\n") -> Path:
    path = tmp_path / name
    path.write_bytes(text.replace("\n", newline).encode("utf-8"))
    return path


def error_of(text: str, path: str = "x.py") -> SnippetError:
    with pytest.raises(SnippetError) as info:
        parse_regions(text, path)
    return info.value


# -- regions ------------------------------------------------------------------------

@pytest.mark.unit
def test_exact_lines_and_line_numbers():
    regions = parse_regions(SOURCE, "lesson.py")
    assert list(regions) == ["kernel", "launch"]
    kernel = regions["kernel"]
    assert kernel.text == "@triton.jit\ndef kernel(x_ptr):\n    pid = tl.program_id(0)\n"
    lines = SOURCE.split("\n")
    # start and end are the 1-based numbers of the region's first and last lines of text.
    assert lines[kernel.start - 1] == "@triton.jit"
    assert lines[kernel.end - 1] == "    pid = tl.program_id(0)"
    assert (kernel.start, kernel.end) == (5, 7)
    assert kernel.path == "lesson.py" and kernel.name == "kernel"


@pytest.mark.unit
def test_dedent_by_common_indentation_keeps_relative_indent_and_blank_lines():
    launch = parse_regions(SOURCE)["launch"]
    assert launch.text == "grid = (4,)\nif True:\n    kernel[grid](x)\n\nreturn grid\n"
    assert (launch.start, launch.end) == (13, 17)
    assert SOURCE.split("\n")[launch.start - 1] == "    grid = (4,)"


@pytest.mark.unit
def test_blank_lines_at_a_regions_ends_are_not_part_of_it():
    """The range a caption names is the lines the block shows: a blank line after the marker or before the end
    marker is neither shown (the highlighter and the page drop it) nor counted (issue 32: 'lines 29-41' over
    lines 29-39)."""
    text = "x = 1\n# snippet: spaced\n\n\n@triton.jit\ndef k():\n\n    pass\n\n\n# end snippet\n"
    region = parse_regions(text)["spaced"]
    lines = text.split("\n")
    assert (region.start, region.end) == (5, 8)
    assert lines[region.start - 1] == "@triton.jit" and lines[region.end - 1] == "    pass"
    assert region.text == "@triton.jit\ndef k():\n\n    pass\n"  # a blank line inside stays


@pytest.mark.unit
def test_a_region_of_blank_lines_is_empty():
    region = parse_regions("# snippet: nothing\n\n   \n# end snippet\n")["nothing"]
    assert region.text == "" and region.end == region.start - 1


@pytest.mark.unit
def test_a_duplicate_region_names_the_first_marker_line_even_after_blank_lines():
    error = error_of("# snippet: twice\n\n\nx = 1\n# end snippet\n# snippet: twice\n# end snippet\n")
    assert error.line == 6 and "first defined at line 1" in error.message


@pytest.mark.unit
def test_dedent_with_tabs():
    text = "def f():\n\t# snippet: body\n\tx = 1\n\tif x:\n\t\ty = 2\n\t# end snippet\n"
    assert parse_regions(text)["body"].text == "x = 1\nif x:\n\ty = 2\n"


@pytest.mark.unit
def test_region_text_is_not_dedented_past_its_least_indented_line():
    text = "# snippet: mixed\n    a = 1\n  b = 2\n# end snippet\n"
    assert parse_regions(text)["mixed"].text == "  a = 1\nb = 2\n"


@pytest.mark.unit
@pytest.mark.parametrize("newline", ["\r\n", "\r"], ids=["crlf", "lone-cr"])
def test_crlf_and_lone_cr_files_read_like_lf(tmp_path, newline):
    path = write(tmp_path, SOURCE, newline=newline)
    assert newline.encode() in path.read_bytes()
    regions = read_regions(path)
    expected = parse_regions(SOURCE, path)
    assert regions == expected
    for region in regions.values():
        assert "\r" not in region.text


@pytest.mark.unit
def test_crlf_string_parse():
    regions = parse_regions(SOURCE.replace("\n", "\r\n"))
    assert regions["kernel"].text == "@triton.jit\ndef kernel(x_ptr):\n    pid = tl.program_id(0)\n"
    assert (regions["launch"].start, regions["launch"].end) == (13, 17)


@pytest.mark.unit
def test_form_feed_and_unicode_separators_are_not_line_breaks():
    # Python counts lines at \n, \r\n and \r only; a form feed (a PEP 8 page break) or a
    # U+2028 inside a string must not shift the line numbers a page cites.
    text = "x = 1\n\x0c\n# snippet: after\ns = 'a\u2028b'\ny = 2\n# end snippet\n"
    region = parse_regions(text)["after"]
    assert (region.start, region.end) == (4, 5)
    assert region.text == "s = 'a\u2028b'\ny = 2\n"


@pytest.mark.unit
@pytest.mark.parametrize("trailing", ["\n", ""], ids=["newline", "no-newline"])
def test_region_at_the_very_end_of_the_file(tmp_path, trailing):
    path = write(tmp_path, "a = 1\n# snippet: last\nb = 2\n# end snippet" + trailing)
    region = extract(path, "last")
    assert region.text == "b = 2\n"
    assert (region.start, region.end) == (3, 3)


@pytest.mark.unit
def test_last_line_of_region_without_newline_is_still_terminated():
    region = parse_regions("# snippet: one\n    only = True\n# end snippet")["one"]
    assert region.text == "only = True\n"


@pytest.mark.unit
def test_empty_region():
    region = parse_regions("a = 1\n# snippet: nothing\n# end snippet\nb = 2\n")["nothing"]
    assert region.text == ""
    assert region.start == 3 and region.end == 2  # end = start - 1 when empty


@pytest.mark.unit
def test_several_regions_in_source_order_with_names_of_digits_and_dashes():
    text = "".join(f"# snippet: {name}\nv = {i}\n# end snippet\n"
                   for i, name in enumerate(["zeta", "step-2", "a1", "x-y-z"]))
    regions = parse_regions(text)
    assert list(regions) == ["zeta", "step-2", "a1", "x-y-z"]
    assert [r.text for r in regions.values()] == ["v = 0\n", "v = 1\n", "v = 2\n", "v = 3\n"]
    assert [r.start for r in regions.values()] == [2, 5, 8, 11]


@pytest.mark.unit
def test_marker_spacing_variants_are_accepted():
    text = "#snippet:tight\na = 1\n#end snippet\n  #  snippet:   spaced   \nb = 2\n  #   end snippet   \n"
    regions = parse_regions(text)
    assert regions["tight"].text == "a = 1\n"
    assert regions["spaced"].text == "b = 2\n"


@pytest.mark.unit
def test_a_comment_that_is_not_a_marker_is_ignored():
    text = "# snippets are named regions\n# snippet foo\n# see the snippet: section\nx = 1\n"
    assert parse_regions(text) == {}


@pytest.mark.unit
def test_trailing_marker_on_a_code_line_is_not_a_marker():
    assert parse_regions("x = 1  # snippet: inline\ny = 2  # end snippet\n") == {}


@pytest.mark.unit
def test_file_without_regions():
    assert parse_regions("print('hi')\n") == {}
    assert parse_regions("") == {}


@pytest.mark.unit
def test_a_byte_order_mark_at_the_start_is_allowed():
    # U+FEFF is a format character, but as the first character of a file it only marks UTF-8.
    regions = parse_regions("\ufeffimport os\n# snippet: a\nx = 1\n# end snippet\n")
    assert regions["a"].text == "x = 1\n" and regions["a"].start == 3
    with pytest.raises(SnippetError, match="U\\+FEFF"):
        parse_regions("x = 1\n# snippet: a\ny = '\ufeff'\n# end snippet\n")


@pytest.mark.unit
def test_region_is_immutable():
    region = parse_regions("# snippet: a\nx\n# end snippet\n")["a"]
    assert isinstance(region, Region)
    with pytest.raises(AttributeError):
        region.text = "changed"


# -- errors: FILE:LINE and the problem -------------------------------------------------

@pytest.mark.unit
def test_unterminated_region_names_its_start_line():
    err = error_of("a = 1\n# snippet: open\nb = 2\n")
    assert str(err).startswith("x.py:2: ")
    assert "open" in str(err) and "never closed" in str(err)
    assert (err.path, err.line) == ("x.py", 2)


@pytest.mark.unit
def test_end_without_start():
    err = error_of("a = 1\n\n# end snippet\n")
    assert str(err).startswith("x.py:3: ")
    assert "without a matching" in str(err)


@pytest.mark.unit
def test_end_twice():
    err = error_of("# snippet: a\nx\n# end snippet\n# end snippet\n")
    assert str(err).startswith("x.py:4: ")


@pytest.mark.unit
def test_duplicate_name_names_both_lines():
    err = error_of("# snippet: twice\na\n# end snippet\n\n# snippet: twice\nb\n# end snippet\n")
    assert str(err).startswith("x.py:5: ")
    assert "duplicate" in str(err) and "twice" in str(err)
    assert "line 1" in str(err)  # where the first one was defined


@pytest.mark.unit
def test_nested_start():
    err = error_of("# snippet: outer\na\n    # snippet: inner\nb\n# end snippet\n# end snippet\n")
    assert str(err).startswith("x.py:3: ")
    assert "inner" in str(err) and "outer" in str(err) and "nest" in str(err)


@pytest.mark.unit
@pytest.mark.parametrize("name", ["Kernel", "KERNEL", "my_kernel", "-lead", "trail-", "a--b", "a.b"])
def test_invalid_names(name):
    err = error_of(f"x = 1\n# snippet: {name}\ny\n# end snippet\n")
    assert str(err).startswith("x.py:2: ")
    assert "invalid region name" in str(err) and repr(name) in str(err)


@pytest.mark.unit
def test_empty_name():
    err = error_of("# snippet:\ny\n# end snippet\n")
    assert str(err).startswith("x.py:1: ")
    assert "invalid region name ''" in str(err)


@pytest.mark.unit
@pytest.mark.parametrize("marker", [
    "# Snippet: x",
    "# SNIPPET: x",
    "#end-snippet",
    "# end_snippet",
    "# endsnippet",
    "# End Snippet",
    "# end snippet: x",
    "# snippet: two words",
    "# snippet : x",
])
def test_malformed_markers_are_errors(marker):
    err = error_of(f"a = 1\n\n{marker}\nb = 2\n")
    assert str(err).startswith("x.py:3: ")
    assert "malformed snippet marker" in str(err)
    assert marker.strip() in str(err)


@pytest.mark.unit
def test_no_colon_typo_is_caught_by_the_end_marker():
    # `# snippet foo` is prose, not a marker; the `# end snippet` after it then has no start.
    err = error_of("# snippet foo\nx = 1\n# end snippet\n")
    assert str(err).startswith("x.py:3: ")


@pytest.mark.unit
def test_missing_file(tmp_path):
    missing = tmp_path / "nope.py"
    with pytest.raises(SnippetError) as info:
        read_regions(missing)
    assert str(info.value) == f"{missing}: not found"


@pytest.mark.unit
def test_not_utf8_file(tmp_path):
    path = tmp_path / "latin1.py"
    path.write_bytes(b"# caf\xe9\n")
    with pytest.raises(SnippetError) as info:
        read_regions(path)
    assert str(path) in str(info.value) and "UTF-8" in str(info.value)


@pytest.mark.unit
def test_missing_region_lists_the_regions_that_exist(tmp_path):
    path = write(tmp_path, SOURCE)
    with pytest.raises(SnippetError) as info:
        extract(path, "benchmark")
    message = str(info.value)
    assert message.startswith(f"{path}: ")
    assert "'benchmark'" in message and "kernel, launch" in message


@pytest.mark.unit
def test_missing_region_in_a_file_without_regions(tmp_path):
    path = write(tmp_path, "x = 1\n")
    with pytest.raises(SnippetError, match="none"):
        extract(path, "kernel")


@pytest.mark.unit
def test_errors_name_the_real_file(tmp_path):
    path = write(tmp_path, "x\n# snippet: Bad\n# end snippet\n", name="bad.py")
    with pytest.raises(SnippetError) as info:
        read_regions(path)
    assert str(info.value).startswith(f"{path}:2: ")


# -- the command line -----------------------------------------------------------------

def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SNIPPETS), *args], capture_output=True, text=True,
                          encoding="utf-8", cwd=cwd, timeout=60)


@pytest.mark.integration
def test_cli_list(tmp_path):
    one = write(tmp_path, SOURCE, name="one.py")
    two = write(tmp_path, "# snippet: only\nx = 1\n# end snippet\n", name="two.py")
    result = cli("list", str(one), str(two))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"{one} kernel 5-7",
        f"{one} launch 13-17",
        f"{two} only 2-2",
    ]
    assert result.stderr == ""


@pytest.mark.integration
def test_cli_show_prints_exact_text(tmp_path):
    path = write(tmp_path, SOURCE, newline="\r\n")
    result = subprocess.run([sys.executable, str(SNIPPETS), "show", str(path), "launch"],
                            capture_output=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode("utf-8") == "grid = (4,)\nif True:\n    kernel[grid](x)\n\nreturn grid\n"


@pytest.mark.integration
def test_cli_show_empty_region(tmp_path):
    path = write(tmp_path, "# snippet: e\n# end snippet\n")
    result = cli("show", str(path), "e")
    assert (result.returncode, result.stdout) == (0, "")


@pytest.mark.integration
@pytest.mark.parametrize("text, args_tail, expect", [
    ("x\n# snippet: open\n", ["list"], ":2: "),
    ("# end snippet\n", ["list"], ":1: "),
    (SOURCE, ["show", "missing"], "kernel, launch"),
])
def test_cli_bad_input_exits_2_with_error_on_stderr(tmp_path, text, args_tail, expect):
    path = write(tmp_path, text)
    command, *rest = args_tail
    result = cli(command, str(path), *rest)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith(f"error: {path}")
    assert expect in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.integration
def test_cli_list_stops_at_a_bad_file(tmp_path):
    good = write(tmp_path, SOURCE, name="good.py")
    result = cli("list", str(good), str(tmp_path / "missing.py"))
    assert result.returncode == 2
    assert "missing.py: not found" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.integration
@pytest.mark.parametrize("args", [[], ["list"], ["show"], ["show", "a.py"], ["show", "a", "b", "c"], ["frob", "x"]])
def test_cli_bad_usage_exits_2(args):
    result = cli(*args)
    assert result.returncode == 2
    assert "usage:" in result.stderr
    assert result.stdout == ""
