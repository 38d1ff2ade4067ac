"""Every table, imported here so that ``Base.metadata`` is complete for Alembic."""

from services.db.models.admin import ApiToken, BudgetLedger, Integration, McpServer, RuntimeSetting
from services.db.models.approvals import ToolApproval
from services.db.models.evals import EvalItem, EvalRun
from services.db.models.executions import (
    ContentBlob,
    ExecutionEvent,
    NodeExecution,
    ToolCallRecord,
    WorkspaceCheckpoint,
)
from services.db.models.flowcharts import (
    Edge,
    Flowchart,
    FlowchartRun,
    FlowchartRunNode,
    Node,
    new_id,
)
from services.db.models.reviews import PullRequestReview
from services.db.models.teams import (
    DEFAULT_TEAM,
    Team,
    TeamBudgetAlert,
    TeamOwned,
    TeamRepository,
    TeamSpend,
)
from services.db.models.triggers import GithubDelivery, GithubTrigger, TriggerSlot

__all__ = [
    "DEFAULT_TEAM",
    "Team",
    "TeamBudgetAlert",
    "TeamOwned",
    "TeamRepository",
    "TeamSpend",
    "ApiToken",
    "BudgetLedger",
    "ContentBlob",
    "Edge",
    "EvalItem",
    "EvalRun",
    "ExecutionEvent",
    "Flowchart",
    "GithubDelivery",
    "GithubTrigger",
    "FlowchartRun",
    "FlowchartRunNode",
    "Integration",
    "McpServer",
    "Node",
    "NodeExecution",
    "PullRequestReview",
    "RuntimeSetting",
    "ToolApproval",
    "ToolCallRecord",
    "TriggerSlot",
    "WorkspaceCheckpoint",
    "new_id",
]
