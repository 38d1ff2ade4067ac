"""Model fallback and price overrides, end to end through the real SDKs and the scripted model
server: codex answers 503 to every attempt after its first turn, the next model of ``models``
(gemini, or claude through its bundled Claude Code CLI) takes over with the conversation so far,
the run finishes, the switch is journalled and shown by ``studio executions show``, and every
cost is counted at the configured ``STUDIO_MODEL_PRICES``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from services.db.executions import ExecutionRepository
from services.db.session import Database
from services.execution.agent_profile import ModelChoice
from services.execution.profile_checks import agent_profile
from services.runs.request import ExecutionRequest
from services.runs.service import ExecutionService
from tests.integration.databases import url_of
from tests.integration.runs.cli_runs import STUDIO
from tests.support import warm_cli
from tests.support.model_requests import RequestRecord
from tests.support.model_script import Reply, Usage
from tests.support.model_server import ScriptedModelServer, error, text, tool_calls
from tests.support.settings import studio_settings

API_KEY = "sk-fallback-test-KEY-77d1e0"
DONE = json.dumps({"status": "success", "summary": "finished after the fallback"})
TARGETS: dict[str, tuple[str, str, str]] = {  # provider: (model, vendor, base-URL variable)
    "gemini": ("gemini-2.5-pro", "gemini", "GOOGLE_GEMINI_BASE_URL"),
    "claude": ("claude-sonnet-4-5", "anthropic", "ANTHROPIC_BASE_URL"),
}
PRICES = {"gpt-5.1": {"input": 10.0, "output": 20.0},
          "gemini-2.5-pro": {"input": 1000.0, "output": 2000.0},
          "claude-sonnet-4-5": {"input": 1000.0, "output": 2000.0}}


class CodexGoesDown:
    """Codex answers its first turn (one tool call), then 503 to every attempt; every other
    vendor answers the final JSON (or 503 too, with ``all_down``)."""

    def __init__(self, all_down: bool = False) -> None:
        self.all_down = all_down
        self.openai = 0

    def __call__(self, record: RequestRecord) -> Reply:
        if record.vendor == "openai":
            self.openai += 1
            if self.openai == 1:
                return tool_calls([("workspace_write_file",
                                    {"path": "notes.txt", "content": "written by codex"})])
            return error(503, {"error": {"message": "overloaded", "type": "server_error"}})
        if self.all_down:
            return error(503)
        return text(DONE, usage=Usage(input_tokens=100, output_tokens=20))


def _environment(monkeypatch: pytest.MonkeyPatch, server: ScriptedModelServer) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    for provider, (_, _, url_env) in TARGETS.items():
        monkeypatch.setenv(url_env, server.url)
        monkeypatch.setenv("GEMINI_API_KEY" if provider == "gemini" else "ANTHROPIC_API_KEY",
                           API_KEY)


def _run(db: Database, tmp_path: Path, target: str, script: CodexGoesDown,
         monkeypatch: pytest.MonkeyPatch) -> tuple[str, ScriptedModelServer]:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    settings = studio_settings(tmp_path / "data", model_prices=PRICES)
    profile = agent_profile("codex", None, models=[
        "codex:gpt-5.1", {"provider": target, "model": TARGETS[target][0]}])
    with ScriptedModelServer([script] * 40) as server:
        _environment(monkeypatch, server)
        outcome = ExecutionService(db, settings).run(ExecutionRequest(
            provider="codex", model="gpt-5.1", prompt="Write notes, then finish.",
            workspace=workspace, profile=profile))
    return outcome.execution_id, server


def _events(db: Database, execution_id: str) -> list[tuple[str, dict[str, Any]]]:
    return [(e.kind, dict(e.data)) for e in ExecutionRepository(db).events(execution_id)]


@pytest.mark.parametrize("target", list(TARGETS))
def test_a_provider_down_on_every_attempt_hands_over_to_the_next_model(
        target: str, db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model, vendor, _ = TARGETS[target]
    execution_id, server = _run(db, tmp_path, target, CodexGoesDown(), monkeypatch)
    row = ExecutionRepository(db).get(execution_id)
    assert row is not None and row.status == "succeeded", (row.error_code, row.error_message)
    assert (tmp_path / "ws" / "notes.txt").read_text() == "written by codex"
    assert len(server.requests_for("openai")) == 4  # one turn, then three attempts of 503
    events = _events(db, execution_id)
    switches = [data for kind, data in events if kind == "model_fallback"]
    assert switches == [{
        "from": {"provider": "codex", "model": "gpt-5.1"},
        "to": {"provider": target, "model": model},
        "reason": {"code": "provider_unavailable", "message": switches[0]["reason"]["message"]},
        "position": 1,
    }]
    finished = [data for kind, data in events if kind == "finished"]
    assert finished[-1]["finished_with"] == {"provider": target, "model": model}
    assert finished[-1]["outcome"] == "finished"
    # the next model got the conversation so far: codex's tool call and its result
    taken_over = server.requests_for(vendor)
    assert taken_over
    if target == "gemini":
        results = server.tool_results(taken_over[0])
        assert [r.name for r in results] == ["workspace_write_file"]
    else:
        assert "workspace_write_file" in taken_over[0].raw_body.decode()
        assert "written by codex" in taken_over[0].raw_body.decode()
    # each cost at the configured override, and the usage records say so
    usages = [data for kind, data in events if kind == "usage"]
    assert {u["price"]["source"] for u in usages} == {"override"}
    codex_cost = (100 * 10.0 + 20 * 20.0) / 1_000_000
    assert usages[0]["delta"]["cost_usd"] == pytest.approx(codex_cost)
    if target == "gemini":
        assert row.cost_usd == pytest.approx(codex_cost + (100 * 1000 + 20 * 2000) / 1_000_000)
    else:
        assert row.cost_usd > codex_cost  # the CLI's session, counted at the override
    assert row.settings_snapshot["price_overrides"]["gemini-2.5-pro"]["input"] == 1000.0
    assert row.settings_snapshot["agent"]["models"][1] == {"provider": target, "model": model}


def test_the_switch_and_the_prices_appear_in_studio_executions_show(
        db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    execution_id, _ = _run(db, tmp_path, "gemini", CodexGoesDown(), monkeypatch)
    env = {"STUDIO_DATABASE_URL": url_of(db), "HOME": str(tmp_path),
           "STUDIO_DATA_DIR": str(tmp_path / "data"), "PATH": "/usr/bin:/bin"}
    shown = warm_cli.run([*STUDIO, "executions", "show", execution_id, "--json"], env=env,
                         capture_output=True, text=True, timeout=120, check=False)
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout.strip().splitlines()[-1])
    assert [f["to"]["provider"] for f in data["model_fallbacks"]] == ["gemini"]
    assert data["settings_snapshot"]["price_overrides"]["gpt-5.1"] == {"input": 10.0,
                                                                      "output": 20.0}
    table = warm_cli.run([*STUDIO, "executions", "show", execution_id], env=env,
                         capture_output=True, text=True, timeout=120, check=False)
    assert table.returncode == 0, table.stderr
    assert "codex:gpt-5.1 -> gemini:gemini-2.5-pro (provider_unavailable" in table.stdout
    assert "price_overrides" in table.stdout and "codex:gpt-5.1, gemini:gemini-2.5-pro" \
        in table.stdout


def test_when_every_model_is_down_the_run_fails_unavailable_after_each_switch(
        db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    execution_id, server = _run(db, tmp_path, "gemini", CodexGoesDown(all_down=True),
                                monkeypatch)
    row = ExecutionRepository(db).get(execution_id)
    assert row is not None and row.status == "failed"
    assert row.error_code == "provider_unavailable"
    assert len(server.requests_for("gemini")) == 3  # its own retries, then nothing left
    switches = [data for kind, data in _events(db, execution_id) if kind == "model_fallback"]
    assert [s["to"]["provider"] for s in switches] == ["gemini"]


def test_a_model_that_cannot_be_built_is_skipped_with_a_warning(
        db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """replay without a script cannot take over: skipped (``model_fallback_failed``), the next
    one does."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    profile = agent_profile("codex", "gpt-5.1", models=[
        ModelChoice("codex", "gpt-5.1"), "replay", "gemini:gemini-2.5-pro"])
    with ScriptedModelServer([CodexGoesDown()] * 40) as server:
        _environment(monkeypatch, server)
        outcome = ExecutionService(db, studio_settings(tmp_path / "data")).run(ExecutionRequest(
            provider="codex", model="gpt-5.1", prompt="Go.", workspace=workspace,
            profile=profile))
    events = _events(db, outcome.execution_id)
    assert outcome.status == "succeeded"
    warnings = [d for k, d in events if k == "warning" and d["code"] == "model_fallback_failed"]
    assert len(warnings) == 1 and "replay" in warnings[0]["message"]
    switches = [d for k, d in events if k == "model_fallback"]
    assert [(s["to"]["provider"], s["position"]) for s in switches] == [("gemini", 2)]
