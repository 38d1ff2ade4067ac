"""Runs the conformance table inside a loopback-only network namespace (``unshare -n``).

The table itself (``test_table.py``) is collected only inside the namespace; this test starts it
there in a child pytest and asserts it passed. Root gets a plain ``unshare -n``; anyone else a
user namespace too (``unshare -rn``). Never skipped: without ``unshare`` it fails.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
TABLE_TIMEOUT_S = 240


@pytest.mark.timeout(TABLE_TIMEOUT_S + 30)
def test_conformance_in_loopback_namespace(tmp_path: Path) -> None:
    unshare = shutil.which("unshare")
    assert unshare is not None, "util-linux unshare is required for the conformance table"
    flags = "-n" if os.geteuid() == 0 else "-rn"
    report = tmp_path / "junit.xml"
    argv = [unshare, flags, sys.executable, "-m", "tests.integration.conformance.netns",
            sys.executable, "-m", "pytest", str(HERE), "-q", "-p", "no:cacheprovider",
            f"--junitxml={report}", f"--basetemp={tmp_path / 'table'}"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("STUDIO_IN_NETNS", None)  # set by the netns helper, not inherited
    proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=TABLE_TIMEOUT_S, check=False)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    junit = report.read_text()
    assert 'failures="0"' in junit and 'errors="0"' in junit and 'skipped="0"' in junit, output
    assert "test_only_loopback_is_reachable" in junit  # isolation was proven in there
    assert "provider_500_then_success-claude" in junit, output
