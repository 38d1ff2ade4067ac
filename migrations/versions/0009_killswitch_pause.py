"""Kill switch pauses: an execution sent back to ``queued`` by the kill switch says so.

``node_executions.paused_reason`` is ``killswitch`` while the execution waits, queued, for the
kill switch to be released (``NULL`` otherwise); ``paused_at`` is when it was paused. The claim
of its next attempt clears both.

Revision ID: 0009
Revises: 0007
Create Date: 2026-11-27 21:30:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("node_executions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("paused_reason", sa.String(length=32), nullable=True))
        batch_op.add_column(sa.Column("paused_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("node_executions", schema=None) as batch_op:
        batch_op.drop_column("paused_at")
        batch_op.drop_column("paused_reason")
