"""Shared helpers: the tools on sys.path, and throw-away projects with fake lessons.

A fake project mirrors the real layout in a temporary folder:

    tmp/code/lessonkit.py        a copy of the real kit
    tmp/code/<name>/lesson.toml
    tmp/code/<name>/<name>.py    plain Python, most of it using the kit
    tmp/evidence/

and `verify.py` is pointed at it with its hidden --code-dir/--evidence-dir options.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TOOLS = REPO / "tools"
KIT = REPO / "code" / "lessonkit.py"
VERIFY = TOOLS / "verify.py"
SNIPPETS = TOOLS / "snippets.py"

if str(TOOLS) not in sys.path:
    sys.path.insert(0, str(TOOLS))

# The first lines of a fake lesson that uses the kit (code/ is the main file's grandparent).
KIT_PRELUDE = textwrap.dedent("""\
    import os
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from lessonkit import Lesson  # noqa: E402

    # A PNG signature and some bytes: verify only copies the file, so no matplotlib is needed.
    PNG = b"\\x89PNG\\r\\n\\x1a\\n" + bytes(range(256))


    class FakeFigure:
        def savefig(self, path, **kwargs):
            Path(path).write_bytes(PNG)
""")


def base_env(**extra: str) -> dict[str, str]:
    """The environment for a verify subprocess: never a GPU, whatever machine the tests run on."""
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", PYTHONDONTWRITEBYTECODE="1")
    env.pop("TRITON_INTERPRET", None)
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

    def lesson(self, name: str):
        from lessons import load_lesson

        return load_lesson(self.code / name)

    def record_file(self, name: str, key: str = "interpreter") -> Path:
        return self.evidence / name / f"{key}.json"

    def record(self, name: str, key: str = "interpreter"):
        from evidence import read_record

        return read_record(self.record_file(name, key))

    def judge(self, name: str):
        from status import judge

        return judge(self.lesson(name), self.evidence)

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


# -- fake lessons used by several modules -------------------------------------------

PASSING = """\
    lesson = Lesson("good")
    lesson.check("arithmetic", 1 + 1 == 2, "one plus one")
    lesson.check("interpreter-env", os.environ.get("TRITON_INTERPRET") == "1", "TRITON_INTERPRET=1 is set")
    lesson.skip("timing", "nothing is timed under the interpreter")
    lesson.table("sizes", ["n", "ok"], [[1, "yes"], [1000, "yes"]], caption="sizes tried")
    lesson.figure(FakeFigure(), "plot", caption="a plot")
    sys.exit(lesson.finish())
"""


def fake_record(lesson, mode: str = "gpu", outcome: str = "passed", *, device: str = "NVIDIA H200",
                source_hash: str | None = None, started: str = "2026-01-02T03:04:05Z", wall_s: float = 1.5,
                exit_code: int | None = 0, reason: str = "", benchmarks=(), key: str | None = None):
    """A record as verify would write it for `lesson`, without running anything (e.g. a GPU run)."""
    from evidence import Check, Environment, Record, gpu_key
    from lessons import file_sha256

    interp = mode == "interpreter"
    return Record(
        lesson=lesson.name, mode=mode, key=key or ("interpreter" if interp else gpu_key(device)),
        outcome=outcome, exit_code=exit_code, started_utc=started, wall_s=wall_s,
        command=f"python {lesson.relative(lesson.main)}",
        source_hash=source_hash or lesson.source_hash(),
        source_files={lesson.relative(p): file_sha256(p) for p in lesson.source_files()},
        env=Environment(python="3.11.7", torch="2.5.1", triton="3.9.0", platform="Linux x86_64",
                        device_name="CPU" if interp else device, capability="" if interp else "9.0",
                        driver="" if interp else "550.54", cuda="" if interp else "12.4"),
        stdout="ran\n", reason=reason,
        checks=[Check("result", "pass" if outcome == "passed" else "fail", "a check")],
        benchmarks=list(benchmarks),
    )
