"""Where the lessons are: `code/<name>/lesson.toml` and the sources it names.

One job: find lessons, read their declarations through a strict schema, and
hash the source a run depends on, so evidence can say exactly which source it
ran. The hash covers the main file, the local modules it imports (the kit
among them) and the part of lesson.toml that changes a run (`main`,
`[requires]`, `[interpreter]`, `[gpu]`, `[sanitize]` when it is there). Title, summary, course order, part and
prerequisites only place the lesson on the site: editing them never makes
evidence stale. Every file is read through safefs: no links, bounded sizes.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property, partial
from pathlib import Path
from typing import Literal

from verified_triton.core import schema
from verified_triton.core.kit import kit
from verified_triton.core.limits import LIMITS
from verified_triton.core.paths import CODE_DIR
from verified_triton.core.safefs import UnsafePathError, read_bytes, read_text, walk_files

MODES = ("interpreter", "gpu")
LESSON_NAME = schema.LESSON_NAME  # one pattern for a folder name and a record's lesson field
VERSION = re.compile(r"\A[0-9]+(\.[0-9]+){0,2}\Z")
DEFAULT_TIMEOUT = 300.0
UNPLACED = 999.0  # the order of a lesson.toml that gives neither `order` nor `after`: the end of the course


class LessonError(Exception):
    """A lesson folder that cannot be used, naming the file at fault."""


@dataclass
class Requires:
    capability: str = ""  # minimum compute capability of the GPU run, e.g. "9.0"
    triton: str = ""  # minimum Triton version, e.g. "3.4"
    why: str = ""
    # [requires.optional]: libraries the lesson compares against when they are installed
    # (pip name -> the version it was written for); without one, that comparison is skipped.
    optional: dict[str, str] = field(default_factory=dict)


@dataclass
class ModeToml:
    supported: bool = True
    reason: str = ""
    timeout: float | None = None  # seconds; default: the lesson's `timeout`, else DEFAULT_TIMEOUT
    expected_exits: dict[str, str] = field(default_factory=dict)  # exit code -> why it is by design


@dataclass
class NotApplicableToml:
    """[[sanitize.not_applicable]]: a tool that cannot finish or analyse some of the lesson's kernels, shown by
    a minimal reproducer (a kernel of the same kind, a few lines, in the lesson's folder) that the recording
    runs under the same tool; judge/memory.py says the tool is not applicable to `kernels` while the
    reproducer still fails the same way."""

    tool: Literal["memcheck", "synccheck", "initcheck", "racecheck"]
    kernels: list[str]  # the lesson's own kernels (their function names), exactly
    reproducer: str  # a .py file in the lesson's folder
    why: str  # what fails, in one line: the tool's own words and its version


@dataclass
class SanitizeToml:
    """[sanitize]: the run under compute-sanitizer (verify.py --mode sanitize)."""

    supported: bool = True
    reason: str = ""  # why not, when not
    # The inputs lesson.size() picks under the tool: the smoke ones (the default: the tools slow every
    # kernel down), or the GPU run's.
    size: Literal["smoke", "gpu"] = "smoke"
    timeout: float | None = None  # seconds per tool run, every tool; default: SANITIZE_TIMEOUTS per tool
    timeouts: dict[str, float] = field(default_factory=dict)  # [sanitize.timeouts] racecheck = 600: one tool's
    not_applicable: list[NotApplicableToml] = field(default_factory=list)


@dataclass
class LessonToml:
    title: str
    main: str
    page: str
    order: float | None = None  # position in the course: any number, so 16.5 goes between 16 and 17
    after: str = ""  # or: right after this lesson (its folder name), with no number to choose
    part: str = ""  # the part of the course it belongs to, a section of the site's navigation
    summary: str = ""
    prerequisites: list[str] = field(default_factory=list)
    # Lessons whose modules this one imports (a kernel it is compared with): their files are found,
    # hashed and archived with this lesson's own, so evidence goes stale when they change.
    uses: list[str] = field(default_factory=list)
    requires: Requires = field(default_factory=Requires)
    interpreter: ModeToml = field(default_factory=ModeToml)
    gpu: ModeToml = field(default_factory=ModeToml)
    sanitize: SanitizeToml = field(default_factory=SanitizeToml)
    timeout: float | None = None  # both modes, unless a mode sets its own


@dataclass(frozen=True)
class ModeSpec:
    supported: bool = True
    reason: str = ""  # why the mode is not supported, when it is not
    timeout: float = 300.0
    expected_exits: dict[int, str] = field(default_factory=dict)


# Seconds a tool may run a lesson by default, from the figures in NOTES.md and issue 48 (compute-sanitizer
# 2025.3.1 on an H100/H200, every kernel instrumented): memcheck, synccheck and initcheck finished every lesson
# they finished in at most about 90 s, so 300 s leaves three times that; racecheck took up to 108 s, and 390 s
# for fp16-matmul's 4096^3 steps with every kernel instrumented, so 600 s. [sanitize] timeout sets every tool,
# [sanitize.timeouts] one; verify's --timeout overrides both.
SANITIZE_TIMEOUTS = {"memcheck": 300.0, "synccheck": 300.0, "initcheck": 300.0, "racecheck": 600.0}
SANITIZE_TOOLS = tuple(SANITIZE_TIMEOUTS)


@dataclass(frozen=True)
class NotApplicable:
    tool: str
    kernels: tuple[str, ...]
    reproducer: Path  # the file, in the lesson's folder
    why: str


@dataclass(frozen=True)
class SanitizeSpec:
    supported: bool = True
    reason: str = ""
    size: str = "smoke"  # "smoke" | "gpu": what lesson.size() returns under the tool
    timeouts: tuple[tuple[str, float], ...] = tuple(SANITIZE_TIMEOUTS.items())  # per tool run
    not_applicable: tuple[NotApplicable, ...] = ()

    def timeout(self, tool: str) -> float:
        return dict(self.timeouts)[tool]


@dataclass(frozen=True)
class Lesson:
    name: str
    root: Path  # the project root that paths in evidence are relative to
    title: str
    order: float
    part: str
    folder: Path
    main: Path
    page: str  # docs-relative path of the lesson's page
    summary: str
    prerequisites: tuple[str, ...]
    modes: dict[str, ModeSpec]
    requires: Requires
    run_spec: str  # canonical JSON of lesson.toml's run keys: what its hash covers
    after: str = ""  # lesson.toml's `after`: discover() places it right after that lesson
    uses: tuple[str, ...] = ()  # lesson.toml's `uses`: lessons whose modules the main file imports
    sanitize: SanitizeSpec = SanitizeSpec()  # lesson.toml's [sanitize]

    def source_files(self) -> list[Path]:
        """The main file, lesson.toml, and every local module the main file imports, transitively."""
        return list(self._sources)

    def relative(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def source_file_hashes(self) -> dict[str, str]:
        """{relative path: SHA-256} of every source file, in path order."""
        return dict(self._hashes)

    def source_hash(self) -> str:
        """SHA-256 over (path, content hash) of every source file, in path order."""
        return combined_hash(self._hashes)

    @cached_property
    def _sources(self) -> tuple[Path, ...]:
        seen: dict[Path, None] = {self.folder / "lesson.toml": None}
        # A reproducer is source too: the judgement rests on what it does (and what it imports)
        todo = [self.main, *(n.reproducer for n in self.sanitize.not_applicable)]
        packages: set[Path] = set()
        while todo:
            path = todo.pop()
            if path in seen or path in packages:
                continue
            if path.is_dir() and not path.is_symlink():  # a package: every module in it
                packages.add(path)
                todo.extend(_package_modules(path, self.folder.parent))
                continue
            seen[path] = None
            search = (path.parent, self.folder.parent, *(self.folder.parent / name for name in self.uses))
            todo.extend(_local_imports(path, search, self.folder.parent))
        return tuple(sorted(seen, key=self.relative))

    @cached_property
    def _hashes(self) -> dict[str, str]:
        out = {}
        for path in self._sources:
            if path.name == "lesson.toml" and path.parent == self.folder:
                out[self.relative(path)] = hashlib.sha256(self.run_spec.encode()).hexdigest()
            else:
                out[self.relative(path)] = _file_sha256(path, self.folder.parent)
        return out


def combined_hash(file_hashes: dict[str, str]) -> str:
    """The one hash a record carries, from its {relative path: SHA-256} list."""
    digest = hashlib.sha256()
    for rel, sha in file_hashes.items():
        digest.update(f"{rel}\0{sha}\n".encode())
    return digest.hexdigest()


def file_sha256(path: Path) -> str:
    return _file_sha256(path, None)


def _file_sha256(path: Path, code_dir: Path | None) -> str:
    return per_file_version("sha256", path, lambda: _read_sha256(path, code_dir))


def _read_sha256(path: Path, code_dir: Path | None) -> str:
    # Line endings are normalised so a Windows checkout hashes like a Linux one.
    try:
        data = read_bytes(path, LIMITS.source_file, code_dir).replace(b"\r\n", b"\n")
    except UnsafePathError as exc:
        raise LessonError(str(exc)) from None
    return hashlib.sha256(data).hexdigest()


IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+([A-Za-z_]\w*)[\w.]*[ \t]+import\b|import[ \t]+([^#\n]+))", re.M)


_SEEN: dict[tuple, object] = {}  # (what, path, mtime, size) -> result: the kit is shared by every lesson


def per_file_version(what: str, path: Path, compute):
    """compute() once per version of the file (the same path, modification time and size), in this process:
    what a course of hundreds of lessons reads of the shared kit is read once, not once per lesson."""
    try:
        info = os.lstat(path)
    except OSError:
        return compute()
    key = (what, str(path), info.st_mtime_ns, info.st_size, info.st_ino)
    if key not in _SEEN:
        _SEEN[key] = compute()
    return _SEEN[key]


def _imported_names(path: Path, code_dir: Path) -> list[str]:
    try:
        source = read_text(path, LIMITS.source_file, code_dir)
    except UnsafePathError as exc:
        raise LessonError(str(exc)) from None
    names: list[str] = []
    for from_name, import_list in IMPORT.findall(source):
        if from_name:
            names.append(from_name)
        else:
            names += [part.split()[0].split(".")[0] for part in import_list.split(",") if part.strip()]
    return list(dict.fromkeys(names))


def _local_imports(path: Path, search: tuple[Path, ...], code_dir: Path) -> list[Path]:
    """The local modules `path` imports (files or packages in its folder, in code/ or in a lesson it `uses`),
    found without parsing; LessonError for one the repository holds outside code/.

    A regular expression over the import statements: a course of hundreds of
    lessons reads the same kit hundreds of times, and a parse costs more than
    the rest of the judgement. A syntax error surfaces when the lesson runs.

    A module outside code/ (experiments/, tools/, tests/) is refused rather than hashed: which one Python
    would import depends on the sys.path the lesson builds as it runs, which no reading of its source can
    settle, and a reader's zip and notebook carry code/ only, so a lesson importing it would not run for
    them either. Its evidence could not cover it, so it is an error at once, naming the file.
    """
    found = []
    for top in per_file_version("imports", path, lambda: _imported_names(path, code_dir)):
        for folder in search:
            candidate = folder / f"{top}.py"
            if candidate.exists() or candidate.is_symlink():
                found.append(candidate)  # read (and refused, if it is a link) when hashed
                break
            if (folder / top).is_dir() and not (folder / top).is_symlink() and _package_modules(folder / top,
                                                                                                 code_dir):
                found.append(folder / top)
                break
        else:
            # (a name of the standard library is Python's own, whatever the repository also holds)
            outside = None if top in sys.stdlib_module_names else _outside_code(code_dir).get(top)
            if outside is not None:
                raise LessonError(f"{path}: imports {top!r}, which is {outside}, outside code/: a lesson's source "
                                  "hash, zip and notebook cover code/ only; move it into the lesson's folder or "
                                  "code/, or import it from a lesson named in `uses`")
    return found


def read_spec(toml_path: Path, code_dir: Path) -> tuple[LessonToml, str]:
    """(lesson.toml's declarations, its text), read by the kit's reader (code/lessonkit.py: read_lesson_toml, the
    one reading of lesson.toml, which the lessons use too), then typed; LessonError naming the file, the line and
    the field."""
    try:
        text = read_text(toml_path, LIMITS.source_file, code_dir)
        return schema.load(LessonToml, kit.read_lesson_toml(text, str(toml_path))), text
    except UnsafePathError as exc:
        raise LessonError(str(exc)) from None
    except kit.FormatError as exc:
        raise LessonError(str(exc)) from None
    except schema.SchemaError as exc:  # what the kit's shape does not hold: a field missing, a length
        path = tuple(int(part[1:-1]) if part.startswith("[") else part  # a list's item: an int
                     for part in re.findall(r"\[\d+\]|[^.\[]+", exc.where))
        if exc.message == "missing":
            raise LessonError(f"{toml_path}: missing field '{exc.where}' (every lesson.toml gives title, main and "
                              "page)") from None
        raise LessonError(f"{where(toml_path, text, *path)}: {kit.toml_field(path)}: {exc.message}") from None


def where(toml_path: Path, text: str, *path: str) -> str:
    """'FILE:LINE' of the line that sets a key of lesson.toml ('FILE' when no line does)."""
    line = kit.toml_line(text, path)
    return f"{toml_path}:{line}" if line else str(toml_path)


def _toml_at(lesson: Lesson, *path: str) -> str:
    """'FILE:LINE' of a key of a lesson's lesson.toml, read again (errors that need the whole course are rare)."""
    toml_path = lesson.folder / "lesson.toml"
    try:
        return where(toml_path, read_text(toml_path, LIMITS.source_file, lesson.folder.parent), *path)
    except UnsafePathError:
        return str(toml_path)


def _package_modules(folder: Path, code_dir: Path) -> list[Path]:
    """The .py files of a package folder in code/, sorted (PACKAGE_MODULES at most)."""
    try:
        files = walk_files(folder, skip=lambda name: name.startswith(".") or name == "__pycache__")
    except UnsafePathError as exc:
        raise LessonError(str(exc)) from None
    return sorted(p for p in files if p.suffix == ".py")[:PACKAGE_MODULES]


PACKAGE_MODULES = 200  # modules of one package a lesson's hash covers at most (a bound on what is read)
SKIPPED_DIRS = frozenset({"node_modules", "__pycache__"})


def _outside_code(code_dir: Path) -> dict[str, str]:
    """Module name -> where it is, for every module and package of the repository outside code/ (hidden
    folders, the built site/ and node_modules aside): what a lesson could reach only through sys.path."""
    root = code_dir.parent
    if root not in _OUTSIDE:
        found: dict[str, str] = {}
        for folder, dirs, files in os.walk(root):
            here = Path(folder)
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIPPED_DIRS
                             and not (here == root and d in ("site", code_dir.name))
                             and not (here / d).is_symlink())
            for name in sorted(files):
                if name.endswith(".py") and name != "__init__.py":
                    found.setdefault(name[:-3], (here / name).relative_to(root).as_posix())
            if "__init__.py" in files and here != root:
                found.setdefault(here.name, here.relative_to(root).as_posix() + "/")
        _OUTSIDE[root] = found
    return _OUTSIDE[root]


_OUTSIDE: dict[Path, dict[str, str]] = {}


def load_lesson(folder: Path, code_dir: Path | None = None) -> Lesson:
    folder = Path(folder).absolute()
    code_dir = Path(code_dir).absolute() if code_dir else folder.parent
    toml_path = folder / "lesson.toml"
    spec, text = read_spec(toml_path, code_dir)
    at = partial(where, toml_path, text)
    if not LESSON_NAME.match(folder.name):
        raise LessonError(f"{folder}: a lesson folder's name uses lower-case letters, digits and '-'")
    if spec.after and spec.order is not None:
        raise LessonError(f"{at('after')}: give either order = N or after = \"<lesson>\", not both")
    if spec.after and (spec.after == folder.name or not LESSON_NAME.match(spec.after)):
        raise LessonError(f"{at('after')}: after = '{spec.after}' must name another lesson's folder")
    for used in spec.uses:
        if used == folder.name or not LESSON_NAME.match(used) or not (code_dir / used / "lesson.toml").is_file():
            raise LessonError(f"{at('uses')}: uses = '{used[:64]}' must name another lesson's folder under code/")
    main = folder / spec.main
    if "/" in spec.main or "\\" in spec.main or not spec.main.endswith(".py") or not main.is_file():
        raise LessonError(f"{at('main')}: main = '{spec.main}' is not a .py file in {folder.name}/")
    for key, value in (("capability", spec.requires.capability), ("triton", spec.requires.triton)):
        if value and not VERSION.match(value):
            raise LessonError(f"{at('requires', key)}: [requires] {key} = '{value}' is not a version like \"9.0\"")
    for package, version in spec.requires.optional.items():
        if not schema.PACKAGE.match(package) or not VERSION.match(version):
            raise LessonError(f"{at('requires', 'optional', package)}: [requires.optional] {package[:60]} = "
                              f"'{version[:30]}' is not a pip package name with a version like \"0.8.5\"")
    modes = {}
    for mode in MODES:
        raw: ModeToml = getattr(spec, mode)
        try:
            exits = {int(code): why for code, why in raw.expected_exits.items()}
        except ValueError:
            raise LessonError(f"{at(mode, 'expected_exits')}: [{mode}.expected_exits] keys must be exit codes, "
                              f"like \"1\" = \"why\"") from None
        timeout = raw.timeout or spec.timeout or DEFAULT_TIMEOUT
        if not 0 < timeout <= 3600:
            said = at(mode, "timeout") if raw.timeout else at("timeout")
            raise LessonError(f"{said}: [{mode}] timeout must be between 0 and 3600 seconds")
        modes[mode] = ModeSpec(raw.supported, raw.reason, float(timeout), exits)
    san = spec.sanitize
    sanitize = _sanitize_spec(san, folder, at)
    requires = asdict(spec.requires)
    if not requires["optional"]:
        del requires["optional"]  # a lesson without optional baselines keeps the hash it had before the field
    run_spec = json.dumps({"main": spec.main, "requires": requires,
                           "interpreter": asdict(spec.interpreter), "gpu": asdict(spec.gpu),
                           "timeout": spec.timeout, **({"uses": spec.uses} if spec.uses else {}),
                           # only when set: a lesson without [sanitize] keeps the hash it had before the table,
                           # and one with it the hash it had before the table grew keys it does not set
                           **({"sanitize": _set_keys(san)} if san != SanitizeToml() else {})},
                          sort_keys=True)
    return Lesson(
        name=folder.name, root=code_dir.parent, title=spec.title, part=spec.part, folder=folder,
        order=UNPLACED if spec.order is None else spec.order,
        main=main, page=spec.page, summary=spec.summary, prerequisites=tuple(spec.prerequisites),
        modes=modes, requires=spec.requires, run_spec=run_spec, after=spec.after, uses=tuple(spec.uses),
        sanitize=sanitize,
    )


def _sanitize_spec(san: SanitizeToml, folder: Path, at) -> SanitizeSpec:
    """[sanitize] checked: timeouts within an hour, for tools that exist; each not-applicable declaration naming
    a tool, kernels and a reproducer .py file in the lesson's folder, and saying why."""
    timeouts = dict(SANITIZE_TIMEOUTS)
    for tool in timeouts:
        timeouts[tool] = float(san.timeouts.get(tool) or san.timeout or timeouts[tool])
    for tool in san.timeouts:
        if tool not in SANITIZE_TIMEOUTS:
            raise LessonError(f"{at('sanitize', 'timeouts', tool)}: [sanitize.timeouts] {tool[:40]!r} is not one of "
                              f"{', '.join(SANITIZE_TOOLS)}")
    if not all(0 < t <= 3600 for t in [*timeouts.values(), *([san.timeout] if san.timeout is not None else [])]):
        raise LessonError(f"{at('sanitize')}: [sanitize] timeout must be between 0 and 3600 seconds")
    declared = []
    for i, entry in enumerate(san.not_applicable):
        where = f"{at('sanitize', 'not_applicable', i)}: [[sanitize.not_applicable]] {i + 1}"
        reproducer = folder / entry.reproducer
        if ("/" in entry.reproducer or "\\" in entry.reproducer or not entry.reproducer.endswith(".py")
                or not reproducer.is_file() or reproducer.is_symlink()):
            raise LessonError(f"{where}: reproducer = '{entry.reproducer[:80]}' is not a .py file in "
                              f"{folder.name}/")
        if not entry.kernels or not all(k.isidentifier() for k in entry.kernels) or not entry.why.strip():
            raise LessonError(f"{where}: names the lesson's kernels (function names) and says why")
        declared.append(NotApplicable(entry.tool, tuple(entry.kernels), reproducer, entry.why))
    return SanitizeSpec(san.supported, san.reason, san.size, tuple(timeouts.items()), tuple(declared))


FIRST_SANITIZE_KEYS = ("supported", "reason", "size", "timeout")  # what [sanitize] had when its hash was defined


def _set_keys(san: SanitizeToml) -> dict:
    """[sanitize] as its hash covers it: its first keys always, a later one only when it is set, so the hash of a
    table that sets no new key is what it was before the key existed."""
    default = asdict(SanitizeToml())
    return {key: value for key, value in asdict(san).items() if key in FIRST_SANITIZE_KEYS or value != default[key]}


def discover(code_dir: Path = CODE_DIR) -> list[Lesson]:
    """Every lesson under code/, in course order (lesson.toml's `order`, then name; see course_order).

    A prerequisite that names no lesson, or one that comes later in the
    course, is an error naming the lesson.toml.
    """
    code_dir = Path(code_dir).absolute()
    if not code_dir.is_dir():
        return []
    lessons = []
    for folder in sorted(code_dir.iterdir()):
        if folder.name.startswith((".", "_")) or folder.is_symlink() or not folder.is_dir():
            if folder.is_symlink():
                raise LessonError(f"{folder}: a symbolic link; links are never followed")
            continue
        if (folder / "lesson.toml").exists() or (folder / "lesson.toml").is_symlink():
            lessons.append(load_lesson(folder, code_dir))
    lessons = course_order(lessons)
    position = {lesson.name: i for i, lesson in enumerate(lessons)}
    for i, lesson in enumerate(lessons):
        for pre in lesson.prerequisites:
            if pre not in position:
                raise LessonError(f"{_toml_at(lesson, 'prerequisites')}: prerequisite '{pre}' is not a lesson")
            if position[pre] >= i:
                raise LessonError(f"{_toml_at(lesson, 'prerequisites')}: prerequisite '{pre}' comes later in the "
                                  "course; place it earlier (a smaller order, or after = an earlier lesson)")
    return lessons


def course_order(lessons: list[Lesson]) -> list[Lesson]:
    """The one course order: lessons sorted by `order` (then name), each followed by the lessons that
    name it in `after` (several after one lesson: by name; a chain keeps its order).

    A lesson placed by `after` takes its anchor's order, so anything that sorts by order agrees.
    An `after` that names no lesson, or a loop of them, is an error naming the lesson.toml.
    """
    names = {lesson.name for lesson in lessons}
    followers: dict[str, list[Lesson]] = {}
    for lesson in sorted(lessons, key=lambda lesson: lesson.name):
        if lesson.after:
            if lesson.after not in names:
                raise LessonError(f"{_toml_at(lesson, 'after')}: after = '{lesson.after}' is not a lesson "
                                  f"(a folder under code/ with a lesson.toml)")
            followers.setdefault(lesson.after, []).append(lesson)
    placed: list[Lesson] = []
    for root in sorted((lesson for lesson in lessons if not lesson.after), key=lambda x: (x.order, x.name)):
        stack = [root]
        while stack:
            lesson = stack.pop()
            if lesson.after:
                lesson = replace(lesson, order=root.order)
            placed.append(lesson)
            stack.extend(reversed(followers.pop(lesson.name, [])))
    if followers:  # every lesson left names one that is itself placed by `after`, in a loop
        stuck = min((lesson for group in followers.values() for lesson in group), key=lambda x: x.name)
        raise LessonError(f"{_toml_at(stuck, 'after')}: after = '{stuck.after}' makes a loop of `after` "
                          f"keys; give one lesson of the loop an order = N instead")
    return placed


# -- the exercises: exercises.py, solutions.py and what they import --------------------------------

EXERCISE_FILES = ("exercises.py", "solutions.py")


def has_exercises(lesson: Lesson) -> bool:
    """Whether the lesson poses exercises (its folder holds exercises.py)."""
    return (lesson.folder / EXERCISE_FILES[0]).is_file()


def exercise_files(lesson: Lesson) -> list[Path]:
    """exercises.py, solutions.py and every local module they import, transitively (practice.py, the
    kernels module, the models): what the exercises' record is tied to, apart from the lesson's run, so that
    changing an exercise leaves the GPU record current. [] for a lesson without exercises."""
    if not has_exercises(lesson):
        return []
    return list(_exercise_files(lesson))


def _exercise_files(lesson: Lesson) -> tuple[Path, ...]:
    roots = [lesson.folder / name for name in EXERCISE_FILES if (lesson.folder / name).is_file()]
    return tuple(sorted(_imported_closure(lesson, roots), key=lesson.relative))


def _imported_closure(lesson: Lesson, roots: list[Path]) -> list[Path]:
    """`roots` and every local module they import, transitively, found as the lesson's own imports are (its
    folder, code/, the folders of `uses`), in the order they were found."""
    seen: dict[Path, None] = {}
    todo = list(reversed(roots))
    search = (lesson.folder, lesson.folder.parent, *(lesson.folder.parent / name for name in lesson.uses))
    while todo:
        path = todo.pop()
        if path not in seen:
            seen[path] = None
            todo.extend(_local_imports(path, (path.parent, *search), lesson.folder.parent))
    return list(seen)


def kernels_module_imports(lesson: Lesson) -> list[Path]:
    """The local modules the kernels module imports, transitively (a model, another lesson's kernels module
    through `uses`, even one imported inside a function): what a notebook writes beside itself before the
    module's self-check runs. [] without a kernels module."""
    module = kernels_module(lesson)
    return [] if module is None else [p for p in _imported_closure(lesson, [module]) if p != module]


def exercise_file_hashes(lesson: Lesson) -> dict[str, str]:
    """{relative path: SHA-256} of the exercises' files, in path order."""
    return {lesson.relative(path): _file_sha256(path, lesson.folder.parent) for path in exercise_files(lesson)}


def exercise_hash(lesson: Lesson) -> str:
    """The one hash the exercises' record carries ("" for a lesson without exercises)."""
    hashes = exercise_file_hashes(lesson)
    return combined_hash(hashes) if hashes else ""


def kernels_module(lesson: Lesson) -> Path | None:
    """The lesson's kernels module, code/<lesson>/<name_snake>.py (the kernels, their launchers and their
    teaching comments, runnable alone), when the lesson has one beside a lesson.py; else None."""
    path = lesson.folder / f"{lesson.name.replace('-', '_')}.py"
    return path if lesson.main.name == "lesson.py" and path.is_file() else None
