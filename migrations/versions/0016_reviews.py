"""Pull-request reviews: the ``pull_request_reviews`` table (one row per review execution).

On PostgreSQL an execution's own login (migration 0013) reads and writes only its own row, like
the other per-execution tables.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-28 16:30:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE = "pull_request_reviews"
GROUP = "studio_executor"


def upgrade() -> None:
    op.create_table(
        TABLE,
        sa.Column("execution_id", sa.String(length=36), nullable=False),
        sa.Column("repository", sa.String(length=255), nullable=False),
        sa.Column("pr_number", sa.Integer(), nullable=False),
        sa.Column("head_sha", sa.String(length=64), nullable=False),
        sa.Column("base_sha", sa.String(length=64), nullable=False),
        sa.Column("verdict", sa.String(length=32), nullable=False),
        sa.Column("review", sa.JSON(), nullable=False),
        sa.Column("inline", sa.JSON(), nullable=False),
        sa.Column("comments", sa.JSON(), nullable=False),
        sa.Column("posted_review_id", sa.Integer(), nullable=True),
        sa.Column("posted_url", sa.String(length=1000), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("posted_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["execution_id"], ["node_executions.id"],
            name=op.f("fk_pull_request_reviews_execution_id_node_executions"),
            ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("execution_id", name=op.f("pk_pull_request_reviews")),
    )
    with op.batch_alter_table(TABLE, schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_pull_request_reviews_repository"), ["repository"],
                              unique=False)
    if op.get_bind().dialect.name != "postgresql":
        return
    rows = "execution_id = studio_login_execution()"
    op.execute(f"ALTER TABLE {TABLE} ENABLE ROW LEVEL SECURITY")
    op.execute(f"CREATE POLICY studio_deployment ON {TABLE} "
               "USING (studio_login_execution() IS NULL) "
               "WITH CHECK (studio_login_execution() IS NULL)")
    op.execute(f"CREATE POLICY studio_execution_own ON {TABLE} TO {GROUP} "
               f"USING ({rows}) WITH CHECK ({rows})")
    op.execute(f"GRANT SELECT, INSERT, UPDATE ON {TABLE} TO {GROUP}")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"DROP POLICY IF EXISTS studio_execution_own ON {TABLE}")
        op.execute(f"DROP POLICY IF EXISTS studio_deployment ON {TABLE}")
        op.execute(f"REVOKE ALL ON {TABLE} FROM {GROUP}")
    with op.batch_alter_table(TABLE, schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_pull_request_reviews_repository"))
    op.drop_table(TABLE)
