"""``DbBudget``: a repository's daily budget, atomic across processes.

The ledger counts micro-dollars per ``(repository, UTC day)``. :meth:`DbBudget.charge` admits a
charge only if it fits under the limit, in one conditional statement
(``UPDATE ... SET spent = spent + x WHERE spent + x <= limit RETURNING``) after making sure the
day's row exists (``INSERT ... ON CONFLICT DO NOTHING``). PostgreSQL's row lock and SQLite's
``BEGIN IMMEDIATE`` make that atomic, so concurrent processes never push ``spent`` over the limit.

A charge that does not fit is real money already spent (a model call cannot be un-made): it goes to
``overflow`` and closes the day's budget, so :meth:`DbBudget.check` refuses from then on. The money
actually spent can therefore pass the limit by at most the calls in flight when it filled up.

Given a buffered journal (``journal=``), a charge, the repository's and the team's
(:class:`~services.db.team_budget.TeamCharge`), is written in the journal's next commit (the one
that makes the model's answer durable) instead of a transaction of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Any

from sqlalchemy import Connection, Table, bindparam, select, update

from services.db.base import utcnow
from services.db.journal import DbEventSink
from services.db.models import BudgetLedger, NodeExecution
from services.db.session import Database, dialect_insert, dialect_name
from services.db.statements import Statement
from services.db.step_reads import StepReads
from services.db.team_budget import TeamLayer, TeamState, read_state
from services.execution.errors import ErrorCode

MICROS = 1_000_000
_LEDGER: Table = BudgetLedger.__table__  # type: ignore[assignment]
_KEY = ((_LEDGER.c.repository == bindparam("p_repository"))
        & (_LEDGER.c.day == bindparam("p_day")))
_ADMIT = (
    update(_LEDGER)
    .where(_KEY, _LEDGER.c.spent_micros + bindparam("p_micros") <= bindparam("p_limit"))
    .values(spent_micros=_LEDGER.c.spent_micros + bindparam("p_micros"),
            updated_at=bindparam("p_now"))
    .returning(_LEDGER.c.spent_micros)
)
_OVERFLOW = (
    update(_LEDGER).where(_KEY)
    .values(overflow_micros=_LEDGER.c.overflow_micros + bindparam("p_micros"),
            updated_at=bindparam("p_now"))
)
_ADMIT_STATEMENT = Statement(_ADMIT)
_OVERFLOW_STATEMENT = Statement(_OVERFLOW)
_ENSURE_ROW: dict[str, Statement] = {}


def _ensure_row(connection: Connection) -> Statement:
    """The day's row made if missing (``INSERT ... ON CONFLICT DO NOTHING``), per dialect."""
    name = dialect_name(connection)
    found = _ENSURE_ROW.get(name)
    if found is None:
        found = _ENSURE_ROW[name] = Statement(
            dialect_insert(connection)(_LEDGER)
            .values(repository=bindparam("p_repository"), day=bindparam("p_day"),
                    spent_micros=0, overflow_micros=0, updated_at=bindparam("p_now"))
            .on_conflict_do_nothing(index_elements=["repository", "day"]))
    return found


_SPENT = select(_LEDGER.c.spent_micros, _LEDGER.c.overflow_micros).where(
    _LEDGER.c.repository == bindparam("p_repository"), _LEDGER.c.day == bindparam("p_day"))


def to_micros(usd: float) -> int:
    return round(usd * MICROS)


def today() -> date:
    return utcnow().date()


class DbBudget:
    """A :class:`~services.execution.ports.BudgetPort` for one execution's repository and team
    (:mod:`services.db.team_budget`); ``refused_layer`` names the layer that refused last
    (``repository`` or ``team``)."""

    def __init__(
        self, db: Database, execution_id: str, repository: str, daily_limit_usd: float,
        *, journal: DbEventSink | None = None, reads: StepReads | None = None,
    ) -> None:
        self._db = db
        self._journal = journal
        self._reads = reads
        self.execution_id = execution_id
        self.repository = repository
        self.limit_micros = to_micros(daily_limit_usd)
        self.team = TeamLayer(db)
        self.team_id: str | None = None
        self.refused_layer: str | None = None

    def check(self) -> ErrorCode | None:
        """``budget_exceeded`` once today's spend reached the limit or a charge overflowed, or
        once the team's month would pass its budget (both from the one shared read)."""
        spent, overflow = self.spent_today()
        if spent >= self.limit_micros or overflow > 0:
            self.refused_layer = "repository"
            return ErrorCode.BUDGET_EXCEEDED
        state = self._team_state()
        self.team_id = state.team_id
        if self.team.refuses(state):
            self.refused_layer = "team"
            return ErrorCode.BUDGET_EXCEEDED
        self.refused_layer = None
        return None

    def _team_state(self) -> TeamState:
        if self._reads is not None:
            latest = self._reads.latest
            if latest is not None:
                return latest.team
        return read_state(self._db, self._execution_team())

    def _execution_team(self) -> str | None:
        if self.team_id is None:
            with self._db.read_connection() as connection:
                self.team_id = connection.execute(
                    select(NodeExecution.team_id)
                    .where(NodeExecution.id == self.execution_id)).scalar_one_or_none()
        return self.team_id

    def charge(self, usd: float) -> None:
        """Record what a call cost; admitted if it fits, else recorded as overflow."""
        micros = to_micros(usd)
        if micros <= 0:
            return
        team = self.team.pending_charge(self._execution_team(), micros)
        charge = Charge(self.repository, today(), micros, self.limit_micros)
        if self._journal is not None:  # both ride along with the journal's next commit
            if team is not None:
                self._journal.defer(self.execution_id, team)
            self._journal.defer(self.execution_id, charge)
            return
        with self._db.transaction() as connection:
            if team is not None:
                team.apply(connection)
            charge.apply(connection)
        if team is not None:
            team.after_commit([])

    def spent_today(self) -> tuple[int, int]:
        """``(admitted, overflow)`` micro-dollars for today (from the loop's shared read when
        it has one: see :mod:`services.db.step_reads`)."""
        if self._reads is not None:
            state = self._reads.read("budget")
            return state.spent_micros, state.overflow_micros
        with self._db.read_connection() as connection:  # Core: read before every model call
            row = connection.execute(_SPENT, {"p_repository": self.repository,
                                              "p_day": today()}).one_or_none()
        return (int(row[0]), int(row[1])) if row is not None else (0, 0)


@dataclass(frozen=True)
class Charge:
    """One admitted-or-overflow charge of a repository's day (a journal ``PendingWrite`` too)."""

    repository: str
    day: date
    micros: int
    limit_micros: int

    def apply(self, connection: Connection, known_blobs: set[str] | None = None) -> None:
        """Write it in ``connection``'s transaction (Core statements built once)."""
        key = {"p_repository": self.repository, "p_day": self.day}
        _ensure_row(connection).execute(connection, {**key, "p_now": utcnow()})
        admitted = _ADMIT_STATEMENT.execute(connection, {
            **key, "p_micros": self.micros, "p_limit": self.limit_micros, "p_now": utcnow(),
        }).one_or_none()
        if admitted is None:
            _OVERFLOW_STATEMENT.execute(connection, {**key, "p_micros": self.micros,
                                                     "p_now": utcnow()})

    def as_ops(self, blobs: dict[str, bytes]) -> list[dict[str, Any]]:
        return [{"op": "charge", "repository": self.repository, "day": self.day.isoformat(),
                 "micros": self.micros, "limit": self.limit_micros}]


def spend_today(db: Database) -> list[tuple[str, int, int]]:
    """``(repository, admitted, overflow)`` micro-dollars of every repository that spent today."""
    query = (select(BudgetLedger.repository, BudgetLedger.spent_micros,
                    BudgetLedger.overflow_micros)
             .where(BudgetLedger.day == today()).order_by(BudgetLedger.repository))
    with db.session() as session:
        return [(str(r[0]), int(r[1]), int(r[2])) for r in session.execute(query)]
