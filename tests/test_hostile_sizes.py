"""Hostile input, class 3: unbounded reads.

Every size limit lives in tools/limits.py and is enforced while reading: a
small compressed bundle that expands to gigabytes, a member whose header
claims gigabytes, a huge figure, a record with tens of thousands of checks, a
lesson that writes an enormous results file: each is refused quickly, with a
message naming the file and the limit, and nothing is read whole first.
(Huge recorded output is bounded while capturing: tests/test_verify.py; long
tables fold on the page: tests/test_render.py.)
"""

from __future__ import annotations

import gzip
import io
import json
import subprocess
import sys
import tarfile
import time

import pytest

from conftest import FAKE_PNG, VERIFY, SiteProject, base_env, build_output, figure_name, make_site_project
from verified_triton.core.kit import Check, Figure
from verified_triton.core.limits import LIMITS

pytestmark = pytest.mark.integration

PAGE = "---\nlesson: plain\n---\n\n# Plain\n\n::status\n\n::checks\n\n::figures\n"


@pytest.fixture
def site(tmp_path) -> SiteProject:
    project = make_site_project(tmp_path / "repo")
    project.add_lesson("plain", PAGE)
    return project


def import_measured(project: SiteProject, bundle) -> tuple[subprocess.CompletedProcess, float, int]:
    """Run `verify.py --import` in a fresh process; (result, seconds, its peak memory in MiB)."""
    probe = ("import resource, subprocess, sys, time\n"
             "t = time.monotonic()\n"
             "r = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
             "sys.stdout.write(r.stdout); sys.stderr.write(r.stderr)\n"
             "print(f'@@ {r.returncode} {time.monotonic() - t} '\n"
             "      f'{resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024}')\n")
    command = [sys.executable, "-c", probe, sys.executable, str(VERIFY), "--code-dir", str(project.code),
               "--evidence-dir", str(project.evidence), "--import", str(bundle)]
    result = subprocess.run(command, capture_output=True, text=True, env=base_env(), timeout=300)
    last = result.stdout.rstrip("\n").rsplit("\n", 1)[-1]
    code, seconds, mib = last.split()[1:]
    result.returncode = int(code)
    return result, float(seconds), int(mib)


def tar_header(name: str, size: int) -> bytes:
    info = tarfile.TarInfo(name)
    info.size = size
    return info.tobuf(format=tarfile.GNU_FORMAT)


def test_a_bundle_that_expands_past_the_total_limit_is_refused_quickly_in_bounded_memory(site, tmp_path):
    """A gzip bomb: ~1 MB on disk, more than LIMITS.bundle_total once decompressed."""
    member = 7 * 1024 * 1024
    count = LIMITS.bundle_total // member + 4
    zeros = gzip.compress(b"\0" * member, compresslevel=9)  # gzip members concatenate into one stream
    bundle = tmp_path / "bomb.tar.gz"
    with open(bundle, "wb") as f:
        for i in range(count):
            f.write(gzip.compress(tar_header(f"junk/part-{i:03d}.bin", member)))
            f.write(zeros)
        f.write(gzip.compress(b"\0" * 1024))
    assert bundle.stat().st_size < 2_000_000
    result, seconds, mib = import_measured(site, bundle)
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"{bundle}: more than {LIMITS.bundle_total:,} bytes uncompressed; refused whole" in result.stderr
    assert "Traceback" not in result.stderr
    assert mib < 200, f"the import held {mib} MiB: the bundle was read into memory"
    assert seconds < 60
    assert site.files() == {}


@pytest.mark.parametrize("name", ["plain/interpreter.json", "plain/interpreter/plot.png"])
def test_a_member_whose_header_claims_gigabytes_is_refused_unread(site, tmp_path, name):
    bundle = tmp_path / "liar.tar.gz"
    claimed = 4 * 1024**3
    bundle.write_bytes(gzip.compress(tar_header(name, claimed) + b"{}" + b"\0" * 510))
    result, seconds, mib = import_measured(site, bundle)
    assert result.returncode == 1
    assert f"{bundle}:{name}: {claimed:,} bytes, over the limit of {LIMITS.bundle_member:,}; the bundle is " \
           "refused whole" in result.stderr
    assert "Traceback" not in result.stderr and seconds < 30 and mib < 200


def record_with_figure(site: SiteProject, data: bytes):
    name = figure_name("plot", data)
    return site.make_record("plain", checks=[Check("c", "pass")], figures=[Figure("plot", name)]), name


def test_a_huge_figure_is_refused_by_the_build_the_import_and_the_run(site, tmp_path):
    big = FAKE_PNG + b"\0" * (LIMITS.figure + 1)
    record, name = record_with_figure(site, big)
    site.write(record, {name: big})
    build = site.build()
    assert build.returncode != 0
    path = site.evidence / "plain" / "interpreter" / name
    assert f"{path}: {len(big):,} bytes, over the limit of {LIMITS.figure:,}" in build_output(build)
    assert "Traceback" not in build_output(build)
    assert not (site.site / "evidence").exists()

    bundle = tmp_path / "big.tar.gz"
    with tarfile.open(bundle, "w:gz") as tar:
        for member, data in (("plain/interpreter.json", record.to_json().encode()),
                             (f"plain/interpreter/{name}", big)):
            info = tarfile.TarInfo(member)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    (site.evidence / "plain").rename(tmp_path / "moved")
    imported = site.verify("--import", str(bundle))
    assert imported.returncode == 1
    assert f"{bundle}:plain/interpreter/{name}: not a PNG within {LIMITS.figure:,} bytes; refused" in imported.stderr
    assert site.files() == {}


def test_a_lesson_that_draws_a_huge_figure_fails_its_run(site):
    from conftest import KIT_PRELUDE

    main = site.code / "plain" / "plain.py"
    main.write_text(KIT_PRELUDE + "\nlesson = Lesson('plain')\n"
                    f"figure(lesson, 'big', data=PNG + bytes({LIMITS.figure}))\nsys.exit(lesson.finish())\n")
    result = site.verify("--mode", "interpreter")
    assert result.returncode == 1
    record = site.record("plain")
    assert record.outcome == "failed" and record.figures == []
    assert f"figure 'big': {LIMITS.figure + len(FAKE_PNG):,} bytes, over the limit of {LIMITS.figure:,}" \
        in record.reason
    assert not (site.evidence / "plain" / "interpreter").exists()


def test_a_record_with_fifty_thousand_checks_is_refused_quickly(site, tmp_path):
    raw = json.loads(site.make_record("plain").to_json())
    raw["checks"] = [{"name": f"c{i}", "status": "pass", "message": "x" * 20} for i in range(50_000)]
    data = json.dumps(raw).encode()
    assert len(data) < LIMITS.record_json  # under the size limit: the count limit must catch it
    path = site.record_file("plain")
    path.parent.mkdir(parents=True)
    path.write_bytes(data)
    expect = f"{path}: checks: 50,000 items, over the limit of {LIMITS.checks:,}"
    t0 = time.monotonic()
    status = site.verify("--status")
    assert status.returncode == 0 and expect in status.stdout
    build = site.build()
    elapsed = time.monotonic() - t0
    assert build.returncode != 0 and expect in build_output(build)
    assert elapsed < 60, f"refusing took {elapsed:.1f} s"
    assert not (site.site / "lessons").exists()


def test_a_record_past_the_size_limit_is_not_read(site):
    path = site.record_file("plain")
    path.parent.mkdir(parents=True)
    with open(path, "wb") as f:
        f.write(b'{"format_version": 2, "stdout": "')
        f.write(b"x" * LIMITS.record_json)
        f.write(b'"}')
    status = site.verify("--status")
    assert f"{path}: {path.stat().st_size:,} bytes, over the limit of {LIMITS.record_json:,}" in status.stdout


def test_a_results_file_past_the_limit_fails_the_run_not_verify(site):
    main = site.code / "plain" / "plain.py"
    main.write_text("import os\n"
                    "with open(os.environ['VT_RESULTS'], 'wb') as f:\n"
                    f"    f.write(b'{{\"lesson\": \"' + b'x' * {LIMITS.results_json} + b'\"}}')\n")
    result = site.verify("--mode", "interpreter")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    record = site.record("plain")
    assert record.outcome == "failed"
    assert "results file is malformed" in record.reason and f"over the limit of {LIMITS.results_json:,}" \
        in record.reason


def test_a_lesson_source_past_the_limit_is_an_error_naming_it(site):
    main = site.code / "plain" / "plain.py"
    main.write_text(main.read_text() + "#" * LIMITS.source_file + "\n")
    status = site.verify("--status")
    assert status.returncode == 2 and f"error: {main}: " in status.stderr
    assert f"over the limit of {LIMITS.source_file:,}" in status.stderr and "Traceback" not in status.stderr
