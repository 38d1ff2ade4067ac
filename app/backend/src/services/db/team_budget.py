"""A team's monthly budget: the ledger per (team, UTC month), its alerts, and the month's view.

The ledger works like the repository's daily one (:mod:`services.db.budget`): a charge is admitted
while it fits under the team's budget, else it goes to ``overflow_micros`` (money a model call
already spent). The check before a model call (:meth:`TeamLayer.refuses`) refuses once the month's
spend plus the execution's largest call so far would pass the budget, or once anything overflowed:
so the call that would cross the budget is not made, and concurrent executions overspend by at most
the calls in flight (one each).

Alerts: when a charge makes the month's spend reach 50, 80 or 100 percent of the budget, one row
per ``(team, month, threshold)`` is inserted (``ON CONFLICT DO NOTHING``): whichever process
crossed first owns it. The owner logs the operator event ``team_budget_alert`` and hands the alert
to :data:`ALERT_HOOKS` (the notification URL's delivery: :mod:`services.db.team_alerts`), which
never blocks the run.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from sqlalchemy import Connection, Table, bindparam, select, update

from services.db.base import utcnow
from services.db.models import Team, TeamBudgetAlert, TeamSpend
from services.db.session import Database, dialect_insert
from services.db.statements import Statement

log = logging.getLogger(__name__)

MICROS = 1_000_000
THRESHOLDS = (50, 80, 100)
_SPEND: Table = TeamSpend.__table__  # type: ignore[assignment]
_ALERTS: Table = TeamBudgetAlert.__table__  # type: ignore[assignment]
_KEY = (_SPEND.c.team_id == bindparam("p_team")) & (_SPEND.c.month == bindparam("p_month"))
_ADMIT = (update(_SPEND)
          .where(_KEY, _SPEND.c.spent_micros + bindparam("p_micros") <= bindparam("p_limit"))
          .values(spent_micros=_SPEND.c.spent_micros + bindparam("p_micros"),
                  updated_at=bindparam("p_now"))
          .returning(_SPEND.c.spent_micros, _SPEND.c.overflow_micros))
_OVERFLOW = (update(_SPEND).where(_KEY)
             .values(overflow_micros=_SPEND.c.overflow_micros + bindparam("p_micros"),
                     updated_at=bindparam("p_now"))
             .returning(_SPEND.c.spent_micros, _SPEND.c.overflow_micros))
_TOTALS = select(_SPEND.c.spent_micros, _SPEND.c.overflow_micros).where(_KEY)
_TEAM = select(Team.name, Team.notify_url, Team.monthly_budget_usd).where(
    Team.id == bindparam("p_team"))
NO_LIMIT = 2 ** 62
_REFS = itertools.count(1)


@dataclass(frozen=True)
class TeamAlert:
    """One alert to announce: the team crossed ``threshold`` percent of its month's budget."""

    team_id: str
    team: str
    month: str
    threshold: int
    spent_usd: float
    budget_usd: float
    notify_url: str | None


#: Called (in the crossing process) with each new alert; :mod:`services.db.team_alerts`
#: registers its notifier here. A hook must not block.
ALERT_HOOKS: list[Callable[[TeamAlert], None]] = []


def month_of(day: date) -> str:
    return f"{day.year:04d}-{day.month:02d}"


def this_month() -> str:
    return month_of(utcnow().date())


def to_micros(usd: float) -> int:
    return round(usd * MICROS)


@dataclass(frozen=True)
class TeamState:
    """The team's month as one read saw it (``budget_micros`` ``None``: no team cap)."""

    team_id: str | None
    spent_micros: int
    overflow_micros: int
    budget_micros: int | None


def read_state(db: Database, team_id: str | None) -> TeamState:
    """The team's month read on its own (callers without the shared step read)."""
    if team_id is None:
        return TeamState(None, 0, 0, None)
    with db.read_connection() as connection:
        totals = connection.execute(_TOTALS, {"p_team": team_id,
                                              "p_month": this_month()}).one_or_none()
        budget = connection.execute(select(Team.monthly_budget_usd)
                                    .where(Team.id == team_id)).scalar_one_or_none()
    return TeamState(team_id, int(totals[0]) if totals else 0, int(totals[1]) if totals else 0,
                     to_micros(float(budget)) if budget is not None else None)


def _crossed(before: int, after: int, budget: int) -> list[int]:
    return [t for t in THRESHOLDS if before * 100 < t * budget <= after * 100]


class TeamLayer:
    """The team layer of one execution's budget (``check`` and ``charge`` of
    :class:`~services.db.budget.DbBudget` consult it)."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self.largest_call_micros = 0  # the execution's costliest call so far: the estimate

    def refuses(self, state: TeamState) -> bool:
        """Whether the next model call would pass the team's budget (see the module
        docstring)."""
        if state.team_id is None or state.budget_micros is None:
            return False
        budget = state.budget_micros
        return (state.overflow_micros > 0 or state.spent_micros >= budget
                or state.spent_micros + self.largest_call_micros > budget)

    def charge(self, team_id: str | None, micros: int) -> None:
        """Admit ``micros`` into the team's month (overflow past the budget) and record the
        thresholds this charge crossed, in a transaction of its own; then announce them."""
        pending = self.pending_charge(team_id, micros)
        if pending is None:
            return
        with self._db.transaction() as connection:
            pending.apply(connection)
        pending.after_commit([])

    def pending_charge(self, team_id: str | None, micros: int) -> TeamCharge | None:
        """The charge of one model call, to be written by the caller (``None``: nothing to
        charge); the execution's costliest call is noted either way."""
        self.largest_call_micros = max(self.largest_call_micros, micros)
        if team_id is None or micros <= 0:
            return None
        return TeamCharge(team_id, this_month(), micros)


_ENSURE_MONTH: dict[str, Statement] = {}
_TEAM_STATEMENT = Statement(_TEAM)  # (name, notify_url, monthly_budget_usd)
_ADMIT_STATEMENT = Statement(_ADMIT)
_OVERFLOW_STATEMENT = Statement(_OVERFLOW)


def _ensure_month(connection: Connection) -> Statement:
    """The month's row made if missing (``INSERT ... ON CONFLICT DO NOTHING``), built once per
    dialect."""
    name = connection.dialect.name
    found = _ENSURE_MONTH.get(name)
    if found is None:
        found = _ENSURE_MONTH[name] = Statement(
            dialect_insert(connection)(_SPEND)
            .values(team_id=bindparam("p_team"), month=bindparam("p_month"), spent_micros=0,
                    overflow_micros=0, updated_at=bindparam("p_now"))
            .on_conflict_do_nothing(index_elements=["team_id", "month"]))
    return found


@dataclass(frozen=True)
class TeamCharge:
    """One model call's charge to its team's month: a journal ``PendingWrite`` (it rides along
    with the journal's next commit), with the alerts it inserted announced after that commit."""

    team_id: str
    month: str
    micros: int
    ref: int = field(default_factory=lambda: next(_REFS))
    found: list[TeamAlert] = field(default_factory=list, compare=False)

    def apply(self, connection: Connection, known_blobs: set[str] | None = None) -> None:
        """The ledger and the alert rows in ``connection``'s transaction (SQLite, and
        :meth:`TeamLayer.charge`); the new alerts wait in :attr:`found` for the commit."""
        key = {"p_team": self.team_id, "p_month": self.month}
        team = _TEAM_STATEMENT.execute(connection, key).one_or_none()
        budget = (to_micros(float(team[2]))
                  if team is not None and team[2] is not None else None)
        _ensure_month(connection).execute(connection, {**key, "p_now": utcnow()})
        totals = _ADMIT_STATEMENT.execute(connection, {
            **key, "p_micros": self.micros, "p_now": utcnow(),
            "p_limit": budget if budget is not None else NO_LIMIT}).one_or_none()
        if totals is None:
            totals = _OVERFLOW_STATEMENT.execute(connection, {
                **key, "p_micros": self.micros, "p_now": utcnow()}).one()
        if team is None or budget is None or budget <= 0:
            return
        after = int(totals[0]) + int(totals[1])
        for threshold in _crossed(after - self.micros, after, budget):
            inserted = connection.execute(
                dialect_insert(connection)(_ALERTS)
                .values(team_id=self.team_id, month=self.month, threshold=threshold,
                        spent_micros=after, budget_micros=budget, created_at=utcnow(),
                        attempts=0)
                .on_conflict_do_nothing(index_elements=["team_id", "month", "threshold"]))
            if inserted.rowcount:
                self.found.append(TeamAlert(self.team_id, str(team[0]), self.month,
                                            threshold, after / MICROS, budget / MICROS,
                                            team[1]))

    def as_ops(self, blobs: dict[str, bytes]) -> list[dict[str, Any]]:
        """Its operation for ``studio_journal_commit`` (migration 0021)."""
        return [{"op": "team_charge", "ref": str(self.ref), "team_id": self.team_id,
                 "month": self.month, "micros": self.micros, "no_limit": NO_LIMIT,
                 "thresholds": list(THRESHOLDS)}]

    def after_commit(self, reported: list[dict[str, Any]]) -> None:
        """Announce the alerts this charge inserted (``reported``: what the PostgreSQL
        function answered for the whole commit; SQLite's are in :attr:`found`)."""
        alerts = list(self.found) + [
            TeamAlert(str(a["team_id"]), str(a["team"]), str(a["month"]), int(a["threshold"]),
                      int(a["spent_micros"]) / MICROS, int(a["budget_micros"]) / MICROS,
                      a.get("notify_url"))
            for a in reported if str(a.get("ref")) == str(self.ref)]
        self.found.clear()
        for alert in alerts:
            announce(alert)


def announce(alert: TeamAlert) -> None:
    """Log the operator event ``team_budget_alert`` and hand the alert to :data:`ALERT_HOOKS`
    (the process that inserted its row does, once)."""
    log.warning("team_budget_alert: team %s reached %d%% of its %s budget "
                "($%.2f of $%.2f)", alert.team, alert.threshold, alert.month, alert.spent_usd,
                alert.budget_usd, extra={"event": "team_budget_alert", "team": alert.team,
                                         "month": alert.month, "threshold": alert.threshold})
    for hook in ALERT_HOOKS:
        try:
            hook(alert)
        except Exception:  # a notifier never stops the run
            log.exception("a team budget alert hook failed")


def month_view(db: Database, month: str | None = None) -> list[dict[str, Any]]:
    """Each team's month: spend, overflow, budget, percent, the alerts recorded."""
    month = month or this_month()
    with db.read_session() as session:
        teams = list(session.execute(select(Team.id, Team.name, Team.monthly_budget_usd)
                                     .order_by(Team.name)))
        spend = {str(r[0]): (int(r[1]), int(r[2])) for r in session.execute(
            select(TeamSpend.team_id, TeamSpend.spent_micros, TeamSpend.overflow_micros)
            .where(TeamSpend.month == month))}
        alerts: dict[str, list[int]] = {}
        for team_id, threshold in session.execute(
                select(TeamBudgetAlert.team_id, TeamBudgetAlert.threshold)
                .where(TeamBudgetAlert.month == month).order_by(TeamBudgetAlert.threshold)):
            alerts.setdefault(str(team_id), []).append(int(threshold))
    rows = []
    for team_id, name, budget in teams:
        spent, overflow = spend.get(str(team_id), (0, 0))
        total = (spent + overflow) / MICROS
        rows.append({"team": str(name), "month": month, "spent_usd": total,
                     "overflow_usd": overflow / MICROS,
                     "budget_usd": float(budget) if budget is not None else None,
                     "percent": round(100 * total / budget, 1) if budget else None,
                     "alerts": alerts.get(str(team_id), [])})
    return rows




def team_spend_ratios(db: Database) -> dict[str, float]:
    """``{team: month's spend / monthly budget}`` of the teams with a budget (the gauge)."""
    return {row["team"]: (round(row["spent_usd"] / row["budget_usd"], 6)
                          if row["budget_usd"] else 0.0)
            for row in month_view(db) if row["budget_usd"] is not None}
