"""Approval gates from the command line, real processes on a SQLite file of their own:
``studio run --repo ... --approval-policy`` pauses before the gated command; ``studio executions
show`` lists the pending approval; ``studio executions deny|approve`` decide it (hostile
values get their codes); ``studio execute`` resumes the run; every decision shows in
``studio executions show`` and ``logs``. ``--approval-policy`` is validated, and a run in place
(``--workspace``) cannot wait: ``require`` is refused there, ``deny`` works.
"""

from __future__ import annotations

import getpass
import json
from pathlib import Path
from typing import Any

import pytest

from tests.integration.repo_env import DONE, RepoWorld, last_json, repo_world, studio

REASON = "<b>not</b> today"
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


def _show(env: dict[str, str], execution_id: str) -> dict[str, Any]:
    done = studio(env, "executions", "show", execution_id, "--json")
    assert done.returncode == 0, done.stderr
    return last_json(done.stdout)


def test_pause_decide_and_resume_from_the_command_line(world: RepoWorld,
                                                       tmp_path: Path) -> None:
    env = world.env(tmp_path / "workspaces")
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    paused = studio(env, "run", "--repo", world.url, "--provider", "replay", "--script",
                    str(script), "--approval-policy", '{"command.run": "require"}', "--json",
                    "Fix add")
    assert paused.returncode == 0, paused.stderr
    summary = last_json(paused.stdout)
    assert summary["state"] == "awaiting_approval", summary
    execution_id = summary["execution_id"]
    shown = _show(env, execution_id)
    assert shown["status"] == "awaiting_approval"
    (approval,) = shown["approvals"]
    assert approval["status"] == "pending" and approval["tool"] == "command.run"
    assert [c["approval"]["decision"] for c in shown["tool_calls"]] == ["pending"]

    unknown = studio(env, "executions", "deny", execution_id, "nope")
    assert unknown.returncode == 1 and "approval_not_found" in unknown.stderr
    missing = studio(env, "executions", "deny", "no-such-execution", approval["id"])
    assert missing.returncode == 1 and "no execution" in missing.stderr
    huge = studio(env, "executions", "deny", execution_id, approval["id"], "--reason",
                  "x" * 5000)
    assert huge.returncode == 2 and "invalid_arguments" in huge.stderr
    denied = studio(env, "executions", "deny", execution_id, approval["id"], "--reason", REASON)
    assert denied.returncode == 0, denied.stderr
    answer = last_json(denied.stdout)
    assert answer["changed"] is True and answer["resumed"] is True
    assert answer["approval"]["decided_by"] == f"cli:{getpass.getuser()}"
    assert "studio execute" in denied.stderr  # no broker: how to resume it
    again = studio(env, "executions", "deny", execution_id, approval["id"])
    assert again.returncode == 0 and last_json(again.stdout)["changed"] is False
    other = studio(env, "executions", "approve", execution_id, approval["id"])
    assert other.returncode == 1 and "approval_already_decided" in other.stderr

    resumed = studio(env, "execute", execution_id, "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert last_json(resumed.stdout)["execution_status"] == "succeeded"
    shown = _show(env, execution_id)
    gated = [c for c in shown["tool_calls"] if c["operation"] == "run"]
    assert [(c["error_code"], c["approval"]["decision"], c["approval"]["reason"])
            for c in gated] == [("permission_denied", "deny", REASON)]
    text = studio(env, "executions", "show", execution_id)
    assert text.returncode == 0 and f"deny by cli:{getpass.getuser()}" in text.stdout
    assert REASON in text.stdout
    logs = studio(env, "executions", "logs", execution_id)
    assert "waiting for approval " + approval["id"] in logs.stdout
    assert f"approval deny of command.run by cli:{getpass.getuser()}" in logs.stdout


def test_the_policy_option_is_validated_and_a_run_in_place_cannot_wait(
        tmp_path: Path, world: RepoWorld) -> None:
    env = world.env(tmp_path / "workspaces")
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    workspace = tmp_path / "here"
    workspace.mkdir()
    (workspace / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    base = ["run", "--workspace", str(workspace), "--provider", "replay", "--script",
            str(script), "--json"]
    for bad in ("{not json", '["command.run"]', '{"command.run": "perhaps"}',
                '{"command.run": "require"}'):
        refused = studio(env, *base, "--approval-policy", bad, "Fix add")
        assert refused.returncode == 2 and "invalid_approval_policy" in refused.stderr, bad
    ran = studio(env, *base, "--approval-policy", '{"command.*": "deny"}', "Fix add")
    assert ran.returncode == 0, ran.stderr
    execution_id = last_json(ran.stdout)["execution_id"]
    gated = [c for c in _show(env, execution_id)["tool_calls"] if c["operation"] == "run"]
    assert [(c["error_code"], c["approval"]["rule"]) for c in gated] == [
        ("permission_denied", "command.*")]
    assert not (workspace / "gated.txt").exists()
