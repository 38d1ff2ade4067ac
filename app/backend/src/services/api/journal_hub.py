"""One journal subscription per API process: a shared poller per watched execution.

However many clients follow one execution, one :class:`ExecutionWatch` polls its journal (one
:func:`~services.db.journal_reader.read_tail` every :data:`POLL_INTERVAL_S`, through the thread
pool), formats each new row once, and hands the batch to every subscriber's queue. A watch lives
while it has subscribers; it stops when the last one leaves, or after it saw the execution final
(it hands out the end and goes; a later client starts a new one, which ends at once).

A subscriber (:meth:`JournalHub.follow`) joins the watch first and reads its own catch-up from
the journal second, so a row is either in its catch-up or in a later batch; rows it already sent
are skipped by ``seq``, and a batch that starts past the next row it needs (it joined between two
polls) is completed from the journal before it is sent. Nothing is missed, nothing repeated.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.to_thread

from services.db.executions import ExecutionRepository
from services.db.journal_reader import END_KIND, JournalTail, read_tail
from services.db.models import ExecutionEvent
from services.db.session import Database

log = logging.getLogger(__name__)

POLL_INTERVAL_S = 0.2
KEEPALIVE_S = 15.0
KEEPALIVE = ": keep-alive\n\n"


def _sse(seq: int, kind: str, payload: dict[str, Any]) -> str:
    data = json.dumps(payload, separators=(",", ":"), default=str)
    return f"id: {seq}\nevent: {kind}\ndata: {data}\n\n"


def format_event(row: ExecutionEvent) -> str:
    """One SSE event for a journal row: ``{seq, kind, cycle, data, created_at}``."""
    created = row.created_at.isoformat() if row.created_at is not None else None
    return _sse(row.seq, row.kind, {"seq": row.seq, "kind": row.kind, "cycle": row.cycle,
                                    "data": row.data, "created_at": created})


def format_end(last_seq: int, end: dict[str, Any]) -> str:
    """The terminal event: its id is the last journal row's, so a resume after it gets it again."""
    return _sse(last_seq, END_KIND, {"seq": last_seq, "kind": END_KIND, "cycle": 0, "data": end,
                                     "created_at": end.get("finished_at")})


@dataclass(frozen=True)
class Batch:
    """Rows read by one poll, formatted (``(seq, text)``), and the end when it was seen."""

    rows: tuple[tuple[int, str], ...]
    end: dict[str, Any] | None = None


class ExecutionWatch:
    """The one poller of one execution's journal in this process."""

    def __init__(self, hub: JournalHub, execution_id: str) -> None:
        self.hub = hub
        self.execution_id = execution_id
        self.queues: set[asyncio.Queue[Batch]] = set()
        self.last = 0
        self.done = False
        self.task: asyncio.Task[None] | None = None

    async def _poll_once(self) -> bool:
        tail: JournalTail = await anyio.to_thread.run_sync(
            read_tail, self.hub.repository, self.execution_id, self.last)
        if tail.missing:
            self._publish(Batch((), {"status": "unknown"}))
            return True
        rows = tuple((row.seq, format_event(row)) for row in tail.events)
        if rows:
            self.last = rows[-1][0]
        if rows or tail.end is not None:
            self._publish(Batch(rows, tail.end))
        return tail.end is not None

    def _publish(self, batch: Batch) -> None:
        for queue in self.queues:
            queue.put_nowait(batch)

    async def run(self) -> None:
        try:
            while self.queues:
                if await self._poll_once():
                    break
                await anyio.sleep(POLL_INTERVAL_S)
        except Exception:  # a broken database: the clients end (they may reconnect)
            log.exception("journal watch of execution %s failed", self.execution_id)
            self._publish(Batch((), None))
        finally:
            self.done = True
            self.hub.forget(self)


class JournalHub:
    """The process's watches, by execution id; created once per app."""

    def __init__(self, db: Database) -> None:
        self.repository = ExecutionRepository(db)
        self.watches: dict[str, ExecutionWatch] = {}

    def forget(self, watch: ExecutionWatch) -> None:
        if self.watches.get(watch.execution_id) is watch:
            del self.watches[watch.execution_id]

    def _join(self, execution_id: str, queue: asyncio.Queue[Batch]) -> ExecutionWatch:
        watch = self.watches.get(execution_id)
        if watch is None or watch.done:
            watch = ExecutionWatch(self, execution_id)
            self.watches[execution_id] = watch
        watch.queues.add(queue)
        if watch.task is None:
            watch.task = asyncio.get_running_loop().create_task(watch.run())
        return watch

    def _leave(self, watch: ExecutionWatch, queue: asyncio.Queue[Batch]) -> None:
        watch.queues.discard(queue)
        if not watch.queues and not watch.done:
            watch.done = True  # no later client joins a watch being cancelled
            self.forget(watch)
            if watch.task is not None:
                watch.task.cancel()

    async def _read(self, execution_id: str, after: int, upto: int | None = None
                    ) -> list[tuple[int, str]]:
        rows = await anyio.to_thread.run_sync(
            lambda: self.repository.events(execution_id, after_seq=after))
        return [(row.seq, format_event(row)) for row in rows
                if upto is None or row.seq <= upto]

    async def follow(self, execution_id: str, after: int) -> AsyncIterator[str]:
        """The SSE text of the journal after ``after``, then the terminal event."""
        queue: asyncio.Queue[Batch] = asyncio.Queue()
        watch = self._join(execution_id, queue)
        last = after
        try:
            for seq, text in await self._read(execution_id, after):
                yield text
                last = seq
            watch.last = max(watch.last, last)  # committed rows: the watch need not read them
            while True:
                batch: Batch | None = None
                with anyio.move_on_after(KEEPALIVE_S):
                    batch = await queue.get()
                if batch is None:
                    yield KEEPALIVE
                    continue
                if not batch.rows and batch.end is None:  # the watch broke: the client may
                    return                                # reconnect with Last-Event-ID
                rows = [(seq, text) for seq, text in batch.rows if seq > last]
                upto = rows[0][0] - 1 if rows else (batch.rows[-1][0] if batch.rows else None)
                if batch.end is not None and not batch.rows:
                    upto = None  # the end with nothing new: whatever is left, then the end
                if upto is None or upto > last:  # joined between two polls: fill the gap
                    gap = await self._read(execution_id, last, upto)
                    rows = [*gap, *rows]
                for seq, text in rows:
                    yield text
                    last = seq
                if batch.end is not None:
                    yield format_end(last, batch.end)
                    return
        finally:
            self._leave(watch, queue)
