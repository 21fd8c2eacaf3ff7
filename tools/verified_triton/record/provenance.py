"""Provenance: whether a bundle could have come from the job that claims to have made it.

One job: before `verify.py --import` writes anything, hold each bundle to what is
known about where it was made, and refuse it whole otherwise:

- `--expect-mode interpreter|gpu`: the job recorded one mode only (an interpreter
  job on a machine without a GPU cannot have made GPU records);
- `--expect-gpu MODEL`: the job's runner label names a GPU model (`h200`, or
  `"NVIDIA H200"`): every GPU record's key, and the key its device name gives,
  must hold each word of it (`h200` matches `gpu-nvidia-h200`, `a100-80gb`
  matches `gpu-nvidia-a100-sxm4-80gb`; `h100` does not match `gpu-nvidia-gh100`);
- `--require-attestation OWNER/REPO/.github/workflows/FILE@REF`: GitHub's CLI
  (`gh attestation verify`) must vouch that the bundle's exact bytes were
  attested by that workflow, run from that ref of that repository. The
  certificate also says whether the job ran on a GitHub-hosted runner (which
  has no GPU) or a self-hosted one; a bundle attested on a GitHub-hosted
  runner may not hold GPU records, whatever it is called.

Without any of these options nothing here runs: an import of a bundle from a
developer's own GPU works as before. `gh` is found on PATH (tests put a fake
one there); a missing `gh`, a failed verification or output that is not what
`gh --format json` prints refuses the bundle.

With any of them, each bundle is first copied once, bounded, into a private
file (`private_copies`: mkstemp, 0600, in a folder of its own), and that copy
is what gh verifies, what these checks read and what the import reads: a
bundle swapped at its path after the check is never the one imported. gh's
output is read bounded while it prints (LIMITS.gh_output) and its JSON parsed
only within LIMITS.json_depth levels: whatever it prints (huge, deeply nested,
not UTF-8, not JSON) is a refusal naming the bundle, never a traceback.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from verified_triton.core.lessons import Lesson
from verified_triton.core.limits import LIMITS
from verified_triton.core.numfmt import exact
from verified_triton.judge.evidence import Record
from verified_triton.record.bundles import read_bundle
from verified_triton.record.capture import run_command

SIGNER = re.compile(r"^(?P<repo>[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)/(?P<path>\.github/workflows/[A-Za-z0-9_.-]+\.ya?ml)"
                    r"@(?P<ref>refs/[A-Za-z0-9_./-]+)$")
RUNNERS = ("github-hosted", "self-hosted")
GH_TIMEOUT_S = 180


@dataclass(frozen=True)
class Expectation:
    """What the job that made a bundle could have recorded, and who must have attested it."""

    mode: str | None = None  # "interpreter" | "gpu" | "sanitize"
    gpu: str | None = None  # the model its runner label names, e.g. "h200"
    signer: str | None = None  # OWNER/REPO/.github/workflows/FILE@REF

    def __post_init__(self):
        if self.mode not in (None, "interpreter", "gpu", "sanitize"):
            raise ValueError(f"--expect-mode takes interpreter, gpu or sanitize, not {self.mode!r}")
        if self.gpu is not None and not _words(self.gpu):
            raise ValueError(f"--expect-gpu needs a GPU model such as h200, not {self.gpu!r}")
        if self.gpu is not None and self.mode == "interpreter":
            raise ValueError("--expect-gpu names a GPU model, but --expect-mode is interpreter")
        if self.signer is not None and not SIGNER.match(self.signer):
            raise ValueError(f"--require-attestation takes OWNER/REPO/.github/workflows/FILE.yml@refs/heads/BRANCH, "
                             f"not {self.signer!r}")

    @property
    def any(self) -> bool:
        return bool(self.mode or self.gpu or self.signer)


def _words(name: str) -> list[str]:
    return [w for w in re.split(r"[^a-z0-9]+", name.lower()) if w]


def gpu_matches(key: str, model: str) -> bool:
    """Whether a GPU key (gpu-nvidia-a100-sxm4-80gb) holds every word of a model name (a100-80gb)."""
    have = set(_words(key))
    return bool(_words(model)) and all(word in have for word in _words(model))


def record_problems(record: Record, expect: Expectation, runners: set[str]) -> list[str]:
    """Why `record` cannot have come from the job `expect` and the attestation's `runners` describe."""
    problems = []
    on_gpu = record.mode in ("gpu", "sanitize")  # a sanitize record is made on a GPU too
    if expect.mode and record.mode != expect.mode:
        kind = {"interpreter": "an interpreter", "gpu": "a GPU", "sanitize": "a sanitize"}.get(record.mode, "a")
        problems.append(f"{kind} record, but the job that made this bundle records {expect.mode} only")
    if on_gpu and "github-hosted" in runners:
        problems.append(f"a {'GPU' if record.mode == 'gpu' else 'sanitize'} record, but the bundle was attested on "
                        "a GitHub-hosted runner, which has no GPU")
    if expect.gpu and on_gpu:  # the key is derived from env.device_name (evidence's value rules)
        if not gpu_matches(record.key, expect.gpu):
            problems.append(f"recorded on {record.env.device_name!r} ({record.key}), but the job's runner is labelled "
                            f"{expect.gpu!r}")
    return problems


@dataclass
class PrivateCopies:
    """Each bundle's private copy (what is verified and imported), or why it could not be made."""

    files: dict[Path, Path] = field(default_factory=dict)
    problems: dict[Path, str] = field(default_factory=dict)


@contextlib.contextmanager
def private_copies(paths: list[Path]) -> Iterator[PrivateCopies]:
    """Copy each bundle once, bounded and through no link, into a private file; remove them all afterwards."""
    copies = PrivateCopies()
    folder = Path(tempfile.mkdtemp(prefix="vt-import-"))  # 0700: no other user can swap a copy either
    try:
        for path in paths:
            try:
                copies.files[path] = _copy(path, folder)
            except OSError as exc:
                copies.problems[path] = f"cannot be read ({exc.strerror or exc})"
            except ValueError as exc:
                copies.problems[path] = str(exc)
        yield copies
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _copy(path: Path, folder: Path) -> Path:
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        source = os.open(path, flags)
    except OSError as exc:
        if os.path.islink(path):
            raise ValueError("a link, not a plain file") from None
        raise exc
    fd, name = tempfile.mkstemp(dir=folder, prefix="bundle-", suffix=".tar.gz")  # mkstemp: 0600
    with os.fdopen(source, "rb") as src, os.fdopen(fd, "wb") as dst:
        if not stat.S_ISREG(os.fstat(src.fileno()).st_mode):
            raise ValueError("not a plain file")
        copied = 0
        while chunk := src.read(1 << 20):
            copied += len(chunk)
            if copied > LIMITS.bundle_file:
                raise ValueError(f"more than {exact(LIMITS.bundle_file)} bytes, over the limit for a bundle")
            dst.write(chunk)
    return Path(name)


def attested_runners(path: Path, signer: str) -> tuple[set[str], str]:
    """(runner environments the verified attestations name, problem): `gh attestation verify` on one file."""
    match = SIGNER.match(signer)
    gh = shutil.which("gh")
    if gh is None:
        return set(), "no attestation could be checked: GitHub's CLI (gh) is not installed"
    command = [gh, "attestation", "verify", str(path), "--repo", match["repo"],
               "--signer-workflow", f"{match['repo']}/{match['path']}", "--source-ref", match["ref"],
               "--format", "json"]
    try:
        result = run_command(command, GH_TIMEOUT_S, LIMITS.gh_output)
    except OSError as exc:
        return set(), f"gh could not be run ({exc.strerror})"
    if result.timed_out:
        return set(), f"gh attestation verify did not answer within {GH_TIMEOUT_S} s"
    if result.too_long:
        return set(), (f"gh attestation verify printed more than {exact(LIMITS.gh_output)} bytes, which is not "
                       "what it prints about one bundle")
    if result.exit_code != 0:
        said = result.stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
        return set(), f"no attestation by {signer} verifies ({' '.join(said) or f'gh exited {result.exit_code}'})"
    verified, problem = _parse(result.stdout)
    if problem:
        return set(), f"gh attestation verify succeeded but printed {problem}"
    try:
        runners = {item["verificationResult"]["signature"]["certificate"]["runnerEnvironment"] for item in verified}
    except (TypeError, KeyError):
        runners = None
    if runners is None or not all(isinstance(r, str) for r in runners):
        return set(), "gh attestation verify succeeded but printed no attestations with a runner environment"
    if not runners or not runners <= set(RUNNERS):
        shown = ", ".join(sorted(r[:40] for r in runners)) or "none"
        return set(), f"the attestation names no known runner environment ({shown})"
    return runners, ""


def _parse(output: bytes) -> tuple[object, str]:
    """gh's JSON, or why not: not UTF-8, not JSON, or nested past LIMITS.json_depth. The decoder itself stops
    at the interpreter's recursion limit (a RecursionError, caught); the depth is then checked without
    recursion."""
    try:
        text = output.decode("utf-8")
    except UnicodeDecodeError:
        return None, "something that is not UTF-8 text"
    too_deep = f"JSON nested more than {LIMITS.json_depth} levels deep, which is not what it prints"
    try:
        value = json.loads(text)
    except RecursionError:
        return None, too_deep
    except ValueError:
        return None, "no attestations with a runner environment (not JSON)"
    todo = [(value, 1)]
    while todo:
        node, depth = todo.pop()
        if isinstance(node, dict | list):
            if depth > LIMITS.json_depth:
                return None, too_deep
            todo += [(child, depth + 1) for child in (node.values() if isinstance(node, dict) else node)]
    return value, ""


def provenance_problems(paths: list[Path], lessons: dict[str, Lesson], expect: Expectation,
                        selected: set[str] | None = None, copies: PrivateCopies | None = None) -> list[str]:
    """One line per problem, "bundle[:member]: why; refused"; empty when every bundle may be imported.

    `copies`: the private copy of each bundle (private_copies), which is what gh verifies and what is read;
    messages name the bundle itself."""
    problems = []
    for path in paths:
        if copies is not None and path in copies.problems:
            problems.append(f"{path}: {copies.problems[path]}; refused")
            continue
        source = copies.files[path] if copies is not None else path
        runners: set[str] = set()
        if expect.signer:
            runners, problem = attested_runners(source, expect.signer)
            if problem:
                problems.append(f"{path}: {problem}; refused")
                continue
        # What the bundle holds, read without writing; whatever it cannot read, the import itself reports.
        incoming, _refused, _notes = read_bundle(path, lessons, selected, source=source)
        for item in incoming:
            for problem in record_problems(item.record, expect, runners):
                problems.append(f"{path}:{item.record.lesson}/{item.record.key}.json: {problem}; refused")
    return problems
