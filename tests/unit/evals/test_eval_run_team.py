"""An eval run belongs to a team: the one ``studio eval run --team`` names, else ``default``
(the CLI is an operator); an unknown ``--team`` is a usage error and records nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from services.cli.main import app
from services.db.evals import EvalRepository
from services.db.session import Database, open_database
from services.db.teams import TeamStore
from services.evals.matrix import build_matrix
from services.evals.runner import EvalRunner
from services.evals.suite import EvalTask, Suite
from services.settings import get_settings
from tests.support.settings import sqlite_settings

SUITE = Suite(name="s", source="here", tasks=(EvalTask(id="t", prompt="p", fixture={"a": "1"}),))


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = open_database(sqlite_settings(tmp_path / "studio.db"))
    yield database
    database.dispose()


def _runner(db: Database, team_id: str | None) -> EvalRunner:
    return EvalRunner(db, sqlite_settings(Path("unused.db")), lambda _: None, team_id=team_id)


def test_a_run_belongs_to_the_given_team_else_default(db: Database) -> None:
    teams = TeamStore(db)
    teams.create("beta")
    matrix = build_matrix(None, None, None, 1)
    mine = _runner(db, teams.id_of("beta")).start(SUITE, matrix)
    operators = _runner(db, None).start(SUITE, matrix)
    evals = EvalRepository(db)
    assert [r.id for r in evals.runs(team_id=teams.id_of("beta"))] == [mine]
    assert [r.id for r in evals.runs(team_id=teams.id_of("default"))] == [operators]
    # resumed by an operator without --team: it keeps its team
    assert _runner(db, None).start(SUITE, matrix, mine) == mine
    assert evals.get_run(mine) is not None and evals.get_run(mine).team_id == teams.id_of("beta")
    assert len(evals.runs()) == 2  # the control: both are there, unfiltered


def test_an_unknown_team_is_a_usage_error(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "studio.db"
    monkeypatch.setenv("STUDIO_DATABASE_URL", f"sqlite:///{path}")
    monkeypatch.setenv("STUDIO_DATA_DIR", str(tmp_path / "data"))
    get_settings.cache_clear()
    try:
        done = CliRunner().invoke(app, ["eval", "run", "builtin", "--team", "<b>nobody</b>"])
    finally:
        get_settings.cache_clear()
    assert done.exit_code == 2, done.output
    assert "no team <b>nobody</b>" in done.output
    db = open_database(sqlite_settings(path))
    try:
        assert EvalRepository(db).runs() == []
    finally:
        db.dispose()
