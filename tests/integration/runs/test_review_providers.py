"""Each provider produces a valid structured review over its wire server, through its real SDK
(claude through the real Claude Code CLI): the first answer is malformed, the repair turn gives
the review, which is posted; two malformed answers fail the execution with ``review_invalid``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from services.db.executions import ExecutionRepository
from services.runs.review_start import start_review
from services.runs.service import ExecutionService
from tests.integration.repo_env import RepoWorld, repo_world
from tests.integration.runs.review_world import BUG_LINE, BUGGY, finding, push_branch, review_json
from tests.support.model_requests import RequestRecord
from tests.support.model_script import Reply
from tests.support.model_server import ScriptedModelServer, text, tool_calls

KEY = "sk-review-providers-KEY-77c1"
MODELS = {"codex": "gpt-5.1", "gemini": "gemini-2.5-pro", "claude": "claude-sonnet-4-5"}


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    for name in ("OPENAI_API_KEY", "GEMINI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.setenv(name, KEY)
    with repo_world(tmp_path) as world:
        push_branch(world, "feature", {"stats.py": BUGGY})
        world.api.add_pull("acme", "widgets", "feature", "main")
        yield world


def _answers(*answers: str) -> Any:
    """The model's answer to each session or turn: the next one once the repair was asked."""
    def reply(record: RequestRecord) -> Reply:
        repaired = b"could not be used" in record.raw_body
        return text(answers[1] if repaired else answers[0])
    return reply


def _run(world: RepoWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, provider: str,
         *answers: str) -> tuple[str, Any]:
    settings = world.settings().model_copy(update={"workspace_dir": tmp_path / "ws"})
    db = world.database()
    with ScriptedModelServer([_answers(*answers)] * 40) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        execution_id = start_review(db, settings, world.url, 1, provider=provider,
                                    model=MODELS[provider])
        ExecutionService(db, settings).execute_recorded(execution_id)
        vendors = {r.vendor for r in server.requests}
    row = ExecutionRepository(db).get(execution_id)
    db.dispose()
    assert vendors, "the provider never called its wire server"
    return execution_id, row


@pytest.mark.parametrize("provider", ["codex", "gemini", "claude"])
def test_each_provider_reviews_after_one_repair_turn(
        world: RepoWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        provider: str) -> None:
    _, row = _run(world, tmp_path, monkeypatch, provider, "I think it is fine.",
                  review_json(finding()))
    assert row is not None and row.status == "succeeded", (row.error_code, row.error_message)
    assert [(c["path"], c["line"]) for c in world.api.reviews.comments_of(1)] == [
        ("stats.py", BUG_LINE)]


def _structured(record: RequestRecord) -> Reply:
    """The model hands the review to the CLI's ``StructuredOutput`` tool, then says "done"."""
    if b'"type":"tool_result"' in record.raw_body:
        return text("Done.")
    return tool_calls([("StructuredOutput", json.loads(review_json(finding())))])


def test_claude_answers_through_the_sdks_structured_output(
        world: RepoWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = world.settings().model_copy(update={"workspace_dir": tmp_path / "ws"})
    db = world.database()
    with ScriptedModelServer([_structured] * 40) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        execution_id = start_review(db, settings, world.url, 1, provider="claude",
                                    model=MODELS["claude"])
        ExecutionService(db, settings).execute_recorded(execution_id)
        declared = {t.name for r in server.requests_for("anthropic")
                    for t in server.declared_tools(r)}
    row = ExecutionRepository(db).get(execution_id)
    db.dispose()
    assert "StructuredOutput" in declared  # the schema went to the CLI as structured output
    # the final text was "Done.": only the structured output can have given the review
    assert row is not None and row.status == "succeeded", (row.error_code, row.error_message)
    assert [(c["path"], c["line"]) for c in world.api.reviews.comments_of(1)] == [
        ("stats.py", BUG_LINE)]


def test_two_malformed_answers_fail_with_review_invalid(
        world: RepoWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, row = _run(world, tmp_path, monkeypatch, "codex", '{"summary": "x"}',
                  '{"verdict": "maybe"}')
    assert row is not None and (row.status, row.error_code) == ("failed", "review_invalid")
    assert world.api.reviews.of(1) == []
