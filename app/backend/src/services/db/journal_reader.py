"""Reading an execution's journal to its end: what a live stream (API) and ``logs --follow`` (CLI)
show.

:func:`read_tail` reads the execution's row **before** its journal: when that row was already in
a final status, every event written before the status was committed is in the events read after
it, so the reader can end with :func:`execution_end` (the final status with ``branch``,
``head_sha``, ``pr_url``, usage and cost) knowing that nothing is left to read. It relies only on
committed rows, so events committed one at a time or in batches read the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from services.db.executions import ExecutionRepository
from services.db.models import ExecutionEvent, NodeExecution
from services.db.status import FINAL_STATUSES

END_KIND = "end"
"""The kind of the terminal event (never a journal row: made from the execution's row)."""


def execution_end(row: NodeExecution) -> dict[str, Any]:
    """What the terminal event carries: the final status and what the run produced."""
    return {
        "status": row.status, "outcome": row.outcome, "branch": row.branch,
        "head_sha": row.head_sha, "pr_url": row.pr_url, "usage": row.usage,
        "cost_usd": row.cost_usd, "iterations": row.iterations, "error_code": row.error_code,
        "error_message": row.error_message,
        "finished_at": row.finished_at.isoformat() if row.finished_at is not None else None,
    }


@dataclass(frozen=True)
class JournalTail:
    """Events after a position and, when the execution had ended before they were read, its end
    (``missing``: no such execution)."""

    events: list[ExecutionEvent]
    end: dict[str, Any] | None = None
    missing: bool = False


def read_tail(repository: ExecutionRepository, execution_id: str, after: int) -> JournalTail:
    """The events after ``after``; with the end when the execution was final before they were
    read (the row is read first: see the module docstring)."""
    row = repository.get(execution_id)
    if row is None:
        return JournalTail([], missing=True)
    end = execution_end(row) if row.status in FINAL_STATUSES else None
    return JournalTail(repository.events(execution_id, after_seq=after), end)
