"""What a worker decrypts and hands an executor pod that has its own database login.

With ``STUDIO_KUBE_EXECUTION_LOGINS`` a pod holds neither ``STUDIO_SECRET_KEY`` nor a database
user that may read ``mcp_servers``: the stored MCP servers its agent names reach it from the
worker, decrypted here, in the Job's login Secret (``STUDIO_EXECUTION_MCP``, read by
:func:`services.runs.agent_setup.stored_mcp`). Only the servers that execution names, nothing
else of the table. (The GitHub token is handed by :mod:`services.executors.selection`.)
"""

from __future__ import annotations

from pydantic import SecretStr

from services.db.executions import ExecutionRepository
from services.db.mcp_servers import McpServerRepository
from services.db.session import Database
from services.execution.errors import ConfigError
from services.execution.mcp.config import McpConfig
from services.settings import ExecutorKind, StudioSettings
from services.worker.task_database import task_database

EXECUTION_MCP_VARIABLE = "STUDIO_EXECUTION_MCP"


def handed_secrets(settings: StudioSettings, execution_id: str,
                   database: Database | None = None) -> dict[str, SecretStr]:
    """The secrets the execution's pod gets from its worker (none without execution logins);
    ``database``: the worker task's."""
    if settings.executor is not ExecutorKind.KUBERNETES or not settings.kube_execution_logins:
        return {}
    # the request model imports the engine: only a worker that hands pods secrets needs it
    from services.runs.request import ExecutionRequest

    with task_database(settings, database) as db:
        row = ExecutionRepository(db).get(execution_id)
        names = ExecutionRequest.from_row(row).profile.mcp_servers if row is not None else []
        if not names:
            return {}
        try:
            config = McpServerRepository(db, settings).resolve(names)
        except ConfigError:
            # an unknown or disabled server: the pod records the error on the run itself
            config = McpConfig()
    return {EXECUTION_MCP_VARIABLE: SecretStr(config.model_dump_json())}
