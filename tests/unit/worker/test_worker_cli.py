"""``studio worker`` without a broker refuses to start (executions then run in process)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tests.support import warm_cli


def test_studio_worker_needs_a_broker(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STUDIO_")}
    env.update(STUDIO_DATA_DIR=str(tmp_path), HOME=str(tmp_path))
    done = warm_cli.run([sys.executable, "-m", "services.cli", "worker"], env=env,
                        capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2, done.stderr
    assert "studio worker needs a broker: set STUDIO_BROKER_URL" in done.stderr
    assert done.stdout == ""


def test_studio_worker_refuses_an_unknown_log_level(tmp_path: Path) -> None:
    """Celery's command line used to refuse it (with a traceback); the worker now starts Celery's
    worker itself, and refuses it first: one line, exit 2, nothing started."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STUDIO_")}
    env.update(STUDIO_DATA_DIR=str(tmp_path), HOME=str(tmp_path),
               STUDIO_BROKER_URL="redis://127.0.0.1:1/0")  # never reached
    done = warm_cli.run([sys.executable, "-m", "services.cli", "worker", "--loglevel", "loud"],
                        env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2, done.stderr
    assert done.stderr == ("studio worker: --loglevel 'loud' is not one of DEBUG, INFO, WARNING, "
                           "ERROR, CRITICAL, FATAL\n")
