"""Scaffold a lesson: verified_triton/author/new_lesson.py (--help)."""

import sys

from verified_triton.author import new_lesson

if __name__ == "__main__":
    sys.exit(new_lesson.main(sys.argv[1:]))
