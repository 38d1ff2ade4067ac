"""The legacy runtime for gemini: cutover off runs the pinned Gemini CLI headless (stream-JSON)
under bubblewrap against the scripted model server (``streamGenerateContent`` over SSE).

Through the durable path: the CLI edits the file and runs the tests with its own shell tool; the
harness commits, pushes and opens one pull request; the journal holds the CLI's tool calls with
their output; the row says ``legacy``. The GitHub token and the database URL are nowhere in the
CLI's environment (printed by its shell), its home, or the journal. The repository's
``.gemini/settings.json`` carries an MCP server and a tool-discovery command that would write the
provider key to markers outside the workspace: a control run of the same CLI with folder trust
off runs both, the runtime (which hides ``.gemini/``) never does.
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

API_KEY = "sk-legacy-gemini-KEY-9b0d44"
MODEL = "gemini-2.5-pro"


def _shell(command: str) -> Step:
    return tool_calls([("run_shell_command", {"command": command})])


STEPS: list[Step] = [
    _shell("sed -i 's/a - b/a + b/' calc.py"),
    _shell("python3 -m unittest -q 2>&1; echo EXIT=$?"),
    _shell("env; ls -a \"$HOME\" .gemini"),
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


def _gemini() -> Path:
    path = npm_cli_dir(get_settings()) / "gemini"
    if not os.access(path, os.X_OK) and not IN_CI:
        pytest.skip("the Gemini CLI is not installed (bash scripts/setup.sh)")
    return path


def test_cutover_off_runs_gemini_confined_and_the_harness_finalizes(
        world: RepoWorld, markers: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capfd: pytest.CaptureFixture[str]) -> None:
    _gemini()
    wanted = world.env(tmp_path / "workspaces", STUDIO_SANDBOX="bwrap")
    for name in [n for n in os.environ if n not in wanted]:
        monkeypatch.delenv(name)
    for name, value in wanted.items():
        monkeypatch.setenv(name, value)
    with ScriptedModelServer(STEPS) as server:
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", server.url)
        monkeypatch.setenv("GEMINI_API_KEY", API_KEY)
        get_settings.cache_clear()
        try:
            assert _studio(["settings", "set", "agent_runtime_cutover_enabled", "false"]) == 0
            capfd.readouterr()
            code = _studio(["run", "Make the failing test pass.", "--repo", world.url,
                            "--provider", "gemini", "--model", MODEL, "--json"])
        finally:
            get_settings.cache_clear()
        assert server.requests_for("gemini") and not server.unmatched
    out, err = capfd.readouterr()
    assert code == 0, err
    summary = last_json(out)
    assert summary["status"] == "success" and summary["execution_status"] == "succeeded"
    branch = summary["branch"]
    assert [u.ref for u in world.host.pushes_of(branch)] == [f"refs/heads/{branch}"]
    assert len(world.pulls_of(branch)) == 1 and world.api.posts == 1
    assert "a + b" in (world.remote_file(branch, "calc.py") or "")
    # the harness's commit keeps the repository's own .gemini/ as it was
    assert world.remote_file(branch, ".gemini/settings.json") is not None

    db = world.database()
    try:
        repo = ExecutionRepository(db, settings_redactor())
        row = repo.get(summary["execution_id"])
        events = repo.events(summary["execution_id"])
    finally:
        db.dispose()
    assert row is not None and row.runtime == "legacy"
    results = [e.data["envelope"] for e in events if e.kind == "tool_result"]
    assert [(r["tool_name"], r["ok"]) for r in results] == [("run_shell_command", True)] * 3
    assert "EXIT=0" in results[1]["result"]["output"]
    cli_env = results[2]["result"]["output"]
    assert "PATH=" in cli_env and "STUDIO_" not in cli_env
    assert "settings.json" not in cli_env.split(".gemini", 1)[-1]  # hidden from the CLI
    # the journal is redacted: a secret in the CLI's environment would show as the marker; only
    # the provider's own key may
    assert all(line.startswith("GEMINI_API_KEY=") for line in cli_env.splitlines()
               if REDACTED in line)
    journal = json.dumps([e.data for e in events])
    home = cli_home(world.settings(), summary["execution_id"])
    home_text = "".join(p.read_text(errors="replace") for p in home.rglob("*") if p.is_file())
    for secret in (TOKEN, world.db_url):
        assert secret not in cli_env and secret not in journal and secret not in home_text
    assert list(markers.iterdir()) == []
    assert API_KEY not in journal
    assert any(e.kind == "usage" for e in events)


def test_the_gemini_workspace_settings_are_live_for_a_trusting_cli(
        world: RepoWorld, markers: Path, tmp_path: Path) -> None:
    """The control: with folder trust off, the CLI runs the workspace's MCP server and
    tool-discovery command."""
    gemini = _gemini()
    checkout = tmp_path / "checkout"
    subprocess.run(["git", "clone", "-q", str(world.host.bare("acme/widgets")), str(checkout)],
                   check=True, capture_output=True)
    home = tmp_path / "control-home"
    (home / ".gemini").mkdir(parents=True)
    (home / ".gemini" / "settings.json").write_text(json.dumps({
        "security": {"auth": {"selectedType": "gemini-api-key"},
                     "folderTrust": {"enabled": False}},
        "telemetry": {"enabled": False}, "privacy": {"usageStatisticsEnabled": False}}))
    with ScriptedModelServer([_shell("true"), text("ok")]) as server:
        env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "GEMINI_API_KEY": API_KEY,
               "GOOGLE_GEMINI_BASE_URL": server.url}
        subprocess.run([str(gemini), "-p", "go", "-o", "stream-json", "-m", MODEL,
                        "--approval-mode", "yolo"], cwd=checkout, env=env,
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=120, check=False)
    assert (markers / "gemini-mcp").read_text().split() == [API_KEY]
    assert (markers / "gemini-discovery").read_text().split() == [API_KEY]
