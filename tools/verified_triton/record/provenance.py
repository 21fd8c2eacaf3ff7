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
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from verified_triton.core.lessons import Lesson
from verified_triton.judge.evidence import Record
from verified_triton.record.bundles import read_bundle

SIGNER = re.compile(r"^(?P<repo>[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)/(?P<path>\.github/workflows/[A-Za-z0-9_.-]+\.ya?ml)"
                    r"@(?P<ref>refs/[A-Za-z0-9_./-]+)$")
RUNNERS = ("github-hosted", "self-hosted")
GH_TIMEOUT_S = 180
GH_OUTPUT_LIMIT = 4 * 1024 * 1024  # a few attestations of one file; more is not what gh prints


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
        result = subprocess.run(command, capture_output=True, timeout=GH_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return set(), f"gh attestation verify did not answer within {GH_TIMEOUT_S} s"
    except OSError as exc:
        return set(), f"gh could not be run ({exc.strerror})"
    if result.returncode != 0:
        said = result.stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
        return set(), f"no attestation by {signer} verifies ({' '.join(said) or f'gh exited {result.returncode}'})"
    try:
        if len(result.stdout) > GH_OUTPUT_LIMIT:
            raise ValueError("too long")
        verified = json.loads(result.stdout)
        runners = {item["verificationResult"]["signature"]["certificate"]["runnerEnvironment"] for item in verified}
    except (ValueError, TypeError, KeyError):
        return set(), "gh attestation verify succeeded but printed no attestations with a runner environment"
    if not runners or not runners <= set(RUNNERS):
        return set(), f"the attestation names no known runner environment ({', '.join(map(str, runners)) or 'none'})"
    return runners, ""


def provenance_problems(paths: list[Path], lessons: dict[str, Lesson], expect: Expectation,
                        selected: set[str] | None = None) -> list[str]:
    """One line per problem, "bundle[:member]: why; refused"; empty when every bundle may be imported."""
    problems = []
    for path in paths:
        runners: set[str] = set()
        if expect.signer:
            runners, problem = attested_runners(path, expect.signer)
            if problem:
                problems.append(f"{path}: {problem}; refused")
                continue
        # What the bundle holds, read without writing; whatever it cannot read, the import itself reports.
        incoming, _refused, _notes = read_bundle(path, lessons, selected)
        for item in incoming:
            for problem in record_problems(item.record, expect, runners):
                problems.append(f"{path}:{item.record.lesson}/{item.record.key}.json: {problem}; refused")
    return problems
