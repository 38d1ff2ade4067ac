"""Integrations: the git origins the GitHub token may be sent to.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-25 18:30:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("integrations", schema=None) as batch_op:
        batch_op.add_column(sa.Column("git_origins", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("integrations", schema=None) as batch_op:
        batch_op.drop_column("git_origins")
