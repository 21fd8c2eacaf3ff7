"""The three tiers every test belongs to, exactly one each (pyproject.toml registers them):

- unit:        in process: no subprocess, site build, browser or notebook kernel;
- integration: subprocesses on small fake projects, the one real site build of the run;
- e2e:         a browser, nbclient notebooks, the lessons' archives, `verify --compare`: the course's own
               lessons run whole (their archives, notebooks, smoke runs), or its pages in Chromium.

`bash tools/dev.sh test fast` runs `-m "not e2e"` in parallel; `bash tools/dev.sh test` runs all three.
A test file whose tests are all of one kind says so once, `pytestmark = pytest.mark.unit`; a file that
mixes kinds marks each test. conftest.py imports the hook below, so a test with no tier, or with two,
stops the collection with its name (tests/test_tiers.py shows it).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

TIERS = ("unit", "integration", "e2e")


def tiers_of(item: pytest.Item) -> list[str]:
    """The tier marks on `item` (its own, its class's and its module's), each named once."""
    return sorted({mark.name for mark in item.iter_markers() if mark.name in TIERS})


def untiered(items: list[pytest.Item]) -> list[str]:
    """One line for each test that has no tier, or more than one."""
    problems = []
    for item in items:
        found = tiers_of(item)
        if len(found) != 1:
            problems.append(f"  {item.nodeid}: " + ("no tier" if not found else "tiers " + " and ".join(found)))
    return problems


def _items(nodes) -> Iterator[pytest.Item]:
    """The tests among `nodes`, those inside a class too (a class is collected after its module is)."""
    for node in nodes:
        if isinstance(node, pytest.Item):
            yield node
        elif isinstance(node, pytest.Class):
            yield from _items(node.collect())


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector):
    """A module holding a test without exactly one tier fails to collect, naming the test: pytest
    stops before running anything (under xdist the other modules still run, and the run fails)."""
    report = yield
    if report.passed and isinstance(collector, pytest.Module):
        problems = untiered(list(_items(report.result)))
        if problems:
            report.outcome = "failed"
            report.longrepr = (f"{len(problems)} test(s) without exactly one tier (unit, integration or e2e; "
                               "tests/tiers.py):\n" + "\n".join(problems)
                               + "\nMark the file (pytestmark = pytest.mark.unit) or each test "
                               "(@pytest.mark.integration).")
    return report
