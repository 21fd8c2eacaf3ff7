"""Every size limit on untrusted input, in one place.

Lesson sources, lesson.toml files, evidence records, figures and bundles are
read through these limits, enforced while reading (a read stops at the limit;
nothing is read whole first and checked after). `rows()` feeds the table in
docs/verification.md through the `::limits` directive, so the documentation
cannot drift from the code. The limits are generous for real lessons: the
largest recorded lesson uses a few percent of each.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from verified_triton.core.numfmt import number

KIB, MIB = 1024, 1024 * 1024


@dataclass(frozen=True)
class Limits:
    source_file: int = 1 * MIB  # a lesson source or lesson.toml
    record_json: int = 8 * MIB  # one evidence record
    release_json: int = 64 * KIB  # one record of a run under another Triton release (evidence/<lesson>/releases/)
    releases: int = 48  # release records per lesson; the status page shows the newest 12 minor releases
    figure: int = 4 * MIB  # one PNG
    figures_per_record: int = 24
    stream_kept: int = 64 * KIB  # stdout or stderr kept per run (head and tail)
    results_json: int = 8 * MIB  # the results file a lesson writes while it runs
    exercises_json: int = 1 * MIB  # a lesson's exercises record, and the proof file it is made from
    exercises: int = 50  # exercises per lesson, and mistakes declared per exercise
    string: int = 4000  # characters of any one recorded string but the streams
    name: int = 120  # characters of a check, benchmark, table or figure name
    environment: int = 120  # characters of a version, platform, device or driver name (shown on every row)
    checks: int = 2000  # per record
    benchmarks: int = 200
    tables: int = 50
    table_rows: int = 500
    table_columns: int = 24
    samples: int = 200  # timed rounds kept per benchmark
    history: int = 12  # earlier results kept per benchmark
    rows_shown: int = 100  # rows of one table on a page; the rest fold away, then are cut
    amplification: int = 8  # bytes one record may add to any one generated file, per byte of the record...
    amplification_allowance: int = 64 * KIB  # ...beyond this much markup for its (bounded number of) rows
    bundle_members: int = 5000
    bundle_member: int = 8 * MIB  # one file inside a bundle, uncompressed
    bundle_total: int = 512 * MIB  # all files inside one bundle, uncompressed
    bundle_file: int = 256 * MIB  # the bundle itself, compressed
    sanitizer_print_limit: int = 200  # records compute-sanitizer prints per run (--print-limit); it counts all
    sanitizer_log: int = 4 * MIB  # of one compute-sanitizer log read and parsed (its last 64 KiB always)
    sanitizer_log_kept: int = 32 * KIB  # of that log kept in the record (head and tail)
    sanitizer_findings: int = 50  # distinct findings kept per tool run (the lesson's first); the rest counted
    sanitizer_text: int = 300  # characters of a finding's message or detail
    gh_output: int = 4 * MIB  # what `gh attestation verify` prints for one bundle (a few attestations)
    json_depth: int = 32  # levels of nesting in the JSON gh prints (its attestations nest about 8 deep)

    def rows(self) -> list[tuple[str, str, str]]:
        """(what, limit, where enforced) for the documentation table."""
        out = []
        for f in fields(self):
            value = getattr(self, f.name)
            out.append((DESCRIPTIONS[f.name], _human(value, f.name), WHERE[f.name]))
        return out


def _human(value: int, name: str) -> str:
    if name == "amplification":
        return f"{value} × the record's size"
    if name in BYTE_LIMITS:
        return f"{value // MIB} MiB" if value >= MIB else f"{value // KIB} KiB"
    return number(value)


BYTE_LIMITS = {"source_file", "record_json", "release_json", "figure", "stream_kept", "results_json",
               "exercises_json", "bundle_member",
               "bundle_total", "bundle_file", "amplification_allowance", "sanitizer_log", "sanitizer_log_kept",
               "gh_output"}
DESCRIPTIONS = {
    "source_file": "a lesson source file or lesson.toml",
    "record_json": "one evidence record (JSON)",
    "release_json": "one record of a run under another Triton release (JSON)",
    "releases": "release records per lesson (the status page's table shows the 12 newest minor releases)",
    "figure": "one figure (PNG)",
    "figures_per_record": "figures per record",
    "stream_kept": "standard output or error kept per run (head and tail)",
    "results_json": "the results file a lesson writes while it runs",
    "exercises_json": "a lesson's exercises record (JSON), and the proof its checks write",
    "exercises": "exercises per lesson, and mistakes declared per exercise",
    "string": "characters of one recorded text (a message, a caption, a cell)",
    "name": "characters of a check, benchmark, table or figure name",
    "environment": "characters of a version, platform, device or driver name in a record",
    "checks": "checks per record",
    "benchmarks": "benchmarks per record",
    "tables": "tables per record",
    "table_rows": "rows per recorded table",
    "table_columns": "columns per recorded table",
    "samples": "timed rounds kept per benchmark",
    "history": "earlier results kept per benchmark",
    "rows_shown": "rows of one table shown on a page (more fold away; past 4 times this, cut)",
    "amplification": "what one record adds to any one generated file (a page, the search index, a notebook, "
                     "a README), every number in it written at most 13 characters wide",
    "amplification_allowance": "markup one record's rows may add on top of that (its rows are bounded above)",
    "bundle_members": "files in one bundle",
    "bundle_member": "one file in a bundle, uncompressed",
    "bundle_total": "all files in one bundle, uncompressed",
    "bundle_file": "a bundle file, compressed",
    "sanitizer_print_limit": "records compute-sanitizer prints per tool run (--print-limit; its summary counts all)",
    "sanitizer_log": "one compute-sanitizer log, read and parsed (its last 64 KiB, with the summaries, always)",
    "sanitizer_log_kept": "one compute-sanitizer log, kept in the record (head and tail)",
    "sanitizer_findings": "distinct findings kept per tool run, the lesson's kernels' first (the rest counted)",
    "sanitizer_text": "characters of a finding's message or detail",
    "gh_output": "what `gh attestation verify` prints about one bundle",
    "json_depth": "levels of nesting in the JSON `gh attestation verify` prints",
}
WHERE = {
    "source_file": "verify, build", "record_json": "verify, status, build, import",
    "release_json": "verify, status, build",
    "releases": "verify, status, build", "figure": "verify, build, import",
    "figures_per_record": "schema", "stream_kept": "verify (while capturing)", "results_json": "verify",
    "exercises_json": "verify, status, build", "exercises": "schema",
    "string": "schema", "name": "schema", "environment": "schema", "checks": "schema", "benchmarks": "schema",
    "tables": "schema",
    "table_rows": "schema", "table_columns": "schema", "samples": "schema", "history": "schema",
    "rows_shown": "build", "amplification": "build (tests/test_hostile_amplify.py)",
    "amplification_allowance": "build (tests/test_hostile_amplify.py)", "bundle_members": "import",
    "bundle_member": "import (while extracting)",
    "bundle_total": "import (while extracting)", "bundle_file": "import",
    "sanitizer_print_limit": "verify --mode sanitize (the tool's option)", "sanitizer_log": "verify (while reading)",
    "sanitizer_log_kept": "verify, schema", "sanitizer_findings": "verify, schema", "sanitizer_text": "verify",
    "gh_output": "import --require-attestation (while reading)", "json_depth": "import --require-attestation",
}

LIMITS = Limits()
