"""The kit's contract with verify: intervals, verdicts, the pass rule, and benchmarks from paired rounds.

code/lessonkit.py defines these once; tools/kit.py loads that file by path, so
the tools and the lessons cannot disagree. The interval is checked against
its stated coverage on data whose median is known.
"""

from __future__ import annotations

import math
import random

import pytest

import kit
from conftest import KIT, Project
from kit import failures, median_interval, verdict


def coverage(n: int) -> float:
    """The exact coverage median_interval promises for n samples (binomial(n, 1/2) tails)."""
    _, low, high = median_interval(list(range(n)))
    k = int(low)
    return 1 - 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2**n


def test_the_tools_load_the_lessons_kit_by_path():
    assert kit.KIT_PATH == KIT
    assert kit.kit.__file__ == str(KIT)
    assert (kit.EXIT_PASSED, kit.EXIT_FAILED, kit.EXIT_CANNOT_RUN, kit.EXIT_BY_DESIGN) == (0, 1, 2, 3)
    assert kit.Benchmark is kit.kit.Benchmark and kit.RESULTS_ENV == "VT_RESULTS"
    assert set(kit.VERDICTS) == {"met", "not met", "within noise"}


# -- the interval --------------------------------------------------------------------------

@pytest.mark.parametrize("n, k", [(6, 0), (8, 0), (9, 1), (15, 3), (20, 5), (30, 9), (100, 39)])
def test_interval_order_statistics_on_known_inputs(n, k):
    xs = [float(i) for i in range(n)]
    random.Random(n).shuffle(xs)
    median, low, high = median_interval(xs)
    assert median == (n - 1) / 2
    assert (low, high) == (k, n - 1 - k)  # the k-th smallest and k-th largest (0-based)
    assert coverage(n) >= 0.95


def test_fewer_than_six_samples_give_their_range():
    assert median_interval([3.0]) == (3.0, 3.0, 3.0)
    assert median_interval([2.0, 1.0, 4.0]) == (2.0, 1.0, 4.0)
    assert median_interval([5.0, 1.0, 2.0, 3.0, 4.0]) == (3.0, 1.0, 5.0)
    assert coverage(5) < 0.95  # as the docstring says: the range covers less than the level
    with pytest.raises(ValueError):
        median_interval([])


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

@pytest.mark.parametrize("low, high, target, expect", [
    (1.05, 1.10, 1.0, "met"),
    (1.00, 1.10, 1.0, "met"),  # the lower bound reaching the target is enough
    (0.90, 0.99, 1.0, "not met"),
    (0.95, 1.05, 1.0, "within noise"),
    (0.95, 1.00, 1.0, "within noise"),  # the upper bound touching it is not "not met"
])
def test_verdict_from_the_interval(low, high, target, expect):
    assert verdict(low, high, target) == expect


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


def test_a_rate_benchmark_uses_the_work_of_each_side(lesson):
    kernel, baseline = [2.0] * 10, [1.0] * 10  # the kernel takes twice as long ...
    b = lesson.benchmark("r", "a rate", rounds(kernel, baseline), "k", "b", unit="GB/s", work=(4e9, 1e9),
                         threshold=1.0, gate=False)
    # ... but moves four times the bytes: 2000 GB/s against 1000 GB/s
    assert (b.measured, b.baseline, b.ratio, b.ratio_low, b.ratio_high) == (2000.0, 1000.0, 2.0, 2.0, 2.0)
    assert b.verdict == "met" and b.gate is False


@pytest.mark.parametrize("kwargs, kernel, message", [
    ({"unit": "furlongs"}, [1.0], "is not one of"),
    ({"unit": "GB/s"}, [1.0], "needs `work`"),
    ({}, [1.0, 1.0], "need the same rounds"),
    ({}, [-1.0], "positive and finite"),
])
def test_benchmark_mistakes_are_clear_errors(lesson, kwargs, kernel, message):
    with pytest.raises(ValueError, match=message):
        lesson.benchmark("x", "x", rounds(kernel, [1.0]), "k", "b", **kwargs)


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
