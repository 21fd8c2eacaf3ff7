"""A lint for the prose of lesson pages: what a reader cannot check, or cannot look up, is flagged.

One job: read a page's Markdown, keep its prose (no front matter, fenced
code, directive lines, math or link targets) and report, with the page and
line:

- `history`: revision history ("an earlier version of this lesson", "once
  did", "while this lesson was written"). A page says what the lesson is.
- `unseen`: a document the reader cannot open ("seed 004", NOTES.md, "the
  course's length rule"; "the notebook" on a page without its credits line).
- `timing`: how timing was done (`do_bench`, CUDA events or graph replay, L2
  flushing, warm-up, interleaved rounds). The benchmarks table shows the
  method the run recorded; prose that restates it drifts from it.
- `glossary`: a glossary term the page uses, but never in a form its
  abbreviation matches outside code (a plural, another case, only inside
  backticks), so no definition shows on hover on that page.

A paragraph may be exempted from a rule, with a reason, by a comment on the
line before it (the reason is required):

    <!-- prose-lint: allow timing: the autotuner's own timing is the subject -->

Run it on pages: `.venv/bin/python tools/prose_lint.py docs/lessons/*.md` (exit 1 on
findings). tests/test_prose.py runs it on every lesson page.

Every pattern here takes linear time on any line: what a backtracking regex
would rescan from every opener (a code span, a link target, an HTML tag, an
aside, the allow comment) is found with string methods or `Delimited`.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from verified_triton.core.paths import ROOT
from verified_triton.core.terminal import safe as terminal
from verified_triton.site.directives import PageError, parse
from verified_triton.site.glossary import ABBREVIATIONS, Entry, GlossaryError, read
from verified_triton.site.page import Command, Fence

RULES = ("history", "unseen", "timing", "glossary")
CREDITS = re.compile(r"^\*\*Credits\.\*\*", re.M)

@dataclass(frozen=True)
class Delimited:
    """`opener`, then anything but `closer`, then `closer`: the matches re.finditer finds for the regex
    `opener[^closer]*closer`, found in linear time. The regex alone rescans to the end of the text from every
    opener when no closer follows it; here, once no closer follows an opener, none follows a later one."""

    opener: re.Pattern
    closer: str

    @property
    def whole(self) -> re.Pattern:
        return re.compile(f"(?:{self.opener.pattern})[^{re.escape(self.closer)}]*{re.escape(self.closer)}",
                          self.opener.flags)

    def finditer(self, text: str):
        whole, pos = self.whole, 0
        while (start := self.opener.search(text, pos)) is not None:
            if text.find(self.closer, start.end()) < 0:
                return
            match = whole.match(text, start.start())  # it matches: a closer follows
            yield match
            pos = max(match.end(), start.start() + 1)

    def sub(self, replace, text: str) -> str:
        out, pos = [], 0
        for match in self.finditer(text):
            out += [text[pos:match.start()], replace(match)]
            pos = match.end()
        return "".join(out) + text[pos:]


HISTORY = [re.compile(pattern, re.I) for pattern in (
    r"\b(an|the) (earlier|previous|first|old|older) (version|draft|revision)s?\b",
    r"\bonce did\b",
    r"\b(while|when|before|after) (this|the) (lesson|page) was (first )?(written|drafted|recorded)\b",
    r"\bwritten before (the|any) (first )?(GPU )?runs?\b",
    r"\bthis (lesson|page) (now|no longer|used to|originally)\b",
    r"\b(originally|previously|formerly)\b",
    r"\bused to be\b",
    r"\b(first|earlier|previous|last) (GPU |interpreter )?runs? of this (lesson|page)\b",
)] + [Delimited(re.compile(r"\((was|were) ", re.I), ")")]
UNSEEN = [  # (pattern, what it refers to); matched as written (case matters)
    (r"\b[Ss]eed \d+\b", "a seed document the site does not publish"),
    (r"\b(NOTES|METHOD|README)\.md\b|\bEXERCISE-DESIGN\b", "a file the site does not publish"),
    (r"\b[Tt]he course's (length )?rule\b",
     "a rule the site never states: name it (the kit's `scaled_rtol`) or state it"),
    (r"\b[Dd]ay \d+\b", "a lesson of another course"),
    (r"\btools/[\w/.-]+", "a repository file the site does not publish"),
    (r"\b[Tt]he issue('s)?\b|\bthis session\b", "the project's issue tracker, which readers do not see"),
]
NOTEBOOK = re.compile(r"\bthe (notebook|cookbook)\b", re.I)
TIMING = {  # the words of each way the kit times a round, and of what both ways share
    "events": [r"\bdo_bench\b", r"\bL2 (cache )?(is |was )?flushed\b", r"\bflush(es|ed|ing)? the L2\b"],
    "graph": [r"\bCUDA[- ]graphs?\b", r"\bgraph[- ]replays?\b"],
    "both": [r"\bCUDA[- ]events?\b", r"\bwarm-?ups?\b", r"\b(interleaved|paired) rounds?\b",
             r"\b(take|takes|taking|took) turns in (\w+ )?rounds\b"],
}


@dataclass
class Finding:
    page: str
    line: int
    rule: str
    message: str

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: [{self.rule}] {self.message}"


@dataclass
class Paragraph:
    """Prose joined into one string, with the source line of every character, and its code spans."""

    text: str = ""
    lines: list[int] = field(default_factory=list)  # lines[i]: the page line of text[i]
    code: list[tuple[int, str]] = field(default_factory=list)  # (line, content of a code span)
    allowed: set[str] = field(default_factory=set)

    def add(self, number: int, prose: str) -> None:
        if self.text:
            self.text += " "
            self.lines.append(number)
        self.text += prose
        self.lines.extend([number] * len(prose))

    def line_at(self, offset: int) -> int:
        return self.lines[min(offset, len(self.lines) - 1)] if self.lines else 0


BACKTICKS = re.compile(r"`+")
INLINE_MATH = re.compile(r"(?<![\\$])\$(?!\$)(?:\\.|[^$\\])+\$")
LINK_TARGET = Delimited(re.compile(r"\]\("), ")")
HTML_TAG = Delimited(re.compile(r"</?[A-Za-z]"), ">")


def code_spans(line: str) -> list[tuple[int, int]]:
    """(start, end) of each code span of a line, as CommonMark finds them: a run of backticks opens one, the
    next run of the same length closes it, and a run no such run follows is plain text. One pass over the
    runs: for each length, a pointer to the next run of that length only moves forward."""
    runs = [(m.start(), m.end()) for m in BACKTICKS.finditer(line)]
    by_length: dict[int, list[int]] = {}
    for i, (start, end) in enumerate(runs):
        by_length.setdefault(end - start, []).append(i)
    ahead = dict.fromkeys(by_length, 0)
    spans, i = [], 0
    while i < len(runs):
        length = runs[i][1] - runs[i][0]
        same, k = by_length[length], ahead[length]
        while k < len(same) and same[k] <= i:
            k += 1
        ahead[length] = k
        if k == len(same):
            i += 1
            continue
        spans.append((runs[i][0], runs[same[k]][1]))
        i = same[k] + 1
    return spans


def strip_inline(line: str) -> tuple[str, list[str]]:
    """(prose, code spans) of one line: math, link targets and HTML tags blanked, code spans taken out."""
    found = code_spans(line)
    spans = [line[start:end].strip("`").strip() for start, end in found]
    pieces, pos = [], 0
    for start, end in found:
        pieces += [line[pos:start], " " * (end - start)]
        pos = end
    line = "".join(pieces) + line[pos:]
    line = INLINE_MATH.sub(lambda m: " " * len(m.group(0)), line)
    for pattern in (LINK_TARGET, HTML_TAG):
        line = pattern.sub(lambda m: " " * len(m.group(0)), line)
    return line, spans


def allow_comment(line: str) -> set[str] | None:
    """The rules a `<!-- prose-lint: allow RULES: REASON -->` line allows (None when it is not one, or gives no
    reason), parsed with string methods: RULES are lower-case words, commas and spaces."""
    text = line.strip()
    if not (text.startswith("<!--") and text.endswith("-->")):
        return None
    inner = text[4:-3].strip()
    if not inner.startswith("prose-lint:"):
        return None
    rest = inner[len("prose-lint:"):].lstrip()
    if not (rest.startswith("allow") and rest[5:6].isspace()):
        return None
    rules, colon, reason = rest[5:].lstrip().partition(":")
    rules = rules.rstrip()
    if not colon or not rules or not reason.strip() or set(rules) - set("abcdefghijklmnopqrstuvwxyz, "):
        return None
    return {r.strip() for r in rules.split(",")}


def paragraphs(markdown: str) -> list[Paragraph]:
    """The page's prose, paragraph by paragraph, as the page model reads it (site/page.py): a blank line, a fence
    or a directive line ends one; a directive's body is prose (the author's words, shown on the page)."""
    out: list[Paragraph] = []
    current = Paragraph()
    pending: set[str] = set()
    in_math = False

    def close() -> None:
        nonlocal current
        if current.text.strip() or current.code:
            out.append(current)
        current = Paragraph(allowed=set())

    for row in parse(markdown).rows():
        number, line = row.number, row.text
        if isinstance(row.part, Fence) or isinstance(row.part, Command) and row.opens:
            close()
            continue
        if line.strip().startswith("$$"):
            in_math = not (in_math or line.strip().endswith("$$") and len(line.strip()) > 2)
            continue
        if in_math:
            continue
        allow = allow_comment(line)
        if allow is not None:
            close()
            pending = allow
            continue
        if not line.strip() or line.strip().startswith("<!--"):
            close()
            continue
        if not current.text and not current.code:
            current.allowed, pending = pending, set()
        prose, spans = strip_inline(line)
        current.add(number, prose)
        current.code.extend((number, s) for s in spans)
    close()
    return out


def glossary_entries(docs_dir: Path) -> list[Entry]:
    return read(docs_dir / ABBREVIATIONS, docs_dir)


def lint(page: str, markdown: str, entries: list[Entry], recorded_methods: set[str] | None = None) -> list[Finding]:
    """Every finding of one page. `recorded_methods`: the timing kinds its evidence records ("graph",
    "events"), to say so when prose names another; None when unknown."""
    found: list[Finding] = []
    try:
        paras = paragraphs(markdown)
    except PageError as exc:  # a page the model cannot read (a fence never closed): said at its line
        return [Finding(page, exc.line, "page", str(exc.error))]
    has_credits = bool(CREDITS.search(markdown))
    for para in paras:
        found += rule_history(page, para) + rule_unseen(page, para, has_credits)
        found += rule_timing(page, para, recorded_methods)
    found += rule_glossary(page, paras, entries)
    if len(CREDITS.findall(markdown)) > 1:
        found.append(Finding(page, 1, "unseen", "more than one credits line: say it once"))
    return sorted(found, key=lambda f: (f.line, f.rule))


def rule_history(page: str, para: Paragraph) -> list[Finding]:
    if "history" in para.allowed:
        return []
    return [Finding(page, para.line_at(m.start()), "history",
                    f"revision history ({m.group(0)!r}): say what the lesson is and does, in the present tense, "
                    "or leave it out")
            for pattern in HISTORY for m in pattern.finditer(para.text)]


def rule_unseen(page: str, para: Paragraph, has_credits: bool) -> list[Finding]:
    if "unseen" in para.allowed:
        return []
    out = [Finding(page, para.line_at(m.start()), "unseen", f"{m.group(0)!r} refers to {why}")
           for pattern, why in UNSEEN for m in re.finditer(pattern, para.text)]
    if not has_credits:
        out += [Finding(page, para.line_at(m.start()), "unseen",
                        f"{m.group(0)!r}: a notebook the page never introduces; add its credits line once "
                        "('**Credits.** ...', saying what it was) or name what is meant")
                for m in NOTEBOOK.finditer(para.text)]
    return out


def timing_kinds(text: str) -> dict[str, str]:
    """{kind: the first words naming it} for the timing methods a text names."""
    kinds = {}
    for kind, patterns in TIMING.items():
        for pattern in patterns:
            m = re.search(pattern, text, re.I)
            if m:
                kinds.setdefault(kind, m.group(0))
    return kinds


def rule_timing(page: str, para: Paragraph, recorded: set[str] | None) -> list[Finding]:
    if "timing" in para.allowed:
        return []
    out = []
    texts = [(para.text, para.line_at)] + [(code, lambda _o, n=n: n) for n, code in para.code]
    for text, line_at in texts:
        for kind, patterns in TIMING.items():
            for pattern in patterns:
                for m in re.finditer(pattern, text, re.I):
                    message = (f"{m.group(0)!r}: prose restates how timing was done; the benchmarks table shows "
                               "the method each run recorded (rounds, graph replay or events, warm-up)")
                    if recorded is not None and kind in ("events", "graph") and kind not in recorded:
                        message += (f"; and this lesson's GPU evidence records "
                                    f"{' and '.join(sorted(recorded)) or 'no timing'}, not {kind}")
                    out.append(Finding(page, line_at(m.start()), "timing", message))
    return out


def occurrences(form: str) -> re.Pattern:
    """Uses of a form the abbreviation would miss: a plural, or a capital at the start of a sentence."""
    first = f"[{re.escape(form[0].lower())}{re.escape(form[0].upper())}]" if form[0].isalpha() else re.escape(form[0])
    return re.compile(r"(?<![\w])" + first + re.escape(form[1:]) + r"(?:s|es)?(?![\w])")


def rule_glossary(page: str, paras: list[Paragraph], entries: list[Entry]) -> list[Finding]:
    """A term used on the page needs one use in a form its abbreviation matches, outside code."""
    out = []
    for entry in entries:
        first: tuple[int, str] | None = None
        hover = False
        for para in paras:
            if "glossary" in para.allowed:
                continue
            for form in entry.forms:
                if re.search(r"\b" + re.escape(form) + r"\b", para.text):
                    hover = True
                for m in occurrences(form).finditer(para.text):
                    first = min(first or (10**9, ""), (para.line_at(m.start()), m.group(0)))
                for number, code in para.code:
                    if occurrences(form).fullmatch(code.strip("\"'")):
                        first = min(first or (10**9, ""), (number, f"`{code}`"))
        if first and not hover:
            out.append(Finding(page, first[0], "glossary",
                               f"{first[1]} is a glossary term, but no use on this page matches its abbreviation "
                               f"({', '.join(entry.forms)}) outside code, so no definition shows on hover: write "
                               f"'{entry.term}' once in the prose, or add the form to docs/{ABBREVIATIONS}"))
    return out


def recorded_methods(markdown: str, evidence_dir: Path) -> set[str] | None:
    """The timing kinds ("graph", "events") the GPU records of the page's lesson name; None without any."""
    from verified_triton.judge.evidence import lesson_records

    try:
        lesson = parse(markdown).lesson
    except PageError:
        return None  # lint() says why
    if not lesson:
        return None
    records, _ = lesson_records(evidence_dir, lesson)
    text = " ".join(b.method for r in records if r.mode == "gpu" for b in r.benchmarks)
    return {kind for kind in timing_kinds(text) if kind in ("graph", "events")} or None


def main(argv: list[str]) -> int:
    docs = ROOT / "docs"
    try:
        entries = glossary_entries(docs)
    except GlossaryError as exc:  # FILE:LINE: why, never a traceback
        print(exc, file=sys.stderr)
        return 2
    pages = [Path(a) for a in argv] or sorted((docs / "lessons").glob("*.md"))
    findings = []
    for path in pages:
        rel = path.resolve().relative_to(ROOT).as_posix() if path.resolve().is_relative_to(ROOT) else str(path)
        text = path.read_text(encoding="utf-8")
        findings += lint(rel, text, entries, recorded_methods(text, ROOT / "evidence"))
    for f in findings:
        print(terminal(f))  # a finding quotes the page's line
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
