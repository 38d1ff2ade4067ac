"""Approval gates: the ``tool_approvals`` table and the decision on each tool call record.

``tool_approvals`` holds every approval a gated tool call asked for and its decision (who, when,
why); ``tool_calls.approval`` is the gate's decision on that call (JSON: rule, decision,
decided_by, decided_at, reason, approval_id).

Revision ID: 0011
Revises: 0007
Create Date: 2026-11-27 21:30:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "tool_approvals",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("execution_id", sa.String(length=36), nullable=False),
        sa.Column("call_id", sa.String(length=255), nullable=False),
        sa.Column("tool_name", sa.String(length=128), nullable=False),
        sa.Column("domain", sa.String(length=64), nullable=False),
        sa.Column("operation", sa.String(length=128), nullable=False),
        sa.Column("args", sa.JSON(), nullable=True),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("rule", sa.String(length=200), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("decided_by", sa.String(length=255), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("used_by_call", sa.String(length=255), nullable=True),
        sa.Column("requested_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["execution_id"], ["node_executions.id"],
            name=op.f("fk_tool_approvals_execution_id_node_executions"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tool_approvals")),
        sa.UniqueConstraint("execution_id", "call_id", name="uq_tool_approvals_execution_call"),
    )
    with op.batch_alter_table("tool_approvals", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_tool_approvals_execution_id"), ["execution_id"],
                              unique=False)
        batch_op.create_index(batch_op.f("ix_tool_approvals_status"), ["status"], unique=False)
    with op.batch_alter_table("tool_calls", schema=None) as batch_op:
        batch_op.add_column(sa.Column("approval", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("tool_calls", schema=None) as batch_op:
        batch_op.drop_column("approval")
    with op.batch_alter_table("tool_approvals", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_tool_approvals_status"))
        batch_op.drop_index(batch_op.f("ix_tool_approvals_execution_id"))
    op.drop_table("tool_approvals")
