"""Bundles: records and figures carried between machines as one archive.

One job: write a bundle on the machine that recorded, and merge bundles here
without trusting them (status.contradictions judges every record, its key
is derived from its device, a date ahead of this machine's clock is refused,
its own history is dropped). A bundle is read as a stream with every size bounded
while reading (members, each member, the total); only plain files named
`<lesson>/<key>.json` and `<lesson>/<key>/<figure>.png` are accepted. Each
bundle is all-or-nothing: everything in it is validated (schema, current
source, figures present, PNG and named by the hash of their bytes) before anything is written, and one refused
member refuses the bundle. Several bundles merge together; two records for
the same lesson, mode and GPU model keep the newer by start time, and say so.
Replacing a current record here by a different one for the same source
(changes.differences lists what: every field but the few that may change
silently or within their noise rule), or adding a first record of a new GPU
model, in any mode on a GPU, beside current records of other models, needs
`--accept-changes`.
"""

from __future__ import annotations

import dataclasses
import datetime
import gzip
import io
import re
import tarfile
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from verified_triton.core import schema
from verified_triton.core.lessons import Lesson
from verified_triton.core.limits import LIMITS
from verified_triton.core.numfmt import counted, exact
from verified_triton.judge.evidence import (
    PNG_MAGIC,
    EvidenceError,
    Record,
    check_writable,
    figure_files,
    figure_mismatch,
    lesson_records,
    parse_json,
    read_figure,
    read_record,
    record_from_json,
    record_path,
    write_record,
)
from verified_triton.judge.status import contradictions
from verified_triton.record.changes import (
    Change,
    FindingChange,
    carry_history,
    changes,
    differences,
    finding_changes,
    new_model,
)
from verified_triton.record.report import changed_files

# A key: interpreter, gpu-<slug> (64 at most) or sanitize-gpu-<slug> (73).
MEMBER = re.compile(r"\A(?P<lesson>[a-z0-9][a-z0-9-]{0,63})/(?:(?P<key>[a-z0-9-]{1,73})\.json|"
                    r"(?P<fkey>[a-z0-9-]{1,64})/(?P<file>[A-Za-z0-9][A-Za-z0-9._-]{0,150}\.png))\Z")


def write_bundle(path: Path, records: list[Record], evidence_dir: Path) -> None:
    """One archive with the records and their figures."""
    with tarfile.open(path, "w:gz") as tar:
        for rec in records:
            _add(tar, f"{rec.lesson}/{rec.key}.json", rec.to_json().encode())
            for file in figure_files(rec):
                _add(tar, f"{rec.lesson}/{rec.key}/{file}", read_figure(evidence_dir, rec, file))
    print(f"bundle: {counted(len(records), 'record')} -> {path}")


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), int(time.time()), 0o644
    tar.addfile(info, io.BytesIO(data))


@dataclass
class Incoming:
    bundle: Path
    record: Record
    figures: dict[str, bytes]


@dataclass
class ImportReport:
    merged: list[Record] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # "bundle:member: why"
    notes: list[str] = field(default_factory=list)  # conflicts resolved, members not selected
    changes: list[Change | FindingChange] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)  # "lesson/key": the same record is here already
    held: list[str] = field(default_factory=list)  # "lesson/key: what -> what": needs --accept-changes

    @property
    def ok(self) -> bool:
        return not self.refused and not self.held and bool(self.merged or self.unchanged)


FUTURE_SLACK = datetime.timedelta(days=1)  # clocks differ; a record dated further ahead than this is refused


def import_bundles(paths: list[Path], lessons: dict[str, Lesson], evidence_dir: Path,
                   selected: set[str] | None = None, accept_changes: bool = False,
                   now: datetime.datetime | None = None, sources: dict[Path, Path] | None = None) -> ImportReport:
    """Validate every bundle, resolve conflicts between them, then write what was accepted.

    A record that would replace a record here for the same source by one
    that differs in anything that source determines (changes.differences), or
    a new GPU model's first record beside current ones of other models, is a
    change: every change is listed and nothing at all is written unless
    `accept_changes`. The same record twice is no change. `sources`: the
    file to read for a bundle (its private copy, provenance.private_copies),
    when it is not the bundle's own path, which messages name.
    """
    report = ImportReport()
    now = now or datetime.datetime.now(datetime.UTC)
    accepted: dict[tuple[str, str], Incoming] = {}
    for path in paths:
        incoming, refused, notes = read_bundle(path, lessons, selected, now, (sources or {}).get(path))
        report.notes += notes
        for item in incoming:  # a link under evidence/ would take the write outside the repository
            try:
                check_writable(evidence_dir, item.record.lesson, item.record.key, item.figures)
            except EvidenceError as exc:
                refused.append(f"{path}:{item.record.lesson}/{item.record.key}.json: {exc}; refused")
        if refused:
            report.refused += refused
            if incoming:
                report.refused.append(f"{path}: nothing from this bundle was imported ({len(refused)} member(s) "
                                      f"refused; a bundle is imported whole or not at all)")
            continue
        for item in incoming:
            key = (item.record.lesson, item.record.key)
            other = accepted.get(key)
            if other is not None:
                keep, drop = sorted((item, other), key=lambda x: x.record.started_utc, reverse=True)
                report.notes.append(f"conflict: {key[0]}/{key[1]} is in {other.bundle} ({other.record.started_utc}) "
                                    f"and {item.bundle} ({item.record.started_utc}); kept the newer, from "
                                    f"{keep.bundle}")
                accepted[key] = keep
            else:
                accepted[key] = item
    writes = []
    for (lesson, key), item in sorted(accepted.items()):
        previous = _record_here(evidence_dir, lessons[lesson], key, report)
        if previous is not None and _same(previous, item.record) and _figures_here(evidence_dir, previous,
                                                                                    item.figures):
            report.unchanged.append(f"{lesson}/{key}")
            continue
        if previous is not None and previous.source_hash == item.record.source_hash:
            report.held += [f"{lesson}/{key}: {change}" for change in differences(previous, item.record)]
        elif previous is None:
            others = _current_of_other_models(evidence_dir, lessons[lesson], item.record)
            report.held += [f"{lesson}/{key}: {change}" for change in new_model(item.record, others)]
        writes.append((item, previous))
    if report.held and not accept_changes:
        return report  # every change is listed; nothing is replaced
    for item, previous in writes:
        carry_history(item.record, previous)
        write_record(evidence_dir, item.record, item.figures)
        report.merged.append(item.record)
        report.changes += [*changes(item.record, previous), *finding_changes(item.record, previous)]
    report.held = []  # accepted
    return report


def _record_here(evidence_dir: Path, lesson: Lesson, key: str, report: ImportReport) -> Record | None:
    """The usable record here for this lesson and key, if any; an unusable one is noted and replaced."""
    path = record_path(evidence_dir, lesson.name, key)
    if not path.exists():
        return None
    try:
        previous = read_record(path, evidence_dir)
    except EvidenceError as exc:
        report.notes.append(f"{path}: the record here is unusable and is replaced ({exc})")
        return None
    found = contradictions(lesson, previous)
    if found:
        report.notes.append(f"{path}: the record here contradicts itself and is replaced ({'; '.join(found)})")
        return None
    return previous


def _current_of_other_models(evidence_dir: Path, lesson: Lesson, incoming: Record) -> list[Record]:
    """The usable records here of `incoming`'s mode from other GPU models, for the source it was recorded from."""
    records, _problems = lesson_records(evidence_dir, lesson.name)
    return [r for r in records if r.mode == incoming.mode and r.key != incoming.key
            and r.source_hash == incoming.source_hash and not contradictions(lesson, r)]


def _same(here: Record, incoming: Record) -> bool:
    """The same recording: equal in everything but the history (which is this repository's own)."""
    return dataclasses.replace(here, history={}) == dataclasses.replace(incoming, history={})


def _figures_here(evidence_dir: Path, record: Record, figures: dict[str, bytes]) -> bool:
    """Whether every figure of `record` is here with the bytes the bundle brings (a planted file is not)."""
    try:
        return all(read_figure(evidence_dir, record, file) == figures[file] for file in figure_files(record))
    except EvidenceError:
        return False


class _Budget:
    """A file object that refuses to hand out more than `limit` bytes (the decompressed stream)."""

    def __init__(self, raw, limit: int):
        self.raw, self.left = raw, limit

    def read(self, size: int = -1) -> bytes:
        data = self.raw.read(size if size >= 0 else self.left + 1)
        self.left -= len(data)
        if self.left < 0:
            raise _TooBig()
        return data


class _TooBig(Exception):
    pass


def read_bundle(path: Path, lessons: dict[str, Lesson], selected: set[str] | None,
                now: datetime.datetime | None = None, source: Path | None = None
                ) -> tuple[list[Incoming], list[str], list[str]]:
    """(records with their figures, refusals, notes) of one bundle; nothing is written. `source`: the file
    to read, when not `path` itself (its private copy); messages name `path`."""
    source = source or path
    try:
        size = source.stat().st_size
    except OSError as exc:
        return [], [f"{path}: cannot be read ({exc.strerror})"], []
    if not source.is_file() or source.is_symlink():
        return [], [f"{path}: not a plain file"], []
    if size > LIMITS.bundle_file:
        return [], [f"{path}: {exact(size)} bytes, over the limit of {exact(LIMITS.bundle_file)}"], []
    try:
        with open(source, "rb") as raw:
            gzipped = raw.read(2) == b"\x1f\x8b"
            raw.seek(0)
            # Every decompressed byte passes the budget, tar headers included (a crafted
            # header can claim gigabytes): the stream stops at the limit, whatever it holds.
            budget = _Budget(gzip.GzipFile(fileobj=raw) if gzipped else raw,
                             LIMITS.bundle_total + 1024 * (LIMITS.bundle_members + 2))
            with tarfile.open(fileobj=budget, mode="r|") as tar:
                items, refused, notes = _members(path, tar, selected)
                jsons, pngs = items
            while not refused and budget.read(1 << 16):  # read to the end: a cut or corrupt end is refused too
                pass
    except _TooBig:
        return [], [f"{path}: more than {exact(LIMITS.bundle_total)} bytes uncompressed; refused whole"], []
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        return [], [f"{path}: not a readable bundle, or truncated ({exc}); nothing imported"], []
    if refused and not (jsons or pngs):
        return [], refused, notes
    return _records(path, jsons, pngs, lessons, refused, notes, now or datetime.datetime.now(datetime.UTC))


def _members(path: Path, tar: tarfile.TarFile, selected: set[str] | None):
    """The bundle's records and figures by member name; refusals and notes for the rest."""
    jsons: dict[str, bytes] = {}
    pngs: dict[str, bytes] = {}
    refused, notes = [], []
    count, total = 0, 0
    seen: set[str] = set()
    for member in tar:
        count += 1
        if count > LIMITS.bundle_members:
            return ({}, {}), [f"{path}: more than {LIMITS.bundle_members} members; refused whole"], notes
        name = member.name
        if not (name.isascii() and name.isprintable()):
            refused.append(f"{path}:{ascii(name)[1:-1][:200]}: a name with a newline, control or non-ASCII "
                           "character; refused")
            continue
        where = f"{path}:{name[:200]}"
        if name in seen:  # a tar keeps both, and extracting it lets the last one win, silently
            refused.append(f"{where}: a second member of this name; refused")
            continue
        seen.add(name)
        if member.isdir():
            notes.append(f"{where}: a folder entry, skipped")
            continue
        if not member.isfile():
            kind = "a link" if (member.issym() or member.islnk()) else "not a plain file"
            refused.append(f"{where}: {kind}; refused")
            continue
        match = MEMBER.match(name)
        if not match:
            refused.append(f"{where}: not a record (<lesson>/<key>.json) or figure "
                           "(<lesson>/<key>/<name>.png); refused")
            continue
        if selected is not None and match["lesson"] not in selected:
            notes.append(f"{where}: lesson not selected, skipped")
            continue
        limit = LIMITS.bundle_member
        total += member.size
        if member.size > limit or total > LIMITS.bundle_total:
            why = (f"{exact(member.size)} bytes, over the limit of {exact(limit)}" if member.size > limit
                   else f"the members pass {exact(LIMITS.bundle_total)} bytes in all")
            return ({}, {}), [*refused, f"{where}: {why}; the bundle is refused whole"], notes
        data = tar.extractfile(member).read(limit + 1)
        (jsons if match["key"] else pngs)[name] = data
    return (jsons, pngs), refused, notes


def _records(path: Path, jsons: dict[str, bytes], pngs: dict[str, bytes], lessons: dict[str, Lesson],
             refused: list[str], notes: list[str], now: datetime.datetime
             ) -> tuple[list[Incoming], list[str], list[str]]:
    incoming = []
    used_pngs: set[str] = set()
    for name, data in sorted(jsons.items()):
        where = f"{path}:{name}"
        try:
            record = record_from_json(parse_json(data, where), where)
        except EvidenceError as exc:
            refused.append(f"{exc}; refused")
            continue
        problem = _record_problem(record, name, lessons) or _future(record, now)
        if problem:
            refused.append(f"{where}: {problem}; refused")
            continue
        figures = {}
        for file in figure_files(record):
            member = f"{record.lesson}/{record.key}/{file}"
            data = pngs.get(member)
            if data is None:
                refused.append(f"{where}: figure {file} is not in the bundle; refused")
            elif not data.startswith(PNG_MAGIC) or len(data) > LIMITS.figure:
                refused.append(f"{path}:{member}: not a PNG within {exact(LIMITS.figure)} bytes; refused")
            elif figure_mismatch(file, data):  # a figure is named by its content: checked, never believed
                refused.append(f"{path}:{member}: {figure_mismatch(file, data)}; refused")
            else:
                figures[file] = data
                used_pngs.add(member)
        incoming.append(Incoming(path, record, figures))
    for member in sorted(set(pngs) - used_pngs):
        refused.append(f"{path}:{member}: a figure no record in the bundle names; refused")
    if not jsons and not refused:
        refused.append(f"{path}: no records in this bundle")
    return incoming, refused, notes


def _future(record: Record, now: datetime.datetime) -> str:
    started = schema.utc_stamp(record.started_utc)  # read through the schema: a strict stamp
    if started is not None and started > now + FUTURE_SLACK:
        return (f"started_utc: {record.started_utc} is more than a day ahead of this machine's clock "
                f"({now.strftime(schema.UTC_FORMAT)})")
    return ""


def _record_problem(record: Record, member: str, lessons: dict[str, Lesson]) -> str:
    lesson = lessons.get(record.lesson)
    if lesson is None:
        return f"no lesson '{record.lesson}' here"
    # The key itself was checked against the mode and the device when the record was read (evidence's value
    # rules); what is left is that the member is filed under it.
    if member != f"{record.lesson}/{record.key}.json":
        return "a misnamed record (its member name does not match its lesson and key)"
    current = lesson.source_hash()
    if record.source_hash != current:
        changed = changed_files(lesson, record)
        return (f"recorded for source {record.source_hash[:12]}, but the current source is {current[:12]} "
                f"(differs in {', '.join(changed) or 'the file list'})")
    return "; ".join(contradictions(lesson, record))
