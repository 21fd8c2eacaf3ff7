"""The lesson kit's contract, as the tools see it.

`code/lessonkit.py` defines the agreement between a lesson and the runner
once: the environment variable names, the exit codes, the shape of the
results (its dataclasses) and the rule that decides whether a run passed.
This module loads that file by path (never through sys.path, so nothing else
under code/ can shadow a module the tools import) and re-exports it. The kit
imports only the standard library until a lesson asks for a device, a timing
or a plot, so loading it here costs nothing and needs no torch.
"""

from __future__ import annotations

import importlib.util
import sys
import typing

from verified_triton.core.paths import KIT_PATH


def _load():
    if "vt_lessonkit" in sys.modules:
        return sys.modules["vt_lessonkit"]
    spec = importlib.util.spec_from_file_location("vt_lessonkit", KIT_PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules["vt_lessonkit"] = module  # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module


kit = _load()

RESULTS_ENV, FIGURES_ENV, INTERPRET_ENV = kit.RESULTS_ENV, kit.FIGURES_ENV, kit.INTERPRET_ENV
SMOKE_ENV = kit.SMOKE_ENV
SANITIZE_ENV, SANITIZER_TOOLS, DECLARABLE_TOOLS = kit.SANITIZE_ENV, kit.SANITIZER_TOOLS, kit.DECLARABLE_TOOLS
KnownFinding, SourceSpan = kit.KnownFinding, kit.SourceSpan
RESULTS_FORMAT = kit.RESULTS_FORMAT
EXIT_PASSED, EXIT_FAILED, EXIT_CANNOT_RUN, EXIT_BY_DESIGN = (
    kit.EXIT_PASSED, kit.EXIT_FAILED, kit.EXIT_CANNOT_RUN, kit.EXIT_BY_DESIGN)
EXIT_MEANINGS = kit.EXIT_MEANINGS
Check, Benchmark, Table, Figure, SkippedPart, Device, Results = (
    kit.Check, kit.Benchmark, kit.Table, kit.Figure, kit.SkippedPart, kit.Device, kit.Results)
Prediction, PredictionOutcome, FilteredWarning = kit.Prediction, kit.PredictionOutcome, kit.FilteredWarning
prediction_outcome = kit.prediction_outcome
failures, verdict, median_interval = kit.failures, kit.verdict, kit.median_interval
not_run_here = kit.not_run_here  # the words for the steps and parts a run did not run, as the kit prints them
install_command, OPTIONAL_SKIP = kit.install_command, kit.OPTIONAL_SKIP
UNITS, RATE_UNITS = kit.UNITS, kit.RATE_UNITS
Step, STEP_NAME = kit.Step, kit.STEP_NAME
version_tuple = kit._version_tuple  # how the kit compares versions against lesson.toml's [requires]
VERDICTS = typing.get_args(kit.Verdict)
