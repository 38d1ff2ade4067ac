"""Triggers (``admin``): per repository, what starts work on GitHub and with which settings;
the recorded deliveries and the slots. A follow-up on a pull request (``run``) goes through the
same slot as a ``/studio`` comment.

Teams: a trigger belongs to its repository's team. Storing or deleting one and the deliveries
(which are the deployment's GitHub integration's, some for no trigger) are for deployment-wide
tokens (``deployment_wide_only``); a team's token lists its team's triggers and follows up on
their pull requests (another team's trigger is 404).
"""

from __future__ import annotations

from typing import Annotated, Any

import anyio.to_thread
from fastapi import APIRouter, Depends, Path, Request
from pydantic import BaseModel, ConfigDict, Field

from services.api.auth import Scope, requires
from services.api.deps import get_db, get_settings
from services.api.errors import ERROR_RESPONSES, NOT_FOUND_RESPONSE, ApiError
from services.api.teams import Caller, caller, check_visible, deployment_wide, list_team
from services.db.models import GithubTrigger
from services.db.session import Database
from services.db.triggers import DeliveryStore, SlotStore, TriggerStore, UnknownTrigger
from services.execution.errors import ErrorCode
from services.settings import StudioSettings
from services.triggers import rules
from services.triggers.events import FOLLOW_UP, MAX_TEXT
from services.triggers.slots import start_work

router = APIRouter(prefix="/api/triggers", tags=["triggers"], responses=ERROR_RESPONSES)

Owner = Annotated[str, Path(pattern=r"^[A-Za-z0-9][A-Za-z0-9-]{0,38}$")]
Name = Annotated[str, Path(pattern=r"^[A-Za-z0-9._-]{1,100}$")]
DEPLOYMENT_WIDE = [requires(Scope.ADMIN), Depends(deployment_wide)]


async def visible_trigger(request: Request, owner: Owner, name: Name,
                          who: Caller = Depends(caller)) -> str:  # noqa: B008
    """The repository (``owner/name``) of a trigger the caller's team sees, else 404."""
    repository = f"{owner}/{name}".lower()
    await anyio.to_thread.run_sync(check_visible, request.app.state.db, who, GithubTrigger,
                                   GithubTrigger.repository, repository, UnknownTrigger)
    return repository


class TriggerOut(BaseModel):
    repository: str
    repo_url: str
    label: str | None
    assignee: str | None
    command: str
    provider: str
    model: str | None
    limits: dict[str, Any]
    replay_script: bool = Field(description="Whether a replay script is stored.")
    enabled: bool
    review: bool = Field(description="Pull requests opened or pushed to get a review.")


class TriggerList(BaseModel):
    triggers: list[TriggerOut]


class DeliveryOut(BaseModel):
    id: str
    event: str
    action: str | None
    repository: str | None
    sender: str | None
    number: int | None
    received_at: str
    outcome: str
    detail: str | None
    execution_id: str | None


class SlotOut(BaseModel):
    repository: str
    number: int
    state: str
    execution_id: str | None
    pending_comments: int


class TriggerState(BaseModel):
    deliveries: list[DeliveryOut]
    slots: list[SlotOut]


class FollowUpCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    prompt: str = Field(min_length=1, max_length=MAX_TEXT)


class FollowUpOut(BaseModel):
    outcome: str = Field(description="started | coalesced")
    execution_id: str | None


@router.get("", response_model=TriggerList, dependencies=[requires(Scope.ADMIN)])
def list_triggers(db: Database = Depends(get_db),  # noqa: B008
                  team_id: str | None = Depends(list_team)) -> TriggerList:  # noqa: B008
    """The triggers of the caller's team."""
    return TriggerList(triggers=[TriggerOut(**rules.described(row))
                                 for row in TriggerStore(db).all(team_id)])


@router.get("/activity", response_model=TriggerState, dependencies=DEPLOYMENT_WIDE)
def activity(db: Database = Depends(get_db)) -> TriggerState:  # noqa: B008
    """The latest deliveries (newest first) and every slot."""
    deliveries = [DeliveryOut(id=d.id, event=d.event, action=d.action, repository=d.repository,
                              sender=d.sender, number=d.number,
                              received_at=d.received_at.isoformat(), outcome=d.outcome,
                              detail=d.detail, execution_id=d.execution_id)
                  for d in DeliveryStore(db).recent()]
    slots = [SlotOut(repository=s.repository, number=s.number, state=s.state,
                     execution_id=s.execution_id,
                     pending_comments=len((s.pending or {}).get("comments") or []))
             for s in SlotStore(db).all()]
    return TriggerState(deliveries=deliveries, slots=slots)


@router.put("/{owner}/{name}", response_model=TriggerOut, dependencies=DEPLOYMENT_WIDE)
def put_trigger(owner: Owner, name: Name, body: rules.TriggerConfig,
                db: Database = Depends(get_db),  # noqa: B008
                settings: StudioSettings = Depends(get_settings),  # noqa: B008
                ) -> TriggerOut:
    """Store the repository's trigger (422 ``invalid_arguments``/``host_not_allowed`` for a
    bad one)."""
    return TriggerOut(**rules.described(rules.put(db, settings, f"{owner}/{name}", body)))


@router.delete("/{owner}/{name}", status_code=204, responses=NOT_FOUND_RESPONSE,
               dependencies=DEPLOYMENT_WIDE)
def delete_trigger(owner: Owner, name: Name,
                   db: Database = Depends(get_db)) -> None:  # noqa: B008
    if not TriggerStore(db).delete(f"{owner}/{name}"):
        raise ApiError(f"no trigger for {owner}/{name}", code=ErrorCode.NOT_FOUND)


@router.post("/{owner}/{name}/pulls/{number}/follow-ups", status_code=202,
             response_model=FollowUpOut, responses=NOT_FOUND_RESPONSE,
             dependencies=[requires(Scope.RUN)])
async def follow_up(body: FollowUpCreate, request: Request,
                    number: Annotated[int, Path(ge=1, le=10**9)],
                    repository: str = Depends(visible_trigger),  # noqa: B008
                    db: Database = Depends(get_db),  # noqa: B008
                    settings: StudioSettings = Depends(get_settings),  # noqa: B008
                    ) -> FollowUpOut:
    """A follow-up on pull request ``number`` (the trigger's settings; through its slot)."""
    work = {"kind": FOLLOW_UP, "number": number,
            "comments": [{"author": "api", "text": body.prompt}]}
    offered = await anyio.to_thread.run_sync(
        start_work, db, settings, repository, number, work, request.app.state.launcher.launch)
    return FollowUpOut(outcome=offered.outcome, execution_id=offered.execution_id)
