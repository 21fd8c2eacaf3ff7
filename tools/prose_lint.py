"""Check the lesson pages' prose: verified_triton/author/prose_lint.py."""

import sys

from verified_triton.author import prose_lint

if __name__ == "__main__":
    sys.exit(prose_lint.main(sys.argv[1:]))
