"""The workspace's own disk use: ``node_executions.workspace_disk``.

Measured when an attempt's workspace is provisioned (:func:`services.repos.workspaces.disk_use`):
the bytes the execution's directory holds itself (``own_bytes``), its checkout (the files outside
``.git``: ``checkout_bytes``) and whether its history is borrowed from the mirror cache
(``borrows_mirror``) rather than copied. ``studio executions show`` and the API's execution
record (the run page) report it. Existing rows get ``NULL``: not measured. On PostgreSQL the
executor group role (migration 0013) may update it: ``studio execute`` writes it.

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-28 19:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

GROUP = "studio_executor"


def upgrade() -> None:
    with op.batch_alter_table("node_executions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("workspace_disk", sa.JSON(), nullable=True))
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"GRANT UPDATE (workspace_disk) ON node_executions TO {GROUP}")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"REVOKE UPDATE (workspace_disk) ON node_executions FROM {GROUP}")
    # plain DROP COLUMN, never a batch copy of node_executions (see migration 0017)
    op.drop_column("node_executions", "workspace_disk")
