"""A ``studio execute`` killed mid-run is resumed by another one, in a fresh directory.

The first process is SIGKILLed while a replayed command sleeps (mid-loop), or after the agent
pushed (a branch stranded without a pull request). The reaper sees the lease expire (a short
TTL) and dispatches a second ``studio execute`` with another workspace root. The remote then has
exactly one push of the branch and one pull request; the journal shows the resume; recorded tool
calls were not run again (a command that appends to a file ran once); and the process that lost
its lease can neither write the journal nor push.
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from services.db.executions import ExecutionRepository
from services.db.journal import DbEventSink, StaleLease
from services.db.leases import LeaseStore
from services.db.models import WorkspaceCheckpoint
from services.db.redaction import Redactor
from services.db.runtime_settings import SettingsRepository
from services.execution.errors import ErrorCode
from services.execution.messages import ToolCall
from services.execution.ports import AgentEvent, AgentEventKind
from services.execution.tool_domains.context import ToolDomainContext
from services.execution.tool_domains.dispatch import Dispatcher
from services.execution.tool_domains.registry import default_registry
from services.repos.credentials import TokenGitAuth
from services.repos.workspaces import provision_workspace
from services.runs.leases import Lease, LeaseGuardedGitAuth, LeaseTimings
from services.runs.reaper import reap_expired
from services.runs.request import ExecutionRequest, create_execution
from tests.integration.repo_env import (
    DONE,
    STUDIO,
    TEST_ARGV,
    TOKEN,
    RepoWorld,
    repo_world,
    studio,
)
from tests.support import warm_cli
from tests.support.redaction import settings_redactor

APPEND = ["sh", "-c", "echo ran >> counter.txt"]
SLEEP = ["sleep", "60"]


def _script(kill_after_push: bool) -> dict[str, Any]:
    calls: list[dict[str, Any]] = [
        {"tool": "workspace.write_file", "args": {"path": "notes.txt", "content": "notes\n"}},
        {"tool": "command.run", "args": {"argv": APPEND}},
    ]
    fix = [
        {"tool": "workspace.edit_file",
         "args": {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}},
        {"tool": "command.run", "args": {"argv": TEST_ARGV}},
        {"tool": "git.add", "args": {"paths": ["."]}},
        {"tool": "git.commit", "args": {"message": "Fix add"}},
        {"tool": "git.push", "args": {}},
    ]
    sleep = {"tool": "command.run", "args": {"argv": SLEEP, "timeout_s": 120}}
    steps = [*calls, *fix, sleep] if kill_after_push else [*calls, sleep, *fix]
    return {"turns": [{"tool_calls": [c]} for c in steps] + [{"final": DONE}]}


def _wait_for_call(repo: ExecutionRepository, execution_id: str, argv: list[str],
                   proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        for event in repo.events(execution_id):
            if event.kind == "tool_call" and event.data["call"]["args"].get("argv") == argv:
                return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError("the sleeping command never started")


def _wait_for_expiry(store: LeaseStore, execution_id: str) -> None:
    deadline = time.monotonic() + 60
    while execution_id not in store.expired():
        assert time.monotonic() < deadline, "the lease never expired"
        time.sleep(0.1)


def _start(world: RepoWorld, kill_after_push: bool) -> str:
    db = world.database()
    try:
        settings = SettingsRepository(db)
        settings.set("lease_ttl_s", 2.0)
        settings.set("heartbeat_s", 0.3)
        return create_execution(db, ExecutionRequest(
            provider="replay", prompt="Fix add", repo_url=world.url,
            script=_script(kill_after_push)), Redactor([TOKEN]), settings=world.settings())
    finally:
        db.dispose()


@pytest.mark.parametrize("kill_after_push", [False, True], ids=["mid_loop", "after_push"])
def test_killed_execution_resumes_in_a_fresh_directory_exactly_once(
        tmp_path: Path, kill_after_push: bool) -> None:
    with repo_world(tmp_path) as world:
        execution_id = _start(world, kill_after_push)
        db = world.database()
        repo, store = ExecutionRepository(db, settings_redactor()), LeaseStore(db)
        first = warm_cli.Popen([*STUDIO, "execute", execution_id],
                               env=world.env(tmp_path / "ws1"), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        try:
            _wait_for_call(repo, execution_id, SLEEP, first)
        finally:
            first.send_signal(signal.SIGKILL)
            first.communicate()
        killed = repo.get(execution_id)
        assert killed is not None and killed.status == "running"
        branch, old_epoch = killed.branch, killed.lease_epoch
        assert branch is not None
        pushes_before = len(world.host.pushes_of(branch))
        assert pushes_before == (1 if kill_after_push else 0)
        assert not world.pulls_of(branch)

        _wait_for_expiry(store, execution_id)
        second: list[subprocess.CompletedProcess[str]] = []
        reaped = reap_expired(db, lambda eid: second.append(
            studio(world.env(tmp_path / "ws2"), "execute", eid, "--json")))
        assert reaped == [execution_id]
        assert second[0].returncode == 0, second[0].stderr

        row = repo.get(execution_id)
        assert row is not None and row.status == "succeeded"
        assert row.workspace is not None and row.workspace.startswith(str(tmp_path / "ws2"))
        assert len(world.host.pushes_of(branch)) == 1
        pulls = world.pulls_of(branch)
        assert len(pulls) == 1 and execution_id in pulls[0].body
        assert row.pr_url is not None and row.pr_url.endswith(f"/pull/{pulls[0].number}")
        assert world.api.branch_sha("acme", "widgets", branch) == row.head_sha
        assert world.remote_file(branch, "counter.txt") == "ran\n"  # the command ran once
        assert world.remote_file(branch, "notes.txt") == "notes\n"
        assert "a + b" in (world.remote_file(branch, "calc.py") or "")

        events = repo.events(execution_id)
        starts = [e.data for e in events if e.kind == "started"]
        assert [s["resumed"] for s in starts] == [False, True]
        runs = [e for e in events if e.kind == "tool_result"
                and e.data["call"]["args"].get("argv") == APPEND]
        assert len(runs) == 1
        assert row.lease_epoch == old_epoch + 1
        # Every checkpoint says which attempt (epoch) and which process (lease owner) took it.
        with db.session() as session:
            taken = session.execute(
                select(WorkspaceCheckpoint.lease_epoch, WorkspaceCheckpoint.owner)
                .where(WorkspaceCheckpoint.execution_id == execution_id)).all()
        owners = {epoch: owner for epoch, owner in taken}
        expected = {old_epoch} if kill_after_push else {old_epoch, old_epoch + 1}
        assert set(owners) == expected, taken  # after the push, the resume changes nothing
        assert len(set(owners.values())) == len(owners)
        assert f":{first.pid}:" in owners[old_epoch]

        _assert_stale_process_is_fenced(world, db, execution_id, old_epoch, branch,
                                        tmp_path / "stale")
        db.dispose()


def _assert_stale_process_is_fenced(world: RepoWorld, db: Any, execution_id: str,
                                    old_epoch: int, branch: str, root: Path) -> None:
    with pytest.raises(StaleLease):
        DbEventSink(db, settings_redactor(), lease_epoch=old_epoch).append(AgentEvent(
            AgentEventKind.WARNING, execution_id, 0, {"code": "late", "message": "late"}))
    stale = Lease(LeaseStore(db), execution_id, "old-owner", old_epoch, LeaseTimings())
    with pytest.raises(StaleLease):
        stale.check()
    settings = world.settings().model_copy(update={"workspace_dir": root})
    ws = provision_workspace("stale-" + execution_id[:8], world.url, base_branch=None,
                             git_auth=TokenGitAuth(TOKEN, world.host.base_url),
                             settings=settings, slug="stale")
    (ws.path / "late.txt").write_text("late\n")
    ctx = ToolDomainContext(
        workspace_root=ws.path, execution_id=execution_id, request_id="r", correlation_id="c",
        branch=branch, git_auth=LeaseGuardedGitAuth(TokenGitAuth(TOKEN, world.host.base_url),
                                                    stale))
    dispatcher = Dispatcher(default_registry())
    pushes = len(world.host.pushes_of(branch))
    envelope = dispatcher.dispatch(ToolCall(call_id="late-push", tool_name="git_push",
                                            domain="git", operation="push", args={}), ctx)
    assert not envelope.ok
    assert envelope.error.code is ErrorCode.CANCELLED  # type: ignore[union-attr]
    assert len(world.host.pushes_of(branch)) == pushes


def test_a_live_lease_elsewhere_means_do_nothing(tmp_path: Path) -> None:
    with repo_world(tmp_path) as world:
        execution_id = _start(world, kill_after_push=False)
        db = world.database()
        assert LeaseStore(db).claim(execution_id, "someone-else", 600) == 1
        done = studio(world.env(tmp_path / "ws"), "execute", execution_id)
        assert done.returncode == 0
        assert "already running elsewhere" in done.stderr
        assert ExecutionRepository(db).events(execution_id) == []
        assert world.host.pushes == []
        db.dispose()


def test_a_holder_that_cannot_renew_kills_its_commands_and_exits_before_expiry(
        tmp_path: Path) -> None:
    """The database stops taking writes (locked elsewhere) while a command runs: ``studio
    execute`` cannot renew its lease, so before the lease expires it kills the command and
    exits with code 3, leaving the execution to the next attempt."""
    argv = ["sleep", "60", f"0.{time.monotonic_ns() % 10**8:08d}"]
    script = {"turns": [
        {"tool_calls": [{"tool": "workspace.write_file",
                         "args": {"path": "notes.txt", "content": "notes\n"}}]},
        {"tool_calls": [{"tool": "command.run", "args": {"argv": argv, "timeout_s": 120}}]},
        {"final": DONE}]}
    with repo_world(tmp_path) as world:
        db = world.database()
        SettingsRepository(db).set("lease_ttl_s", 6.0)
        SettingsRepository(db).set("heartbeat_s", 0.5)
        execution_id = create_execution(db, ExecutionRequest(
            provider="replay", prompt="Take notes", repo_url=world.url, script=script),
            Redactor([TOKEN]), settings=world.settings())
        repo = ExecutionRepository(db, settings_redactor())
        child = warm_cli.Popen([*STUDIO, "execute", execution_id],
                               env=world.env(tmp_path / "ws"), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        try:
            _wait_for_call(repo, execution_id, argv, child)
            lock = sqlite3.connect(tmp_path / "studio.db", isolation_level=None, timeout=60)
            lock.execute("BEGIN EXCLUSIVE")  # no writer gets through: the heartbeat neither
            try:
                child.wait(timeout=120)
                expires = lock.execute("SELECT lease_expires_at FROM node_executions "
                                       "WHERE id = ?", (execution_id,)).fetchone()[0]
                stopped_at = datetime.now(UTC)
            finally:
                lock.execute("ROLLBACK")
                lock.close()
        finally:
            if child.poll() is None:
                child.kill()
            _, stderr = child.communicate()
        assert child.returncode == 3, stderr
        assert "lapsed" in stderr
        assert datetime.fromisoformat(expires).replace(tzinfo=UTC) > stopped_at  # before expiry
        assert _processes_with(argv) == []  # the command died with it
        row = repo.get(execution_id)
        assert row is not None and row.status == "running" and row.lease_epoch == 1
        db.dispose()


def _processes_with(argv: list[str]) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            words = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if all(word in words for word in argv):
            found.append(entry.name)
    return found
