"""The hook in ``tests/conftest.py``: under ``CI`` (``1``, ``true`` or ``yes``) any skip fails,
whichever way it was raised; off CI the same tests skip (the control). Run in a child pytest that
loads only that conftest as a plugin, on a file of skipping tests written here."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SKIPPING = '''
import pytest

def test_calls_skip():
    pytest.skip("no widget here")

@pytest.mark.skip(reason="marked")
def test_marked():
    pass

@pytest.mark.skipif(True, reason="conditional")
def test_marked_if():
    pass

@pytest.fixture
def needs_widget():
    pytest.skip("fixture has no widget")

def test_fixture_skips(needs_widget):
    pass

@pytest.mark.xfail(reason="expected", strict=True)
def test_expected_failure():
    assert False

def test_passes():
    pass
'''
MODULE_SKIP = 'import pytest\npytest.skip("whole module", allow_module_level=True)\n'


def _pytest(tmp_path: Path, ci: str | None) -> str:
    (tmp_path / "test_skipping.py").write_text(SKIPPING)
    (tmp_path / "test_module_skip.py").write_text(MODULE_SKIP)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci is not None:
        env["CI"] = ci
    env["PYTHONPATH"] = str(REPO)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "tests.conftest", "-p", "no:cacheprovider",
         "--continue-on-collection-errors", "-c", os.devnull, "--rootdir", str(tmp_path),
         str(tmp_path)],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    return done.stdout.splitlines()[-1]


def _counts(summary: str) -> dict[str, int]:
    """``4 failed, 1 passed, 1 error in 0.1s`` as ``{"failed": 4, "passed": 1, "error": 1}``."""
    return {word.rstrip("s") if word.startswith("error") else word: int(number)
            for number, word in re.findall(r"(\d+) ([a-z]+)", summary.split(" in ")[0])}


@pytest.mark.parametrize("ci", ["true", "1"])
def test_every_skip_fails_under_ci(tmp_path: Path, ci: str) -> None:
    summary = _pytest(tmp_path, ci)
    # a skip in the test's body fails it; one in its setup (a mark, a fixture) or while the
    # module is collected is reported as an error: neither is a pass, none is a skip
    assert _counts(summary) == {"failed": 1, "error": 4, "passed": 1, "xfailed": 1}, summary


@pytest.mark.parametrize("ci", [None, "false"])
def test_control_off_ci_the_same_tests_skip(tmp_path: Path, ci: str | None) -> None:
    summary = _pytest(tmp_path, ci)
    assert _counts(summary) == {"skipped": 5, "passed": 1, "xfailed": 1}, summary
