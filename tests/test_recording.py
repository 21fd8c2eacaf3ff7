"""Recording at scale: shards, several GPUs on one host, many bundles at once, history and changes beyond noise.

GPUs are simulated (VT_FAKE_GPUS, see tools/machine.py): verify plans, assigns
and records "gpu" runs of fake lessons exactly as on a real host, and each
fake lesson logs when it ran and which CUDA_VISIBLE_DEVICES it was given.
"""

from __future__ import annotations

import json
import random
import shutil
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import TWO_GPUS, Project, bench, fake_record, make_project
from verified_triton.core.limits import LIMITS
from verified_triton.judge.evidence import HistoryPoint, write_record
from verified_triton.record.bundles import write_bundle

# -- shards ------------------------------------------------------------------------------------


def lessons_named(*names: str) -> list:
    return [SimpleNamespace(name=n) for n in names]


@pytest.mark.unit
def test_a_shard_split_is_a_deterministic_partition():
    from verified_triton.record.plan import shard

    names = [f"lesson-{i:02d}" for i in range(23)]
    walls = {n: float((i * 37) % 11 + 1) for i, n in enumerate(names)}
    lessons = lessons_named(*names)
    for n in (1, 2, 3, 5, 23, 30):
        shards = [shard(lessons, k, n, lambda x: walls[x.name]) for k in range(1, n + 1)]
        got = [x.name for s in shards for x in s]
        assert sorted(got) == names, f"N={n}: a lesson is missing or in two shards"
        again = [shard(lessons, k, n, lambda x: walls[x.name]) for k in range(1, n + 1)]
        assert [[x.name for x in s] for s in again] == [[x.name for x in s] for s in shards]
        # the order lessons are listed in does not change the split, only the order within a shard
        shuffled = lessons[:]
        random.Random(n).shuffle(shuffled)
        assert [{x.name for x in shard(shuffled, k, n, lambda x: walls[x.name])} for k in range(1, n + 1)] == \
            [{x.name for x in s} for s in shards]
        for s in shards:  # course order is kept inside a shard
            assert [x.name for x in s] == sorted(x.name for x in s)


@pytest.mark.unit
def test_shards_are_balanced_by_recorded_wall_time():
    from verified_triton.record.plan import shard

    lessons = lessons_named("long", *[f"short-{i}" for i in range(10)])
    walls = {"long": 100.0, **{f"short-{i}": 10.0 for i in range(10)}}
    one, two = (shard(lessons, k, 2, lambda x: walls[x.name]) for k in (1, 2))
    assert [x.name for x in one] == ["long"] and len(two) == 10
    # in general, loads differ by at most the longest lesson (list scheduling, longest first)
    rng = random.Random(3)
    names = [f"l{i}" for i in range(40)]
    walls = {n: rng.uniform(1, 300) for n in names}
    for n in (2, 3, 4, 7):
        loads = [sum(walls[x.name] for x in shard(lessons_named(*names), k, n, lambda x: walls[x.name]))
                 for k in range(1, n + 1)]
        assert max(loads) - min(loads) <= max(walls.values())


@pytest.mark.unit
def test_a_lesson_never_recorded_counts_as_the_median():
    from verified_triton.record.plan import shard

    lessons = lessons_named("a", "b", "c", "new")
    walls = {"a": 10.0, "b": 20.0, "c": 30.0, "new": 0.0}
    one = shard(lessons, 1, 2, lambda x: walls[x.name])
    two = shard(lessons, 2, 2, lambda x: walls[x.name])
    # "new" weighs 20 (the median): c (30) | b (20), new (20) joins b (40), a (10) joins c (40)
    assert {x.name for x in one} == {"c", "a"} and {x.name for x in two} == {"b", "new"}


@pytest.mark.integration
@pytest.mark.parametrize("text", ["3/2", "0/2", "x", "1/0", "1-2", "-1/2", "1/2/3"])
def test_a_bad_shard_is_a_usage_error(project, text):
    from verified_triton.record.plan import parse_shard

    with pytest.raises(ValueError, match="--shard takes K/N"):
        parse_shard(text)
    project.add("good", "lesson = Lesson('good')\nsys.exit(lesson.finish())\n")
    result = project.verify(f"--shard={text}")
    assert result.returncode == 2 and "error: --shard takes K/N" in result.stderr
    assert "Traceback" not in result.stderr


def current_machine_record(lesson, mode: str, wall_s: float, **kw):
    """A passing record that verify considers up to date on this machine (so nothing runs)."""
    from verified_triton.record.machine import this_machine

    m = this_machine()
    rec = fake_record(lesson, mode, wall_s=wall_s, **kw)
    rec.env.python, rec.env.torch, rec.env.triton = m.python, m.torch, m.triton
    return rec


@pytest.mark.integration
def test_shard_on_the_command_line(project):
    walls = {"alpha": 30.0, "beta": 10.0, "gamma": 10.0, "delta": 10.0}
    for order, name in enumerate(walls):
        project.add(name, f"lesson = Lesson('{name}')\nsys.exit(lesson.finish())\n", order=order)
        write_record(project.evidence, current_machine_record(project.lesson(name), "interpreter", walls[name]))
    seen = {}
    for k in (1, 2):
        result = project.verify("--mode", "interpreter", "--shard", f"{k}/2")
        assert result.returncode == 0, result.stderr
        line = next(x for x in result.stdout.splitlines() if x.startswith(f"shard {k}/2: "))
        seen[k] = line.split(": ", 1)[1].split(", ")
        assert result.stdout.count("up to date") == len(seen[k])  # nothing needed a run
    assert seen == {1: ["alpha"], 2: ["beta", "gamma", "delta"]}
    # the split depends on the evidence only: asked again, the same answer
    again = project.verify("--mode", "interpreter", "--shard", "2/2").stdout
    assert "shard 2/2: beta, gamma, delta" in again


@pytest.mark.unit
def test_recorded_wall_reads_the_evidence(project):
    from verified_triton.record.plan import recorded_wall

    project.add("good", "lesson = Lesson('good')\nsys.exit(lesson.finish())\n")
    lesson = project.lesson("good")
    assert recorded_wall(lesson, ["interpreter", "gpu"], project.evidence) == 0.0
    write_record(project.evidence, fake_record(lesson, "interpreter", wall_s=5.0))
    write_record(project.evidence, fake_record(lesson, "gpu", wall_s=20.0))
    write_record(project.evidence, fake_record(lesson, "gpu", device="NVIDIA A100", wall_s=30.0))
    assert recorded_wall(lesson, ["interpreter"], project.evidence) == 5.0
    assert recorded_wall(lesson, ["gpu"], project.evidence) == 30.0  # the slowest GPU model
    assert recorded_wall(lesson, ["interpreter", "gpu"], project.evidence) == 35.0


# -- several GPUs on one host -----------------------------------------------------------------

LOGGED = """\
    import time

    name = Path(__file__).parent.name
    lesson = Lesson(name)
    start = time.time()
    time.sleep(float(os.environ.get("VT_TEST_SLEEP", "0.4")))
    lesson.check("ran", name != os.environ.get("VT_TEST_FAIL"), "the lesson ran")
    end = time.time()
    with open(os.environ["VT_TEST_LOG"], "a") as log:
        log.write(f"{name} {start} {end} {os.environ.get('CUDA_VISIBLE_DEVICES') or '-'}\\n")
    sys.exit(lesson.finish())
"""


def read_log(path: Path) -> list[tuple[str, float, float, str]]:
    rows = []
    for line in path.read_text().splitlines():
        name, start, end, gpu = line.split()
        rows.append((name, float(start), float(end), gpu))
    return rows


def overlaps(spans: list[tuple[float, float]]) -> bool:
    spans = sorted(spans)
    return any(b[0] < a[1] for a, b in zip(spans, spans[1:], strict=False))


@pytest.mark.integration
def test_one_lesson_per_gpu_at_a_time_and_a_failure_stops_nothing(project, tmp_path):
    names = [f"lesson-{c}" for c in "abcdef"]
    for order, name in enumerate(names):
        project.add(name, LOGGED, order=order)
    log = tmp_path / "runs.log"
    t0 = time.monotonic()
    result = project.verify("--mode", "gpu", "--gpus", "0,1", VT_FAKE_GPUS=TWO_GPUS, VT_TEST_LOG=str(log),
                            VT_TEST_FAIL="lesson-b")
    elapsed = time.monotonic() - t0
    assert result.returncode == 1, result.stdout + result.stderr  # lesson-b failed
    assert "Traceback" not in result.stderr
    runs = read_log(log)
    assert sorted(r[0] for r in runs) == names, "every lesson runs exactly once"
    assert {r[3] for r in runs} == {"0", "1"}, "both GPUs were used"
    for gpu in ("0", "1"):
        assert not overlaps([(r[1], r[2]) for r in runs if r[3] == gpu]), f"two runs at once on GPU {gpu}"
    assert overlaps([(r[1], r[2]) for r in runs]), "the two GPUs never ran at the same time"
    assert elapsed < 6 * 0.4 + 30
    for name in names:
        rec = project.record(name, "gpu-nvidia-h200")
        assert rec.outcome == ("failed" if name == "lesson-b" else "passed")
        assert rec.env.device_name == "NVIDIA H200" and rec.mode == "gpu"
    # the summary names the GPU each lesson ran on
    gpu_of = {r[0]: r[3] for r in runs}
    for name in names:
        assert any(line.startswith(name) and f"gpu GPU {gpu_of[name]}" in line for line in result.stdout.splitlines())


@pytest.mark.integration
def test_a_gpu_that_is_not_there_is_a_usage_error(project):
    project.add("good", "lesson = Lesson('good')\nsys.exit(lesson.finish())\n")
    for spec in ("2", "0,0", "x", ""):
        result = project.verify("--mode", "gpu", "--gpus", spec, VT_FAKE_GPUS=TWO_GPUS)
        assert result.returncode == 2, (spec, result.stdout, result.stderr)
        assert "--gpus" in result.stderr and "Traceback" not in result.stderr
    assert project.files() == {}


@pytest.mark.integration
def test_gpus_0_records_what_a_plain_run_records(project, tmp_path):
    project.add("good", LOGGED)
    other = make_project(tmp_path / "other")
    shutil.copytree(project.code, other.code, dirs_exist_ok=True)
    env = dict(VT_FAKE_GPUS="0:NVIDIA H200", VT_TEST_LOG=str(tmp_path / "log"), VT_TEST_SLEEP="0")
    plain = project.verify("--mode", "gpu", **env)
    pinned = other.verify("--mode", "gpu", "--gpus", "0", **env)
    assert plain.returncode == pinned.returncode == 0, plain.stderr + pinned.stderr

    def comparable(p: Project) -> dict:
        raw = json.loads(p.record_file("good", "gpu-nvidia-h200").read_text())
        del raw["started_utc"], raw["wall_s"]
        return raw

    assert comparable(project) == comparable(other)
    # CUDA_VISIBLE_DEVICES: inherited (empty here) in the plain run, set to the GPU with --gpus
    assert [r[3] for r in read_log(tmp_path / "log")] == ["-", "0"]


@pytest.mark.unit
def test_the_gpu_queue_in_process_never_doubles_up_and_survives_errors():
    """plan.execute with a stand-in for run_lesson: many lessons, three GPUs, one run that raises."""
    from verified_triton.record.machine import Gpu, Machine
    from verified_triton.record.plan import execute
    from verified_triton.record.runner import RunResult

    machine = Machine("3.11", "t", "tr", "Linux", tuple(Gpu(i, "NVIDIA H200") for i in range(3)))
    lessons = [SimpleNamespace(name=f"l{i:02d}", order=i) for i in range(20)]
    busy: dict[int, str] = {}
    log, lock = [], threading.Lock()

    def run(lesson, mode, machine, evidence_dir, timeout, gpu=None):
        with lock:
            assert gpu not in busy, f"{lesson.name} started on GPU {gpu} while {busy[gpu]} runs there"
            busy[gpu] = lesson.name
        time.sleep(random.uniform(0.001, 0.02))
        with lock:
            del busy[gpu]
            log.append((lesson.name, gpu))
        if lesson.name == "l07":
            raise OSError("disk full")
        return RunResult(lesson, mode, None, "ran", gpu=gpu)

    results = execute([(x, "gpu") for x in lessons], machine, Path("/nonexistent"), jobs=1, timeout=1,
                      gpus=[0, 1, 2], run=run)
    assert sorted(name for name, _ in log) == [x.name for x in lessons]
    assert {gpu for _, gpu in log} == {0, 1, 2}
    assert sorted(r.lesson.name for r in results) == [x.name for x in lessons]
    failed = [r for r in results if r.lesson.name == "l07"]
    assert failed[0].record is None and "verify could not record this run: disk full" in failed[0].skipped


@pytest.mark.unit
def test_several_gpus_start_the_longest_recorded_lessons_first():
    """LPT order: with a recorded wall time per lesson, the longest start first,
    an unrecorded lesson counts as the median, and the makespan shrinks."""
    from verified_triton.record.machine import Gpu, Machine
    from verified_triton.record.plan import execute, longest_first
    from verified_triton.record.runner import RunResult

    walls = {"a": 10.0, "b": 20.0, "c": 0.0, "d": 60.0, "e": 30.0}
    items = [(SimpleNamespace(name=n, order=i), "gpu") for i, n in enumerate(walls)]
    order = [x.name for x, _ in longest_first(items, lambda x: walls[x.name])]
    assert order == ["d", "e", "c", "b", "a"]  # c, never recorded: the median, 25

    machine = Machine("3.11", "t", "tr", "Linux", tuple(Gpu(i, "NVIDIA H200") for i in range(2)))
    started, lock = [], threading.Lock()

    def run(lesson, mode, machine, evidence_dir, timeout, gpu=None):
        with lock:
            started.append(lesson.name)
            first_two = len(started) <= 2
        if first_two:  # a run takes time: without it one worker can take two lessons before the other starts
            time.sleep(0.3)
        return RunResult(lesson, mode, None, "ran", gpu=gpu)

    execute(items, machine, Path("/nonexistent"), jobs=1, timeout=1, gpus=[0, 1], run=run,
            wall=lambda x: walls[x.name])
    assert set(started[:2]) == {"d", "e"} and sorted(started) == sorted(walls)
    plain = []
    execute(items, machine, Path("/nonexistent"), jobs=1, timeout=1, gpus=None,
            run=lambda lesson, *a, **k: plain.append(lesson.name) or RunResult(lesson, "gpu", None, "ran"))
    assert plain == list(walls), "one GPU keeps the course order"


# -- history and changes beyond noise ------------------------------------------------------------

SPEED = """\
    lesson = Lesson("speed")
    ratio = float(os.environ["VT_TEST_RATIO"])
    baseline = [ratio * (1 + 0.002 * ((i % 5) - 2)) for i in range(15)]
    lesson.benchmark("speed", "speed of the kernel", timings([1.0] * 15, baseline), "kernel", "baseline",
                     threshold=0.5)
    sys.exit(lesson.finish())
"""
GPU = dict(VT_FAKE_GPUS="0:NVIDIA H200")


def point(day: int, ratio: float = 1.0) -> HistoryPoint:
    return HistoryPoint(f"2025-12-{day:02d}T00:00:00Z", "a" * 64, "3.8.0", ratio, ratio * 0.99, ratio * 1.01)


def old_speed_record(project: Project, ratio: float = 1.0, history: int = 1):
    rec = fake_record(project.lesson("speed"), "gpu", started="2026-01-01T00:00:00Z",
                      benchmarks=[bench("speed", ratio, ratio * 0.99, ratio * 1.01, threshold=0.5,
                                        label="speed of the kernel")])
    rec.history = {"speed": [point(d) for d in range(1, history + 1)]}
    write_record(project.evidence, rec)
    return rec


@pytest.mark.integration
def test_history_is_carried_and_a_change_beyond_noise_is_printed(project):
    project.add("speed", SPEED)
    old_speed_record(project, 1.0, history=1)
    result = project.verify("--mode", "gpu", "--force", VT_TEST_RATIO="1.5", **GPU)
    assert result.returncode == 0, result.stdout + result.stderr
    assert ("change beyond noise: speed [gpu-nvidia-h200] speed of the kernel: faster, 1.000x [0.990, 1.010] on "
            "2026-01-01 -> 1.500x") in result.stdout
    rec = project.record("speed", "gpu-nvidia-h200")
    assert rec.benchmarks[0].ratio == pytest.approx(1.5)
    history = rec.history["speed"]
    assert [p.started_utc for p in history] == ["2025-12-01T00:00:00Z", "2026-01-01T00:00:00Z"]
    assert history[-1].ratio == 1.0 and history[-1].ratio_high == pytest.approx(1.01)


@pytest.mark.integration
def test_a_move_within_noise_is_not_a_change(project):
    project.add("speed", SPEED)
    old_speed_record(project, 1.0)
    result = project.verify("--mode", "gpu", "--force", VT_TEST_RATIO="1.005", **GPU)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "change beyond noise" not in result.stdout
    assert len(project.record("speed", "gpu-nvidia-h200").history["speed"]) == 2


@pytest.mark.integration
def test_history_is_bounded(project):
    project.add("speed", SPEED)
    old_speed_record(project, 1.0, history=LIMITS.history)
    assert project.verify("--mode", "gpu", "--force", VT_TEST_RATIO="1.0", **GPU).returncode == 0
    history = project.record("speed", "gpu-nvidia-h200").history["speed"]
    assert len(history) == LIMITS.history
    assert history[0].started_utc == "2025-12-02T00:00:00Z"  # the oldest fell off
    assert history[-1].started_utc == "2026-01-01T00:00:00Z"  # the record it replaced is the newest


@pytest.mark.unit
def test_carry_history_in_process():
    from verified_triton.judge.evidence import Environment, Record
    from verified_triton.record.changes import carry_history, changes

    def rec(started, ratio, history=None):
        r = Record("x", "gpu", "gpu-a", "passed", 0, started, 1.0, "c", "a" * 64, {}, Environment(triton="3"))
        r.benchmarks = [bench("b", ratio, ratio * 0.99, ratio * 1.01), bench("new-one", 2.0)]
        r.history = history or {}
        return r

    old = rec("2026-01-01T00:00:00Z", 1.0, {"b": [point(d) for d in range(1, 20)], "gone": [point(1)]})
    new = rec("2026-02-01T00:00:00Z", 0.8)
    carry_history(new, old)
    assert set(new.history) == {"b", "new-one"}  # benchmarks that no longer exist are dropped
    assert len(new.history["b"]) == LIMITS.history and new.history["b"][-1].started_utc == old.started_utc
    assert [p.started_utc for p in new.history["new-one"]] == [old.started_utc]
    (change,) = changes(new, old)
    assert change.direction == "slower" and "(-20.0 %)" in change.describe()
    # an "older" record that is in fact newer (a clock, a merge) is never history
    newer = rec("2026-03-01T00:00:00Z", 1.0)
    carry_history(new, newer)
    assert all(p.started_utc < new.started_utc for ps in new.history.values() for p in ps)
    assert changes(new, newer) == []


# -- many bundles at once ------------------------------------------------------------------------------

def bundle_of(path: Path, records) -> Path:
    write_bundle(path, records, path.parent)  # records without figures: nothing read from there
    return path


@pytest.fixture
def two_lessons(project):
    for order, name in enumerate(("one", "two")):
        project.add(name, f"lesson = Lesson('{name}')\nsys.exit(lesson.finish())\n", order=order)
    return project


@pytest.mark.integration
def test_bundles_from_shards_merge(two_lessons, tmp_path):
    project = two_lessons
    a = bundle_of(tmp_path / "a.tar.gz", [fake_record(project.lesson("one"), "gpu")])
    b = bundle_of(tmp_path / "b.tar.gz", [fake_record(project.lesson("two"), "gpu"),
                                          fake_record(project.lesson("two"), "interpreter")])
    result = project.verify("--import", str(a), str(b))
    assert result.returncode == 0, result.stderr
    assert "import: 3 records merged, 0 refused" in result.stdout
    assert sorted(project.files()) == ["one/gpu-nvidia-h200.json", "two/gpu-nvidia-h200.json",
                                       "two/interpreter.json"]


@pytest.mark.integration
@pytest.mark.parametrize("order", ["older-first", "newer-first"])
def test_a_conflict_keeps_the_newer_record_and_says_so(two_lessons, tmp_path, order):
    project = two_lessons
    lesson = project.lesson("one")
    older = bundle_of(tmp_path / "older.tar.gz", [fake_record(lesson, "gpu", started="2026-01-01T00:00:00Z")])
    newer = bundle_of(tmp_path / "newer.tar.gz", [fake_record(lesson, "gpu", started="2026-02-01T00:00:00Z")])
    paths = [older, newer] if order == "older-first" else [newer, older]
    result = project.verify("--import", *map(str, paths))
    assert result.returncode == 0, result.stderr
    assert "note: conflict: one/gpu-nvidia-h200" in result.stdout
    assert f"kept the newer, from {newer}" in result.stdout
    assert "import: 1 record merged" in result.stdout
    assert project.record("one", "gpu-nvidia-h200").started_utc == "2026-02-01T00:00:00Z"


@pytest.mark.integration
def test_a_record_here_that_is_newer_is_kept(two_lessons, tmp_path):
    project = two_lessons
    lesson = project.lesson("one")
    write_record(project.evidence, fake_record(lesson, "gpu", started="2026-03-01T00:00:00Z"))
    before = project.files()
    old = bundle_of(tmp_path / "old.tar.gz", [fake_record(lesson, "gpu", started="2026-01-01T00:00:00Z")])
    result = project.verify("--import", str(old))
    # a claimed date settles nothing alone: an older record is a change, listed, and needs --accept-changes
    assert "held back: one/gpu-nvidia-h200: started: 2026-03-01T00:00:00Z here -> 2026-01-01T00:00:00Z" \
        in result.stderr
    assert result.returncode == 1 and "--accept-changes" in result.stderr  # nothing came in: say so, exit 1
    assert project.files() == before


@pytest.mark.integration
def test_each_bundle_is_all_or_nothing(two_lessons, tmp_path):
    project = two_lessons
    one, two = project.lesson("one"), project.lesson("two")
    stranger = fake_record(one, "gpu")
    stranger.lesson = "zzz"
    mixed = bundle_of(tmp_path / "mixed.tar.gz", [fake_record(one, "gpu"), stranger])
    good = bundle_of(tmp_path / "good.tar.gz", [fake_record(two, "gpu")])
    result = project.verify("--import", str(mixed), str(good))
    assert result.returncode == 1
    assert "no lesson 'zzz' here; refused" in result.stderr
    assert f"{mixed}: nothing from this bundle was imported" in result.stderr
    assert "import: 1 record merged, 2 refused" in result.stdout
    assert sorted(project.files()) == ["two/gpu-nvidia-h200.json"]


@pytest.mark.integration
def test_import_prints_changes_and_carries_history(two_lessons, tmp_path):
    project = two_lessons
    lesson = project.lesson("one")
    write_record(project.evidence, fake_record(lesson, "gpu", started="2026-01-01T00:00:00Z",
                                               benchmarks=[bench("b", 1.0, 0.98, 1.02, label="the b")]))
    newer = bundle_of(tmp_path / "n.tar.gz", [fake_record(lesson, "gpu", started="2026-02-01T00:00:00Z",
                                                          benchmarks=[bench("b", 0.7, 0.68, 0.72, label="the b")])])
    held = project.verify("--import", str(newer))  # a ratio beyond noise of the current record: listed, held
    assert held.returncode == 1 and "held back: one/gpu-nvidia-h200: the b: 1.000x [0.980, 1.020] -> " \
        "0.700x [0.680, 0.720]" in held.stderr
    result = project.verify("--import", str(newer), "--accept-changes")
    assert result.returncode == 0, result.stderr
    assert "change beyond noise: one [gpu-nvidia-h200] the b: slower, 1.000x [0.980, 1.020] on 2026-01-01 -> " \
           "0.700x [0.680, 0.720] (-30.0 %)" in result.stdout
    history = project.record("one", "gpu-nvidia-h200").history["b"]
    assert [(p.started_utc, p.ratio) for p in history] == [("2026-01-01T00:00:00Z", 1.0)]
