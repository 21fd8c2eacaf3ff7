"""compute-sanitizer's command line: where the tool is, its version, each tool's options, the environment.

One job, the first of the memory check's three (this, the log parser in sanitizer_log.py, and the record
in sanitizer.py): how a lesson is started under one tool. PyTorch's caching allocator off (it hides an
access past a tensor's end inside its own segments), line info on, one Triton cache per lesson, a log
of its own per tool, bounded, and the tool's exit code told apart from the lesson's.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
from pathlib import Path

from verified_triton.core import kit
from verified_triton.core.limits import LIMITS

ERROR_EXITCODE = 86  # the tool's exit when the lesson exited 0 but it found errors: no kit code, no 124/137/255
# No kernel is excluded (no --kernel-name-exclude): every kernel is instrumented and judge/memory.py attributes each
# finding afterwards, by the exact names and files of the lesson's own kernels. Excluding cuBLAS, CUTLASS and cuDNN by
# substring (nvjet, cublas, cutlass, cudnn, xmma) skipped any lesson kernel whose name held one, and was itself what
# made racecheck fail on cuBLAS ("failed to handle a hardware exception") and synccheck time out (issue 48, H100).
VERSION_TIMEOUT_S = 60


def find_tool() -> str | None:
    """compute-sanitizer: $COMPUTE_SANITIZER, PATH, /usr/local/cuda/bin, then /usr/local/cuda-*/bin (newest)."""
    given = os.environ.get("COMPUTE_SANITIZER")
    if given:
        return str(Path(given).absolute()) if Path(given).is_file() else None
    found = shutil.which("compute-sanitizer")
    if found:
        return str(Path(found).absolute())
    for candidate in ["/usr/local/cuda/bin/compute-sanitizer",
                      *sorted(glob.glob("/usr/local/cuda-*/bin/compute-sanitizer"), reverse=True)]:
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def tool_version(binary: str) -> tuple[str, str]:
    """(its version, e.g. '2025.3.1.0 (build 36400806)', or '' and why it could not be read)."""
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, timeout=VERSION_TIMEOUT_S,
                             stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return "", f"{binary} --version could not be run ({exc})"
    text = out.stdout[:8192].decode("utf-8", "replace")
    match = re.search(r"Version\s+([0-9][^\r\n]{0,80})", text)  # "2025.3.1.0 (build 36400806)"
    if out.returncode != 0 or not match:
        tail = (text + out.stderr[:2000].decode("utf-8", "replace")).strip().splitlines()[-1:]
        return "", f"{binary} --version exited {out.returncode} without a version ({' '.join(tail)[:200]})"
    return match.group(1).strip(), ""


def tool_options(tool: str, log: Path) -> list[str]:
    """The options of one tool's run: a log of its own, bounded, full paths, every process, the lesson's
    later kernels still run after an error in one, and the tool's exit code told apart from the lesson's."""
    options = ["--tool", tool, "--log-file", str(log), "--print-limit", str(LIMITS.sanitizer_print_limit),
               "--strip-paths", "no", "--show-backtrace", "yes", "--num-callers-host", "12",
               "--error-exitcode", str(ERROR_EXITCODE), "--launch-timeout", "120", "--require-cuda-init", "no",
               "--destroy-on-device-error", "kernel", "--target-processes", "all"]
    if tool == "memcheck":
        options += ["--padding", "512"]  # a guard after every allocation: an overflow cannot land in the next
    if tool == "racecheck":
        options += ["--racecheck-report", "analysis"]  # one record per race, not one per byte
    return options


def sanitize_env(base: dict[str, str], tool: str, triton_cache: Path) -> dict[str, str]:
    """The lesson's environment under a tool: the caching allocator off (it hides an access past a tensor's
    end inside its own segments), no allocator configuration (expandable segments give false reports),
    Triton's line info on, one Triton cache for the lesson's four runs."""
    env = dict(base)
    for name in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "TRITON_DISABLE_LINE_INFO",
                 "TRITON_CACHE_AUTOTUNING", kit.INTERPRET_ENV, kit.SMOKE_ENV):
        env.pop(name, None)
    env.update({"PYTORCH_NO_CUDA_MEMORY_CACHING": "1", "TRITON_CACHE_DIR": str(triton_cache),
                kit.SANITIZE_ENV: tool})
    return env


def shown_command(binary: str, options: list[str], script: str, scratch: Path) -> str:
    """The command line as a person would type it: the launcher left out, the run's scratch folder (its
    log file) written <scratch>."""
    shown = [Path(binary).name if binary.endswith("/compute-sanitizer") else binary,
             *(option.replace(str(scratch), "<scratch>") for option in options), "python", script]
    return " ".join(part if re.fullmatch(r"[\w@%+=:,./<>-]+", part) else repr(part) for part in shown)
