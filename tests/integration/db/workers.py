"""Child-process bodies for the concurrency and crash tests (run with multiprocessing spawn)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from services.db.budget import DbBudget
from services.db.journal import DbEventSink
from services.db.session import Database, create_db_engine
from services.execution.ports import AgentEvent, AgentEventKind
from tests.support.redaction import settings_redactor


def payload(writer: int, index: int) -> dict[str, Any]:
    """A deterministic, checkable event body (about 4 KB)."""
    body = f"{writer}:{index}:" + "x" * 4000
    return {"writer": writer, "index": index, "body": body,
            "digest": hashlib.sha256(body.encode()).hexdigest()}


def write_events(url: str, execution_id: str, writer: int, count: int, barrier: Any) -> None:
    """Append ``count`` events (``count`` < 0: forever, until killed)."""
    db = Database(create_db_engine(url))
    sink = DbEventSink(db, settings_redactor())
    if barrier is not None:
        barrier.wait()
    index = 0
    while count < 0 or index < count:
        sink.emit(AgentEvent(AgentEventKind.WARNING, execution_id, index,
                             payload(writer, index)))
        index += 1
    db.dispose()


def spend(url: str, execution_id: str, repository: str, limit_usd: float, amount_usd: float,
          barrier: Any, report: str) -> None:
    """Check, then charge ``amount_usd``, until the budget refuses; write the number of charges."""
    db = Database(create_db_engine(url))
    budget = DbBudget(db, execution_id, repository, limit_usd)
    budget.check()  # connect before the start line
    barrier.wait()
    charges = 0
    while budget.check() is None:
        budget.charge(amount_usd)
        charges += 1
    Path(report).write_text(json.dumps({"charges": charges}))
    db.dispose()
