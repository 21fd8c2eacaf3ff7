"""Environments for other Triton releases: resolved, made once, cached, and checked before each use.

One job: give a run under Triton X.Y.Z an import path on which `import triton` is that release and
everything else (torch, numpy, matplotlib, the kit) is this Python's own. torch's CPU build does not
depend on Triton, so a release needs nothing but its own package:

    python -m pip install --no-deps --target .cache/triton/X.Y.Z/site triton==X.Y.Z

put first on PYTHONPATH for the lesson's process. That is the whole environment: no second torch, no
virtual environment to keep in step with this one, and no new tool (pip is what every machine that
runs verify already has; uv would make environments faster to create, but each is created once and
then reused, and the download is what takes the time). The release this Python has itself needs no
folder at all. Before each use the environment is checked in a child process, as a lesson would see
it: `import triton` must give that release, from that folder, and torch, numpy and the interpreter
must import. A release whose environment cannot be made or checked is reported and not run: that is
not a lesson failure, and nothing recorded is touched.

One exception, found by the matrix itself: Triton's interpreter before 3.7 turns one-element arrays
into Python scalars, which numpy 2.4 refuses ("only 0-dimensional arrays can be converted to Python
scalars"), so under this Python's numpy 2.4 every lesson with a scalar kernel argument failed under
3.4, 3.5 and 3.6 for a reason that is not the lesson's. Those releases get the last numpy before 2.4
in their folder too (COMPANIONS), as their users have; every record says which numpy ran.

Dependencies: Triton 3.4 wants setuptools, which this Python brings (the check fails clearly if not).
Tests make environments with a fake installer (or a tiny local wheel), never a 150 MB download.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from verified_triton.core.paths import ROOT
from verified_triton.core.safefs import UnsafePathError, read_text
from verified_triton.judge.releases import RELEASE, ReleaseEnv, release_tuple

# The newest patch of each minor release the matrix checks, as the package registry had them when this was
# written; `--matrix` runs these, `--triton 3.5` means 3.5.1. A minor not listed (a newer one) and
# 'newest' are asked of the registry.
KNOWN_NEWEST = {"3.4": "3.4.0", "3.5": "3.5.1", "3.6": "3.6.0", "3.7": "3.7.1", "3.8": "3.8.0", "3.9": "3.9.0"}
MATRIX = tuple(KNOWN_NEWEST)
# What a release's folder holds besides triton, by minor release (see the module's docstring).
COMPANIONS = {"3.4": ("numpy==2.3.5",), "3.5": ("numpy==2.3.5",), "3.6": ("numpy==2.3.5",)}
MANIFEST = "installed.txt"  # the requirements a folder was made with: another list remakes it
CACHE_DIR = ROOT / ".cache" / "triton"
INSTALL_TIMEOUT_S = 1800.0
PROBE_TIMEOUT_S = 300.0

# Run in a child with the environment's import path, as a lesson would be: the versions the kit records
# (torch.__version__, triton.__version__, platform.python_version()) and where triton came from.
PROBE = """\
import json, platform, sys
found = {"python": platform.python_version()}
try:
    import numpy, torch, triton
    import triton.runtime.interpreter
    found.update(torch=torch.__version__, triton=triton.__version__, numpy=numpy.__version__,
                 triton_file=triton.__file__ or "")
except BaseException as exc:
    found["problem"] = f"{type(exc).__name__}: {str(exc)[:300]}"
print(json.dumps(found))
"""


class ReleaseEnvError(Exception):
    """An environment for a release that cannot be made or used, in words (no lesson ran)."""


class ReleaseSpecError(ReleaseEnvError):
    """A release asked for that is no release (a usage error: verify exits 2)."""


@dataclass(frozen=True)
class ReleaseEnvironment:
    release: str
    site: Path | None  # the folder put first on the import path; None: this Python's own Triton
    versions: ReleaseEnv  # what the check found there

    def pythonpath(self, existing: str = "") -> str:
        """PYTHONPATH for a run: the release's folder first, then whatever was there already."""
        parts = ([str(self.site)] if self.site else []) + ([existing] if existing else [])
        return os.pathsep.join(parts)


# -- which release -----------------------------------------------------------------------------------

Ask = Callable[[str], str]  # a requirement such as "triton==3.5.*" -> the release pip would install


def registry_newest(requirement: str) -> str:
    """The release pip would install for `requirement` (e.g. 'triton==3.10.*'), asked without installing."""
    command = [sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--ignore-installed", "--quiet",
               "--disable-pip-version-check", "--report", "-", requirement]
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
        report = json.loads(out.stdout) if out.returncode == 0 else None
        version = report["install"][0]["metadata"]["version"] if report else ""
    except (OSError, subprocess.TimeoutExpired, ValueError, KeyError, IndexError, TypeError, RecursionError):
        version, out = "", None
    if not isinstance(version, str) or not RELEASE.match(version):
        last = out.stderr.strip().splitlines()[-1:] if out is not None else []
        raise ReleaseEnvError(f"the package registry did not say which release {requirement} is "
                              f"({last[0][:300] if last else 'no answer'})")
    return version


def resolve(spec: str, ask: Ask = registry_newest) -> str:
    """'3.5.1' as it is; '3.5' -> its newest patch (KNOWN_NEWEST, else the registry); 'newest' -> the registry's."""
    spec = spec.strip()
    if RELEASE.match(spec):
        return spec
    if spec == "newest":
        return ask("triton")
    parts = spec.split(".")
    if len(parts) == 2 and all(p.isascii() and p.isdigit() and len(p) <= 3 for p in parts):
        return KNOWN_NEWEST.get(spec) or ask(f"triton=={spec}.*")
    raise ReleaseSpecError(f"{spec[:40]!r} is not a Triton release: give X.Y.Z (3.5.1), X.Y (its newest patch) "
                           "or 'newest'")


def resolve_all(specs: list[str], ask: Ask = registry_newest) -> list[str]:
    """Each spec resolved, duplicates dropped, oldest first."""
    releases = {resolve(spec, ask) for spec in specs if spec.strip()}
    if not releases:
        raise ReleaseSpecError("no Triton release given")
    return sorted(releases, key=release_tuple)


# -- making and checking an environment ----------------------------------------------------------------

Installer = Callable[[list[str], Path], str]  # (requirements, target folder) -> '' on success, else why not


def requirements(release: str) -> list[str]:
    """What the folder of `release` holds: that Triton, and its companions (COMPANIONS)."""
    return [f"triton=={release}", *COMPANIONS.get(".".join(release.split(".")[:2]), ())]


def pip_install(wanted: list[str], target: Path) -> str:
    """Install exactly `wanted` (pinned requirements, no dependencies) into `target` with this Python's pip."""
    command = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-input", "--disable-pip-version-check",
               "--quiet", "--target", str(target), *wanted]
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S,
                             stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return f"pip did not finish within {INSTALL_TIMEOUT_S:.0f} s"
    except OSError as exc:
        return f"pip could not be started ({exc})"
    if out.returncode != 0:
        lines = [line for line in out.stderr.strip().splitlines() if line.strip()]
        return f"pip exited {out.returncode}: {' / '.join(lines[-3:])[:600] or 'no message'}"
    return ""


def own_triton() -> str:
    """The Triton this Python has itself ('' when none)."""
    try:
        return metadata.version("triton")
    except metadata.PackageNotFoundError:
        return ""


def prepare(release: str, cache_dir: Path = CACHE_DIR, installer: Installer = pip_install,
            report: Callable[[str], None] = print) -> ReleaseEnvironment:
    """The environment for `release`: this Python's own when it has that Triton, else the cached folder, made
    once (`installer`). Checked before it is handed back; ReleaseEnvError says why when it cannot be."""
    if not RELEASE.match(release):
        raise ReleaseEnvError(f"{release[:40]!r} is not a release like 3.5.1")
    site = None if own_triton() == release else _site(release, Path(cache_dir), installer, report)
    versions = check(release, site)
    return ReleaseEnvironment(release, site, versions)


def _site(release: str, cache_dir: Path, installer: Installer, report: Callable[[str], None]) -> Path:
    _plain_folder(cache_dir, make=True)
    folder = cache_dir / release
    site = folder / "site"
    wanted = requirements(release)
    manifest = "\n".join(wanted) + "\n"
    if _plain_folder(folder):
        if _plain_folder(site) and _manifest(folder) == manifest:
            return site
        if not _manifest(folder):
            raise ReleaseEnvError(f"{folder}: not an environment verify made (no {MANIFEST} in it); remove it and "
                                  "run again")
        report(f"Triton {release}: its environment was made with other requirements; making it again")
        shutil.rmtree(folder)
    _sweep(cache_dir, release)
    scratch = cache_dir / f".{release}.tmp-{os.getpid()}"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir()
    report(f"Triton {release}: making its environment once ({_shown(folder)}: pip install --no-deps --target "
           f"{' '.join(wanted)}, about 150-250 MB)")
    started = time.monotonic()
    problem = installer(wanted, scratch / "site")
    if problem or not _plain_folder(scratch / "site"):
        shutil.rmtree(scratch, ignore_errors=True)
        raise ReleaseEnvError(f"the environment for Triton {release} could not be made: "
                              f"{problem or 'the installer left no site folder'}")
    (scratch / MANIFEST).write_text(manifest, encoding="utf-8")
    try:
        os.rename(scratch, folder)
    except OSError:  # another verify made it meanwhile: use theirs
        shutil.rmtree(scratch, ignore_errors=True)
        if not _plain_folder(site):
            raise ReleaseEnvError(f"{folder}: could not be put in place") from None
    report(f"Triton {release}: environment made in {time.monotonic() - started:.0f} s")
    return site


def _manifest(folder: Path) -> str:
    try:
        return read_text(folder / MANIFEST, 4096, folder.parent)
    except UnsafePathError:
        return ""


def check(release: str, site: Path | None) -> ReleaseEnv:
    """In a child process with the environment's import path: triton is `release`, from `site`; torch, numpy and
    the interpreter import. ReleaseEnvError otherwise."""
    env = dict(os.environ, TRITON_INTERPRET="1")
    existing = os.environ.get("PYTHONPATH", "")
    env["PYTHONPATH"] = os.pathsep.join(([str(site)] if site else []) + ([existing] if existing else []))
    where = f"the environment for Triton {release}" + (f" ({_shown(site.parent)})" if site else " (this Python's)")
    try:
        out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env,
                             timeout=PROBE_TIMEOUT_S, stdin=subprocess.DEVNULL)
        found = json.loads(out.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError, RecursionError) as exc:
        raise ReleaseEnvError(f"{where} could not be checked ({type(exc).__name__})") from None
    if not isinstance(found, dict) or not all(isinstance(v, str) for v in found.values()):
        raise ReleaseEnvError(f"{where}: its check printed something else than versions")
    if found.get("problem"):
        raise ReleaseEnvError(f"{where} cannot run lessons: {found['problem']}")
    if found.get("triton") != release:
        raise ReleaseEnvError(f"{where} imports Triton {found.get('triton', '?')[:40]}, not {release}")
    origin = Path(found.get("triton_file", ""))
    if site is not None and not origin.resolve().is_relative_to(site.resolve()):
        raise ReleaseEnvError(f"{where} imports triton from {origin}, not from its own folder")
    for pin in requirements(release)[1:] if site is not None else ():
        package, _, version = pin.partition("==")
        if found.get(package) != version:
            raise ReleaseEnvError(f"{where} imports {package} {found.get(package, '?')[:40]}, not {version}")
    return ReleaseEnv(python=found["python"][:40], torch=found.get("torch", "")[:120],
                      triton=found["triton"], numpy=found.get("numpy", "")[:120])


def _plain_folder(path: Path, make: bool = False) -> bool:
    """True for a plain folder, False when nothing is there; a link or a file there is an error."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        if not make:
            return False
        path.mkdir(parents=True)
        return True
    if not stat.S_ISDIR(mode):
        raise ReleaseEnvError(f"{path}: a link or a file where an environment's folder belongs; links are never "
                              "followed")
    return True


def _sweep(cache_dir: Path, release: str) -> None:
    """Remove half-made environments of `release` left by a verify that no longer runs."""
    for scratch in cache_dir.glob(f".{release}.tmp-*"):
        pid = scratch.name.rsplit("-", 1)[-1]
        if not pid.isdigit() or scratch.is_symlink():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(scratch, ignore_errors=True)
        except PermissionError:
            pass


def _shown(path: Path) -> str:
    try:
        return Path(path).resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return str(path)
