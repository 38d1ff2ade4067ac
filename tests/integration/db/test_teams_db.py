"""Teams in the database (SQLite and PostgreSQL): repository patterns and hostile values, the
claim's per-team concurrency limit and its order within a team, the monthly ledger's alerts."""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import delete

from services.db.leases import LeaseStore
from services.db.models import NodeExecution, Team
from services.db.runtime_settings import SettingsRepository
from services.db.session import Database
from services.db.team_admission import due
from services.db.team_budget import TeamLayer, month_view, read_state
from services.db.teams import (
    InvalidTeam,
    RepositoryNotInTeam,
    TeamStore,
    owning_team,
    repository_slug,
)
from tests.integration.db.helpers import new_execution


def test_repository_patterns_pick_the_most_specific_team(db: Database) -> None:
    store = TeamStore(db)
    a, b = store.create("a").id, store.create("b").id
    store.assign("acme/*", "a")
    store.assign("acme/api-?", "b")
    assert store.repository_team("https://git.example/acme/api-1.git") == b
    assert store.repository_team("https://git.example/acme/web") == a
    assert store.repository_team("https://git.example/other/web") is None
    assert owning_team(db, "https://git.example/acme/web", a) == a
    with pytest.raises(RepositoryNotInTeam):
        owning_team(db, "https://git.example/acme/api-1", a)
    default = owning_team(db, "https://git.example/other/web", None)
    assert store.names()[default] == "default"  # deployment-wide work on a free repository
    assert repository_slug("/srv/repos/acme/web.git") == "acme/web"


def test_first_executions_at_once_share_one_default_team(db: Database) -> None:
    """A database made without the migration's ``default`` row (or whose default was renamed
    away): eight threads creating the first executions at once all get the one ``default`` team
    (the CI run found two flowchart nodes racing to insert it: a unique violation)."""
    with db.session() as session:
        session.execute(delete(Team).where(Team.name == "default"))
    barrier = threading.Barrier(8)
    found: list[str] = []
    errors: list[BaseException] = []

    def first() -> None:
        try:
            barrier.wait(10)
            found.append(TeamStore(db).default_team_id())
        except BaseException as error:  # noqa: BLE001 (the witness: any error is the bug)
            errors.append(error)

    threads = [threading.Thread(target=first) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == [] and len(found) == 8
    assert len(set(found)) == 1 and TeamStore(db).names()[found[0]] == "default"


@pytest.mark.parametrize("name", ["", "A", "-x", "x" * 65, "a b", "<b>x</b>", "a\x00", "é"])
def test_hostile_team_names_are_refused(db: Database, name: str) -> None:
    with pytest.raises(InvalidTeam):
        TeamStore(db).create(name)
    assert TeamStore(db).list() == [] or all(t.name != name for t in TeamStore(db).list())


@pytest.mark.parametrize(("field", "value"), [
    ("pattern", "acme"), ("pattern", "../etc/x"), ("pattern", "a/b/c"), ("pattern", "a/<b>"),
    ("budget", -1.0), ("budget", float("nan")), ("budget", 1e12),
    ("url", "ftp://x/y"), ("url", "http://user:pw@x/"), ("url", "http://x/ y"),
    ("url", "javascript:alert(1)")])
def test_hostile_patterns_budgets_and_urls_are_refused(db: Database, field: str,
                                                       value: object) -> None:
    store = TeamStore(db)
    store.create("t")
    with pytest.raises(InvalidTeam):
        if field == "pattern":
            store.assign(str(value), "t")
        elif field == "budget":
            store.update("t", monthly_budget_usd=float(value))  # type: ignore[arg-type]
        else:
            store.update("t", notify_url=str(value))
    team = store.get("t")
    assert (team.repositories, team.monthly_budget_usd, team.notify_url) == ((), None, None)


def _queued(db: Database, team_id: str, count: int) -> list[str]:
    ids = []
    for _ in range(count):
        ids.append(new_execution(db, team_id=team_id))
        time.sleep(0.002)  # distinct creation times: the order within the team
    return ids


def _waiting(db: Database, execution_id: str) -> str | None:
    with db.session() as session:
        row = session.get(NodeExecution, execution_id)
        assert row is not None
        return row.paused_reason


def test_the_claim_keeps_a_team_under_its_limit_in_order(db: Database) -> None:
    team = TeamStore(db).create("busy").id
    other = TeamStore(db).create("other").id
    first, second, third = _queued(db, team, 3)
    lonely = new_execution(db, team_id=other)
    store = LeaseStore(db)
    # the control: no limit, every claim goes through
    assert store.claim(first, "w1", 60) is not None
    SettingsRepository(db).set("team_concurrency_limit", 1)
    assert store.claim(third, "w2", 60) is None  # the witness: over the limit, it waits
    assert _waiting(db, third) == "team_concurrency"
    assert store.claim(lonely, "w3", 60) is not None  # another team is not held back
    assert due(db) == []  # the team's slot is taken
    store.release(first, "w1", 1, status=None)
    with db.session() as session:  # the first ends
        row = session.get(NodeExecution, first)
        assert row is not None
        row.status = "succeeded"
    assert store.claim(third, "w2", 60) is None  # an older one of its team is queued: not yet
    assert due(db) == [second]  # the free slot goes to the oldest of the team
    assert store.claim(second, "w4", 60) is not None
    assert store.claim(third, "w2", 60) is None and _waiting(db, third) == "team_concurrency"


def test_the_ledger_crosses_each_threshold_once(db: Database) -> None:
    team = TeamStore(db).create("spend", monthly_budget_usd=0.10).id
    seen: list[int] = []
    from services.db import team_budget

    hook = lambda alert: seen.append(alert.threshold)  # noqa: E731
    team_budget.ALERT_HOOKS.append(hook)
    try:
        one, two = TeamLayer(db), TeamLayer(db)  # two executions of the team
        one.charge(team, 40_000)
        assert seen == [] and not one.refuses(read_state(db, team))
        two.charge(team, 40_000)  # 80 %: 50 and 80 crossed by this charge
        assert seen == [50, 80]
        assert one.refuses(read_state(db, team))  # 0.08 + the next 0.04 would pass 0.10
        two.charge(team, 40_000)  # a call in flight when the budget filled: overflow
        assert seen == [50, 80, 100]
        one.charge(team, 40_000)
        assert seen == [50, 80, 100]  # once per threshold and month
    finally:
        team_budget.ALERT_HOOKS.remove(hook)
    (row,) = [r for r in month_view(db) if r["team"] == "spend"]
    assert row["spent_usd"] == pytest.approx(0.16) and row["overflow_usd"] == pytest.approx(0.08)
    assert row["alerts"] == [50, 80, 100]
