"""What a reader needs to run a lesson, and what each recorded result was run with.

One job: from lesson.toml's [requires] and the lesson's records, the facts
the page's requirements box and the notebook's first cells state: the GPU it
needs (and which of Colab's GPUs have it), the minimum Triton, the optional
baseline libraries and how to install them, the versions and run time of
every recorded run, the install line and the run commands.
"""

from __future__ import annotations

from dataclasses import dataclass

from verified_triton.core.kit import install_command
from verified_triton.core.lessons import Lesson
from verified_triton.judge.status import LessonStatus

COLAB_GPUS = (("T4", (7, 5)), ("L4", (8, 9)), ("A100", (8, 0)), ("H100", (9, 0)))  # name, capability
INSTALL = "pip install torch triton numpy matplotlib"
# A machine without a GPU: torch's CPU build first (the default torch on Linux is the CUDA build, gigabytes of
# libraries the CPU cannot use), then the rest; the lesson's checks run under TRITON_INTERPRET=1.
CPU_INSTALL = ("pip install torch --index-url https://download.pytorch.org/whl/cpu",
               "pip install triton numpy matplotlib")


def version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(".") if p.isdigit())


@dataclass(frozen=True)
class RecordedRun:
    mode: str  # "GPU" or "Interpreter"
    machine: str
    date: str
    triton: str
    torch: str
    python: str
    wall_s: float
    outcome: str
    current: bool
    baselines: tuple[tuple[str, str], ...] = ()  # optional baseline libraries it imported: (pip name, version)


@dataclass(frozen=True)
class Requirements:
    capability: str  # "" when the lesson states none
    triton: str
    why: str
    colab: tuple[str, ...]  # Colab GPUs that meet the capability
    runs: tuple[RecordedRun, ...]
    main_file: str
    optional: tuple[tuple[str, str], ...] = ()  # [requires.optional]: (pip name, version it was written for)

    @property
    def colab_sentence(self) -> str:
        every = ", ".join(name for name, _ in COLAB_GPUS)
        if not self.capability:  # nothing declared: claim nothing a run has not shown
            return ("lesson.toml states no minimum compute capability; its recorded runs say which "
                    "GPUs it has run on.")
        if len(self.colab) == len(COLAB_GPUS):
            return f"Runs on any of Colab's GPUs ({every})."
        if self.colab:
            return (f"On Colab choose {' or '.join(self.colab)}: the lesson needs compute capability "
                    f"{self.capability}; on a smaller GPU it declines by design (exit code 3).")
        return (f"None of Colab's GPUs ({every}) has compute capability {self.capability}, so there the "
                "lesson declines by design (exit code 3); its interpreter half runs anywhere.")

    @property
    def skew(self) -> str:
        """A sentence when the GPU and interpreter evidence come from different Triton versions."""
        gpu = sorted({r.triton for r in self.runs if r.mode == "GPU"})
        interp = sorted({r.triton for r in self.runs if r.mode == "Interpreter"})
        if gpu and interp and gpu != interp:
            return (f"The GPU evidence comes from Triton {', '.join(gpu)} and the interpreter evidence from "
                    f"Triton {', '.join(interp)}: the two halves were checked with different Triton versions.")
        return ""

    @property
    def optional_installs(self) -> tuple[str, ...]:
        return tuple(install_command(package, version) for package, version in self.optional)

    @property
    def optional_sentence(self) -> str:
        """What the optional baselines are for, and which recorded runs had them."""
        if not self.optional:
            return ""
        names = ", ".join(package for package, _ in self.optional)
        said = (f"The benchmarks also compare against {names} when it is installed; without it the lesson "
                "runs and records those comparisons as skipped, saying why.")
        for run in self.runs:
            if not run.current:
                continue
            had = dict(run.baselines)
            used = [f"{package} {had[package]}" for package, _ in self.optional if package in had]
            lacked = [package for package, _ in self.optional if package not in had]
            mode = run.mode if run.mode == "GPU" else run.mode.lower()
            if used:
                said += f" The {mode} run recorded here used {', '.join(used)}."
            if lacked:
                said += f" The {mode} run recorded here ran without {', '.join(lacked)}."
        return said

    def commands(self) -> tuple[str, str]:
        return f"TRITON_INTERPRET=1 python {self.main_file}", f"python {self.main_file}"


def requirements(lesson: Lesson, st: LessonStatus | None) -> Requirements:
    need = lesson.requires.capability
    colab = tuple(name for name, cc in COLAB_GPUS if not need or cc >= version_tuple(need))
    runs = []
    for r in sorted(st.records if st else [], key=lambda r: (r.mode != "gpu", r.key)):
        runs.append(RecordedRun("GPU" if r.mode == "gpu" else "Interpreter",
                                r.env.device_name if r.mode == "gpu" else "CPU", r.date, r.env.triton,
                                r.env.torch, r.env.python, r.wall_s, r.outcome, st.is_current(r),
                                tuple(sorted(r.env.baselines.items()))))
    return Requirements(need, lesson.requires.triton, lesson.requires.why, colab, tuple(runs), lesson.main.name,
                        tuple(sorted(lesson.requires.optional.items())))
