"""Teams: ``teams``, repository patterns, the monthly team ledger and its alerts, and ``team_id``
on tokens, executions, flowcharts, flowchart runs, approvals and MCP servers.

Every existing execution, flowchart, run, approval and MCP server moves to a team named
``default`` (made here); existing tokens keep ``team_id`` NULL: deployment-wide, unchanged.
``node_executions`` and ``flowchart_runs`` also get ``created_by_token`` / ``created_by`` (who
created it: the self-approval rule and the approval audit). On PostgreSQL an execution's own login
(migration 0013) reads its team's row and reads and writes its team's ledger and alerts only.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-28 16:00:00.000000
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

GROUP = "studio_executor"
OWNED = ("api_tokens", "node_executions", "flowcharts", "flowchart_runs", "tool_approvals",
         "mcp_servers")
MOVED = tuple(table for table in OWNED if table != "api_tokens")
TEAM_OF_LOGIN = "(SELECT e.team_id FROM node_executions e WHERE e.id = studio_login_execution())"
TEAM_TABLES = {"teams": ("id", "SELECT"),
               "team_spend": ("team_id", "SELECT, INSERT, UPDATE"),
               "team_budget_alerts": ("team_id", "SELECT, INSERT, UPDATE")}


def _when() -> sa.Column[object]:
    return sa.Column("created_at", sa.DateTime(timezone=True), nullable=False)


def _create_tables() -> None:
    op.create_table(
        "teams",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("monthly_budget_usd", sa.Float(), nullable=True),
        sa.Column("notify_url", sa.Text(), nullable=True),
        _when(),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_teams")),
        sa.UniqueConstraint("name", name=op.f("uq_teams_name")),
    )
    op.create_table(
        "team_repositories",
        sa.Column("pattern", sa.String(length=512), nullable=False),
        sa.Column("team_id", sa.String(length=36), nullable=False),
        _when(),
        sa.ForeignKeyConstraint(["team_id"], ["teams.id"], ondelete="CASCADE",
                                name=op.f("fk_team_repositories_team_id_teams")),
        sa.PrimaryKeyConstraint("pattern", name=op.f("pk_team_repositories")),
    )
    op.create_index(op.f("ix_team_repositories_team_id"), "team_repositories", ["team_id"])
    op.create_table(
        "team_spend",
        sa.Column("team_id", sa.String(length=36), nullable=False),
        sa.Column("month", sa.String(length=7), nullable=False),
        sa.Column("spent_micros", sa.BigInteger(), nullable=False),
        sa.Column("overflow_micros", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["team_id"], ["teams.id"], ondelete="CASCADE",
                                name=op.f("fk_team_spend_team_id_teams")),
        sa.PrimaryKeyConstraint("team_id", "month", name=op.f("pk_team_spend")),
    )
    op.create_table(
        "team_budget_alerts",
        sa.Column("team_id", sa.String(length=36), nullable=False),
        sa.Column("month", sa.String(length=7), nullable=False),
        sa.Column("threshold", sa.Integer(), nullable=False),
        sa.Column("spent_micros", sa.BigInteger(), nullable=False),
        sa.Column("budget_micros", sa.BigInteger(), nullable=False),
        _when(),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("delivered_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_error", sa.String(length=200), nullable=True),
        sa.ForeignKeyConstraint(["team_id"], ["teams.id"], ondelete="CASCADE",
                                name=op.f("fk_team_budget_alerts_team_id_teams")),
        sa.PrimaryKeyConstraint("team_id", "month", "threshold",
                                name=op.f("pk_team_budget_alerts")),
    )


def upgrade() -> None:
    _create_tables()
    # plain ALTER TABLE ADD / DROP COLUMN (SQLite >= 3.35 has both): never a copy of a table,
    # whose drop would cascade to the rows that reference it
    for table in OWNED:
        op.add_column(table, sa.Column("team_id", sa.String(length=36), nullable=True))
        op.create_index(op.f(f"ix_{table}_team_id"), table, ["team_id"], unique=False)
    for table in ("node_executions", "flowchart_runs"):
        op.add_column(table, sa.Column("created_by_token", sa.String(length=36), nullable=True))
        op.add_column(table, sa.Column("created_by", sa.String(length=255), nullable=True))
    default_id = str(uuid.uuid4())
    teams = sa.table("teams", sa.column("id", sa.String()), sa.column("name", sa.String()),
                     sa.column("created_at", sa.DateTime(timezone=True)))
    bind = op.get_bind()
    op.execute(teams.insert().values(id=default_id, name="default",
                                     created_at=datetime.now(UTC)))
    for table in MOVED:
        op.execute(sa.text(f"UPDATE {table} SET team_id = :team WHERE team_id IS NULL")
                   .bindparams(team=default_id))
    if bind.dialect.name == "postgresql":
        for table, (column, privileges) in TEAM_TABLES.items():
            rows = f"{column} = {TEAM_OF_LOGIN}"
            op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
            op.execute(f"CREATE POLICY studio_deployment ON {table} "
                       "USING (studio_login_execution() IS NULL) "
                       "WITH CHECK (studio_login_execution() IS NULL)")
            op.execute(f"CREATE POLICY studio_execution_own ON {table} TO {GROUP} "
                       f"USING ({rows}) WITH CHECK ({rows})")
            op.execute(f"GRANT {privileges} ON {table} TO {GROUP}")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for table in TEAM_TABLES:
            op.execute(f"DROP POLICY IF EXISTS studio_execution_own ON {table}")
            op.execute(f"DROP POLICY IF EXISTS studio_deployment ON {table}")
            op.execute(f"REVOKE ALL ON {table} FROM {GROUP}")
    for table in ("flowchart_runs", "node_executions"):
        op.drop_column(table, "created_by")
        op.drop_column(table, "created_by_token")
    for table in reversed(OWNED):
        op.drop_index(op.f(f"ix_{table}_team_id"), table_name=table)
        op.drop_column(table, "team_id")
    op.drop_table("team_budget_alerts")
    op.drop_table("team_spend")
    op.drop_index(op.f("ix_team_repositories_team_id"), table_name="team_repositories")
    op.drop_table("team_repositories")
    op.drop_table("teams")
