"""Initial schema: every table of SPEC section 5.

Revision ID: 0001
Revises:
Create Date: 2026-11-24 18:47:44.663633
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("token_hash", sa.String(length=128), nullable=False),
        sa.Column("scopes", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_tokens")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_api_tokens_token_hash")),
    )
    op.create_table(
        "budget_ledger",
        sa.Column("repository", sa.String(length=512), nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("spent_micros", sa.BigInteger(), nullable=False),
        sa.Column("overflow_micros", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("repository", "day", name=op.f("pk_budget_ledger")),
    )
    op.create_table(
        "flowcharts",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_flowcharts")),
    )
    op.create_table(
        "integrations",
        sa.Column("kind", sa.String(length=64), nullable=False),
        sa.Column("api_url", sa.Text(), nullable=True),
        sa.Column("token_encrypted", sa.LargeBinary(), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("kind", name=op.f("pk_integrations")),
    )
    op.create_table(
        "mcp_servers",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("transport", sa.String(length=16), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("secret_encrypted", sa.LargeBinary(), nullable=True),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_mcp_servers")),
        sa.UniqueConstraint("name", name=op.f("uq_mcp_servers_name")),
    )
    op.create_table(
        "runtime_settings",
        sa.Column("key", sa.String(length=128), nullable=False),
        sa.Column("value", sa.JSON(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_runtime_settings")),
    )
    op.create_table(
        "flowchart_runs",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("flowchart_id", sa.String(length=36), nullable=False),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("inputs", sa.JSON(), nullable=False),
        sa.Column("error_code", sa.String(length=64), nullable=True),
        sa.Column("error_message", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["flowchart_id"],
            ["flowcharts.id"],
            name=op.f("fk_flowchart_runs_flowchart_id_flowcharts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_flowchart_runs")),
    )
    with op.batch_alter_table("flowchart_runs", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_flowchart_runs_flowchart_id"), ["flowchart_id"], unique=False
        )

    op.create_table(
        "nodes",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("flowchart_id", sa.String(length=36), nullable=False),
        sa.Column("key", sa.String(length=100), nullable=False),
        sa.Column("type", sa.String(length=32), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["flowchart_id"],
            ["flowcharts.id"],
            name=op.f("fk_nodes_flowchart_id_flowcharts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_nodes")),
        sa.UniqueConstraint("flowchart_id", "key", name=op.f("uq_nodes_flowchart_id_key")),
    )
    with op.batch_alter_table("nodes", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_nodes_flowchart_id"), ["flowchart_id"], unique=False)

    op.create_table(
        "edges",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("flowchart_id", sa.String(length=36), nullable=False),
        sa.Column("source_node_id", sa.String(length=36), nullable=False),
        sa.Column("target_node_id", sa.String(length=36), nullable=False),
        sa.Column("condition_key", sa.String(length=100), nullable=True),
        sa.ForeignKeyConstraint(
            ["flowchart_id"],
            ["flowcharts.id"],
            name=op.f("fk_edges_flowchart_id_flowcharts"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["source_node_id"],
            ["nodes.id"],
            name=op.f("fk_edges_source_node_id_nodes"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["target_node_id"],
            ["nodes.id"],
            name=op.f("fk_edges_target_node_id_nodes"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_edges")),
    )
    with op.batch_alter_table("edges", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_edges_flowchart_id"), ["flowchart_id"], unique=False)

    op.create_table(
        "node_executions",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("flowchart_run_id", sa.String(length=36), nullable=True),
        sa.Column("node_id", sa.String(length=36), nullable=True),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("runtime", sa.String(length=32), nullable=False),
        sa.Column("provider", sa.String(length=64), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=False),
        sa.Column("repo_url", sa.Text(), nullable=True),
        sa.Column("workspace", sa.Text(), nullable=True),
        sa.Column("base_branch", sa.String(length=255), nullable=True),
        sa.Column("branch", sa.String(length=255), nullable=True),
        sa.Column("base_commit", sa.String(length=64), nullable=True),
        sa.Column("head_sha", sa.String(length=64), nullable=True),
        sa.Column("pr_url", sa.Text(), nullable=True),
        sa.Column("prompt", sa.Text(), nullable=False),
        sa.Column("limits", sa.JSON(), nullable=False),
        sa.Column("settings_snapshot", sa.JSON(), nullable=False),
        sa.Column("outcome", sa.String(length=64), nullable=True),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("usage", sa.JSON(), nullable=True),
        sa.Column("cost_usd", sa.Float(), nullable=False),
        sa.Column("iterations", sa.Integer(), nullable=False),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False),
        sa.Column("event_seq", sa.Integer(), nullable=False),
        sa.Column("lease_owner", sa.String(length=255), nullable=True),
        sa.Column("lease_epoch", sa.Integer(), nullable=False),
        sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("error_code", sa.String(length=64), nullable=True),
        sa.Column("error_message", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["flowchart_run_id"],
            ["flowchart_runs.id"],
            name=op.f("fk_node_executions_flowchart_run_id_flowchart_runs"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["node_id"],
            ["nodes.id"],
            name=op.f("fk_node_executions_node_id_nodes"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_node_executions")),
    )
    with op.batch_alter_table("node_executions", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_node_executions_created_at"), ["created_at"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_node_executions_flowchart_run_id"), ["flowchart_run_id"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_node_executions_status"), ["status"], unique=False)

    op.create_table(
        "execution_events",
        sa.Column("execution_id", sa.String(length=36), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("cycle", sa.Integer(), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["execution_id"],
            ["node_executions.id"],
            name=op.f("fk_execution_events_execution_id_node_executions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("execution_id", "seq", name=op.f("pk_execution_events")),
    )
    op.create_table(
        "tool_calls",
        sa.Column("execution_id", sa.String(length=36), nullable=False),
        sa.Column("call_id", sa.String(length=255), nullable=False),
        sa.Column("cycle", sa.Integer(), nullable=True),
        sa.Column("provider", sa.String(length=64), nullable=True),
        sa.Column("tool_name", sa.String(length=128), nullable=False),
        sa.Column("domain", sa.String(length=64), nullable=False),
        sa.Column("operation", sa.String(length=128), nullable=False),
        sa.Column("args", sa.JSON(), nullable=True),
        sa.Column("envelope", sa.JSON(), nullable=True),
        sa.Column("ok", sa.Boolean(), nullable=True),
        sa.Column("error_code", sa.String(length=64), nullable=True),
        sa.Column("duration_ms", sa.Float(), nullable=True),
        sa.Column("request_id", sa.String(length=255), nullable=True),
        sa.Column("correlation_id", sa.String(length=255), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["execution_id"],
            ["node_executions.id"],
            name=op.f("fk_tool_calls_execution_id_node_executions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("execution_id", "call_id", name=op.f("pk_tool_calls")),
    )


def downgrade() -> None:
    op.drop_table("tool_calls")
    op.drop_table("execution_events")
    with op.batch_alter_table("node_executions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_node_executions_status"))
        batch_op.drop_index(batch_op.f("ix_node_executions_flowchart_run_id"))
        batch_op.drop_index(batch_op.f("ix_node_executions_created_at"))

    op.drop_table("node_executions")
    with op.batch_alter_table("edges", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_edges_flowchart_id"))

    op.drop_table("edges")
    with op.batch_alter_table("nodes", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_nodes_flowchart_id"))

    op.drop_table("nodes")
    with op.batch_alter_table("flowchart_runs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_flowchart_runs_flowchart_id"))

    op.drop_table("flowchart_runs")
    op.drop_table("runtime_settings")
    op.drop_table("mcp_servers")
    op.drop_table("integrations")
    op.drop_table("flowcharts")
    op.drop_table("budget_ledger")
    op.drop_table("api_tokens")
