"""Running the real ``studio`` console script as a subprocess against a given database."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support import warm_cli

STUDIO = Path(sys.executable).with_name("studio")


def studio(url: str, *args: str, stdin: str | None = None,
           env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("STUDIO_")}
    environment.update({"STUDIO_DATABASE_URL": url, **(env or {})})
    return warm_cli.run([str(STUDIO), *args], env=environment, input=stdin,
                        capture_output=True, text=True, check=False, timeout=120)
