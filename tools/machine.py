"""What this machine can run: Python, torch and Triton versions, and its GPUs.

One job: describe the machine without importing torch (nvidia-smi for GPUs,
package metadata for versions), so planning a run or bundling evidence costs
milliseconds. What actually ran is recorded by the kit from inside the lesson.
Tests can pretend to have GPUs with VT_FAKE_GPUS="0:NVIDIA H200,1:NVIDIA H200".
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from dataclasses import dataclass, field
from importlib import metadata


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
