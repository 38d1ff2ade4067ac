"""The legacy runtime's guards, for each agent CLI (Claude Code, Codex, Gemini CLI), through the
durable path with the real CLI against the scripted model server.

The kill switch engaged while the CLI waits for its model stops it (its process group is gone);
max turns and the execution budget stop it with the SDK loop's outcomes; a CLI that crashes
after printing garbage ends with ``legacy_cli_failed`` and its stderr tail as evidence.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from services.cli.main import main
from services.db.executions import ExecutionRepository
from services.db.runtime_settings import SettingsRepository
from services.runs.legacy_runtime import npm_cli_dir
from services.settings import get_settings
from tests.conftest import IN_CI
from tests.integration.repo_env import DONE, RepoWorld, last_json, repo_world
from tests.support.model_script import Step, Usage, hang, text, tool_calls
from tests.support.model_server import ScriptedModelServer
from tests.support.redaction import settings_redactor

API_KEY = "sk-legacy-guards-KEY-55aa"


@dataclass(frozen=True)
class Cli:
    provider: str
    model: str
    noop: tuple[str, dict[str, Any]]  # a tool call that does nothing, in the CLI's own words
    key_env: str
    url_env: str
    url_suffix: str = ""
    executable: str = ""  # the npm bin name; "" for the bundled Claude Code
    vendor: str = "anthropic"  # whose API it calls, as the scripted model server records it


CLIS = {
    "claude": Cli("claude", "claude-sonnet-4-5", ("Bash", {"command": "true",
                                                          "description": "nothing"}),
                  "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"),
    "codex": Cli("codex", "gpt-5.1", ("exec_command", {"cmd": "true", "tty": False}),
                 "OPENAI_API_KEY", "OPENAI_BASE_URL", "/v1", "codex", "openai"),
    "gemini": Cli("gemini", "gemini-2.5-pro", ("run_shell_command", {"command": "true"}),
                  "GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL", "", "gemini", "gemini"),
}


@pytest.fixture(params=list(CLIS))
def cli(request: pytest.FixtureRequest) -> Cli:
    found = CLIS[request.param]
    get_settings.cache_clear()
    if found.executable and not (npm_cli_dir(get_settings()) / found.executable).exists() \
            and not IN_CI:
        pytest.skip(f"the {found.executable} CLI is not installed (bash scripts/setup.sh)")
    return found


@pytest.fixture
def world(tmp_path: Path) -> Iterator[RepoWorld]:
    with repo_world(tmp_path) as world:
        yield world


def _studio(argv: list[str]) -> int:
    try:
        main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    raise AssertionError("main() always exits")


def _run(cli: Cli, world: RepoWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
         capfd: pytest.CaptureFixture[str], steps: list[Step], settings: dict[str, str],
         during: Any = None, **env: str) -> tuple[dict[str, Any], list[tuple[str, Any]]]:
    wanted = world.env(tmp_path / "workspaces", STUDIO_SANDBOX="bwrap", **env)
    for name in [n for n in os.environ if n not in wanted]:
        monkeypatch.delenv(name)
    for name, value in wanted.items():
        monkeypatch.setenv(name, value)
    with ScriptedModelServer(steps) as server:
        monkeypatch.setenv(cli.url_env, server.url + cli.url_suffix)
        monkeypatch.setenv(cli.key_env, API_KEY)
        get_settings.cache_clear()
        try:
            for key, value in {"agent_runtime_cutover_enabled": "false", **settings}.items():
                assert _studio(["settings", "set", key, value]) == 0
            capfd.readouterr()
            helper = threading.Thread(target=during, args=(server,), daemon=True) \
                if during else None
            if helper is not None:
                helper.start()
            _studio(["run", "Make the failing test pass.", "--repo", world.url,
                     "--provider", cli.provider, "--model", cli.model, "--json"])
        finally:
            get_settings.cache_clear()
    out, _ = capfd.readouterr()
    summary = last_json(out)
    db = world.database()
    try:
        events = [(e.kind, e.data) for e in
                  ExecutionRepository(db).events(summary["execution_id"])]
    finally:
        db.dispose()
    return summary, events


def _finished(events: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = [data for kind, data in events if kind == "finished"][-1]
    return found


def _group_gone(pid: int) -> bool:
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_kill_switch_mid_run_kills_the_cli_process_group_and_pauses_the_execution(
        cli: Cli, world: RepoWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capfd: pytest.CaptureFixture[str]) -> None:
    def engage_once_waiting(server: ScriptedModelServer) -> None:
        # once the CLI's second request hangs (its own vendor's: counting another vendor's
        # requests waited out the deadline and raced the hang's end)
        deadline = time.monotonic() + 60
        while len(server.requests_for(cli.vendor)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        db = world.database()
        try:
            SettingsRepository(db).set("killswitch_engaged", True)
        finally:
            db.dispose()

    summary, events = _run(cli, world, tmp_path, monkeypatch, capfd,
                           [tool_calls([cli.noop]), hang(60, text(json.dumps(DONE)))], {},
                           during=engage_once_waiting)
    assert summary["outcome"] == "killswitch_engaged" and summary["state"] == "paused"
    # paused, not failed: queued again, to resume once the switch is released
    assert summary["execution_status"] == "queued" and summary["pr_url"] is None
    finished = _finished(events)
    assert finished["runtime"] == "legacy" and _group_gone(finished["cli_pid"])
    assert world.api.posts == 0


def test_max_turns_stops_the_cli_like_the_sdk_loop(
        cli: Cli, world: RepoWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capfd: pytest.CaptureFixture[str]) -> None:
    steps: list[Step] = [tool_calls([cli.noop]) for _ in range(4)]
    summary, events = _run(cli, world, tmp_path, monkeypatch, capfd,
                           [*steps, text(json.dumps(DONE))], {"max_iterations": "2"})
    assert summary["outcome"] == "max_iterations_exceeded"
    assert summary["error"]["code"] == "max_iterations_exceeded"
    assert len([k for k, _ in events if k == "model_response"]) <= 3
    assert world.api.posts == 0


def test_budget_stops_the_cli_like_the_sdk_loop(
        cli: Cli, world: RepoWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capfd: pytest.CaptureFixture[str]) -> None:
    costly = Usage(input_tokens=500_000, output_tokens=1_000)  # over $0.6 at these prices
    steps: list[Step] = [tool_calls([cli.noop], usage=costly) for _ in range(3)]
    summary, events = _run(cli, world, tmp_path, monkeypatch, capfd,
                           [*steps, text(json.dumps(DONE))], {"max_budget_usd": "0.5"})
    assert summary["outcome"] == "budget_exceeded"
    assert summary["error"]["code"] == "budget_exceeded"
    assert summary["usage"]["cost_usd"] > 0.5
    assert world.api.posts == 0


def test_a_crashing_cli_that_prints_garbage_ends_with_a_clear_code_and_its_stderr(
        cli: Cli, world: RepoWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capfd: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "broken-cli" / (cli.executable or "claude")
    broken.parent.mkdir()
    broken.write_text("#!/bin/sh\necho 'this is not stream json'\n"
                      "echo 'fatal: the CLI broke' >&2\nexit 3\n")
    broken.chmod(0o755)
    where = ({"STUDIO_LEGACY_CLI_DIR": str(broken.parent)} if cli.executable
             else {"STUDIO_LEGACY_CLAUDE_CLI": str(broken)})
    summary, events = _run(cli, world, tmp_path, monkeypatch, capfd, [], {}, **where)
    assert summary["outcome"] == "error" and summary["execution_status"] == "failed"
    assert summary["error"]["code"] == "legacy_cli_failed"
    assert "exit code 3" in summary["error"]["message"]
    finished = _finished(events)
    assert "fatal: the CLI broke" in finished["stderr_tail"]
    assert finished["unreadable_lines"] == ["this is not stream json"]
    assert world.api.posts == 0


def test_cancel_mid_run_kills_the_claude_cli_process_group(
        world: RepoWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capfd: pytest.CaptureFixture[str]) -> None:
    def cancel_once_waiting(server: ScriptedModelServer) -> None:
        deadline = time.monotonic() + 60
        while len(server.requests_for("anthropic")) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        db = world.database()
        try:
            repo = ExecutionRepository(db, settings_redactor())
            for row in repo.list(status="running"):
                repo.request_cancel(row.id)
        finally:
            db.dispose()

    cli = CLIS["claude"]
    summary, events = _run(cli, world, tmp_path, monkeypatch, capfd,
                           [tool_calls([cli.noop]), hang(60, text(json.dumps(DONE)))], {},
                           during=cancel_once_waiting)
    assert summary["outcome"] == "cancelled" and summary["execution_status"] == "cancelled"
    assert _group_gone(_finished(events)["cli_pid"])


def test_a_cli_silent_past_the_stall_limit_is_stopped_as_stalled(
        world: RepoWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capfd: pytest.CaptureFixture[str]) -> None:
    cli = CLIS["claude"]
    summary, events = _run(cli, world, tmp_path, monkeypatch, capfd,
                           [tool_calls([cli.noop]), hang(60, text(json.dumps(DONE)))],
                           {"stall_s": "3"})
    assert summary["outcome"] == "stalled" and summary["error"]["code"] == "stalled"
    assert _group_gone(_finished(events)["cli_pid"])
