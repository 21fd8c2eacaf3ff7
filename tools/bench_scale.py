"""Time the tools on a course of 200 lessons: verified_triton/author/bench_scale.py (--help)."""

import sys

from verified_triton.author import bench_scale

if __name__ == "__main__":
    sys.exit(bench_scale.main(sys.argv[1:]))
