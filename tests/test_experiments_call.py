"""experiments/ holds one runner for the device calls (issue 46, item 4): `bash experiments/call.sh STEP...`
replaces the twelve call_*.sh scripts, each old call reproducible by its steps. Run here with stand-ins for
python3, nvidia-smi, ncu and compute-sanitizer that only write down how they were called: every call in
experiments/README.md's table runs, NOTES.md cites each call by those steps, and calls C, E, J and K run the
commands their old scripts ran (in git history at 6a80599)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "experiments" / "README.md").read_text(encoding="utf-8")
NOTES = (ROOT / "NOTES.md").read_text(encoding="utf-8")
STAND_INS = ("python3", "nvidia-smi", "ncu", "compute-sanitizer", "sleep")
SHOWN = ("GPU", "SANITIZE", "JOBS", "SAN_TIMEOUT", "LIMIT", "VT_SANITIZE")


def calls() -> dict[str, str]:
    """call letter -> its steps, from experiments/README.md's table."""
    return {m.group(1): m.group(2) for m in re.finditer(r"^\| ([A-M]) \| `([^`]+)`", README, re.M)}


def run_call(tmp_path: Path, steps: list[str]) -> tuple[subprocess.CompletedProcess, list[str]]:
    """The runner under stand-ins; (its result, each stand-in's call with the variables it saw, in order)."""
    bin_dir, log = tmp_path / "bin", tmp_path / "calls.log"
    bin_dir.mkdir(exist_ok=True)
    shown = " ".join(f"{name}=${{{name}-}}" for name in SHOWN)
    for name in STAND_INS:
        (bin_dir / name).write_text(f'#!/bin/sh\necho "{name} $* | {shown}" >> "{log}"\n')
        (bin_dir / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "OUT": str(tmp_path / "out")}
    for name in SHOWN:
        env.pop(name, None)
    result = subprocess.run(["bash", "experiments/call.sh", *steps], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=120)
    said = log.read_text().splitlines() if log.exists() else []
    said = [re.sub(r"/tmp/tmp\.\w+", "MARKER", line).replace(str(tmp_path), "TMP") for line in said]
    machine = ("sleep", "nvidia-smi", "compute-sanitizer --version")  # waits and what the machine step asks
    return result, [line for line in said if not line.startswith(machine)]


def steps_of(call: str) -> list[str]:
    words = re.findall(r'"[^"]*"|\S+', calls()[call])
    return [w.strip('"') for w in words]


def test_the_table_holds_every_call():
    assert sorted(calls()) == list("ABCDEFGHIJKLM")


@pytest.mark.parametrize("call", list("ABCDEFGHIJKLM"))
def test_notes_cite_each_call_by_its_steps(call):
    """Where NOTES.md cited `bash experiments/call_x.sh`, it cites the runner with the call's steps."""
    cited = [" ".join(m.group(1).split()) for m in re.finditer(r"`bash experiments/call\.sh\s+([^`]+)`", NOTES)]
    assert " ".join(calls()[call].split()) in cited
    assert not re.search(r"call_[a-m]\.sh", NOTES)


@pytest.mark.parametrize("call", list("ABCDEFGHIJKLM"))
def test_every_call_runs(tmp_path, call):
    result, said = run_call(tmp_path, steps_of(call))
    assert "unknown step" not in result.stdout and "unknown key" not in result.stdout, result.stdout
    assert said, result.stdout + result.stderr


def test_an_unknown_step_is_refused(tmp_path):
    result, _ = run_call(tmp_path, ["machine", "rcae:100:5"])
    assert result.returncode == 2 and "unknown step 'rcae:100:5'" in result.stdout


def without_polling(said: list[str], until: int | None = None) -> list[str]:
    """The commands, once each: record_round.sh packs what was recorded every few seconds while verify runs. A
    limit of `until` seconds since the call began (`limit=until-N`) reads as N less the seconds the steps before
    it took, a few more under load: any value up to a minute below N reads as N."""
    def limit(m: re.Match) -> str:
        value = int(m.group(1))
        return f"LIMIT={until if until is not None and until - 60 <= value <= until else value}"

    return sorted(set(re.sub(r"LIMIT=(\d+)", limit, line) for line in said))


def test_call_k_runs_what_call_k_sh_ran(tmp_path):
    _, said = run_call(tmp_path, steps_of("K"))
    empty = "| GPU= SANITIZE= JOBS= SAN_TIMEOUT= LIMIT= VT_SANITIZE="
    metrics = ("sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum,"
               "sm__cycles_elapsed.avg.per_second")
    assert said[1:] == [
        f"python3 experiments/gluon_variants.py --part attention --rounds 5 {empty}",
        f"python3 experiments/bwd_variants.py --rounds 7 {empty}",
        f"ncu --clock-control none -k regex:attn_fwd_ws --launch-skip 18 --launch-count 6 --metrics {metrics} "
        f"--csv python3 experiments/gluon_ncu.py overlap {empty}",
    ]
    assert said[0].startswith("python3 -c import torch, triton;")


def test_call_c_runs_what_call_c_sh_ran(tmp_path):
    _, said = run_call(tmp_path, steps_of("C"))
    gpu = "| GPU=gluon-attention SANITIZE= JOBS= SAN_TIMEOUT= LIMIT=160 VT_SANITIZE="
    san = "| GPU= SANITIZE=gluon-attention attention-backward JOBS=2 SAN_TIMEOUT=160 LIMIT=550 VT_SANITIZE="
    pip = ("python3 -m pip install --quiet --require-hashes --no-deps --no-index --find-links .whl "
           "--target /tmp/baselines -r requirements/baselines.txt")
    assert without_polling(said, until=550) == without_polling([
        f"{pip} {gpu}",
        f"python3 tools/verify.py --mode gpu --force --lesson gluon-attention {gpu}",
        f"python3 experiments/pack_new.py MARKER TMP/out/gpu.tar.gz gpu {gpu}",
        "python3 experiments/bwd_race.py | GPU= SANITIZE= JOBS= SAN_TIMEOUT= LIMIT= VT_SANITIZE=",
        f"{pip} {san}",
        "python3 tools/verify.py --mode sanitize --force --jobs 2 --timeout 160 --lesson gluon-attention "
        f"--lesson attention-backward {san}",
        f"python3 experiments/pack_new.py MARKER TMP/out/sanitize.tar.gz sanitize {san}",
    ])


def test_call_e_hands_record_round_its_variables(tmp_path):
    _, said = run_call(tmp_path, steps_of("E"))
    assert ("python3 tools/verify.py --mode sanitize --force --jobs 2 --timeout 330 --lesson gluon-attention-backward "
            "--lesson gluon-attention | GPU=gluon-attention-backward SANITIZE=gluon-attention-backward gluon-attention "
            "JOBS=2 SAN_TIMEOUT=330 LIMIT=585 VT_SANITIZE=") in said


def test_call_j_runs_initcheck_with_its_options(tmp_path):
    _, said = run_call(tmp_path, steps_of("J"))
    runs = sorted(line for line in said if "--tool initcheck" in line)
    assert [line.split(" | ")[0] for line in runs] == [
        f"compute-sanitizer --tool initcheck --print-limit 200 --log-file TMP/out/{name}.initcheck.log "
        f"--require-cuda-init no --show-backtrace no python3 code/{name}/{name.replace('-', '_')}.py"
        for name in ("attention-backward", "gluon-attention-backward")]
    assert all(line.endswith("VT_SANITIZE=initcheck") for line in runs)


def test_experiments_holds_only_what_notes_or_a_page_cites():
    """Issue 46, item 4: a script no page and no line of NOTES.md names has gone (git history keeps it)."""
    pages = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "docs").rglob("*.md"))
    uncited = [p.name for p in sorted((ROOT / "experiments").iterdir())
               if p.name not in NOTES and p.name not in pages]
    assert uncited == []
