"""Every lesson as a zip archive and as a Jupyter notebook: verified_triton/site/downloads.py (--help)."""

import sys

from verified_triton.site import downloads

if __name__ == "__main__":
    sys.exit(downloads.main(sys.argv[1:]))
