"""A repository's daily budget, spent by two OS processes at once."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

from services.db.budget import DbBudget, to_micros
from services.db.session import Database
from services.execution.errors import ErrorCode
from tests.integration.databases import url_of
from tests.integration.db.helpers import new_execution
from tests.integration.db.workers import spend

SPAWN = multiprocessing.get_context("spawn")


def test_check_refuses_once_the_day_is_spent(db: Database) -> None:
    budget = DbBudget(db, new_execution(db), "https://example.test/o/r", 1.0)
    assert budget.check() is None
    budget.charge(0.6)
    assert budget.check() is None
    budget.charge(0.4)
    assert budget.spent_today() == (to_micros(1.0), 0)
    assert budget.check() is ErrorCode.BUDGET_EXCEEDED
    other = DbBudget(db, new_execution(db), "https://example.test/o/other", 1.0)
    assert other.check() is None


def test_a_charge_that_does_not_fit_is_overflow_and_closes_the_day(db: Database) -> None:
    budget = DbBudget(db, new_execution(db), "repo", 1.0)
    budget.charge(0.9)
    budget.charge(0.2)
    assert budget.spent_today() == (to_micros(0.9), to_micros(0.2))
    assert budget.check() is ErrorCode.BUDGET_EXCEEDED


def test_two_processes_never_exceed_the_daily_budget(db: Database, tmp_path: Path) -> None:
    limit, amount, repository = 1.0, 0.003, "https://example.test/o/shared"
    execution_id = new_execution(db)
    barrier = SPAWN.Barrier(2)
    reports = [tmp_path / f"spender-{i}.json" for i in range(2)]
    procs = [SPAWN.Process(target=spend, args=(url_of(db), execution_id, repository, limit,
                                               amount, barrier, str(report)))
             for report in reports]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(180)
        assert proc.exitcode == 0
    charges = sum(json.loads(r.read_text())["charges"] for r in reports)
    spent, overflow = DbBudget(db, execution_id, repository, limit).spent_today()
    assert spent <= to_micros(limit)
    assert spent == 333 * to_micros(amount)  # every charge that fits was admitted, no more
    assert spent + overflow == charges * to_micros(amount)  # and none was lost
    assert all(json.loads(r.read_text())["charges"] > 0 for r in reports)
