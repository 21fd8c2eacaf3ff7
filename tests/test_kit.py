"""The kit's contract with verify: intervals, verdicts, the pass rule, and benchmarks from paired rounds.

code/lessonkit.py defines these once; tools/kit.py loads that file by path, so
the tools and the lessons cannot disagree. The interval is checked against
its stated coverage on data whose median is known.
"""

from __future__ import annotations

import collections
import json
import math
import random

import pytest

from conftest import KIT, Project
from verified_triton.core import kit
from verified_triton.core.kit import failures, median_interval, verdict


def coverage(n: int) -> float:
    """The exact coverage median_interval promises for n samples (binomial(n, 1/2) tails)."""
    _, low, high = median_interval(list(range(n)))
    k = int(low)
    return 1 - 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2**n


@pytest.mark.unit
def test_the_tools_load_the_lessons_kit_by_path():
    assert kit.KIT_PATH == KIT
    assert kit.kit.__file__ == str(KIT)
    assert (kit.EXIT_PASSED, kit.EXIT_FAILED, kit.EXIT_CANNOT_RUN, kit.EXIT_BY_DESIGN) == (0, 1, 2, 3)
    assert kit.Benchmark is kit.kit.Benchmark and kit.RESULTS_ENV == "VT_RESULTS"
    assert set(kit.VERDICTS) == {"met", "not met", "within noise"}


# -- the interval --------------------------------------------------------------------------

@pytest.mark.unit
@pytest.mark.parametrize("n, k", [(6, 0), (8, 0), (9, 1), (15, 3), (20, 5), (30, 9), (100, 39)])
def test_interval_order_statistics_on_known_inputs(n, k):
    xs = [float(i) for i in range(n)]
    random.Random(n).shuffle(xs)
    median, low, high = median_interval(xs)
    assert median == (n - 1) / 2
    assert (low, high) == (k, n - 1 - k)  # the k-th smallest and k-th largest (0-based)
    assert coverage(n) >= 0.95


@pytest.mark.unit
def test_fewer_than_six_samples_give_their_range():
    assert median_interval([3.0]) == (3.0, 3.0, 3.0)
    assert median_interval([2.0, 1.0, 4.0]) == (2.0, 1.0, 4.0)
    assert median_interval([5.0, 1.0, 2.0, 3.0, 4.0]) == (3.0, 1.0, 5.0)
    assert coverage(5) < 0.95  # as the docstring says: the range covers less than the level
    with pytest.raises(ValueError):
        median_interval([])


@pytest.mark.unit
@pytest.mark.parametrize("n", [15, 30])
def test_interval_covers_the_true_median_as_often_as_it_says(n):
    """Lognormal noise (skewed, like timings) with a known median of 1.0: the interval holds it ~95 % of the time."""
    rng = random.Random(1234 + n)
    trials = 4000
    hits = 0
    for _ in range(trials):
        xs = [math.exp(rng.gauss(0.0, 0.3)) for _ in range(n)]
        _, low, high = median_interval(xs)
        hits += low <= 1.0 <= high
    expected = coverage(n)
    assert expected >= 0.95
    assert abs(hits / trials - expected) < 0.015, (hits / trials, expected)


# -- verdicts and the pass rule ---------------------------------------------------------------

@pytest.mark.unit
@pytest.mark.parametrize("low, high, target, expect", [
    (1.05, 1.10, 1.0, "met"),
    (1.00, 1.10, 1.0, "met"),  # the lower bound reaching the target is enough
    (0.90, 0.99, 1.0, "not met"),
    (0.95, 1.05, 1.0, "within noise"),
    (0.95, 1.00, 1.0, "within noise"),  # the upper bound touching it is not "not met"
])
def test_verdict_from_the_interval(low, high, target, expect):
    assert verdict(low, high, target) == expect


@pytest.mark.unit
def test_only_a_gate_that_is_not_met_fails_the_run():
    from conftest import bench

    checks = [kit.Check("a", "pass"), kit.Check("b", "skip")]
    assert failures(checks, [bench("met", 1.1, 1.05, 1.2, threshold=1.0),
                             bench("noise", 0.99, 0.95, 1.03, threshold=1.0),
                             bench("goal", 0.5, 0.4, 0.6, threshold=1.0, gate=False),
                             bench("stretch", 1.1, 1.05, 1.2, threshold=1.0, stretch=2.0),
                             bench("info", 0.1)]) == []
    assert failures(checks, [bench("slow", 0.9, 0.85, 0.95, threshold=1.0)]) == ["target slow"]
    assert failures([kit.Check("x", "fail")], []) == ["check x"]


# -- benchmarks from rounds -------------------------------------------------------------------

@pytest.fixture
def lesson(monkeypatch, tmp_path):
    for name in (kit.RESULTS_ENV, kit.FIGURES_ENV, kit.INTERPRET_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    return kit.kit.Lesson("kit-test")


def rounds(kernel: list[float], baseline: list[float]) -> kit.kit.Timings:
    t = kit.kit.Timings({"k": kernel, "b": baseline})
    t.method = "test rounds"
    return t


@pytest.mark.unit
def test_a_time_benchmark_is_the_median_of_paired_ratios(lesson, capsys):
    # Clocks drift between rounds (every other round is 1.5x slower for both sides); the ratio of each
    # round's pair does not see it. Ratios are 1.00, 1.02, ..., 1.28, in a shuffled order.
    steps = list(range(15))
    random.Random(7).shuffle(steps)
    kernel = [1.0 + 0.5 * (i % 2) for i in range(15)]
    baseline = [k * (1 + 0.02 * s) for k, s in zip(kernel, steps, strict=True)]
    b = lesson.benchmark("t", "a timing", rounds(kernel, baseline), "k", "b", threshold=1.05, stretch=1.2)
    assert b.unit == "ms" and b.samples == 15
    assert (b.ratio, b.ratio_low, b.ratio_high) == pytest.approx((1.14, 1.06, 1.22))
    assert b.measured == 1.0 and b.baseline == sorted(baseline)[7] and b.baseline_name == "b"
    assert b.kernel_ms == kernel and b.baseline_ms == baseline and b.method == "test rounds"
    assert (b.verdict, b.stretch_verdict) == ("met", "within noise")
    assert lesson.results.benchmarks == [b]
    out = capsys.readouterr().out
    assert "= 1.14x [1.06, 1.22], 15 rounds, target 1.05x: met, stretch 1.20x: within noise" in out


@pytest.mark.unit
def test_a_rate_benchmark_uses_the_work_of_each_side(lesson):
    kernel, baseline = [2.0] * 10, [1.0] * 10  # the kernel takes twice as long ...
    b = lesson.benchmark("r", "a rate", rounds(kernel, baseline), "k", "b", unit="GB/s", work=(4e9, 1e9),
                         threshold=1.0, gate=False)
    # ... but moves four times the bytes: 2000 GB/s against 1000 GB/s
    assert (b.measured, b.baseline, b.ratio, b.ratio_low, b.ratio_high) == (2000.0, 1000.0, 2.0, 2.0, 2.0)
    assert b.verdict == "met" and b.gate is False


@pytest.mark.unit
@pytest.mark.parametrize("kwargs, kernel, message", [
    ({"unit": "furlongs"}, [1.0], "is not one of"),
    ({"unit": "GB/s"}, [1.0], "needs `work`"),
    ({}, [1.0, 1.0], "need the same rounds"),
    ({}, [-1.0], "positive and finite"),
])
def test_benchmark_mistakes_are_clear_errors(lesson, kwargs, kernel, message):
    with pytest.raises(ValueError, match=message):
        lesson.benchmark("x", "x", rounds(kernel, [1.0]), "k", "b", **kwargs)


@pytest.mark.unit
@pytest.mark.parametrize("name", ["", "a/b", "x" * 121, "tab\there"])
def test_result_names_are_short_printable_keys(lesson, name):
    with pytest.raises(ValueError, match="result name"):
        lesson.check(name, True)


# -- through verify: the gate fails the run only when not met -------------------------------------

GATED = """\
    lesson = Lesson("gated")
    kernel = [1.0] * 15
    ratio = float(os.environ["VT_TEST_RATIO"])
    spread = float(os.environ["VT_TEST_SPREAD"])
    baseline = [ratio * (1 + spread * ((i % 5) - 2) / 2) for i in range(15)]
    lesson.benchmark("gate", "the gate", timings(kernel, baseline), "kernel", "baseline", threshold=1.0,
                     gate=os.environ.get("VT_TEST_GATE", "1") == "1")
    sys.exit(lesson.finish())
"""


@pytest.mark.integration
@pytest.mark.parametrize("ratio, spread, gate, outcome, verdict_", [
    (1.2, 0.01, "1", "passed", "met"),
    (1.0, 0.05, "1", "passed", "within noise"),
    (0.8, 0.01, "1", "failed", "not met"),
    (0.8, 0.01, "0", "passed", "not met"),  # a goal, not a gate
])
def test_the_gate_fails_the_run_only_when_not_met(project: Project, ratio, spread, gate, outcome, verdict_):
    project.add("gated", GATED)
    result = project.verify("--mode", "interpreter", VT_TEST_RATIO=str(ratio), VT_TEST_SPREAD=str(spread),
                            VT_TEST_GATE=gate)
    record = project.record("gated")
    assert record.outcome == outcome, result.stdout + result.stderr
    assert record.benchmarks[0].verdict == verdict_ and record.benchmarks[0].samples == 15
    assert result.returncode == (0 if outcome == "passed" else 1)
    if outcome == "failed":
        assert record.reason == "target gate"


# -- smoke runs (issue 26, Build 6) ----------------------------------------------------------------------
# In a smoke run (VT_SMOKE=1 under TRITON_INTERPRET=1) the steps that need a GPU run on the CPU, once, on
# tiny inputs: every benchmarked function is called once and nothing is timed, and no number from it may
# reach a benchmark, a table, a figure or a prediction. Before this issue the kit had no smoke run: a GPU
# step never ran under the interpreter, and every test below fails on the old kit (no SMOKE_ENV, no size()).

@pytest.fixture
def smoke(monkeypatch, tmp_path):
    """A lesson in a smoke run, recording to results.json as under verify."""
    monkeypatch.setenv(kit.INTERPRET_ENV, "1")
    monkeypatch.setenv(kit.SMOKE_ENV, "1")
    monkeypatch.setenv(kit.RESULTS_ENV, str(tmp_path / "results.json"))
    monkeypatch.setenv(kit.FIGURES_ENV, str(tmp_path / "figures"))
    monkeypatch.chdir(tmp_path)
    return kit.kit.Lesson("smoke-test")


def recorded(tmp_path) -> dict:
    return json.loads((tmp_path / "results.json").read_text())


@pytest.mark.unit
def test_a_smoke_run_calls_every_benchmarked_function_once_and_times_nothing(smoke):
    calls = collections.Counter()
    fns = {name: (lambda name=name: calls.update([name])) for name in ("kernel", "baseline", "copy")}
    t = kit.kit.bench_interleaved(fns, rounds=15, method="events")
    assert calls == {"kernel": 1, "baseline": 1, "copy": 1}
    assert t.timed is False and all(len(v) == 1 and math.isnan(v[0]) for v in t.values())
    assert "not timed" in t.method
    assert math.isnan(kit.kit.bench_ms(lambda: calls.update(["alone"]))) and calls["alone"] == 1


@pytest.mark.unit
def test_a_smoke_benchmark_is_a_check_that_its_code_ran_never_a_benchmark(smoke, tmp_path):
    assert smoke.step("benchmark", needs_gpu="timings need a GPU")
    t = kit.kit.bench_interleaved({"k": lambda: None, "b": lambda: None})
    assert smoke.benchmark("x", "x", t, "k", "b", unit="GB/s", work=1.0, threshold=0.95,
                           library="Liger-Kernel") is None
    with pytest.raises(KeyError, match="no timings for 'typo'"):  # a typo in a key fails here, not on a GPU
        smoke.benchmark("y", "y", t, "typo", "b")
    with pytest.raises(ValueError, match="needs `work`"):
        smoke.benchmark("z", "z", t, "k", "b", unit="GB/s")
    assert smoke.finish() == 0
    results = recorded(tmp_path)
    assert results["smoke"] is True and results["benchmarks"] == []
    [check] = results["checks"]
    assert (check["name"], check["status"], check["step"]) == ("smoke-x", "pass", "benchmark")
    assert "k and b each ran once on tiny inputs, untimed" in check["message"]
    assert "GB/s, target 0.95x, library Liger-Kernel" in check["message"]  # what a GPU run would judge


@pytest.mark.unit
def test_untimed_timings_never_become_a_benchmark_outside_a_smoke_run(lesson):
    t = kit.kit.Timings({"k": [1.0], "b": [1.0]})
    t.timed = False
    with pytest.raises(ValueError, match="measure nothing"):
        lesson.benchmark("x", "x", t, "k", "b")
    assert lesson.results.benchmarks == []


@pytest.mark.unit
def test_a_smoke_run_records_no_table_figure_or_measured_value(smoke, tmp_path):
    drawn = []
    assert smoke.step("sweep", needs_gpu="timings need a GPU")
    smoke.predict("p", 2.0, "a model", 0.1, quantity="value", unit="x")
    t = kit.kit.bench_interleaved({"k": lambda: None})
    smoke.measured("p", 1.0)  # whatever it is, a smoke run measured nothing
    smoke.table("sweep", ["n", "ms"], [[1, t.median("k")]])  # built and printed: its code runs
    smoke.plot("sweep", "a figure", lambda fig: drawn.append(fig.subplots().plot([1], [t.median("k")])))
    assert smoke.finish() == 0
    results = recorded(tmp_path)
    assert drawn, "the figure's code ran"
    assert results["tables"] == [] and results["figures"] == []
    assert [p["measured"] for p in results["predictions"]] == [None]
    assert not (tmp_path / "figures").exists()


@pytest.mark.unit
def test_a_gpu_step_runs_in_a_smoke_run_unless_it_says_why_not(smoke, tmp_path):
    assert smoke.step("benchmark", needs_gpu="timings need a GPU")
    assert not smoke.step("compiled-code", needs_gpu="the interpreter compiles nothing", smoke=False)
    assert not smoke.step("accuracy", needs_gpu="timings need a GPU", smoke="the interpreter has no float8")
    with smoke.step("exercises"):
        pass
    smoke.finish()
    steps = {s["name"]: s["not_run"] for s in recorded(tmp_path)["steps"]}
    assert steps == {"benchmark": "", "compiled-code": "the interpreter compiles nothing",
                     "accuracy": "the interpreter has no float8", "exercises": ""}


@pytest.mark.unit
def test_without_smoke_the_interpreter_runs_no_gpu_step_and_sizes_are_the_gpus(monkeypatch, tmp_path):
    monkeypatch.setenv(kit.INTERPRET_ENV, "1")
    monkeypatch.delenv(kit.SMOKE_ENV, raising=False)
    monkeypatch.delenv(kit.RESULTS_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    plain = kit.kit.Lesson("plain")
    assert not plain.smoke and plain.size(gpu=1 << 28, smoke=1000) == 1 << 28
    assert not plain.step("benchmark", needs_gpu="timings need a GPU")
    monkeypatch.setenv(kit.SMOKE_ENV, "1")
    assert kit.kit.Lesson("smoke").size(gpu=1 << 28, smoke=1000) == 1000
    monkeypatch.delenv(kit.INTERPRET_ENV)  # on a GPU, VT_SMOKE changes nothing
    gpu = kit.kit.Lesson("gpu")
    assert not gpu.smoke and gpu.size(gpu=1 << 28, smoke=1000) == 1 << 28


@pytest.mark.unit
def test_a_part_skipped_in_a_loop_is_recorded_once(smoke, tmp_path):
    for _ in range(3):
        assert smoke.not_on_interpreter("PTX counts", "the interpreter compiles no PTX")
    assert smoke.results.skipped_parts == [kit.SkippedPart("PTX counts", "the interpreter compiles no PTX")]


# -- figures (issue 32 item 5) ---------------------------------------------------------------

def recording_lesson(monkeypatch, tmp_path):
    monkeypatch.delenv(kit.INTERPRET_ENV, raising=False)
    monkeypatch.setenv(kit.RESULTS_ENV, str(tmp_path / "results.json"))
    monkeypatch.setenv(kit.FIGURES_ENV, str(tmp_path / "figures"))
    monkeypatch.chdir(tmp_path)
    return kit.kit.Lesson("figure-test")


@pytest.mark.unit
@pytest.mark.parametrize("size", [(7.0, 3.6), (5.0, 3.0), (11.0, 4.0)])
def test_a_figures_text_reads_on_a_phone_whatever_its_size(monkeypatch, tmp_path, size):
    """A figure is shown at the column's width (about 340 px on a phone): every legend, tick, label and title
    must come out at 10 px or more there. Before: 9 pt legends on a 7-inch figure, 6 px on a phone."""
    figures = []

    def draw(fig):
        ax = fig.subplots()
        ax.plot([1, 2], [3, 4], label="a line")
        ax.set_title("a title")
        ax.set_xlabel("x")
        ax.legend()
        figures.append(fig)

    recording_lesson(monkeypatch, tmp_path).plot("fig", "a figure", draw, size=size)
    assert len(figures) == 2  # light and dark
    for fig in figures:
        ax = fig.axes[0]
        texts = [*ax.get_legend().get_texts(), ax.title, ax.xaxis.label, *ax.get_xticklabels()]
        phone_px = {t.get_text(): t.get_fontsize() / 72 * 340 / size[0] for t in texts}
        assert min(phone_px.values()) >= 10 - 0.1, phone_px


@pytest.mark.unit
def test_bars_start_at_zero_whatever_limits_the_drawing_set(monkeypatch, tmp_path):
    """gluon-basics' bandwidth bars started at 3,850 GB/s, so a 7 % gap looked like a factor of three."""
    figures = []

    def draw(fig):
        up, across, logged = fig.subplots(1, 3)
        up.bar(["kernel", "copy"], [3900, 4200])
        up.set_ylim(3850, 4250)
        across.barh(["kernel", "copy"], [0.93, 1.0])
        across.set_xlim(0.9, 1.01)
        logged.bar(["a", "b"], [10, 1000])
        logged.set_yscale("log")
        figures.append(fig)

    recording_lesson(monkeypatch, tmp_path).plot("bars", "bars", draw)
    for fig in figures:
        up, across, logged = fig.axes
        assert up.get_ylim() == (0, 4250) and across.get_xlim() == (0, 1.01)
        assert logged.get_ylim()[0] > 0  # a log axis has no zero: left as drawn
    assert (tmp_path / "figures" / "bars.png").is_file()
