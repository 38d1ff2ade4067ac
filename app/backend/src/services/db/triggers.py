"""The SQL of work that starts on GitHub: deliveries, trigger rules, slots.

A slot (one per repository and pull-request or issue number) changes state only through
:meth:`SlotStore.transition`: one conditional ``UPDATE`` on its ``state`` and ``version``, so of
two processes that read the same slot, only one moves it (SQLite and PostgreSQL alike). What the
states mean and when they move is :mod:`services.triggers.slots`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, update

from services.db.base import utcnow
from services.db.errors import NotFound
from services.db.models import GithubDelivery, GithubTrigger, TriggerSlot
from services.db.session import Database, dialect_insert

IDLE, DEBOUNCING, RUNNING = "idle", "debouncing", "running"
SLOT_STATES = (IDLE, DEBOUNCING, RUNNING)


class UnknownTrigger(NotFound):
    what = "trigger"


class DeliveryStore:
    """Recorded webhook deliveries."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def record(self, delivery_id: str, **fields: Any) -> bool:
        """Record a delivery once; ``False`` when its id was recorded before (a redelivery)."""
        with self.db.session() as session:
            statement = (dialect_insert(session)(GithubDelivery)
                         .values(id=delivery_id, received_at=utcnow(), **fields)
                         .on_conflict_do_nothing(index_elements=["id"])
                         .returning(GithubDelivery.id))
            # RETURNING, not rowcount: the ORM's rowcount of an INSERT is not the rows written
            return session.execute(statement).scalar_one_or_none() is not None

    def get(self, delivery_id: str) -> GithubDelivery | None:
        with self.db.read_session() as session:
            return session.get(GithubDelivery, delivery_id)

    def update(self, delivery_id: str, **values: Any) -> None:
        with self.db.session() as session:
            session.execute(update(GithubDelivery).where(GithubDelivery.id == delivery_id)
                            .values(**values))

    def claim(self, delivery_id: str, outcomes: tuple[str, ...], claimed: str) -> bool:
        """Move a delivery from one of ``outcomes`` to ``claimed`` (one conditional UPDATE):
        of two processes acting on the same delivery, one gets it."""
        with self.db.session() as session:
            done = session.execute(update(GithubDelivery)
                                   .where(GithubDelivery.id == delivery_id,
                                          GithubDelivery.outcome.in_(outcomes))
                                   .values(outcome=claimed))
            return bool(done.rowcount)  # type: ignore[attr-defined]

    def with_outcome(self, outcome: str) -> list[GithubDelivery]:
        """Oldest first."""
        with self.db.read_session() as session:
            return list(session.scalars(select(GithubDelivery)
                                        .where(GithubDelivery.outcome == outcome)
                                        .order_by(GithubDelivery.received_at)))

    def recent(self, limit: int = 50) -> list[GithubDelivery]:
        with self.db.read_session() as session:
            return list(session.scalars(select(GithubDelivery)
                                        .order_by(GithubDelivery.received_at.desc())
                                        .limit(limit)))

    def counts(self) -> list[tuple[str, str, int]]:
        """``(event, outcome, count)`` of every recorded delivery."""
        with self.db.read_session() as session:
            rows = session.execute(select(GithubDelivery.event, GithubDelivery.outcome,
                                          func.count()).group_by(GithubDelivery.event,
                                                                 GithubDelivery.outcome))
            return [(str(e), str(o), int(n)) for e, o, n in rows]


class TriggerStore:
    """The trigger rules, one per repository (``owner/name``)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def get(self, repository: str) -> GithubTrigger | None:
        with self.db.read_session() as session:
            return session.get(GithubTrigger, repository.lower())

    def all(self, team_id: str | None = None) -> list[GithubTrigger]:
        """Every trigger (``team_id``: that team's only)."""
        query = select(GithubTrigger).order_by(GithubTrigger.repository)
        if team_id is not None:
            query = query.where(GithubTrigger.team_id == team_id)
        with self.db.read_session() as session:
            return list(session.scalars(query))

    def put(self, repository: str, **fields: Any) -> GithubTrigger:
        with self.db.session() as session:
            row = session.get(GithubTrigger, repository.lower())
            if row is None:
                row = GithubTrigger(repository=repository.lower())
                session.add(row)
            for key, value in fields.items():
                setattr(row, key, value)
            session.flush()
            return row

    def delete(self, repository: str) -> bool:
        with self.db.session() as session:
            row = session.get(GithubTrigger, repository.lower())
            if row is None:
                return False
            session.delete(row)
            return True


@dataclass(frozen=True)
class Slot:
    repository: str
    number: int
    state: str
    version: int
    execution_id: str | None
    pending: dict[str, Any] | None
    due_at: datetime | None
    running_work: dict[str, Any] | None
    updated_at: datetime


def _slot(row: TriggerSlot) -> Slot:
    return Slot(row.repository, row.number, row.state, row.version, row.execution_id,
                dict(row.pending) if row.pending else None, row.due_at,
                dict(row.running_work) if row.running_work else None, row.updated_at)


class SlotStore:
    """The slots; every change is :meth:`transition`."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def read(self, repository: str, number: int) -> Slot:
        """The slot (made ``idle`` first when there is none)."""
        with self.db.session() as session:
            session.execute(dialect_insert(session)(TriggerSlot)
                            .values(repository=repository, number=number, state=IDLE, version=0,
                                    updated_at=utcnow())
                            .on_conflict_do_nothing(index_elements=["repository", "number"]))
        with self.db.read_session() as session:
            row = session.get(TriggerSlot, (repository, number))
            assert row is not None
            return _slot(row)

    def transition(self, slot: Slot, **values: Any) -> bool:
        """Move ``slot`` (as read) to ``values`` if no one moved it since: one conditional
        UPDATE; ``False`` when another process won."""
        with self.db.session() as session:
            done = session.execute(
                update(TriggerSlot)
                .where(TriggerSlot.repository == slot.repository,
                       TriggerSlot.number == slot.number, TriggerSlot.state == slot.state,
                       TriggerSlot.version == slot.version)
                .values(version=slot.version + 1, updated_at=utcnow(), **values))
            return bool(done.rowcount)  # type: ignore[attr-defined]

    def attach(self, repository: str, number: int, execution_id: str) -> bool:
        """Name the execution of a slot just moved to ``running`` (by the process that moved
        it; keyed on there being none yet, so concurrent pending additions do not interfere)."""
        with self.db.session() as session:
            done = session.execute(
                update(TriggerSlot)
                .where(TriggerSlot.repository == repository, TriggerSlot.number == number,
                       TriggerSlot.state == RUNNING, TriggerSlot.execution_id.is_(None))
                .values(execution_id=execution_id, updated_at=utcnow()))
            return bool(done.rowcount)  # type: ignore[attr-defined]

    def in_states(self, *states: str) -> list[Slot]:
        with self.db.read_session() as session:
            rows = session.scalars(select(TriggerSlot).where(TriggerSlot.state.in_(states))
                                   .order_by(TriggerSlot.updated_at))
            return [_slot(row) for row in rows]

    def all(self) -> list[Slot]:
        with self.db.read_session() as session:
            return [_slot(row) for row in session.scalars(
                select(TriggerSlot).order_by(TriggerSlot.repository, TriggerSlot.number))]

    def state_counts(self) -> dict[str, int]:
        with self.db.read_session() as session:
            rows = session.execute(select(TriggerSlot.state, func.count())
                                   .group_by(TriggerSlot.state))
            found = {str(state): int(count) for state, count in rows}
        return {state: found.get(state, 0) for state in SLOT_STATES}
