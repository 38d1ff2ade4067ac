"""The Landlock rules do not depend on what another ctypes call of the thread left in errno.

The ``landlock`` package reads ``ctypes.get_errno()`` after ``landlock_create_ruleset`` even when
the call succeeded; a stale value (here EISDIR, as left by an earlier failed call of any module)
made every later sandbox selection of the process fail (found when the suite first ran on
pytest-xdist workers, whose test order differs from the serial run).
"""

from __future__ import annotations

import ctypes
import errno
from pathlib import Path

from services.execution.sandbox import landlock
from services.execution.sandbox.landlock_abi import abi_version


def test_a_stale_errno_does_not_fail_the_rules(tmp_path: Path) -> None:
    assert abi_version() >= 1, "this kernel has no Landlock"
    landlock._rights.cache_clear()
    ctypes.set_errno(errno.EISDIR)
    rules = landlock.build_rules(tmp_path, {"HOME": str(tmp_path), "TMPDIR": str(tmp_path)})
    assert rules  # the workspace at least
