"""Durable executions: the execution request, the pull-request number, workspace checkpoints.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-25 10:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("node_executions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("pr_number", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("request", sa.JSON(), nullable=False,
                                      server_default=sa.text("'{}'")))

    op.create_table(
        "workspace_checkpoints",
        sa.Column("execution_id", sa.String(length=36), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("call_id", sa.String(length=255), nullable=True),
        sa.Column("base_commit", sa.String(length=64), nullable=False),
        sa.Column("available", sa.Boolean(), nullable=False),
        sa.Column("size_bytes", sa.Integer(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("patch", sa.LargeBinary(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["execution_id"],
            ["node_executions.id"],
            name=op.f("fk_workspace_checkpoints_execution_id_node_executions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("execution_id", "seq", name=op.f("pk_workspace_checkpoints")),
    )


def downgrade() -> None:
    op.drop_table("workspace_checkpoints")
    with op.batch_alter_table("node_executions", schema=None) as batch_op:
        batch_op.drop_column("request")
        batch_op.drop_column("pr_number")
