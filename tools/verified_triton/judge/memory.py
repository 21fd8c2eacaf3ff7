"""The memory check's judgement: a sanitize record (the lesson under compute-sanitizer) against the lesson.

One job: memcheck and synccheck must find nothing in the lesson's own kernels (errors make the lesson
FAILED, naming the kernel and the line); every initcheck and racecheck finding in them must be declared
harmless by the lesson (`lesson.sanitizer_known`), and every declaration must match a finding; anything
else keeps it from VERIFIED. Once the course has a sanitize record (any lesson), each lesson needs a
current one for VERIFIED. status.py combines this state with the runs' into the badge.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

from verified_triton.core import kit
from verified_triton.core.lessons import Lesson, per_file_version
from verified_triton.core.limits import LIMITS
from verified_triton.core.numfmt import number
from verified_triton.core.safefs import UnsafePathError, read_text
from verified_triton.judge.evidence import UNFINISHED, Record, SanitizerFinding, SanitizerToolRun, failure_kind

SANITIZE_COMMAND = "python3 tools/verify.py --lesson {name} --mode sanitize --bundle {name}-sanitize.tar.gz"
ERROR_TOOLS = ("memcheck", "synccheck")  # any error in the lesson's kernels fails it
TOOL_WORDS = {"timeout": "timed out", "unavailable": "could not run here", "inconclusive": "no summary",
              "not-run": "not run"}  # in the compact line
PROBLEM_WORDS = {"timeout": "timed out", "unavailable": "could not run here", "inconclusive": "left no summary",
                 "not-run": "was not run"}  # in the sentence


@dataclass
class JudgedFinding:
    tool: str
    finding: SanitizerFinding
    known: kit.KnownFinding | None = None  # the lesson's declaration that covers it


@dataclass
class ToolVerdict:
    tool: str
    run: SanitizerToolRun | None
    words: str  # for the compact line: "0 errors", "clean", "2 races (25 hazards), each explained"
    lessons: list[JudgedFinding] = field(default_factory=list)  # findings in the lesson's kernels
    library: int = 0  # report records outside the lesson's kernels (libraries, torch, CUDA API errors): information
    failed: bool = False  # memcheck or synccheck errors in the lesson's kernels
    problems: list[str] = field(default_factory=list)  # what keeps it from passing, one clause each
    not_applicable: str = ""  # the sentence saying the tool is not applicable to some kernels, by its reproducer


@dataclass
class MemoryCheck:
    """One sanitize record, judged: each tool, what the lesson declared, and the verdict."""

    record: Record
    state: str  # passed | failed | partial | by-design
    tools: list[ToolVerdict]
    refused: list[str]  # declarations that match nothing in the report
    line: str  # "memcheck, synccheck: 0 errors; initcheck: clean; racecheck: 2 races (25 hazards), each explained"
    problems: list[str]  # why it is failed or partial
    not_applicable: list[str] = field(default_factory=list)  # one sentence per tool judged not applicable


def lesson_kernels(lesson: Lesson) -> frozenset[str]:
    """The names of the @triton.jit / @gluon.jit functions defined in the lesson's source files (a report
    names a Triton kernel by its function's name)."""
    return frozenset(name for name, _gluon in _lesson_jit(lesson))


def lesson_uses_gluon(lesson: Lesson) -> bool:
    """Whether the lesson defines @gluon.jit kernels (which Triton's interpreter cannot run)."""
    return any(gluon for _name, gluon in _lesson_jit(lesson))


def _lesson_jit(lesson: Lesson) -> frozenset[tuple[str, bool]]:
    """The jit functions of the lesson's own modules (a reproducer's kernels are no lesson kernel)."""
    reproducers = {n.reproducer for n in lesson.sanitize.not_applicable}
    code_dir = lesson.folder.parent
    return frozenset().union(*(per_file_version("jit", path, lambda path=path: _jit_functions(path, code_dir))
                               for path in lesson.source_files() if path.suffix == ".py" and path not in reproducers))


def _jit_functions(path: Path, code_dir: Path) -> frozenset[tuple[str, bool]]:
    """(name, whether a Gluon decorator made it) of every jit function the file defines: parsed once per version
    of the file (the shared kit once, not once per lesson)."""
    try:
        source = read_text(path, LIMITS.source_file, code_dir)
    except (UnsafePathError, ValueError, OSError):
        return frozenset()
    if not JIT_WORDS.search(source):  # no decorator _is_jit accepts can be written without one of its names
        return frozenset()
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return frozenset()
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            jit = [d for d in node.decorator_list if _is_jit(d)]
            if jit:
                found.add((node.name, any("gluon" in ast.unparse(d) for d in jit)))
    return frozenset(found)


JIT_WORDS = re.compile(r"jit|autotune|heuristics")


def _is_jit(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
    return name in ("jit", "autotune", "heuristics")


def finding_is_lessons(finding: SanitizerFinding, source_files: dict[str, str], kernels: frozenset[str]) -> bool:
    """In the lesson's own code: a place in one of its source files, or a kernel it defines. A CUDA API
    error is no kernel's (the lesson's run failing under the tool says the rest)."""
    if finding.kind == "api":
        return False
    return any(loc.file in source_files or (loc.kernel and loc.kernel in kernels) for loc in finding.locations)


def _covers(known: kit.KnownFinding, tool: str, finding: SanitizerFinding) -> bool:
    """Whether a declaration covers a finding: its tool, its kernel, and every place of the finding (a race's
    both accesses) inside the declared lines."""
    places = [loc for loc in finding.locations if loc.access != "frame"]
    if known.tool != tool or known.kernel not in {loc.kernel for loc in finding.locations} or not places:
        return False
    return all(any(loc.file == span.file and span.first <= loc.line <= span.last for span in known.lines)
               for loc in places)


def _place(finding: SanitizerFinding) -> str:
    places = [loc for loc in finding.locations if loc.access != "frame" and loc.file]
    return ", ".join(f"{loc.file}:{loc.line}" if loc.line else loc.file for loc in places[:3]) or "no line"


def judge_memory(lesson: Lesson, record: Record) -> MemoryCheck:
    """A sanitize record of the current source, judged (see the module's docstring)."""
    san = record.sanitizer
    kernels = lesson_kernels(lesson)
    runs = {run.tool: run for run in san.runs}
    used: set[int] = set()
    tools = [_judge_tool(tool, runs.get(tool), record, kernels, san.known, used) for tool in kit.SANITIZER_TOOLS]
    refused = []
    for i, known in enumerate(san.known):
        run = runs.get(known.tool)
        if i not in used and run is not None and run.state in ("clean", "findings"):
            where = ", ".join(w[:80] for w in known.where[:3]) + (" ..." if len(known.where) > 3 else "")
            refused.append(f"the lesson declares a {known.tool} finding in {known.kernel} at {where} that the "
                           "report does not hold (remove it or fix its lines)")
    # Each said once and at most three in words: a sentence repeated on the page is bounded after repetition
    problems = [p for t in tools for p in t.problems] + refused[:3] + (
        [f"{number(len(refused) - 3)} more declarations match nothing in the report"] if len(refused) > 3 else [])
    outcome = record.outcome
    if outcome == "by-design":
        state, problems = "by-design", []
        line = f"declined by design ({record.reason})"
    else:
        if outcome != "passed":
            problems.append(f"under memcheck the lesson's run {_app_words(outcome, record.reason)}, so what it did "
                            "not reach was not checked")
        state = "failed" if any(t.failed for t in tools) else "partial" if problems else "passed"
        line = _line(tools)
    return MemoryCheck(record, state, tools, refused, line, problems,
                       [t.not_applicable for t in tools if t.not_applicable])


def _app_words(outcome: str, reason: str) -> str:
    return {"timeout": "timed out", "crashed": f"crashed ({reason})"}.get(outcome, f"{outcome} ({reason})")


def _judge_tool(tool: str, run: SanitizerToolRun | None, record: Record, kernels: frozenset[str],
                known: list[kit.KnownFinding], used: set[int]) -> ToolVerdict:
    """One tool's verdict. Its findings first, whatever became of the tool afterwards: an error in a lesson's
    kernel fails it whether the tool then finished, timed out or crashed; then how the tool ended."""
    if run is None:
        return ToolVerdict(tool, None, "not run", problems=[f"{tool} was not run"])
    if run.state in ("not-run", "unavailable"):
        return ToolVerdict(tool, run, TOOL_WORDS[run.state],
                           problems=[f"{tool} {PROBLEM_WORDS[run.state]} ({run.reason})"])
    verdict = ToolVerdict(tool, run, "")
    mine = []
    for f in run.findings:
        if finding_is_lessons(f, record.source_files, kernels):
            mine.append(f)
        else:
            verdict.library += f.records
    if tool in ERROR_TOOLS:
        _judge_errors(verdict, mine)
    else:
        _judge_declared(verdict, mine, known, used)
    unseen = run.not_printed or (run.findings_omitted if all(finding_is_lessons(f, record.source_files, kernels)
                                                             for f in run.findings) else 0)
    if unseen and not verdict.failed:
        verdict.problems.append(f"{tool}: {number(unseen)} record(s) past the limits were not kept, and may be in "
                                "the lesson's kernels")
        verdict.words += f", {number(unseen)} not shown"
    if run.state == "findings" and not run.findings and not unseen:
        verdict.problems.append(f"{tool} counts {number(run.errors)} error(s), none of them in the log kept")
        verdict.words += f", {number(run.errors)} counted, none shown"
    if run.state in UNFINISHED:
        _judge_unfinished(verdict, record, kernels)
    if verdict.library:
        verdict.words += f" (+{number(verdict.library)} outside the lesson's kernels)"
    return verdict


def _judge_errors(verdict: ToolVerdict, mine: list[SanitizerFinding]) -> None:
    """memcheck, synccheck: any report in the lesson's kernels fails it."""
    tool = verdict.tool
    verdict.lessons = [JudgedFinding(tool, f) for f in mine]
    errors = sum(f.records for f in mine)
    if mine:
        verdict.failed = True
        named = "; ".join(f"{number(f.records)} in {f.kernel or 'a kernel'} at {_place(f)} ({f.message})"
                          for f in mine[:3])
        verdict.problems.append(f"{tool} found {number(errors)} error(s) in the lesson's kernels: {named}")
        verdict.words = f"{number(errors)} error{'s' * (errors != 1)} in {_kernel_names(mine)}"
    elif verdict.run.state in ("clean", "findings", "incomplete"):
        verdict.words = "0 errors"


def _judge_declared(verdict: ToolVerdict, mine: list[SanitizerFinding], known: list[kit.KnownFinding],
                    used: set[int]) -> None:
    """initcheck, racecheck: every finding in the lesson's kernels fixed or declared harmless."""
    tool = verdict.tool
    for f in mine:
        matches = [i for i, k in enumerate(known) if _covers(k, tool, f)]
        used.update(matches)  # every declaration that covers a finding matches something
        verdict.lessons.append(JudgedFinding(tool, f, known[matches[0]] if matches else None))
    open_ = [j.finding for j in verdict.lessons if j.known is None]
    for f in open_[:3]:
        verdict.problems.append(f"{tool} reports {f.message} in {f.kernel or 'a kernel'} at {_place(f)}, "
                                "neither fixed nor declared")
    if len(open_) > 3:
        verdict.problems.append(f"{tool}: {number(len(open_) - 3)} more findings neither fixed nor declared")
    if verdict.lessons or verdict.run.state in ("clean", "findings", "incomplete"):
        verdict.words = _declared_words(tool, verdict.lessons, len(open_))


def _judge_unfinished(verdict: ToolVerdict, record: Record, kernels: frozenset[str]) -> None:
    """A tool that timed out, left no summary or says it missed something: the check is incomplete, unless the
    lesson declares the tool not applicable to some of its kernels with a reproducer the recording ran, and that
    reproducer fails the same way. Then the tool is not applicable to those kernels (one sentence on the
    record); what it saw still counts. A reproducer that no longer fails the same way makes it applicable
    again."""
    run, tool = verdict.run, verdict.tool
    state_words = {"timeout": "timed out", "inconclusive": "left no summary", "incomplete": "is incomplete"}
    short = {"timeout": "timed out", "inconclusive": "no summary", "incomplete": "(incomplete)"}[run.state]
    repro = next((r for r in record.sanitizer.reproducers if r.tool == tool), None)
    why_not = ""
    if repro is not None:
        strangers = [k for k in repro.kernels if k not in kernels]
        if strangers:
            why_not = (f"; the lesson declares {tool} not applicable to {', '.join(strangers[:3])}, which is not one "
                       "of its kernels")
        elif failure_kind(repro.run) != failure_kind(run):
            ended = failure_kind(repro.run) or f"finished ({repro.run.state})"
            why_not = (f"; its declared reproducer {repro.file} no longer fails the same way ({ended}), so "
                       f"{tool} applies to {', '.join(repro.kernels[:3])} again")
        else:
            names = ", ".join(repro.kernels[:3]) + (f" and {number(len(repro.kernels) - 3)} more"
                                                     if len(repro.kernels) > 3 else "")
            verdict.not_applicable = (f"{tool} is not applicable to {names}: its reproducer {repro.file} fails the "
                                      f"same way ({repro.why})")
            verdict.words = f"not applicable to {names}" + (f", {verdict.words}" if verdict.lessons else "")
            return
    verdict.problems.append(f"{tool} {state_words[run.state]} ({run.reason}){why_not}")
    verdict.words = f"{verdict.words} {short}" if verdict.words and run.state == "incomplete" else (
        f"{verdict.words}, then {short}" if verdict.words else short)


def _kernel_names(findings: list[SanitizerFinding]) -> str:
    names = list(dict.fromkeys(f.kernel or "a kernel" for f in findings))
    return ", ".join(names[:3]) + (f" and {number(len(names) - 3)} more" if len(names) > 3 else "")


def _declared_words(tool: str, judged: list[JudgedFinding], open_count: int) -> str:
    if not judged:
        return "clean"
    if tool == "racecheck":
        hazards = sum(j.finding.hazards for j in judged)
        what = f"{number(len(judged))} race{'s' * (len(judged) != 1)}" + (
            f" ({number(hazards)} hazards)" if hazards else "")
    else:
        what = f"{number(len(judged))} finding{'s' * (len(judged) != 1)}"
    if open_count:
        return f"{what}, {number(open_count)} unexplained"
    return f"{what}, each explained" if len(judged) > 1 else f"{what}, explained"


def _line(tools: list[ToolVerdict]) -> str:
    """Tools with the same words share them: 'memcheck, synccheck: 0 errors; initcheck: clean'."""
    groups: list[tuple[list[str], str]] = []
    for t in tools:
        if groups and groups[-1][1] == t.words:
            groups[-1][0].append(t.tool)
        else:
            groups.append(([t.tool], t.words))
    return "; ".join(f"{', '.join(names)}: {words}" for names, words in groups)


@dataclass
class MemoryState:
    """What the memory check gives the badge: its state, the record it rests on, words for the sentence, and
    that record's judgement when it is current."""

    state: str  # passed | failed | partial | by-design | not-supported | stale | none | not-required
    record: Record | None
    phrase: str
    check: MemoryCheck | None = None


def memory_state(lesson: Lesson, records: list[Record], source_hash: str, required: bool) -> MemoryState:
    """The memory check's state for the badge: its records judged, the worst current one first."""
    if not lesson.sanitize.supported:
        return MemoryState("not-supported", None,
                           f"compute-sanitizer does not check this lesson ({lesson.sanitize.reason})")
    current = sorted((r for r in records if r.source_hash == source_hash), key=lambda r: r.started_utc,
                     reverse=True)
    checks = [judge_memory(lesson, r) for r in current]
    for wanted in ("failed", "partial", "passed", "by-design"):
        for check in checks:
            if check.state == wanted:
                return MemoryState(wanted, check.record, _memory_phrase(check), check)
    command = SANITIZE_COMMAND.format(name=lesson.name)
    if records:
        newest = max(records, key=lambda r: r.started_utc)
        return MemoryState("stale", newest, f"the memory check (compute-sanitizer) recorded on {newest.date} was "
                           f"for an older source (record it again: {command})")
    if not required:
        return MemoryState("not-required", None,
                           "memory safety was not checked: the course records no compute-sanitizer runs yet")
    return MemoryState("none", None, "memory safety not checked yet: the memory check (compute-sanitizer) has not "
                       f"been recorded for this source ({command})")


def _memory_phrase(check: MemoryCheck) -> str:
    record = check.record
    who = (f"compute-sanitizer {record.sanitizer.version.split(' ')[0]} on {record.env.device_name or 'a GPU'} "
           f"({'smoke' if record.sanitizer.size == 'smoke' else 'GPU'} sizes, {record.date})")
    if check.state == "by-design":
        return f"the memory check under {who} stopped by design ({record.reason})"
    if check.state == "passed":
        return (f"the memory check under {who} found nothing unexplained in the lesson's kernels: {check.line}"
                + "".join(f"; {sentence}" for sentence in check.not_applicable))
    if check.state == "failed":  # the errors; what was not run for them is in the details
        return f"the memory check under {who} failed: " + "; ".join(p for t in check.tools if t.failed
                                                                    for p in t.problems)
    return f"the memory check under {who} is incomplete: " + "; ".join(check.problems)


def sanitizer_contradictions(lesson: Lesson, record: Record) -> list[str]:
    """A sanitize record against its own counts (findings kept never outnumber what was counted) and, for the
    current source, against what that source says: the inputs lesson.size() picked (lesson.toml's [sanitize]
    size, which the kit reads and the source hash covers) and the tools it declares not applicable, with their
    reproducers. A claim the source settles is checked, never believed."""
    found = []
    for i, run in enumerate(record.sanitizer.runs):
        kept = sum(f.records for f in run.findings if f.kind not in ("api", "leak"))
        counted = run.errors + run.warnings
        if run.state in ("findings", "incomplete") and run.tool != "racecheck" and kept > counted:
            found.append(f"sanitizer.runs[{i}].errors: {number(counted)} counted, but {number(kept)} records kept")
    if record.source_hash != lesson.source_hash():
        return found
    size = lesson.sanitize.size
    if record.sanitizer.size != size:
        found.append(f"sanitizer.size: {record.sanitizer.size!r}, but this source's lesson.toml makes lesson.size() "
                     f"pick the {size!r} inputs under the tool")
    declared = [(n.tool, list(n.kernels), lesson.relative(n.reproducer), n.why) for n in lesson.sanitize.not_applicable]
    recorded = [(r.tool, r.kernels, r.file, r.why) for r in record.sanitizer.reproducers]
    if recorded != declared:
        found.append(f"sanitizer.reproducers: {number(len(recorded))} recorded, but this source's lesson.toml "
                     f"declares {number(len(declared))} ([[sanitize.not_applicable]]), each run once under its tool")
    return found
