"""The CI plan of record.yml (its plan and publish jobs): verified_triton/author/ci_plan.py, whose docstring says how.

Like tools/verify.py, this file only puts the package within reach and calls it (stock python3, nothing installed).
"""

import sys

from verified_triton.author import ci_plan

if __name__ == "__main__":
    sys.exit(ci_plan.main(sys.argv[1:]))
