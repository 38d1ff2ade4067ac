"""Review triggers: ``github_triggers.review`` (whether a pull request opened, pushed to or
reopened starts a review execution). Off for every existing trigger; nothing else changes.
``studio execute`` never reads the triggers, so the executor's group role gets no grant.

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-28 17:10:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("github_triggers") as batch:
        batch.add_column(sa.Column("review", sa.Boolean(), nullable=False,
                                   server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table("github_triggers") as batch:
        batch.drop_column("review")
