"""Optional baselines (issue 24): Liger-Kernel and torch.compile beside the lessons' kernels.

The kit imports an optional library or records why not (with the install
line) and records its version; lesson.toml declares it ([requires.optional]);
the record's environment carries the version; the requirements box says how
to install it; the benchmarks page lists every comparison with such a
library. The five lessons that compare against Liger-Kernel run under the
interpreter with it and without it, and their GPU-only comparison code runs
on the CPU at small shapes (a dry run: timings faked, Triton's interpreter
helped over two gaps, see DRY_RUN).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import replace

import pytest

import directives
import kit
from conftest import REPO, bench, fake_record
from directives.benchmarks import library_table
from evidence import EvidenceError, read_record, write_record
from lessons import LessonError, discover
from requirements import RecordedRun, Requirements
from status import judge

LIGER = "liger-kernel"
# lesson -> (main file, the benchmarks with Liger its GPU-only comparison records in the dry run below)
LESSONS = {
    "cross-entropy": ("cross_entropy.py", ["fused-vs-liger-8192x131072-bf16", "fused-vs-liger-net-of-copy"]),
    "rmsnorm-rope": ("rmsnorm_rope.py", ["qk-fused-vs-liger-64x32-8x128-float16"]),
    "layer-norm": ("layer_norm.py", ["forward-vs-liger-4x1024-fp16", "backward-vs-liger-4x1024-fp16",
                                     "forward-vs-liger-1x4096-fp16", "backward-vs-liger-1x4096-fp16"]),
    "softmax-fp32-matmul": ("softmax_fp32_matmul.py", ["softmax-vs-liger-64x1024"]),
    "gelu-libdevice": ("gelu_libdevice.py", ["geglu-tanh-vs-liger-8192x8192-fp32"]),
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


def test_an_optional_baseline_that_imports_is_returned_with_its_version(lesson):
    import importlib.metadata

    import numpy

    assert lesson.optional("numpy", "numpy.linalg") is numpy.linalg
    assert lesson.results.device.baselines == {"numpy": importlib.metadata.version("numpy")}
    assert lesson.results.checks == []


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


def test_a_benchmark_names_the_library_it_compares_with(lesson):
    t = kit.kit.Timings({"k": [1.0] * 6, "b": [1.1] * 6})
    b = lesson.benchmark("x", "x", t, "k", "b", threshold=0.95, library="Liger-Kernel")
    assert (b.library, b.verdict) == ("Liger-Kernel", "met")
    assert lesson.benchmark("y", "y", t, "k", "b").library == ""


# -- lesson.toml, the record, the requirements box ----------------------------------------------

def test_lesson_toml_declares_optional_baselines_and_they_count_in_the_hash(project):
    folder = project.add("good", "sys.exit(0)\n")
    before = project.lesson("good").source_hash()
    toml = folder / "lesson.toml"
    toml.write_text(toml.read_text() + '\n[requires]\n[requires.optional]\nliger-kernel = "0.8.5"\n')
    lesson = project.lesson("good")
    assert lesson.requires.optional == {LIGER: "0.8.5"}
    assert lesson.source_hash() != before


@pytest.mark.parametrize("line", ['"liger kernel" = "0.8.5"', 'liger-kernel = "latest"', 'liger-kernel = 1'])
def test_a_bad_optional_baseline_is_an_error_naming_lesson_toml(project, line):
    folder = project.add("good", "sys.exit(0)\n")
    toml = folder / "lesson.toml"
    toml.write_text(toml.read_text() + f"\n[requires.optional]\n{line}\n")
    with pytest.raises(LessonError, match="lesson.toml"):
        project.lesson("good")


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


def test_the_library_view_says_when_a_run_skipped_the_library(project):
    project.add("good", "sys.exit(0)\n")
    record = fake_record(project.lesson("good"))
    record.checks.append(kit.Check("optional-liger-kernel", "skip", "liger-kernel could not be imported"))
    write_record(project.evidence, record)
    md = library_table(page_of(project))
    assert "No comparison with a library recorded on this GPU" in md
    assert "**Skipped:** Fake lesson good: liger-kernel could not be imported" in md


# -- the five lessons ------------------------------------------------------------------------------

def interpreter_env(results: os.PathLike) -> dict:
    env = dict(os.environ, TRITON_INTERPRET="1", MPLBACKEND="Agg", PYTHONDONTWRITEBYTECODE="1",
               CUDA_VISIBLE_DEVICES="", VT_RESULTS=str(results))
    env.pop("VT_FIGURES", None)
    return env


def run_lesson(name: str, tmp_path, hide_liger: bool) -> tuple[subprocess.CompletedProcess, dict]:
    main = REPO / "code" / name / LESSONS[name][0]
    script = (HIDE_LIGER if hide_liger else "") + textwrap.dedent(f"""\
        import runpy, sys
        sys.argv = [{str(main)!r}]
        runpy.run_path({str(main)!r}, run_name="__main__")
    """)
    results = tmp_path / "results.json"
    run = subprocess.run([sys.executable, "-c", script], cwd=main.parent, env=interpreter_env(results),
                         capture_output=True, text=True, timeout=600)
    return run, json.loads(results.read_text())


@needs_liger
@pytest.mark.parametrize("name", LESSONS)
def test_the_lesson_checks_liger_under_the_interpreter(name, tmp_path):
    run, results = run_lesson(name, tmp_path, hide_liger=False)
    assert run.returncode == 0, (run.stdout[-2000:], run.stderr[-2000:])
    assert results["device"]["baselines"] == {LIGER: "0.8.5"}
    liger = [c for c in results["checks"] if "liger" in c["name"]]
    assert any(c["status"] == "pass" for c in liger), liger
    assert all(c["status"] != "fail" for c in results["checks"])
    assert "optional-liger-kernel" not in [c["name"] for c in results["checks"]]


@pytest.mark.parametrize("name", LESSONS)
def test_the_lesson_runs_without_liger_and_says_how_to_install_it(name, tmp_path):
    run, results = run_lesson(name, tmp_path, hide_liger=True)
    assert run.returncode == 0, (run.stdout[-2000:], run.stderr[-2000:])
    assert results["device"]["baselines"] == {}
    [skip] = [c for c in results["checks"] if "liger" in c["name"]]
    assert skip["name"] == "optional-liger-kernel" and skip["status"] == "skip"
    assert "pip install liger-kernel==0.8.5" in skip["message"]


# The GPU-only comparisons, on the CPU. The interpreter cannot time anything, has no bfloat16,
# passes a float argument as a Python float (Liger's norm kernels call eps.to(...) on it) and has
# no libdevice.rsqrt: the dry run fakes the rounds (every function still runs once, and once
# more for the checks), uses fp16 where the lesson has bf16, boxes float arguments as fp32
# scalars and lends rsqrt, as the gelu lesson lends its libdevice functions. torch.compile is
# replaced by the function itself (its Triton code generation needs a GPU).
DRY_RUN = """\
import importlib.util, json, math, sys
import numpy as np
import torch
import triton.language as tl
import triton.runtime.interpreter as interpreter
from triton.language.extra import libdevice

plain = interpreter._implicit_cvt
def box_floats(arg):
    if type(arg) is float:
        return tl.tensor(interpreter.TensorHandle(np.array([arg], np.float32), tl.float32), tl.float32)
    return plain(arg)
interpreter._implicit_cvt = box_floats

def rsqrt(x):
    data = x.handle.data
    out = (1.0 / np.sqrt(data.astype(np.float64))).astype(data.dtype)
    return tl.core.tensor(interpreter.TensorHandle(out, x.handle.dtype), x.type)
libdevice.rsqrt = rsqrt
torch.compile = lambda fn, **kwargs: fn
torch.cuda.synchronize = lambda *args: None

spec = importlib.util.spec_from_file_location("lesson_under_test", MAIN)
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)

def fake_rounds(fns, **kwargs):
    for fn in fns.values():
        fn()
    # 1 ms a round, a copy 0.5 ms (a lesson subtracts it): every ratio is 1.0
    times = sys.modules["lessonkit"].Timings({name: [0.5 if name == "copy" else 1.0] * 15 for name in fns})
    times.method = "dry run"
    return times
m.bench_interleaved = fake_rounds

lesson = m.Lesson(NAME)
lesson.device()
cpu, half = "cpu", torch.float16
if NAME == "cross-entropy":
    x0, t = m.make_inputs(64, 3000, torch.float32, cpu, seed=1)  # fp16 would flush bf16's tiny gradients
    m.compare_with_liger(lesson, x0, t, torch.empty_like(x0))
elif NAME == "rmsnorm-rope":
    cos, sin = m.rope_cache(128, cpu)
    m.compare_with_liger(lesson, cpu, cos, sin, 64, half)
elif NAME == "layer-norm":
    m.ELEMENTS = 4096
    m.compare_with_libraries(lesson, cpu)
elif NAME == "softmax-fp32-matmul":
    m.compare_with_libraries(lesson, torch.randn(64, 1024) * 3, "64x1024")
elif NAME == "gelu-libdevice":
    x, y, b = torch.randn(128, 512), torch.randn(128, 512), 0.1 * torch.randn(512)
    m.compare_with_libraries(lesson, x, b, y, 12 * x.numel() + 4 * 512)
print(json.dumps({"checks": [[c.name, c.status, c.message] for c in lesson.results.checks],
                  "benchmarks": [[b.name, b.library, b.threshold, b.gate, b.verdict]
                                 for b in lesson.results.benchmarks]}))
"""


def dry_run(name: str, hide_liger: bool) -> dict:
    main = REPO / "code" / name / LESSONS[name][0]
    script = (HIDE_LIGER if hide_liger else "") + f"MAIN, NAME = {str(main)!r}, {name!r}\n" + DRY_RUN
    env = interpreter_env(os.devnull)
    env.pop("VT_RESULTS")
    run = subprocess.run([sys.executable, "-c", script], cwd=main.parent, env=env, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, (run.stdout[-2000:], run.stderr[-3000:])
    return json.loads(run.stdout.strip().splitlines()[-1])


@needs_liger
@pytest.mark.parametrize("name", LESSONS)
def test_the_gpu_comparison_with_liger_runs_and_checks_what_it_times(name):
    out = dry_run(name, hide_liger=False)
    failed = [c for c in out["checks"] if c[1] != "pass"]
    assert not failed, failed
    assert any("liger" in c[0].lower() for c in out["checks"]), "nothing of Liger's was checked"
    liger = {b[0]: b for b in out["benchmarks"] if b[1] == "Liger-Kernel"}
    assert sorted(liger) == sorted(LESSONS[name][1])
    gated = [b for b in liger.values() if b[2] is not None]
    assert gated and all(b[2] == 0.95 and b[3] for b in gated)
    compiled = [b for b in out["benchmarks"] if b[1] == "torch.compile"]
    assert all(not b[3] for b in compiled)  # torch.compile is reported, never gated
    if name in ("layer-norm", "softmax-fp32-matmul", "gelu-libdevice"):
        assert compiled


@pytest.mark.parametrize("name", LESSONS)
def test_the_gpu_comparison_without_liger_records_no_liger_benchmark(name):
    out = dry_run(name, hide_liger=True)
    assert not [b for b in out["benchmarks"] if b[1] == "Liger-Kernel"]
    assert [c[0] for c in out["checks"] if c[1] == "skip"][:1] == ["optional-liger-kernel"]
    assert all(c[1] != "fail" for c in out["checks"])


# -- the committed evidence ------------------------------------------------------------------------

@pytest.mark.parametrize("name", LESSONS)
def test_every_current_gpu_record_holds_the_liger_comparison(name):
    """Issue 24's done criterion: recorded with Liger-Kernel installed, its gates met."""
    lesson = next(x for x in discover(REPO / "code") if x.name == name)
    st = judge(lesson, REPO / "evidence")
    gpu = [r for r in st.current if r.mode == "gpu"]
    assert gpu, f"{name}: no GPU record of the current source (re-record it with Liger-Kernel installed)"
    for record in gpu:
        assert LIGER in record.env.baselines, f"{record.key}: recorded without Liger-Kernel"
        liger = [b for b in record.benchmarks if b.library == "Liger-Kernel" and b.threshold is not None]
        assert liger and all(b.verdict == "met" for b in liger), [(b.name, b.ratio_low) for b in liger]


def test_the_lessons_declare_liger_as_optional():
    lessons = {x.name: x for x in discover(REPO / "code")}
    for name in LESSONS:
        assert lessons[name].requires.optional == {LIGER: "0.8.5"}, name
