"""The buffered journal of a durable execution: two commits per tool turn, gap-free for readers.

A real execution (replay provider, a repository on the local git host, SQLite and PostgreSQL)
runs in this process, with a SQLAlchemy listener classifying every committed transaction by the
statements it ran. While the loop runs, every write transaction is a journal commit (the tool
calls' records, checkpoints and budget charges, the repository's and the team's, ride along),
and there are exactly two of them per turn with a tool call (the call before it runs; its
record, checkpoint and result after it) and one for the final turn; on PostgreSQL each is a
single statement sent in autocommit mode (``studio_journal_commit``): one round trip. The only
other statement of a turn is the read before its tool call: the checks before a model call are
answered by the read the commit before it carried. A reader polling the journal meanwhile, as the
API's event stream does, sees every event once, in order, without a gap. Large contents are
stored once, and what a resume reads back (the conversation, the replay script) is whole.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, event, select

from services.db.budget import DbBudget
from services.db.executions import ExecutionRepository
from services.db.models import (
    BudgetLedger,
    ContentBlob,
    ExecutionEvent,
    TeamSpend,
    WorkspaceCheckpoint,
)
from services.db.redaction import Redactor
from services.db.runtime_settings import SettingsRepository
from services.db.session import READ_ONLY_OPTION, Database
from services.runs.durable import execute_execution
from services.runs.request import ExecutionRequest, create_execution
from tests.integration.databases import url_of
from tests.integration.repo_env import DONE, TOKEN, repo_world
from tests.support.redaction import settings_redactor

TURNS = 6
COST = 0.01


@dataclass
class Transaction:
    read_only: bool
    statements: list[str] = field(default_factory=list)

    @property
    def wrote(self) -> bool:
        return any(s.lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE"))
                   or "studio_journal_commit" in s for s in self.statements)

    @property
    def journal(self) -> bool:
        return any("execution_events" in s or "studio_journal_commit" in s
                   for s in self.statements)

    @property
    def team_charge(self) -> bool:
        """A call's charge to its team's month (services.db.team_budget: its own transaction,
        beside the journal's commit; see the closing notes of issue 29)."""
        return any("team_spend" in s for s in self.statements) and not self.journal

    @property
    def lease(self) -> bool:
        """A lease claim or renewal (the heartbeat thread runs on its own clock)."""
        return any("lease_expires_at" in s and "event_seq" not in s for s in self.statements)


@dataclass
class CommitLog:
    committed: list[Transaction] = field(default_factory=list)
    open: dict[int, Transaction] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


@contextmanager
def counting_commits(engine: Engine) -> Iterator[CommitLog]:
    """Every transaction committed on ``engine`` meanwhile, with the statements it ran."""
    log = CommitLog()

    def begin(conn: Any) -> None:
        read_only = bool(conn.get_execution_options().get(READ_ONLY_OPTION))
        with log.lock:
            log.open[id(conn)] = Transaction(read_only)

    def statement(conn: Any, _cursor: Any, text: str, *_args: Any) -> None:
        with log.lock:
            if conn.get_execution_options().get("isolation_level") == "AUTOCOMMIT":
                log.committed.append(Transaction(False, [text]))  # its own transaction
                return
            found = log.open.get(id(conn))
            if found is not None:
                found.statements.append(text)

    def commit(conn: Any) -> None:
        with log.lock:
            found = log.open.pop(id(conn), None)
            if found is not None:
                log.committed.append(found)

    listeners = [("begin", begin), ("before_cursor_execute", statement), ("commit", commit)]
    for name, listener in listeners:
        event.listen(engine, name, listener)
    try:
        yield log
    finally:
        for name, listener in listeners:
            event.remove(engine, name, listener)


def _script(turns: int) -> dict[str, Any]:
    usage = {"input_tokens": 10, "output_tokens": 5, "cost_usd": COST}
    steps = [{"tool_calls": [{"tool": "workspace.write_file",
                              "args": {"path": "notes.txt", "content": f"version {n}\n"}}],
              "usage": usage} for n in range(turns)]
    return {"turns": [*steps, {"final": DONE, "usage": usage}]}


class Reader(threading.Thread):
    """Polls the journal after the last sequence number seen, as the event stream does."""

    def __init__(self, db: Database, execution_id: str) -> None:
        super().__init__(daemon=True)
        self.repo = ExecutionRepository(db, settings_redactor())
        self.execution_id = execution_id
        self.seen: list[int] = []
        self.batches = 0
        self.stop = threading.Event()

    def run(self) -> None:
        while True:
            last = self.seen[-1] if self.seen else 0
            found = [e.seq for e in self.repo.events(self.execution_id, after_seq=last)]
            if found:
                self.batches += 1
                self.seen.extend(found)
            elif self.stop.is_set():
                return
            self.stop.wait(0.005)


def test_a_tool_turn_is_two_commits_and_readers_see_every_event_in_order(
        db: Database, tmp_path: Path) -> None:
    with repo_world(tmp_path / "world") as base:
        world = replace(base, db_url=url_of(db))
        settings = SettingsRepository(db)
        settings.set("heartbeat_s", 300.0)
        settings.set("lease_ttl_s", 600.0)
        execution_id = create_execution(db, ExecutionRequest(
            provider="replay", prompt="Write notes", repo_url=world.url,
            script=_script(TURNS), pull_request=False), Redactor([TOKEN]),
            settings=world.settings())
        reader = Reader(db, execution_id)
        with counting_commits(db.engine) as log:  # (listeners are added before any thread runs)
            reader.start()
            try:
                outcome = execute_execution(execution_id, settings=world.settings(), db=db)
            finally:
                reader.stop.set()
                reader.join(30)
        assert outcome.status == "succeeded", outcome

    # the team's charge rides along with the journal's commit (issue 35): no commit of its own
    assert not [t for t in log.committed if t.wrote and t.team_charge]
    writes = [t for t in log.committed if t.wrote and not t.lease]
    first = next(i for i, t in enumerate(writes) if t.journal)
    # the loop's commits run until the execution moves to finalizing (a status update); the
    # finalization steps journal their own events after it
    end = next((i for i in range(first, len(writes)) if not writes[i].journal), len(writes))
    in_loop = writes[first:end]
    assert len(in_loop) == 2 * TURNS + 1, [t.statements for t in writes[first:]]
    # the reads before the calls: the commit a model call follows carries the checks' read, so
    # the loop reads on its own once per tool call (before it), never before a model call
    position = {id(t): i for i, t in enumerate(log.committed)}  # (equal statements: by identity)
    window = log.committed[position[id(in_loop[0])]:position[id(in_loop[-1])]]
    reads = [t for t in window if any("runtime_settings" in s for s in t.statements)
             and not t.wrote]
    assert len(reads) == TURNS - 1, [t.statements for t in window]
    assert any("status" in s for s in writes[end].statements), writes[end].statements
    if db.dialect == "postgresql":  # one statement in autocommit: one round trip per commit
        assert all(len(t.statements) == 1 for t in in_loop), [t.statements for t in in_loop]
    assert not any(t.wrote for t in log.committed if t.read_only)

    events = ExecutionRepository(db).events(execution_id)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert reader.seen == [e.seq for e in events]  # every event once, in order
    assert 1 < reader.batches <= len(events)
    kinds = [e.kind for e in events]
    assert kinds.count("tool_call") == kinds.count("tool_result") == TURNS
    loop_kinds = kinds[:kinds.index("finalize")] if "finalize" in kinds else kinds
    assert loop_kinds[-1] == "finished" and set(kinds[len(loop_kinds):]) <= {"finalize"}

    # what rode along was written: each call's record, the checkpoints, the charges
    calls = ExecutionRepository(db).tool_calls(execution_id)
    assert len(calls) == TURNS and all(c.ok and c.envelope for c in calls)
    with db.session() as session:
        kept = session.execute(select(WorkspaceCheckpoint.seq, WorkspaceCheckpoint.patch)
                               .where(WorkspaceCheckpoint.execution_id == execution_id)).all()
        spent = session.execute(select(BudgetLedger.spent_micros)).scalars().all()
        team_spent = session.execute(select(TeamSpend.spent_micros + TeamSpend.overflow_micros)
                                     ).scalars().all()
    assert len(kept) == 1 and kept[0].seq == TURNS  # only the latest of the attempt is kept
    assert kept[0].patch is not None and f"version {TURNS - 1}".encode() in kept[0].patch
    assert sum(spent) == round((TURNS + 1) * COST * 1_000_000)
    assert sum(team_spent) == round((TURNS + 1) * COST * 1_000_000)  # the team's month too
    if db.dialect == "sqlite":  # its statements ran in the journal's commits
        assert sum(any(s.startswith("UPDATE team_spend") for s in t.statements)
                   for t in in_loop) == TURNS + 1


def test_a_deferred_budget_charge_commits_with_the_journal(db: Database) -> None:
    from services.db.journal import DbEventSink
    from services.execution.ports import AgentEvent, AgentEventKind
    from tests.integration.db.helpers import new_execution

    execution_id = new_execution(db)
    journal = DbEventSink(db, settings_redactor(), buffered=True)
    budget = DbBudget(db, execution_id, "acme/widgets", 10.0, journal=journal)
    journal.emit(AgentEvent(AgentEventKind.MODEL_REQUEST, execution_id, 0, {}))
    budget.charge(0.5)
    assert budget.spent_today() == (0, 0) and journal.pending == 1  # nothing written yet
    with counting_commits(db.engine) as log:
        journal.emit(AgentEvent(AgentEventKind.FINISHED, execution_id, 0, {}))
    assert [t.wrote for t in log.committed] == [True]
    assert budget.spent_today() == (500_000, 0)
    assert [e.kind for e in ExecutionRepository(db).events(execution_id)] == \
        ["model_request", "finished"]


def test_a_stale_epoch_writes_nothing_of_what_rides_along(db: Database) -> None:
    from services.db.checkpoints import CallWrite, Checkpoint
    from services.db.journal import DbEventSink, StaleLease
    from services.db.leases import LeaseStore
    from services.db.team_budget import read_state
    from services.db.teams import TeamStore
    from services.execution.ports import AgentEvent, AgentEventKind
    from tests.integration.db.helpers import new_execution

    team = TeamStore(db).create("stale-team", monthly_budget_usd=1.0).id
    execution_id = new_execution(db, team_id=team)
    epoch = LeaseStore(db).claim(execution_id, "a", ttl_s=60)
    assert epoch is not None
    journal = DbEventSink(db, settings_redactor(), lease_epoch=epoch, buffered=True)
    budget = DbBudget(db, execution_id, "acme/stale", 1.0, journal=journal)
    envelope = {"ok": True, "call_id": "c1", "tool_name": "workspace_write_file",
                "domain": "workspace", "operation": "write_file", "duration_ms": 1.0}
    journal.emit(AgentEvent(AgentEventKind.MODEL_REQUEST, execution_id, 0, {}))
    budget.charge(0.25)
    journal.defer(execution_id, CallWrite(execution_id, "c1", envelope, Checkpoint(
        "0" * 40, b"patch", 5, "1" * 64), epoch, "a"))
    LeaseStore(db).guarded_update(execution_id, epoch, {"lease_epoch": epoch + 1})
    try:
        journal.emit(AgentEvent(AgentEventKind.TOOL_RESULT, execution_id, 0,
                                {"call": envelope, "envelope": envelope}))
        raise AssertionError("a stale epoch was not refused")
    except StaleLease as stale:
        assert f"now {epoch + 1}" in stale.message
    assert ExecutionRepository(db).events(execution_id) == []
    assert ExecutionRepository(db).tool_calls(execution_id) == []
    with db.session() as session:
        assert session.execute(select(WorkspaceCheckpoint)).first() is None
    assert budget.spent_today() == (0, 0)
    assert read_state(db, team).spent_micros == 0  # the team's charge rode along: not written
    current = DbEventSink(db, settings_redactor(), lease_epoch=epoch + 1, buffered=True)
    DbBudget(db, execution_id, "acme/stale", 1.0, journal=current).charge(0.25)
    current.emit(AgentEvent(AgentEventKind.FINISHED, execution_id, 0, {}))  # the current epoch
    current.close()
    assert read_state(db, team).spent_micros == 250_000  # (positive control: it is written)


def test_charges_that_do_not_fit_overflow_when_they_ride_along(db: Database) -> None:
    from services.db.journal import DbEventSink
    from services.execution.ports import AgentEvent, AgentEventKind
    from tests.integration.db.helpers import new_execution

    execution_id = new_execution(db)
    journal = DbEventSink(db, settings_redactor(), buffered=True)
    budget = DbBudget(db, execution_id, "acme/overflow", 1.0, journal=journal)
    for _ in range(3):
        budget.charge(0.4)
        journal.emit(AgentEvent(AgentEventKind.TOOL_CALL, execution_id, 0, {}))
    assert budget.spent_today() == (800_000, 400_000)
    assert budget.check() is not None


def test_large_contents_are_stored_once_and_a_resume_reads_them_whole(
        db: Database, tmp_path: Path) -> None:
    from services.execution.conversation import rebuild_messages
    from services.runs.request import ExecutionRequest as Request

    big = "".join(f"value_{n} = {n * 31 % 977}\n" for n in range(3_000))  # ~50 KB
    script = {"turns": [
        {"tool_calls": [{"tool": "workspace.write_file",
                         "args": {"path": "big.py", "content": big + f"# {n}\n"}}]}
        for n in range(3)] + [{"final": DONE}]}
    with repo_world(tmp_path / "world") as base:
        world = replace(base, db_url=url_of(db))
        execution_id = create_execution(db, ExecutionRequest(
            provider="replay", prompt="Write big", repo_url=world.url, script=script,
            pull_request=False), Redactor([TOKEN]), settings=world.settings())
        outcome = execute_execution(execution_id, settings=world.settings(), db=db)
        assert outcome.status == "succeeded", outcome
        assert world.remote_file(outcome.branch or "", "big.py") == big + "# 2\n"

    repo = ExecutionRepository(db, settings_redactor())
    row = repo.get(execution_id)
    assert row is not None and Request.from_row(row).script == script  # the stored script
    messages = rebuild_messages([(e.kind, dict(e.data)) for e in repo.events(execution_id)])
    written = [p.args["content"] for m in messages for p in m.tool_calls]
    assert written == [big + f"# {n}\n" for n in range(3)]
    with db.engine.connect() as conn:
        blobs = conn.execute(select(ContentBlob.size_bytes)
                             .where(ContentBlob.execution_id == execution_id)).scalars().all()
        events_text = conn.execute(select(ExecutionEvent.data).where(
            ExecutionEvent.execution_id == execution_id)).scalars().all()
    assert len(blobs) == 3  # each content once, whatever the records naming it
    assert big not in "".join(str(d) for d in events_text)


def test_a_team_charge_rides_along_and_its_alerts_come_after_the_commit(db: Database) -> None:
    """The team's ledger and its alert rows commit with the journal (on PostgreSQL inside
    ``studio_journal_commit``); an alert is announced once, after that commit, by the process
    whose charge crossed it."""
    from services.db import team_budget
    from services.db.journal import DbEventSink
    from services.db.teams import TeamStore
    from services.execution.ports import AgentEvent, AgentEventKind
    from tests.integration.db.helpers import new_execution

    team = TeamStore(db).create("journal-spend", monthly_budget_usd=0.10).id
    seen: list[tuple[int, float, str]] = []

    def hook(alert: team_budget.TeamAlert) -> None:
        seen.append((alert.threshold, alert.spent_usd, alert.team))

    team_budget.ALERT_HOOKS.append(hook)
    try:
        budgets = []
        for _ in range(2):  # two executions of the team, each with its loop's journal
            execution_id = new_execution(db, team_id=team)
            journal = DbEventSink(db, settings_redactor(), buffered=True)
            budgets.append((execution_id, journal,
                            DbBudget(db, execution_id, "acme/spend", 10.0, journal=journal)))
        (one_id, one, one_budget), (two_id, two, two_budget) = budgets
        one_budget.charge(0.04)
        one.emit(AgentEvent(AgentEventKind.TOOL_CALL, one_id, 0, {}))
        two_budget.charge(0.04)  # 80 %: 50 and 80 crossed by this charge
        assert seen == [] and team_budget.read_state(db, team).spent_micros == 40_000
        with counting_commits(db.engine) as log:
            two.emit(AgentEvent(AgentEventKind.TOOL_CALL, two_id, 0, {}))
        assert [t.wrote for t in log.committed] == [True]  # one commit: the journal's
        assert seen == [(50, 0.08, "journal-spend"), (80, 0.08, "journal-spend")]
        two_budget.charge(0.04)  # in flight when the budget filled: overflow, 100 % crossed
        two.emit(AgentEvent(AgentEventKind.FINISHED, two_id, 0, {}))
        one_budget.charge(0.04)
        one.emit(AgentEvent(AgentEventKind.FINISHED, one_id, 0, {}))
        assert [s[0] for s in seen] == [50, 80, 100]  # once per threshold and month
    finally:
        team_budget.ALERT_HOOKS.remove(hook)
        for _, journal, _ in budgets:
            journal.close()
    (row,) = [r for r in team_budget.month_view(db) if r["team"] == "journal-spend"]
    assert row["spent_usd"] == pytest.approx(0.16) and row["overflow_usd"] == pytest.approx(0.08)
    assert row["alerts"] == [50, 80, 100]
