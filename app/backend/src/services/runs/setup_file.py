"""The repository's own setup commands: ``.studio/setup.json`` at the top of its tree.

The file is hostile input (anyone who can push to the repository writes it), read from the
freshly provisioned workspace before any command runs::

    {"commands": ["python3 -m pip install --target .deps -r requirements.txt"]}

Rules: ``.studio`` and ``setup.json`` must be a real directory and a regular file (a symlink is
refused, never followed), at most :data:`MAX_FILE_BYTES`; UTF-8 JSON, an object whose only key
is ``commands``, a list of command lines as for an execution's own ``setup``
(:func:`~services.runs.setup_request.check_setup_commands`). A repository cannot widen the
network: its hosts come from the deployment and the execution only. A file that breaks a rule
ends the execution with ``setup_failed`` and says which rule.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from services.execution.errors import ConfigError, ErrorCode, ExecutionError
from services.runs.setup_request import check_setup_commands

SETUP_FILE = ".studio/setup.json"
MAX_FILE_BYTES = 64 * 1024


def _refused(message: str) -> ExecutionError:
    return ExecutionError(f"{SETUP_FILE}: {message}", code=ErrorCode.SETUP_FAILED,
                          details={"file": SETUP_FILE})


def repository_setup_commands(workspace: Path) -> list[str]:
    """The commands of the workspace's ``.studio/setup.json``; none when there is no file."""
    directory = workspace / ".studio"
    try:
        if not stat.S_ISDIR(os.lstat(directory).st_mode):
            raise _refused("'.studio' is not a directory")
        found = os.lstat(directory / "setup.json")
    except FileNotFoundError:
        return []
    if not stat.S_ISREG(found.st_mode):
        raise _refused("not a regular file")
    if found.st_size > MAX_FILE_BYTES:
        raise _refused(f"larger than {MAX_FILE_BYTES} bytes")
    fd = os.open(directory / "setup.json", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as handle:
        raw = handle.read(MAX_FILE_BYTES + 1)
    if len(raw) > MAX_FILE_BYTES:
        raise _refused(f"larger than {MAX_FILE_BYTES} bytes")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise _refused("not UTF-8 JSON") from None
    if not isinstance(data, dict) or set(data) != {"commands"}:
        raise _refused('a JSON object with exactly one key, "commands", is expected')
    try:
        return check_setup_commands(data["commands"], "commands")
    except ConfigError as exc:
        raise _refused(exc.message) from None
