"""What to run, where, and in which order.

One job: decide which (lesson, mode) pairs need a run (their evidence is
missing, for another source, or from other versions), split the course into
shards balanced by recorded wall time, and execute the runs: interpreter runs
in parallel on the CPUs, then GPU runs one lesson per GPU at a time (never two
on one GPU, so timings do not collide), with progress lines and a heartbeat.
Runs under compute-sanitizer time nothing: they share the GPUs, `jobs` at a time.
"""

from __future__ import annotations

import queue
import statistics
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from verified_triton.core.lessons import Lesson
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
