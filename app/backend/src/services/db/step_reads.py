"""What a loop reads before each model or tool call, in one statement.

Before a model call the engine asks the run control (kill switch, cancellation), refreshes its
limits from the runtime settings and checks the repository's daily budget; before a tool call,
the run control and the budget again. Each was a read of its own (four statements before a model
call, three before a tool call: on PostgreSQL a round trip each). :class:`StepReads` answers all
of them from one ``SELECT`` (the cancel flag, today's spend and every runtime setting).

Freshness: a consumer (``control``, ``limits``, ``budget``) reads from the latest snapshot only if
it has not read that snapshot yet and the snapshot is younger than :data:`MAX_AGE_S`; otherwise it
reads anew. The engine always asks the run control first, so the control reads fresh, and the
limits and the budget asked right after it share that read: each check sees the database as of
that moment's read (made just before it), never a value it has already seen.

The loop's journal reads the same state with each commit a model call follows (a tool's result,
a compaction: :meth:`~services.db.journal.DbEventSink.read_with`), in that commit's transaction,
and hands it over (:meth:`StepReads.offer`) as a new snapshot nobody has seen: the checks before
the next model call are answered from it, with no read of their own (on PostgreSQL the commit's
function call carries the read: no round trip). A snapshot is still at most :data:`MAX_AGE_S`
old when it answers, and still answers each consumer once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from sqlalchemy import Connection, Table, bindparam, literal_column, select, true

from services.db.base import utcnow
from services.db.models import BudgetLedger, NodeExecution, RuntimeSetting, Team, TeamSpend
from services.db.session import Database
from services.db.statements import Statement
from services.db.team_budget import TeamState, month_of, to_micros

MAX_AGE_S = 0.5
Consumer = Literal["control", "limits", "budget"]

_SETTINGS: Table = RuntimeSetting.__table__  # type: ignore[assignment]
_EXECUTIONS: Table = NodeExecution.__table__  # type: ignore[assignment]
LEDGER: Table = BudgetLedger.__table__  # type: ignore[assignment]
_ONE = select(literal_column("1").label("one")).subquery("one")
_CANCEL = (select(_EXECUTIONS.c.cancel_requested)
           .where(_EXECUTIONS.c.id == bindparam("p_id")).scalar_subquery())
_SPEND_KEY = ((LEDGER.c.repository == bindparam("p_repository"))
              & (LEDGER.c.day == bindparam("p_day")))
_SPENT = select(LEDGER.c.spent_micros).where(_SPEND_KEY).scalar_subquery()
_OVERFLOW = select(LEDGER.c.overflow_micros).where(_SPEND_KEY).scalar_subquery()
# the execution's team's month (services.db.team_budget), in the same statement
_TEAM = (select(_EXECUTIONS.c.team_id).where(_EXECUTIONS.c.id == bindparam("p_id"))
         .scalar_subquery())
_TEAM_KEY = (TeamSpend.team_id == _TEAM) & (TeamSpend.month == bindparam("p_month"))
_TEAM_SPENT = select(TeamSpend.spent_micros).where(_TEAM_KEY).scalar_subquery()
_TEAM_OVERFLOW = select(TeamSpend.overflow_micros).where(_TEAM_KEY).scalar_subquery()
_TEAM_BUDGET = select(Team.monthly_budget_usd).where(Team.id == _TEAM).scalar_subquery()
_READ = (
    select(_CANCEL.label("cancel"), _SPENT.label("spent"), _OVERFLOW.label("overflow"),
           _TEAM.label("team_id"), _TEAM_SPENT.label("team_spent"),
           _TEAM_OVERFLOW.label("team_overflow"), _TEAM_BUDGET.label("team_budget"),
           _SETTINGS.c.key, _SETTINGS.c.value)
    .select_from(_ONE.outerjoin(_SETTINGS, true()))
)
_READ_STATEMENT = Statement(_READ)
_READ_COLUMNS = ("cancel", "spent", "overflow", "team_id", "team_spent", "team_overflow",
                 "team_budget", "key", "value")


@dataclass(frozen=True)
class StepState:
    """The database as one read saw it."""

    cancel_requested: bool
    spent_micros: int
    overflow_micros: int
    settings: dict[str, Any]  # the stored runtime settings (defaults not applied)
    read_at: float = 0.0
    team: TeamState = TeamState(None, 0, 0, None)


@dataclass
class StepReads:
    """One execution's reads before its calls, shared by its run control, limits and budget."""

    db: Database
    execution_id: str
    repository: str
    max_age_s: float = MAX_AGE_S
    statements: int = 0  # reads made (the benchmark and the tests count them)
    _through: Callable[[str, Callable[[Connection], Any]], Any] | None = None
    _latest: StepState | None = None
    _seen: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def latest(self) -> StepState | None:
        """The last read (the one a consumer was just answered from)."""
        return self._latest

    def read(self, consumer: Consumer) -> StepState:
        """The state for ``consumer``: the latest read if it has not seen it and it is fresh,
        else a new read."""
        with self._lock:
            latest = self._latest
            if (latest is not None and consumer not in self._seen
                    and time.monotonic() - latest.read_at < self.max_age_s):
                self._seen.add(consumer)
                return latest
            state = self._read()
            self._latest, self._seen = state, {consumer}
            return state

    def offer(self, state: StepState | dict[str, Any]) -> None:
        """A state read with a journal commit (:meth:`read_in`'s, or the JSON the PostgreSQL
        function answered): the latest snapshot from now on, seen by no consumer yet."""
        if isinstance(state, dict):
            state = _state(state, state.get("settings") or {})
        with self._lock:
            self._latest, self._seen = replace(state, read_at=time.monotonic()), set()

    def read_keys(self) -> dict[str, Any]:
        """What ``studio_journal_commit`` reads with a commit (migration 0021)."""
        today = utcnow().date()
        return {"repository": self.repository, "day": today.isoformat(),
                "month": month_of(today)}

    def read_in(self, connection: Connection) -> StepState:
        """The state, read in ``connection``'s transaction (a journal commit's, SQLite)."""
        return _from_rows(_READ_STATEMENT.execute(connection, self._params()).rows)

    def _params(self) -> dict[str, Any]:
        today = utcnow().date()
        return {"p_id": self.execution_id, "p_repository": self.repository,
                "p_day": today, "p_month": month_of(today)}

    def read_through(self, read: Callable[[str, Callable[[Connection], Any]], Any]) -> None:
        """Make the reads with ``read`` (the loop's journal's kept connection)."""
        self._through = read

    def _read(self) -> StepState:
        params = self._params()
        read = self._through or self.db.read
        rows = read("step read", lambda connection: _READ_STATEMENT.execute(
            connection, params).rows)  # run again on a fresh connection if the one used drops
        self.statements += 1
        return _from_rows(rows)


def _from_rows(rows: Sequence[tuple[Any, ...]]) -> StepState:
    """The state from the read's rows (one per stored setting, or one: :data:`_READ_COLUMNS`)."""
    return _state(dict(zip(_READ_COLUMNS, rows[0], strict=True)),
                  {str(row[7]): row[8] for row in rows if row[7] is not None})


def _state(found: Any, settings: dict[str, Any]) -> StepState:
    """A :class:`StepState` from the read's columns (a row's mapping, or the function's JSON)."""
    budget = found["team_budget"]
    return StepState(
        cancel_requested=bool(found["cancel"]),
        spent_micros=int(found["spent"] or 0), overflow_micros=int(found["overflow"] or 0),
        settings=settings, read_at=time.monotonic(),
        team=TeamState(found["team_id"], int(found["team_spent"] or 0),
                       int(found["team_overflow"] or 0),
                       to_micros(float(budget)) if budget is not None else None))
