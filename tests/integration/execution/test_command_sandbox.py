"""command.run under the real sandboxes: bubblewrap (and Landlock where the kernel has it).

Nothing here is skipped in CI: without a working bubblewrap (installed by scripts/setup.sh) or
Landlock, these tests fail when ``CI`` is set, and are skipped only on a developer machine.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.execution.sandbox.selection import NoSandbox
from services.execution.tool_domains.context import ToolDomainContext
from tests.unit.execution.command_helpers import (
    command_context,
    gone,
    require_sandbox,
    run_command,
    sandbox_context,
    sleep_marker,
    watching_pids,
)

pytestmark = pytest.mark.sandbox

MiB = 1024 * 1024



@pytest.fixture(params=["bwrap", "bwrap-session"])
def bwrap_ctx(request: pytest.FixtureRequest, workspace: Path) -> Iterator[ToolDomainContext]:
    """A command per ``bwrap``, and the execution's long-lived one (issue 12)."""
    with sandbox_context(workspace, str(request.param)) as ctx:
        yield ctx


@pytest.fixture
def landlock_ctx(workspace: Path) -> ToolDomainContext:
    return command_context(workspace, require_sandbox("landlock"))


@pytest.fixture
def git_workspace(workspace: Path) -> Path:
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    return workspace


def _result(envelope: dict[str, Any], mode: str) -> dict[str, Any]:
    assert envelope["ok"] is True, envelope
    result: dict[str, Any] = envelope["result"]
    assert result["sandbox"] == mode
    return result


@pytest.fixture
def planted(workspace: Path) -> Iterator[list[tuple[Path, str]]]:
    """Files with a unique marker outside the workspace: a sibling, /tmp, /var/tmp, a home."""
    marker = f"PLANTED-{uuid.uuid4().hex}"
    home_dir = Path("/home") / f"studio-test-{uuid.uuid4().hex[:12]}"
    home_dir.mkdir(parents=True)
    places = [
        workspace.parent / "outside" / "planted.txt",
        Path("/tmp") / f"studio-test-{uuid.uuid4().hex}.txt",
        Path("/var/tmp") / f"studio-test-{uuid.uuid4().hex}.txt",
        Path.home() / f".studio-test-{uuid.uuid4().hex}.txt",
        home_dir / "secret.txt",
    ]
    for place in places:
        place.write_text(marker + "\n")
    yield [(place, marker) for place in places]
    for place in places:
        place.unlink(missing_ok=True)
    shutil.rmtree(home_dir, ignore_errors=True)


def test_files_outside_the_workspace_are_invisible(
    bwrap_ctx: ToolDomainContext, planted: list[tuple[Path, str]]
) -> None:
    for place, marker in planted:
        for script in (f"cat {place}", f"cat /proc/1/root{place}", f"head -c 100 {place}"):
            result = _result(run_command(bwrap_ctx, command=script), "bwrap")
            assert marker not in result["stdout"] + result["stderr"], script
            assert result["exit_code"] != 0, (script, result)
        listing = _result(run_command(bwrap_ctx, command=f"ls -la {place.parent}"), "bwrap")
        assert place.name not in listing["stdout"]


def test_the_control_reads_them_without_a_sandbox(
    workspace: Path, planted: list[tuple[Path, str]]
) -> None:
    """Proves the test above can fail: the same command without a sandbox sees the markers."""
    ctx = command_context(workspace, NoSandbox())
    place, marker = planted[1]
    result = _result(run_command(ctx, command=f"cat {place}"), "none")
    assert marker in result["stdout"] and result["exit_code"] == 0


CONNECT = "import socket, sys; socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=3)"


def _connections_seen(ctx: ToolDomainContext, mode: str) -> tuple[int, dict[str, Any]]:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = listener.getsockname()[1]
        result = _result(run_command(ctx, argv=["python3", "-c", CONNECT, str(port)]), mode)
        listener.setblocking(False)
        seen = 0
        while True:
            try:
                conn, _ = listener.accept()
            except BlockingIOError:
                return seen, result
            conn.close()
            seen += 1


def test_no_network_to_the_host(bwrap_ctx: ToolDomainContext, workspace: Path) -> None:
    seen, result = _connections_seen(bwrap_ctx, "bwrap")
    assert seen == 0 and result["exit_code"] != 0
    control_seen, control = _connections_seen(command_context(workspace, NoSandbox()), "none")
    assert control_seen == 1 and control["exit_code"] == 0


def test_parent_secrets_are_not_in_the_environment(
    bwrap_ctx: ToolDomainContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    secrets = {
        "OPENAI_API_KEY": f"sk-secret-{uuid.uuid4().hex}",
        "STUDIO_GITHUB_TOKEN": f"ghp_{uuid.uuid4().hex}",
        "STUDIO_DATABASE_URL": f"postgresql://studio:{uuid.uuid4().hex}@db/studio",
        "STUDIO_SECRET_KEY": f"secret-key-{uuid.uuid4().hex}",
    }
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    script = "env; for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f; done"
    result = _result(run_command(bwrap_ctx, command=script), "bwrap")
    output = result["stdout"] + result["stderr"]
    assert "TERM=dumb" in output
    for name, value in secrets.items():
        assert name not in output and value not in output


def test_git_internals_are_read_only(
    git_workspace: Path, bwrap_ctx: ToolDomainContext
) -> None:
    hook = git_workspace / ".git" / "hooks" / "pre-commit"
    script = "printf '#!/bin/sh\\necho pwned\\n' > .git/hooks/pre-commit"
    result = _result(run_command(bwrap_ctx, command=script), "bwrap")
    assert result["exit_code"] != 0 and not hook.exists()
    for script in ("mv .git moved", "rm -rf .git", "git config core.hooksPath /tmp"):
        result = _result(run_command(bwrap_ctx, command=script), "bwrap")
        assert result["exit_code"] != 0, script
    assert (git_workspace / ".git" / "HEAD").is_file()
    assert "hookspath" not in (git_workspace / ".git" / "config").read_text().lower()


def test_the_workspace_is_writable(bwrap_ctx: ToolDomainContext, workspace: Path) -> None:
    script = "mkdir -p sub && echo made > sub/new.txt && echo top > top.txt && sed -i s/p// top.txt"
    result = _result(run_command(bwrap_ctx, command=script), "bwrap")
    assert result["exit_code"] == 0, result
    assert (workspace / "sub" / "new.txt").read_text() == "made\n"
    assert (workspace / "top.txt").read_text() == "to\n"


def test_python_and_pytest_run_inside(bwrap_ctx: ToolDomainContext, workspace: Path) -> None:
    (workspace / "test_sample.py").write_text("def test_ok():\n    assert 1 + 1 == 2\n")
    script = "python3 -m pytest -q -p no:cacheprovider test_sample.py"
    result = _result(run_command(bwrap_ctx, command=script), "bwrap")
    assert result["exit_code"] == 0, result
    assert "1 passed" in result["stdout"]


@pytest.mark.parametrize("detach", ["", "setsid "])
def test_timeout_kills_the_whole_tree(bwrap_ctx: ToolDomainContext, detach: str) -> None:
    marker = sleep_marker()
    with watching_pids(marker) as seen:
        script = f"{detach}sleep {marker} >/dev/null 2>&1 & sleep {marker}"
        result = _result(run_command(bwrap_ctx, command=script, timeout_s=1.5), "bwrap")
    assert result["timed_out"] is True and result["exit_code"] is None
    assert len(seen) >= 2, "the watcher never saw the sleeping processes"
    # the PID namespace is torn down asynchronously
    assert gone(marker), "processes of the timed-out command survived"


RSS_PROBE = """
import json, resource, sys
from pathlib import Path
from services.execution.sandbox.selection import select_sandbox
from services.execution.tool_domains.command.tools import SPECS, RunArgs
from services.execution.tool_domains.context import ToolDomainContext
ctx = ToolDomainContext(workspace_root=Path(sys.argv[1]), execution_id="e", request_id="r",
                        correlation_id="c", sandbox=select_sandbox("bwrap"))
run = SPECS[0].handler
run(RunArgs(command="echo warm"), ctx)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
script = "yes | head -c 50000000 & yes e | head -c 50000000 >&2; wait"
result = run(RunArgs(command=script, timeout_s=240), ctx)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"before_kib": before, "after_kib": after, "result": result}))
"""


def test_huge_output_is_capped_without_memory_growth(workspace: Path) -> None:
    require_sandbox("bwrap")
    done = subprocess.run([sys.executable, "-c", RSS_PROBE, str(workspace)],
                          capture_output=True, text=True, check=True, timeout=280)
    report = json.loads(done.stdout.strip().splitlines()[-1])
    result = report["result"]
    assert result["sandbox"] == "bwrap" and result["exit_code"] == 0
    assert result["output_bytes"] == {"stdout": 50_000_000, "stderr": 50_000_000}
    assert result["truncated"] is True
    cap = 64 * 1024
    for name, line in (("stdout", "y\n"), ("stderr", "e\n")):
        text = result[name]
        marker = f"\n...[truncated {50_000_000 - cap} bytes]...\n"
        assert marker in text
        head, tail = text.split(marker)
        assert head.startswith(line * 100) and tail.endswith(line * 100)
        assert len(head.encode()) + len(tail.encode()) == cap
    assert (report["after_kib"] - report["before_kib"]) * 1024 < 32 * MiB, report


def test_landlock_confines_writes(
    landlock_ctx: ToolDomainContext, workspace: Path, planted: list[tuple[Path, str]]
) -> None:
    outside = workspace.parent / "outside" / f"written-{uuid.uuid4().hex}.txt"
    stray = Path("/tmp") / f"studio-landlock-{uuid.uuid4().hex}.txt"
    for target in (outside, stray):
        result = _result(run_command(landlock_ctx, command=f"echo x > {target}"), "landlock")
        assert result["exit_code"] != 0 and not target.exists()
    (workspace / "sub").mkdir()
    script = "echo inside > sub/new.txt && mkdir -p sub/deeper && echo ok > sub/deeper/f"
    result = _result(run_command(landlock_ctx, command=script), "landlock")
    assert result["exit_code"] == 0, result
    assert (workspace / "sub" / "new.txt").read_text() == "inside\n"
    for place, marker in planted:
        result = _result(run_command(landlock_ctx, command=f"cat {place}"), "landlock")
        assert marker not in result["stdout"] and result["exit_code"] != 0


def test_landlock_hides_other_processes_environment(
    landlock_ctx: ToolDomainContext, workspace: Path
) -> None:
    """A process of the harness's uid holding a secret in its environment (like the harness)."""
    secret = f"sk-secret-{uuid.uuid4().hex}"
    holder = subprocess.Popen(["sleep", "120"], env={"OPENAI_API_KEY": secret})
    try:
        script = f"tr '\\0' '\\n' < /proc/{holder.pid}/environ"
        result = _result(run_command(landlock_ctx, command=script), "landlock")
        assert secret not in result["stdout"] and result["exit_code"] != 0
        control = command_context(workspace, NoSandbox())
        assert secret in _result(run_command(control, command=script), "none")["stdout"]
    finally:
        holder.kill()
        holder.wait()


def test_landlock_keeps_git_read_only(git_workspace: Path, landlock_ctx: ToolDomainContext) -> None:
    hook = git_workspace / ".git" / "hooks" / "pre-commit"
    result = _result(run_command(landlock_ctx, command="echo x > .git/hooks/pre-commit"),
                     "landlock")
    assert result["exit_code"] != 0 and not hook.exists()
    result = _result(run_command(landlock_ctx, command="mv .git moved"), "landlock")
    assert result["exit_code"] != 0 and (git_workspace / ".git").is_dir()
