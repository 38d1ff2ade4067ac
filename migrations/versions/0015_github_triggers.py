"""Work that starts on GitHub: ``github_deliveries``, ``github_triggers``, ``trigger_slots``.

A trigger carries its team (``team_id``, as the tables of 0014). New tables only (nothing
existing changes, so a database of the previous release upgrades without loss). The webhook
secret is an ``integrations`` row of its own (kind ``github_webhook``, encrypted like the
token): no column is added.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-28 16:10:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "github_deliveries",
        sa.Column("id", sa.String(length=100), nullable=False),
        sa.Column("event", sa.String(length=64), nullable=False),
        sa.Column("action", sa.String(length=64), nullable=True),
        sa.Column("repository", sa.String(length=200), nullable=True),
        sa.Column("sender", sa.String(length=100), nullable=True),
        sa.Column("number", sa.Integer(), nullable=True),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("outcome", sa.String(length=32), nullable=False),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.Column("work", sa.JSON(), nullable=True),
        sa.Column("execution_id", sa.String(length=36), nullable=True),
        sa.Column("traceparent", sa.String(length=100), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_github_deliveries")),
    )
    with op.batch_alter_table("github_deliveries", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_github_deliveries_repository"), ["repository"])
        batch_op.create_index(batch_op.f("ix_github_deliveries_outcome"), ["outcome"])
    op.create_table(
        "github_triggers",
        sa.Column("repository", sa.String(length=200), nullable=False),
        sa.Column("repo_url", sa.Text(), nullable=False),
        sa.Column("label", sa.String(length=100), nullable=True),
        sa.Column("assignee", sa.String(length=100), nullable=True),
        sa.Column("command", sa.String(length=50), nullable=False),
        sa.Column("provider", sa.String(length=32), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=True),
        sa.Column("limits", sa.JSON(), nullable=False),
        sa.Column("replay_script", sa.JSON(), nullable=True),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("team_id", sa.String(length=36), nullable=True),
        sa.PrimaryKeyConstraint("repository", name=op.f("pk_github_triggers")),
    )
    op.create_index(op.f("ix_github_triggers_team_id"), "github_triggers", ["team_id"])
    op.create_table(
        "trigger_slots",
        sa.Column("repository", sa.String(length=200), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("execution_id", sa.String(length=36), nullable=True),
        sa.Column("pending", sa.JSON(), nullable=True),
        sa.Column("running_work", sa.JSON(), nullable=True),
        sa.Column("due_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("repository", "number", name=op.f("pk_trigger_slots")),
    )
    with op.batch_alter_table("trigger_slots", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_trigger_slots_state"), ["state"])


def downgrade() -> None:
    with op.batch_alter_table("trigger_slots", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_trigger_slots_state"))
    op.drop_table("trigger_slots")
    op.drop_index(op.f("ix_github_triggers_team_id"), table_name="github_triggers")
    op.drop_table("github_triggers")
    with op.batch_alter_table("github_deliveries", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_github_deliveries_outcome"))
        batch_op.drop_index(batch_op.f("ix_github_deliveries_repository"))
    op.drop_table("github_deliveries")
