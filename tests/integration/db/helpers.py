"""Small helpers shared by the persistence tests."""

from __future__ import annotations

from typing import Any

from sqlalchemy import inspect, select, text

from services.db.base import Base
from services.db.executions import ExecutionRepository
from services.db.models import ExecutionEvent
from services.db.session import Database
from tests.support.redaction import settings_redactor


def new_execution(db: Database, **values: Any) -> str:
    fields: dict[str, Any] = {"provider": "replay", "model": "scripted", "prompt": "do it"}
    fields.update(values)
    return ExecutionRepository(db, settings_redactor()).create(**fields)


def seqs(db: Database, execution_id: str) -> list[int]:
    with db.session() as session:
        return list(session.scalars(
            select(ExecutionEvent.seq).where(ExecutionEvent.execution_id == execution_id)
            .order_by(ExecutionEvent.seq)
        ))


def all_rows_text(db: Database) -> str:
    """Every row of every table, as text (what a SELECT of each column shows)."""
    chunks: list[str] = []
    names = set(inspect(db.engine).get_table_names())
    with db.engine.connect() as conn:
        for table in Base.metadata.sorted_tables:
            if table.name in names:
                rows = conn.execute(text(f'SELECT * FROM "{table.name}"')).all()
                chunks.extend(repr(tuple(row)) for row in rows)
    return "\n".join(chunks)
