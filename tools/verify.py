"""Run every lesson under Triton's interpreter and on a GPU, and record what happened.

The command line lives in verified_triton/author/verify.py; `python3 tools/verify.py --help` says everything.
This file only puts the package within reach (the folder of a script run as `python3 tools/verify.py` is on
sys.path) and calls it: a GPU machine runs it with its stock python3 and nothing installed.
"""

import sys

from verified_triton.author import verify

if __name__ == "__main__":
    sys.exit(verify.main(sys.argv[1:]))
