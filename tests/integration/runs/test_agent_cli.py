"""The agent fields from the real ``studio`` CLI: ``studio mcp add|list|show|remove`` (secrets
never printed), ``studio run --role/--system-prompt/--mcp-server/--models`` (hostile values are
usage errors naming the code; a reviewer run offers no mutating tool)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from services.execution.tool_domains.registry import default_registry
from tests.integration.mcp_fixtures import stdio_server_entry
from tests.integration.runs.cli_runs import STUDIO, last_json, studio, studio_env
from tests.support import warm_cli
from tests.support.model_server import ScriptedModelServer, text

SECRET = "cli-mcp-env-SECRET-8c2d41e7"
DONE = json.dumps({"status": "success", "summary": "done"})


def _add(env: dict[str, str], name: str, config: object) -> subprocess.CompletedProcess[str]:
    return warm_cli.run([*STUDIO, "mcp", "add", name, "--config", "-"], env=env,
                        input=json.dumps(config), capture_output=True, text=True,
                        timeout=120, check=False)


def test_studio_mcp_manages_servers_without_printing_secrets(db_url: str, tmp_path: Path
                                                             ) -> None:
    env = {**studio_env(db_url, tmp_path), "STUDIO_SECRET_KEY": "cli-test-secret-key"}
    outputs: list[str] = []
    added = _add(env, "files", stdio_server_entry(env={"DEMO_TOKEN": SECRET}))
    outputs += [added.stdout, added.stderr]
    assert added.returncode == 0, added.stderr
    assert last_json(added.stdout)["secret_keys"]["env"] == ["DEMO_TOKEN"]
    again = _add(env, "files", stdio_server_entry(env={"DEMO_TOKEN": SECRET}))
    outputs += [again.stdout, again.stderr]
    assert again.returncode == 1 and "mcp_server_exists" in again.stderr
    invalid = _add(env, "broken", {"transport": "stdio", "env": {"X": SECRET}})
    outputs += [invalid.stdout, invalid.stderr]
    assert invalid.returncode == 1 and "invalid_arguments" in invalid.stderr
    listed = studio(env, "mcp", "list")
    shown = studio(env, "mcp", "show", "files")
    outputs += [listed.stdout, listed.stderr, shown.stdout, shown.stderr]
    assert listed.returncode == 0, listed.stderr
    assert [s["name"] for s in json.loads(listed.stdout.strip())] == ["files"]
    assert last_json(shown.stdout)["transport"] == "stdio"
    assert studio(env, "mcp", "remove", "files").returncode == 0
    missing = studio(env, "mcp", "show", "files")
    assert missing.returncode == 1 and "no MCP server files" in missing.stderr
    assert studio(env, "mcp", "remove", "files").returncode == 1
    not_json = warm_cli.run([*STUDIO, "mcp", "add", "x", "--config", "-"], env=env,
                            input="{not json", capture_output=True, text=True, timeout=120,
                            check=False)
    assert not_json.returncode == 2
    for output in outputs:
        assert SECRET not in output


def test_a_secret_cannot_be_stored_without_the_secret_key(db_url: str, tmp_path: Path) -> None:
    env = studio_env(db_url, tmp_path)
    refused = _add(env, "files", stdio_server_entry(env={"DEMO_TOKEN": SECRET}))
    assert refused.returncode == 1 and "STUDIO_SECRET_KEY" in refused.stderr
    assert SECRET not in refused.stderr + refused.stdout


def test_studio_run_refuses_hostile_agent_fields(db_url: str, tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    env = studio_env(db_url, tmp_path)
    base = ["run", "--workspace", str(workspace), "--provider", "codex", "go"]
    for extra, code in ((["--role", "boss"], "unknown_role"),
                        (["--system-prompt", "x" * 40_000], "system_prompt_too_long"),
                        (["--models", "gemini"], "invalid_models"),
                        (["--mcp-server", "a", "--mcp-server", "a"], "duplicate_mcp_server"),
                        (["--mcp-server", "ghost"], "not stored")):
        refused = studio(env, *base, *extra)
        assert refused.returncode == 2, (extra, refused.stderr)
        assert code in refused.stderr


def test_studio_run_as_reviewer_offers_no_mutating_tool(db_url: str, tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with ScriptedModelServer([text(DONE)]) as server:
        env = studio_env(db_url, tmp_path, server.url)
        proc = studio(env, "run", "--workspace", str(workspace), "--provider", "codex",
                      "--model", "gpt-5.1", "--role", "reviewer", "--system-prompt",
                      "CLI-NODE-PROMPT", "--json", "review")
        record = server.requests_for("openai")[0]
    assert proc.returncode == 0, proc.stderr
    declared = {t.name for t in server.declared_tools(record)}
    assert declared == {s.name for s in default_registry().specs() if not s.mutates}
    assert "CLI-NODE-PROMPT" in record.body["instructions"]
    shown = studio(env, "executions", "show", last_json(proc.stdout)["execution_id"])
    assert shown.returncode == 0 and "reviewer" in shown.stdout
