"""Run every lesson under Triton's interpreter and on a GPU, and record what happened.

    python tools/verify.py                      run what changed, both modes
    python tools/verify.py --lesson fp16-matmul --mode gpu --force
    python tools/verify.py --status [--json]    show each lesson's badge, run nothing
    python tools/verify.py --check              fail unless every lesson's evidence is current
    python tools/verify.py --compare            re-run the interpreter mode and compare with the record
    python tools/verify.py --mode gpu --bundle out.tar.gz   (on a GPU machine) bundle the records
    python tools/verify.py --import out.tar.gz  merge a bundle recorded elsewhere

Each run is its own process with a timeout; its stdout, stderr, exit code, wall
time, the lesson kit's structured results, the versions and the hash of the
source that ran become one record under evidence/ (see evidence.py). A machine
without a GPU never writes, deletes or overwrites GPU evidence.
"""

from __future__ import annotations

import argparse
import collections
import io
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from evidence import (  # noqa: E402
    FORMAT_VERSION,
    STREAM_LIMIT,
    Environment,
    EvidenceError,
    Record,
    gpu_key,
    read_record,
    record_from_dict,
    record_path,
    write_record,
)
from lessons import MODES, Lesson, LessonError, combined_hash, discover  # noqa: E402
from status import FAILED, STALE, UNVERIFIED, LessonStatus, judge  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
EXIT_CANNOT_RUN, EXIT_BY_DESIGN = 2, 3  # lessonkit's codes
HEARTBEAT_S = 20.0


# -- the machine ----------------------------------------------------------------

@dataclass(frozen=True)
class Machine:
    python: str
    torch: str
    triton: str
    platform: str
    gpu_name: str  # "" when no CUDA device is visible
    driver: str

    @property
    def has_gpu(self) -> bool:
        return bool(self.gpu_name)


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def probe_gpu() -> tuple[str, str]:
    """(name, driver) of GPU 0 from nvidia-smi, without importing torch; ('', '') when none."""
    if os.environ.get("CUDA_VISIBLE_DEVICES") == "" or not shutil.which("nvidia-smi"):
        return "", ""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return "", ""
    first = out.stdout.strip().splitlines()[:1]
    if out.returncode != 0 or not first:
        return "", ""
    name, _, driver = first[0].partition(",")
    return name.strip(), driver.strip()


def this_machine() -> Machine:
    name, driver = probe_gpu()
    return Machine(platform.python_version(), _version("torch"), _version("triton"),
                   f"{platform.system()} {platform.machine()}", name, driver)


def mode_key(mode: str, machine: Machine) -> str:
    return "interpreter" if mode == "interpreter" else gpu_key(machine.gpu_name)


def is_up_to_date(record: Record, source_hash: str, machine: Machine) -> bool:
    env = record.env
    same_env = (env.python, env.torch, env.triton) == (machine.python, machine.torch, machine.triton)
    return record.source_hash == source_hash and same_env


# -- one run --------------------------------------------------------------------

class BoundedReader(threading.Thread):
    """Drain a pipe, keeping the first and last bytes only, so megabytes of output cost little."""

    def __init__(self, pipe, limit: int = STREAM_LIMIT):
        super().__init__(daemon=True)
        self.pipe, self.head_limit, self.tail_limit = pipe, limit * 3 // 4, limit // 4
        self.head = bytearray()
        self.tail: collections.deque[bytes] = collections.deque()
        self.tail_size = self.total = 0

    def run(self) -> None:
        for chunk in iter(lambda: self.pipe.read(8192), b""):
            self.total += len(chunk)
            room = self.head_limit - len(self.head)
            if room > 0:
                self.head += chunk[:room]
                chunk = chunk[room:]
            if chunk:
                self.tail.append(chunk)
                self.tail_size += len(chunk)
                while self.tail_size - len(self.tail[0]) >= self.tail_limit:
                    self.tail_size -= len(self.tail.popleft())

    def text(self) -> tuple[str, int]:
        tail = b"".join(self.tail)[-self.tail_limit:] if self.tail else b""
        omitted = self.total - len(self.head) - len(tail)
        data = bytes(self.head)
        if omitted > 0:
            data += f"\n[... {omitted} bytes omitted ...]\n".encode()
        return (data + tail).decode("utf-8", errors="replace"), max(omitted, 0)


@dataclass
class RunResult:
    lesson: Lesson
    mode: str
    record: Record | None
    skipped: str = ""  # why it did not run: up to date, no GPU, not supported


def run_lesson(lesson: Lesson, mode: str, machine: Machine, evidence_dir: Path,
               timeout: float | None) -> Record:
    """Run one lesson in one mode in its own process and write its record."""
    limit = timeout or lesson.modes[mode].timeout
    work = Path(tempfile.mkdtemp(prefix=f"verify-{lesson.name}-"))
    results_file, fig_dir = work / "results.json", work / "figures"
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONIOENCODING="utf-8",
               VT_RESULTS=str(results_file), VT_FIGURES=str(fig_dir), MPLBACKEND="Agg")
    env.pop("TRITON_INTERPRET", None)
    if mode == "interpreter":
        env["TRITON_INTERPRET"] = "1"
    rel_main = lesson.relative(lesson.main)
    command = ("TRITON_INTERPRET=1 " if mode == "interpreter" else "") + f"python {rel_main}"
    started = datetime.now(UTC)
    t0 = time.monotonic()
    # Hash the files once, before the run: the record's hash and file list describe the same bytes.
    source_files = lesson.source_file_hashes()
    proc = subprocess.Popen([sys.executable, str(lesson.main)], cwd=lesson.folder, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    readers = [BoundedReader(proc.stdout), BoundedReader(proc.stderr)]
    for reader in readers:
        reader.start()
    timed_out = False
    try:
        proc.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc)
        proc.wait()
    _kill_group(proc)  # anything the lesson left running would hold its pipes open and outlive verify
    for reader in readers:
        reader.join(timeout=10)
    wall = time.monotonic() - t0
    (stdout, out_cut), (stderr, err_cut) = readers[0].text(), readers[1].text()
    results = _read_results(results_file)
    outcome, reason = _classify(lesson, mode, proc.returncode, timed_out, limit, results)
    device = results.get("device") if isinstance(results.get("device"), dict) else {}
    record = Record(
        lesson=lesson.name, mode=mode, key=mode_key(mode, machine), outcome=outcome,
        exit_code=None if timed_out else proc.returncode,
        started_utc=started.strftime("%Y-%m-%dT%H:%M:%SZ"), wall_s=round(wall, 2), command=command,
        source_hash=combined_hash(source_files),
        source_files=source_files,
        env=Environment(
            python=machine.python, torch=machine.torch, triton=machine.triton, platform=machine.platform,
            device_name="CPU" if mode == "interpreter" else (machine.gpu_name or device.get("name", "")),
            capability=device.get("capability", "") if mode == "gpu" else "",
            driver=machine.driver if mode == "gpu" else "",
            cuda=device.get("cuda") or "" if mode == "gpu" else ""),
        stdout=stdout, stderr=stderr, stdout_omitted=out_cut, stderr_omitted=err_cut, reason=reason,
        checks=results.get("checks", []), benchmarks=results.get("benchmarks", []),
        tables=results.get("tables", []), figures=[], skipped_parts=results.get("skipped_parts", []),
    )
    key = record.key
    figure_files = {}
    for fig in _dicts(results.get("figures")):
        src = fig_dir / str(fig.get("file", ""))
        if src.is_file() and src.suffix == ".png":
            figure_files[src.name] = src
            record.figures.append({"name": fig.get("name", src.stem), "file": f"{key}/{src.name}",
                                   "caption": fig.get("caption", "")})
    # Round-trip through the reader so malformed results fail this run here, not the site build.
    try:
        record = record_from_dict(json.loads(record.to_json()))
    except (KeyError, TypeError, ValueError) as exc:
        record.outcome = "failed"
        record.reason = f"the lesson's results file is malformed ({exc}); its structured results were dropped"
        record.checks, record.benchmarks, record.tables, record.figures, record.skipped_parts = [], [], [], [], []
        figure_files = {}
        record = record_from_dict(json.loads(record.to_json()))
    write_record(evidence_dir, record, figure_files)
    shutil.rmtree(work, ignore_errors=True)
    return record


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _dicts(value) -> list[dict]:
    """The objects in a list from the lesson's results file; anything else is left to the record check."""
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _read_results(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _classify(lesson: Lesson, mode: str, code: int | None, timed_out: bool, limit: float,
              results: dict) -> tuple[str, str]:
    if timed_out:
        return "timeout", f"killed after the {limit:.0f} s timeout"
    expected = lesson.modes[mode].expected_exits
    if code in expected:
        return "by-design", expected[code]
    if code == EXIT_BY_DESIGN and results.get("by_design"):
        return "by-design", str(results["by_design"])
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:  # e.g. a real-time signal, which has no name in the enum
            name = str(-code)
        return "crashed", f"killed by signal {name}"
    failed = [str(c.get("name")) for c in _dicts(results.get("checks")) if c.get("status") == "fail"]
    missed = [str(b.get("name")) for b in _dicts(results.get("benchmarks"))
              if b.get("gate") and b.get("met") is False]
    if code == 0 and not failed and not missed:
        return "passed", ""
    if code == EXIT_CANNOT_RUN:
        return "failed", "the lesson could not run on this machine"
    parts = []
    if failed:
        parts.append("failed checks: " + ", ".join(failed))
    if missed:
        parts.append("missed targets: " + ", ".join(missed))
    if code == 0:
        parts.append("exit 0 despite failures")
    return "failed", "; ".join(parts) or f"exit {code}"


# -- many runs --------------------------------------------------------------------

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

    def finished(self, label: str, record: Record) -> None:
        with self.lock:
            self.running.pop(label, None)
            self.done += 1
            extra = f" ({terminal_safe(record.reason)})" if record.reason else ""
            print(f"[{self.done}/{self.total}] {label}: {record.outcome} in {record.wall_s:.1f} s{extra}",
                  flush=True)

    def _beat(self) -> None:
        while not self.stop.wait(HEARTBEAT_S):
            with self.lock:
                now = time.monotonic()
                busy = ", ".join(f"{k} {now - t:.0f} s" for k, t in self.running.items())
            if busy:
                print(f"    still running: {busy}", flush=True)


def plan_runs(lessons: list[Lesson], modes: list[str], machine: Machine, evidence_dir: Path,
              force: bool) -> tuple[list[tuple[Lesson, str]], list[RunResult]]:
    todo, skipped = [], []
    for lesson in lessons:
        for mode in modes:
            spec = lesson.modes[mode]
            if not spec.supported:
                skipped.append(RunResult(lesson, mode, None, f"not supported: {spec.reason}"))
                continue
            if mode == "gpu" and not machine.has_gpu:
                skipped.append(RunResult(lesson, mode, None, "not run: no CUDA device on this machine"))
                continue
            path = record_path(evidence_dir, lesson.name, mode_key(mode, machine))
            if not force and path.exists():
                try:
                    old = read_record(path)
                except EvidenceError:
                    old = None
                if old and is_up_to_date(old, lesson.source_hash(), machine):
                    skipped.append(RunResult(lesson, mode, old, "up to date"))
                    continue
            todo.append((lesson, mode))
    return todo, skipped


def execute(todo: list[tuple[Lesson, str]], machine: Machine, evidence_dir: Path, jobs: int,
            timeout: float | None) -> list[RunResult]:
    """Interpreter runs in parallel; GPU runs one at a time afterwards, so timings do not collide."""
    results: list[RunResult] = []
    with Progress(len(todo)) as progress:
        def one(item: tuple[Lesson, str]) -> RunResult:
            lesson, mode = item
            label = f"{lesson.name} [{mode}]"
            progress.started(label)
            record = run_lesson(lesson, mode, machine, evidence_dir, timeout)
            progress.finished(label, record)
            return RunResult(lesson, mode, record)

        cpu = [item for item in todo if item[1] == "interpreter"]
        gpu = [item for item in todo if item[1] == "gpu"]
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            results.extend(pool.map(one, cpu))
        results.extend(one(item) for item in gpu)
    return results


def print_summary(results: list[RunResult]) -> None:
    print("\nlesson                         mode         outcome     time    note")
    for r in sorted(results, key=lambda r: (r.lesson.order, r.lesson.name, MODES.index(r.mode))):
        outcome = r.record.outcome if r.record and not r.skipped else "-"
        wall = f"{r.record.wall_s:6.1f}s" if r.record and not r.skipped else "      -"
        note = r.skipped or (r.record.reason if r.record else "")
        print(f"{r.lesson.name:<30} {r.mode:<12} {outcome:<10} {wall}  {terminal_safe(note)}")


# -- status and check ---------------------------------------------------------------

def status_json(statuses: list[LessonStatus]) -> list[dict]:
    out = []
    for st in statuses:
        modes = {}
        for mode, state in st.modes.items():
            rec = state.record
            modes[mode] = {
                "state": state.state,
                "outcome": rec.outcome if rec else None,
                "date": rec.started_utc if rec else None,
                "source_hash": rec.source_hash if rec else None,
                "current": bool(rec and rec.source_hash == st.source_hash),
                "environment": asdict(rec.env) if rec else None,
            }
        out.append({"lesson": st.lesson.name, "title": st.lesson.title, "status": st.status,
                    "sentence": st.sentence, "source_hash": st.source_hash, "modes": modes})
    return out


def terminal_safe(text: str) -> str:
    """Recorded text (a lesson's reason, a device name) without escape or control codes."""
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in text)


def print_status(statuses: list[LessonStatus]) -> None:
    for st in statuses:
        print(f"{st.lesson.name:<28} {st.status:<19} {terminal_safe(st.sentence)}")


def check_problems(statuses: list[LessonStatus]) -> list[str]:
    problems = []
    for st in statuses:
        if st.status in (FAILED, STALE, UNVERIFIED):
            problems.append(f"{st.lesson.name}: {st.sentence}")
        elif st.modes["interpreter"].state not in ("passed", "not-supported"):
            problems.append(f"{st.lesson.name}: interpreter mode is {st.modes['interpreter'].state}")
        for rec in st.records:
            if rec.source_hash != st.source_hash:
                changed = _changed_files(st.lesson, rec)
                problems.append(f"{st.lesson.name}: evidence/{st.lesson.name}/{rec.key}.json is for another "
                                f"source (changed since: {', '.join(changed) or 'file list'}); "
                                f"re-record it or delete it")
    return problems


def _changed_files(lesson: Lesson, record: Record) -> list[str]:
    now = lesson.source_file_hashes()
    return sorted(k for k in now.keys() | record.source_files.keys() if now.get(k) != record.source_files.get(k))


def compare_fresh(lessons: list[Lesson], evidence_dir: Path, machine: Machine, jobs: int,
                  timeout: float | None) -> list[str]:
    """Re-run the interpreter mode into a scratch folder; report where it disagrees with the record."""
    scratch = Path(tempfile.mkdtemp(prefix="verify-compare-"))
    todo = [(lesson, "interpreter") for lesson in lessons if lesson.modes["interpreter"].supported]
    fresh = execute(todo, machine, scratch, jobs, timeout)
    problems = []
    for r in fresh:
        path = record_path(evidence_dir, r.lesson.name, "interpreter")
        if not path.exists():
            problems.append(f"{r.lesson.name}: fresh run {r.record.outcome}, but no committed record")
            continue
        old = read_record(path)
        if old.outcome != r.record.outcome:
            problems.append(f"{r.lesson.name}: committed outcome {old.outcome}, fresh run {r.record.outcome}"
                            f"{' (' + r.record.reason + ')' if r.record.reason else ''}")
        old_checks = {c.name: c.status for c in old.checks}
        new_checks = {c.name: c.status for c in r.record.checks}
        if old_checks != new_checks:
            diff = sorted(k for k in old_checks.keys() | new_checks.keys() if old_checks.get(k) != new_checks.get(k))
            problems.append(f"{r.lesson.name}: checks differ from the committed record: "
                            + ", ".join(f"{k} {old_checks.get(k)} -> {new_checks.get(k)}" for k in diff))
    shutil.rmtree(scratch, ignore_errors=True)
    return problems


# -- bundles ----------------------------------------------------------------------

def write_bundle(path: Path, records: list[Record], evidence_dir: Path) -> None:
    """One archive with the records and their figures, to carry evidence between machines."""
    with tarfile.open(path, "w:gz") as tar:
        for rec in records:
            data = rec.to_json().encode()
            info = tarfile.TarInfo(f"{rec.lesson}/{rec.key}.json")
            info.size, info.mtime = len(data), int(time.time())
            tar.addfile(info, io.BytesIO(data))
            for fig in rec.figures:
                src = evidence_dir / rec.lesson / fig.file
                if src.is_file():
                    tar.add(src, arcname=f"{rec.lesson}/{fig.file}")
    print(f"bundle: {len(records)} records -> {path}")


def import_bundle(path: Path, lessons: dict[str, Lesson], evidence_dir: Path) -> list[str]:
    """Merge a bundle; refuse records for unknown lessons or for another source hash."""
    problems, imported = [], 0
    try:
        tar = tarfile.open(path, "r:*")
    except (OSError, tarfile.TarError) as exc:
        raise EvidenceError(f"{path}: cannot read the bundle ({exc})") from None
    with tar:
        members = {m.name: m for m in tar.getmembers() if m.isfile()}
        for name, member in sorted(members.items()):
            if not name.endswith(".json") or name.count("/") != 1:
                continue
            where = f"{path}:{name}"
            try:
                raw = json.loads(tar.extractfile(member).read().decode("utf-8"))
                version = raw.get("format_version") if isinstance(raw, dict) else None
                if version != FORMAT_VERSION:  # what read_record would refuse must not be written
                    raise ValueError(f"evidence format {version}, this checkout reads {FORMAT_VERSION}")
                record = record_from_dict(raw)
            except (ValueError, KeyError, TypeError) as exc:
                problems.append(f"{where}: unreadable record ({exc})")
                continue
            lesson = lessons.get(record.lesson)
            # The key names files under evidence/; only the names verify itself writes are accepted.
            key_ok = (record.key == "interpreter" if record.mode == "interpreter"
                      else record.mode == "gpu" and record.key == gpu_key(record.key[4:]))
            if lesson is None or not key_ok or name != f"{record.lesson}/{record.key}.json":
                problems.append(f"{where}: no lesson '{record.lesson}' here (or a misnamed record); refused")
                continue
            current = lesson.source_hash()
            if record.source_hash != current:
                changed = _changed_files(lesson, record)
                problems.append(f"{where}: recorded for source {record.source_hash[:12]}, but the current "
                                f"source is {current[:12]} (differs in {', '.join(changed)}); refused")
                continue
            with tempfile.TemporaryDirectory() as tmp:
                figs = {}
                for fig in record.figures:
                    member_name = f"{record.lesson}/{fig.file}"
                    fname = Path(fig.file).name
                    if member_name in members and fig.file == f"{record.key}/{fname}":
                        (Path(tmp) / fname).write_bytes(tar.extractfile(members[member_name]).read())
                        figs[fname] = Path(tmp) / fname
                write_record(evidence_dir, record, figs)
            imported += 1
            print(f"imported {record.lesson} {record.key} ({record.outcome}, {record.date})")
    print(f"import: {imported} records merged, {len(problems)} refused")
    return problems


# -- command line -------------------------------------------------------------------

def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="verify.py", description=__doc__.split("\n")[0])
    p.add_argument("--lesson", action="append", default=[], metavar="NAME", help="only this lesson (repeatable)")
    p.add_argument("--mode", choices=["interpreter", "gpu", "all"], default="all")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="interpreter runs in parallel")
    p.add_argument("--timeout", type=float, help="seconds per run, overriding each lesson's own")
    p.add_argument("--force", action="store_true", help="re-run even when the evidence is current")
    p.add_argument("--status", action="store_true", help="print each lesson's status; run nothing")
    p.add_argument("--json", action="store_true", help="with --status: JSON output")
    p.add_argument("--check", action="store_true", help="exit 1 unless every lesson's evidence is current")
    p.add_argument("--compare", action="store_true",
                   help="re-run the interpreter mode and exit 1 where it disagrees with the record")
    p.add_argument("--bundle", type=Path, metavar="PATH", help="after running, write the records to PATH")
    p.add_argument("--import", dest="import_path", type=Path, metavar="PATH", help="merge a bundle")
    p.add_argument("--evidence-dir", type=Path, default=ROOT / "evidence", help=argparse.SUPPRESS)
    p.add_argument("--code-dir", type=Path, default=ROOT / "code", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def select(all_lessons: list[Lesson], names: list[str]) -> list[Lesson]:
    if not names:
        return all_lessons
    by_name = {lesson.name: lesson for lesson in all_lessons}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise LessonError(f"unknown lesson(s): {', '.join(unknown)}; known: {', '.join(by_name)}")
    return [by_name[n] for n in names]


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    try:
        lessons = select(discover(args.code_dir), args.lesson)
        evidence_dir = args.evidence_dir
        if args.import_path:
            problems = import_bundle(args.import_path, {lesson.name: lesson for lesson in lessons}, evidence_dir)
            for problem in problems:
                print(f"refused: {problem}", file=sys.stderr)
            return 1 if problems else 0
        if args.status or args.check:
            statuses = [judge(lesson, evidence_dir) for lesson in lessons]
            if args.status:
                if args.json:
                    print(json.dumps(status_json(statuses), indent=1))
                else:
                    print_status(statuses)
            if args.check:
                problems = check_problems(statuses)
                for problem in problems:
                    print(f"check: {problem}", file=sys.stderr)
                if not problems:
                    print(f"check: all {len(statuses)} lessons have current evidence")
                return 1 if problems else 0
            return 0
        machine = this_machine()
        print(f"machine: python {machine.python}, torch {machine.torch}, triton {machine.triton}, "
              f"GPU: {machine.gpu_name or 'none'}", flush=True)
        if args.compare:
            problems = compare_fresh(lessons, evidence_dir, machine, args.jobs, args.timeout)
            for problem in problems:
                print(f"compare: {problem}", file=sys.stderr)
            print("compare: fresh interpreter runs " + ("disagree" if problems else "agree with the records"))
            return 1 if problems else 0
        modes = list(MODES) if args.mode == "all" else [args.mode]
        todo, skipped = plan_runs(lessons, modes, machine, evidence_dir, args.force)
        ran = execute(todo, machine, evidence_dir, args.jobs, args.timeout)
        print_summary(ran + skipped)
        if args.bundle:
            keys = {mode_key(m, machine) for m in modes if m == "interpreter" or machine.has_gpu}
            records = [read_record(record_path(evidence_dir, lesson.name, key))
                       for lesson in lessons for key in sorted(keys)
                       if record_path(evidence_dir, lesson.name, key).exists()]
            write_bundle(args.bundle, records, evidence_dir)
        bad = [r for r in ran if r.record and r.record.outcome in ("failed", "timeout", "crashed")]
        return 1 if bad else 0
    except (LessonError, EvidenceError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
