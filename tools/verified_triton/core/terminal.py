"""Text for a terminal: the one door for everything printed that carries untrusted text.

One job: a lesson's name, a record's reason, a device name or an error that
quotes lesson.toml reaches a terminal as the characters it is. An escape
sequence (ESC [ 31 m, an OSC that retitles the window or writes the
clipboard), a bell, a carriage return that overwrites the line, a
bidirectional override (Trojan Source) or any other character Python does not
call printable is written as a visible escape (\\x1b, \\u202e) instead.
verify's reports, the site's hooks (mkdocs' log handler: hooks.on_startup),
the serve overlay and the authors' commands print through `safe`. Standard
library only: a GPU machine's stock python3 prints through it too.
"""

from __future__ import annotations

import logging

from verified_triton.core.numfmt import counted

MAX_CHARS = 20_000  # characters of one printed message; the rest is cut, and the cut said


def safe(text: object, lines: bool = False, limit: int = MAX_CHARS) -> str:
    """`text` with every non-printable character as a visible escape: \\x1b, \\x07, \\u202e.

    With `lines`, line breaks stay (a message of several lines, such as a list of problems); without
    it the text is one line, its breaks shown as \\x0a. Past `limit` characters the rest is cut.
    """
    s = str(text)
    if len(s) > limit:
        s = s[:limit] + f" [... {counted(len(s) - limit, 'more character')}]"
    if s.isprintable():
        return s
    return "".join(c if c.isprintable() or (lines and c == "\n") else _visible(c) for c in s)


def _visible(c: str) -> str:
    point = ord(c)
    return f"\\x{point:02x}" if point < 256 else f"\\u{point:04x}" if point < 0x10000 else f"\\U{point:08x}"


class SafeRecords(logging.Filter):
    """A log handler's filter: every record it prints goes through `safe` (its line breaks kept).

    On a handler, not a logger: a logger's filter does not see its children's records
    (mkdocs.structure.pages, mkdocs.plugins ...), a handler's sees all it prints.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if record.exc_info:  # a traceback quotes its exception's message: printed through the door too
            message += "\n" + logging.Formatter().formatException(record.exc_info)
            record.exc_info, record.exc_text = None, None
        shown = safe(message, lines=True)
        if shown != record.msg or record.args:
            record.msg, record.args = shown, ()
        return True


def guard_handlers(logger: logging.Logger) -> None:
    """Put SafeRecords on every handler of `logger` that lacks it (idempotent)."""
    for handler in logger.handlers:
        if not any(isinstance(f, SafeRecords) for f in handler.filters):
            handler.addFilter(SafeRecords())
