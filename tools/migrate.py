"""Take the recording machines' paths out of committed records: verified_triton/record/migrate_scrub_paths.py.

    .venv/bin/python tools/migrate.py            clean every evidence/<lesson>/<key>.json in place
    .venv/bin/python tools/migrate.py --check    exit 1 if any record still holds such a path; change nothing
"""

import sys

from verified_triton.record import migrate_scrub_paths

if __name__ == "__main__":
    sys.exit(migrate_scrub_paths.main(sys.argv[1:]))
