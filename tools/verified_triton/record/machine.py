"""What this machine can run: Python, torch and Triton versions, and its GPUs.

One job: describe the machine without importing torch (nvidia-smi for GPUs,
package metadata for versions), so planning a run or bundling evidence costs
milliseconds; and, before a mode runs, check in a child process that this
Python can do what the mode needs (`mode_problem`). What actually ran is
recorded by the kit from inside the lesson.
Tests can pretend to have GPUs with VT_FAKE_GPUS="0:NVIDIA H200,1:NVIDIA H200".
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import platform
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from verified_triton.core.paths import ROOT
from verified_triton.core.safefs import UnsafePathError, write_bytes


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    driver: str = ""


@dataclass(frozen=True)
class Machine:
    python: str
    torch: str
    triton: str
    platform: str
    gpus: tuple[Gpu, ...] = field(default_factory=tuple)

    @property
    def has_gpu(self) -> bool:
        return bool(self.gpus)

    def gpu(self, index: int | None = None) -> Gpu | None:
        if not self.gpus:
            return None
        if index is None:
            return self.gpus[0]
        return next((g for g in self.gpus if g.index == index), None)


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def probe_gpus() -> tuple[Gpu, ...]:
    """Every GPU nvidia-smi lists (honouring CUDA_VISIBLE_DEVICES="" as none)."""
    fake = os.environ.get("VT_FAKE_GPUS")
    if fake is not None:
        return tuple(Gpu(int(i), name) for i, _, name in (item.partition(":") for item in fake.split(",")) if i)
    if os.environ.get("CUDA_VISIBLE_DEVICES") == "" or not shutil.which("nvidia-smi"):
        return ()
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index,name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return ()
    if out.returncode != 0:
        return ()
    gpus = []
    for line in out.stdout.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3 and parts[0].isdigit():
            gpus.append(Gpu(int(parts[0]), parts[1], parts[2]))
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible:
        wanted = [int(v) for v in visible.split(",") if v.strip().isdigit()]
        gpus = [g for g in gpus if g.index in wanted]
    return tuple(gpus)


def this_machine() -> Machine:
    return Machine(platform.python_version(), _version("torch"), _version("triton"),
                   f"{platform.system()} {platform.machine()}", probe_gpus())


# -- can this Python run a mode? ------------------------------------------------------------

SETUP = ("a Python with torch, triton and numpy; `bash tools/dev.sh author` creates one (.venv, the author's "
         "environment), then run `.venv/bin/python tools/verify.py`")
ENV_MODULES = ("numpy", "torch", "triton")  # what every lesson imports besides the kit (matplotlib only to plot)
PROJECT = ROOT
CHECKED = PROJECT / ".cache" / "preflight"  # one empty file per successful check (.cache/ is not committed)

# Run in a child, as a lesson would be: the same interpreter, environment and import path.
PROBE = """\
import json, sys
mode, found = sys.argv[1], {}
modules = {}
for name in sys.argv[2:]:  # ENV_MODULES
    try:
        modules[name] = __import__(name)
    except BaseException as exc:
        found.setdefault("problem", f"this Python ({sys.executable}) cannot import {name} ({type(exc).__name__}: "
                                    f"{str(exc)[:200]})")
if "problem" not in found and mode == "interpreter":
    try:
        import triton.runtime.interpreter
    except BaseException as exc:
        found["problem"] = f"this Triton has no interpreter ({type(exc).__name__}: {str(exc)[:200]})"
if "problem" not in found and mode == "gpu" and not modules["torch"].cuda.is_available():
    found["problem"] = "torch sees no CUDA device here (torch.cuda.is_available() is False)"
print(json.dumps(found))
"""


def mode_problem(mode: str) -> str:
    """'' when this Python can run `mode` ("interpreter" or "gpu"); otherwise why not, in words.

    The check imports numpy, torch and Triton in a child process (a second or
    two); a success is remembered, keyed by the interpreter, the import path
    and the installed packages' files, so a re-run costs nothing.
    """
    if mode == "gpu" and os.environ.get("VT_FAKE_GPUS") is not None:
        mode = "imports"  # tests pretend to have GPUs: torch cannot see them, the lessons do not ask
    key = _probe_key(mode)
    marker = CHECKED / key if key else None
    if marker is not None and _is_own_file(marker):
        return ""
    env = dict(os.environ, **({"TRITON_INTERPRET": "1"} if mode == "interpreter" else {}))
    try:
        out = subprocess.run([sys.executable, "-c", PROBE, mode, *ENV_MODULES], capture_output=True, text=True,
                             env=env, timeout=300, stdin=subprocess.DEVNULL)
        problem = json.loads(out.stdout.strip().splitlines()[-1]).get("problem", "") if out.stdout.strip() else \
            f"the check of this Python exited {out.returncode} ({out.stderr.strip().splitlines()[-1:]})"
    except (OSError, subprocess.TimeoutExpired, ValueError, RecursionError) as exc:
        problem = f"this Python could not be checked ({exc})"
    if not problem and marker is not None:
        try:
            write_bytes(marker, b"", PROJECT)
        except (OSError, UnsafePathError):
            pass  # not remembered: the next run checks again
    return problem


def _probe_key(mode: str) -> str:
    """What a successful check depends on; '' when a package is missing (then nothing is remembered)."""
    parts = [sys.executable, sys.version, mode, os.environ.get("PYTHONPATH", ""), os.environ.get("PYTHONHOME", "")]
    for name in ENV_MODULES:
        try:
            spec = importlib.util.find_spec(name)  # finds without importing
            info = os.stat(spec.origin) if spec and spec.origin else None
        except (ImportError, ValueError, OSError):
            info = None
        if info is None:
            return ""
        parts.append(f"{spec.origin}:{info.st_mtime_ns}:{info.st_size}")
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]


def _is_own_file(path: Path) -> bool:
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(info.st_mode) and info.st_uid == os.getuid()
