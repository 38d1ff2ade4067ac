"""Where the suite's time goes, while it runs: with ``STUDIO_TEST_TIMINGS=FILE`` every test
appends one line ``worker<TAB>start<TAB>end<TAB>node id<TAB>outcome<TAB>cpu<TAB>children cpu``
(wall-clock seconds, setup to teardown; then the CPU seconds the xdist worker process spent in
it, and those of the child processes it reaped meanwhile: the servers, workers and ``studio``
commands the test started, those forked by the warm CLI launcher's zygote included, whose CPU
time the zygote reports as it reaps them, :func:`tests.support.warm_cli.children_cpu`) to FILE
as it finishes, so a run still going, or one stopped, can be read (``scripts/test_timings.py``
sums them per module and per xdist worker).
Off by default; no effect on what a test asserts.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Generator
from pathlib import Path

import pytest

from tests.support.warm_cli import children_cpu

TIMINGS_VARIABLE = "STUDIO_TEST_TIMINGS"
PROJECT_ROOT = Path(__file__).resolve().parent.parent
_failed: set[str] = set()  # node ids of this process's tests with a failed phase


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.failed:
        _failed.add(report.nodeid)


def _cpu() -> tuple[float, float]:
    """User plus system CPU seconds of this process and of its reaped children so far (those
    the warm CLI launcher's zygote reaped for it included)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime + children_cpu()


def _worker_name(config: pytest.Config) -> str:
    workerinput = getattr(config, "workerinput", None)
    return str(workerinput["workerid"]) if workerinput else "main"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item,
                            nextitem: pytest.Item | None) -> Generator[None, object, object]:
    path = os.environ.get(TIMINGS_VARIABLE)
    start = time.time()
    own, children = _cpu()
    result = yield
    if path and item.config.rootpath == PROJECT_ROOT:  # not the pytest runs a test starts
        outcome = "failed" if item.nodeid in _failed else "done"
        own_after, children_after = _cpu()
        line = (f"{_worker_name(item.config)}\t{start:.3f}\t{time.time():.3f}\t{item.nodeid}"
                f"\t{outcome}\t{own_after - own:.3f}\t{children_after - children:.3f}\n")
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())  # one short write per line: appends do not interleave
        finally:
            os.close(fd)
    return result
