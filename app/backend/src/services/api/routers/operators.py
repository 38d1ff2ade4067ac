"""What operators look at (``admin``): runtime settings with where each value comes from, and
today's spend per repository against its daily budget."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel

from services.api.auth import Scope, requires
from services.api.deps import get_db
from services.api.errors import ERROR_RESPONSES
from services.api.teams import deployment_wide
from services.db.budget import MICROS, spend_today, today
from services.db.runtime_settings import SettingsRepository
from services.db.session import Database
from services.db.team_budget import month_view

# the deployment itself: a deployment-wide admin token (a team's admin is refused)
OPERATOR = [requires(Scope.ADMIN), Depends(deployment_wide)]
router = APIRouter(prefix="/api/operator", tags=["operators"], responses=ERROR_RESPONSES)


class DescribedSetting(BaseModel):
    key: str
    value: Any
    source: str
    default: Any
    type: str
    help: str
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: bool = False
    unit: str = ""


class DescribedSettings(BaseModel):
    settings: list[DescribedSetting]


class RepositorySpend(BaseModel):
    repository: str
    spent_usd: float
    overflow_usd: float
    budget_usd: float


class Spend(BaseModel):
    day: str
    repositories: list[RepositorySpend]


@router.get("/settings", response_model=DescribedSettings,
            dependencies=OPERATOR)
def described_settings(db: Database = Depends(get_db)) -> DescribedSettings:  # noqa: B008
    """Every runtime setting: value, source (``runtime_setting`` or ``default``), default, help,
    and a number's bounds (``minimum``, inclusive unless ``exclusive_minimum``; ``maximum``)
    and unit."""
    return DescribedSettings(settings=[DescribedSetting(**item)
                                       for item in SettingsRepository(db).described()])


@router.get("/spend", response_model=Spend,
            dependencies=OPERATOR)
def spend(db: Database = Depends(get_db)) -> Spend:  # noqa: B008
    """Today's (UTC) spend per repository against the daily budget in force."""
    budget = float(SettingsRepository(db).get("repo_daily_budget_usd"))
    return Spend(day=today().isoformat(), repositories=[
        RepositorySpend(repository=repository, spent_usd=spent / MICROS,
                        overflow_usd=overflow / MICROS, budget_usd=budget)
        for repository, spent, overflow in spend_today(db)])


class TeamMonth(BaseModel):
    team: str
    month: str
    spent_usd: float
    overflow_usd: float
    budget_usd: float | None
    percent: float | None
    alerts: list[int]


class TeamMonths(BaseModel):
    teams: list[TeamMonth]


@router.get("/teams", response_model=TeamMonths, dependencies=OPERATOR)
def team_months(db: Database = Depends(get_db)) -> TeamMonths:  # noqa: B008
    """Each team's UTC month: spend (with the overflow past the budget), monthly budget,
    percent used and the alert thresholds (50, 80, 100) already sent."""
    return TeamMonths(teams=[TeamMonth(**row) for row in month_view(db)])
