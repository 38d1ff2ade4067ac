"""The shared journal poller: many followers of one execution get the same events, in order,
without gaps or repeats, then the same ``end``, while one watch polls for all of them; also when
the journal's rows arrive committed in batches, and for followers that join late or resume.

Runs the hub in this process on a real SQLite database (the API's own code, no HTTP).
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import anyio

from services.api.journal_hub import JournalHub
from services.db.executions import ExecutionRepository
from services.db.journal import DbEventSink
from services.db.models import ExecutionEvent, NodeExecution
from services.db.redaction import Redactor
from services.db.session import Database, open_database
from services.execution.ports import AgentEvent, AgentEventKind
from services.runs.request import ExecutionRequest, create_execution
from tests.support.redaction import settings_redactor
from tests.support.settings import sqlite_settings

FOLLOWERS = 40
EVENTS = 30


def _execution(db: Database, root: Path) -> str:
    (root / "ws").mkdir()
    settings = sqlite_settings(root / "studio.db")
    execution_id = create_execution(db, ExecutionRequest(
        provider="replay", prompt="p", workspace=root / "ws"), Redactor(), settings=settings)
    ExecutionRepository(db).mark_running(execution_id)
    return execution_id


def _batch(db: Database, execution_id: str, count: int) -> None:
    """``count`` rows committed in one transaction (a batching journal writer)."""
    with db.session() as session:
        row = session.get(NodeExecution, execution_id)
        assert row is not None
        for _ in range(count):
            row.event_seq += 1
            session.add(ExecutionEvent(execution_id=execution_id, seq=row.event_seq,
                                       kind="warning", cycle=0, data={"message": "batched"}))


def _write(db: Database, execution_id: str) -> None:
    sink = DbEventSink(db, settings_redactor())
    for index in range(EVENTS):
        if index % 10 == 5:
            _batch(db, execution_id, 4)
        else:
            sink.emit(AgentEvent(AgentEventKind.WARNING, execution_id, index,
                                 {"message": f"event {index}"}))
        time.sleep(0.02)
    ExecutionRepository(db, settings_redactor()).finish(execution_id, status="succeeded",
                                                        outcome="completed")


def _ids_and_kinds(texts: list[str]) -> list[tuple[int, str]]:
    out = []
    for text in texts:
        if text.startswith(":"):
            continue
        lines = dict(line.split(": ", 1) for line in text.strip().split("\n"))
        out.append((int(lines["id"]), lines["event"]))
    return out


async def _follow(hub: JournalHub, execution_id: str, after: int) -> list[str]:
    return [text async for text in hub.follow(execution_id, after)]


def test_one_watch_feeds_every_follower_the_same_journal_and_end(tmp_path: Path) -> None:
    db = open_database(sqlite_settings(tmp_path / "studio.db"))
    try:
        execution_id = _execution(db, tmp_path)
        hub = JournalHub(db)
        watches_seen: set[int] = set()

        async def main() -> list[list[str]]:
            async def count_watches() -> None:
                while True:
                    watches_seen.update(id(w) for w in hub.watches.values())
                    assert len(hub.watches) <= 1
                    await anyio.sleep(0.01)

            counter = asyncio.get_running_loop().create_task(count_watches())
            writer = threading.Thread(target=_write, args=(db, execution_id))
            tasks = [asyncio.create_task(_follow(hub, execution_id, 0))
                     for _ in range(FOLLOWERS // 2)]
            writer.start()
            await anyio.sleep(0.3)
            tasks += [asyncio.create_task(_follow(hub, execution_id, 0))  # late joiners
                      for _ in range(FOLLOWERS // 2)]
            results = await asyncio.gather(*tasks)
            writer.join()
            counter.cancel()
            return results

        results = asyncio.run(main())
        written = EVENTS - 3 + 3 * 4
        expected = [(seq, "warning") for seq in range(1, written + 1)] + [(written, "end")]
        for texts in results:
            assert _ids_and_kinds(texts) == expected
        assert len(watches_seen) == 1
        assert hub.watches == {}

        resumed = asyncio.run(_follow(hub, execution_id, written - 2))
        assert _ids_and_kinds(resumed) == [(written - 1, "warning"), (written, "warning"),
                                           (written, "end")]
        assert '"status":"succeeded"' in resumed[-1]
    finally:
        db.dispose()
