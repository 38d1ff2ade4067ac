"""``studio execute``'s durable path on a per-execution database login (what an executor pod
with ``STUDIO_KUBE_EXECUTION_LOGINS`` connects with), on the real PostgreSQL: the run claims its
lease, journals, checkpoints and finishes through the login alone, without STUDIO_SECRET_KEY,
while another execution's rows stay out of its reach."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from sqlalchemy import text as sql

from services.db.approvals import ApprovalRepository
from services.db.execution_logins import ExecutionLogins
from services.db.executions import ExecutionRepository
from services.db.redaction import Redactor
from services.db.session import Database, create_db_engine
from services.runs.approvals import decide_approval
from services.runs.durable import execute_execution
from services.runs.request import ExecutionRequest, create_execution
from tests.integration.repo_env import repo_world
from tests.integration.runs.test_approvals import _create as _approval_create
from tests.integration.runs.test_approvals import _settings as _approval_settings
from tests.support.model_script import Usage, tool_calls
from tests.support.model_server import ScriptedModelServer, text
from tests.support.redaction import settings_redactor
from tests.support.settings import studio_settings

API_KEY = "sk-login-run-KEY-5e1c"
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


def test_an_execution_runs_to_its_end_on_its_own_login(
        postgres_db: Database, postgres_url: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    settings = studio_settings(tmp_path / "data", workspace_dir=tmp_path / "workspaces")
    repo = _repository(tmp_path / "repo")
    request = ExecutionRequest(provider="codex", model="gpt-5.1", prompt="Look around.",
                               repo_url=str(repo), pull_request=False, allow_local=True)
    execution_id = create_execution(postgres_db, request, Redactor(), settings=settings)
    other = create_execution(postgres_db, request, Redactor(), settings=settings)
    logins = ExecutionLogins(postgres_db, postgres_url)
    login = logins.issue(execution_id, 600)
    pod_db = Database(create_db_engine(login.url.get_secret_value()))
    pod_settings = settings.model_copy(update={"secret_key": None})
    try:
        # a tool call (journal, evidence, a checkpoint) with spend (the repository's budget)
        write = tool_calls([("workspace_write_file", {"path": "NOTE.md", "content": "hi\n"})],
                           usage=Usage(input_tokens=1000, output_tokens=100))
        with ScriptedModelServer([write, text(DONE)]) as server:
            monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
            outcome = execute_execution(execution_id, settings=pod_settings, db=pod_db)
        assert outcome.status == "succeeded", outcome
        kinds = [e.kind for e in ExecutionRepository(postgres_db,
                                                     settings_redactor()).events(execution_id)]
        assert "finished" in kinds and "tool_result" in kinds, kinds
        with postgres_db.engine.begin() as connection:
            assert connection.execute(sql("SELECT count(*) FROM tool_calls WHERE execution_id "
                                          "= :i"), {"i": execution_id}).scalar() == 1
            assert connection.execute(sql("SELECT count(*) FROM workspace_checkpoints WHERE "
                                          "execution_id = :i"), {"i": execution_id}).scalar()
        with pod_db.engine.begin() as connection:  # the other execution: out of reach
            assert connection.execute(sql("SELECT count(*) FROM node_executions WHERE id = :i"),
                                      {"i": other}).scalar() == 0
        assert ExecutionRepository(postgres_db,
                                   settings_redactor()).get(other) is not None  # positive control
    finally:
        pod_db.dispose()
        logins.revoke(execution_id)


def test_an_approval_gate_pauses_and_resumes_on_its_logins(
        postgres_db: Database, postgres_url: str, tmp_path: Path) -> None:
    """The approval path (tests/integration/runs/test_approvals.py) with each attempt on its own
    login, as two Jobs of one execution would run: the first pauses at the gate (its pending
    approval and journal written through the login), a person decides through the deployment's
    connection, the second attempt (a new password) runs the call and finishes."""
    with repo_world(tmp_path) as world:
        settings = _approval_settings(world, postgres_url)
        execution_id = _approval_create(postgres_db, settings, world, {"command.run": "require"})
        logins = ExecutionLogins(postgres_db, postgres_url)
        pod_settings = settings.model_copy(update={"secret_key": None})
        try:
            for attempt, expected in enumerate(("awaiting_approval", "succeeded")):
                login = logins.issue(execution_id, 600)
                pod_db = Database(create_db_engine(login.url.get_secret_value()))
                try:
                    outcome = execute_execution(execution_id, settings=pod_settings, db=pod_db)
                finally:
                    pod_db.dispose()
                logins.revoke(execution_id)
                if attempt == 0:
                    assert outcome.state == expected, outcome
                    pending = ApprovalRepository(postgres_db).of_execution(execution_id)
                    assert [a["status"] for a in pending] == ["pending"]
                    decide_approval(postgres_db, execution_id, pending[0]["id"], "approve",
                                    by="alice", reason="ok", dispatch=lambda _: None,
                                    redactor=settings_redactor())
                else:
                    assert outcome.status == expected, outcome
        finally:
            logins.revoke(execution_id)
        kinds = [e.kind for e in ExecutionRepository(postgres_db,
                                                     settings_redactor()).events(execution_id)]
        assert kinds.count("approval_requested") == 1 and kinds.count("finished") == 1
