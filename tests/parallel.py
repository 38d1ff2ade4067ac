"""How the suite shares the machine when it runs in parallel (pytest-xdist, ``--dist loadgroup``).

Hooks and fixtures of :mod:`tests.conftest` (it re-exports them); no effect on a serial run
except the ``xdist_group`` marks, which only xdist reads.

* :data:`HEAVY_MODULES`: the slowest end-to-end modules (the chaos test and its soak scenario,
  Kubernetes end to end, the legacy CLIs end to end) form two groups of about equal length, so
  two workers run them one after another while the other worker takes the rest of the suite:
  they never all start at once and starve the light tests of the two cores, and neither group
  alone outlasts the rest of the suite.
* A module whose tests share a module- (or class-, package-) scoped fixture, such as the running
  ``studio api`` of :func:`tests.integration.conftest.api`, is a group of its own, so that
  fixture starts once rather than once per worker.
* :func:`worker_temp_dir`: each xdist worker gets a ``TMPDIR`` of its own (under its own
  ``--basetemp``), so ``tempfile`` and the default workspace root (``$TMPDIR/studio-workspaces``)
  of the worker and of every process it starts are private to it.

Every other shared resource is already per test: PostgreSQL databases have random names
(:mod:`tests.integration.databases`), each ``redis_broker`` claims a Redis database index of its
own with ``SET NX`` (:func:`tests.integration.celery_fixtures.claimed_broker`), servers listen on
port 0, and process scans in ``/proc`` look for a nonce or an execution id of the test's own.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Generator, Iterator

import pytest
from _pytest.nodeid import NodeId

HEAVY_GROUP = "heavy-end-to-end"
HEAVY_GROUPS = (f"{HEAVY_GROUP}-1", f"{HEAVY_GROUP}-2")
# Two groups of about equal length (test-seconds of one run, docs/sphinx/testing.rst), so two
# workers take them while the third takes the light tests. The chaos tests share one group (they
# never run at once), and so do the legacy CLI modules (the exfiltration witness binds a fixed
# port).
HEAVY_MODULES: dict[str, str] = {
    "tests/integration/test_chaos.py": HEAVY_GROUPS[0],
    "tests/integration/worker/test_chaos.py": HEAVY_GROUPS[0],
    "tests/integration/triggers/test_github_triggers.py": HEAVY_GROUPS[0],  # an api, workers
    "tests/e2e/test_legacy_claude.py": HEAVY_GROUPS[0],
    "tests/e2e/test_legacy_codex.py": HEAVY_GROUPS[0],
    "tests/e2e/test_legacy_gemini.py": HEAVY_GROUPS[0],
    "tests/e2e/test_legacy_exfiltration.py": HEAVY_GROUPS[0],  # its witness binds the relay port
    "tests/e2e/test_legacy_guards.py": HEAVY_GROUPS[0],
    "tests/e2e/test_kubernetes_executor.py": HEAVY_GROUPS[1],
    "tests/integration/worker/test_team_fair_share.py": HEAVY_GROUPS[1],  # two APIs, 21 runs
    "tests/integration/api/test_team_isolation.py": HEAVY_GROUPS[1],  # two APIs, the OpenAPI walk
    "tests/integration/evals/test_builtin_suite.py": HEAVY_GROUPS[1],  # eleven executions
    "tests/integration/worker/test_retries_worker.py": HEAVY_GROUPS[1],  # ~2 minutes per database
}
SHARED_SCOPES = frozenset({"module", "class", "package"})


def is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def _module_path(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


def _shares_a_fixture(item: pytest.Item) -> bool:
    """Whether the test uses a fixture set up once for several tests of its module."""
    info = getattr(item, "_fixtureinfo", None)
    definitions = getattr(info, "name2fixturedefs", {})
    return any(defs and defs[-1].scope in SHARED_SCOPES for defs in definitions.values())


def group_of(item: pytest.Item) -> str | None:
    """The ``xdist_group`` a test is sent in, or ``None`` (then it goes to any worker)."""
    module = _module_path(item)
    if module in HEAVY_MODULES:
        return HEAVY_MODULES[module]
    if _shares_a_fixture(item):
        return module
    return None


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config: pytest.Config,
                                  items: list[pytest.Item]) -> Generator[None, None, None]:
    """Mark each test's group before xdist reads the marks (``--dist loadgroup``); afterwards,
    on a worker, make sure each grouped test's id carries its ``@group`` suffix, which is all
    the scheduler sees: pytest-xdist 3.8 writes ``item._nodeid``, which pytest 9.2 no longer
    reads (its id lives in ``item._id``), so without this every group would silently fall apart.
    """
    for item in items:
        if item.get_closest_marker("xdist_group") is None and (name := group_of(item)):
            item.add_marker(pytest.mark.xdist_group(name))
    result = yield
    if is_xdist_worker(config) and config.getvalue("loadgroup"):
        for item in items:
            _suffix_the_group(item)
    return result


def _suffix_the_group(item: pytest.Item) -> None:
    names = sorted({str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
                    for mark in item.iter_markers("xdist_group")})
    if not names or item.nodeid.rfind("@") > item.nodeid.rfind("]"):
        return  # not grouped, or xdist did it
    nodeid = f"{item.nodeid}@{'_'.join(names)}"
    item._id = NodeId.parse(nodeid)
    if item.nodeid != nodeid:
        raise pytest.UsageError(f"cannot put {item.nodeid} in its xdist group {names}")


@pytest.fixture(scope="session", autouse=True)
def worker_temp_dir(request: pytest.FixtureRequest,
                    tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Under xdist, ``TMPDIR`` is a directory of this worker's own for the whole session."""
    if not is_xdist_worker(request.config):
        yield
        return
    before = os.environ.get("TMPDIR")
    path = tmp_path_factory.mktemp("tmp", numbered=False)
    os.environ["TMPDIR"] = str(path)
    tempfile.tempdir = None  # tempfile.gettempdir() reads TMPDIR again
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = before
        tempfile.tempdir = None
