"""The database's collaborators are given their redactor: none builds one of its own.

Before, :class:`ExecutionRepository`, :class:`DbEventSink` and :class:`DbIdempotencyStore` fell
back to a redactor of the process's settings when given none, which could not know a run's own
secrets (an MCP server's key, a login's token). Now the journal and the idempotency store
require one (a type error to leave out), and the execution store reads without one but refuses
to write text without one, before anything is stored.
"""

from __future__ import annotations

import inspect

import pytest

from services.db.executions import ExecutionRepository
from services.db.idempotency import DbIdempotencyStore
from services.db.journal import DbEventSink
from services.db.redaction import REDACTED, Redactor
from services.db.session import Database
from services.runs.loop import RedactingSink

SECRET = "sk-run-own-secret-3c9e"


@pytest.mark.parametrize("collaborator", [DbEventSink, DbIdempotencyStore, RedactingSink])
def test_the_redactor_is_a_required_parameter(collaborator: type) -> None:
    parameter = inspect.signature(collaborator).parameters["redactor"]
    assert parameter.default is inspect.Parameter.empty


def test_an_execution_store_without_a_redactor_reads_but_writes_nothing(db: Database) -> None:
    given = ExecutionRepository(db, Redactor([SECRET]))
    execution_id = given.create(provider="replay", model="replay", prompt=f"use {SECRET}")
    bare = ExecutionRepository(db)
    row = bare.get(execution_id)
    assert row is not None and SECRET not in row.prompt and REDACTED in row.prompt
    with pytest.raises(TypeError, match="no redactor"):
        bare.create(provider="replay", model="replay", prompt=f"again {SECRET}")
    with pytest.raises(TypeError, match="no redactor"):
        bare.finish(execution_id, status="failed", outcome="error",
                    error_message=f"leaked {SECRET}")
    assert [r.id for r in bare.list(limit=10)] == [execution_id]  # nothing more was written
    after = bare.get(execution_id)
    assert after is not None and after.status == row.status and after.error_message is None
