"""Content blobs: the large strings of an execution's records, stored once.

``content_blobs`` keys a zlib-compressed string by its execution and SHA-256
(``services.db.blobs``); the journal, the tool-call evidence and the stored request refer to it.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-26 00:40:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "content_blobs",
        sa.Column("execution_id", sa.String(length=36), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("size_bytes", sa.Integer(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(
            ["execution_id"],
            ["node_executions.id"],
            name=op.f("fk_content_blobs_execution_id_node_executions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("execution_id", "digest", name=op.f("pk_content_blobs")),
    )


def downgrade() -> None:
    op.drop_table("content_blobs")
