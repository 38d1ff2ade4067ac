"""Evaluation runs: ``eval_runs`` and ``eval_items`` (``studio eval``).

One ``eval_runs`` row per suite run (its matrix and concurrency in ``config``), one
``eval_items`` row per task, matrix cell and repeat, linked to the execution that ran it and
holding its grade; a run carries its team (``team_id``, as the tables of 0014). New tables
only: nothing existing changes. ``studio execute`` never reads or writes them (the eval process
does), so the executor's group role gets no grant.

Revision ID: 0019
Revises: 0017
Create Date: 2026-11-28 16:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "eval_runs",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("suite", sa.String(200), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("team_id", sa.String(36), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_eval_runs")),
    )
    op.create_index(op.f("ix_eval_runs_created_at"), "eval_runs", ["created_at"])
    op.create_index(op.f("ix_eval_runs_team_id"), "eval_runs", ["team_id"])
    op.create_table(
        "eval_items",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("eval_run_id", sa.String(36), nullable=False),
        sa.Column("task_id", sa.String(200), nullable=False),
        sa.Column("cell", sa.String(300), nullable=False),
        sa.Column("repeat", sa.Integer(), nullable=False),
        sa.Column("execution_id", sa.String(36), nullable=True),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("resolved", sa.Boolean(), nullable=True),
        sa.Column("tests_passed", sa.JSON(), nullable=False),
        sa.Column("tests_failed", sa.JSON(), nullable=False),
        sa.Column("cost_usd", sa.Float(), nullable=False),
        sa.Column("input_tokens", sa.Integer(), nullable=False),
        sa.Column("output_tokens", sa.Integer(), nullable=False),
        sa.Column("turns", sa.Integer(), nullable=False),
        sa.Column("duration_s", sa.Float(), nullable=False),
        sa.Column("error_code", sa.String(64), nullable=True),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.Column("graded_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["eval_run_id"], ["eval_runs.id"], ondelete="CASCADE",
                                name=op.f("fk_eval_items_eval_run_id_eval_runs")),
        sa.ForeignKeyConstraint(["execution_id"], ["node_executions.id"], ondelete="SET NULL",
                                name=op.f("fk_eval_items_execution_id_node_executions")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_eval_items")),
        sa.UniqueConstraint("eval_run_id", "task_id", "cell", "repeat",
                            name=op.f("uq_eval_items_eval_run_id_task_id_cell_repeat")),
    )
    op.create_index(op.f("ix_eval_items_eval_run_id"), "eval_items", ["eval_run_id"])
    op.create_index(op.f("ix_eval_items_execution_id"), "eval_items", ["execution_id"])


def downgrade() -> None:
    op.drop_table("eval_items")
    op.drop_table("eval_runs")
