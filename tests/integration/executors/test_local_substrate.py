"""The local substrate with real processes: environment, process group, cancel, parent death.

``studio_argv`` is replaced by small Python programs (``python -c CODE``), so each test sees the
argv the substrate appends (``execute <id>``) and controls how the "executor" behaves.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from services.execution.errors import SubstrateError
from services.executors.base import Handle, Substrate, SubstrateStatus
from services.executors.local import LocalSubstrate, executor_environment

EXECUTION_ID = "3d6f0b9e-0000-4000-8000-000000000001"
PATIENCE_S = 30.0
BASE_ENV = {"PATH": os.environ["PATH"], "LC_ALL": "C.UTF-8"}

# An executor that records its argv, environment and pid, starts two grandchildren (one in its
# process group, one in a session of its own, as the command domain does), then sleeps.
FAMILY = textwrap.dedent(
    """
    import json, os, subprocess, sys, time
    out = os.environ["OUT"]
    sleeper = [sys.executable, "-c", "import time; time.sleep(120)"]
    same_group = subprocess.Popen(sleeper)
    own_session = subprocess.Popen(sleeper, start_new_session=True)
    info = {"argv": sys.argv[1:], "env": dict(os.environ), "pid": os.getpid(),
            "pgid": os.getpgid(0), "children": [same_group.pid, own_session.pid]}
    with open(out + ".tmp", "w") as f:
        json.dump(info, f)
    os.rename(out + ".tmp", out)
    time.sleep(120)
    """
)


def alive(pid: int) -> bool:
    """Running or sleeping; a zombie counts as dead (it is only waiting to be reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"


def wait_for(predicate: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + PATIENCE_S
    while not predicate():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.02)


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


@pytest.fixture
def launched() -> Iterator[list[tuple[LocalSubstrate, Handle]]]:
    """Whatever a test launched is cancelled afterwards, whatever the test's outcome."""
    handles: list[tuple[LocalSubstrate, Handle]] = []
    yield handles
    for substrate, handle in handles:
        substrate.cancel(handle)


def start_family(
    tmp_path: Path, launched: list[tuple[LocalSubstrate, Handle]], **env: str
) -> tuple[LocalSubstrate, Handle, dict[str, Any]]:
    out = tmp_path / "family.json"
    substrate = LocalSubstrate(
        studio_argv=python(FAMILY), env={**BASE_ENV, "OUT": str(out), **env}, cancel_grace_s=5
    )
    handle = substrate.launch(EXECUTION_ID)
    launched.append((substrate, handle))
    wait_for(out.exists, "the executor to start its children")
    return substrate, handle, json.loads(out.read_text())


def test_is_a_substrate() -> None:
    substrate = LocalSubstrate(env=BASE_ENV)
    assert isinstance(substrate, Substrate)
    assert substrate.name == "local"
    assert substrate.argv_for("x")[-3:] == ["services.cli", "execute", "x"]


def test_child_gets_execute_argv_and_exactly_the_given_environment(
    tmp_path: Path, launched: list[tuple[LocalSubstrate, Handle]]
) -> None:
    os.environ["STUDIO_TEST_PARENT_ONLY"] = "must-not-leak"
    try:
        substrate, handle, info = start_family(tmp_path, launched, STUDIO_DATABASE_URL="sqlite://")
    finally:
        del os.environ["STUDIO_TEST_PARENT_ONLY"]
    assert info["argv"] == ["execute", EXECUTION_ID]
    assert info["env"] == {**BASE_ENV, "OUT": str(tmp_path / "family.json"),
                           "STUDIO_DATABASE_URL": "sqlite://"}
    assert handle == Handle("local", EXECUTION_ID, str(info["pid"]))
    assert info["pgid"] == info["pid"]  # leads its own process group
    assert substrate.status(handle) is SubstrateStatus.RUNNING


def test_cancel_kills_the_group_and_every_descendant(
    tmp_path: Path, launched: list[tuple[LocalSubstrate, Handle]]
) -> None:
    substrate, handle, info = start_family(tmp_path, launched)
    family = [info["pid"], *info["children"]]
    assert all(alive(pid) for pid in family)

    substrate.cancel(handle)

    wait_for(lambda: not any(alive(pid) for pid in family), "the whole family to die")
    assert substrate.status(handle) is SubstrateStatus.FAILED
    substrate.cancel(handle)  # again: a no-op


def test_relaunch_while_running_returns_the_running_process(
    tmp_path: Path, launched: list[tuple[LocalSubstrate, Handle]]
) -> None:
    substrate, handle, _ = start_family(tmp_path, launched)
    assert substrate.launch(EXECUTION_ID) == handle


@pytest.mark.parametrize(
    ("code", "expected"),
    [("raise SystemExit(0)", SubstrateStatus.SUCCEEDED),
     ("raise SystemExit(3)", SubstrateStatus.FAILED),
     ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", SubstrateStatus.FAILED)],
)
def test_wait_reports_how_the_process_ended(code: str, expected: SubstrateStatus) -> None:
    substrate = LocalSubstrate(studio_argv=python(code), env=BASE_ENV)
    handle = substrate.launch(EXECUTION_ID)
    assert substrate.wait(handle, timeout=PATIENCE_S) is expected
    assert substrate.status(handle) is expected


def test_wait_times_out_on_a_running_process(
    launched: list[tuple[LocalSubstrate, Handle]],
) -> None:
    substrate = LocalSubstrate(studio_argv=python("import time; time.sleep(60)"), env=BASE_ENV)
    handle = substrate.launch(EXECUTION_ID)
    launched.append((substrate, handle))
    assert substrate.wait(handle, timeout=0.2) is SubstrateStatus.RUNNING


def test_a_handle_from_elsewhere_is_unknown_and_cancel_leaves_it_alone() -> None:
    bystander = subprocess.Popen(python("import time; time.sleep(60)"), start_new_session=True)
    try:
        substrate = LocalSubstrate(env=BASE_ENV)
        handle = Handle("local", EXECUTION_ID, str(bystander.pid))
        assert substrate.status(handle) is SubstrateStatus.UNKNOWN
        assert substrate.wait(handle, timeout=0.1) is SubstrateStatus.UNKNOWN
        substrate.cancel(handle)
        assert alive(bystander.pid)
        with pytest.raises(SubstrateError):
            substrate.status(Handle("kubernetes", EXECUTION_ID, "studio-exec-x", "ns"))
    finally:
        bystander.kill()
        bystander.wait()


def test_a_missing_executable_is_a_substrate_error(tmp_path: Path) -> None:
    substrate = LocalSubstrate(studio_argv=[str(tmp_path / "no-such-studio")], env=BASE_ENV)
    with pytest.raises(SubstrateError) as caught:
        substrate.launch(EXECUTION_ID)
    assert caught.value.details["reason"] == "spawn_failed"


def test_log_dir_collects_the_executor_output(tmp_path: Path) -> None:
    code = "import sys; print('to stdout'); print('to stderr', file=sys.stderr)"
    substrate = LocalSubstrate(studio_argv=python(code), env=BASE_ENV, log_dir=tmp_path / "logs")
    handle = substrate.launch(EXECUTION_ID)
    assert substrate.wait(handle, timeout=PATIENCE_S) is SubstrateStatus.SUCCEEDED
    logged = (tmp_path / "logs" / f"{EXECUTION_ID}.log").read_text()
    assert "to stdout" in logged and "to stderr" in logged


# A parent that launches an executor (through LocalSubstrate, or a plain Popen for the control
# case), reports the executor's pid, and waits to be killed.
PARENT = textwrap.dedent(
    """
    import subprocess, sys, time
    from services.executors.local import LocalSubstrate
    sleeper = [sys.executable, "-c", "import time; time.sleep(120)"]
    if sys.argv[1] == "substrate":
        substrate = LocalSubstrate(studio_argv=sleeper, env={"PATH": "/usr/bin:/bin"})
        pid = int(substrate.launch("orphan-test").ref)
    else:
        pid = subprocess.Popen(sleeper, start_new_session=True).pid
    print(pid, flush=True)
    time.sleep(120)
    """
)


def run_parent_and_kill_it(how: str) -> int:
    """Start the parent, SIGKILL it once its executor runs; the executor's pid."""
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, how],
        stdout=subprocess.PIPE,
        text=True,
        env={**BASE_ENV, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert alive(child)
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    return child


def test_the_executor_dies_when_its_parent_dies() -> None:
    child = run_parent_and_kill_it("substrate")
    wait_for(lambda: not alive(child), "the orphaned executor to die")


def test_control_a_plain_child_outlives_its_parent() -> None:
    """Without the parent-death signal the same child survives: the test above can fail."""
    child = run_parent_and_kill_it("plain")
    try:
        time.sleep(0.5)
        assert alive(child)
    finally:
        os.kill(child, signal.SIGKILL)


def test_executor_environment_keeps_the_allowlist_only() -> None:
    source = {
        "PATH": "/usr/bin", "HOME": "/home/u", "LANG": "C.UTF-8",
        "STUDIO_DATABASE_URL": "postgresql://db", "STUDIO_GITHUB_TOKEN": "t",
        "OPENAI_API_KEY": "k", "ANTHROPIC_BASE_URL": "http://127.0.0.1:1",
        "SSH_AUTH_SOCK": "/tmp/agent", "KUBECONFIG": "/root/.kube/config",
        "AWS_PROFILE": "admin", "PYTHONPATH": "/x", "MY_APP_SECRET": "s",
    }
    kept = executor_environment(source)
    assert set(kept) == {"PATH", "HOME", "LANG", "STUDIO_DATABASE_URL", "STUDIO_GITHUB_TOKEN",
                         "OPENAI_API_KEY", "ANTHROPIC_BASE_URL"}
    assert executor_environment(source, extra_names=["AWS_PROFILE"])["AWS_PROFILE"] == "admin"
