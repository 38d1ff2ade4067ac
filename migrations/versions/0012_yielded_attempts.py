"""Attempts that end on purpose: ``node_executions.yielded_attempts``.

An attempt paused by the kill switch, or ended to wait for an approval, gives its lease up on
purpose; its successor's claim bumps the lease epoch all the same. The reaper's ``max_attempts``
is meant for executions that keep losing their process, so it now counts the lease epoch less
these yielded attempts. Existing rows start at 0 (as before: every attempt counted).

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-28 01:10:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("node_executions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("yielded_attempts", sa.Integer(), nullable=False,
                                      server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("node_executions", schema=None) as batch_op:
        batch_op.drop_column("yielded_attempts")
