"""What to run, where, and in which order.

One job: decide which (lesson, mode) pairs need a run (their evidence is
missing, for another source, or from other versions), split the course into
shards balanced by recorded wall time, and execute the runs: interpreter runs
in parallel on the CPUs, then GPU runs one lesson per GPU at a time (never two
on one GPU, so timings do not collide), with progress lines and a heartbeat.
Runs under compute-sanitizer time nothing: they share the GPUs, `jobs` at a time.

The one planner of recording at scale: the shards here, and the CI plan that
`.github/workflows/record.yml` asks for through `tools/ci_plan.py` (`ci_plan`:
the jobs of each runner label set and shard; `bundle_problems`: the bundles
publish must find, one per record job and kind, and nothing else).
"""

from __future__ import annotations

import json
import queue
import re
import statistics
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from verified_triton.core.lessons import Lesson, LessonError, discover
from verified_triton.judge.evidence import EvidenceError, Record, read_record, record_path
from verified_triton.judge.memory import judge_memory
from verified_triton.judge.status import contradictions
from verified_triton.record.machine import Machine
from verified_triton.record.report import terminal_safe
from verified_triton.record.runner import RunResult, mode_key, run_lesson
from verified_triton.record.sanitizer import run_sanitize_lesson

HEARTBEAT_S = 20.0
DEFAULT_WALL_S = 60.0  # a lesson never recorded counts as this in shard balancing


def is_up_to_date(record: Record, source_hash: str, machine: Machine) -> bool:
    env = record.env
    same_env = (env.python, env.torch, env.triton) == (machine.python, machine.torch, machine.triton)
    return record.source_hash == source_hash and same_env


def plan_runs(lessons: list[Lesson], modes: list[str], machine: Machine, evidence_dir: Path,
              force: bool) -> tuple[list[tuple[Lesson, str]], list[RunResult]]:
    todo, skipped = [], []
    gpu_name = machine.gpus[0].name if machine.gpus else ""
    for lesson in lessons:
        for mode in modes:
            spec = lesson.sanitize if mode == "sanitize" else lesson.modes[mode]
            if not spec.supported:
                skipped.append(RunResult(lesson, mode, None, f"not supported: {spec.reason}"))
                continue
            if mode != "interpreter" and not machine.has_gpu:
                skipped.append(RunResult(lesson, mode, None, "not run: no CUDA device on this machine"))
                continue
            path = record_path(evidence_dir, lesson.name, mode_key(mode, gpu_name))
            if not force and path.exists():
                try:
                    old = read_record(path, evidence_dir)
                except EvidenceError:
                    old = None
                if old and is_up_to_date(old, lesson.source_hash(), machine) and not contradictions(lesson, old):
                    skipped.append(RunResult(lesson, mode, old, "up to date"))
                    continue
            todo.append((lesson, mode))
    return todo, skipped


# -- shards ---------------------------------------------------------------------------

def parse_shard(text: str) -> tuple[int, int]:
    """'2/5' -> (2, 5); ValueError with the reason otherwise."""
    k, sep, n = text.partition("/")
    if not sep or not k.isdigit() or not n.isdigit() or not 1 <= int(k) <= int(n):
        raise ValueError(f"--shard takes K/N with 1 <= K <= N, e.g. 2/4; got {text!r}")
    return int(k), int(n)


def recorded_wall(lesson: Lesson, modes: list[str], evidence_dir: Path) -> float:
    """Seconds the lesson's recorded runs in these modes took (0 when none is recorded)."""
    total = 0.0
    folder = evidence_dir / lesson.name
    for mode in modes:
        walls = []
        pattern = {"interpreter": "interpreter.json", "gpu": "gpu-*.json"}.get(mode, f"{mode}-*.json")
        for path in sorted(folder.glob(pattern)):
            try:
                walls.append(read_record(path, evidence_dir).wall_s)
            except EvidenceError:
                continue
        total += max(walls, default=0.0)
    return total


def shard(lessons: list[Lesson], k: int, n: int, wall: Callable[[Lesson], float]) -> list[Lesson]:
    """Shard k of n: longest-first greedy packing into n bins by recorded wall time.

    Deterministic for a given evidence folder, so every shard of one commit
    agrees on the split; every lesson lands in exactly one shard. A lesson
    never recorded counts as the median of the others (or DEFAULT_WALL_S).
    """
    weights = wall_weights(lessons, wall)
    bins: list[list[Lesson]] = [[] for _ in range(n)]
    loads = [0.0] * n
    for lesson in sorted(lessons, key=lambda x: (-weights[x.name], x.name)):
        target = min(range(n), key=lambda i: (loads[i], i))
        bins[target].append(lesson)
        loads[target] += weights[lesson.name]
    order = {lesson.name: i for i, lesson in enumerate(lessons)}
    return sorted(bins[k - 1], key=lambda x: order[x.name])


def wall_weights(lessons: list[Lesson], wall: Callable[[Lesson], float]) -> dict[str, float]:
    """Each lesson's recorded wall time by name; one never recorded counts as the
    median of the others (or DEFAULT_WALL_S when none is)."""
    walls = {lesson.name: wall(lesson) for lesson in lessons}
    known = [w for w in walls.values() if w > 0]
    default = statistics.median(known) if known else DEFAULT_WALL_S
    return {name: w or default for name, w in walls.items()}


# -- running ------------------------------------------------------------------------------

class Progress:
    """One line when a run starts or ends, and a heartbeat for long ones."""

    def __init__(self, total: int):
        self.total, self.done = total, 0
        self.running: dict[str, float] = {}
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._beat, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()

    def started(self, label: str) -> None:
        with self.lock:
            self.running[label] = time.monotonic()
            print(f"[{self.done}/{self.total}] {label}: running", flush=True)

    def finished(self, label: str, result: RunResult) -> None:
        with self.lock:
            self.running.pop(label, None)
            self.done += 1
            record = result.record
            if record is None:
                print(f"[{self.done}/{self.total}] {label}: error ({terminal_safe(result.skipped)})", flush=True)
                return
            extra = f": {terminal_safe(record.reason)}" if record.reason else ""
            if getattr(record, "sanitizer", None) is not None:  # a release record (record/matrix.py) has none
                check = judge_memory(result.lesson, record)
                extra = f"; memory check {check.state}: {terminal_safe(check.line)}" + extra
            if not result.written:
                extra = f"; {terminal_safe(result.skipped)}"
            print(f"[{self.done}/{self.total}] {label}: {record.outcome} in {record.wall_s:.1f} s{extra}", flush=True)
            for change in result.changes:
                print(f"    {change.heading}: {terminal_safe(change.describe())}", flush=True)

    def _beat(self) -> None:
        while not self.stop.wait(HEARTBEAT_S):
            with self.lock:
                now = time.monotonic()
                busy = ", ".join(f"{k} {now - t:.0f} s" for k, t in self.running.items())
            if busy:
                print(f"    still running: {busy}", flush=True)


def execute(todo: list[tuple[Lesson, str]], machine: Machine, evidence_dir: Path, jobs: int,
            timeout: float | None, gpus: list[int] | None = None, run=run_lesson,
            wall: Callable[[Lesson], float] | None = None, sanitize=run_sanitize_lesson) -> list[RunResult]:
    """Interpreter runs in parallel; then GPU runs, one at a time on each GPU in `gpus`; then the runs under
    compute-sanitizer (`sanitize`), `jobs` at a time, spread over `gpus`.

    With no `gpus` the GPU runs go one after another on the default device,
    exactly as a single-GPU machine has always recorded. With `gpus`, the
    lessons whose recorded GPU runs took longest (`wall`) start first, so a
    long one does not start last and leave the other GPUs idle. A failed run
    never stops the others.
    """
    results: list[RunResult] = []
    cpu = [item for item in todo if item[1] == "interpreter"]
    gpu = [item for item in todo if item[1] == "gpu"]
    checked = [item for item in todo if item[1] == "sanitize"]
    with Progress(len(todo)) as progress:
        def one(item: tuple[Lesson, str], device: int | None = None) -> RunResult:
            lesson, mode = item
            label = f"{lesson.name} [{mode}" + (f", GPU {device}]" if device is not None else "]")
            progress.started(label)
            try:
                result = (sanitize if mode == "sanitize" else run)(lesson, mode, machine, evidence_dir, timeout,
                                                                    gpu=device)
            except Exception as exc:  # a broken evidence folder, a full disk: report it, run the rest
                result = RunResult(lesson, mode, None, f"verify could not record this run: {exc}", gpu=device)
            progress.finished(label, result)
            return result

        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            results.extend(pool.map(one, cpu))
        if not gpus:
            results.extend(one(item) for item in gpu)
        else:
            if wall is not None:
                gpu = longest_first(gpu, wall)
            results.extend(_on_gpus(gpu, gpus, one))
        if checked:  # nothing is timed: several lessons share a GPU
            devices = [gpus[i % len(gpus)] if gpus else None for i in range(len(checked))]
            with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
                results.extend(pool.map(one, checked, devices))
    return results


def longest_first(items: list[tuple[Lesson, str]], wall: Callable[[Lesson], float]) -> list[tuple[Lesson, str]]:
    """Longest recorded run first (the classic LPT order); a lesson never
    recorded counts as the median of the others; ties keep course order."""
    weights = wall_weights([lesson for lesson, _ in items], wall)
    return sorted(items, key=lambda item: -weights[item[0].name])  # a stable sort


def _on_gpus(items: list[tuple[Lesson, str]], gpus: list[int], one) -> list[RunResult]:
    """One worker per GPU, each taking the next lesson when its GPU is free."""
    work: queue.Queue = queue.Queue()
    for item in items:
        work.put(item)
    done: list[RunResult] = []
    lock = threading.Lock()

    def worker(device: int) -> None:
        while True:
            try:
                item = work.get_nowait()
            except queue.Empty:
                return
            result = one(item, device)
            with lock:
                done.append(result)

    threads = [threading.Thread(target=worker, args=(g,), name=f"gpu-{g}") for g in gpus]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return done


# -- the CI plan: record.yml's plan job and the bundles its publish job expects ----------------------------

RELEASE = re.compile(r"\A[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}\Z")
RUNNERS_SHAPE = ('runners must be a non-empty JSON list of label lists, like [["self-hosted","gpu","h200"]], '
                 'or of {"labels": [...], "triton": "3.7.1"}')
GPU_KINDS = ("gpu", "sanitize")  # the bundles each GPU job uploads: its runs, then its memory check


class PlanError(ValueError):
    """Inputs the CI plan refuses, in words for the workflow's log."""


def ci_plan(runners: str, shards: str, triton: str, code_dir: Path) -> dict:
    """The matrices of record.yml from its inputs: {"gpu": one job per runner label set and shard, "interpreter":
    one per shard, "bundles": how many publish downloads}. `runners` is JSON (a list of label lists, or of
    {"labels": [...], "triton": "X.Y.Z"}); the last label of a set names its GPU model in the bundles' names and
    must be unique; `shards` is N, from 1 to the number of lessons (a shard with none writes no bundle and
    fails); `triton` the release of the sets that name none ('' for each runner's own)."""
    try:
        n = int(shards)
    except ValueError:
        raise PlanError(f"shards must be a whole number, not {shards[:40]!r}") from None
    try:
        lessons = len(discover(code_dir))
    except LessonError as exc:
        raise PlanError(f"the lessons cannot be counted: {exc}") from None
    if not 1 <= n <= lessons:
        raise PlanError(f"shards must be between 1 and the number of lessons ({lessons}), not {n}")
    try:
        sets = json.loads(runners)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise PlanError(f"runners is not JSON: {exc}") from None
    default = triton.strip()
    if default and not RELEASE.match(default):
        raise PlanError(f"triton must be a release like 3.6.0, or empty for each runner's own, not {default[:40]!r}")
    if not isinstance(sets, list) or not sets:
        raise PlanError(RUNNERS_SHAPE)
    gpu, names = [], set()
    for entry in sets:
        labels, release = _label_set(entry, default)
        name = re.sub(r"[^a-z0-9._-]+", "-", labels[-1].lower()).strip("-.")
        if not name or name in names:
            raise PlanError(f"the last label of each set names its GPU model and must be unique: {labels}")
        names.add(name)
        gpu += [{"labels": labels, "name": name, "shard": k, "shards": n, "triton": release} for k in range(1, n + 1)]
    interpreter = [{"shard": k, "shards": n} for k in range(1, n + 1)]
    return {"gpu": gpu, "interpreter": interpreter, "bundles": len(expected_bundles(gpu, interpreter))}


def _label_set(entry, default: str) -> tuple[list[str], str]:
    """A list of labels, or {"labels": [...], "triton": "X.Y.Z"}: the Triton axis, per runner set."""
    if isinstance(entry, dict):
        if set(entry) - {"labels", "triton"}:
            raise PlanError(f"a runner set has only labels and triton: {str(entry)[:200]}")
        labels, release = entry.get("labels"), entry.get("triton", default)
    else:
        labels, release = entry, default
    if not (isinstance(labels, list) and labels and all(isinstance(x, str) and x for x in labels)):
        raise PlanError(RUNNERS_SHAPE)
    if not isinstance(release, str) or (release and not RELEASE.match(release)):
        raise PlanError(f"the triton of a runner set is a release like 3.6.0: {str(entry)[:200]}")
    return labels, release


def expected_bundles(gpu: list[dict], interpreter: list[dict]) -> dict[str, str]:
    """Artifact name -> the one bundle file it holds, for every record job of the plan (a GPU job uploads two)."""
    want = {f"bundle-{kind}-{j['name']}-{j['shard']}-of-{j['shards']}": f"{kind}-{j['name']}-{j['shard']}-of-"
            f"{j['shards']}.tar.gz" for j in gpu for kind in GPU_KINDS}
    want |= {f"bundle-interpreter-{j['shard']}-of-{j['shards']}": f"interpreter-{j['shard']}-of-{j['shards']}.tar.gz"
             for j in interpreter}
    return want


def bundle_problems(folder: Path, gpu: list[dict], interpreter: list[dict]) -> list[str]:
    """What publish must refuse in the downloaded artifacts (one folder each): an artifact no record job made,
    one holding anything but its one bundle, or a record job's artifact missing."""
    want = expected_bundles(gpu, interpreter)
    have = {p.name: sorted(f.name for f in p.iterdir()) for p in sorted(folder.iterdir())} if folder.is_dir() else {}
    problems = [f"artifact {name}: holds {files}, not [{want.get(name, '?')!r}]"
                for name, files in sorted(have.items()) if files != [want.get(name)]]
    problems += [f"no artifact {name} (its record job uploaded none)" for name in sorted(set(want) - set(have))]
    return problems
