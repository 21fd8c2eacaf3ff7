"""Optional baselines (issue 24): Liger-Kernel and torch.compile beside the lessons' kernels.

The kit imports an optional library or records why not (with the install
line) and records its version; lesson.toml declares it ([requires.optional]);
the record's environment carries the version; the requirements box says how
to install it; the benchmarks page lists every comparison with such a
library. The five lessons that compare against Liger-Kernel run as smoke runs
(their checks under the interpreter, and their GPU-only comparison code once,
untimed, at small shapes) with it and without it.
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace

import pytest

from conftest import REPO, bench, fake_record, once_per_run
from verified_triton.core import kit
from verified_triton.core.lessons import LessonError, discover
from verified_triton.judge.evidence import EvidenceError, read_record, write_record
from verified_triton.judge.status import judge
from verified_triton.record.awaiting import load_awaiting
from verified_triton.record.smoke import smoke_all
from verified_triton.site import directives
from verified_triton.site.directives.benchmarks import library_table
from verified_triton.site.requirements import RecordedRun, Requirements

LIGER = "liger-kernel"
# lesson -> (main file, the benchmarks with Liger its GPU-only comparison runs in a smoke run, at its shapes)
LESSONS = {
    "cross-entropy": ("lesson.py", ["fused-vs-liger-8192x131072-bf16", "fused-vs-liger-net-of-copy"]),
    "rmsnorm-rope": ("lesson.py", ["qk-fused-vs-liger-64x4-2x128-float16"]),
    "layer-norm": ("lesson.py", ["forward-vs-liger-8x1024-fp16", "backward-vs-liger-8x1024-fp16",
                                     "forward-vs-liger-2x4096-fp16", "backward-vs-liger-2x4096-fp16"]),
    "softmax-fp32-matmul": ("lesson.py", ["softmax-vs-liger-4x1024", "softmax-vs-liger-2x4096"]),
    "gelu-libdevice": ("lesson.py", ["geglu-tanh-vs-liger-8192x8192-fp32"]),
}
HIDE_LIGER = "import sys\nsys.modules['liger_kernel'] = None  # every import of it fails\n"


def liger_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("liger_kernel") is not None


needs_liger = pytest.mark.skipif(not liger_installed(), reason="liger-kernel is not installed "
                                 "(pip install --no-deps liger-kernel==0.8.5, pinned in the dev extra)")


# -- the kit ------------------------------------------------------------------------------------

@pytest.fixture
def lesson(monkeypatch, tmp_path):
    for name in (kit.RESULTS_ENV, kit.FIGURES_ENV, kit.INTERPRET_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    return kit.kit.Lesson("kit-test")


@pytest.mark.unit
def test_an_optional_baseline_that_imports_is_returned_with_its_version(lesson):
    import importlib.metadata

    import numpy

    assert lesson.optional("numpy", "numpy.linalg") is numpy.linalg
    assert lesson.results.device.baselines == {"numpy": importlib.metadata.version("numpy")}
    assert lesson.results.checks == []


@pytest.mark.unit
def test_a_missing_optional_baseline_is_one_skip_with_the_install_line(lesson, monkeypatch):
    monkeypatch.setitem(sys.modules, "liger_kernel", None)
    lesson.requires = {"optional": {LIGER: "0.8.5"}}
    assert lesson.optional(LIGER, "liger_kernel.ops.softmax") is None
    assert lesson.optional(LIGER, "liger_kernel.ops.rope") is None  # asked again: no second skip
    [skip] = lesson.results.checks
    assert (skip.name, skip.status) == ("optional-liger-kernel", "skip")
    assert "install it with: pip install liger-kernel==0.8.5" in skip.message
    assert lesson.results.device.baselines == {}
    assert kit.kit.install_command(LIGER) == "pip install liger-kernel"


@pytest.mark.unit
def test_a_benchmark_names_the_library_it_compares_with(lesson):
    t = kit.kit.Timings({"k": [1.0] * 6, "b": [1.1] * 6})
    b = lesson.benchmark("x", "x", t, "k", "b", threshold=0.95, library="Liger-Kernel")
    assert (b.library, b.verdict) == ("Liger-Kernel", "met")
    assert lesson.benchmark("y", "y", t, "k", "b").library == ""


# -- lesson.toml, the record, the requirements box ----------------------------------------------

@pytest.mark.unit
def test_lesson_toml_declares_optional_baselines_and_they_count_in_the_hash(project):
    folder = project.add("good", "sys.exit(0)\n")
    before = project.lesson("good").source_hash()
    toml = folder / "lesson.toml"
    toml.write_text(toml.read_text() + '\n[requires]\n[requires.optional]\nliger-kernel = "0.8.5"\n')
    lesson = project.lesson("good")
    assert lesson.requires.optional == {LIGER: "0.8.5"}
    assert lesson.source_hash() != before


@pytest.mark.unit
@pytest.mark.parametrize("line", ['"liger kernel" = "0.8.5"', 'liger-kernel = "latest"', 'liger-kernel = 1'])
def test_a_bad_optional_baseline_is_an_error_naming_lesson_toml(project, line):
    folder = project.add("good", "sys.exit(0)\n")
    toml = folder / "lesson.toml"
    toml.write_text(toml.read_text() + f"\n[requires.optional]\n{line}\n")
    with pytest.raises(LessonError, match="lesson.toml"):
        project.lesson("good")


@pytest.mark.integration
def test_the_record_carries_the_versions_the_kit_found(project):
    project.add("uses", """\
        lesson = Lesson("uses")
        lesson.optional("numpy", "numpy")
        lesson.optional("not-here", "surely_not_an_installed_module")
        sys.exit(lesson.finish())
    """)
    run = project.verify("--lesson", "uses")
    assert run.returncode == 0, run.stderr
    record = project.record("uses")
    import numpy

    assert record.env.baselines == {"numpy": numpy.__version__}
    assert [(c.name, c.status) for c in record.checks] == [("optional-not-here", "skip")]


@pytest.mark.unit
def test_a_hostile_version_in_a_record_is_refused_naming_the_field(project):
    project.add("good", "sys.exit(0)\n")
    record = fake_record(project.lesson("good"))
    record.env = replace(record.env, baselines={LIGER: "<script>"})
    path = write_record(project.evidence, record)
    with pytest.raises(EvidenceError, match=r"env\.baselines\.liger-kernel"):
        read_record(path, project.evidence)


def run_with(baselines: dict, current: bool = True) -> RecordedRun:
    return RecordedRun("GPU", "NVIDIA H200", "2026-01-02", "3.6.0", "2.11.0", "3.12.3", 10.0, "passed", current,
                       tuple(baselines.items()))


@pytest.mark.unit
def test_the_requirements_say_how_to_install_it_and_what_the_runs_had():
    req = Requirements("8.0", "3.0", "", (), (run_with({LIGER: "0.8.5"}),), "x.py", ((LIGER, "0.8.5"),))
    assert req.optional_installs == ("pip install liger-kernel==0.8.5",)
    assert "skipped" in req.optional_sentence and "The GPU run recorded here used liger-kernel 0.8.5." \
        in req.optional_sentence
    without = replace(req, runs=(run_with({}),))
    assert "The GPU run recorded here ran without liger-kernel." in without.optional_sentence
    assert replace(req, optional=()).optional_sentence == ""


# -- the benchmarks page --------------------------------------------------------------------------

def page_of(project) -> directives.Page:
    """The benchmarks page of a throw-away project, as the hook hands it to a directive."""
    lessons = discover(project.code)
    statuses = {lesson.name: judge(lesson, project.evidence) for lesson in lessons}
    return directives.Page(directives.Site(project.code, project.evidence, lessons, statuses), "benchmarks.md", None)


@pytest.mark.unit
def test_the_library_view_has_one_row_per_comparison_with_its_interval(project):
    project.add("good", "sys.exit(0)\n")
    record = fake_record(project.lesson("good"), benchmarks=[
        bench("vs-torch", 2.0, 1.9, 2.1, threshold=1.0, baseline_name="torch"),
        replace(bench("vs-liger", 1.02, 1.01, 1.03, threshold=0.95, baseline_name="LigerSoftmaxFunction"),
                library="Liger-Kernel"),
        replace(bench("vs-compile", 0.98, 0.97, 0.99, gate=False), library="torch.compile")])
    record.env = replace(record.env, baselines={LIGER: "0.8.5"})
    write_record(project.evidence, record)
    md = library_table(page_of(project))
    rows = [line for line in md.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert len(rows) == 2 and rows[0].startswith("| [Fake lesson good]") and "vs-torch" not in md
    assert "1.02×** <small>(1.01–1.03)" in md and "0.98×** <small>(0.97–0.99)" in md
    assert "gate 0.95×: :material-check: met" in md
    assert "liger-kernel 0.8.5" in md


@pytest.mark.unit
def test_the_library_view_says_when_a_run_skipped_the_library(project):
    project.add("good", "sys.exit(0)\n")
    record = fake_record(project.lesson("good"))
    record.checks.append(kit.Check("optional-liger-kernel", "skip", "liger-kernel could not be imported"))
    write_record(project.evidence, record)
    md = library_table(page_of(project))
    assert "No comparison with a library recorded on this GPU" in md
    assert "**Skipped:** Fake lesson good: liger-kernel could not be imported" in md


# -- the five lessons ------------------------------------------------------------------------------
# Each runs as a smoke run (tools/smoke.py, the kit's VT_SMOKE): the interpreter's checks and, once,
# untimed and on tiny inputs, the GPU-only comparison code, with Liger-Kernel installed (the session's
# smoke runs of every lesson, tests/conftest.py) and with every import of it failing. The kit lends the
# interpreter what Liger's kernels need there (a float argument as an fp32 scalar, libdevice.rsqrt) and
# runs torch.compile's functions uncompiled, as this file's own dry run did before the kit could.

@pytest.fixture(scope="module")
def without_liger(tmp_path_factory) -> dict:
    """The five lessons as smoke runs in which every import of liger_kernel fails (a sitecustomize), once
    per test run."""
    def make() -> dict:
        folder = tmp_path_factory.mktemp("no-liger")
        (folder / "sitecustomize.py").write_text(HIDE_LIGER, encoding="utf-8")
        path = os.pathsep.join(p for p in (str(folder), os.environ.get("PYTHONPATH", "")) if p)
        lessons = [x for x in discover(REPO / "code") if x.name in LESSONS]
        runs = smoke_all(lessons, jobs=os.cpu_count() or 1, report=lambda line: None, env={"PYTHONPATH": path})
        return {run.lesson.name: run for run in runs}

    return once_per_run(tmp_path_factory, "without_liger", make)


def smoke_checks(results) -> dict[str, str]:
    """What each benchmark's smoke check says a GPU run would judge, by benchmark name."""
    return {c.name.removeprefix("smoke-"): c.message.partition("on a GPU: ")[2]
            for c in results.checks if c.name.startswith("smoke-")}


@pytest.mark.e2e
@needs_liger
@pytest.mark.parametrize("name", LESSONS)
def test_the_lesson_checks_liger_and_runs_the_gpu_comparison_with_it(smoke_runs, name):
    run = smoke_runs[name]
    assert run.ok, run.line()
    results = run.results
    assert results.device.baselines == {LIGER: "0.8.5"}
    failed = [c for c in results.checks if c.status == "fail"]
    assert not failed, failed
    checked = [c for c in results.checks if "liger" in c.name.lower() and not c.name.startswith("smoke-")]
    assert checked, "nothing of Liger's was checked"
    judged = smoke_checks(results)
    liger = {n: what for n, what in judged.items() if what.endswith("library Liger-Kernel")}
    assert sorted(liger) == sorted(LESSONS[name][1])
    gated = [what for what in liger.values() if "target" in what]
    assert gated and all("target 0.95x," in what for what in gated)  # gates at 0.95, never a mere goal
    compiled = [what for what in judged.values() if what.endswith("library torch.compile")]
    assert all("target" not in what or "(goal)" in what for what in compiled)  # reported, never gated
    if name in ("layer-norm", "softmax-fp32-matmul", "gelu-libdevice"):
        assert compiled


@pytest.mark.e2e
@pytest.mark.parametrize("name", LESSONS)
def test_the_lesson_runs_without_liger_and_says_how_to_install_it(without_liger, name):
    run = without_liger[name]
    assert run.ok, run.line()
    results = run.results
    assert results.device.baselines == {}
    [skip] = [c for c in results.checks if "liger" in c.name.lower()]  # and no comparison with it
    assert skip.name == "optional-liger-kernel" and skip.status == "skip"
    assert "pip install liger-kernel==0.8.5" in skip.message
    assert all(c.status != "fail" for c in results.checks)
    assert not [what for what in smoke_checks(results).values() if "Liger" in what]


# -- the committed evidence ------------------------------------------------------------------------

@pytest.mark.unit
@pytest.mark.parametrize("name", LESSONS)
def test_every_current_gpu_record_holds_the_liger_comparison(name):
    """Issue 24's done criterion: recorded with Liger-Kernel installed, its gates met."""
    lesson = next(x for x in discover(REPO / "code") if x.name == name)
    st = judge(lesson, REPO / "evidence")
    gpu = [r for r in st.current if r.mode == "gpu"]
    entry = load_awaiting(REPO / "evidence").get(name)
    if not gpu and entry is not None and entry.source_hash == st.source_hash:  # waits for its GPU run: the newest
        gpu = [r for r in st.stale if r.mode == "gpu"]
    assert gpu, f"{name}: no GPU record of the current source (re-record it with Liger-Kernel installed)"
    for record in gpu:
        assert LIGER in record.env.baselines, f"{record.key}: recorded without Liger-Kernel"
        liger = [b for b in record.benchmarks if b.library == "Liger-Kernel" and b.threshold is not None]
        assert liger and all(b.verdict == "met" for b in liger), [(b.name, b.ratio_low) for b in liger]


@pytest.mark.unit
def test_the_lessons_declare_liger_as_optional():
    lessons = {x.name: x for x in discover(REPO / "code")}
    for name in LESSONS:
        assert lessons[name].requires.optional == {LIGER: "0.8.5"}, name
