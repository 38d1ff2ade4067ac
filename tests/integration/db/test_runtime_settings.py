"""Runtime settings, the cutover rule, and DbRunControl (kill switch, cancellation)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from services.db.control import DbRunControl
from services.db.executions import ExecutionRepository
from services.db.runtime_settings import (
    InvalidSettingValue,
    SettingsRepository,
    UnknownSetting,
    effective_cutover,
)
from services.db.session import Database, open_database
from services.execution.errors import ErrorCode
from tests.integration.databases import url_of
from tests.integration.db.cli_helpers import studio
from tests.integration.db.helpers import new_execution
from tests.support.settings import sqlite_settings


def test_defaults_and_validation(db: Database) -> None:
    repo = SettingsRepository(db)
    assert repo.all() == {"agent_runtime_cutover_enabled": True, "killswitch_engaged": False,
                          "node_overrides_allowed": False,
                          "approval_self_allowed": False, "team_concurrency_limit": 0,
                          "max_iterations": 24, "max_budget_usd": 2.0,
                          "repo_daily_budget_usd": 20.0, "wall_clock_s": 3600.0,
                          "stall_s": 600.0, "lease_ttl_s": 60.0, "heartbeat_s": 15.0,
                          "reaper_interval_s": 30.0, "queued_timeout_s": 60.0,
                          "max_attempts": 5, "trigger_debounce_s": 15.0,
                          "context_token_budget": 120000, "compaction_enabled": True,
                          "context_window_tokens": 0, "context_high_mark": 0.8,
                          "context_low_mark": 0.5, "context_keep_turns": 4,
                          "retry_base_s": 30.0, "retry_factor": 2.0,
                          "retry_max_delay_s": 900.0, "retry_max_attempts": 5}
    assert repo.set("max_budget_usd", 3) == 3.0
    assert repo.get("max_budget_usd") == 3.0
    with pytest.raises(InvalidSettingValue):
        repo.set("killswitch_engaged", "yes")
    with pytest.raises(UnknownSetting):
        repo.set("no_such_key", 1)
    assert repo.limits({"max_iterations": 5, "prompt": "x"})["max_iterations"] == 5


def test_cutover_override_wins_then_setting_then_default(db: Database) -> None:
    repo = SettingsRepository(db)
    assert effective_cutover(repo, {}) == (True, "default")
    repo.set("agent_runtime_cutover_enabled", False)
    assert effective_cutover(repo, {}) == (False, "runtime_setting")
    assert effective_cutover(repo, {"__agent_runtime_cutover_enabled": True}) == \
        (True, "node_override")
    snapshot = repo.snapshot({"__agent_runtime_cutover_enabled": True, "max_iterations": 3})
    assert snapshot["agent_runtime_cutover_enabled"] == {"value": True, "source": "node_override"}
    assert snapshot["limits"]["max_iterations"] == 3


def test_run_control_sees_killswitch_and_cancel_fresh(db: Database) -> None:
    execution_id = new_execution(db)
    control, repo = DbRunControl(db, execution_id), SettingsRepository(db)
    assert control.check() is None
    repo.set("killswitch_engaged", True)
    assert control.check() is ErrorCode.KILLSWITCH_ENGAGED
    repo.set("killswitch_engaged", False)
    assert control.check() is None
    ExecutionRepository(db).request_cancel(execution_id)
    assert control.check() is ErrorCode.CANCELLED
    assert DbRunControl(db, new_execution(db)).check() is None


def test_killswitch_cli_stops_run_control(tmp_path: Path) -> None:
    path = tmp_path / "studio.db"
    db = open_database(sqlite_settings(path))
    try:
        control = DbRunControl(db, new_execution(db))
        assert control.check() is None
        done = studio(url_of(db), "killswitch", "on")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == {"key": "killswitch_engaged", "value": True}
        assert control.check() is ErrorCode.KILLSWITCH_ENGAGED
        assert studio(url_of(db), "killswitch", "off").returncode == 0
        assert control.check() is None
    finally:
        db.dispose()


def test_settings_cli_get_set_and_refusals(sqlite_db: Database) -> None:
    url = url_of(sqlite_db)
    assert studio(url, "settings", "set", "max_iterations", "7").returncode == 0
    assert studio(url, "settings", "get", "max_iterations").stdout.strip() == "7"
    assert SettingsRepository(sqlite_db).get("max_iterations") == 7
    unknown = studio(url, "settings", "set", "max_iteratons", "7")
    assert unknown.returncode == 2
    assert "unknown setting 'max_iteratons'" in unknown.stderr
    wrong = studio(url, "settings", "set", "max_iterations", "many")
    assert wrong.returncode == 2 and "expects a int" in wrong.stderr
