"""The whole repository workflow for every provider: ``studio run --repo`` through the real SDKs.

codex (``openai``), gemini (``google-genai``) and claude (``claude-agent-sdk`` driving the bundled
Claude Code CLI) talk to the scripted model server; replay follows a script. Against the
token-guarded smart-HTTP git host and the GitHub REST API: clone, the execution's branch, edit,
run the repository's tests, commit, push, pull request (the agent asks for it through
``git.create_pull_request``; the finalizer then reuses it through the same keyed port). The PR's
head is the pushed commit; the token is nowhere in the workspace (``.git/config`` included), the
logs, the database file or the journal.
"""

from __future__ import annotations

import base64
import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.cli.main import main
from services.db.executions import ExecutionRepository
from services.execution.providers.claude_tools import allowed_tool_name
from services.repos.workspaces import attempt_directory
from services.settings import get_settings
from tests.integration.repo_env import DONE, TEST_ARGV, TOKEN, RepoWorld, last_json, repo_world
from tests.support.model_script import Step, text, tool_calls
from tests.support.model_server import ScriptedModelServer
from tests.support.redaction import settings_redactor

PROVIDERS = ("codex", "gemini", "claude", "replay")
API_KEY = "sk-e2e-PROVIDERKEY-4f1c9a7e2b"
SECRETS = (TOKEN, base64.b64encode(f"x-access-token:{TOKEN}".encode()).decode())
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("workspace_edit_file", {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}),
    ("command_run", {"argv": TEST_ARGV}),
    ("git_add", {"paths": ["calc.py"]}),
    ("git_commit", {"message": "Fix add(): return the sum"}),
    ("git_push", {}),
    ("git_create_pull_request", {"title": "Fix add()", "body": "The sum, not the difference."}),
]


def _steps(provider: str) -> list[Step]:
    rename = allowed_tool_name if provider == "claude" else (lambda name: name)
    steps: list[Step] = [tool_calls([(rename(name), args)]) for name, args in CALLS]
    return [*steps, text(json.dumps(DONE))]


def _replay_script(path: Path) -> Path:
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"tool": name.replace("_", ".", 1), "args": args}]}
        for name, args in CALLS]
    path.write_text(json.dumps({"turns": [*turns, {"final": DONE}]}))
    return path


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


def _configure(monkeypatch: pytest.MonkeyPatch, world: RepoWorld, workspaces: Path,
               model_url: str | None) -> None:
    wanted = world.env(workspaces)
    for name in [n for n in os.environ if n not in wanted]:
        monkeypatch.delenv(name)
    for name, value in wanted.items():
        monkeypatch.setenv(name, value)
    if model_url is not None:
        monkeypatch.setenv("OPENAI_BASE_URL", model_url + "/v1")
        monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", model_url)
        monkeypatch.setenv("GEMINI_API_KEY", API_KEY)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", model_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    get_settings.cache_clear()


def _files_holding_secrets(root: Path) -> list[Path]:
    found = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            if any(s.encode() in data for s in SECRETS):
                found.append(path)
    return found


@pytest.mark.parametrize("provider", PROVIDERS)
def test_clone_edit_test_commit_push_pr(provider: str, world: RepoWorld, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch,
                                        caplog: pytest.LogCaptureFixture,
                                        capfd: pytest.CaptureFixture[str]) -> None:
    caplog.set_level(logging.DEBUG)
    workspaces = tmp_path / "workspaces"
    args = ["run", "Make the failing test pass.", "--repo", world.url, "--provider", provider,
            "--keep-workspace", "--json"]
    server = ScriptedModelServer(_steps(provider)) if provider != "replay" else None
    if server is None:
        args += ["--script", str(_replay_script(tmp_path / "script.json"))]
    else:
        server.start()
    try:
        _configure(monkeypatch, world, workspaces, server.url if server else None)
        code = _studio(args)
    finally:
        if server is not None:
            server.stop()
        get_settings.cache_clear()
    out, err = capfd.readouterr()
    assert code == 0, err
    summary = last_json(out)
    branch, head = summary["branch"], summary["head_sha"]
    assert summary["status"] == "success" and summary["execution_status"] == "succeeded"
    assert branch.startswith(f"studio/{summary['execution_id']}-")

    assert [u.ref for u in world.host.pushes_of(branch)] == [f"refs/heads/{branch}"]
    assert world.api.branch_sha("acme", "widgets", branch) == head
    pulls = world.pulls_of(branch)
    assert len(pulls) == 1 and pulls[0].base == "main" and world.api.posts == 1
    assert summary["pr_url"].endswith(f"/acme/widgets/pull/{pulls[0].number}")
    assert "a + b" in (world.remote_file(branch, "calc.py") or "")

    db = world.database()
    try:
        repo = ExecutionRepository(db, settings_redactor())
        results = [e.data["envelope"] for e in repo.events(summary["execution_id"])
                   if e.kind == "tool_result"]
        assert [r["ok"] for r in results] == [True] * len(CALLS)
        tests_run = results[1]["result"]
        assert tests_run["exit_code"] == 0, tests_run
        assert results[5]["result"]["url"] == summary["pr_url"]
        journal = json.dumps([e.data for e in repo.events(summary["execution_id"])])
        finished = [e.data for e in repo.events(summary["execution_id"]) if e.kind == "finished"]
        evidence = json.dumps([c.envelope for c in repo.tool_calls(summary["execution_id"])])
    finally:
        db.dispose()

    kept_ws = attempt_directory(workspaces, summary["execution_id"], 1) / "repo"  # attempt 1
    assert (kept_ws / ".git" / "config").is_file()
    kept = world.root / "data" / "transcripts" / summary["execution_id"]
    if provider == "claude":  # the CLI's session transcript is kept with the execution
        assert finished[-1]["transcript_path"].startswith(str(kept))
        transcript = Path(finished[-1]["transcript_path"]).read_text()
        assert "tool_result" in transcript and API_KEY not in transcript
    else:
        assert not kept.exists()
    assert _files_holding_secrets(workspaces) == []
    for text_seen in (caplog.text, out, err, journal, evidence):
        assert not any(s in text_seen for s in SECRETS)
    database = [p for p in tmp_path.glob("studio.db*") if p.is_file()]
    assert database and not any(s.encode() in p.read_bytes() for p in database
                                for s in SECRETS)
