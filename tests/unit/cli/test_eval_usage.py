"""``studio eval`` refuses bad input before anything runs: a hostile run id, a suite that does
not exist or holds a bad task, an unknown provider, an unknown run, an unknown format; each
exits 2 with a stable code, and no eval run or execution is recorded."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from services.cli.main import app
from services.db.evals import EvalRepository
from services.db.models import NodeExecution
from services.db.session import open_database
from services.settings import get_settings
from tests.support.settings import sqlite_settings


@pytest.fixture
def database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = tmp_path / "studio.db"
    monkeypatch.setenv("STUDIO_DATABASE_URL", f"sqlite:///{path}")
    monkeypatch.setenv("STUDIO_DATA_DIR", str(tmp_path / "data"))
    get_settings.cache_clear()
    yield path
    get_settings.cache_clear()


def test_bad_input_is_refused_with_a_code_and_records_nothing(database: Path,
                                                              tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    (suite / "tasks" / "t").mkdir(parents=True)
    (suite / "suite.json").write_text(json.dumps({"tasks": ["t"]}))
    (suite / "tasks" / "t" / "task.json").write_text(json.dumps({
        "prompt": "p", "repo": "../../..", "base_commit": "zz", "fail_to_pass": ["x"]}))
    runner = CliRunner()
    for args, expected in (
            (["run", "builtin", "--id", "../../etc"], "--id is 1-36"),
            (["run", str(tmp_path / "missing")], "invalid_suite"),
            (["run", str(suite)], "invalid_suite: "),  # base_commit is not hexadecimal
            (["run", "builtin", "--provider", "<b>nope</b>"], "invalid_matrix"),
            (["run", "builtin", "--repeat", "0"], "invalid_matrix"),
            (["show", "no-such-run"], "unknown_eval_run"),
            (["show", "x", "--format", "svg"], "--format is one of"),
            (["compare", "a", "b", "--alpha", "2"], "alpha")):
        done = runner.invoke(app, ["eval", *args])
        assert done.exit_code == 2, (args, done.output)
        assert expected in done.output, (args, done.output)
    db = open_database(sqlite_settings(database))
    try:
        assert EvalRepository(db).runs() == []
        with db.session() as session:
            assert session.query(NodeExecution).count() == 0
    finally:
        db.dispose()
