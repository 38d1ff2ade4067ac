"""The interpreter started inside a sandbox must be one the sandbox can see.

A checkout under ``/tmp`` (a CI clone) has its venv where the sandbox mounts a fresh ``/tmp``:
the venv's ``bin/python`` is not visible there, the base installation's is."""

from __future__ import annotations

import os
from pathlib import Path

from services.execution.sandbox.layout import SYSTEM_DIRS, sandbox_python, toolchain_dirs


def test_the_sandbox_python_is_the_base_installation_resolved() -> None:
    python = Path(sandbox_python())
    assert python.is_file() and os.access(python, os.X_OK)
    assert os.path.realpath(python) == str(python)  # no symlink into a venv
    visible = [Path(d) for d in SYSTEM_DIRS] + [p for p in toolchain_dirs()
                                                if Path("/tmp") not in [p, *p.parents]]
    assert any(root in python.parents for root in visible), python
    assert Path("/tmp") not in python.parents
