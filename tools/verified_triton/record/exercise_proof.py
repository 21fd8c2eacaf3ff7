"""Prove a lesson's exercise checks: run by record/exercises.py as a script, in the lesson's folder.

    VT_PROOF_OUT=OUT.json TRITON_INTERPRET=1 python exercise_proof.py     (working directory: code/<lesson>/)

One process runs every check of exercises.py (code/practice.py's CHECKS) three ways: on the starter
(exercises.py itself: it must fail), on solutions.py (it must pass) and on each mistake solutions.py
declares in MISTAKES, loaded as a module of its own with the mistake's edit made (each must fail,
saying what it declares). It writes what each attempt said to $VT_PROOF_OUT; record/exercises.py reads it
through the schema and judge/exercises.py judges it. Loading each mutant in this one process keeps
Triton and torch imported once: the lesson's whole proof costs one interpreter start.

This file runs under the lesson's Python with the lesson's imports (torch, Triton, practice.py), not
the tools': it imports nothing of verified_triton, and nothing here is trusted by the judge. It runs as a
copy in a scratch folder, with PYTHONPATH naming the lesson's folder, so no module of the tools' folders
can stand in for one of the lesson's.
"""

import importlib
import importlib.util
import itertools
import json
import linecache
import os
import platform
import sys
import types
from dataclasses import asdict
from pathlib import Path

MUTANTS = itertools.count(1)


def load_exercises(folder: Path) -> types.ModuleType:
    """exercises.py as the module `exercises` (its `if __name__ == "__main__"` stays idle)."""
    spec = importlib.util.spec_from_file_location("exercises", folder / "exercises.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["exercises"] = module
    spec.loader.exec_module(module)
    return module


def mutant(practice, path: Path, mistake) -> types.ModuleType:
    """solutions.py with `mistake` made (its `find` replaced once, above MISTAKES), as a module of its own."""
    code, declared, rest = path.read_text(encoding="utf-8").partition("\nMISTAKES = ")
    found = code.count(mistake.find)
    if found != 1:
        raise practice.Wrong(f"the mistake's find text {mistake.find!r} occurs {found} times in {path.name} "
                             "above MISTAKES, not once")
    text = code.replace(mistake.find, mistake.replace) + declared + rest
    number = next(MUTANTS)
    file, name = f"{path.name}:{number}", f"solutions_mistake_{number}"
    linecache.cache[file] = (len(text), None, text.splitlines(True), file)  # Triton reads a kernel's source back
    module = sys.modules[name] = types.ModuleType(name)
    module.__file__ = file
    exec(compile(text, file, "exec"), module.__dict__)
    return module


def attempt(practice, ex, load) -> dict:
    try:
        m = load()
    except Exception as exc:  # noqa: BLE001 - a declaration that cannot load: no proof
        return {"status": "error", "message": practice.raised(exc, None)}
    status, message = practice.attempt(ex, m)
    return {"status": status, "message": message}


def prove(folder: Path) -> dict:
    starter = load_exercises(folder)
    practice = sys.modules["practice"]
    solutions = importlib.import_module("solutions")
    declared = getattr(solutions, "MISTAKES", {})
    path = Path(solutions.__file__)
    proof = []
    for name, ex in practice.CHECKS.items():
        entry = {"name": name, "hint": ex.hint, "needs_gpu": ex.needs_gpu,
                 "starter": attempt(practice, ex, lambda: starter),
                 "solution": attempt(practice, ex, lambda: solutions), "mistakes": []}
        for mistake in declared.get(name, []):
            result = attempt(practice, ex, lambda m=mistake: mutant(practice, path, m))
            entry["mistakes"].append({**asdict(mistake), **result})
        proof.append(entry)
    unknown = sorted(set(declared) - set(practice.CHECKS))
    import torch
    import triton
    return {"exercises": proof, "unknown_mistakes": unknown,
            "env": {"python": platform.python_version(), "torch": torch.__version__, "triton": triton.__version__}}


def main() -> int:
    out, folder = os.environ["VT_PROOF_OUT"], Path.cwd()
    Path(out).write_text(json.dumps(prove(folder), indent=1, ensure_ascii=False), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
