"""The rows of ``studio eval``: eval runs and their items (task x matrix cell x repeat).

An item goes ``pending`` -> ``running`` (its execution recorded and linked) -> ``graded`` (its
result written once: :meth:`EvalRepository.grade` updates only an item not graded yet, so a
resumed eval never grades, or runs, a finished item again).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import select, update

from services.db.base import utcnow
from services.db.errors import NotFound
from services.db.models import EvalItem, EvalRun
from services.db.session import Database


class UnknownEvalRun(NotFound):
    what = "eval run"


@dataclass(frozen=True)
class RunRow:
    id: str
    suite: str
    source: str
    config: dict[str, Any]
    status: str
    created_at: datetime
    finished_at: datetime | None
    team_id: str | None = None


@dataclass(frozen=True)
class ItemKey:
    task_id: str
    cell: str
    repeat: int


@dataclass(frozen=True)
class Grade:
    """What the grader and the execution row say about one item."""

    resolved: bool
    tests_passed: list[str] = field(default_factory=list)
    tests_failed: list[str] = field(default_factory=list)
    cost_usd: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    turns: int = 0
    duration_s: float = 0.0
    error_code: str | None = None
    detail: str | None = None


@dataclass(frozen=True)
class ItemRow:
    id: str
    key: ItemKey
    execution_id: str | None
    status: str
    grade: Grade | None
    graded_at: datetime | None


def _run_row(row: EvalRun) -> RunRow:
    return RunRow(row.id, row.suite, row.source, dict(row.config or {}), row.status,
                  row.created_at, row.finished_at, row.team_id)


def _item_row(row: EvalItem) -> ItemRow:
    grade = None
    if row.status == "graded":
        grade = Grade(bool(row.resolved), list(row.tests_passed or []),
                      list(row.tests_failed or []), row.cost_usd, row.input_tokens,
                      row.output_tokens, row.turns, row.duration_s, row.error_code, row.detail)
    return ItemRow(row.id, ItemKey(row.task_id, row.cell, row.repeat), row.execution_id,
                   row.status, grade, row.graded_at)


class EvalRepository:
    def __init__(self, db: Database) -> None:
        self.db = db

    def create_run(self, suite: str, source: str, config: dict[str, Any],
                   run_id: str | None = None, team_id: str | None = None) -> str:
        with self.db.session() as session:
            row = EvalRun(suite=suite, source=source, config=config, status="running",
                          team_id=team_id)
            if run_id is not None:
                row.id = run_id
            session.add(row)
            session.flush()
            return row.id

    def get_run(self, run_id: str) -> RunRow | None:
        with self.db.session() as session:
            row = session.get(EvalRun, run_id)
            return None if row is None else _run_row(row)

    def runs(self, limit: int = 50, team_id: str | None = None) -> list[RunRow]:
        """The latest runs, newest first (``team_id``: that team's only)."""
        query = select(EvalRun).order_by(EvalRun.created_at.desc()).limit(limit)
        if team_id is not None:
            query = query.where(EvalRun.team_id == team_id)
        with self.db.session() as session:
            return [_run_row(row) for row in session.scalars(query)]

    def ensure_items(self, run_id: str, keys: Iterable[ItemKey]) -> None:
        """Add the items not recorded yet (a resumed run keeps the ones it has)."""
        with self.db.session() as session:
            have = {ItemKey(t, c, r) for t, c, r in session.execute(
                select(EvalItem.task_id, EvalItem.cell, EvalItem.repeat)
                .where(EvalItem.eval_run_id == run_id))}
            for key in keys:
                if key not in have:
                    have.add(key)
                    session.add(EvalItem(eval_run_id=run_id, task_id=key.task_id,
                                         cell=key.cell, repeat=key.repeat, status="pending",
                                         tests_passed=[], tests_failed=[]))

    def items(self, run_id: str) -> list[ItemRow]:
        query = (select(EvalItem).where(EvalItem.eval_run_id == run_id)
                 .order_by(EvalItem.task_id, EvalItem.cell, EvalItem.repeat))
        with self.db.session() as session:
            return [_item_row(row) for row in session.scalars(query)]

    def link_execution(self, item_id: str, execution_id: str) -> None:
        with self.db.session() as session:
            session.execute(update(EvalItem).where(EvalItem.id == item_id,
                                                   EvalItem.execution_id.is_(None))
                            .values(execution_id=execution_id, status="running"))

    def grade(self, item_id: str, grade: Grade) -> bool:
        """Write the item's result unless it has one; whether this call wrote it."""
        values = {"status": "graded", "resolved": grade.resolved,
                  "tests_passed": list(grade.tests_passed),
                  "tests_failed": list(grade.tests_failed), "cost_usd": grade.cost_usd,
                  "input_tokens": grade.input_tokens, "output_tokens": grade.output_tokens,
                  "turns": grade.turns, "duration_s": grade.duration_s,
                  "error_code": grade.error_code, "detail": grade.detail, "graded_at": utcnow()}
        with self.db.session() as session:
            done = session.execute(update(EvalItem).where(EvalItem.id == item_id,
                                                          EvalItem.status != "graded")
                                   .values(**values))
            return bool(getattr(done, "rowcount", 0))

    def finish_run(self, run_id: str, status: str = "finished") -> None:
        with self.db.session() as session:
            session.execute(update(EvalRun).where(EvalRun.id == run_id)
                            .values(status=status, finished_at=utcnow()))

    def execution_ids(self, run_id: str) -> Sequence[str]:
        query = select(EvalItem.execution_id).where(EvalItem.eval_run_id == run_id,
                                                    EvalItem.execution_id.is_not(None))
        with self.db.session() as session:
            return [str(e) for e in session.scalars(query)]
