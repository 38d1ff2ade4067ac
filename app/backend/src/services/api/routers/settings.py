"""Runtime settings and the kill switch: read with ``read``, changed with ``admin``."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Request

from services.api.auth import Scope, requires
from services.api.deps import get_db, get_launcher
from services.api.errors import ERROR_RESPONSES, NOT_FOUND_RESPONSE, ApiError
from services.api.killswitch import node_dispatch, resume_paused
from services.api.launcher import Launcher
from services.api.schemas import KillSwitch, Setting, SettingsAll, SettingValue
from services.api.teams import deployment_wide
from services.db.runtime_settings import (
    RUNTIME_SETTINGS,
    InvalidSettingValue,
    SettingsRepository,
    UnknownSetting,
)
from services.db.session import Database
from services.execution.errors import ErrorCode

# the deployment itself: a deployment-wide admin token (a team's admin is refused)
OPERATOR = [requires(Scope.ADMIN), Depends(deployment_wide)]
router = APIRouter(prefix="/api", tags=["settings"], responses=ERROR_RESPONSES)

SettingKey = Annotated[str, Path(max_length=128, description="A runtime setting's key.")]
KILLSWITCH = "killswitch_engaged"


def _known(key: str) -> str:
    if key not in RUNTIME_SETTINGS:
        raise UnknownSetting(key)
    return key


@router.get("/settings", response_model=SettingsAll, dependencies=[requires(Scope.READ)])
def list_settings(db: Database = Depends(get_db)) -> SettingsAll:  # noqa: B008
    """Every runtime setting with its effective value."""
    return SettingsAll(settings=SettingsRepository(db).all())


@router.get("/settings/{key}", response_model=Setting, responses=NOT_FOUND_RESPONSE,
            dependencies=[requires(Scope.READ)])
def get_setting(key: SettingKey, db: Database = Depends(get_db)) -> Setting:  # noqa: B008
    return Setting(key=key, value=SettingsRepository(db).get(_known(key)))


@router.put("/settings/{key}", response_model=Setting, responses=NOT_FOUND_RESPONSE,
            dependencies=OPERATOR)
def set_setting(key: SettingKey, body: SettingValue, request: Request,
                db: Database = Depends(get_db),  # noqa: B008
                launcher: Launcher = Depends(get_launcher)) -> Setting:  # noqa: B008
    """Set a runtime setting; running executions read it at their next check (releasing the
    kill switch resumes what it paused)."""
    try:
        value = SettingsRepository(db).set(_known(key), body.value)
    except InvalidSettingValue as exc:
        raise ApiError(str(exc), code=ErrorCode.INVALID_ARGUMENTS,
                       details={"key": key, **exc.details}) from exc
    if key == KILLSWITCH and value is False:
        resume_paused(db, launcher, node_dispatch(request, db))
    return Setting(key=key, value=value)


@router.delete("/settings/{key}", response_model=Setting, responses=NOT_FOUND_RESPONSE,
               dependencies=OPERATOR)
def reset_setting(key: SettingKey, request: Request,
                  db: Database = Depends(get_db),  # noqa: B008
                  launcher: Launcher = Depends(get_launcher)) -> Setting:  # noqa: B008
    """Remove the stored value: the setting's default applies again (answered)."""
    value = SettingsRepository(db).reset(_known(key))
    if key == KILLSWITCH and value is False:
        resume_paused(db, launcher, node_dispatch(request, db))
    return Setting(key=key, value=value)


@router.get("/killswitch", response_model=KillSwitch, dependencies=[requires(Scope.READ)])
def get_killswitch(db: Database = Depends(get_db)) -> KillSwitch:  # noqa: B008
    return KillSwitch(engaged=bool(SettingsRepository(db).get(KILLSWITCH)))


@router.put("/killswitch", response_model=KillSwitch,
            dependencies=OPERATOR)
def set_killswitch(body: KillSwitch, request: Request,
                   db: Database = Depends(get_db),  # noqa: B008
                   launcher: Launcher = Depends(get_launcher)) -> KillSwitch:  # noqa: B008
    """Engage it (nothing new starts: 503 ``killswitch_engaged``; every running execution
    pauses, queued again, before its next model or tool call) or release it (what it paused
    resumes where it was)."""
    engaged = bool(SettingsRepository(db).set(KILLSWITCH, body.engaged))
    if not engaged:
        resume_paused(db, launcher, node_dispatch(request, db))
    return KillSwitch(engaged=engaged)
