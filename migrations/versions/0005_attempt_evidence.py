"""Attempt evidence: who took each checkpoint, and when an execution was last dispatched.

``workspace_checkpoints.lease_epoch``/``owner`` name the attempt (lease epoch and
``host:pid:random`` process) that took a checkpoint; ``node_executions.dispatched_at`` is when a
``studio.execute_node`` message was last sent for it (the reaper re-dispatches an execution that
stayed queued, unclaimed, too long after it).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-25 18:30:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("workspace_checkpoints", schema=None) as batch_op:
        batch_op.add_column(sa.Column("lease_epoch", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("owner", sa.String(length=255), nullable=True))
    with op.batch_alter_table("node_executions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("dispatched_at", sa.DateTime(timezone=True),
                                      nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("node_executions", schema=None) as batch_op:
        batch_op.drop_column("dispatched_at")
    with op.batch_alter_table("workspace_checkpoints", schema=None) as batch_op:
        batch_op.drop_column("owner")
        batch_op.drop_column("lease_epoch")
