"""What one durable attempt reads (``execute_execution`` in this process, replay provider, the
local git host): the journal once before the loop and once after it, however many times the
finalization is tried and however the run ends, and the last checkpoint of a resumed attempt
once. Counted with SQLAlchemy's statement hook (:mod:`tests.support.database_use`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from services.db.executions import ExecutionRepository
from services.db.redaction import Redactor
from services.db.session import Database, open_database
from services.runs.approvals import decide_approval
from services.runs.durable import execute_execution
from services.runs.request import ExecutionRequest, create_execution
from services.settings import StudioSettings
from tests.integration.repo_env import DONE, TOKEN, RepoWorld, repo_world
from tests.support.database_use import DatabaseUse, database_use
from tests.support.redaction import settings_redactor
from tests.support.settings import studio_settings

SCRIPT: dict[str, Any] = {"turns": [
    {"tool_calls": [
        {"tool": "workspace.write_file", "args": {"path": "notes.txt", "content": "n\n"}},
        {"tool": "command.run", "args": {"argv": ["sh", "-c", "echo ran >> gated.txt"]}}]},
    {"final": DONE},
]}


@pytest.fixture
def world(tmp_path: Path) -> Any:
    with repo_world(tmp_path) as world:
        yield world


@pytest.fixture
def database(world: RepoWorld, db_url: str) -> Any:
    settings = studio_settings(world.root / "data", database_url=db_url, github_token=TOKEN,
                               github_api_url=world.api.api_url,
                               github_git_origins=[world.host.base_url],
                               repo_allowed_hosts=["127.0.0.1"],
                               workspace_dir=world.root / "workspaces")
    db = open_database(settings)
    yield db, settings
    db.dispose()


def _create(db: Database, settings: StudioSettings, world: RepoWorld, **request: Any) -> str:
    return create_execution(db, ExecutionRequest(
        provider="replay", prompt="Write notes", repo_url=world.url, script=SCRIPT,
        **request), Redactor([TOKEN]), settings=settings)


def _journal_reads(use: DatabaseUse) -> int:
    """Reads of the whole journal (what a resume and the finalization work from), not the
    single-row lookups of a write."""
    return use.selects("FROM execution_events", "ORDER BY execution_events.seq")


def _latest_checkpoint_reads(use: DatabaseUse) -> int:
    """Reads of the last checkpoint (not the store's next sequence number)."""
    return use.selects("FROM workspace_checkpoints", "ORDER BY workspace_checkpoints.seq DESC")


def test_a_resumed_attempt_reads_the_journal_once_per_phase_and_its_checkpoint_once(
        world: RepoWorld, database: tuple[Database, StudioSettings]) -> None:
    db, settings = database
    execution_id = _create(db, settings, world, pull_request=False,
                           approval_policy={"command.run": "require"})
    paused = execute_execution(execution_id, settings=settings, db=db)
    assert paused.state == "awaiting_approval", paused  # a checkpoint of notes.txt is kept
    approval = ExecutionRepository(db).events(execution_id)
    approval_id = next(e.data["approval_id"] for e in approval
                       if e.kind == "approval_requested")
    decide_approval(db, execution_id, approval_id, "approve", by="alice", reason=None,
                    dispatch=lambda _id: None, redactor=settings_redactor())
    with database_use() as use:
        outcome = execute_execution(execution_id, settings=settings, db=db)
    assert outcome.status == "succeeded", outcome
    assert world.remote_file(outcome.branch or "", "gated.txt") == "ran\n"
    assert _latest_checkpoint_reads(use) == 1  # the resumed attempt's last one
    assert _journal_reads(use) == 2  # before the loop, after it


def test_a_finalization_tried_three_times_reads_the_journal_once_after_the_loop(
        world: RepoWorld, database: tuple[Database, StudioSettings]) -> None:
    db, settings = database
    world.api.fail_next.extend([502] * 10)  # every pull request attempt fails
    execution_id = _create(db, settings, world)
    with database_use() as use:
        outcome = execute_execution(execution_id, settings=settings, db=db)
    assert outcome.status == "queued", outcome  # an infrastructure error: retried later
    kinds = [e.kind for e in ExecutionRepository(db).events(execution_id)]
    assert kinds.count("finished") == 1  # the loop's: the failed finalization adds none
    assert sum(1 for k in kinds if k == "finalize") >= 3  # the positive control: three tries
    assert _journal_reads(use) == 2
