"""PostgreSQL: per-execution database logins, limited to their execution's rows.

An executor pod (``STUDIO_KUBE_EXECUTION_LOGINS``) connects as a role of its own,
``studio_exec_<execution id without dashes>``, created by the worker that launches it
(:mod:`services.db.execution_logins`) as a member of the group role ``studio_executor``. This
migration creates that group role (NOLOGIN), grants it what ``studio execute`` needs and nothing
more, and turns on row-level security so that a member sees and writes only the rows of the
execution its name carries (``studio_login_execution()``):

* ``node_executions``: its own row (SELECT; UPDATE of the lease, status, result, usage...
  columns, never of what it was asked to do: ``FIXED_COLUMNS``);
* ``execution_events``, ``tool_calls``, ``workspace_checkpoints``, ``content_blobs``,
  ``tool_approvals``: its own execution's rows;
* ``budget_ledger``: the rows of its own execution's repository;
* ``runtime_settings``: read only (limits, the kill switch; no secret is stored there), and
  ``alembic_version`` (the revision check on connecting);
* ``integrations``: the API URL and git origins columns only, never the stored token;
* nothing else: no ``api_tokens``, ``mcp_servers``, flowcharts, other executions.

Every other role keeps seeing every row (the ``studio_deployment`` policies: the table owner
bypasses row-level security anyway). Needs a migrating user with CREATEROLE (or the group role
created beforehand by an administrator). Nothing changes on SQLite.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-28 13:30:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

GROUP = "studio_executor"
# table -> (the column naming the execution, the privileges of the group)
OWN_ROWS: dict[str, tuple[str, str]] = {
    "node_executions": ("id", "SELECT"),  # UPDATE: the columns below only
    "execution_events": ("execution_id", "SELECT, INSERT, UPDATE, DELETE"),
    "tool_calls": ("execution_id", "SELECT, INSERT, UPDATE, DELETE"),
    "workspace_checkpoints": ("execution_id", "SELECT, INSERT, UPDATE, DELETE"),
    "content_blobs": ("execution_id", "SELECT, INSERT, UPDATE, DELETE"),
    "tool_approvals": ("execution_id", "SELECT, INSERT, UPDATE, DELETE"),
}
# What the execution was asked to do, and by whom: a login may not rewrite it (its limits, its
# repository, its recorded settings, a cancel request). It updates every other column of its
# row (lease, status, result, usage, pull request, pauses); a later migration that adds a
# column the executor writes grants it too.
FIXED_COLUMNS = ("id", "flowchart_run_id", "node_id", "runtime", "provider", "model", "repo_url",
                 "request", "prompt", "limits", "settings_snapshot", "cancel_requested",
                 "created_at")
UPDATABLE = f"""
DO $do$ DECLARE columns text; BEGIN
    SELECT string_agg(quote_ident(column_name), ', ' ORDER BY ordinal_position) INTO columns
    FROM information_schema.columns
    WHERE table_schema = current_schema() AND table_name = 'node_executions'
      AND column_name NOT IN ({", ".join(f"'{c}'" for c in FIXED_COLUMNS)});
    EXECUTE format('GRANT UPDATE (%s) ON node_executions TO {GROUP}', columns);
END $do$
"""
BUDGET_ROWS = ("repository = (SELECT e.repo_url FROM node_executions e "
               "WHERE e.id = studio_login_execution())")

# The login's execution, by the role it logged in as: ``session_user``, which ``SET ROLE`` does
# not change (a login is a member of studio_executor and may ``SET ROLE`` to it; going by
# ``current_user`` would then match no execution and fall under the deployment's policy).
FUNCTION = r"""
CREATE OR REPLACE FUNCTION studio_login_execution() RETURNS text
LANGUAGE sql STABLE AS $fn$
    SELECT CASE WHEN session_user::text ~ '^studio_exec_[0-9a-f]{32}$' THEN
        substr(session_user::text, 13, 8) || '-' || substr(session_user::text, 21, 4) || '-'
        || substr(session_user::text, 25, 4) || '-' || substr(session_user::text, 29, 4) || '-'
        || substr(session_user::text, 33, 12)
    WHEN session_user::text = 'studio_executor' OR current_user::text = 'studio_executor' THEN
        ''
    END
$fn$
"""
GROUP_ROLE = f"""
DO $do$ BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{GROUP}') THEN
        CREATE ROLE {GROUP} NOLOGIN;
    END IF;
END $do$
"""


def _limit(table: str, rows: str, privileges: str) -> None:
    op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
    op.execute(f"CREATE POLICY studio_deployment ON {table} "
               "USING (studio_login_execution() IS NULL) "
               "WITH CHECK (studio_login_execution() IS NULL)")
    op.execute(f"CREATE POLICY studio_execution_own ON {table} TO {GROUP} "
               f"USING ({rows}) WITH CHECK ({rows})")
    op.execute(f"GRANT {privileges} ON {table} TO {GROUP}")


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(GROUP_ROLE)
    op.execute(FUNCTION)
    for table, (column, privileges) in OWN_ROWS.items():
        _limit(table, f"{column} = studio_login_execution()", privileges)
    op.execute(UPDATABLE)
    _limit("budget_ledger", BUDGET_ROWS, "SELECT, INSERT, UPDATE")
    op.execute(f"GRANT SELECT ON runtime_settings, alembic_version TO {GROUP}")
    op.execute(f"GRANT SELECT (kind, api_url, git_origins) ON integrations TO {GROUP}")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table in (*OWN_ROWS, "budget_ledger"):
        op.execute(f"DROP POLICY IF EXISTS studio_execution_own ON {table}")
        op.execute(f"DROP POLICY IF EXISTS studio_deployment ON {table}")
        op.execute(f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY")
        op.execute(f"REVOKE ALL ON {table} FROM {GROUP}")
    op.execute(f"REVOKE ALL ON runtime_settings, integrations, alembic_version FROM {GROUP}")
    op.execute("DROP FUNCTION IF EXISTS studio_login_execution()")
