"""The legacy runtime for codex: cutover off runs the pinned Codex CLI (``codex exec --json``)
under bubblewrap against the scripted model server (OpenAI Responses over SSE).

Through the durable path: the CLI edits the file and runs the tests with its own shell tool; the
harness commits, pushes and opens one pull request; the journal holds the CLI's commands with
their output; the row says ``legacy``. The GitHub token and the database URL are nowhere in the
CLI's environment (printed by its shell), its home, or the journal. The repository carries a
``.codex/config.toml`` whose MCP server would write the provider key to a marker outside the
workspace: a control run of the same CLI trusting the project writes it, the runtime never does.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.cli.main import main
from services.db.executions import ExecutionRepository
from services.db.redaction import REDACTED
from services.runs.legacy_runtime import cli_home, npm_cli_dir
from services.settings import get_settings
from tests.conftest import IN_CI
from tests.e2e.legacy_hostile import hostile_files
from tests.integration.repo_env import DONE, TOKEN, RepoWorld, last_json, repo_world
from tests.support.model_script import Step, text, tool_calls
from tests.support.model_server import ScriptedModelServer
from tests.support.redaction import settings_redactor

API_KEY = "sk-legacy-codex-KEY-31c8e2"
MODEL = "gpt-5.1"


def _shell(command: str) -> Step:
    return tool_calls([("exec_command", {"cmd": command, "tty": False})])


STEPS: list[Step] = [
    _shell("sed -i 's/a - b/a + b/' calc.py"),
    _shell("python3 -m unittest -q 2>&1; echo EXIT=$?"),
    _shell("env; ls -a \"$HOME\""),
    text(json.dumps(DONE)),
]


@pytest.fixture
def markers(tmp_path: Path) -> Path:
    found = tmp_path / "markers"
    found.mkdir()
    return found


@pytest.fixture
def world(tmp_path: Path, markers: Path) -> Iterator[RepoWorld]:
    with repo_world(tmp_path, hostile_files(markers)) as world:
        yield world


def _studio(argv: list[str]) -> int:
    try:
        main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    raise AssertionError("main() always exits")


def _codex() -> Path:
    path = npm_cli_dir(get_settings()) / "codex"
    if not os.access(path, os.X_OK) and not IN_CI:
        pytest.skip("the Codex CLI is not installed (bash scripts/setup.sh)")
    return path


def test_cutover_off_runs_codex_confined_and_the_harness_finalizes(
        world: RepoWorld, markers: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capfd: pytest.CaptureFixture[str]) -> None:
    _codex()
    wanted = world.env(tmp_path / "workspaces", STUDIO_SANDBOX="bwrap")
    for name in [n for n in os.environ if n not in wanted]:
        monkeypatch.delenv(name)
    for name, value in wanted.items():
        monkeypatch.setenv(name, value)
    with ScriptedModelServer(STEPS) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
        monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
        get_settings.cache_clear()
        try:
            assert _studio(["settings", "set", "agent_runtime_cutover_enabled", "false"]) == 0
            capfd.readouterr()
            code = _studio(["run", "Make the failing test pass.", "--repo", world.url,
                            "--provider", "codex", "--model", MODEL, "--json"])
        finally:
            get_settings.cache_clear()
        assert server.requests_for("openai", "responses") and not server.unmatched
    out, err = capfd.readouterr()
    assert code == 0, err
    summary = last_json(out)
    assert summary["status"] == "success" and summary["execution_status"] == "succeeded"
    branch = summary["branch"]
    assert [u.ref for u in world.host.pushes_of(branch)] == [f"refs/heads/{branch}"]
    assert len(world.pulls_of(branch)) == 1 and world.api.posts == 1
    assert "a + b" in (world.remote_file(branch, "calc.py") or "")

    db = world.database()
    try:
        repo = ExecutionRepository(db, settings_redactor())
        row = repo.get(summary["execution_id"])
        events = repo.events(summary["execution_id"])
    finally:
        db.dispose()
    assert row is not None and row.runtime == "legacy"
    assert row.settings_snapshot["runtime"]["source"] == "runtime_setting"
    results = [e.data["envelope"] for e in events if e.kind == "tool_result"]
    assert [(r["tool_name"], r["domain"], r["ok"]) for r in results] == [
        ("command_execution", "command", True)] * 3
    assert "EXIT=0" in results[1]["result"]["output"]
    cli_env = results[2]["result"]["output"]
    assert "PATH=" in cli_env and "STUDIO_" not in cli_env and API_KEY not in cli_env
    # the journal is redacted: a secret in the CLI's environment would show as the marker; only
    # the provider's own key may
    assert all(line.startswith("OPENAI_API_KEY=") for line in cli_env.splitlines()
               if REDACTED in line)
    journal = json.dumps([e.data for e in events])
    home = cli_home(world.settings(), summary["execution_id"])
    home_text = "".join(p.read_text(errors="replace") for p in home.rglob("*") if p.is_file())
    for secret in (TOKEN, world.db_url):
        assert secret not in cli_env and secret not in journal and secret not in home_text
    assert list(markers.iterdir()) == []
    assert API_KEY not in journal


def test_the_codex_project_config_is_live_for_a_trusting_cli(
        world: RepoWorld, markers: Path, tmp_path: Path) -> None:
    """The control: trusting the project loads its ``.codex/config.toml`` MCP server."""
    codex = _codex()
    checkout = tmp_path / "checkout"
    subprocess.run(["git", "clone", "-q", str(world.host.bare("acme/widgets")), str(checkout)],
                   check=True, capture_output=True)
    home = tmp_path / "control-home"
    (home / ".codex").mkdir(parents=True)
    with ScriptedModelServer([text("ok")]) as server:
        env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "CODEX_HOME": str(home / ".codex"),
               "OPENAI_API_KEY": API_KEY}
        provider = (f'{{name="s", base_url="{server.url}/v1", env_key="OPENAI_API_KEY", '
                    'wire_api="responses"}')
        subprocess.run([str(codex), "exec", "--json", "--trust", "--skip-git-repo-check",
                        "-c", 'model_provider="s"', "-c", f"model_providers.s={provider}",
                        "--model", MODEL, "go"], cwd=checkout, env=env,
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=120, check=False)
    assert (markers / "codex-mcp").exists()  # started (Codex gives it no key)
