"""The small kit every lesson uses to report what it found.

A lesson calls `check`, `close`, `skip`, `predict`, `benchmark`, `table` and
`plot` as it goes and ends with `sys.exit(lesson.finish())`. Its `main()` reads as named
steps: `with lesson.step("check-sizes"):` around the calls of one step, and
`if lesson.step("benchmark", needs_gpu="timings need a GPU"):` for a step the
interpreter skips (it is still recorded, with the reason, so the page and the
notebook keep their order). The kit records what each step printed and the
step of every check, benchmark, table and figure. Run alone with plain
`python`, the kit only prints. Run by `tools/verify.py`, it also writes every
result to the JSON file named by VT_RESULTS (rewritten after each call, so a
crash keeps what was found before it) and saves figures into VT_FIGURES.

A smoke run (VT_SMOKE=1 with TRITON_INTERPRET=1, or `verify.py --smoke`)
runs the steps that need a GPU too, on the CPU, once, on tiny inputs
(`lesson.size(gpu=..., smoke=...)` picks them), so a typo in benchmark code
fails before any GPU time is spent. `bench_interleaved` and `bench_ms` call
each function once and time nothing; `benchmark`, `table`, `plot` and
`measured` run but record nothing (a check says each benchmark's code ran);
a part that cannot run on a CPU is skipped with its reason
(`not_on_interpreter`), a whole step with `smoke=False` or the reason as
`smoke`. A smoke run is never evidence: verify.py records no smoke run.

A sanitizer run (VT_SANITIZE=<tool> on a GPU, `verify.py --mode sanitize`)
runs every step under compute-sanitizer with the caching allocator off: the
same untimed calls as a smoke run, on the GPU, at the smoke sizes unless
lesson.toml says `[sanitize] size = "gpu"`. A part that needs torch's
caching allocator (its memory statistics) is skipped with its reason
(`not_under_sanitizer`). What initcheck or racecheck reports in a lesson's
kernel and is harmless is declared with `sanitizer_known`, which the
judgement holds against the report.

The first part of this file is the contract between lessons and
`tools/verify.py`: the variable names, the exit codes, the shape of the
results and the rule that says whether a run passed, then the reading of the
formats both sides share (snippet regions, lesson.toml). The tools load this
file by path and use the same definitions, so the two sides cannot drift apart.
Nothing here imports more than the standard library until a lesson asks for a
device, a timing or a plot.
"""

from __future__ import annotations

import collections
import difflib
import json
import math
import os
import platform
import re
import statistics
import sys
import tomllib
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

# == The contract with tools/verify.py ==========================================

RESULTS_ENV = "VT_RESULTS"  # the JSON file the kit keeps its results in
FIGURES_ENV = "VT_FIGURES"  # the folder the kit saves figures into
INTERPRET_ENV = (
    "TRITON_INTERPRET"  # "1": kernels run on the CPU through Triton's interpreter
)
SMOKE_ENV = "VT_SMOKE"  # "1" with INTERPRET_ENV: a smoke run (never evidence)
# A tool's name: a GPU run under compute-sanitizer (untimed; never evidence of speed).
SANITIZE_ENV = "VT_SANITIZE"
SANITIZER_TOOLS = ("memcheck", "synccheck", "initcheck", "racecheck")
# The tools whose findings a lesson may declare harmless; memcheck and synccheck
# must find nothing in a lesson's kernels.
DECLARABLE_TOOLS = ("initcheck", "racecheck")
RESULTS_FORMAT = 2

EXIT_PASSED = 0  # every check passed and no gating target was missed
EXIT_FAILED = 1  # a check failed or a gating target was missed
EXIT_CANNOT_RUN = (
    2  # this machine cannot run the lesson (no GPU and no interpreter, Triton too old)
)
EXIT_BY_DESIGN = 3  # the lesson declined by design (for example a capability gate)
EXIT_MEANINGS = {
    EXIT_PASSED: "passed",
    EXIT_FAILED: "failed",
    EXIT_CANNOT_RUN: "cannot run on this machine",
    EXIT_BY_DESIGN: "declined by design",
}

# A step's name, as a page names it in `::step NAME`: like a snippet region's name.
STEP_NAME = re.compile(r"\A[a-z0-9]+(?:-[a-z0-9]+)*\Z")
STEP_NAME_MAX = 60
STEP_OUTPUT_KEPT = 32 * 1024  # characters of one step's output kept (head and tail)

Verdict = Literal["met", "not met", "within noise"]
CONFIDENCE = 0.95  # the level of every interval the kit reports
RATE_UNITS = {"GB/s": 1e-6, "TFLOP/s": 1e-9}  # work per millisecond -> unit
UNITS = (*RATE_UNITS, "ms")


@dataclass
class Check:
    name: str
    status: Literal["pass", "fail", "skip"]
    message: str = ""
    why: str = ""  # what the check shows, in one line, where its name does not say
    step: str = ""  # the step of main() it was reported in ("" outside every step)


@dataclass
class Benchmark:
    """A kernel against a baseline measured in the same run, in paired rounds.

    `ratio` is the median over rounds of (kernel / baseline) in `unit`, so
    above 1 the kernel is better (for "ms": the baseline's time over the
    kernel's). `ratio_low`..`ratio_high` is a distribution-free confidence
    interval of that median. A target's verdict comes from the interval:
    "met" when its lower bound reaches the target, "not met" when its upper
    bound stays below, "within noise" when it straddles the line.
    """

    name: str  # a stable key: the history of a benchmark follows it
    label: str  # what a reader sees
    unit: str  # one of UNITS
    measured: float  # the kernel: median over rounds, in `unit`
    baseline: float  # the baseline: median over rounds, in `unit`
    baseline_name: str
    ratio: float
    ratio_low: float
    ratio_high: float
    samples: int  # paired rounds
    kernel_ms: list[float] = field(default_factory=list)  # every round
    baseline_ms: list[float] = field(default_factory=list)
    threshold: float | None = None
    gate: bool = True  # a gating threshold fails the run when "not met"
    verdict: Verdict | None = None  # of the threshold
    stretch: float | None = None  # a higher goal that never gates
    stretch_verdict: Verdict | None = None
    note: str = ""
    method: str = ""  # how the rounds were timed
    # What a practitioner would use instead of writing the kernel, when the
    # baseline is that (a library such as "Liger-Kernel", or "torch.compile");
    # the benchmarks page lists these comparisons together.
    library: str = ""
    step: str = ""


@dataclass
class Table:
    name: str
    columns: list[str]
    rows: list[list[str | int | float | None]]
    caption: str = ""
    step: str = ""


@dataclass
class Figure:
    name: str
    file: str  # a PNG file name in the figures folder, light theme
    caption: str = ""
    dark_file: str = ""  # the same figure drawn for a dark page, when there is one
    step: str = ""


@dataclass
class Step:
    """One named step of a lesson's main(), in the order it started, and its output.

    `stdout` is the step's standard output, its middle cut past
    STEP_OUTPUT_KEPT characters (`stdout_omitted` says how many). A step that
    needs a GPU does not run under the interpreter; it is recorded all the
    same, with `not_run` saying why.
    """

    name: str
    stdout: str = ""
    stdout_omitted: int = 0
    not_run: str = ""
    raised: bool = False  # the exception that ended the run was raised in this step


RAISED_MESSAGE_MAX = 300  # characters of an exception's message kept in the results


@dataclass
class Raised:
    """The exception that ended the run: its type, message, and the line of the
    lesson's own files (the innermost frame outside this kit) that raised it."""

    type: str
    message: str = ""  # its first line
    file: str = ""  # relative to the repository, e.g. code/vector-add/vector_add.py
    line: int = 0
    step: str = ""  # the step of main() it ended ("" outside every step)

    def sentence(self) -> str:
        """'ZeroDivisionError at code/x/x.py:42 (division by zero)'."""
        where = f" at {self.file}:{self.line}" if self.file else ""
        return self.type + where + (f" ({self.message})" if self.message else "")


@dataclass
class SkippedPart:
    part: str
    reason: str


Quantity = Literal["ratio", "kernel", "value"]


@dataclass
class Prediction:
    """What a lesson expects before it measures, and the model the number comes from.

    `of` names the benchmark it predicts: its ratio (quantity "ratio") or the
    kernel's own median in the benchmark's unit ("kernel"). A quantity that
    is no benchmark ("value") is reported with `lesson.measured`, which
    fills `measured`. The prediction holds when the measurement lies within
    `tolerance` of `value`, relatively; the page shows both and the gap, and
    a miss needs the author's explanation there (see `prediction_outcome`).
    """

    name: str  # a stable key: the page shows it with ::prediction NAME
    value: float
    basis: str  # the model, in one line: bytes moved, FLOPs, a measured ceiling
    tolerance: float  # relative: 0.15 holds the prediction within value * (1 +- 0.15)
    of: str = ""  # the benchmark it predicts ("" for quantity "value")
    quantity: Quantity = "ratio"
    unit: str = ""  # for "value": the unit of the quantity
    measured: float | None = None  # for "value": what the lesson measured


@dataclass
class FilteredWarning:
    """A Python warning the lesson expects, kept out of stderr and counted instead."""

    text: str  # a part of the warning's message that identifies it
    why: str  # why it is expected and harmless, in one line
    count: int = 0  # how many times it was raised in this run
    example: str = ""  # the first one, as the category and message


@dataclass
class SourceSpan:
    """Lines `first`..`last` of `file` (from the repository: code/<lesson>/x.py)."""

    file: str
    first: int
    last: int


@dataclass
class KnownFinding:
    """A finding of initcheck or racecheck in a lesson's kernel, declared harmless.

    `where` is what the lesson wrote ("kernels.py:275", "kernels.py:270-280",
    "kernels.py:epilogue" for a snippet region or a function); `lines` what the
    kit resolved it to. The judgement holds it against the report: every
    location of a finding in `kernel` must lie in one of `lines`, and a
    declaration that matches no finding is refused.
    """

    tool: Literal["initcheck", "racecheck"]
    kernel: str
    where: list[str]
    lines: list[SourceSpan]
    # Why it is harmless: the synchronization that orders the two accesses, or the
    # padding a TMA load reads and a mask discards.
    why: str


@dataclass
class Device:
    name: str = ""  # "CPU" under the interpreter
    capability: str = ""
    multiprocessors: int = 0
    memory_gib: float = 0.0
    cuda: str = ""
    torch: str = ""
    triton: str = ""
    python: str = ""
    # Optional baseline libraries the run imported (lesson.toml's
    # [requires.optional]): pip name -> installed version.
    baselines: dict[str, str] = field(default_factory=dict)


@dataclass
class Results:
    lesson: str
    mode: Literal["interpreter", "gpu"]
    checks: list[Check] = field(default_factory=list)
    benchmarks: list[Benchmark] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    skipped_parts: list[SkippedPart] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    declined: str = ""  # why the lesson stopped by design, when it did
    device: Device = field(default_factory=Device)
    format: int = RESULTS_FORMAT
    predictions: list[Prediction] = field(default_factory=list)
    filtered_warnings: list[FilteredWarning] = field(default_factory=list)
    smoke: bool = False  # a smoke run (SMOKE_ENV): GPU steps ran untimed, no evidence
    raised: Raised | None = None  # the exception that ended the run, if one did
    sanitize: str = ""  # the compute-sanitizer tool it ran under (SANITIZE_ENV), or ""
    sanitizer_known: list[KnownFinding] = field(default_factory=list)


def failures(checks: list[Check], benchmarks: list[Benchmark]) -> list[str]:
    """The pass rule: no check failed and no gating target was "not met".

    A gate judges the upper bound of the ratio's interval: only a result that
    is below the threshold beyond noise fails the run. "Within noise" passes
    the gate, and the page says so.
    """
    return [f"check {c.name}" for c in checks if c.status == "fail"] + [
        f"target {b.name}" for b in benchmarks if b.gate and b.verdict == "not met"
    ]


def not_run_here(steps: list[Step], skipped_parts: list[SkippedPart]) -> str:
    """'2 steps not run here (compiled-code, timing); 1 part not run here (...)',
    or '': the kit's last line and verify's summary say it in the same words."""
    names = [s.name for s in steps if s.not_run]
    steps_said = {f"step {n}" for n in names}
    parts = [p.part for p in skipped_parts if p.part not in steps_said]
    said = [
        f"{len(items)} {noun}{'s' * (len(items) != 1)} not run here "
        f"({', '.join(items)})"
        for noun, items in (("step", names), ("part", parts))
        if items
    ]
    return "; ".join(said)


@dataclass
class PredictionOutcome:
    measured: float  # in the unit of the prediction
    gap: float  # measured / predicted - 1
    held: bool  # |gap| <= tolerance
    low: float | None = None  # the measurement's 95 % interval, for a ratio
    high: float | None = None


def prediction_outcome(
    p: Prediction, benchmarks: list[Benchmark]
) -> PredictionOutcome | None:
    """How a prediction fared against one run's benchmarks; None when not measured.

    Only a GPU run measures: under the interpreter nothing is timed, so a
    prediction there stays unmeasured.
    """
    low = high = None
    if p.quantity == "value":
        measured = p.measured
    else:
        bench = next((b for b in benchmarks if b.name == p.of), None)
        if bench is None:
            return None
        if p.quantity == "ratio":
            measured, low, high = bench.ratio, bench.ratio_low, bench.ratio_high
        else:
            measured = bench.measured
    if measured is None or not p.value:
        return None
    gap = measured / p.value - 1
    return PredictionOutcome(measured, gap, abs(gap) <= p.tolerance, low, high)
OPTIONAL_SKIP = "optional-"  # + pip name: the skipped check of an optional baseline


def install_command(package: str, version: str = "") -> str:
    """The pip line that installs an optional baseline, pinned when declared."""
    return f"pip install {package}" + (f"=={version}" if version else "")


def verdict(low: float, high: float, target: float) -> Verdict:
    if low >= target:
        return "met"
    if high < target:
        return "not met"
    return "within noise"


def median_interval(
    values: list[float], level: float = CONFIDENCE
) -> tuple[float, float, float]:
    """(median, low, high): a distribution-free confidence interval for the median.

    The interval runs between two order statistics chosen so that the
    chance of the true median lying outside is at most 1 - level under the
    binomial(n, 1/2) law (no assumption about the shape of the noise). With
    fewer than 6 samples no such pair exists; the range of the samples is
    returned, which covers less than `level`.
    """
    xs = sorted(values)
    n = len(xs)
    if n == 0:
        raise ValueError("no samples")

    def tail(
        k: int,
    ) -> float:  # P(Binomial(n, 1/2) <= k): both ends drop k samples past the interval
        return sum(math.comb(n, i) for i in range(k + 1)) / 2**n

    k = 0  # [xs[k], xs[n-1-k]] covers the median with probability 1 - 2 * tail(k)
    while k + 1 < n // 2 and 2 * tail(k + 1) <= 1 - level:
        k += 1
    return statistics.median(xs), xs[k], xs[n - 1 - k]


# == Formats lessons and tools share =============================================
# The snippet regions a page shows (and sanitizer_known names) and lesson.toml are
# read here, once: tools/verified_triton reads them through these functions too.


class FormatError(ValueError):
    """A malformed region marker or lesson.toml, at `where`:`line`."""

    def __init__(self, where: str, line: int, message: str):
        self.where, self.line, self.message = str(where), line, message
        at = f"{self.where}:{line}" if line else self.where
        super().__init__(f"{at}: {message}")


def source_lines(text: str) -> list[str]:
    """A source's lines as Python counts them: each ends at LF, CR LF or CR.

    Not str.splitlines(), which also breaks at form feeds and U+2028 and would
    shift every later line number."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if lines[-1] == "":
        lines.pop()  # the empty piece after the final newline is not a line
    return lines


# A region: a line `# snippet: NAME` opens it, a line `# end snippet` closes it
# (spaces around the words as you like); what looks like an attempt at a marker is
# an error, so a typo never leaves a region that silently never starts.
SNIPPET_START = re.compile(r"^\s*#\s*snippet:\s*(?P<name>\S*)\s*$")
SNIPPET_END = re.compile(r"^\s*#\s*end snippet\s*$")
SNIPPET_LIKE = re.compile(r"^\s*#\s*(end[\s_-]*snippet|snippet\s*:)", re.IGNORECASE)
SNIPPET_NAME = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


def snippet_regions(text: str, where: str = "<string>") -> dict[str, tuple[int, int]]:
    """Every region of a source, in order: NAME -> (first, last), the 1-based
    lines of its text without blank lines at either end ((first, first - 1)
    when it has none). FormatError at the line of a malformed, nested,
    duplicate, unopened or unclosed marker."""
    lines = source_lines(text)
    regions: dict[str, tuple[int, int]] = {}
    opened: dict[str, int] = {}  # the line of each region's start marker
    current = ""
    for number, line in enumerate(lines, start=1):
        start = SNIPPET_START.match(line)
        if start:
            current = _open_region(start.group("name"), current, opened, where, number)
        elif SNIPPET_END.match(line):
            if not current:
                raise FormatError(
                    where,
                    number,
                    "'# end snippet' without a matching '# snippet: NAME'",
                )
            regions[current] = _text_span(lines, opened[current] + 1, number - 1)
            current = ""
        elif SNIPPET_LIKE.match(line):
            raise FormatError(
                where,
                number,
                f"malformed snippet marker {line.strip()!r}: expected "
                "'# snippet: NAME' or '# end snippet'",
            )
    if current:
        raise FormatError(
            where,
            opened[current],
            f"region '{current}' is never closed with '# end snippet'",
        )
    return regions


def _open_region(
    name: str, current: str, opened: dict[str, int], where: str, number: int
) -> str:
    if current:
        raise FormatError(
            where,
            number,
            f"region '{name}' starts inside region '{current}' (opened at line "
            f"{opened[current]}); regions do not nest",
        )
    if not SNIPPET_NAME.match(name):
        raise FormatError(
            where,
            number,
            f"invalid region name {name!r}: use lower-case letters, digits and '-'",
        )
    if name in opened:
        raise FormatError(
            where,
            number,
            f"duplicate region '{name}' (first defined at line {opened[name]})",
        )
    opened[name] = number
    return name


def _text_span(lines: list[str], first: int, last: int) -> tuple[int, int]:
    """Lines first..last (1-based) without the blank lines at either end: a page
    shows neither, so no caption's range or line number counts them."""
    while first <= last and not lines[first - 1].strip():
        first += 1
    while last >= first and not lines[last - 1].strip():
        last -= 1
    return first, last


# lesson.toml: each key and what it holds (a table: its keys; a tuple: the values
# allowed; {str: str}: a table of any keys, each holding text; [str]: a list of
# text; [{...}]: an array of tables, `[[...]]`). The kit reads its
# [requires] and [sanitize] through read_lesson_toml, and the tools the whole file;
# what needs more than one key (main names a file, `order` or `after`) the tools say.
_MODE_TOML = {
    "supported": bool, "reason": str, "timeout": float, "expected_exits": {str: str}
}
LESSON_TOML = {
    "title": str, "main": str, "page": str, "order": float, "after": str,
    "part": str, "summary": str, "prerequisites": [str], "uses": [str],
    "timeout": float,
    "requires": {"capability": str, "triton": str, "why": str,
                 "optional": {str: str}},
    "interpreter": _MODE_TOML, "gpu": _MODE_TOML,
    "sanitize": {
        "supported": bool, "reason": str, "size": ("smoke", "gpu"), "timeout": float,
        "timeouts": {str: float},
        "not_applicable": [{"tool": SANITIZER_TOOLS, "kernels": [str],
                            "reproducer": str, "why": str}],
    },
}
_KINDS = {str: "text", bool: "true or false", float: "a number", dict: "a table",
          list: "a list", int: "a number"}


def read_lesson_toml(text: str, where: str = "lesson.toml") -> dict:
    """lesson.toml's tables, each key checked against LESSON_TOML: FormatError
    naming the line and the field (an unknown one with the known one it is
    closest to)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        found = re.search(r" \(at line (\d+), column \d+\)$", str(exc))
        message = str(exc)[: found.start()] if found else str(exc)
        raise FormatError(where, int(found.group(1)) if found else 0, message) from None
    except RecursionError:
        raise FormatError(
            where, 0, "nested too deeply to read (lesson.toml holds flat tables)"
        ) from None
    _check_toml(data, LESSON_TOML, (), text, where)
    return data


def _check_toml(data: dict, shape: dict, at: tuple, text: str, where: str) -> None:
    for key, value in data.items():
        path = (*at, key)
        kind = shape.get(key, shape.get(str))  # {str: ...}: a table of any keys
        if kind is None:
            near = difflib.get_close_matches(key, list(shape), 1)
            hint = f" (did you mean '{near[0]}'?)" if near else ""
            table = f" in {_toml_table(at)}" if at else ""
            raise FormatError(
                where,
                toml_line(text, path),
                f"unknown field '{key[:60]}'{table}{hint}",
            )
        problem = _toml_problem(value, kind)
        if problem is None and isinstance(kind, list):  # an array of tables
            for i, item in enumerate(value):
                _check_toml(item, kind[0], (*path, i), text, where)
        elif problem is None:
            _check_toml(value, kind, path, text, where)
        elif problem:
            raise FormatError(
                where, toml_line(text, path), f"{toml_field(path)}: {problem}"
            )


def _toml_problem(value, kind) -> str | None:
    """'' when `value` is a `kind`, None when it is a table to check key by key,
    else what is wrong with it."""
    found = _KINDS.get(type(value), type(value).__name__)
    if isinstance(kind, dict):
        return None if type(value) is dict else f"expected a table, found {found}"
    if isinstance(kind, tuple):
        allowed = ", ".join(repr(k) for k in kind)
        return "" if value in kind else f"{str(value)[:60]!r} is not one of {allowed}"
    if isinstance(kind, list) and isinstance(kind[0], dict):
        if type(value) is list and all(type(v) is dict for v in value):
            return None
        return f"expected tables ([[...]] each), found {found}"
    if isinstance(kind, list):
        if type(value) is list and all(type(v) is str for v in value):
            return ""
        return f"expected a list of text, found {found}"
    if kind is float and type(value) in (int, float):
        return "" if math.isfinite(value) else f"{value!r} is not a finite number"
    return "" if type(value) is kind else f"expected {_KINDS[kind]}, found {found}"


def toml_field(path: tuple) -> str:
    """A key as lesson.toml spells it: 'timeout', '[requires] capability',
    '[[sanitize.not_applicable]] #2 tool'."""
    if len(path) == 1:
        return str(path[0])
    return f"{_toml_table(path[:-1])} {path[-1]}"


def _toml_table(path: tuple) -> str:
    """'[requires]'; the n-th of an array of tables (an int in the path):
    '[[a.b]] #n'."""
    if path and type(path[-1]) is int:
        return f"[[{'.'.join(path[:-1])}]] #{path[-1] + 1}"
    return f"[{'.'.join(str(p) for p in path)}]"


def toml_line(text: str, path: tuple) -> int:
    """The line that sets `path` (('requires', 'capability')): tomllib gives no
    line for a key, so the text is scanned, table headers and dotted keys read;
    else the line of the nearest table that holds it (0 when none)."""
    best, best_depth, table, in_string = 0, 0, (), False
    arrays: dict[tuple, int] = {}  # how many tables of each array so far
    for number, line in enumerate(source_lines(text), start=1):
        opens = (line.count('"""') + line.count("'''")) % 2 == 1
        if in_string:  # a multi-line string's lines set nothing
            in_string = not opens
            continue
        in_string = opens
        header = re.match(r"\s*\[\[?([^\]]+)\]", line)
        key = None if header else re.match(r"\s*([\w.\-\"' ]+?)\s*=", line)
        if header and line.lstrip().startswith("[["):  # the next of an array of tables
            name = _toml_key(header.group(1))
            arrays[name] = arrays.get(name, -1) + 1
            table = keys = (*name, arrays[name])
        elif header:
            table = keys = _toml_key(header.group(1))
        elif key:
            keys = (*table, *_toml_key(key.group(1)))
        else:
            continue
        if keys == path:
            return number
        if best_depth < len(keys) < len(path) and path[: len(keys)] == keys:
            best, best_depth = number, len(keys)
    return best


def _toml_key(text: str) -> tuple:
    """A dotted key's parts: 'gpu.expected_exits' and '"3"' as TOML reads them."""
    return tuple(
        a or b or c for a, b, c in re.findall(r'"([^"]*)"|\'([^\']*)\'|([\w-]+)', text)
    )


# == Lessons ====================================================================


class Lesson:
    def __init__(self, name: str):
        self.name = name
        self.interpret = os.environ.get(INTERPRET_ENV) == "1"
        # A smoke run: the GPU steps run too, on tiny inputs, untimed (see size()).
        self.smoke = self.interpret and os.environ.get(SMOKE_ENV) == "1"
        # Under compute-sanitizer: the tool's name; nothing is timed.
        self.sanitize = os.environ.get(SANITIZE_ENV, "")
        self.untimed = self.smoke or bool(self.sanitize)
        self._results_path = os.environ.get(RESULTS_ENV)
        folder = _main_folder()
        self._folder = folder
        self._figure_dir = Path(os.environ.get(FIGURES_ENV) or folder / "_output")
        try:
            toml = _lesson_toml(folder / "lesson.toml")
        except FormatError as exc:  # said as FILE:LINE, never a traceback
            self._stop(EXIT_FAILED, f"{name}: {exc}")
        self.requires = dict(toml.get("requires", {}))
        self._sanitize_sizes = dict(toml.get("sanitize", {})).get("size", "smoke")
        self._missing: set[str] = set()  # optional baselines that could not be imported
        self.results = Results(
            lesson=name,
            mode="interpreter" if self.interpret else "gpu",
            smoke=self.smoke,
            sanitize=self.sanitize,
        )
        self._step: Step | None = None  # the step running now
        self._kept: _Kept | None = None  # its output so far
        self._stdout = None  # sys.stdout before the step's tee
        self._ended_by: tuple[BaseException, Step] | None = None  # see _StepScope
        if self._results_path:  # recording: an exception that ends the run is kept
            self._excepthook, sys.excepthook = sys.excepthook, self._record_raised
        self._save()

    # -- where the lesson runs -------------------------------------------

    def device(self) -> str:
        """'cpu' under the interpreter, 'cuda' on a GPU.

        Exits 2 with the reason when the installed Triton is older than
        lesson.toml's [requires] triton or there is no GPU and no
        interpreter; exits 3 (by design) on a GPU below [requires] capability.
        """
        import torch
        import triton

        self._record_versions(torch, triton)
        need_triton = self.requires.get("triton")
        if need_triton and _version_tuple(triton.__version__) < _version_tuple(
            need_triton
        ):
            self._stop(
                EXIT_CANNOT_RUN,
                f"{self.name} needs Triton {need_triton} or newer "
                f"({self.requires.get('why', 'see lesson.toml')}); this is Triton "
                f"{triton.__version__}. Upgrade with: pip install -U triton",
            )
        if self.interpret:
            print(
                "TRITON_INTERPRET=1: kernels run on the CPU through Triton's "
                "interpreter; nothing is timed."
            )
            if self.smoke:
                print(
                    f"{SMOKE_ENV}=1: a smoke run: the steps that need a GPU run "
                    "too, once, on tiny inputs; nothing is timed or recorded as "
                    "evidence."
                )
                _lend_smoke_stand_ins(self, torch)
            return "cpu"
        if not torch.cuda.is_available():
            self._stop(
                EXIT_CANNOT_RUN,
                f"{self.name}: no CUDA device found. Run it on a GPU, or set "
                "TRITON_INTERPRET=1 to run the correctness half on the CPU:\n"
                f"    TRITON_INTERPRET=1 python {sys.argv[0]}",
            )
        if self.sanitize:
            print(
                f"{SANITIZE_ENV}={self.sanitize}: a run under compute-sanitizer "
                f"({self.sanitize}), the caching allocator off: every step runs, "
                "nothing is timed or recorded as a measurement."
            )
            _lend_untimed_stand_ins(self, torch, "under compute-sanitizer", "sanitize")
        props = torch.cuda.get_device_properties(0)
        device = self.results.device
        device.name, device.capability = props.name, f"{props.major}.{props.minor}"
        device.multiprocessors, device.memory_gib = (
            props.multi_processor_count,
            round(props.total_memory / 2**30, 1),
        )
        device.cuda = torch.version.cuda or ""
        self._save()
        print(
            f"GPU: {props.name}, compute capability {props.major}.{props.minor}, "
            f"{props.multi_processor_count} SMs, CUDA {torch.version.cuda}"
        )
        need_cc = self.requires.get("capability")
        if need_cc and (props.major, props.minor) < _version_tuple(need_cc):
            self.decline(
                f"needs compute capability {need_cc} or newer "
                f"({self.requires.get('why', 'see lesson.toml')}); "
                f"this GPU is {device.capability}"
            )
        return "cuda"

    def decline(self, reason: str) -> None:
        """Stop here by design: not a failure, and not a verification either."""
        self.results.declined = reason
        self._save()
        self._stop(EXIT_BY_DESIGN, f"declined by design: {reason}")

    def size(self, gpu, smoke):
        """`gpu` on a GPU and under the interpreter; `smoke` in a smoke run.

        How a step that needs a GPU picks its inputs: a size, a shape, a
        list of them, or a dtype stand-in (fp16 for bf16, which the
        interpreter lacks). A smoke run calls every function once on the
        `smoke` inputs, so they can be tiny: it catches errors, it measures
        nothing. A run under compute-sanitizer takes the `smoke` inputs too,
        unless lesson.toml says `[sanitize] size = "gpu"`.
        """
        if self.smoke or (self.sanitize and self._sanitize_sizes != "gpu"):
            return smoke
        return gpu

    def not_on_interpreter(self, part: str, reason: str) -> bool:
        """True when `part` must be skipped here; records it for the page.

        In a smoke run this is also how a part of a GPU step that cannot run
        on a CPU (float8, CUDA graphs, Gluon) is skipped, with its reason.
        """
        if not self.interpret:
            return False
        if SkippedPart(part, reason) in self.results.skipped_parts:
            return True  # said once: a part skipped in a loop is one part
        print(f"skipped under the interpreter: {part} ({reason})")
        self.results.skipped_parts.append(SkippedPart(part, reason))
        self._save()
        return True

    def not_under_sanitizer(self, part: str, reason: str) -> bool:
        """True when `part` must be skipped under compute-sanitizer; records it.

        For what needs torch's caching allocator, which a sanitizer run
        turns off so that an access past a tensor's end is seen: its memory
        statistics (memory_allocated, max_memory_allocated) count nothing.
        """
        if not self.sanitize:
            return False
        skipped = SkippedPart(part, f"under compute-sanitizer: {reason}")
        if skipped not in self.results.skipped_parts:
            print(f"skipped under compute-sanitizer: {part} ({reason})")
            self.results.skipped_parts.append(skipped)
            self._save()
        return True

    def sanitizer_known(
        self, tool: str, kernel: str, where: list[str], why: str
    ) -> KnownFinding:
        """Declare a finding of `tool` (initcheck or racecheck) in `kernel` harmless.

        `where` lists the source lines the report names, each "FILE:LINE",
        "FILE:FIRST-LAST" or "FILE:NAME" (a snippet region or a function of
        FILE, so an edit above it moves nothing); FILE is relative to the
        lesson's folder. `why` says what makes it harmless: the
        synchronization that orders the two accesses, or the padding a TMA
        load reads and a mask discards. The judgement checks the declaration
        against the report: a finding it does not cover keeps the lesson
        from VERIFIED, and so does a declaration that matches nothing.
        """
        if tool not in DECLARABLE_TOOLS:
            raise ValueError(
                f"sanitizer_known: tool {tool!r}: only initcheck and racecheck "
                "findings can be declared; memcheck and synccheck errors are fixed"
            )
        if not kernel.isidentifier() or len(kernel) > 120:
            raise ValueError(f"sanitizer_known: kernel {kernel!r} is not a kernel name")
        if isinstance(where, str) or not where or not all(
            isinstance(w, str) and w for w in where
        ):
            raise ValueError("sanitizer_known: where is a list like ['kernels.py:275']")
        if not why.strip():
            raise ValueError("sanitizer_known: say why the finding is harmless")
        if len(where) > 20:
            raise ValueError("sanitizer_known: at most 20 places per declaration")
        lines = [_resolve_place(self._folder, place) for place in where]
        known = KnownFinding(tool, kernel, list(where), lines, why)
        self.results.sanitizer_known.append(known)
        self._save()
        print(f"  sanitizer: {tool} in {kernel} at {', '.join(where)} declared: {why}")
        return known

    def optional(self, package: str, module: str):
        """Import `module` of an optional baseline library, or return None.

        `package` is its pip name, as lesson.toml's [requires.optional]
        declares it. When the import works, the installed version is
        recorded with the run (results.device.baselines). When it does not,
        the lesson goes on without it: a skipped check says why and how to
        install it, once per package, and the caller skips its comparison.
        """
        import importlib
        import importlib.metadata

        if package in self._missing:
            return None
        try:
            found = importlib.import_module(module)
        except Exception as exc:  # noqa: BLE001 - absent or broken: the lesson runs without it
            self._missing.add(package)
            declared = self.requires.get("optional")
            pin = declared.get(package, "") if isinstance(declared, dict) else ""
            self.skip(
                f"{OPTIONAL_SKIP}{package}",
                f"{package} could not be imported ({type(exc).__name__}: "
                f"{str(exc)[:200]}), so the comparisons with it are skipped; "
                f"install it with: {install_command(package, pin)}",
            )
            return None
        if package not in self.results.device.baselines:
            try:
                version = importlib.metadata.version(package)
            except importlib.metadata.PackageNotFoundError:
                top = sys.modules[module.split(".")[0]]
                version = str(getattr(top, "__version__", ""))
            self.results.device.baselines[package] = version or "unknown"
            self._save()
            print(f"{package} {version or '(version unknown)'}: an optional baseline")
        return found
    # -- steps -------------------------------------------------------------

    def step(
        self, name: str, needs_gpu: str = "", smoke: bool | str = True
    ) -> _StepScope:
        """Start step `name` of main() (ending the one before); true if it runs here.

        `with lesson.step("check-sizes"):` wraps the calls of a step that runs
        everywhere. `if lesson.step("benchmark", needs_gpu="timings need a
        GPU"):` runs its block on a GPU only; under the interpreter the step
        is recorded as not run, with that reason. Either way the step ends at
        the next step or at finish(); `with` also ends it at its block's end.
        A smoke run runs a GPU step too, on tiny inputs, unless `smoke` is
        False (nothing in it runs on a CPU: PTX, memory statistics) or says
        why not ("the interpreter has no float8"); it is then not run there
        either, with that reason.
        """
        if not (STEP_NAME.match(name) and len(name) <= STEP_NAME_MAX):
            raise ValueError(
                f"step {name!r}: use lower-case letters, digits and '-' "
                f"(at most {STEP_NAME_MAX}), as a page names it in '::step NAME'"
            )
        if self._results_path and any(s.name == name for s in self.results.steps):
            raise ValueError(f"step {name!r} started twice")
        self._end_step()
        smoke_step = bool(needs_gpu and self.smoke and smoke is True)
        runs = not (needs_gpu and self.interpret) or smoke_step
        why = smoke if self.smoke and isinstance(smoke, str) and smoke else needs_gpu
        step = Step(name, not_run="" if runs else why)
        self.results.steps.append(step)
        if not runs:  # the page's "not run here" list names it too
            self.results.skipped_parts.append(SkippedPart(f"step {name}", why))
        print(
            f"\n== {name} =="
            + ("" if runs else f" not run here: {why}")
            + (f" smoke run ({needs_gpu}): tiny inputs, untimed" if smoke_step else "")
        )
        if runs:
            self._step, self._kept = step, _Kept(STEP_OUTPUT_KEPT)
            if self._results_path:  # recording: keep a copy of what the step prints
                self._stdout, sys.stdout = sys.stdout, _Tee(sys.stdout, self._kept)
        self._save()
        return _StepScope(self, step, runs)

    def _end_step(self) -> None:
        if self._step is None:
            return
        if self._stdout is not None:
            sys.stdout.flush()
            sys.stdout, self._stdout = self._stdout, None
        self._step.stdout, self._step.stdout_omitted = self._kept.text()
        self._step, self._kept = None, None
        self._save()

    def _in_step(self) -> str:
        return self._step.name if self._step else ""

    # -- checks ------------------------------------------------------------

    def check(self, name: str, ok: bool, message: str = "", why: str = "") -> bool:
        """A pass or a fail; `why` says in a line what it shows, if the name cannot."""
        status = "pass" if ok else "fail"
        self.results.checks.append(
            Check(_name(name), status, message, why=why, step=self._in_step())
        )
        self._save()
        print(
            f"  check {name}: {status.upper()}" + (f" ({message})" if message else ""),
            file=sys.stdout if ok else sys.stderr,
        )
        return bool(ok)

    def skip(self, name: str, reason: str) -> None:
        self.results.checks.append(
            Check(_name(name), "skip", reason, step=self._in_step())
        )
        self._save()
        print(f"  check {name}: SKIP ({reason})")

    def close(
        self, name: str, got, want, rtol: float, atol: float, why: str = ""
    ) -> bool:
        """Check |got - want| <= atol + rtol*|want| everywhere; report the worst.

        `want` should be computed in higher precision (float64). The relative
        error reported is normalised by max|want|, not element by element:
        a dot product of signed terms lands near zero at some elements, where
        an element-wise ratio measures cancellation, not the kernel.
        """
        import torch

        got64 = got.detach().to("cpu", torch.float64)
        want64 = want.detach().to("cpu", torch.float64)
        if got64.shape != want64.shape:
            return self.check(
                name, False, f"shape {tuple(got64.shape)} != {tuple(want64.shape)}"
            )
        if not torch.isfinite(got64).all():
            bad = int((~torch.isfinite(got64)).sum())
            return self.check(name, False, f"{bad} non-finite elements")
        diff = (got64 - want64).abs()
        excess = diff - (atol + rtol * want64.abs())
        scale = float(want64.abs().max()) or 1.0
        rel = float(diff.max()) / scale
        bound = f"|got-want| <= {atol:.3g} + {rtol:.3g}*|want|" + (
            f"; {why}" if why else ""
        )
        if float(excess.max()) > 0:
            worst = tuple(
                int(i) for i in torch.unravel_index(excess.argmax(), excess.shape)
            )
            return self.check(
                name,
                False,
                f"worst at {worst}: got {float(got64[worst]):.6g}, "
                f"want {float(want64[worst]):.6g}; {bound}",
            )
        return self.check(name, True, f"max error / max|want| = {rel:.2e}; {bound}")

    # -- predictions -------------------------------------------------------

    def predict(
        self,
        name: str,
        value: float,
        basis: str,
        tolerance: float,
        *,
        of: str | None = None,
        quantity: Quantity = "ratio",
        unit: str = "",
    ) -> Prediction:
        """Say what a measurement should show before it is made, and why.

        `value` comes from a model (the bytes a kernel must move, its FLOPs,
        the machine's measured ceilings), written in `basis`; `tolerance` is
        relative. `of` names the benchmark predicted (default: `name`); its
        ratio is compared, or, with quantity="kernel", the kernel's own
        median in the benchmark's unit. With quantity="value" the lesson
        reports the measurement itself with `measured(name, value)`. A
        prediction made after its benchmark is an error: it would be a
        description, not a prediction.
        """
        name = _name(name)
        if quantity not in ("ratio", "kernel", "value"):
            raise ValueError(
                f"prediction {name}: quantity {quantity!r} is not "
                "'ratio', 'kernel' or 'value'"
            )
        if not (math.isfinite(value) and value != 0):
            raise ValueError(f"prediction {name}: the value must be finite and not 0")
        if not (math.isfinite(tolerance) and 0 < tolerance < 10):
            raise ValueError(f"prediction {name}: the tolerance is relative, above 0")
        if not basis.strip():
            raise ValueError(f"prediction {name}: say what the number comes from")
        if any(p.name == name for p in self.results.predictions):
            raise ValueError(f"prediction {name}: made twice")
        target = "" if quantity == "value" else _name(of or name)
        if any(b.name == target for b in self.results.benchmarks):
            raise ValueError(
                f"prediction {name}: benchmark {target} is already measured; "
                "predict before measuring"
            )
        prediction = Prediction(
            name, float(value), basis, float(tolerance), target, quantity, unit
        )
        self.results.predictions.append(prediction)
        self._save()
        print(
            f"  predict {name}: {_shown(prediction, value)} "
            f"(within {tolerance:.0%}): {basis}"
        )
        return prediction

    def measured(self, name: str, value: float) -> None:
        """The measurement of a quantity predicted with quantity="value"."""
        found = next((p for p in self.results.predictions if p.name == name), None)
        if found is None or found.quantity != "value":
            raise ValueError(
                f"measured {name}: no prediction of that name with quantity "
                "'value' (call lesson.predict first)"
            )
        if self.untimed:  # a smoke or sanitizer run times nothing: it measured nothing
            print(f"  measured {name}: not recorded (an untimed run measures nothing)")
            return
        if not math.isfinite(value):
            raise ValueError(f"measured {name}: the value must be finite")
        found.measured = float(value)
        self._save()
        self._report_prediction(found, [])

    def _report_prediction(self, p: Prediction, benchmarks: list[Benchmark]) -> None:
        outcome = prediction_outcome(p, benchmarks)
        if outcome is None:
            return
        print(
            f"  prediction {p.name}: predicted {_shown(p, p.value)}, measured "
            f"{_shown(p, outcome.measured)}: {outcome.gap:+.0%} "
            f"({'held' if outcome.held else 'missed'}, tolerance {p.tolerance:.0%})"
        )

    # -- expected warnings -------------------------------------------------

    def expect_warning(self, text: str, why: str) -> None:
        """Count a Python warning the lesson expects instead of printing it.

        Every warning whose message contains `text` is kept out of stderr;
        the record holds how many there were, with `why` they are expected,
        and the page shows both: nothing is dropped silently.
        """
        import re
        import warnings

        if not text or not why.strip():
            raise ValueError("expect_warning: give the text to match and why")
        self.results.filtered_warnings.append(FilteredWarning(text, why))
        self._save()
        # "always": every occurrence reaches showwarning, so every one is counted.
        warnings.filterwarnings("always", message=".*" + re.escape(text))
        if getattr(warnings.showwarning, "_lesson", None) is self:
            return
        original = warnings.showwarning

        def show(message, category, filename, lineno, file=None, line=None):
            for expected in self.results.filtered_warnings:
                if expected.text in str(message):
                    expected.count += 1
                    if not expected.example:
                        expected.example = f"{category.__name__}: {message}"[:300]
                    self._save()
                    return
            original(message, category, filename, lineno, file, line)

        show._lesson = self
        warnings.showwarning = show

    # -- benchmarks --------------------------------------------------------

    def benchmark(
        self,
        name: str,
        label: str,
        timings: Timings,
        kernel: str,
        baseline: str,
        *,
        unit: str = "ms",
        work: float | tuple[float, float] | None = None,
        baseline_name: str = "",
        threshold: float | None = None,
        gate: bool = True,
        stretch: float | None = None,
        note: str = "",
        library: str = "",
    ) -> Benchmark | None:
        """Compare timings[kernel] with timings[baseline], round by round.

        `timings` comes from `bench_interleaved`, where the two took turns.
        For a rate unit ("GB/s", "TFLOP/s") `work` is the bytes or FLOPs of
        one call, or a (kernel, baseline) pair when they differ (a kernel
        against a plain copy). With a threshold and gate=True, a ratio whose
        whole interval lies below the threshold fails the lesson; gate=False
        makes it a goal the page reports. `stretch` is a higher goal that
        never gates. `library` names what practitioners use instead when the
        baseline is that (a library, or "torch.compile"). A smoke run records
        no benchmark (None): a check says its functions ran.
        """
        if unit not in UNITS:
            raise ValueError(
                f"benchmark {name}: unit {unit!r} is not one of {', '.join(UNITS)}"
            )
        if self.untimed:
            judged = (f", target {threshold:.2f}x{'' if gate else ' (goal)'}"
                      if threshold is not None else "") + (
                f", library {library}" if library else "")
            return self._smoke_benchmark(name, timings, kernel, baseline, unit, work,
                                         judged)
        if not getattr(timings, "timed", True):
            raise ValueError(f"benchmark {name}: a smoke run's timings measure nothing")
        k_ms, b_ms = list(timings[kernel]), list(timings[baseline])
        if len(k_ms) != len(b_ms) or not k_ms:
            raise ValueError(
                f"benchmark {name}: {kernel!r} and {baseline!r} need the same rounds"
            )
        if unit in RATE_UNITS:
            if work is None:
                raise ValueError(
                    f"benchmark {name}: a rate in {unit} needs `work` "
                    "(bytes or FLOPs per call)"
                )
            k_work, b_work = work if isinstance(work, tuple) else (work, work)
            scale = RATE_UNITS[unit]

            def value(ms: float, w: float) -> float:
                return w / ms * scale

            ratios = [
                value(k, k_work) / value(b, b_work)
                for k, b in zip(k_ms, b_ms, strict=True)
            ]
            measured, base = (
                value(statistics.median(k_ms), k_work),
                value(statistics.median(b_ms), b_work),
            )
        else:
            ratios = [b / k for k, b in zip(k_ms, b_ms, strict=True)]
            measured, base = statistics.median(k_ms), statistics.median(b_ms)
        ratio, low, high = median_interval(ratios)
        if not all(
            math.isfinite(x) and x > 0 for x in (measured, base, ratio, low, high)
        ):
            raise ValueError(f"benchmark {name}: times must be positive and finite")
        bench = Benchmark(
            name=_name(name),
            label=label,
            unit=unit,
            measured=measured,
            baseline=base,
            baseline_name=baseline_name or baseline,
            ratio=ratio,
            ratio_low=low,
            ratio_high=high,
            samples=len(ratios),
            kernel_ms=k_ms,
            baseline_ms=b_ms,
            threshold=threshold,
            gate=gate,
            verdict=None if threshold is None else verdict(low, high, threshold),
            stretch=stretch,
            stretch_verdict=None if stretch is None else verdict(low, high, stretch),
            note=note,
            method=getattr(timings, "method", ""),
            library=library,
            step=self._in_step(),
        )
        self.results.benchmarks.append(bench)
        self._save()
        target = ""
        if threshold is not None:
            target = (
                f", target {threshold:.2f}x{'' if gate else ' (goal)'}: {bench.verdict}"
            )
        if stretch is not None:
            target += f", stretch {stretch:.2f}x: {bench.stretch_verdict}"
        print(
            f"  bench {label}: {measured:.4g} {unit} vs {bench.baseline_name} "
            f"{base:.4g} {unit} = "
            f"{ratio:.2f}x [{low:.2f}, {high:.2f}], "
            f"{_counted(len(ratios), 'round')}{target}"
        )
        for p in self.results.predictions:
            if p.of == bench.name:
                if p.quantity == "kernel" and not p.unit:
                    p.unit = bench.unit
                    self._save()
                self._report_prediction(p, [bench])
        return bench

    def _smoke_benchmark(
        self, name: str, timings: Timings, kernel: str, baseline: str, unit: str,
        work, judged: str,
    ) -> None:
        """An untimed run's benchmark (a smoke run, under compute-sanitizer): its
        arguments checked, a check that it ran (with what a GPU run would judge)."""
        missing = [key for key in (kernel, baseline) if key not in timings]
        if missing:
            raise KeyError(
                f"benchmark {name}: no timings for {', '.join(map(repr, missing))} "
                f"(timed: {', '.join(map(repr, timings))})"
            )
        if unit in RATE_UNITS and work is None:
            raise ValueError(f"benchmark {name}: a rate in {unit} needs `work`")
        if self.smoke:
            prefix, how = "smoke", "on tiny inputs"
        else:
            prefix, how = "sanitize", f"under compute-sanitizer ({self.sanitize})"
        self.check(
            f"{prefix}-{_name(name)}"[:120],
            True,
            f"{kernel} and {baseline} each ran once {how}, untimed; "
            f"on a GPU: {unit}{judged}",
            why=f"a {'smoke' if self.smoke else 'sanitizer'} run: the benchmark's code "
            "runs, no benchmark is recorded",
        )

    # -- tables and figures ------------------------------------------------

    def table(
        self, name: str, columns: list[str], rows: list[list], caption: str = ""
    ) -> None:
        """A small table of results (a sweep, the winning configs) for the page."""
        rows = [[_plain(cell) for cell in row] for row in rows]
        table = Table(
            _name(name), [str(c) for c in columns], rows, caption, self._in_step()
        )
        if self.untimed:  # its numbers may come from timings an untimed run never made
            print(f"\n  table {name}: not recorded (an untimed run measures nothing)")
        else:
            self.results.tables.append(table)
            self._save()
        cells = [
            [str(c) for c in columns],
            *[["" if v is None else str(v) for v in row] for row in rows],
        ]
        widths = [
            max(len(r[i]) for r in cells if i < len(r)) for i in range(len(columns))
        ]
        print(f"\n  {caption or name}")
        for row in cells:
            print(
                "  " + "  ".join(v.rjust(w) for v, w in zip(row, widths, strict=False))
            )

    def plot(
        self, name: str, caption: str, draw, size: tuple[float, float] = (7.0, 3.6)
    ) -> None:
        """Draw a figure twice, for the light and the dark page, and save both.

        `draw(fig)` adds axes to a fresh matplotlib figure and plots on them;
        the kit sets the colours, the text size (legible on a phone whatever
        `size` is: see PLOT_TEXT) and the file names, and starts every bar
        chart's value axis at zero, so bar lengths compare honestly.
        """
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        style = {**PLOT_STYLE, **plot_text(size[0])}
        if self.untimed:  # draw() runs once; untimed data is never rendered
            with plt.rc_context(style):
                fig = plt.figure(figsize=size)
                draw(fig)
                _bars_from_zero(fig)
                plt.close(fig)
            print(f"  figure {_name(name)}: drawn, not saved (an untimed run)")
            return
        self._figure_dir.mkdir(parents=True, exist_ok=True)
        files = {}
        for theme, suffix in (("light", ""), ("dark", "-dark")):
            with plt.rc_context({**style, **PLOT_THEMES[theme]}):
                fig = plt.figure(figsize=size, layout="constrained")
                draw(fig)
                _bars_from_zero(fig)
                files[theme] = f"{_name(name)}{suffix}.png"
                fig.savefig(self._figure_dir / files[theme], dpi=120)
                plt.close(fig)
        self.results.figures.append(
            Figure(name, files["light"], caption, files["dark"], self._in_step())
        )
        self._save()
        print(f"  figure {name}: {files['light']}, {files['dark']}")

    def compiled_table(
        self, name: str, kernels: dict, ptx: dict[str, str], caption: str
    ) -> None:
        """A table of what the compiler made of each kernel: one row per
        {label: compiled kernel} (what a launch returns), with its registers per
        thread, the registers it spilled to local memory (a spill is a load and
        a store in the inner loop: the column every tuning starts from), its
        shared memory in KiB, and one column per {column: regex} of `ptx`: how
        many times the regex occurs in the PTX, or, when it has a group, the
        distinct values that group takes (setmaxnreg's targets, say)."""
        rows = []
        for label, compiled in kernels.items():
            text = compiled.asm["ptx"]
            facts = [ptx_fact(text, pattern) for pattern in ptx.values()]
            shared = round(compiled.metadata.shared / 1024, 1)
            registers = getattr(compiled, "n_regs", None)
            spilled = getattr(compiled, "n_spills", None)
            rows.append([label, registers, spilled, shared, *facts])
        columns = ["kernel", "registers / thread", "spilled registers",
                   "shared memory KiB", *ptx]
        self.table(name, columns, rows, caption)

    def rates(
        self, name: str, caption: str, ms: Timings, work: float, unit: str = "GB/s",
        labels: dict | None = None, line: float | None = None,
        size: tuple[float, float] = (4.8, 3.0),
    ) -> None:
        """A table and a figure of each timed function's rate, `work` per call in
        `unit` ("GB/s": bytes, "TFLOP/s": FLOPs): the median over the rounds of
        `ms` as a bar from zero with its 95 % interval, and every round as a dot;
        `line`, a rate to mark with a dotted line (a gate's). `labels` names the
        functions for the reader."""
        labels = labels or {}
        scale = RATE_UNITS[unit]

        def rate(t: float) -> float:
            return work / t * scale

        rows = [[labels.get(n, n), round(ms.median(n), 4), round(rate(ms.median(n)), 1)]
                for n in ms]
        self.table(name, ["kernel", "ms (median)", unit], rows, caption)

        def draw(fig):
            ax = fig.subplots()
            for row, n in enumerate(ms):
                mid, low, high = median_interval([rate(t) for t in ms[n]])
                ax.barh(row, mid, height=0.6, color="#9ecae1",
                        xerr=[[mid - low], [high - mid]], capsize=3)
                ax.scatter([rate(t) for t in ms[n]], [row] * len(ms[n]), s=6,
                           color="#08519c", zorder=3)
            if line is not None:
                ax.axvline(line, color="#d62728", linewidth=1, linestyle=":")
            ax.set_yticks(range(len(ms)), [labels.get(n, n) for n in ms])
            ax.invert_yaxis()
            ax.set_axisbelow(True)
            ax.set_xlabel(unit)

        self.plot(name, caption, draw, size=size)

    # -- the end -----------------------------------------------------------

    def finish(self) -> int:
        """Print a summary and return the exit code for sys.exit."""
        self._end_step()
        checks, benches = self.results.checks, self.results.benchmarks
        problems = failures(checks, benches)
        passed = sum(c.status == "pass" for c in checks)
        skipped = sum(c.status == "skip" for c in checks)
        not_run = not_run_here(self.results.steps, self.results.skipped_parts)
        print(
            f"\n{self.name}: {_counted(passed, 'check')} passed, "
            f"{sum(c.status == 'fail' for c in checks)} failed, "
            f"{skipped} skipped; {not_run + '; ' if not_run else ''}"
            f"{_counted(len(benches), 'benchmark')}, "
            f"{sum(b.gate and b.verdict == 'not met' for b in benches)} below target"
        )
        for w in self.results.filtered_warnings:
            print(f"expected warning filtered {w.count} time(s): {w.text!r} ({w.why})")
        if self.smoke:
            ran = sum(c.name.startswith("smoke-") for c in checks)
            print(
                f"a smoke run: the code of {_counted(ran, 'benchmark')} ran "
                "once on tiny inputs; nothing was timed"
            )
        elif self.sanitize:
            ran = sum(c.name.startswith("sanitize-") for c in checks)
            print(
                f"under compute-sanitizer ({self.sanitize}): the code of "
                f"{_counted(ran, 'benchmark')} ran once; nothing was timed"
            )
        if problems:
            for what in problems:
                print(f"FAILED {what}", file=sys.stderr)
            return EXIT_FAILED
        print("PASS")
        return EXIT_PASSED

    # -- plumbing ---------------------------------------------------------

    def _stop(self, code: int, message: str):
        print(message, file=sys.stderr)
        sys.exit(code)

    def _record_versions(self, torch, triton) -> None:
        device = self.results.device
        device.torch, device.triton, device.python = (
            torch.__version__,
            triton.__version__,
            platform.python_version(),
        )
        if self.interpret:
            device.name = "CPU"
        self._save()
        print(
            f"torch {torch.__version__}, triton {triton.__version__}, "
            f"python {platform.python_version()}"
        )

    def _record_raised(self, kind, exc, tb) -> None:
        """sys.excepthook while recording: the exception that ends the run, where
        the lesson raised it and the step it ended, then the usual traceback."""
        step = self._step
        if self._ended_by and self._ended_by[0] in (exc, exc.__context__):
            step = self._ended_by[1]  # a `with` step that the exception left
        self._end_step()
        code = _main_folder().parent
        frames = [
            f
            for f in traceback.extract_tb(tb)
            if Path(f.filename).resolve().is_relative_to(code)
            and Path(f.filename).resolve() != Path(__file__).resolve()
        ]
        message = (str(exc).strip().splitlines() or [""])[0][:RAISED_MESSAGE_MAX]
        self.results.raised = Raised(kind.__name__, message)
        if frames:
            self.results.raised.file = (
                Path(frames[-1].filename).resolve().relative_to(code.parent).as_posix()
            )
            self.results.raised.line = frames[-1].lineno or 0
        if step is not None:
            step.raised, self.results.raised.step = True, step.name
        self._save()
        self._excepthook(kind, exc, tb)

    def _save(self) -> None:
        if not self._results_path:
            return
        if self._step is not None:  # the running step's output so far: a crash keeps it
            self._step.stdout, self._step.stdout_omitted = self._kept.text()
        tmp = f"{self._results_path}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(asdict(self.results), f, indent=1, allow_nan=False)
        os.replace(tmp, self._results_path)


class _StepScope:
    """What lesson.step returns: true if the step runs here; `with` gives its extent."""

    def __init__(self, lesson: Lesson, step: Step, runs: bool):
        self._lesson, self._step, self._runs = lesson, step, runs

    def __bool__(self) -> bool:
        return self._runs

    def __enter__(self) -> _StepScope:
        if not self._runs:  # a with-block cannot be skipped: the step would run anyway
            raise RuntimeError(
                f"step {self._step.name!r} needs a GPU: write it as "
                f"`if lesson.step({self._step.name!r}, needs_gpu=...):`"
            )
        return self

    def __exit__(self, kind, exc, tb) -> bool:
        if self._lesson._step is self._step:
            if exc is not None:  # the run may end with it: the step it ended is kept
                self._lesson._ended_by = (exc, self._step)
            self._lesson._end_step()
        return False


class _Kept:
    """The first 3/4 and last 1/4 of `limit` characters of a text written in pieces."""

    def __init__(self, limit: int):
        self.head_limit, self.tail_limit = limit * 3 // 4, limit // 4
        self.head: list[str] = []
        self.head_size = self.tail_size = self.total = 0
        self.tail: collections.deque[str] = collections.deque()

    def add(self, s: str) -> None:
        self.total += len(s)
        room = self.head_limit - self.head_size
        if room > 0:
            self.head.append(s[:room])
            self.head_size += len(s[:room])
            s = s[room:]
        if s:
            self.tail.append(s)
            self.tail_size += len(s)
            while self.tail_size - len(self.tail[0]) >= self.tail_limit:
                self.tail_size -= len(self.tail.popleft())

    def text(self) -> tuple[str, int]:
        """(the kept text, with the cut marked; how many characters were cut)."""
        tail = "".join(self.tail)[-self.tail_limit :] if self.tail else ""
        omitted = self.total - self.head_size - len(tail)
        head = "".join(self.head)
        if omitted > 0:
            return f"{head}\n[... {omitted} characters omitted ...]\n{tail}", omitted
        return head + tail, 0


class _Tee:
    """sys.stdout while a step runs under verify: passed on, a bounded copy kept."""

    def __init__(self, stream, kept: _Kept):
        self._stream, self._kept = stream, kept

    def write(self, s: str) -> int:
        self._kept.add(s)
        return self._stream.write(s)

    def flush(self) -> None:
        self._stream.flush()

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


# Figures: one style, two colour schemes (Material's default and slate pages).
PLOT_STYLE = {
    "axes.grid": True,
    "grid.linewidth": 0.6,
    "axes.spines.top": False,
    "axes.spines.right": False,
}
# A page shows every figure at the width of its column, whatever the figure's
# size in inches: about 900 px on a wide screen, 340 px on a phone. So the text
# is sized to the figure's width, to be PLOT_TEXT["phone_px"] pixels or more on
# a phone (and about 2.6 times that on a wide screen).
PLOT_TEXT = {"phone_column_px": 340, "phone_px": 10}


def plot_text(width_in: float) -> dict:
    """Matplotlib's text sizes for a figure `width_in` inches wide: every title,
    label, tick and legend at the size that reads on a phone."""
    points = PLOT_TEXT["phone_px"] * 72 * width_in / PLOT_TEXT["phone_column_px"]
    keys = ("font.size", "axes.titlesize", "axes.labelsize", "xtick.labelsize",
            "ytick.labelsize", "legend.fontsize", "legend.title_fontsize",
            "figure.titlesize")
    return dict.fromkeys(keys, round(points, 1))


def _bars_from_zero(fig) -> None:
    """A bar's length is its value: on a linear axis, bars start at zero."""
    from matplotlib.container import BarContainer

    for ax in fig.axes:
        bars = [c for c in ax.containers if isinstance(c, BarContainer)]
        if not bars:
            continue
        across = bars[0].orientation == "horizontal"  # barh: the values run along x
        scale, limits, set_limits = (
            (ax.get_xscale(), ax.get_xlim(), ax.set_xlim)
            if across
            else (ax.get_yscale(), ax.get_ylim(), ax.set_ylim)
        )
        low, high = sorted(limits)
        if scale == "linear" and low > 0:
            set_limits(0, high) if limits[0] < limits[1] else set_limits(high, 0)


PLOT_THEMES = {
    "light": {
        "figure.facecolor": "#ffffff",
        "axes.facecolor": "#ffffff",
        "savefig.facecolor": "#ffffff",
        "text.color": "#1f1f1f",
        "axes.labelcolor": "#1f1f1f",
        "axes.edgecolor": "#555555",
        "xtick.color": "#333333",
        "ytick.color": "#333333",
        "grid.color": "#e0e0e0",
        "legend.facecolor": "#ffffff",
        "legend.edgecolor": "#cccccc",
    },
    "dark": {
        "figure.facecolor": "#1e2129",
        "axes.facecolor": "#1e2129",
        "savefig.facecolor": "#1e2129",
        "text.color": "#e6e6ea",
        "axes.labelcolor": "#e6e6ea",
        "axes.edgecolor": "#9a9aa6",
        "xtick.color": "#d0d0d8",
        "ytick.color": "#d0d0d8",
        "grid.color": "#3a3f4c",
        "legend.facecolor": "#262a34",
        "legend.edgecolor": "#4a4f5c",
    },
}


def _lend_smoke_stand_ins(lesson: Lesson, torch) -> None:
    """What a smoke run lends the CPU so that GPU-only code runs once.

    torch.compile's code generation needs a GPU: the eager function runs
    in its place. torch.cuda's device queries answer for a pretend Hopper
    of 4 SMs, as the persistent kernels' interpreter runs pretend: enough
    to size a grid. Each is recorded as a skipped part when a lesson uses
    it, as is the autotuner's benchmarker (each config runs once, the first
    wins). torch.cuda.synchronize has nothing to wait for on a CPU. Triton's
    interpreter hands a float argument to a kernel as a Python float and
    has no libdevice.rsqrt, where a GPU has an fp32 scalar and the
    function: both are lent (Liger-Kernel's norm kernels need them).
    """
    import contextlib
    import types

    lent = _lender(lesson, "smoke run", "smoke")
    _lend_untimed_stand_ins(lesson, torch, "smoke run", "smoke", "codegen needs a GPU")
    gpu = types.SimpleNamespace(name="a pretend GPU", major=9, minor=0,
                                multi_processor_count=4, total_memory=16 << 30)

    def properties(device=None):
        lent("torch.cuda.get_device_properties", "a pretend GPU of 4 SMs, sm_90")
        return gpu

    class Stream:  # a CPU runs everything in order, as on one stream
        def wait_stream(self, other) -> None:
            pass

    def stream(*args, **kwargs):
        lent("torch.cuda streams", "the CPU's one stream (it runs everything in order)")
        return Stream()

    torch.cuda.synchronize = lambda *args, **kwargs: None
    torch.cuda.Stream = torch.cuda.current_stream = stream
    torch.cuda.stream = lambda side: contextlib.nullcontext()
    torch.cuda.get_device_properties = properties
    torch.cuda.get_device_capability = lambda device=None: (
        properties().major, properties().minor)
    torch.cuda.get_device_name = lambda device=None: properties().name
    try:
        import numpy as np
        import triton.language as tl
        import triton.runtime.interpreter as interpreter
        from triton.language.extra import libdevice

        plain = interpreter._implicit_cvt

        def fp32_scalar(arg):
            if type(arg) is float:
                box = interpreter.TensorHandle(np.array([arg], np.float32), tl.float32)
                return tl.tensor(box, tl.float32)
            return plain(arg)

        def rsqrt(x):
            data = x.handle.data
            out = (1.0 / np.sqrt(data.astype(np.float64))).astype(data.dtype)
            return tl.core.tensor(interpreter.TensorHandle(out, x.handle.dtype), x.type)

        interpreter._implicit_cvt = fp32_scalar
        libdevice.rsqrt = rsqrt
    except (ImportError, AttributeError):  # another Triton: its interpreter as it is
        pass


def _lender(lesson: Lesson, label: str, short: str):
    """lent(part, why): a stand-in recorded as a skipped part, once, when used."""

    def lent(part: str, why: str) -> None:
        if not any(p.part == part for p in lesson.results.skipped_parts):
            lesson.results.skipped_parts.append(SkippedPart(part, f"{label}: {why}"))
            lesson._save()
            print(f"  {short}: {part}: {why}")

    return lent


def _lend_untimed_stand_ins(
    lesson: Lesson,
    torch,
    label: str,
    short: str,
    compile_why: str = "Inductor's kernels are not the lesson's, and its "
    "autotuning would run under the tool",
) -> None:
    """What every untimed run lends: torch.compile runs the eager function, and
    Triton's autotuner runs each config once, untimed, keeping the first (so
    under compute-sanitizer every config is checked once)."""
    lent = _lender(lesson, label, short)

    def eager(fn=None, **options):  # torch.compile(fn, ...) and @torch.compile(...)
        lent("torch.compile", f"the function runs uncompiled ({compile_why})")
        return fn if fn is not None else (lambda f: f)

    def untimed(kernel_call, quantiles=None):  # the autotuner's benchmarker
        lent("triton.autotune", "each config runs once, untimed; the first is kept")
        kernel_call()
        return [math.nan] * len(quantiles or (0.5,))

    torch.compile = eager
    try:
        from triton.runtime import autotuner

        autotuner.Autotuner.do_bench = property(lambda self: untimed)
    except (ImportError, AttributeError):  # another Triton: its autotuner as it is
        pass


def _resolve_place(folder: Path, place: str) -> SourceSpan:
    """'kernels.py:275', 'kernels.py:270-280' or 'kernels.py:NAME' (a snippet region
    or a function of that file) as the lines it names; FILE is relative to `folder`."""
    file, sep, spec = place.rpartition(":")
    path = (folder / file).resolve() if sep and file else None
    code = folder.resolve().parent  # a lesson may name a module of a lesson it uses
    if path is None or not path.is_file() or not path.is_relative_to(code):
        raise ValueError(
            f"sanitizer_known: {place!r}: expected FILE:LINE, FILE:FIRST-LAST or "
            "FILE:NAME with FILE a source file of the lesson (relative to its folder)"
        )
    rel = path.relative_to(code.parent).as_posix()
    text = path.read_text(encoding="utf-8")
    lines = source_lines(text)
    numbers = re.fullmatch(r"([0-9]+)(?:-([0-9]+))?", spec)
    if numbers:
        first = int(numbers.group(1))
        last = int(numbers.group(2) or first)
        if not 1 <= first <= last <= len(lines):
            raise ValueError(
                f"sanitizer_known: {place!r}: {file} has lines 1-{len(lines)}"
            )
        return SourceSpan(rel, first, last)
    span = snippet_regions(text, rel).get(spec) or _function_lines(text, spec)
    if span is None:
        raise ValueError(
            f"sanitizer_known: {place!r}: {file} has no snippet region or function "
            f"named {spec!r}"
        )
    return SourceSpan(rel, *span)


def _function_lines(source: str, name: str) -> tuple[int, int] | None:
    """The lines of the function (or class) `name`, decorators included, 1-based."""
    import ast

    found = [
        node
        for node in ast.walk(ast.parse(source))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        and node.name == name
    ]
    if len(found) != 1:
        return None
    node = found[0]
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    return (first, node.end_lineno or node.lineno)


def _main_folder() -> Path:
    """The folder of the running lesson file (or the working folder, in a notebook)."""
    main = getattr(sys.modules.get("__main__"), "__file__", None)
    return Path(main).resolve().parent if main else Path.cwd()


def _lesson_toml(toml_path: Path) -> dict:
    """lesson.toml as the kit reads it (read_lesson_toml): its [requires] table
    (capability, triton, why and the optional baselines, [requires.optional]) and
    its [sanitize] table (size), all optional; {} without the file (a lesson file
    copied alone). FormatError for a file the tools would refuse too."""
    try:
        data = toml_path.read_bytes()
    except OSError:
        return {}
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FormatError(
            toml_path, 0, f"not UTF-8 text ({exc.reason} at byte {exc.start})"
        ) from None
    return read_lesson_toml(text, str(toml_path))


def _version_tuple(version: str) -> tuple[int, ...]:
    """'3.6.0+git1a2b' -> (3, 6, 0); '9.0' -> (9, 0)."""
    parts = []
    for piece in str(version).split("+")[0].split("."):
        digits = "".join(c for c in piece if c.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def _counted(n: int, noun: str) -> str:
    """'1 check', '2 checks': a count and its noun, singular for one."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _name(name: str) -> str:
    """Names key results across runs: short, printable, no path separators."""
    if not (0 < len(name) <= 120) or not name.isprintable() or "/" in name:
        raise ValueError(
            f"result name {name!r}: use up to 120 printable characters, no '/'"
        )
    return name


def _shown(p: Prediction, value: float) -> str:
    """A predicted or measured value with its unit, for the lesson's output."""
    if p.quantity == "ratio":
        return f"{value:.2f}x"
    return f"{value:.4g}{' ' + p.unit if p.unit else ''}"


def _plain(value):
    """Table cells as JSON-friendly scalars; non-finite floats become text."""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return float(f"{value:.4g}") if math.isfinite(value) else str(value)
    if isinstance(value, (int, str)) or value is None:
        return value
    return str(value)


# == Timing =====================================================================


class Timings(dict):
    """name -> milliseconds of every round (`bench_interleaved`); `method` says how.

    A smoke run's timings are not timed (`timed` false): one NaN per
    function, so no number derived from them can pass for a measurement.
    """

    method = ""
    timed = True

    def median(self, name: str) -> float:
        return statistics.median(self[name])


def bench_ms(fn, warmup_ms: int = 25, rep_ms: int = 100) -> float:
    """Median milliseconds of fn() from do_bench (CUDA events, L2 flushed).

    In a smoke run or under compute-sanitizer: fn() once, and NaN (nothing is timed).
    """
    if _untimed_run():
        fn()
        return math.nan
    import triton.testing

    return triton.testing.do_bench(
        fn, warmup=warmup_ms, rep=rep_ms, return_mode="median"
    )


def bench_interleaved(
    fns: dict,
    rounds: int = 15,
    rep_ms: int = 10,
    warm_s: float = 0.3,
    method: str = "graph",
) -> Timings:
    """Milliseconds of each function in every round, the functions taking turns.

    A GPU's clocks drift under sustained load (power and temperature), so
    whichever function is timed first can look faster. Everything is
    compiled and run for `warm_s` seconds first (clocks settle); then each
    round times every function once, so the kernel and its baseline see the
    same drift, and a pair of times from one round gives one sample of their
    ratio.

    method="graph" (the default) captures each function, repeated for about
    `rep_ms`, in a CUDA graph and times a replay with CUDA events: GPU time
    only, without the gaps of Python launching kernels one by one. Measured
    on the H200 (NOTES.md), it cut the spread of a layer-norm ratio between
    repeats from 18-34 % (do_bench) to under 1 %. method="events" times each
    call with triton.testing.do_bench (the L2 flushed between calls): use it
    when the launch overhead is what the lesson compares, such as one launch
    against a loop of many. If a function cannot be captured, every function
    of the call is timed with events, and `method` says so.

    In a smoke run, and under compute-sanitizer (where do_bench's buffers, CUDA
    graphs and timings would break or mean nothing), each function is called
    once, and nothing is timed.
    """
    if _untimed_run():
        return _smoke_timings(fns)
    import time

    # Compile (and autotune) everything before anything is timed.
    for fn in fns.values():
        fn()
    timers, note = None, ""
    if method == "graph":
        try:
            timers = {name: _graph_timer(fn, rep_ms) for name, fn in fns.items()}
        except Exception as exc:  # a host sync, say, which no graph can hold
            note = (
                f" (CUDA graph capture failed: {type(exc).__name__}; timed with events)"
            )
    if timers is None:
        timers = {
            name: (lambda fn=fn: bench_ms(fn, warmup_ms=2, rep_ms=rep_ms))
            for name, fn in fns.items()
        }
        how = f"each a do_bench median over {rep_ms} ms (L2 flushed between calls)"
    else:
        how = (
            f"each a CUDA-graph replay of {rep_ms} ms of calls, timed with CUDA events"
        )
    deadline = time.monotonic() + warm_s
    while time.monotonic() < deadline:
        for timer in timers.values():
            timer()
    times = Timings({name: [] for name in fns})
    times.method = (
        f"{rounds} interleaved rounds, {how}, after {warm_s:g} s of warm-up{note}"
    )
    for _ in range(rounds):
        for name, timer in timers.items():
            times[name].append(timer())
    return times


def _untimed_run() -> bool:
    """A smoke run, or a run under compute-sanitizer: nothing is timed."""
    smoke = os.environ.get(INTERPRET_ENV) == "1" and os.environ.get(SMOKE_ENV) == "1"
    return smoke or bool(os.environ.get(SANITIZE_ENV))


def _smoke_timings(fns: dict) -> Timings:
    """Each function called once, in turn; a NaN for its time: nothing is timed."""
    for fn in fns.values():
        fn()
    times = Timings({name: [math.nan] for name in fns})
    times.timed = False
    smoke = os.environ.get(INTERPRET_ENV) == "1" and os.environ.get(SMOKE_ENV) == "1"
    label = "smoke" if smoke else "sanitize"
    times.method = (
        "a smoke run: each function called once on tiny inputs, not timed"
        if smoke
        else "under compute-sanitizer: each function called once, not timed"
    )
    print(f"  {label}: {', '.join(map(str, fns))}: each ran once, untimed")
    return times


def _graph_timer(fn, rep_ms: float):
    """A replayer of `fn`, repeated for about rep_ms, that returns ms per call."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # capture wants the function warmed on a side stream
        fn()
    torch.cuda.current_stream().wait_stream(side)
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    calls = max(1, min(1000, int(rep_ms / max(start.elapsed_time(end), 1e-3))))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    torch.cuda.synchronize()

    def replay() -> float:
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / calls

    return replay


def ptx_fact(ptx: str, pattern: str) -> int | str:
    """How many times `pattern` occurs in `ptx`; with a group, the distinct values
    it takes, sorted and joined by spaces ("" when none)."""
    found = re.findall(pattern, ptx)
    return " ".join(sorted(set(found))) if re.compile(pattern).groups else len(found)


# == Numerics shared by lessons ===================================================


def scaled_rtol(rtol_table: float, eps: float, terms: int) -> tuple[float, str]:
    """The length rule for a sum of K terms: rtol_K = max(rtol_table, 4*eps*sqrt(K)).

    A sum of K rounded terms drifts like sqrt(K) roundings, so a flat rtol is
    too tight for long reductions and too loose for short ones.
    """
    scaled = 4.0 * eps * math.sqrt(terms)
    rtol = max(rtol_table, scaled)
    return (
        rtol,
        f"K={terms}: rtol = max({rtol_table:g}, 4*{eps:g}*sqrt({terms})) = {rtol:.3g}",
    )


def tflops(flop: float, ms: float) -> float:
    return flop / (ms * 1e-3) / 1e12


def gbps(nbytes: float, ms: float) -> float:
    return nbytes / (ms * 1e-3) / 1e9
