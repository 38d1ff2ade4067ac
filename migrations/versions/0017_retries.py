"""Retries of infrastructure errors and the dead-letter queue: four ``node_executions`` columns.

* ``retry_at``: when the next attempt of an execution queued again after an infrastructure
  error is due (the reaper dispatches it then);
* ``last_error``: that error (code, kind, message, when), shown while the execution waits;
* ``attempt_errors``: every failed attempt's error, in order (a dead-lettered execution shows
  them all);
* ``operator_actions``: an operator's ``retry`` and ``discard`` of a dead-lettered execution,
  who and when.

Existing rows get ``NULL`` in each: nothing to retry, nothing done by an operator. On
PostgreSQL the executor group role (migration 0013) may update the three columns ``studio
execute`` writes when it queues its execution again; ``operator_actions`` stays the API's and
the CLI's.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-28 16:20:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

GROUP = "studio_executor"
EXECUTOR_COLUMNS = ("retry_at", "last_error", "attempt_errors")


def upgrade() -> None:
    with op.batch_alter_table("node_executions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("retry_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("last_error", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("attempt_errors", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("operator_actions", sa.JSON(), nullable=True))
        batch_op.create_index(batch_op.f("ix_node_executions_retry_at"), ["retry_at"], unique=False)
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"GRANT UPDATE ({', '.join(EXECUTOR_COLUMNS)}) ON node_executions "
                   f"TO {GROUP}")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"REVOKE UPDATE ({', '.join(EXECUTOR_COLUMNS)}) ON node_executions "
                   f"FROM {GROUP}")
    # plain DROP COLUMN (SQLite >= 3.35), never a batch copy of node_executions: dropping the
    # copied-from table would cascade to its journal (execution_events) and every child row
    op.drop_index(op.f("ix_node_executions_retry_at"), table_name="node_executions")
    for column in ("operator_actions", "attempt_errors", "last_error", "retry_at"):
        op.drop_column("node_executions", column)
