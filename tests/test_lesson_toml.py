"""One reading of lesson.toml (issue 46, items 3 and 5): the kit (code/lessonkit.py, read_lesson_toml) and the
tools (core/lessons.py) read it with the same code, and its errors name the file, the line and the field meant,
never an internal class. Before, the kit read the file with tomllib alone and took a broken one as empty (a
typo in [requires] capability ran the lesson on any GPU), the tools said `unknown field 'timout' in LessonToml`
with no line, and a 30,000-deep nested array ended in a RecursionError."""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path

import pytest

from verified_triton.core.kit import kit
from verified_triton.core.lessons import LessonError, LessonToml, discover, load_lesson

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
HEAD = 'title = "T"\nmain = "x.py"\npage = "lessons/x.md"\n'


def write_lesson(tmp_path: Path, toml: str | bytes) -> Path:
    folder = tmp_path / "code" / "broken"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "x.py").write_text("x = 1\n")
    data = toml.encode() if isinstance(toml, str) else toml
    (folder / "lesson.toml").write_bytes(data)
    return folder


def tools_error(folder: Path) -> str:
    with pytest.raises(LessonError) as info:
        load_lesson(folder)
    return str(info.value)


@pytest.mark.parametrize("toml, said", [
    (HEAD + "\n\ntimout = 5\n", "lesson.toml:6: unknown field 'timout' (did you mean 'timeout'?)"),
    (HEAD + "[requires]\ncapabilty = \"9.0\"\n",
     "lesson.toml:5: unknown field 'capabilty' in [requires] (did you mean 'capability'?)"),
    (HEAD + "[requirs]\ncapability = \"9.0\"\n",
     "lesson.toml:4: unknown field 'requirs' (did you mean 'requires'?)"),
    (HEAD + "requires = { capabilty = \"9.0\" }\n", "lesson.toml:4: unknown field 'capabilty' in [requires]"),
    (HEAD + "[gpu]\nsuported = false\n",
     "lesson.toml:5: unknown field 'suported' in [gpu] (did you mean 'supported'?)"),
    (HEAD + "[requires]\ncapability = 9.0\n", "lesson.toml:5: [requires] capability: expected text, found a number"),
    (HEAD + "requires.triton = 3\n", "lesson.toml:4: [requires] triton: expected text, found a number"),
    (HEAD + "[sanitize]\nsize = \"huge\"\n", "lesson.toml:5: [sanitize] size: 'huge' is not one of 'smoke', 'gpu'"),
    (HEAD + "order = \"first\"\n", "lesson.toml:4: order: expected a number, found text"),
    (HEAD + "timeout = inf\n", "lesson.toml:4: timeout: inf is not a finite number"),
    (HEAD + "prerequisites = [\"a\", 1]\n", "lesson.toml:4: prerequisites: expected a list of text, found a list"),
    (HEAD + "[gpu.expected_exits]\n\"3\" = 3\n",
     "lesson.toml:5: [gpu.expected_exits] 3: expected text, found a number"),
    (HEAD + "summary = \"\"\"\ntimeout = 5\n\"\"\"\ntimout = 3\n", "lesson.toml:7: unknown field 'timout'"),
    ('title = "T"\nmain = = "x.py"\n', "lesson.toml:2: Invalid value"),
    (HEAD + "a = " + "[" * 30000 + "]" * 30000 + "\n", "lesson.toml: nested too deeply to read"),
    (b'title = "\xff"\n', "lesson.toml: not UTF-8 text"),
])
def test_errors_name_the_file_the_line_and_the_field(tmp_path, toml, said):
    folder = write_lesson(tmp_path, toml)
    message = tools_error(folder)
    assert message.startswith(str(folder / "lesson.toml")) and said in message, message
    assert "Toml" not in message and "Traceback" not in message  # no class of ours: ModeToml, LessonToml
    with pytest.raises(kit.FormatError) as info:  # the kit reads the file with the same code, and says the same
        kit._lesson_toml(folder / "lesson.toml")
    assert said in str(info.value)


@pytest.mark.parametrize("toml, said", [
    ("main = \"x.py\"\npage = \"p.md\"\n", "lesson.toml: missing field 'title'"),
    (HEAD + "\n[requires]\ncapability = \"nine\"\n", "lesson.toml:6: [requires] capability = 'nine' is not a version"),
    (HEAD + "order = 2\nafter = \"other\"\n", "lesson.toml:5: give either order = N or after"),
    ('title = "T"\nmain = "y.py"\npage = "p.md"\n', "lesson.toml:2: main = 'y.py' is not a .py file in broken/"),
    (HEAD + "[interpreter]\ntimeout = 99999\n", "lesson.toml:5: [interpreter] timeout must be between"),
    (HEAD + "[gpu.expected_exits]\none = \"why\"\n", "lesson.toml:4: [gpu.expected_exits] keys must be exit codes"),
    (HEAD + "[requires.optional]\n\"liger kernel\" = \"0.8.5\"\n", "lesson.toml:5: [requires.optional] liger kernel"),
])
def test_what_needs_more_than_one_key_is_said_at_its_line_too(tmp_path, toml, said):
    assert said in tools_error(write_lesson(tmp_path, toml))


def test_a_typo_stops_the_lesson_itself_without_a_traceback(tmp_path, monkeypatch, capsys):
    """Run alone (a zip, a notebook), the kit refuses what verify refuses: before, `capabilty` in [requires] was
    silently no requirement at all."""
    folder = write_lesson(tmp_path, HEAD + "[requires]\ncapabilty = \"9.0\"\n")
    monkeypatch.setattr(kit, "_main_folder", lambda: folder)
    for name in (kit.RESULTS_ENV, kit.SANITIZE_ENV):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(SystemExit) as info:
        kit.Lesson("broken")
    assert info.value.code == kit.EXIT_FAILED
    assert capsys.readouterr().err == (f"broken: {folder / 'lesson.toml'}:5: unknown field 'capabilty' in [requires] "
                                       "(did you mean 'capability'?)\n")


def kits_view(toml_path: Path) -> tuple[dict, str]:
    """What the kit takes from lesson.toml: its [requires] (with the kit's defaults) and its sanitize size."""
    data = kit._lesson_toml(toml_path)
    requires = {"capability": "", "triton": "", "why": "", "optional": {}, **data.get("requires", {})}
    return requires, data.get("sanitize", {}).get("size", "smoke")


def tools_view(folder: Path) -> tuple[dict, str]:
    lesson = load_lesson(folder)
    return dataclasses.asdict(lesson.requires), lesson.sanitize.size


@pytest.mark.parametrize("lesson", discover(ROOT / "code"), ids=lambda lesson: lesson.name)
def test_the_kit_and_the_tools_agree_on_every_lesson(lesson):
    assert kits_view(lesson.folder / "lesson.toml") == tools_view(lesson.folder)


AGREED = [  # files both read: the same requirements and sizes
    HEAD,
    HEAD + "[requires]\ncapability = \"9.0\"\ntriton = \"3.5\"\nwhy = \"wgmma\"\n",
    HEAD + "requires = { capability = \"8.0\" }\n[sanitize]\nsize = \"gpu\"\n",
    HEAD + "requires.triton = \"3.4\"\n[requires.optional]\nliger-kernel = \"0.8.5\"\n",
    HEAD + "[sanitize]\nsupported = false\nreason = \"no\"\n[gpu]\ntimeout = 20\n",
]
# files the kit's shape accepts and the tools refuse for what needs more than one key or a file
REFUSED_BY_THE_TOOLS_ALONE = [
    'main = "x.py"\npage = "p.md"\n',  # title missing: the site's, not the run's
    HEAD + "[requires]\ncapability = \"nine\"\n",
    HEAD + "order = 2\nafter = \"x\"\n",
    HEAD + "[gpu.expected_exits]\none = \"why\"\n",
]


@pytest.mark.parametrize("toml", AGREED)
def test_the_kit_and_the_tools_agree_on_files_both_accept(tmp_path, toml):
    folder = write_lesson(tmp_path, toml)
    assert kits_view(folder / "lesson.toml") == tools_view(folder)


@pytest.mark.parametrize("toml", REFUSED_BY_THE_TOOLS_ALONE)
def test_what_the_kit_accepts_and_the_tools_refuse_needs_more_than_the_shape(tmp_path, toml):
    folder = write_lesson(tmp_path, toml)
    kits_view(folder / "lesson.toml")
    tools_error(folder)


def shape_of(tp) -> object:
    """A type of the tools' dataclasses as the kit's LESSON_TOML writes it."""
    if dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        return {f.name: shape_of(hints[f.name]) for f in dataclasses.fields(tp)}
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Literal:
        return args
    if origin is list:
        return [shape_of(args[0])]
    if origin is dict:
        return {shape_of(args[0]): shape_of(args[1])}
    if type(None) in args:  # `float | None`: optional in the file
        return shape_of(next(a for a in args if a is not type(None)))
    return tp


def test_the_kits_shape_is_the_tools_dataclasses():
    """Two declarations of one file, held equal: a key added to one and not the other fails here."""
    assert kit.LESSON_TOML == shape_of(LessonToml)
