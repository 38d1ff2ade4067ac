"""The agent fields on the durable path (what ``studio execute`` runs for a repository): the
profile recorded on the execution's row is read back by whichever process runs it, the role
restricts its tools, the fallback takes over, and a resumed execution starts at the model its
journal last fell back to (not at the first one again)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from services.db.executions import ExecutionRepository
from services.db.journal import DbEventSink
from services.db.redaction import Redactor
from services.db.session import Database
from services.execution.ports import AgentEvent, AgentEventKind
from services.execution.profile_checks import agent_profile
from services.execution.tool_domains.registry import default_registry
from services.runs.durable import execute_execution
from services.runs.request import ExecutionRequest, create_execution
from services.runs.service import ExecutionService
from services.settings import StudioSettings
from tests.support.model_requests import RequestRecord
from tests.support.model_script import Reply
from tests.support.model_server import ScriptedModelServer, error, text
from tests.support.redaction import settings_redactor
from tests.support.settings import studio_settings

API_KEY = "sk-durable-agent-KEY-1d9f"
DONE = json.dumps({"status": "success", "summary": "looked"})


def _repository(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "README.md").write_text("# project\n")
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(root.parent)}
    for argv in (["git", "init", "-q", "-b", "main"], ["git", "add", "-A"],
                 ["git", "-c", "user.name=t", "-c", "user.email=t@localhost", "commit", "-qm",
                  "init"]):
        subprocess.run(argv, cwd=root, check=True, env=env, capture_output=True)
    return root


def _codex_down(record: RequestRecord) -> Reply:
    return error(503) if record.vendor == "openai" else text(DONE)


@pytest.fixture
def wired(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> StudioSettings:
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    monkeypatch.setenv("GEMINI_API_KEY", API_KEY)
    return studio_settings(tmp_path / "data", workspace_dir=tmp_path / "workspaces")


def _request(repo: Path) -> ExecutionRequest:
    return ExecutionRequest(
        provider="codex", model="gpt-5.1", prompt="Look around.", repo_url=str(repo),
        pull_request=False, allow_local=True,
        profile=agent_profile("codex", "gpt-5.1", role="reviewer",
                              system_prompt="DURABLE-NODE-PROMPT",
                              models=["codex:gpt-5.1", "gemini:gemini-2.5-pro"]))


def test_a_repository_run_keeps_its_role_and_falls_back(
        db: Database, wired: StudioSettings, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    repo = _repository(tmp_path / "repo")
    with ScriptedModelServer([_codex_down] * 20) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", server.url)
        outcome = ExecutionService(db, wired).run(_request(repo))
        gemini = server.requests_for("gemini")
    assert outcome.status == "succeeded", outcome
    assert gemini and "DURABLE-NODE-PROMPT" in json.dumps(gemini[0].body)
    declared = {t.name for t in server.declared_tools(gemini[0])}
    assert declared == {s.name for s in default_registry().specs() if not s.mutates}
    kinds = [e.kind for e in ExecutionRepository(db,
                                                 settings_redactor()).events(outcome.execution_id)]
    assert kinds.count("model_fallback") == 1


def test_a_resumed_execution_starts_at_the_model_it_fell_back_to(
        db: Database, wired: StudioSettings, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    repo = _repository(tmp_path / "repo")
    execution_id = create_execution(db, _request(repo), Redactor(), settings=wired)
    journal = DbEventSink(db, Redactor())  # what an earlier attempt journalled before it died
    journal.emit(AgentEvent(AgentEventKind.STARTED, execution_id, 0,
                            {"provider": "codex", "model": "gpt-5.1", "task": "Look around."}))
    journal.emit(AgentEvent(AgentEventKind.MODEL_FALLBACK, execution_id, 0, {
        "from": {"provider": "codex", "model": "gpt-5.1"},
        "to": {"provider": "gemini", "model": "gemini-2.5-pro"},
        "reason": {"code": "provider_unavailable", "message": "503"}, "position": 1}))
    with ScriptedModelServer([_codex_down] * 20) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", server.url)
        outcome = execute_execution(execution_id, settings=wired, db=db)
        openai = server.requests_for("openai")
    assert outcome.status == "succeeded", outcome
    assert openai == []  # codex was not asked again
    finished = [e.data for e in ExecutionRepository(db).events(execution_id)
                if e.kind == "finished"]
    assert finished[-1]["finished_with"] == {"provider": "gemini", "model": "gemini-2.5-pro"}
    row = ExecutionRepository(db).get(execution_id)
    assert row is not None and row.provider == "codex"  # the row keeps the first model
