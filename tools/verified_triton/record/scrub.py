"""No paths of the recording machine in a record.

One job: before a record is written, turn the absolute paths a run printed
(tracebacks, warnings, messages) into forms that say the same on every
machine: paths under the project become repository-relative
(code/vector-add/vector_add.py), and others are shortened to stable forms:
<site-packages>/triton/..., <python>/subprocess.py (the standard library),
<tmp>/..., ~/.... A record is then the same wherever it was made, and a page
never shows a user name or a folder layout of the machine that ran it.
tools/migrate.py cleans records written before this existed.
"""

from __future__ import annotations

import dataclasses
import os
import re
import sysconfig
import tempfile
from collections.abc import Callable
from pathlib import Path

# A path starts at a '/' that does not continue a word, a URL or another path.
_START = r"(?<![\w.:~<>/-])"
_END = r"(?![\w./-])"  # ...and ends where no path character follows
# Forms any machine's paths take, for paths this machine cannot name (a record made elsewhere).
GENERIC = [
    (re.compile(_START + r"/(?:[^\s/\"'<>]+/)*?(?:site|dist)-packages/"), "<site-packages>/"),
    (re.compile(_START + r"/(?:home|Users)/[^\s/\"'<>]+(?=/)"), "~"),
    (re.compile(_START + r"/root(?=/)"), "~"),
    (re.compile(_START + r"/private/var/folders/[^\s/\"'<>]+/[^\s/\"'<>]+/T(?=/)"), "<tmp>"),
    (re.compile(_START + r"/var/folders/[^\s/\"'<>]+/[^\s/\"'<>]+/T(?=/)"), "<tmp>"),
    (re.compile(_START + r"/(?:var/)?tmp(?=/)"), "<tmp>"),
    # a Python executable outside the places above (a virtual environment's bin/, as compute-sanitizer's
    # host frames name it): the binary is the same program wherever it lies
    (re.compile(_START + r"/(?:[^\s/\"'<>]+/)*bin/python[\d.]*" + _END), "<python>/bin/python"),
]


def scrubber(root: Path) -> Callable[[str], str]:
    """A function that rewrites this machine's paths in a text: the project `root` first, then the Python's
    packages and standard library, the temporary folder and the home folder, then the generic forms."""
    places = [(root, "", True)]
    paths = sysconfig.get_paths()
    places += [(paths[k], "<site-packages>", False) for k in ("purelib", "platlib")]
    places += [(paths[k], "<python>", False) for k in ("stdlib", "platstdlib")]
    places += [(tempfile.gettempdir(), "<tmp>", False), (Path.home(), "~", False)]
    specific = []
    for place, name, relative in places:
        for form in {os.path.abspath(place), os.path.realpath(place)}:
            if form != os.sep:
                specific.append((form.rstrip(os.sep), name, relative))
    specific.sort(key=lambda item: -len(item[0]))  # the longest first: the project may lie in <tmp> or ~
    patterns = []
    for form, name, relative in specific:
        if relative:  # under the project: relative to it (code/x.py); the folder itself: "."
            patterns.append((re.compile(_START + re.escape(form) + "/"), ""))
            patterns.append((re.compile(_START + re.escape(form) + _END), "."))
        else:
            patterns.append((re.compile(_START + re.escape(form) + r"(?=/|[^\w.-]|\Z)"), name))

    def scrub(text: str) -> str:
        if "/" not in text:
            return text
        for pattern, name in [*patterns, *GENERIC]:
            text = pattern.sub(name, text)
        return text

    return scrub


# Fields that name or identify rather than say: a record's keys, hashes, stamps, enums and file names. A path
# in one of them is refused by the schema's value rules or is a name the page links by, never rewritten here.
IDENTITY = frozenset({"lesson", "mode", "key", "outcome", "started_utc", "source_hash", "source_files", "history",
                      "name", "file", "dark_file", "step", "of", "status", "unit", "verdict", "stretch_verdict",
                      "quantity"})


def scrub_record(record, scrub: Callable[[str], str]) -> None:
    """Every text of a record, scrubbed in place: each str field of the record and of every dataclass, list
    and dict below it (what a run and each of its steps printed, the reason, messages, notes, captions,
    cells, a prediction's basis, a warning's example...), all but the IDENTITY fields."""
    _scrub_fields(record, scrub)


def _scrub_fields(obj, scrub: Callable[[str], str]) -> None:
    for f in dataclasses.fields(obj):
        if f.name not in IDENTITY:
            setattr(obj, f.name, _scrubbed(getattr(obj, f.name), scrub))


def _scrubbed(value, scrub: Callable[[str], str]):
    if isinstance(value, str):
        return scrub(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        _scrub_fields(value, scrub)
        return value
    if isinstance(value, list):
        return [_scrubbed(item, scrub) for item in value]
    if isinstance(value, dict):  # keys are names (baselines' packages); their values are texts
        return {key: _scrubbed(item, scrub) for key, item in value.items()}
    return value
