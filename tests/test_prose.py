"""What the prose says is checked too: the prose lint, the timing method said by the evidence, and
every GPU term defined where it appears (the glossary and Material's abbreviations).

tools/prose_lint.py reads a page's prose (no front matter, code, directives or math) and reports
revision history, references to documents the reader cannot see, timing methods restated in
prose, and glossary terms no abbreviation matches on the page, each as PAGE:LINE.
"""

from __future__ import annotations

import re
import textwrap

import pytest

from conftest import REPO, build_output
from verified_triton.author import prose_lint
from verified_triton.author.prose_lint import lint, paragraphs, timing_kinds
from verified_triton.core.lessons import discover
from verified_triton.site.glossary import ABBREVIATIONS, Entry, GlossaryError, lesson_for, read

DOCS = REPO / "docs"
ENTRIES = read(DOCS / ABBREVIATIONS, DOCS)
LESSONS = discover(REPO / "code")


def findings(text: str, recorded: set[str] | None = None, entries=ENTRIES) -> list[str]:
    return [str(f) for f in lint("page.md", textwrap.dedent(text), entries, recorded)]


def recorded_methods(lesson) -> set[str]:
    """The timing kinds the lesson's GPU records name: "graph" and/or "events"."""
    return prose_lint.recorded_methods((DOCS / lesson.page).read_text(encoding="utf-8"), REPO / "evidence") or set()


# -- every lesson page ------------------------------------------------------------------------------

@pytest.mark.unit
def test_every_lesson_page_passes_the_prose_lint():
    problems = []
    for lesson in LESSONS:
        page = DOCS / lesson.page
        problems += lint(f"docs/{lesson.page}", page.read_text(encoding="utf-8"), ENTRIES, recorded_methods(lesson))
    assert not problems, "\n".join(str(p) for p in problems)


@pytest.mark.unit
def test_no_page_names_a_timing_method_its_evidence_does_not_record():
    """fp16-matmul, fp8-matmul, layer-norm and persistent-tma-matmul said do_bench while their records
    said CUDA-graph replay. A paragraph exempted from the timing rule (with its reason) is about another
    timing, such as the autotuner's own, and is left out."""
    wrong = []
    for lesson in LESSONS:
        recorded = recorded_methods(lesson)
        if not recorded:
            continue
        for para in paragraphs((DOCS / lesson.page).read_text(encoding="utf-8")):
            if "timing" in para.allowed:
                continue
            named = {k for k in timing_kinds(para.text + " " + " ".join(c for _, c in para.code))
                     if k in ("graph", "events")}
            if named - recorded:
                wrong.append(f"docs/{lesson.page}:{para.line_at(0)}: names {sorted(named - recorded)}, "
                             f"the evidence records {sorted(recorded)}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.unit
def test_the_timing_rule_would_have_caught_the_four_pages():
    text = """\
        The kernels and cuBLAS take turns: each of ten rounds times every function once
        with a `triton.testing.do_bench` median (CUDA events, L2 flushed between
        calls), so clock drift under load treats them alike.
        """
    found = findings(text, recorded={"graph"})
    by_words = {f.split("'")[1]: f for f in found}
    assert set(by_words) == {"do_bench", "CUDA events", "L2 flushed"}
    assert by_words["do_bench"].startswith("page.md:2: [timing] 'do_bench': prose restates how timing was done")
    assert by_words["L2 flushed"].endswith("this lesson's GPU evidence records graph, not events")
    assert not by_words["CUDA events"].endswith("not events")  # a graph replay is timed with events too


# -- the rules, one by one --------------------------------------------------------------------------

@pytest.mark.unit
def test_history_is_reported_with_its_line_even_across_a_line_break():
    found = findings("""\
        # Title

        The kernel is fast. An earlier
        version of this lesson used 8 warps (as the first benchmark once did).
        Compiled for sm_90 while this lesson was written, nothing spilled.
        """)
    assert found == [
        "page.md:3: [history] revision history ('An earlier version'): say what the lesson is and does, "
        "in the present tense, or leave it out",
        "page.md:4: [history] revision history ('once did'): say what the lesson is and does, in the present "
        "tense, or leave it out",
        "page.md:5: [history] revision history ('while this lesson was written'): say what the lesson is and "
        "does, in the present tense, or leave it out",
    ]


@pytest.mark.unit
def test_code_math_directives_and_front_matter_are_not_prose():
    assert findings("""\
        ---
        title: an earlier version
        ---

        ```python
        # an earlier version, do_bench
        ```

        ::snippet code/x/x.py an-earlier-version

        $$
        \\text{an earlier version}
        $$

        Inline $\\text{seed 004}$ and [a link](NOTES.md) are fine.
        """) == []


@pytest.mark.unit
def test_documents_the_reader_cannot_see():
    found = findings("""\
        The tolerance follows seed 004's rule and the course's length rule; NOTES.md has the numbers
        from tools/experiments/race.py.

        The target comes from the notebook the lesson grew from.
        """)
    assert len(found) == 5
    assert "page.md:1: [unseen] 'seed 004'" in found[0]
    assert any("'NOTES.md' refers to a file the site does not publish" in f for f in found)
    assert any("tools/experiments/race.py" in f for f in found)
    assert any(f.startswith("page.md:4: [unseen] 'the notebook': a notebook the page never introduces") for f in found)


@pytest.mark.unit
def test_the_issue_tracker_is_not_a_reference_for_readers():
    found = findings("""\
        The gate is lower than the issue's 0.9, and the backward was not attempted in this session.
        """)
    assert len(found) == 2
    assert "[unseen] \"the issue's\" refers to the project's issue tracker" in found[0]
    assert "[unseen] 'this session' refers to the project's issue tracker" in found[1]


@pytest.mark.unit
def test_a_credits_line_introduces_the_notebook_once():
    text = """\
        **Credits.** The lesson starts from a cookbook notebook, which ...

        The target is the notebook's.
        """
    assert findings(text) == []
    twice = textwrap.dedent(text) + "\n**Credits.** Again.\n"
    assert findings(twice) == ["page.md:1: [unseen] more than one credits line: say it once"]


@pytest.mark.unit
def test_an_allowed_paragraph_needs_a_reason_and_covers_only_itself():
    allowed = """\
        <!-- prose-lint: allow timing: the autotuner's own timing is the subject -->
        The autotuner times each config with `do_bench`, after a warm-up.

        The benchmark used `do_bench` too.
        """
    found = findings(allowed)
    assert found == ["page.md:4: [timing] 'do_bench': prose restates how timing was done; the benchmarks table "
                     "shows the method each run recorded (rounds, graph replay or events, warm-up)"]
    no_reason = allowed.replace(": the autotuner's own timing is the subject", "")
    assert len(findings(no_reason)) == 3  # not a marker without its reason: every use is reported


@pytest.mark.unit
def test_a_glossary_term_needs_one_use_its_abbreviation_matches():
    only_code = "The tensor cores run `wgmma` here.\n"
    only_plural = "Two warpgroups share the tile.\n"  # with a glossary that has no plural form
    found = findings(only_code) + findings(only_plural, entries=[Entry("warpgroup", "Four warps.", "x",
                                                                       ["warpgroup"], 1)])
    assert found[0] == ("page.md:1: [glossary] `wgmma` is a glossary term, but no use on this page matches its "
                        "abbreviation (wgmma) outside code, so no definition shows on hover: write 'wgmma' once in "
                        "the prose, or add the form to docs/includes/abbreviations.md")
    assert found[1].startswith("page.md:1: [glossary] warpgroups is a glossary term")
    assert findings("The wgmma instruction; later `wgmma` again.\n") == []
    # Another word that only looks like a term is not one: IEEE 754 is not input_precision="ieee".
    assert findings("IEEE division rounds once.\n") == []


# -- the glossary ----------------------------------------------------------------------------------------

REQUIRED = ["warp", "warpgroup", "SM", "TMA", "wgmma", "mma.sync", "L2", "HBM", "occupancy", "register spill",
            "CUDA graph", "default stream", "tf32", "ieee", "e4m3", "program", "block", "grid", "mask", "autotune",
            "persistent kernel", "split-K", "roofline", "bandwidth-bound"]


@pytest.mark.unit
def test_the_glossary_defines_the_course_terms_and_links_each_to_the_lesson_that_teaches_it():
    forms = {form: entry for entry in ENTRIES for form in entry.forms}
    assert not [t for t in REQUIRED if t not in forms], [t for t in REQUIRED if t not in forms]
    for entry in ENTRIES:
        lesson = lesson_for(entry, LESSONS)
        assert lesson is not None, f"{entry.term}: no lesson is called {entry.taught_in!r}"
        page = (DOCS / lesson.page).read_text(encoding="utf-8")
        assert any(re.search(rf"(?<![\w-]){re.escape(f)}(?![\w])", page, re.I) for f in entry.forms), \
            f"{entry.term} is taught in {lesson.name}, whose page never uses it"


@pytest.mark.unit
def test_forms_of_a_term_share_its_definition():
    """`warps` and `warp` say the same; a plural defined differently would split the glossary entry."""
    forms = {form for entry in ENTRIES for form in entry.forms}
    heads = {entry.term for entry in ENTRIES}
    for form in forms:
        for suffix in ("s", "es"):
            if form.endswith(suffix) and form[: -len(suffix)] in forms:
                assert form not in heads, f"{form} is its own entry: give it {form[:-len(suffix)]}'s definition"


@pytest.mark.unit
def test_a_bad_abbreviations_file_is_reported_at_its_line(tmp_path):
    path = tmp_path / "abbreviations.md"
    path.write_text("*[warp]: 32 threads. Taught in: Vector add.\n\nA stray paragraph.\n")
    with pytest.raises(GlossaryError, match=r"abbreviations\.md:3: not an abbreviation"):
        read(path)
    path.write_text("*[warp]: 32 threads.\n")
    with pytest.raises(GlossaryError, match=r":1: 'warp' does not end with 'Taught in: LESSON\.'"):
        read(path)
    path.write_text("*[warp]: A. Taught in: x.\n*[warp]: B. Taught in: x.\n")
    with pytest.raises(GlossaryError, match=r":2: 'warp' is defined twice \(first on line 1\)"):
        read(path)


@pytest.mark.integration
def test_the_glossary_page_and_the_hover_definitions_on_a_built_page(site_project):
    site = site_project
    (site.docs / "includes").mkdir()
    (site.docs / "includes" / "abbreviations.md").write_text(
        "*[warp]: 32 threads that run each instruction together. Taught in: Good.\n"
        "*[warps]: 32 threads that run each instruction together. Taught in: Good.\n")
    (site.docs / "glossary.md").write_text("# Glossary\n\n::glossary\n")
    site.add_lesson("good", title="Good: a lesson", page=textwrap.dedent("""\
        ---
        lesson: good
        ---

        # Good

        A warp runs the program; `warp` in code and the checks stay plain.

        ::snippet code/good/good.py kernel

        ::checks
        """))
    from conftest import fake_record
    from verified_triton.core.kit import Check
    from verified_triton.judge.evidence import write_record

    write_record(site.evidence, fake_record(site.lesson("good"), "interpreter",
                                            checks=[Check("warp-count", "pass", "4 warps")]))
    result = site.build()
    assert result.returncode == 0, build_output(result)
    html = site.html("good")
    assert '<abbr title="32 threads that run each instruction together. Taught in: Good.">warp</abbr> runs' in html
    assert "<code>warp</code>" in html  # a code span has no abbreviation
    assert "<code>warp-count</code>" in html  # nor the raw <code> a directive writes round a check's name
    assert "4 <abbr" in html  # prose from the evidence outside code may have one
    assert not re.search(r"<pre[^>]*>(?:(?!</pre>).)*<abbr", html, re.S)
    glossary = (site.site / "glossary" / "index.html").read_text(encoding="utf-8")
    assert '<span id="term-warp"></span>' in glossary and re.search(r"also <abbr[^>]*>warps</abbr>", glossary)
    assert 'href="../lessons/good/"' in glossary


@pytest.mark.integration
def test_the_glossary_names_a_lesson_that_does_not_exist(site_project):
    site = site_project
    (site.docs / "includes").mkdir()
    (site.docs / "includes" / "abbreviations.md").write_text("*[warp]: 32 threads. Taught in: Nowhere.\n")
    (site.docs / "glossary.md").write_text("# Glossary\n\n::glossary\n")
    result = site.build()
    assert result.returncode != 0
    assert "abbreviations.md:1: 'warp' is taught in 'Nowhere', which is no lesson" in build_output(result)


@pytest.mark.unit
def test_the_lint_runs_from_the_command_line(capsys):
    assert prose_lint.main([str(DOCS / "lessons" / "vector-add.md")]) == 0
    assert capsys.readouterr().out == ""
