"""requirements/site.txt, the hashed lock the publishing jobs install, agrees with pyproject.toml.

The jobs that hold write tokens (record.yml's publish and evidence-pr) install only
`pip install --require-hashes --no-deps -r requirements/site.txt`: every package of the site
extra and everything it needs, each pinned with the hashes of its files. The lock is made from
pyproject.toml by pip-compile (its first lines give the command); this test, which needs no
network, fails when the two drift apart: a pin of the site extra missing from the lock or at
another version, a package the lock still lists as the extra's own that the extra dropped, an
entry without hashes, or an option line (an index, a local folder) that would change where pip
looks.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = ROOT / "pyproject.toml"
LOCK = ROOT / "requirements" / "site.txt"
PROJECT = "verified-triton (pyproject.toml)"  # how pip-compile names the extra in `# via` lines
ENTRY = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[^\s\\;]+)\s*(?:\\)?$")
HASH = re.compile(r"^\s+--hash=sha256:[0-9a-f]{64}\s*(?:\\)?$")


def normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def site_pins(pyproject_text: str) -> tuple[dict[str, str], list[str]]:
    """{name: version} of the site extra, and the entries that are no exact pin."""
    extra = tomllib.loads(pyproject_text)["project"]["optional-dependencies"]["site"]
    pins, loose = {}, []
    for requirement in extra:
        match = re.fullmatch(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([^\s;,]+)\s*", requirement)
        if match:
            pins[normal(match[1])] = match[2]
        else:
            loose.append(requirement)
    return pins, loose


def read_lock(lock_text: str) -> tuple[dict[str, dict], list[str]]:
    """{name: {version, hashes, via}} of the lock, and the problems its lines show."""
    entries: dict[str, dict] = {}
    problems, current, in_via = [], None, False
    header = "\n".join(line for line in lock_text.splitlines() if line.startswith("#    pip-compile"))
    for option in ("--extra=site", "--generate-hashes", "pyproject.toml"):
        if option not in header:
            problems.append(f"the lock's header does not show it was made by `pip-compile ... {option}`")
    for number, line in enumerate(lock_text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        if match := ENTRY.match(line):
            current = {"version": match["version"], "hashes": 0, "via": set()}
            entries[normal(match["name"])] = current
            in_via = False
        elif HASH.match(line) and current is not None:
            current["hashes"] += 1
        elif line.strip().startswith("# via") and current is not None:
            in_via = True
            rest = line.strip()[len("# via"):].strip()
            if rest:
                current["via"].add(rest)
        elif line.strip().startswith("#") and in_via and current is not None:
            current["via"].add(line.strip().lstrip("#").strip())
        else:
            problems.append(f"requirements/site.txt:{number}: not a pinned package with its hashes: {line.strip()!r}")
    for name, entry in entries.items():
        if not entry["hashes"]:
            problems.append(f"requirements/site.txt: {name}=={entry['version']} has no --hash")
    return entries, problems


def lock_problems(pyproject_text: str, lock_text: str) -> list[str]:
    pins, loose = site_pins(pyproject_text)
    entries, problems = read_lock(lock_text)
    problems += [f"pyproject.toml: the site extra's {r!r} is no exact pin (name==version)" for r in loose]
    for name, version in sorted(pins.items()):
        locked = entries.get(name)
        if locked is None:
            problems.append(f"{name}=={version} (site extra) is not in requirements/site.txt")
        elif locked["version"] != version:
            problems.append(f"{name}: the site extra pins {version}, requirements/site.txt {locked['version']}")
    for name, entry in sorted(entries.items()):
        if PROJECT in entry["via"] and name not in pins:
            problems.append(f"requirements/site.txt lists {name} as the site extra's own, but the extra has no "
                            f"such pin")
    return problems


REGENERATE = ("regenerate it: PIP_CONFIG_FILE=/dev/null .venv/bin/pip-compile with the options its header shows "
              "(unset PIP_FIND_LINKS first on a machine that sets it)")


def test_the_lock_agrees_with_pyproject():
    assert lock_problems(PYPROJECT.read_text(), LOCK.read_text()) == [], REGENERATE


def test_every_locked_package_is_hashed_and_the_lock_is_not_trivial():
    entries, problems = read_lock(LOCK.read_text())
    assert problems == []
    assert len(entries) >= 10  # mkdocs and material need far more than their own names
    assert all(e["hashes"] >= 1 for e in entries.values())


def _bump(text: str) -> str:
    return text.replace('"mkdocs==1.6.1"', '"mkdocs==1.6.2"')


def _new_pin(text: str) -> str:
    return text.replace('"nbformat==5.11.1",', '"nbformat==5.11.1",\n    "mkdocs-redirects==1.2.2",')


def _dropped_pin(text: str) -> str:
    return re.sub(r'\n\s*"nbformat==[^"]+",[^\n]*', "", text)


def _loose_pin(text: str) -> str:
    return text.replace('"mkdocs==1.6.1"', '"mkdocs>=1.6"')


def _unhashed(text: str) -> str:
    return re.sub(r"(?m)^(mkdocs==1\.6\.1) \\\n(\s+--hash=\S+(?: \\)?\n)+", r"\1\n", text)


def _index(text: str) -> str:
    return "--extra-index-url https://example.com/simple\n" + text


@pytest.mark.parametrize("mutate_pyproject, mutate_lock, expected", [
    (_bump, None, "mkdocs: the site extra pins 1.6.2, requirements/site.txt 1.6.1"),
    (_new_pin, None, "mkdocs-redirects==1.2.2 (site extra) is not in requirements/site.txt"),
    (_dropped_pin, None, "lists nbformat as the site extra's own"),
    (_loose_pin, None, "is no exact pin"),
    (None, _unhashed, "mkdocs==1.6.1 has no --hash"),
    (None, _index, "not a pinned package with its hashes: '--extra-index-url"),
], ids=["pin-bumped", "pin-added", "pin-dropped", "pin-loosened", "hash-removed", "index-added"])
def test_a_lock_out_of_step_with_pyproject_is_rejected(mutate_pyproject, mutate_lock, expected):
    pyproject, lock = PYPROJECT.read_text(), LOCK.read_text()
    pyproject2 = mutate_pyproject(pyproject) if mutate_pyproject else pyproject
    lock2 = mutate_lock(lock) if mutate_lock else lock
    assert (pyproject2, lock2) != (pyproject, lock), "the mutation changed nothing"
    problems = lock_problems(pyproject2, lock2)
    assert any(expected in p for p in problems), problems


def test_the_gpu_jobs_baselines_are_hashed_and_agree_with_the_lessons():
    """requirements/baselines.txt pins what record-gpu installs: the same versions as the dev extra
    and the lessons' [requires.optional], each with a hash (fails when one of them moves alone)."""
    lock = (ROOT / "requirements" / "baselines.txt").read_text()
    pins = {normal(m["name"]): m["version"] for line in lock.splitlines() if (m := ENTRY.match(line))}
    assert pins and len(re.findall(r"--hash=sha256:[0-9a-f]{64}", lock)) >= len(pins)
    dev = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]["dev"]
    dev_pins = {normal(m[1]): m[2] for r in dev if (m := re.fullmatch(r"\s*([\w.-]+)\s*==\s*(\S+)\s*", r))}
    for name, version in pins.items():
        assert dev_pins.get(name) == version, f"{name}: baselines.txt {version}, dev extra {dev_pins.get(name)}"
    for toml in sorted((ROOT / "code").glob("*/lesson.toml")):
        optional = tomllib.loads(toml.read_text()).get("requires", {}).get("optional", {})
        for name, version in optional.items():
            assert pins.get(normal(name)) == version, f"{toml}: {name} {version}, baselines.txt {pins.get(name)}"
    record = (ROOT / ".github" / "workflows" / "record.yml").read_text()
    assert "--require-hashes --no-deps --target" in record and "requirements/baselines.txt" in record
