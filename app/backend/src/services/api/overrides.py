"""Operator overrides named by API callers: a flowchart node's ``__``-prefixed config keys
(``__agent_runtime_cutover_enabled`` chooses the node's runtime against the operator's
``agent_runtime_cutover_enabled``). A ``run`` token can make an execution smaller, never larger,
and choosing another runtime than the operator's is larger: storing or starting a flowchart with
such a key needs the ``admin`` scope, unless the operator turned on the runtime setting
``node_overrides_allowed``. A refusal is ``operator_override_refused`` (403) with
``details.problems`` naming each node and key.
"""

from __future__ import annotations

from fastapi import Request

from services.api.errors import ApiError
from services.api.limits import is_admin
from services.db.runtime_settings import NODE_OVERRIDES_ALLOWED, SettingsRepository
from services.db.session import Database
from services.execution.errors import ErrorCode
from services.flowcharts.graph import FlowchartGraph, operator_overrides


def check_operator_overrides(request: Request, db: Database, graph: FlowchartGraph) -> None:
    """Refuse a graph with operator overrides unless the caller holds ``admin`` or the
    operator allows them."""
    problems = operator_overrides(graph)
    if not problems or is_admin(request):
        return
    if SettingsRepository(db).get(NODE_OVERRIDES_ALLOWED) is True:
        return
    nodes = ", ".join(sorted({str(p.node_id) for p in problems}))
    raise ApiError(
        f"node(s) {nodes} override the operator's runtime settings; that needs the 'admin' "
        f"scope (or the runtime setting {NODE_OVERRIDES_ALLOWED}): a 'run' token may only make "
        "an execution smaller", code=ErrorCode.OPERATOR_OVERRIDE_REFUSED,
        details={"problems": [p.model_dump() for p in problems]})
