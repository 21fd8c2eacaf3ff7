"""Where the lessons are: `code/<name>/lesson.toml` and the sources it names.

One job: find lessons, read their declarations, and hash the source that a
run depends on (the main file, the local modules it imports, and lesson.toml
itself), so evidence can say exactly which source it ran.
"""

from __future__ import annotations

import ast
import hashlib
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CODE_DIR = ROOT / "code"
MODES = ("interpreter", "gpu")
DEFAULT_TIMEOUT = {"interpreter": 300.0, "gpu": 300.0}


class LessonError(Exception):
    """A lesson folder that cannot be used, naming the file at fault."""


@dataclass(frozen=True)
class ModeSpec:
    supported: bool = True
    reason: str = ""  # why the mode is not supported, when it is not
    timeout: float = 300.0
    expected_exits: dict[int, str] = field(default_factory=dict)  # exit code -> why it is by design


@dataclass(frozen=True)
class Lesson:
    name: str
    root: Path  # the project root that paths in evidence are relative to
    title: str
    order: int
    folder: Path
    main: Path
    page: str  # docs-relative path of the lesson's page
    summary: str
    prerequisites: tuple[str, ...]
    modes: dict[str, ModeSpec]

    def source_files(self) -> list[Path]:
        """The main file, lesson.toml, and every local module the main file imports, transitively."""
        seen: dict[Path, None] = {self.folder / "lesson.toml": None}
        todo = [self.main]
        while todo:
            path = todo.pop()
            if path in seen:
                continue
            seen[path] = None
            todo.extend(_local_imports(path, (path.parent, self.folder.parent)))
        return sorted(seen, key=self.relative)

    def relative(self, path: Path) -> str:
        return path.resolve().relative_to(self.root).as_posix()

    def source_file_hashes(self) -> dict[str, str]:
        """{relative path: SHA-256} of every source file, in path order."""
        return {self.relative(path): file_sha256(path) for path in self.source_files()}

    def source_hash(self) -> str:
        """SHA-256 over (path, content hash) of every source file, in path order."""
        return combined_hash(self.source_file_hashes())


def combined_hash(file_hashes: dict[str, str]) -> str:
    """The one hash a record carries, from its {relative path: SHA-256} list."""
    digest = hashlib.sha256()
    for rel, sha in file_hashes.items():
        digest.update(f"{rel}\0{sha}\n".encode())
    return digest.hexdigest()


def file_sha256(path: Path) -> str:
    # Line endings are normalised so a Windows checkout hashes like a Linux one.
    data = path.read_bytes().replace(b"\r\n", b"\n")
    return hashlib.sha256(data).hexdigest()


def _local_imports(path: Path, search: tuple[Path, ...]) -> list[Path]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except SyntaxError as exc:
        raise LessonError(f"{path}:{exc.lineno}: syntax error: {exc.msg}") from None
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    found = []
    for name in names:
        top = name.split(".")[0]
        for folder in search:
            candidate = folder / f"{top}.py"
            if candidate.is_file():
                found.append(candidate.resolve())
                break
    return found


def load_lesson(folder: Path) -> Lesson:
    folder = folder.resolve()
    toml_path = folder / "lesson.toml"
    try:
        spec = tomllib.loads(toml_path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise LessonError(f"{toml_path}: {exc}") from None
    for key in ("title", "main", "page"):
        if key not in spec:
            raise LessonError(f"{toml_path}: missing required key '{key}'")
    main = folder / spec["main"]
    if not main.is_file():
        raise LessonError(f"{toml_path}: main = '{spec['main']}' does not exist")
    modes = {}
    for mode in MODES:
        raw = spec.get(mode, {})
        try:
            exits = {int(code): why for code, why in raw.get("expected_exits", {}).items()}
        except ValueError:
            raise LessonError(f"{toml_path}: [{mode}.expected_exits] keys must be exit codes, "
                              f"like \"1\" = \"why\"") from None
        modes[mode] = ModeSpec(
            supported=raw.get("supported", True),
            reason=raw.get("reason", ""),
            timeout=float(raw.get("timeout", spec.get("timeout", DEFAULT_TIMEOUT[mode]))),
            expected_exits=exits,
        )
    return Lesson(
        name=folder.name,
        root=folder.parent.parent,
        title=spec["title"],
        order=int(spec.get("order", 999)),
        folder=folder,
        main=main.resolve(),
        page=spec["page"],
        summary=spec.get("summary", ""),
        prerequisites=tuple(spec.get("prerequisites", ())),
        modes=modes,
    )


def discover(code_dir: Path = CODE_DIR) -> list[Lesson]:
    """Every lesson under code/, in course order."""
    lessons = [load_lesson(toml.parent) for toml in code_dir.glob("*/lesson.toml")]
    return sorted(lessons, key=lambda lesson: (lesson.order, lesson.name))
