"""Shared fixtures: a throw-away workspace and the tool context around it; and the one rule on
skips (:data:`IN_CI`): off CI a test may skip where this machine lacks something, under CI every
skip is turned into a failure here, whatever the test file did."""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from tests.parallel import pytest_collection_modifyitems, worker_temp_dir
from tests.timings import pytest_runtest_logreport, pytest_runtest_protocol

__all__ = ["IN_CI", "pytest_collection_modifyitems", "pytest_runtest_logreport",
           "pytest_runtest_protocol", "worker_temp_dir"]

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _skip_reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr)


def _fail_a_skip_under_ci(report: pytest.TestReport | pytest.CollectReport) -> None:
    if IN_CI and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"skipped under CI, where nothing may be: {_skip_reason(report)}"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item,
                              call: pytest.CallInfo[None]
                              ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Under CI a skipped test (``pytest.skip``, a ``skip``/``skipif`` mark) fails instead."""
    report = yield
    _fail_a_skip_under_ci(report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector
                               ) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    """Under CI a module skipped while collected (``allow_module_level``, ``importorskip``)
    fails instead."""
    report = yield
    _fail_a_skip_under_ci(report)
    return report


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[Path]:
    """An empty workspace directory, with a sibling ``outside`` directory holding a secret."""
    root = tmp_path / "ws"
    root.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("TOP-SECRET-OUTSIDE\n")
    yield root
