"""Hostile input, class 7: invisible characters (Trojan Source, CVE-2021-42574).

A bidirectional control or another invisible format character (Unicode
category Cf) in a lesson source is a build error at FILE:LINE: code shown on
a page must read as it runs. In recorded text (output, check messages, table
cells, device names, captions) the same characters are shown visibly, as
⟨U+202E⟩, and in a terminal as \\u202e.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import SITE_LESSON, SNIPPETS, Doc, build_output, figure_name, make_site_project
from verified_triton.core.kit import Check, Figure, Table
from verified_triton.judge.evidence import Environment

pytestmark = pytest.mark.integration

RLO = "\u202e"  # RIGHT-TO-LEFT OVERRIDE
PAGE = "---\nlesson: plain\n---\n\n# Plain\n\n::status\n\n::snippet code/plain/plain.py kernel\n"
# What a Trojan Source line looks like: the comment hides that the return happens first.
TROJAN = 'def kernel():\n    access = "user"\n    if access != "user{RLO} \u2066# Check if admin\u2069 \u2066":\n'


@pytest.mark.parametrize("char, name", [("\u202e", "RIGHT-TO-LEFT OVERRIDE"), ("\u2066", "LEFT-TO-RIGHT ISOLATE"),
                                        ("\u200b", "ZERO WIDTH SPACE"), ("\u061c", "ARABIC LETTER MARK"),
                                        ("\u00ad", "SOFT HYPHEN")])
def test_an_invisible_character_in_a_region_fails_the_build_at_file_and_line(tmp_path, char, name):
    site = make_site_project(tmp_path / "repo")
    source = SITE_LESSON.replace("LESSON", "plain").replace("    return 1\n", f"    return 1  # ok{char}\n")
    site.add_lesson("plain", PAGE, source=source)
    line = source.split("\n").index(f"    return 1  # ok{char}") + 1
    column = len("    return 1  # ok") + 1
    result = site.build()
    output = build_output(result)
    assert result.returncode != 0
    main = site.code / "plain" / "plain.py"
    assert f"{main}:{line}: invisible format character U+{ord(char):04X} ({name}) at column {column}" in output, \
        output
    assert "Traceback" not in output
    cli = subprocess.run([sys.executable, str(SNIPPETS), "list", str(main)], capture_output=True, text=True,
                         timeout=60)
    assert cli.returncode == 2 and f"{main}:{line}: invisible format character U+{ord(char):04X}" in cli.stderr


def test_an_invisible_character_outside_any_region_still_fails_the_build(tmp_path):
    """The full source is published too (its own page, the download): no line of it may hide anything."""
    site = make_site_project(tmp_path / "repo")
    source = SITE_LESSON.replace("LESSON", "plain") + TROJAN.replace("{RLO}", RLO)
    site.add_lesson("plain", PAGE, source=source)
    result = site.build()
    line = source.split("\n").index(TROJAN.split("\n")[2].replace("{RLO}", RLO)) + 1
    assert result.returncode != 0
    assert f"{site.code / 'plain' / 'plain.py'}:{line}: invisible format character U+202E" in build_output(result)


def test_invisible_characters_in_recorded_text_are_shown_visibly(tmp_path):
    site = make_site_project(tmp_path / "repo")
    site.add_lesson("plain", table="sweep", title=f"Plain {RLO}title", summary=f"summary {RLO}here")
    marked = f"before{RLO}after"
    record = site.make_record(
        "plain", "gpu",
        env=Environment(python="3.11", torch="2.13", triton="3.9", platform="Linux", device_name=f"GPU{RLO}X"),
        stdout=f"line one\nprint('{marked}')\n", stderr=f"warn {marked}\n",
        checks=[Check("check", "pass", marked)],
        tables=[Table("sweep", [f"col{RLO}"], [[marked]], caption=marked)],
        figures=[Figure("plot", figure_name("plot", b"\x89PNG\r\n\x1a\n"), marked)])
    site.write(record, {figure_name("plot", b"\x89PNG\r\n\x1a\n"): b"\x89PNG\r\n\x1a\n"})
    result = site.build()
    assert result.returncode == 0, build_output(result)
    page = site.html("plain")
    doc = Doc(page)
    assert RLO not in doc.all_text, "a raw U+202E reached the page"
    for section in ("output", "checks", "recorded-table", "figures"):
        assert "before⟨U+202E⟩after" in doc.text_of(section), section
    assert "GPU⟨U+202E⟩X" in doc.text_of("output")
    imgs = [e for e in doc.find("img") if e.section == "figures"]
    assert imgs and RLO not in imgs[0].attrs["alt"]
    # names key results across runs: one with an invisible character is refused outright
    import json

    from verified_triton.judge.evidence import EvidenceError, record_from_json

    raw = json.loads(record.to_json())
    raw["checks"][0]["name"] = f"check{RLO}name"
    with pytest.raises(EvidenceError, match=r"checks\[0\]\.name: a name is printable text"):
        record_from_json(raw, "r.json")


def test_invisible_characters_in_status_output_are_escaped_for_the_terminal(project):
    from conftest import fake_record
    from verified_triton.judge.evidence import write_record

    project.add("good", "lesson = Lesson('good')\nsys.exit(lesson.finish())\n")
    write_record(project.evidence, fake_record(project.lesson("good"), "interpreter", outcome="failed",
                                               reason=f"bad {RLO}reason"))
    result = project.verify("--status")
    assert RLO not in result.stdout and "bad \\u202ereason" in result.stdout
