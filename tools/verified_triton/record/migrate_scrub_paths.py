"""One-off migration (issue 20): take the paths of the recording machine out of the committed records.

    .venv/bin/python tools/migrate.py            clean every evidence/<lesson>/<key>.json in place
    .venv/bin/python tools/migrate.py --check    exit 1 if any record still holds such a path; change nothing

Records written before tools/verified_triton/record/scrub.py kept absolute paths in what a run
printed (a warning from <site-packages>, a traceback through the temporary
folder), and until issue 30 the scrubber skipped what each step printed and
other texts (a check's why, a prediction's basis, a warning's example...).
This rewrites exactly those texts with the scrubber verify now uses before
it writes a record (every text but names, keys, hashes and stamps), and nothing else: the source hash, the file list,
the figures and every other field stay as they are, so no record goes stale
and none needs re-recording. It is idempotent: a clean record is not touched,
and running it again changes nothing.
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

from verified_triton.core.paths import ROOT
from verified_triton.judge.evidence import EvidenceError, atomic_write_text, read_record
from verified_triton.record.scrub import scrub_record, scrubber


def migrate(evidence_dir: Path, check: bool = False) -> list[Path]:
    """The records that held machine paths (cleaned in place unless `check`)."""
    scrub = scrubber(ROOT)
    changed = []
    for path in sorted(evidence_dir.glob("*/*.json")):
        try:
            record = read_record(path, evidence_dir)
        except EvidenceError as exc:
            print(f"skipped: {exc}", file=sys.stderr)
            continue
        clean = copy.deepcopy(record)
        scrub_record(clean, scrub)
        if clean == record:
            continue
        assert (clean.source_hash, clean.source_files) == (record.source_hash, record.source_files)
        changed.append(path)
        if not check:
            atomic_write_text(path, clean.to_json())
    return changed


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="scrub_paths.py", description=__doc__.split("\n")[0])
    parser.add_argument("--evidence-dir", type=Path, default=ROOT / "evidence")
    parser.add_argument("--check", action="store_true", help="report records that need it; change nothing")
    args = parser.parse_args(argv)
    changed = migrate(args.evidence_dir.absolute(), args.check)
    for path in changed:
        print(f"{'holds machine paths' if args.check else 'cleaned'}: {path}")
    print(f"{len(changed)} record(s) {'to clean' if args.check else 'cleaned'}")
    return 1 if (args.check and changed) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
