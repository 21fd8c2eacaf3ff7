"""List or show a lesson's snippet regions: verified_triton/site/snippets.py."""

import sys

from verified_triton.site import snippets

if __name__ == "__main__":
    sys.exit(snippets.main(sys.argv[1:]))
