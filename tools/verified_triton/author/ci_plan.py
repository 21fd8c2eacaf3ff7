"""The CI plan's command line: what `.github/workflows/record.yml` runs, so the workflow holds no planner of its own.

    python3 tools/ci_plan.py matrices      the plan job: RUNNERS, SHARDS, TRITON from the environment, the
                                           matrices to $GITHUB_OUTPUT (gpu, interpreter, bundles)
    python3 tools/ci_plan.py bundles DIR --gpu JSON --interpreter JSON
                                           publish: exactly one bundle from each record job under DIR

The plan itself is record/plan.py's (`ci_plan`, `bundle_problems`), beside the shards it splits. A refusal
is printed as a workflow error (`::error::`) and exits 1.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from verified_triton.core.paths import CODE_DIR
from verified_triton.core.terminal import safe
from verified_triton.record.plan import PlanError, bundle_problems, ci_plan


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="ci_plan.py", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("matrices", help="the plan job: matrices from RUNNERS, SHARDS and TRITON into $GITHUB_OUTPUT")
    bundles = sub.add_parser("bundles", help="publish: one bundle from each record job, and nothing else")
    bundles.add_argument("folder", type=Path)
    bundles.add_argument("--gpu", required=True, help="the plan's gpu matrix (JSON)")
    bundles.add_argument("--interpreter", required=True, help="the plan's interpreter matrix (JSON)")
    args = p.parse_args(argv)
    if args.command == "matrices":
        return matrices(os.environ)
    return check_bundles(args.folder, args.gpu, args.interpreter)


def matrices(env) -> int:
    try:
        plan = ci_plan(env.get("RUNNERS", ""), env.get("SHARDS", ""), env.get("TRITON", ""), CODE_DIR)
    except PlanError as exc:
        print(f"::error::{safe(str(exc))}")
        return 1
    with open(env["GITHUB_OUTPUT"], "a", encoding="utf-8") as out:
        for name in ("gpu", "interpreter", "bundles"):
            out.write(f"{name}={json.dumps(plan[name])}\n")
    sets = len({job["name"] for job in plan["gpu"]})
    print(f"{len(plan['gpu'])} GPU jobs over {sets} label set(s), {len(plan['interpreter'])} interpreter jobs")
    return 0


def check_bundles(folder: Path, gpu: str, interpreter: str) -> int:
    try:
        problems = bundle_problems(folder, json.loads(gpu), json.loads(interpreter))
    except (json.JSONDecodeError, RecursionError, TypeError, KeyError) as exc:
        problems = [f"the plan's matrices cannot be read: {exc}"]
    for problem in problems:
        print(f"::error::{safe(problem)}")
    print(f"{len(list(folder.iterdir())) if folder.is_dir() else 0} bundles checked against the plan: "
          + ("refused" if problems else "one from each record job, and nothing else"))
    return 1 if problems else 0
