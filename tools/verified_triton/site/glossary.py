"""The glossary: one file of Material abbreviations, every page's, read here for the glossary page.

One job: parse `docs/includes/abbreviations.md`. The hook gives that file's
definitions to the `abbr` extension as its glossary, once per build (hooks.py,
glossary_terms), and the extension then shows each term's definition on hover
wherever a page uses it. The same
file is the glossary page's source (`::glossary`), so a term is defined once.
Every line is a definition or blank, since every definition is every page's:

    *[warp]: 32 threads that execute each instruction together, ... Taught in: Vector add.

The definition is plain text (it becomes a `title` attribute) and ends with
the lesson that teaches the term, by its title up to the colon or by its
name. Forms of one term (a plural: `*[warps]: ...`) repeat the definition
word for word, and the glossary shows them as one entry. A line is parsed
with string methods in one pass (`parse_line`), never by a regex that could
backtrack: a line of 150,000 spaces is read, or refused, at once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from verified_triton.core.limits import LIMITS
from verified_triton.core.safefs import read_text

ABBREVIATIONS = Path("includes") / "abbreviations.md"  # under docs/
TAUGHT_IN = "Taught in: "


# Words before a glossary term that make it a word of another sense, where no definition may attach: "Every
# code block on a page" is no Triton block, and a basic block is the compiler's. The `abbr` extension matches
# a term wherever it stands; the site takes the definition off these (hooks.on_page_content). Keys are the
# terms (each form of them: "block" covers "blocks"); values the words that come before them.
OTHER_SENSES: dict[str, tuple[str, ...]] = {
    "block": ("code", "basic"),
}


def _other_sense_pattern() -> re.Pattern:
    alternatives = "|".join(
        rf"(?P<w{i}>\b(?:{'|'.join(map(re.escape, words))})[ \t\n-]+)<abbr title=\"[^\"<>]*\">"
        rf"(?P<t{i}>{re.escape(term)}(?:s|es)?)</abbr>" for i, (term, words) in enumerate(OTHER_SENSES.items()))
    return re.compile(alternatives, re.I)


OTHER_SENSE = _other_sense_pattern()


def in_own_sense(html: str) -> str:
    """A page's HTML with no glossary definition on a term used in another sense (OTHER_SENSES): the words and
    the term are kept, the <abbr> around the term is not."""
    def plain(m: re.Match) -> str:
        i = next(k for k, v in m.groupdict().items() if v is not None and k.startswith("w"))[1:]
        return m.group(f"w{i}") + m.group(f"t{i}")
    return OTHER_SENSE.sub(plain, html) if "<abbr" in html else html


class GlossaryError(Exception):
    """A line of the abbreviations file that cannot be used, as FILE:LINE: why."""


@dataclass
class Entry:
    term: str  # the first form, the glossary's headword
    definition: str  # without the "Taught in" sentence
    taught_in: str  # as written: a lesson's short title or name
    forms: list[str] = field(default_factory=list)  # every form with this definition, the headword first
    line: int = 0


def read(path: Path, root: Path | None = None) -> list[Entry]:
    """Every entry of the file, forms with the same definition merged; GlossaryError at FILE:LINE."""
    text = read_text(path, LIMITS.source_file, root)
    entries: dict[str, Entry] = {}  # full definition line -> entry
    terms: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        parsed = parse_line(line)
        if parsed is None:
            raise GlossaryError(f"{path}:{number}: not an abbreviation ('*[term]: definition ... Taught in: "
                                "Lesson.'); every line of this file is appended to every page")
        term, full = parsed
        if not term or len(term) > LIMITS.name:
            raise GlossaryError(f"{path}:{number}: a term is 1 to {LIMITS.name} characters besides spaces, not "
                                f"{len(term)}")
        if term in terms:
            raise GlossaryError(f"{path}:{number}: '{term}' is defined twice (first on line {terms[term]})")
        terms[term] = number
        taught = split_taught(full)
        if taught is None:
            raise GlossaryError(f"{path}:{number}: '{term}' does not end with 'Taught in: LESSON.' (the lesson's "
                                "title up to its colon, or its name)")
        if full in entries:
            entries[full].forms.append(term)
            continue
        entries[full] = Entry(term, taught[0], taught[1].strip(), [term], number)
    return list(entries.values())


def parse_line(line: str) -> tuple[str, str] | None:
    """(term, definition) of `*[term]: definition`, both stripped; None when the line is not one.

    The term runs to the first ']' and holds no backslash; the definition is what follows ']:' and its spaces,
    without trailing whitespace, and is not empty."""
    if not line.startswith("*["):
        return None
    close = line.find("]", 2)
    if close < 3 or line[close + 1:close + 2] != ":" or "\\" in line[2:close]:
        return None
    definition = line[close + 2:].lstrip(" ").rstrip()
    return (line[2:close].strip(), definition) if definition else None


def split_taught(full: str) -> tuple[str, str] | None:
    """(definition, lesson) of 'DEFINITION Taught in: LESSON.', or None.

    The lesson holds no '.' but the final one, so 'Taught in: ' is looked for only after the last other '.',
    and the first occurrence there that follows whitespace (and some definition) is the one."""
    if not full.endswith("."):
        return None
    body = full[:-1]
    at = body.rfind(".") + 1
    while (at := body.find(TAUGHT_IN, at)) >= 0:
        if at and body[at - 1].isspace() and len(body) > at + len(TAUGHT_IN):
            definition = body[:at].rstrip()  # empty at most once: a later one has this 'Taught in' before it
            if definition:
                return definition, body[at + len(TAUGHT_IN):]
        at += 1
    return None


def lesson_for(entry: Entry, lessons) -> object | None:
    """The lesson an entry names: by its title up to the colon, or by its name (case ignored)."""
    wanted = entry.taught_in.casefold()
    for lesson in lessons:
        if wanted in (lesson.title.split(":")[0].strip().casefold(), lesson.name.casefold()):
            return lesson
    return None
