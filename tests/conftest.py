"""Shared helpers: the tools on sys.path, and throw-away projects with fake lessons.

A fake project mirrors the real layout in a temporary folder:

    tmp/code/lessonkit.py        a copy of the real kit
    tmp/code/<name>/lesson.toml
    tmp/code/<name>/<name>.py    plain Python, most of it using the kit
    tmp/evidence/
    tmp/docs/                    (SiteProject) pages built with the real hook

and `verify.py` is pointed at it with its hidden --code-dir/--evidence-dir
options, `mkdocs build` with VT_CODE_DIR/VT_EVIDENCE_DIR. Fake lessons use the
kit's real API (checks, `benchmark` with `Timings`, tables); a figure is written
as PNG bytes by `figure()` below, so no matplotlib is needed. GPUs are
simulated with VT_FAKE_GPUS (tools/machine.py): a fake lesson runs in "gpu"
mode as plain Python, which is all verify needs to plan, assign and record.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import statistics
import struct
import subprocess
import sys
import textwrap
import time
import zlib
from collections import defaultdict
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tiers import pytest_make_collect_report  # noqa: F401  (every test has exactly one tier)

REPO = Path(__file__).resolve().parent.parent
TOOLS = REPO / "tools"
KIT = REPO / "code" / "lessonkit.py"
VERIFY = TOOLS / "verify.py"
SNIPPETS = TOOLS / "snippets.py"
MKDOCS_ENV = dict(os.environ, NO_MKDOCS_2_WARNING="1")
HOOKS = ("mkdocs_hooks.py", "reader_hooks.py")  # the hook files mkdocs.yml names, under tools/


def replace_exactly(config: str, old: str, new: str) -> str:
    """`config` with its line `old` replaced; an AssertionError naming it when mkdocs.yml no longer has it
    (a moved hook would otherwise leave a test building with the hook it did not mean)."""
    assert old in config.split("\n"), f"mkdocs.yml has no line {old!r}: update the tests that rewrite it"
    return config.replace(old + "\n", new + "\n")


def repo_hooks(config: str) -> str:
    """mkdocs.yml's hook lines pointed at this checkout's hook files, wherever the config is written."""
    for hook in HOOKS:
        config = replace_exactly(config, f"  - tools/{hook}", f"  - {TOOLS / hook}")
    return replace_exactly(config, "  custom_dir: overrides  # KaTeX only on pages with maths, the search index "
                                   "on demand, the article before the nav",
                           f"  custom_dir: {REPO / 'overrides'}")

# The PNG bytes a fake lesson saves: the signature and some bytes (verify checks the magic only).
FAKE_PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
TWO_GPUS = "0:NVIDIA H200,1:NVIDIA H200"

# The first lines of a fake lesson that uses the kit (code/ is the main file's grandparent).
KIT_PRELUDE = textwrap.dedent("""\
    import os
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from lessonkit import Figure, Lesson, Timings  # noqa: E402

    PNG = b"\\x89PNG\\r\\n\\x1a\\n" + bytes(range(256))


    def figure(lesson, name, caption="", data=PNG, dark=False):
        # What lesson.plot does, without matplotlib: PNG bytes in the figures folder, a Figure in the results.
        lesson._figure_dir.mkdir(parents=True, exist_ok=True)
        (lesson._figure_dir / f"{name}.png").write_bytes(data)
        if dark:
            (lesson._figure_dir / f"{name}-dark.png").write_bytes(data + b"dark")
        lesson.results.figures.append(Figure(name, f"{name}.png", caption, f"{name}-dark.png" if dark else ""))
        lesson._save()


    def timings(kernel, baseline):
        # Milliseconds per paired round, as bench_interleaved returns them.
        t = Timings({"kernel": list(kernel), "baseline": list(baseline)})
        t.method = "fake rounds"
        return t
""")


def base_env(**extra: str) -> dict[str, str]:
    """The environment for a verify subprocess: never a GPU, whatever machine the tests run on."""
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", PYTHONDONTWRITEBYTECODE="1")
    for name in ("TRITON_INTERPRET", "VT_FAKE_GPUS", "VT_RESULTS", "VT_FIGURES", "VT_CODE_DIR", "VT_EVIDENCE_DIR"):
        env.pop(name, None)
    env.update(extra)
    return env


@dataclass
class Project:
    root: Path

    @property
    def code(self) -> Path:
        return self.root / "code"

    @property
    def evidence(self) -> Path:
        return self.root / "evidence"

    def add(self, name: str, body: str, *, kit: bool = True, toml: str = "", order: int = 1,
            files: dict[str, str] | None = None) -> Path:
        """Write code/<name>/lesson.toml and code/<name>/<name>.py; return the lesson folder."""
        folder = self.code / name
        folder.mkdir(parents=True)
        main = name.replace("-", "_") + ".py"
        header = (f'title = "Fake lesson {name}"\norder = {order}\nmain = "{main}"\n'
                  f'page = "lessons/{name}.md"\nsummary = "a fake"\n')
        (folder / "lesson.toml").write_text(header + textwrap.dedent(toml), encoding="utf-8")
        source = (KIT_PRELUDE if kit else "import os\nimport sys\nfrom pathlib import Path\n")
        (folder / main).write_text(source + "\n" + textwrap.dedent(body), encoding="utf-8")
        for rel, text in (files or {}).items():
            (folder / rel).write_text(textwrap.dedent(text), encoding="utf-8")
        return folder

    def main_file(self, name: str) -> Path:
        return self.code / name / (name.replace("-", "_") + ".py")

    def edit(self, name: str, line: str = "# an edit") -> None:
        """Change a lesson's main file, so its evidence is for an older source."""
        main = self.main_file(name)
        main.write_text(main.read_text(encoding="utf-8") + f"\n{line}\n", encoding="utf-8")

    def lesson(self, name: str):
        from verified_triton.core.lessons import load_lesson

        return load_lesson(self.code / name)

    def record_file(self, name: str, key: str = "interpreter") -> Path:
        return self.evidence / name / f"{key}.json"

    def record(self, name: str, key: str = "interpreter"):
        from verified_triton.judge.evidence import read_record

        return read_record(self.record_file(name, key), self.evidence)

    def judge(self, name: str):
        from verified_triton.judge.status import judge

        return judge(self.lesson(name), self.evidence)

    def files(self) -> dict[str, bytes]:
        """Every file under evidence/, by relative path: to show that nothing changed."""
        return {p.relative_to(self.evidence).as_posix(): p.read_bytes()
                for p in sorted(self.evidence.rglob("*")) if p.is_file()}

    def verify(self, *args: str, timeout: float = 120, **env: str) -> subprocess.CompletedProcess:
        """Run tools/verify.py on this project; stdout and stderr as text."""
        command = [sys.executable, str(VERIFY), "--code-dir", str(self.code),
                   "--evidence-dir", str(self.evidence), *args]
        return subprocess.run(command, capture_output=True, text=True, encoding="utf-8", errors="replace",
                              env=base_env(**env), timeout=timeout, cwd=self.root)


def make_project(root: Path) -> Project:
    root.mkdir(parents=True, exist_ok=True)
    (root / "code").mkdir()
    (root / "evidence").mkdir()
    shutil.copyfile(KIT, root / "code" / "lessonkit.py")
    return Project(root)


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return make_project(tmp_path / "project")


@pytest.fixture(scope="session")
def smoke_runs(tmp_path_factory) -> dict:
    """Every lesson of the course as a smoke run (tools/smoke.py), once per test run: name -> SmokeRun."""
    from verified_triton.core.lessons import discover
    from verified_triton.record.smoke import smoke_all

    def make() -> dict:
        runs = smoke_all(discover(REPO / "code"), jobs=os.cpu_count() or 1, report=lambda line: None)
        return {run.lesson.name: run for run in runs}

    return once_per_run(tmp_path_factory, "smoke_runs", make)


# -- the real site, built once per test run ----------------------------------------------

# Building the course's site takes 15 s of CPU (minutes on busy cores), and four test modules read it. It is
# built once per run, into a folder every xdist worker of the run shares (pytest's base temp of the run, above
# each worker's own), by a child process the first worker starts as soon as its session does, when any test it
# collected needs it; the tests that do wait for it. A failed build fails each of them with the build's log;
# nothing builds it twice.
SITE_BUILD = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(REPO / "mkdocs.yml")]
SITE_BUILD_TIMEOUT = 1200  # seconds: minutes on 2 busy cores

_BUILD_AND_RECORD = """\
import os, subprocess, sys
folder, timeout, command = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
with open(os.path.join(folder, "site.log"), "wb") as log:
    try:
        rc = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, timeout=timeout).returncode
    except subprocess.TimeoutExpired:
        rc = f"timed out after {timeout} s"
with open(os.path.join(folder, "site.rc.part"), "w") as out:
    out.write(str(rc))
os.replace(os.path.join(folder, "site.rc.part"), os.path.join(folder, "site.rc"))
"""


def run_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of this test run that all its xdist workers share."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def start_site_build(folder: Path) -> None:
    """Start building the real site into folder/site, unless a worker of this run already has."""
    import fcntl

    with open(folder / "site.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one starter among the workers
        if (folder / "site.started").exists():
            return
        (folder / "site.started").touch()
        env = dict(MKDOCS_ENV)
        for name in ("VT_CODE_DIR", "VT_EVIDENCE_DIR"):
            env.pop(name, None)
        command = [*SITE_BUILD, "-d", str(folder / "site")]
        subprocess.Popen([sys.executable, "-c", _BUILD_AND_RECORD, str(folder), str(SITE_BUILD_TIMEOUT), *command],
                         cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)


@pytest.fixture(scope="session", autouse=True)
def _site_build_starts_early(request, tmp_path_factory) -> None:
    """The build starts with the session, so a worker runs other tests while it goes on."""
    if any("real_site" in getattr(item, "fixturenames", ()) for item in request.session.items):
        start_site_build(run_folder(tmp_path_factory))


@pytest.fixture(scope="session")
def real_site(tmp_path_factory) -> Path:
    """The course's site as `mkdocs build --strict` builds it, shared by the whole run: read it, never write it."""
    folder = run_folder(tmp_path_factory)
    start_site_build(folder)
    rc_file, deadline = folder / "site.rc", time.monotonic() + SITE_BUILD_TIMEOUT + 60
    while not rc_file.exists():
        assert time.monotonic() < deadline, f"the site build did not finish; its log: {folder / 'site.log'}"
        time.sleep(0.5)
    rc = rc_file.read_text()
    if rc != "0":
        log = (folder / "site.log").read_text(encoding="utf-8", errors="replace")
        pytest.fail(f"the real site does not build (exit {rc}):\n{log[-4000:]}", pytrace=False)
    return folder / "site"


# -- xdist: what a fixture builds once per run, every worker reads -------------------------------

def once_per_run(tmp_path_factory: pytest.TempPathFactory, name: str, make):
    """`make()` once per test run, whatever the number of xdist workers: the first worker to ask makes it
    under a file lock and keeps it, pickled, in the run's folder; the others wait and read it. For a fixture
    that takes minutes (every lesson's smoke run): each xdist worker would otherwise make its own copy.
    (pytest-xdist's --dist loadgroup, which could pin such tests to one worker, reads a test id that
    pytest 9 no longer lets it change.)"""
    import fcntl
    import pickle

    folder = run_folder(tmp_path_factory)
    with open(folder / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        kept = folder / f"{name}.pickle"
        if kept.exists():
            return pickle.loads(kept.read_bytes())
        value = make()
        kept.write_bytes(pickle.dumps(value))
        return value


# -- fake lessons used by several modules -------------------------------------------

PASSING = """\
    lesson = Lesson("good")
    lesson.check("arithmetic", 1 + 1 == 2, "one plus one")
    lesson.check("interpreter-env", os.environ.get("TRITON_INTERPRET") == "1", "TRITON_INTERPRET=1 is set")
    lesson.skip("timing", "nothing is timed under the interpreter")
    lesson.table("sizes", ["n", "ok"], [[1, "yes"], [1000, "yes"]], caption="sizes tried")
    figure(lesson, "plot", caption="a plot")
    sys.exit(lesson.finish())
"""


def figure_name(stem: str, data: bytes = FAKE_PNG) -> str:
    """The content-hashed name verify gives a figure (evidence.hashed_name)."""
    return f"{stem}-{hashlib.sha256(data).hexdigest()[:12]}.png"


def bench(name: str = "b", ratio: float = 1.0, low: float | None = None, high: float | None = None, *,
          threshold: float | None = None, gate: bool = True, stretch: float | None = None, unit: str = "ms",
          label: str = "", note: str = "", samples: int = 15, baseline_name: str = "torch"):
    """A kit Benchmark as the kit would record it: rounds whose median and 95 % interval are (ratio, low,
    high), and verdicts computed from that interval (status.py re-derives both from the rounds)."""
    from verified_triton.core.kit import RATE_UNITS, Benchmark, median_interval, verdict

    low = ratio if low is None else low
    high = ratio if high is None else high
    _, k, _ = median_interval(list(range(samples)))  # the interval's ends are the k-th smallest and largest
    ratios = [ratio] if samples == 1 else [low] * (k + 1) + [ratio] * max(samples - 2 * k - 2, 0) + [high] * (k + 1)
    kernel_ms, baseline_ms = [1.0 / r for r in ratios], [1.0] * samples
    scale = RATE_UNITS.get(unit)
    work = 2.0 / scale if scale else None  # bytes or FLOPs per call, so that the baseline runs at 2.0 units
    measured, base = ((work / statistics.median(kernel_ms) * scale, 2.0) if scale
                      else (statistics.median(kernel_ms), 1.0))
    return Benchmark(name=name, label=label or name, unit=unit, measured=measured, baseline=base,
                     baseline_name=baseline_name, ratio=ratio, ratio_low=low, ratio_high=high, samples=samples,
                     kernel_ms=kernel_ms, baseline_ms=baseline_ms,
                     threshold=threshold, gate=gate,
                     verdict=None if threshold is None else verdict(low, high, threshold),
                     stretch=stretch, stretch_verdict=None if stretch is None else verdict(low, high, stretch),
                     note=note, method="fake rounds")


def fake_record(lesson, mode: str = "gpu", outcome: str = "passed", *, device: str = "NVIDIA H200",
                source_hash: str | None = None, started: str = "2026-01-02T03:04:05Z", wall_s: float = 1.5,
                exit_code: int | None = 0, reason: str = "", benchmarks=(), key: str | None = None, **fields):
    """A record as verify would write it for `lesson`, without running anything (e.g. a GPU run)."""
    from verified_triton.core.kit import Check
    from verified_triton.judge.evidence import Environment, Record, gpu_key

    interp = mode == "interpreter"
    base = dict(
        lesson=lesson.name, mode=mode, key=key or ("interpreter" if interp else gpu_key(device)),
        outcome=outcome, exit_code=exit_code, started_utc=started, wall_s=wall_s,
        command=f"python {lesson.relative(lesson.main)}",
        source_hash=source_hash or lesson.source_hash(),
        source_files=lesson.source_file_hashes(),
        env=Environment(python="3.11.7", torch="2.5.1", triton="3.9.0", platform="Linux x86_64",
                        device_name="CPU" if interp else device, capability="" if interp else "9.0",
                        driver="" if interp else "550.54", cuda="" if interp else "12.4"),
        stdout="ran\n", reason=reason,
        checks=[Check("result", "pass" if outcome in ("passed", "by-design") else "fail", "a check")],
        benchmarks=list(benchmarks),
    )
    base.update(fields)
    return Record(**base)


# -- building a site from a throw-away project ----------------------------------------

def png(width: int = 4, height: int = 3) -> bytes:
    """A tiny valid PNG, so a figure really loads in a browser."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    raw = b"".join(b"\x00" + bytes([200, 30, 30]) * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def toml_string(s: str) -> str:
    return json.dumps(s)  # a JSON string with \uXXXX escapes is a TOML basic string


SITE_LESSON = '''\
import sys
from pathlib import Path

# lessonkit.py sits beside this file in a download, one folder up in the repository.
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]
from lessonkit import Lesson  # noqa: E402

# snippet: kernel
def kernel():
    return 1
# end snippet


if __name__ == "__main__":
    lesson = Lesson("LESSON")
    sys.exit(lesson.finish())
'''

# A lesson page using every per-lesson directive, each under its own h2 (the tests find them by section).
FULL_PAGE = """\
---
lesson: LESSON
---

# A page

::status

## Requirements

::requirements

## Region

::snippet code/LESSON/LESSON_PY kernel

## Checks

::checks

## Benchmarks

::benchmarks

## Figures

::figures

## Recorded table

::table TABLE

## Output

::output

<p id="page-end">End of the page.</p>
"""


@dataclass
class SiteProject(Project):
    """A throw-away project with pages, built by the real mkdocs.yml and hook."""

    @property
    def docs(self) -> Path:
        return self.root / "docs"

    @property
    def site(self) -> Path:
        return self.root / "site"

    def add_lesson(self, name: str, page: str = "", *, title: str = "", summary: str = "", toml: str = "",
                   source: str | None = None, order: int = 1, table: str = "t") -> Path:
        folder = self.code / name
        folder.mkdir(parents=True)
        main = name.replace("-", "_") + ".py"
        (folder / "lesson.toml").write_text(
            f"title = {toml_string(title or 'Lesson ' + name)}\norder = {order}\nmain = \"{main}\"\n"
            f"page = \"lessons/{name}.md\"\nsummary = {toml_string(summary or 'a fake lesson')}\n"
            + textwrap.dedent(toml), encoding="utf-8")
        (folder / main).write_text(source if source is not None else SITE_LESSON.replace("LESSON", name),
                                   encoding="utf-8")
        page = page or FULL_PAGE.replace("LESSON_PY", main).replace("LESSON", name).replace("TABLE", table)
        (self.docs / "lessons").mkdir(parents=True, exist_ok=True)
        (self.docs / "lessons" / f"{name}.md").write_text(page, encoding="utf-8")
        return folder

    def make_record(self, name: str, mode: str = "interpreter", key: str = "", **fields):
        from verified_triton.core.lessons import load_lesson
        from verified_triton.judge.evidence import Environment, Record

        lesson = load_lesson(self.code / name)
        env = fields.pop("env", None) or Environment(python="3.11", torch="2.13", triton="3.9", platform="Linux",
                                                     device_name="CPU" if mode == "interpreter" else "Fake GPU")
        from verified_triton.judge.evidence import gpu_key

        base = dict(lesson=name, mode=mode, key=key or ("interpreter" if mode == "interpreter" else
                                                        gpu_key(env.device_name)),
                    outcome="passed", exit_code=0, started_utc="2026-01-02T03:04:05Z", wall_s=1.5,
                    command=f"python code/{name}/{lesson.main.name}", source_hash=lesson.source_hash(),
                    source_files=lesson.source_file_hashes(), env=env)
        base.update(fields)
        return Record(**base)

    def write(self, record, figures: dict[str, bytes] | None = None) -> Path:
        from verified_triton.judge.evidence import write_record

        return write_record(self.evidence, record, figures)

    def config(self) -> Path:
        """The real mkdocs.yml, with this project's docs, the real hook and no watch list."""
        config = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
        config = config.replace("docs_dir: docs", f"docs_dir: {self.docs}")
        config = repo_hooks(config)
        config = re.sub(r"watch:\n(  - .*\n)+", "", config)
        # Only the pages this project has; the Lessons section is filled by the hook.
        config = re.sub(r"\nnav:\n(?:[ ]+.*\n?)+", "\nnav:\n  - Home: index.md\n  - Lessons: []\n", config)
        path = self.root / "mkdocs.yml"
        path.write_text(config, encoding="utf-8")
        return path

    def build(self) -> subprocess.CompletedProcess:
        env = dict(MKDOCS_ENV, VT_CODE_DIR=str(self.code), VT_EVIDENCE_DIR=str(self.evidence))
        return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(self.config()),
                               "-d", str(self.site)], capture_output=True, text=True, env=env, cwd=self.root,
                              timeout=300)

    def html(self, name: str) -> str:
        return (self.site / "lessons" / name / "index.html").read_text(encoding="utf-8")


def make_site_project(root: Path) -> SiteProject:
    project = SiteProject(root)
    for folder in (project.code, project.evidence, project.docs):
        folder.mkdir(parents=True)
    shutil.copyfile(KIT, project.code / "lessonkit.py")
    shutil.copytree(REPO / "docs" / "assets", project.docs / "assets")  # the site's CSS, KaTeX and scripts
    (project.docs / "index.md").write_text("# Fake course\n\n::course\n", encoding="utf-8")
    (project.docs / "verification.md").write_text("# How verification works\n\nA stub.\n", encoding="utf-8")
    return project


@pytest.fixture
def site_project(tmp_path: Path) -> SiteProject:
    return make_site_project(tmp_path / "site-project")


def build_output(result: subprocess.CompletedProcess) -> str:
    return result.stdout + result.stderr


# -- a tiny HTML model ------------------------------------------------------------------

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


@dataclass
class Element:
    tag: str
    attrs: dict
    ancestors: tuple  # the open elements around it, outermost first
    section: str  # id of the h2 it follows ("" before the first)
    index: int  # position in document order
    text: list = field(default_factory=list)

    @property
    def classes(self) -> set[str]:
        return set((self.attrs.get("class") or "").split())

    def inside(self, tag: str, cls: str = "") -> bool:
        return any(a.tag == tag and (not cls or cls in a.classes) for a in self.ancestors)


class Doc(HTMLParser):
    """Elements in document order, the visible text of each h2 section, and the scripts."""

    def __init__(self, source: str):
        super().__init__(convert_charrefs=True)
        self.elements: list[Element] = []
        self.sections: dict[str, list[str]] = defaultdict(list)
        self.scripts: list[str] = []
        self.stack: list[Element] = []
        self.section = ""
        self.feed(source)
        self.close()

    def handle_starttag(self, tag, attrs):
        el = Element(tag, dict(attrs), tuple(self.stack), self.section, len(self.elements))
        self.elements.append(el)
        if tag == "h2" and el.attrs.get("id"):
            self.section = el.section = el.attrs["id"]
        if tag == "script":
            self.scripts.append("")
        if tag not in VOID:
            self.stack.append(el)

    def handle_startendtag(self, tag, attrs):
        self.elements.append(Element(tag, dict(attrs), tuple(self.stack), self.section, len(self.elements)))

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data):
        if any(e.tag == "script" for e in self.stack):
            self.scripts[-1] += data
            return
        if any(e.tag == "style" for e in self.stack):
            return
        self.sections[self.section].append(data)
        for e in self.stack:
            e.text.append(data)

    def text_of(self, section: str) -> str:
        return "".join(self.sections[section])

    @property
    def all_text(self) -> str:
        return "".join("".join(parts) for parts in self.sections.values())

    def find(self, tag: str, cls: str = "", **attrs) -> list[Element]:
        return [e for e in self.elements if e.tag == tag and (not cls or cls in e.classes)
                and all(e.attrs.get(k) == v for k, v in attrs.items())]

    def content(self) -> list[Element]:
        """The elements of the page's article (no navigation, header or footer)."""
        return [e for e in self.elements if e.inside("article", "md-content__inner")]
