"""Flowchart runs: node states per run, the run's graph snapshot, edge keys.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-24 19:07:04.108428
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "flowchart_run_nodes",
        sa.Column("run_id", sa.String(length=36), nullable=False),
        sa.Column("node_key", sa.String(length=100), nullable=False),
        sa.Column("type", sa.String(length=32), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("execution_id", sa.String(length=36), nullable=True),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("error_code", sa.String(length=64), nullable=True),
        sa.Column("error_message", sa.Text(), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["execution_id"],
            ["node_executions.id"],
            name=op.f("fk_flowchart_run_nodes_execution_id_node_executions"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["flowchart_runs.id"],
            name=op.f("fk_flowchart_run_nodes_run_id_flowchart_runs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("run_id", "node_key", name=op.f("pk_flowchart_run_nodes")),
    )
    with op.batch_alter_table("edges", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("key", sa.String(length=100), server_default="", nullable=False)
        )
    op.execute("UPDATE edges SET key = id")  # existing edges: their row id becomes their key
    with op.batch_alter_table("edges", schema=None) as batch_op:
        batch_op.create_unique_constraint(
            batch_op.f("uq_edges_flowchart_id_key"), ["flowchart_id", "key"]
        )
    with op.batch_alter_table("flowchart_runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("graph", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("workspace", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("max_node_executions", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("flowchart_runs", schema=None) as batch_op:
        batch_op.drop_column("max_node_executions")
        batch_op.drop_column("workspace")
        batch_op.drop_column("graph")
    with op.batch_alter_table("edges", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("uq_edges_flowchart_id_key"), type_="unique")
        batch_op.drop_column("key")
    op.drop_table("flowchart_run_nodes")
