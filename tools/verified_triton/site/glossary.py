"""The glossary: one file of Material abbreviations, appended to every page, read here for the glossary page.

One job: parse `docs/includes/abbreviations.md`. pymdownx.snippets appends
that file to every page (mkdocs.yml, `auto_append`), and the `abbr` extension
then shows each term's definition on hover wherever a page uses it. The same
file is the glossary page's source (`::glossary`), so a term is defined once.
Every line is a definition or blank, since every line lands on every page:

    *[warp]: 32 threads that execute each instruction together, ... Taught in: Vector add.

The definition is plain text (it becomes a `title` attribute) and ends with
the lesson that teaches the term, by its title up to the colon or by its
name. Forms of one term (a plural: `*[warps]: ...`) repeat the definition
word for word, and the glossary shows them as one entry.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from verified_triton.core.limits import LIMITS
from verified_triton.core.safefs import read_text

ABBREVIATIONS = Path("includes") / "abbreviations.md"  # under docs/
LINE = re.compile(r"^\*\[(?P<term>[^\]\\]+)\]:[ ]*(?P<definition>.+?)\s*$")
TAUGHT = re.compile(r"^(?P<definition>.+?)\s+Taught in: (?P<lesson>[^.]+)\.$")


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
        match = LINE.match(line)
        if not match:
            raise GlossaryError(f"{path}:{number}: not an abbreviation ('*[term]: definition ... Taught in: "
                                "Lesson.'); every line of this file is appended to every page")
        term, full = match.group("term").strip(), match.group("definition")
        if term in terms:
            raise GlossaryError(f"{path}:{number}: '{term}' is defined twice (first on line {terms[term]})")
        terms[term] = number
        taught = TAUGHT.match(full)
        if not taught:
            raise GlossaryError(f"{path}:{number}: '{term}' does not end with 'Taught in: LESSON.' (the lesson's "
                                "title up to its colon, or its name)")
        if full in entries:
            entries[full].forms.append(term)
            continue
        entries[full] = Entry(term, taught.group("definition"), taught.group("lesson").strip(), [term], number)
    return list(entries.values())


def lesson_for(entry: Entry, lessons) -> object | None:
    """The lesson an entry names: by its title up to the colon, or by its name (case ignored)."""
    wanted = entry.taught_in.casefold()
    for lesson in lessons:
        if wanted in (lesson.title.split(":")[0].strip().casefold(), lesson.name.casefold()):
            return lesson
    return None
