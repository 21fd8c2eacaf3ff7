"""Pack the records (and their figures) that verify.py wrote since MARKER into one bundle, atomically.

    python3 experiments/pack_new.py MARKER OUT.tar.gz gpu|sanitize

record_round.sh runs it every few seconds while a device call records, so a call that is stopped at its
time limit still brings back every lesson that finished: the bundle is replaced whole (written beside,
then renamed), never left half-written. With each record go the figures it names. Only plain files
`<lesson>/<key>.json` and `<lesson>/<key>/<figure>.png` go in, the shape `verify.py --import` accepts.
"""

import os
import sys
import tarfile
from pathlib import Path

marker, out, mode = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
since = marker.stat().st_mtime
evidence = Path("evidence")
members = []
for record in sorted(evidence.glob(f"*/{mode}-*.json")):
    if record.is_file() and not record.is_symlink() and record.stat().st_mtime >= since:
        members.append(record)
        figures = record.with_suffix("")
        if figures.is_dir():
            # Every figure the record names, new or not: verify.py leaves a figure whose content (and so
            # whose hashed name) did not change untouched, and the importer takes a record only whole.
            named = record.read_text(encoding="utf-8", errors="replace")
            members += [f for f in sorted(figures.glob("*.png"))
                        if f.is_file() and not f.is_symlink() and f'"{f.name}"' in named]
if members:
    partial = out.with_name(out.name + ".part")
    with tarfile.open(partial, "w:gz") as tar:
        for path in members:
            tar.add(path, arcname=str(path.relative_to(evidence)), recursive=False)
    os.replace(partial, out)
print(f"{out.name}: {sum(1 for m in members if m.suffix == '.json')} records")
