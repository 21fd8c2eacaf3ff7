"""Hostile input, issue 20, class 7: escape for where it lands.

A notebook's Markdown cells and an archive's README are Markdown read outside
the site (Jupyter, Colab, GitHub, an editor). Whatever lesson.toml says (title,
summary, why) and whatever a record says (versions, device, reason, ...) must
show there as the characters it is: no HTML, no link or image, no bare URL or
address that GitHub's or Jupyter's Markdown turns into a link, no math, no
emphasis, no heading. Code cells and archived files hold the lesson's own
sources only. Written before the fix: the README and the notebook's first and
last cells carried lesson.toml and evidence text raw.
"""

from __future__ import annotations

import io
import re
import zipfile

import pytest
from markdown_it import MarkdownIt

from conftest import REPO, make_site_project, toml_string
from verified_triton.core.kit import Check, Step
from verified_triton.judge.evidence import Environment

pytestmark = pytest.mark.unit

# Markup for every Markdown reader: HTML, a javascript: link, remote images, a bare URL, a www. address and an
# e-mail address (GFM autolinks them), math (Jupyter), emphasis, code, a heading and a list when at a line start.
HOSTILE = ('# <img src="https://evil.example/x.png"> [click](javascript:alert(1)) ![i](https://evil.example/i.png) '
           "www.evil.example a@evil.example https://evil.example/p $x^2$ **b** _e_ `c` <script>alert(1)</script> "
           "&amp; ~~s~~ | t |")
SHORT = "<img src=//e.x/i> [a](javascript:x) www.e.x a@e.x $m$ **b**"  # fits a version or device field
assert len(SHORT) <= 120

PAGE = ("---\nlesson: hostile\n---\n\n# Hostile\n\n::status\n\n## Requirements\n\n::requirements\n\n"
        "## Steps\n\n::step checks\n\n::step timing\n")
# A lesson whose main() has steps: the notebook folds each step's recorded output under its cell.
SOURCE = """\
import sys
from pathlib import Path

# lessonkit.py sits beside this file in a download, one folder up in the repository.
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]
from lessonkit import Lesson  # noqa: E402


def main() -> int:
    lesson = Lesson("hostile")
    with lesson.step("checks"):
        lesson.check("c", True)
    if lesson.step("timing", needs_gpu="timings need a GPU"):
        print("timed")
    return lesson.finish()


if __name__ == "__main__":
    sys.exit(main())
"""
AUTOLINK = re.compile(r"(?i)(?<![\\\w])www\.|[a-z][a-z0-9+.-]*://|(?<![\\&#\w])@")  # what GFM makes a link of
MATH = re.compile(r"(?<!\\)\$")
OWN_TAGS = {"<code>", "</code>", "<small>", "</small>", "<br>"}
# The notebook generator's own folds (a solution, a run's whole output): fixed words, no text of the record;
# or a step's recorded output, whose summary names the device and the date, HTML-escaped (no tag in it).
# or the badge's fold, whose summary is the badge (fixed words) and the escaped summary line (no tag in it).
OWN_BLOCK = re.compile(r"\A(?:<details>(?:<summary>(?:[A-Za-z ,()'-]{1,80}|Recorded on [^<>]{1,900}"
                       r"|<b>[A-Z ]{1,20}</b> on the site when this notebook was made: [^<>]{1,900})</summary>)?"
                       r"|</details>)\s*\Z")


@pytest.fixture
def hostile(tmp_path):
    site = make_site_project(tmp_path / "site")
    site.add_lesson("hostile", PAGE, title=HOSTILE, summary=HOSTILE, source=SOURCE,
                    toml=f'[requires]\ncapability = "9.0"\nwhy = {toml_string(HOSTILE)}\n')
    env = Environment(python=SHORT, torch=SHORT, triton=SHORT, platform=SHORT, device_name=SHORT,
                      capability="9.0", driver=SHORT, cuda=SHORT)
    site.write(site.make_record("hostile", "gpu", env=env, outcome="failed", exit_code=1, reason=HOSTILE,
                                stdout=HOSTILE, checks=[Check("c", "fail", HOSTILE)],
                                steps=[Step("checks", HOSTILE), Step("timing", "", not_run=HOSTILE)]))
    site.write(site.make_record("hostile", "interpreter", env=Environment(python=SHORT, torch=SHORT, triton=SHORT,
                                                                          platform=SHORT, device_name="CPU")))
    return site


def without_code_blocks(markdown: str) -> str:
    """The lines outside fenced and indented code blocks (a README's commands), where Markdown reads nothing."""
    lines = markdown.split("\n")
    for token in MarkdownIt("commonmark").parse(markdown):
        if token.type in ("fence", "code_block") and token.map:
            start, end = token.map
            lines[start:end] = [""] * (end - start)
    return "\n".join(lines)


def problems(markdown: str) -> list[str]:
    """What a CommonMark reader (and GFM's autolinks, Jupyter's math) would make of hostile text as markup."""
    found = []
    tokens = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"]).parse(markdown)
    for token in [t for block in tokens for t in [block, *(block.children or [])]]:
        if token.type == "html_inline" and token.content in OWN_TAGS:
            continue  # the directives' own markup around escaped text
        if token.type == "html_block" and OWN_BLOCK.match(token.content):
            continue  # the notebook's own fold around an escaped or fenced text
        if token.type in ("html_block", "html_inline", "link_open", "image", "s_open"):
            found.append(f"{token.type}: {token.content or token.attrs}")
        if token.type == "code_inline" and token.content == "c":
            found.append("a code span")
    for kind in ("strong", "em"):
        html = MarkdownIt("commonmark").render(markdown)
        if re.search(rf"<{kind}>(b|e)</{kind}>", html):
            found.append(f"{kind} from the hostile text")
    outside_code = without_code_blocks(markdown)
    if AUTOLINK.search(outside_code):
        found.append(f"{AUTOLINK.search(outside_code).group()!r}: GFM makes a link of it")
    if MATH.search(outside_code):
        found.append("a '$': Jupyter starts math")
    return found


def test_the_archive_readme_carries_no_markup(hostile):
    from verified_triton.site import directives
    from verified_triton.site.downloads import archive

    site = directives.Site.load(hostile.code, hostile.evidence)
    lesson = site.lessons[0]
    with zipfile.ZipFile(io.BytesIO(archive(lesson, site))) as zf:
        readme = zf.read("hostile/README.md").decode("utf-8")
        archived = {name.split("/", 1)[1]: zf.read(name) for name in zf.namelist() if not name.endswith("README.md")}
    assert problems(readme) == [], readme
    headings = [t for t in MarkdownIt("commonmark").parse(readme) if t.type == "heading_open"]
    assert [h.tag for h in headings] == ["h1", "h2", "h2", "h2"], readme  # the README's own, and no more
    assert HOSTILE.replace("&amp;", "&") not in readme  # nothing of it reached the file raw
    # the archived files are the lesson's own, byte for byte
    assert archived == {"hostile.py": (hostile.code / "hostile" / "hostile.py").read_bytes(),
                        "lesson.toml": (hostile.code / "hostile" / "lesson.toml").read_bytes(),
                        "lessonkit.py": (hostile.code / "lessonkit.py").read_bytes(),
                        "LICENSE": (REPO / "LICENSE").read_bytes()}  # and the code's licence (issue 32)


def test_notebook_markdown_cells_carry_no_markup(hostile):
    import base64
    import json
    import zlib

    from verified_triton.site import directives
    from verified_triton.site.downloads import notebook

    site = directives.Site.load(hostile.code, hostile.evidence)
    nb = notebook(site.lessons[0], site, hostile.docs)
    toml = (hostile.code / "hostile" / "lesson.toml").read_text(encoding="utf-8")
    assert [c.id for c in nb.cells if c.id.startswith("recorded-")] == ["recorded-checks", "recorded-timing",
                                                                         "recorded-run"]
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            assert problems(cell.source) == [], f"cell {i}:\n{cell.source}"
        else:  # code: the setup, the lesson's own files, the lesson cell by cell; never evidence
            assert SHORT not in cell.source and HOSTILE not in cell.source, f"cell {i}: text of the record or of " \
                "lesson.toml in a code cell"
    kit = next(c for c in nb.cells if c.id == "kit")
    packed = next(ln for ln in kit.source.split("\n") if ln.startswith('KIT = "'))[len('KIT = "'):-1]
    assert json.loads(zlib.decompress(base64.b85decode(packed)))["lesson.toml"] == toml  # byte for byte, packed
