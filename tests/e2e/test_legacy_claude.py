"""The legacy runtime for claude: cutover off runs the bundled Claude Code CLI, confined.

Through the durable path (``studio run --repo``): the token-guarded git host and the GitHub API
of ``tests.integration.repo_env``, the scripted model server speaking Anthropic Messages over SSE
to the real CLI. The CLI reads the file, edits it and runs the tests with its own tools; the
harness commits, pushes and opens one pull request. The journal holds the CLI's tool calls with
their output; the row says ``legacy`` and why. The GitHub token and the database URL are nowhere
in the CLI's environment (it prints it), its home, or its output.

The hostile repository (:mod:`tests.e2e.legacy_hostile`) carries every CLI's project files that
run programs, e.g. a ``.claude/settings.json`` hook and an ``.mcp.json`` server that would write
the provider key to a marker outside the workspace: a direct run of the same CLI with
project settings on shows they are live (the markers appear), the legacy runtime never runs them.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.cli.main import main
from services.db.executions import ExecutionRepository
from services.db.redaction import REDACTED
from services.execution.providers.claude_env import bundled_cli_path
from services.runs.legacy_runtime import cli_home
from services.settings import get_settings
from tests.e2e.legacy_hostile import hostile_files
from tests.integration.repo_env import DONE, TOKEN, RepoWorld, last_json, repo_world
from tests.support.model_script import Step, text, tool_calls
from tests.support.model_server import ScriptedModelServer
from tests.support.redaction import settings_redactor

API_KEY = "sk-legacy-PROVIDERKEY-7d3e1b90"
MODEL = "claude-sonnet-4-5"


def _probe(url: str) -> str:
    """A command that connects to ``url``'s TCP port (the git host: not the model's port)."""
    port = url.rsplit(":", 1)[1].split("/")[0]
    return (f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 5)\" "
            "2>&1; echo CONNECT=$?")


def _steps(git_host: str) -> list[Step]:
    return [
        tool_calls([("Read", {"file_path": "calc.py"})]),
        tool_calls([("Edit", {"file_path": "calc.py", "old_string": "a - b",
                              "new_string": "a + b"})]),
        tool_calls([("Bash", {"command": "python3 -m unittest -q 2>&1; echo EXIT=$?",
                              "description": "run the tests"})]),
        tool_calls([("Bash", {"command": "env; ls -a \"$HOME\"", "description": "env"})]),
        tool_calls([("Bash", {"command": _probe(git_host), "description": "probe"})]),
        text(json.dumps(DONE)),
    ]


def _studio(argv: list[str]) -> int:
    try:
        main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    raise AssertionError("main() always exits")


def _configure(monkeypatch: pytest.MonkeyPatch, world: RepoWorld, workspaces: Path,
               model_url: str, sandbox: str) -> None:
    wanted = world.env(workspaces, STUDIO_SANDBOX=sandbox)
    for name in [n for n in os.environ if n not in wanted]:
        monkeypatch.delenv(name)
    for name, value in wanted.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", model_url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    get_settings.cache_clear()


@pytest.fixture
def markers(tmp_path: Path) -> Path:
    found = tmp_path / "markers"
    found.mkdir()
    return found


@pytest.fixture
def world(tmp_path: Path, markers: Path) -> Iterator[RepoWorld]:
    with repo_world(tmp_path, hostile_files(markers)) as world:
        yield world


def _secrets(world: RepoWorld) -> list[str]:
    return [TOKEN, world.db_url, str(world.root / "studio.db")]


def _run(world: RepoWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
         capfd: pytest.CaptureFixture[str], sandbox: str) -> tuple[int, dict[str, Any], str]:
    workspaces = tmp_path / "workspaces"
    with ScriptedModelServer(_steps(world.host.base_url)) as server:
        _configure(monkeypatch, world, workspaces, server.url, sandbox)
        try:
            assert _studio(["settings", "set", "agent_runtime_cutover_enabled", "false"]) == 0
            capfd.readouterr()
            code = _studio(["run", "Make the failing test pass.", "--repo", world.url,
                            "--provider", "claude", "--model", MODEL, "--json"])
        finally:
            get_settings.cache_clear()
        anthropic = server.requests_for("anthropic")
        assert anthropic and not server.unmatched
    out, err = capfd.readouterr()
    return code, last_json(out) if out.strip() else {}, err


@pytest.mark.parametrize("sandbox", ["bwrap", "none"])
def test_cutover_off_runs_claude_code_confined_and_the_harness_finalizes(
        sandbox: str, world: RepoWorld, markers: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    code, summary, err = _run(world, tmp_path, monkeypatch, capfd, sandbox)
    assert code == 0, err
    assert summary["status"] == "success" and summary["execution_status"] == "succeeded"
    branch = summary["branch"]

    # the harness pushed and opened one PR; the CLI's edit is on the branch
    assert [u.ref for u in world.host.pushes_of(branch)] == [f"refs/heads/{branch}"]
    pulls = world.pulls_of(branch)
    assert len(pulls) == 1 and world.api.posts == 1
    assert "a + b" in (world.remote_file(branch, "calc.py") or "")

    db = world.database()
    try:
        repo = ExecutionRepository(db, settings_redactor())
        row = repo.get(summary["execution_id"])
        assert row is not None
        events = repo.events(summary["execution_id"])
        calls = repo.tool_calls(summary["execution_id"])
    finally:
        db.dispose()
    assert row.runtime == "legacy"
    assert row.settings_snapshot["runtime"] == {
        "name": "legacy", "setting": "agent_runtime_cutover_enabled", "value": False,
        "source": "runtime_setting"}
    started = next(e.data for e in events if e.kind == "started")
    assert started["runtime"] == "legacy" and started["cli"] == "claude-code"
    assert started["sandbox"] == sandbox

    results = [e.data["envelope"] for e in events if e.kind == "tool_result"]
    assert [(r["tool_name"], r["domain"], r["ok"]) for r in results] == [
        ("Read", "workspace", True), ("Edit", "workspace", True), ("Bash", "command", True),
        ("Bash", "command", True), ("Bash", "command", True)]
    assert "EXIT=0" in results[2]["result"]["output"]
    assert [c.envelope["tool_name"] for c in calls] == ["Read", "Edit", "Bash", "Bash", "Bash"]
    # under bubblewrap the CLI shares the host network but connects only to its model's port
    probe = results[4]["result"]["output"]
    if sandbox == "bwrap":
        assert "CONNECT=1" in probe and "Permission denied" in probe, probe
    else:
        assert "CONNECT=0" in probe, probe
    assert any(e.kind == "usage" for e in events)

    # the CLI's environment (printed by its own Bash tool), its home, its output
    cli_env = results[3]["result"]["output"]
    assert "ANTHROPIC_BASE_URL=" in cli_env and "STUDIO_" not in cli_env
    # the journal is redacted: a secret in the CLI's environment would show as the marker; only
    # the provider's own key may
    assert all(line.startswith("ANTHROPIC_API_KEY=") for line in cli_env.splitlines()
               if REDACTED in line)
    journal = json.dumps([e.data for e in events])
    home = cli_home(world.settings(), summary["execution_id"])
    home_text = "".join(p.read_text(errors="replace") for p in home.rglob("*") if p.is_file())
    for secret in _secrets(world):
        assert secret not in cli_env and secret not in journal and secret not in home_text

    # ``studio executions show``: the runtime, and why
    capfd.readouterr()
    assert _studio(["executions", "show", summary["execution_id"]]) == 0
    shown = capfd.readouterr().out
    assert "legacy" in shown
    assert "agent_runtime_cutover_enabled=false (runtime_setting)" in " ".join(shown.split())

    # the hostile repository's hook, MCP server and instructions never ran
    assert list(markers.iterdir()) == []
    assert not any((home / name).exists() for name in ("claude-hook", "claude-mcp"))
    assert API_KEY not in journal


def test_the_hostile_files_are_live_for_a_cli_reading_project_settings(
        world: RepoWorld, markers: Path, tmp_path: Path) -> None:
    """The control: the same CLI with project settings and MCP on runs the repository's hook
    and server, so the legacy runtime's test above proves something."""
    checkout = tmp_path / "checkout"
    subprocess.run(["git", "clone", "-q", str(world.host.bare("acme/widgets")), str(checkout)],
                   check=True, capture_output=True)
    home = tmp_path / "control-home"
    home.mkdir()
    with ScriptedModelServer([tool_calls([("Bash", {"command": "true"})]), text("ok")]) as srv:
        env = {"PATH": "/usr/bin:/bin", "HOME": str(home),
               "CLAUDE_CONFIG_DIR": str(home / ".claude"), "ANTHROPIC_BASE_URL": srv.url,
               "ANTHROPIC_API_KEY": API_KEY, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
        subprocess.run([str(bundled_cli_path()), "-p", "go", "--output-format", "stream-json",
                        "--verbose", "--model", MODEL, "--setting-sources", "project",
                        "--allowedTools", "Bash", "--max-turns", "3"],
                       cwd=checkout, env=env, capture_output=True, timeout=120, check=False)
    assert (markers / "claude-hook").read_text().split() == [API_KEY]
    assert (markers / "claude-mcp").exists()
