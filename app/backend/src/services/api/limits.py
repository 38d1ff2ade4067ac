"""Limits named by API callers: a ``run`` token may lower them, only ``admin`` may raise them.

The deployment's ceiling is what is in force: the runtime settings (``max_iterations``,
``max_budget_usd``, ``wall_clock_s``, ``stall_s``, ... as set with ``PUT /api/settings``) and
``STUDIO_FLOWCHART_MAX_NODE_EXECUTIONS`` for a flowchart run's ``max_node_executions``. A value
above its ceiling from a token without ``admin`` is ``limit_above_ceiling`` (403), naming each.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request

from services.api.errors import ApiError
from services.db.api_tokens import Scope, TokenIdentity
from services.db.runtime_settings import (
    RUNTIME_SETTINGS,
    InvalidSettingValue,
    SettingsRepository,
    validate,
)
from services.db.session import Database
from services.execution.errors import ErrorCode


def is_admin(request: Request) -> bool:
    identity: TokenIdentity | None = getattr(request.state, "token", None)
    return identity is not None and Scope.ADMIN.value in identity.scopes


def _number(key: str, value: Any) -> float | None:
    """``value`` as its setting's type would take it (``"1e4"`` too); ``None`` if it is none."""
    try:
        converted = validate(key, value) if key in RUNTIME_SETTINGS else value
    except InvalidSettingValue:
        return None  # refused with its own message where it is used
    if isinstance(converted, bool) or not isinstance(converted, int | float):
        return None
    return float(converted)


def above_ceiling(requested: dict[str, Any], ceiling: dict[str, Any]) -> dict[str, Any]:
    """Each requested value over its ceiling: ``{key: {requested, ceiling}}``."""
    over = {}
    for key, value in requested.items():
        number = _number(key, value) if key in ceiling else None
        if number is not None and number > float(ceiling[key]):
            over[key] = {"requested": value, "ceiling": ceiling[key]}
    return over


def check_limits(request: Request, db: Database, requested: dict[str, Any], field: str,
                 extra_ceiling: dict[str, Any] | None = None) -> None:
    """Refuse limits above the deployment's unless the caller holds ``admin``."""
    if not requested or is_admin(request):
        return
    ceiling = {**SettingsRepository(db).limits(), **(extra_ceiling or {})}
    over = above_ceiling(requested, ceiling)
    if over:
        names = ", ".join(sorted(over))
        raise ApiError(f"{field}: {names} above the deployment's limit needs the 'admin' scope "
                       "(a 'run' token may only lower limits)",
                       code=ErrorCode.LIMIT_ABOVE_CEILING, details={"field": field,
                                                                    "limits": over})
