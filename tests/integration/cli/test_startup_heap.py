"""The ``studio`` program freezes its start-up heap; ``main(argv)`` called by a test does not."""

from __future__ import annotations

import contextlib
import gc
import io
import subprocess
import sys

import pytest

from services.cli.main import main

FREEZE_COUNT_AFTER_MAIN = """
import gc, sys
sys.argv = ["studio", "--help"]
from services.cli.main import main
try:
    main()
finally:
    print(gc.get_freeze_count(), file=sys.stderr)
"""


def test_the_program_freezes_its_start_up_heap() -> None:
    done = subprocess.run([sys.executable, "-c", FREEZE_COUNT_AFTER_MAIN], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "Commands" in done.stdout  # the help page was printed
    assert int(done.stderr.strip().splitlines()[-1]) > 10_000


def test_main_with_arguments_freezes_nothing() -> None:
    """Positive control: the same help page, run in this process with argv, leaves the heap
    as it was."""
    before = gc.get_freeze_count()
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0 and "Commands" in out.getvalue()
    assert gc.get_freeze_count() == before
