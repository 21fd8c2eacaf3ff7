"""Pieces several directives share: which record to show, its labels, the older-source marker, a name no record
holds."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from verified_triton.judge.evidence import Record
from verified_triton.judge.status import LessonStatus
from verified_triton.site.directives import DirectiveError
from verified_triton.site.door import Md, text

STALE_MARK = "⚠ older source"


def mode_label(record: Record) -> str:
    return "Interpreter (CPU)" if record.mode == "interpreter" else f"GPU: {record.env.device_name}"


def gpu_first(st: LessonStatus) -> list[Record]:
    """Every usable record: current before stale, GPU before interpreter (the GPU tab opens first)."""
    return sorted(st.records, key=lambda r: (not st.is_current(r), r.mode != "gpu", r.key))


def where(record: Record) -> Md:
    """Machine, versions and date of a record, once, as escaped text."""
    env = record.env
    if record.mode == "interpreter":
        return text(f"Triton {env.triton} interpreter on the CPU (torch {env.torch}), {record.date}")
    return text(f"{env.device_name}, Triton {env.triton}, torch {env.torch}"
                + (f", CUDA {env.cuda}" if env.cuda else "") + f", {record.date}")


def stale_note(st: LessonStatus, record: Record) -> Md:
    """'' for a current record; for an older one, a sentence that says so."""
    if st.is_current(record):
        return Md("")
    return Md("**{}:** recorded on {} for source {}; the lesson has changed since (now {}). Shown for reference "
              "only.").format(STALE_MARK, record.date, record.source_hash[:12], st.source_hash[:12])


def require_recorded(st: LessonStatus, what: str, name: str, names: Callable[[Record], Iterable[str]],
                     ran: Callable[[Record], bool] = lambda r: r.mode == "gpu", hint: str = "") -> None:
    """For a NAME no record holds: once a run of this source that would have recorded it has run (`ran`: a current
    GPU record), the name is a typo on the page, a DirectiveError naming what is recorded; before, nothing."""
    if any(ran(r) for r in st.current):
        known = sorted({n for r in st.records for n in names(r)})
        raise DirectiveError(f"no recorded {what} named '{name}' for lesson '{st.lesson.name}' "
                             f"(recorded {what}s: {', '.join(known) or 'none'}){hint}")
