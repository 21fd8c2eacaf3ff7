"""verify.py --import with --expect-mode, --expect-gpu and --require-attestation (tools/provenance.py).

A bundle must fit the job that made it: an interpreter job's bundle holds no GPU records, a GPU
job's records name the GPU model of its runner label, and with --require-attestation GitHub's CLI
must vouch for the bundle's bytes. A fake `gh` on PATH stands in for GitHub: it logs its
arguments and prints what a test tells it to. Without these options an import works as before.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from conftest import PASSING, fake_record
from verified_triton.record.bundles import write_bundle
from verified_triton.record.provenance import Expectation, gpu_matches

SIGNER = "owner/repo/.github/workflows/record.yml@refs/heads/main"


def bundle_of(path: Path, *records) -> Path:
    write_bundle(path, list(records), path.parent)  # records without figures: nothing read from there
    return path


def record(project, mode: str, device: str = "NVIDIA H200"):
    rec = fake_record(project.lesson("good"), mode, device=device)
    rec.figures = []
    return rec


@pytest.fixture
def good(project):
    project.add("good", PASSING)
    return project


def fake_gh(tmp_path: Path, out: str = "", rc: int = 0) -> tuple[str, Path]:
    """A folder holding an executable `gh` (to put on PATH) and the file it logs its arguments to."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    log = tmp_path / "gh.log"
    script = folder / "gh"
    script.write_text(f"#!{sys.executable}\n"
                      "import json, sys\n"
                      f"open({str(log)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
                      f"sys.stdout.write({out!r})\n"
                      f"sys.stderr.write('fake gh: verification failed\\n' if {rc} else '')\n"
                      f"sys.exit({rc})\n")
    script.chmod(0o755)
    return str(folder), log


def verified(*runners: str) -> str:
    """What `gh attestation verify --format json` prints, cut to the fields provenance.py reads."""
    return json.dumps([{"verificationResult": {"signature": {"certificate": {
        "runnerEnvironment": r, "sourceRepositoryRef": "refs/heads/main"}}}} for r in runners])


def imported(project) -> list[str]:
    return sorted(str(p.relative_to(project.evidence)) for p in project.evidence.rglob("*.json"))


# -- the GPU model a runner label names ---------------------------------------------------------

@pytest.mark.unit
@pytest.mark.parametrize("key, model, expected", [
    ("gpu-nvidia-h200", "h200", True),
    ("gpu-nvidia-h200", "NVIDIA H200", True),
    ("gpu-nvidia-a100-sxm4-80gb", "a100-80gb", True),
    ("gpu-nvidia-h100-80gb-hbm3", "h100", True),
    ("gpu-nvidia-gh100", "h100", False),  # words, not substrings
    ("gpu-nvidia-h100-80gb-hbm3", "h200", False),
    ("gpu-nvidia-a100-sxm4-40gb", "a100-80gb", False),
    ("gpu-nvidia-h200", "--", False),  # no words: nothing matches
])
def test_gpu_matches_words_of_the_label(key, model, expected):
    assert gpu_matches(key, model) is expected


@pytest.mark.unit
@pytest.mark.parametrize("kwargs, message", [
    ({"mode": "cpu"}, "interpreter, gpu or sanitize"),
    ({"gpu": "  "}, "GPU model"),
    ({"mode": "interpreter", "gpu": "h200"}, "--expect-mode is interpreter"),
    ({"signer": "owner/repo/record.yml"}, "OWNER/REPO"),
    ({"signer": "owner/repo/.github/workflows/record.yml"}, "OWNER/REPO"),  # no ref
    ({"signer": "o/r/.github/workflows/record.yml@refs/heads/main;rm"}, "OWNER/REPO"),
])
def test_expectations_are_checked(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Expectation(**kwargs)


# -- local work is unchanged ------------------------------------------------------------------

@pytest.mark.integration
def test_an_import_without_the_options_needs_no_attestation(good, tmp_path):
    """A bundle from a developer's own GPU imports as before: no gh is asked (none is on PATH)."""
    bundle = bundle_of(tmp_path / "mine.tar.gz", record(good, "gpu"), record(good, "interpreter"))
    result = good.verify("--import", str(bundle), PATH=str(tmp_path / "nothing-here"))
    assert result.returncode == 0, result.stderr
    assert imported(good) == ["good/gpu-nvidia-h200.json", "good/interpreter.json"]


@pytest.mark.integration
def test_the_options_need_import(good):
    result = good.verify("--status", "--expect-mode", "gpu")
    assert result.returncode == 2 and "applies to --import" in result.stderr


@pytest.mark.integration
def test_a_malformed_signer_is_a_usage_error(good, tmp_path):
    bundle = bundle_of(tmp_path / "b.tar.gz", record(good, "interpreter"))
    result = good.verify("--import", str(bundle), "--require-attestation", "owner/repo")
    assert result.returncode == 2 and "OWNER/REPO/.github/workflows/FILE.yml@refs/heads/BRANCH" in result.stderr
    assert imported(good) == []


# -- records that do not fit the job ----------------------------------------------------------

@pytest.mark.integration
def test_an_interpreter_bundle_holding_a_gpu_record_is_refused(good, tmp_path):
    bundle = bundle_of(tmp_path / "interpreter-1-of-2.tar.gz", record(good, "interpreter"), record(good, "gpu"))
    result = good.verify("--import", str(bundle), "--expect-mode", "interpreter")
    assert result.returncode == 1
    assert "good/gpu-nvidia-h200.json: a GPU record, but the job that made this bundle records interpreter" \
        in result.stderr
    assert imported(good) == []  # not even the interpreter record


@pytest.mark.integration
def test_a_gpu_bundle_holding_an_interpreter_record_is_refused(good, tmp_path):
    bundle = bundle_of(tmp_path / "gpu.tar.gz", record(good, "interpreter"))
    result = good.verify("--import", str(bundle), "--expect-mode", "gpu", "--expect-gpu", "h200")
    assert result.returncode == 1 and "an interpreter record" in result.stderr
    assert imported(good) == []


@pytest.mark.integration
def test_gpu_records_of_another_model_than_the_runner_label_are_refused(good, tmp_path):
    bundle = bundle_of(tmp_path / "gpu-h200-1-of-1.tar.gz", record(good, "gpu", device="NVIDIA A100-SXM4-80GB"))
    result = good.verify("--import", str(bundle), "--expect-mode", "gpu", "--expect-gpu", "h200")
    assert result.returncode == 1
    assert "recorded on 'NVIDIA A100-SXM4-80GB' (gpu-nvidia-a100-sxm4-80gb), but the job's runner is labelled " \
           "'h200'" in result.stderr
    assert imported(good) == []
    accepted = good.verify("--import", str(bundle), "--expect-mode", "gpu", "--expect-gpu", "a100-80gb")
    assert accepted.returncode == 0, accepted.stderr
    assert imported(good) == ["good/gpu-nvidia-a100-sxm4-80gb.json"]


@pytest.mark.integration
def test_one_bad_bundle_refuses_the_whole_import(good, tmp_path):
    fine = bundle_of(tmp_path / "a.tar.gz", record(good, "gpu"))
    other = bundle_of(tmp_path / "b.tar.gz", record(good, "gpu", device="NVIDIA H100 80GB HBM3"))
    result = good.verify("--import", str(fine), str(other), "--expect-gpu", "h200")
    assert result.returncode == 1 and f"{other}:good/gpu-nvidia-h100-80gb-hbm3.json" in result.stderr
    assert str(fine) not in result.stderr
    assert imported(good) == []


# -- attestations -----------------------------------------------------------------------------

@pytest.mark.integration
def test_without_gh_an_attestation_cannot_be_checked_and_the_bundle_is_refused(good, tmp_path):
    bundle = bundle_of(tmp_path / "b.tar.gz", record(good, "interpreter"))
    result = good.verify("--import", str(bundle), "--require-attestation", SIGNER, PATH=str(tmp_path / "empty"))
    assert result.returncode == 1 and "GitHub's CLI (gh) is not installed" in result.stderr
    assert imported(good) == []


@pytest.mark.integration
def test_a_failed_verification_refuses_the_bundle(good, tmp_path):
    path, _log = fake_gh(tmp_path, rc=1)
    bundle = bundle_of(tmp_path / "b.tar.gz", record(good, "interpreter"))
    result = good.verify("--import", str(bundle), "--require-attestation", SIGNER, PATH=path)
    assert result.returncode == 1
    assert f"no attestation by {SIGNER} verifies (fake gh: verification failed)" in result.stderr
    assert imported(good) == []


@pytest.mark.integration
@pytest.mark.parametrize("out", ["", "not json", "[]", '[{"verificationResult": {}}]', verified("on-the-moon")])
def test_output_that_is_not_a_verification_refuses_the_bundle(good, tmp_path, out):
    path, _log = fake_gh(tmp_path, out=out)
    bundle = bundle_of(tmp_path / "b.tar.gz", record(good, "interpreter"))
    result = good.verify("--import", str(bundle), "--require-attestation", SIGNER, PATH=path)
    assert result.returncode == 1 and "refused" in result.stderr
    assert imported(good) == []


@pytest.mark.integration
def test_an_attested_bundle_is_imported_and_gh_was_asked_the_right_question(good, tmp_path):
    path, log = fake_gh(tmp_path, out=verified("github-hosted"))
    bundle = bundle_of(tmp_path / "interpreter-1-of-1.tar.gz", record(good, "interpreter"))
    result = good.verify("--import", str(bundle), "--expect-mode", "interpreter", "--require-attestation", SIGNER,
                         PATH=path)
    assert result.returncode == 0, result.stderr
    assert imported(good) == ["good/interpreter.json"]
    [asked] = [json.loads(line) for line in log.read_text().splitlines()]
    copy = asked.pop(2)  # gh verifies the bundle's private copy, which is then imported (test_hostile_trust.py)
    assert copy != str(bundle) and copy.endswith(".tar.gz")
    assert asked == ["attestation", "verify", "--repo", "owner/repo",
                     "--signer-workflow", "owner/repo/.github/workflows/record.yml", "--source-ref", "refs/heads/main",
                     "--format", "json"]


@pytest.mark.integration
def test_gpu_records_attested_on_a_github_hosted_runner_are_refused(good, tmp_path):
    """Whatever the bundle is called and whatever the import expects: the certificate says no GPU."""
    path, _log = fake_gh(tmp_path, out=verified("github-hosted"))
    bundle = bundle_of(tmp_path / "gpu-h200-1-of-1.tar.gz", record(good, "gpu"))
    result = good.verify("--import", str(bundle), "--require-attestation", SIGNER, PATH=path)
    assert result.returncode == 1 and "attested on a GitHub-hosted runner, which has no GPU" in result.stderr
    assert imported(good) == []
    # The same bundle, attested on a self-hosted runner of the right label, is taken.
    (tmp_path / "self-hosted").mkdir()
    path, _log = fake_gh(tmp_path / "self-hosted", out=verified("self-hosted"))
    result = good.verify("--import", str(bundle), "--expect-mode", "gpu", "--expect-gpu", "h200",
                         "--require-attestation", SIGNER, PATH=path)
    assert result.returncode == 0, result.stderr
    assert imported(good) == ["good/gpu-nvidia-h200.json"]
