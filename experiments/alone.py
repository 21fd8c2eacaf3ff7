"""Every lesson's learner files on this machine, as a learner runs them: the kernels module alone, then
`exercises.py --solutions` (issue 49: "runs alone ... on a GPU"; issue 50: "on a GPU it runs the same checks").

    python3 experiments/alone.py [--jobs 8] [--timeout 120] [LESSON ...]

Each lesson's two commands run in its own folder (the zip's layout: practice.py one folder up), JOBS lessons at
a time; a table of exit codes and each command's last line, then the full output of whatever failed. On a GPU
machine its side effect is also wanted: Triton's cache holds every kernel the lessons compile, so the recording
that follows compiles less. It records nothing: the evidence is verify.py's.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

CODE = Path(__file__).resolve().parent.parent / "code"


def run(folder: Path, argv: list[str], timeout: float) -> tuple[int | None, str, float]:
    t0 = time.monotonic()
    try:
        done = subprocess.run([sys.executable, *argv], cwd=folder, capture_output=True, text=True, timeout=timeout)
        code, out = done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired as exc:
        code, out = None, f"{exc.stdout or ''}{exc.stderr or ''}\n(killed after {timeout:g} s)"
    return code, out if isinstance(out, str) else out.decode(errors="replace"), time.monotonic() - t0


def lesson(folder: Path, timeout: float) -> list[tuple[str, int | None, str, float]]:
    kernels = folder / f"{folder.name.replace('-', '_')}.py"
    out = []
    for label, argv in ((kernels.name, [kernels.name]), ("exercises.py --solutions",
                                                          ["exercises.py", "--solutions"])):
        if (folder / argv[0]).is_file():
            out.append((label, *run(folder, argv, timeout)))
    return out


def last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:110] if lines else ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("lessons", nargs="*")
    parser.add_argument("--jobs", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args()
    folders = [CODE / name for name in args.lessons] or sorted(p.parent for p in CODE.glob("*/lesson.py"))
    with ThreadPoolExecutor(args.jobs) as pool:
        results = dict(zip(folders, pool.map(lambda f: lesson(f, args.timeout), folders), strict=True))
    failed = []
    for folder, runs in results.items():
        for label, code, out, seconds in runs:
            print(f"{folder.name:26s} {label:26s} rc={code!s:4s} {seconds:6.1f} s  {last_line(out)}")
            if code != 0:
                failed.append((folder.name, label, out))
    for name, label, out in failed:
        print(f"\n== {name}: {label}\n{out[-3000:]}")
    print(f"\n{sum(len(r) for r in results.values()) - len(failed)} of {sum(len(r) for r in results.values())} "
          "commands exited 0")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
