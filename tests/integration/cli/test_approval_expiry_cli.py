"""An approval decided after it expired never runs its call (issue 27, finding 8), from the
command line with no reaper anywhere (real processes on a SQLite file of their own):
``studio executions approve`` after ``expires_at`` is ``approval_expired`` (exit 1), the same
statement denied the approval as timed out (``decided_by`` ``timeout``, journalled as the reaper's
denial is), and the resumed run gets ``permission_denied`` for the gated call. The control: the
same approval decided in time runs the call (the witness, the call's record, would show it)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.integration.repo_env import DONE, RepoWorld, last_json, repo_world, studio

SCRIPT: dict[str, Any] = {"turns": [
    {"tool_calls": [{"tool": "command.run",
                     "args": {"argv": ["sh", "-c", "echo ran > gated.txt"]}}]},
    {"tool_calls": [{"tool": "workspace.edit_file",
                     "args": {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}}]},
    {"final": DONE}]}


@pytest.fixture
def world(tmp_path: Path) -> Any:
    with repo_world(tmp_path) as world:
        yield world


def _paused(env: dict[str, str], world: RepoWorld, script: Path) -> tuple[str, dict[str, Any]]:
    paused = studio(env, "run", "--repo", world.url, "--provider", "replay", "--script",
                    str(script), "--approval-policy", '{"command.run": "require"}', "--json",
                    "gated")
    assert paused.returncode == 0, paused.stderr
    summary = last_json(paused.stdout)
    assert summary["state"] == "awaiting_approval", summary
    shown = _show(env, summary["execution_id"])
    (approval,) = shown["approvals"]
    return summary["execution_id"], approval


def _show(env: dict[str, str], execution_id: str) -> dict[str, Any]:
    done = studio(env, "executions", "show", execution_id, "--json")
    assert done.returncode == 0, done.stderr
    return last_json(done.stdout)


def _gated(env: dict[str, str], execution_id: str) -> list[tuple[Any, ...]]:
    """The witness: what the gated call did, as recorded."""
    calls = [c for c in _show(env, execution_id)["tool_calls"] if c["operation"] == "run"]
    return [(c["ok"], c["error_code"], c["approval"]["decision"], c["approval"]["decided_by"])
            for c in calls]


def _wait_past(expires_at: str) -> None:
    """Until the approval's expiry has passed (a condition, polled)."""
    moment = datetime.fromisoformat(expires_at)
    moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    while datetime.now(UTC) <= moment:
        time.sleep(0.1)


def test_an_approval_decided_after_it_expired_is_denied_as_timed_out(
        world: RepoWorld, tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))

    # the control: decided in time, the call runs (and the witness records it)
    env = world.env(tmp_path / "workspaces")
    control, approval = _paused(env, world, script)
    approved = studio(env, "executions", "approve", control, approval["id"])
    assert approved.returncode == 0, approved.stderr
    assert studio(env, "execute", control, "--json").returncode == 0
    assert [g[:3] for g in _gated(env, control)] == [(True, None, "approve")]

    # expired: one second to decide, and nobody reaps it
    env = world.env(tmp_path / "workspaces", STUDIO_APPROVAL_TIMEOUT_S="1")
    execution_id, approval = _paused(env, world, script)
    _wait_past(approval["expires_at"])
    late = studio(env, "executions", "approve", execution_id, approval["id"], "--reason", "ok")
    assert late.returncode == 1 and "approval_expired" in late.stderr, late.stderr
    assert f"studio execute {execution_id}" in late.stderr  # queued again, with the denial
    shown = _show(env, execution_id)
    assert shown["status"] == "queued"
    (decided,) = shown["approvals"]
    assert (decided["status"], decided["decided_by"]) == ("denied", "timeout")
    again = studio(env, "executions", "deny", execution_id, approval["id"])
    assert again.returncode == 1 and "approval_expired" in again.stderr

    resumed = studio(env, "execute", execution_id, "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert _gated(env, execution_id) == [(False, "permission_denied", "deny", "timeout")]
    logs = studio(env, "executions", "logs", execution_id)
    assert "approval deny of command.run by timeout" in logs.stdout
