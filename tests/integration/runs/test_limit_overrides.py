"""An execution's own ``limit_overrides`` win over the runtime settings' defaults, at creation
and at every refresh before a call (the limits are re-read from the settings each cycle)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from services.db.executions import ExecutionRepository
from services.db.redaction import Redactor
from services.db.runtime_settings import RUNTIME_SETTINGS, SettingsRepository
from services.db.session import Database
from services.runs.durable import execute_execution
from services.runs.request import ExecutionRequest, create_execution
from tests.integration.databases import url_of
from tests.integration.repo_env import DONE, TOKEN, repo_world


def _script(turns: int) -> dict[str, Any]:
    steps = [{"tool_calls": [{"tool": "workspace.write_file",
                              "args": {"path": "notes.txt", "content": f"version {n}\n"}}]}
             for n in range(turns)]
    return {"turns": [*steps, {"final": DONE}]}


def _run(db: Database, tmp_path: Path, turns: int, overrides: dict[str, Any]) -> tuple[str, int]:
    with repo_world(tmp_path / "world") as base:
        world = replace(base, db_url=url_of(db))
        execution_id = create_execution(db, ExecutionRequest(
            provider="replay", prompt="Write notes", repo_url=world.url,
            script=_script(turns), pull_request=False, limit_overrides=overrides),
            Redactor([TOKEN]), settings=world.settings())
        outcome = execute_execution(execution_id, settings=world.settings(), db=db)
    kinds = [e.kind for e in ExecutionRepository(db).events(execution_id)]
    return outcome.status, kinds.count("tool_result")


def test_a_larger_max_iterations_override_wins_over_the_default(
        db: Database, tmp_path: Path) -> None:
    default = RUNTIME_SETTINGS["max_iterations"].default
    assert SettingsRepository(db).get("max_iterations") == default
    turns = default + 6
    status, results = _run(db, tmp_path, turns, {"max_iterations": turns + 2})
    assert (status, results) == ("succeeded", turns)


def test_without_the_override_the_default_stops_the_same_run(
        db: Database, tmp_path: Path) -> None:
    default = RUNTIME_SETTINGS["max_iterations"].default
    status, results = _run(db, tmp_path, default + 6, {})
    assert status == "failed" and results == default
