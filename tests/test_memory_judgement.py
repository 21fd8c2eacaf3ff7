"""The memory check's judgement (judge/memory.py), issues 47 and 48: findings before the tool's state, counts
through the number formatter, a size claim the source settles, and the reproducer rule.

- Findings survive their tool's end (47.2): memcheck found an error in the lesson's kernel, then timed out or
  left no summary: the lesson is FAILED, naming the kernel; the judge used to return early for the tool's
  state, and the finding was named nowhere.
- Counts are written by core/numfmt (47.7): a memory-check line's numbers are at most 13 characters wide.
- A record's "gpu"/"smoke" size claim (47.10) is checked against the current source's lesson.toml, which the
  kit reads and the source hash covers: a claim it does not bear out makes the record unusable.
- The reproducer rule (48.1): where a tool cannot finish or analyse some of the lesson's kernels, the lesson
  declares it with a minimal reproducer ([[sanitize.not_applicable]]) that the recording runs under the same
  tool; while the reproducer fails the same way, the tool is *not applicable to those kernels*, said in one
  sentence, and what the tools saw still counts. No reproducer, a reproducer that fails another way or no
  longer fails, or kernels that are not the lesson's: the check stays incomplete.

Each test failed on the code before its change (the rule's tests: there was no rule).
"""

from __future__ import annotations

import dataclasses
import re
import textwrap

import pytest

from conftest import fake_record
from verified_triton.core import kit
from verified_triton.judge.evidence import (
    SanitizerFinding,
    SanitizerLocation,
    SanitizerReproducer,
    SanitizerRun,
    SanitizerToolRun,
    sanitize_key,
)
from verified_triton.judge.status import FAILED, PARTIAL, VERIFIED, judge_records

pytestmark = pytest.mark.unit

MAIN = "code/mm/mm.py"
CRASH = "the tool says it did not see everything: Internal Sanitizer Error: The Sanitizer failed to handle a " \
        "hardware exception."
LESSON = """\
    import triton

    from lessonkit import Lesson


    @triton.jit
    def matmul_kernel(a_ptr):
        pass


    lesson = Lesson("mm")
    sys.exit(lesson.finish())
"""
REPRO = """\
import triton


@triton.jit
def repro_kernel(a_ptr):
    pass
"""
NOT_APPLICABLE = """\
[[sanitize.not_applicable]]
tool = "racecheck"
kernels = ["matmul_kernel"]
reproducer = "racecheck_repro.py"
why = "compute-sanitizer 2025.3.1 fails to handle a hardware exception on a wgmma pipeline"
"""


@pytest.fixture
def lesson(project):
    project.add("mm", LESSON)
    return project.lesson("mm")


@pytest.fixture
def declaring(project):
    """The same lesson declaring racecheck not applicable to its kernel, with a reproducer in its folder."""
    project.add("mm", LESSON, toml=NOT_APPLICABLE, files={"racecheck_repro.py": REPRO})
    return project.lesson("mm")


def run(tool: str, state: str = "clean", findings=(), reason: str = "", **fields) -> SanitizerToolRun:
    counted = sum(f.records for f in findings if f.kind != "race")
    reason = reason or {"timeout": "killed after the 300 s timeout", "inconclusive": "no summary line in its log",
                        "incomplete": CRASH}.get(state, "")
    return SanitizerToolRun(tool=tool, state=state, reason=reason, command=f"compute-sanitizer --tool {tool}",
                            exit_code=None if state == "timeout" else 0, app_outcome="passed", errors=counted,
                            findings=list(findings), **fields)


def error(kernel="matmul_kernel", records=3, line=9) -> SanitizerFinding:
    return SanitizerFinding("memory-access", "Invalid __global__ write of size 4 bytes",
                            [SanitizerLocation(kernel, MAIN if kernel == "matmul_kernel" else "<lib>/x.so", line)],
                            records)


def race(kernel="matmul_kernel") -> SanitizerFinding:
    file = MAIN if kernel == "matmul_kernel" else ""
    return SanitizerFinding("race", "Error: race between accesses",
                            [SanitizerLocation(kernel, file, 9, "Write"), SanitizerLocation(kernel, file, 10, "Read")],
                            1, 4, "Error")


def memory(lesson, *runs_: SanitizerToolRun, reproducers=(), size="smoke", **fields):
    by_tool = {r.tool: r for r in runs_}
    runs_ = [by_tool.get(tool) or run(tool) for tool in kit.SANITIZER_TOOLS]
    return fake_record(lesson, "sanitize", key=sanitize_key("NVIDIA H200"),
                       sanitizer=SanitizerRun("2025.3.1.0", size, runs_, [], list(reproducers)), **fields)


def judged(lesson, record):
    return judge_records(lesson, [fake_record(lesson, "interpreter"), fake_record(lesson, "gpu"), record],
                         memory_required=True)


# -- 47.2: findings before the tool's state -----------------------------------------------------------

@pytest.mark.parametrize("state", ["timeout", "inconclusive", "incomplete"])
def test_an_error_in_the_lessons_kernel_fails_it_whatever_became_of_the_tool(lesson, state):
    st = judged(lesson, memory(lesson, run("memcheck", state, [error()])))
    assert st.status is FAILED and st.memory.state == "failed", st.sentence
    assert f"memcheck found 3 error(s) in the lesson's kernels: 3 in matmul_kernel at {MAIN}:9" in st.sentence
    assert st.memory.line.startswith("memcheck: 3 errors in matmul_kernel")


@pytest.mark.parametrize("state", ["timeout", "inconclusive"])
def test_an_undeclared_finding_before_a_timeout_is_named_and_a_library_one_counted(lesson, state):
    st = judged(lesson, memory(lesson, run("racecheck", state, [race(), race("nvjet_sm90_gemm")])))
    assert st.status is PARTIAL
    assert f"racecheck reports Error: race between accesses in matmul_kernel at {MAIN}:9, {MAIN}:10, neither " \
           "fixed nor declared" in st.sentence
    assert "(+1 outside the lesson's kernels)" in st.memory.line
    quiet = judged(lesson, memory(lesson, run("racecheck", state)))
    assert quiet.status is PARTIAL and f"racecheck: {'timed out' if state == 'timeout' else 'no summary'}" \
        in quiet.memory.line


# -- 47.7: counts through the number formatter -------------------------------------------------------

def test_the_memory_lines_numbers_have_a_bounded_width(lesson):
    huge = 10**15
    st = judged(lesson, memory(lesson, run("memcheck", "findings", [error(records=huge)]),
                               run("racecheck", "findings", [race()], not_printed=huge)))
    numbers = re.findall(r"[0-9][0-9,.e+]*", st.memory.line + st.sentence)
    assert numbers and max(len(n) for n in numbers) <= 13, st.memory.line
    assert "1.00e+15" in st.memory.line


def test_no_count_in_the_package_is_formatted_by_hand():
    """Every count reaches people through core/numfmt (bounded width), never f'{n:,}'."""
    from conftest import TOOLS

    found = [f"{path.relative_to(TOOLS)}:{i}" for path in sorted((TOOLS / "verified_triton").rglob("*.py"))
             if path.name != "numfmt.py"
             for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
             if re.search(r"\{[^{}]*:,[^{}]*\}", line)]
    assert found == []


# -- 47.10: the size claim -----------------------------------------------------------------------------

def test_a_size_claim_the_source_does_not_bear_out_makes_the_record_unusable(project, lesson):
    st = judged(lesson, memory(lesson, size="gpu"))
    assert st.status is PARTIAL and st.memory is None and st.sanitize_records == []
    assert "sanitizer.size: 'gpu', but this source's lesson.toml makes lesson.size() pick the 'smoke' inputs" \
        in st.sentence
    assert judged(lesson, memory(lesson)).status is VERIFIED
    project.add("big", LESSON, toml='[sanitize]\nsize = "gpu"\n', order=2)
    big = project.lesson("big")
    assert judged(big, memory(big, size="gpu")).status is VERIFIED
    assert judged(big, memory(big, size="smoke")).status is PARTIAL


# -- 48.1: the reproducer rule ---------------------------------------------------------------------------

def reproducer(lesson, state="incomplete", reason="", kernels=("matmul_kernel",), tool="racecheck"):
    return SanitizerReproducer(tool, list(kernels), "code/mm/racecheck_repro.py",
                               "compute-sanitizer 2025.3.1 fails to handle a hardware exception on a wgmma pipeline",
                               run(tool, state, reason=reason))


def test_a_tool_whose_reproducer_fails_the_same_way_is_not_applicable_to_those_kernels(declaring):
    st = judged(declaring, memory(declaring, run("racecheck", "incomplete"), reproducers=[reproducer(declaring)]))
    assert st.status is VERIFIED and st.memory.state == "passed", st.sentence
    sentence = ("racecheck is not applicable to matmul_kernel: its reproducer code/mm/racecheck_repro.py fails the "
                "same way (compute-sanitizer 2025.3.1 fails to handle a hardware exception on a wgmma pipeline)")
    assert st.memory.not_applicable == [sentence] and sentence in st.sentence
    assert st.memory.line.endswith("racecheck: not applicable to matmul_kernel")
    assert st.headline.startswith("Verified:")


def test_a_reproducer_that_stops_failing_makes_the_tool_applicable_again(declaring):
    st = judged(declaring, memory(declaring, run("racecheck", "incomplete"),
                                  reproducers=[reproducer(declaring, "clean")]))
    assert st.status is PARTIAL and st.memory.not_applicable == []
    assert ("racecheck is incomplete (" + CRASH + "); its declared reproducer code/mm/racecheck_repro.py no longer "
            "fails the same way (finished (clean)), so racecheck applies to matmul_kernel again") in st.sentence
    assert "the memory check is incomplete" in st.headline


@pytest.mark.parametrize("lesson_state, repro_state, repro_reason", [
    ("incomplete", "timeout", ""),  # another way of failing
    ("timeout", "incomplete", ""),
    ("incomplete", "incomplete", "the tool says it did not see everything: didn't track the launch"),
])
def test_a_reproducer_that_fails_another_way_leaves_the_check_incomplete(declaring, lesson_state, repro_state,
                                                                        repro_reason):
    st = judged(declaring, memory(declaring, run("racecheck", lesson_state),
                                  reproducers=[reproducer(declaring, repro_state, repro_reason)]))
    assert st.status is PARTIAL and "no longer fails the same way" in st.sentence


def test_a_failure_with_no_reproducer_stays_incomplete(lesson):
    st = judged(lesson, memory(lesson, run("racecheck", "incomplete")))
    assert st.status is PARTIAL and st.memory.not_applicable == []
    assert "racecheck is incomplete" in st.sentence


def test_what_the_tools_saw_still_counts(declaring):
    # another tool's error fails the lesson
    st = judged(declaring, memory(declaring, run("memcheck", "findings", [error()]), run("racecheck", "incomplete"),
                                  reproducers=[reproducer(declaring)]))
    assert st.status is FAILED
    # and what the tool judged not applicable reported before it stopped is judged
    st = judged(declaring, memory(declaring, run("racecheck", "incomplete", [race()]),
                                  reproducers=[reproducer(declaring)]))
    assert st.status is PARTIAL and "neither fixed nor declared" in st.sentence
    assert st.memory.not_applicable  # the tool is still not applicable; its finding is not forgotten


def test_the_kernels_named_must_be_the_lessons_own_exactly(project):
    project.add("mm", LESSON, toml=NOT_APPLICABLE.replace('["matmul_kernel"]', '["matmul"]'),
                files={"racecheck_repro.py": REPRO})
    lesson = project.lesson("mm")
    st = judged(lesson, memory(lesson, run("racecheck", "incomplete"),
                               reproducers=[reproducer(lesson, kernels=["matmul"])]))
    assert st.status is PARTIAL
    assert "the lesson declares racecheck not applicable to matmul, which is not one of its kernels" in st.sentence


def test_a_record_whose_reproducers_the_source_does_not_declare_is_unusable(project, declaring):
    project.add("plain", LESSON, order=2)
    plain = project.lesson("plain")
    forged = memory(plain, run("racecheck", "incomplete"), reproducers=[reproducer(plain)])
    st = judged(plain, forged)
    assert st.sanitize_records == [] and "sanitizer.reproducers: 1 recorded, but this source's lesson.toml " \
                                         "declares 0" in st.sentence
    missing = memory(declaring, run("racecheck", "incomplete"))
    assert judged(declaring, missing).sanitize_records == []
    edited = reproducer(declaring)
    edited = dataclasses.replace(edited, why="something else")
    assert judged(declaring, memory(declaring, run("racecheck", "incomplete"), reproducers=[edited])).status \
        is PARTIAL


def test_the_reproducer_is_source_its_kernel_no_lesson_kernel(declaring):
    from verified_triton.judge.memory import lesson_kernels

    assert "code/mm/racecheck_repro.py" in declaring.source_file_hashes()
    assert lesson_kernels(declaring) == {"matmul_kernel"}


@pytest.mark.parametrize("toml, message", [
    (NOT_APPLICABLE.replace("racecheck_repro.py", "../racecheck_repro.py"), "is not a .py file in mm/"),
    (NOT_APPLICABLE.replace("racecheck_repro.py", "missing.py"), "is not a .py file in mm/"),
    (NOT_APPLICABLE.replace('["matmul_kernel"]', "[]"), "names the lesson's kernels"),
    (NOT_APPLICABLE.replace('tool = "racecheck"', 'tool = "racechek"'), "racechek"),
    ("[sanitize.timeouts]\nracechek = 5\n", "is not one of memcheck, synccheck, initcheck, racecheck"),
    ("[sanitize.timeouts]\nracecheck = 9999\n", "between 0 and 3600"),
])
def test_a_declaration_lesson_toml_cannot_hold_is_an_error_naming_the_file(project, toml, message):
    from verified_triton.core.lessons import LessonError

    project.add("mm", LESSON, toml=textwrap.dedent(toml), files={"racecheck_repro.py": REPRO})
    with pytest.raises(LessonError, match=re.escape(message)) as err:
        project.lesson("mm")
    assert "lesson.toml" in str(err.value)


# -- 47.6: every repeat is bounded -------------------------------------------------------------------------

def test_one_explanation_is_said_once_however_many_findings_it_covers(project, lesson):
    """A harmless explanation as long as the schema allows, covering as many findings as a record keeps, in
    characters escaping lengthens: what the record adds to its page stays within the page's own bound. Before,
    the explanation stood under every finding it covered: 100 times."""
    from verified_triton.core.limits import LIMITS
    from verified_triton.judge.evidence import record_path, write_record
    from verified_triton.site.directives import REGISTRY, Page, Site

    why = "{|}~" * (LIMITS.string // 4)
    known = [kit.KnownFinding(tool, "matmul_kernel", ["mm.py:1-999"], [kit.SourceSpan(MAIN, 1, 999)], why)
             for tool in ("initcheck", "racecheck")]
    many = LIMITS.sanitizer_findings
    races = [SanitizerFinding("race", "Error: race between accesses",
                              [SanitizerLocation("matmul_kernel", MAIN, i, "Write"),
                               SanitizerLocation("matmul_kernel", MAIN, i + 1, "Read")], 1, 1, "Error")
             for i in range(1, many + 1)]
    reads = [SanitizerFinding("uninitialized", "Uninitialized __global__ memory read of size 4 bytes",
                              [SanitizerLocation("matmul_kernel", MAIN, i)]) for i in range(1, many + 1)]
    record = memory(lesson, run("racecheck", "findings", races), run("initcheck", "findings", reads))
    record.sanitizer.known = known
    for mode in ("interpreter", "gpu"):
        write_record(project.evidence, fake_record(lesson, mode))
    write_record(project.evidence, record)
    size = record_path(project.evidence, "mm", record.key).stat().st_size
    site = Site.load(project.code, project.evidence)
    page = Page(site, "lessons/mm.md", site.status("mm"))
    assert page.lesson.status is VERIFIED, page.lesson.sentence
    shown = str(REGISTRY["status"].render(page)) + str(REGISTRY["memory-check"].render(page))
    escaped = "&#123;&#124;&#125;&#126;" * (LIMITS.string // 4)
    assert shown.count(escaped) == 2 * 2  # each explanation once, in each of the two folds
    assert len(shown.encode()) <= LIMITS.amplification * size + LIMITS.amplification_allowance, (len(shown), size)


def test_declarations_that_match_nothing_are_bounded_after_repetition(project, lesson):
    """As many declarations as the schema allows, none matching, each naming its places in the longest words it
    may: the sentence, the problems and the fold name three and count the rest."""
    from verified_triton.core.limits import LIMITS
    from verified_triton.judge.evidence import record_path, write_record
    from verified_triton.site.directives import REGISTRY, Page, Site

    long = "{|}~" * (LIMITS.string // 4)
    known = [kit.KnownFinding("racecheck", "matmul_kernel", [long] * 20, [kit.SourceSpan(MAIN, 1, 2)], "why")
             for _ in range(100)]
    record = memory(lesson)
    record.sanitizer.known = known
    for mode in ("interpreter", "gpu"):
        write_record(project.evidence, fake_record(lesson, mode))
    write_record(project.evidence, record)
    size = record_path(project.evidence, "mm", record.key).stat().st_size
    site = Site.load(project.code, project.evidence)
    page = Page(site, "lessons/mm.md", site.status("mm"))
    assert page.lesson.status is PARTIAL and "97 more declarations match nothing" in page.lesson.sentence
    shown = str(REGISTRY["status"].render(page)) + str(REGISTRY["memory-check"].render(page))
    assert len(shown.encode()) <= LIMITS.amplification * size + LIMITS.amplification_allowance, (len(shown), size)
    assert len(page.lesson.sentence) < 10_000
