"""A running execution survives its database's connections being ended (issue 37).

An execution created over HTTP through a real ``studio api`` (with no broker: the API's own
``studio execute`` child; or with a ``studio worker`` on Redis), on a fresh PostgreSQL database;
its replay script runs ``sleep 3`` five times (each appending a unique token to a ledger file),
fixes ``calc.py``, runs the tests and finishes; the pull request is asked for. While it runs:

* every backend of its database is terminated three times, 3 s apart (a failover, a pooler
  restart, an idle-connection reaper): it must succeed;
* the database "restarts": every backend terminated and new connections refused for 5 s. With
  the default lease (TTL 60 s) the execution rides it out and succeeds; under a worker with a
  4 s TTL (fenced after 3 s without a renewal) the attempt fences itself, and the worker's reaper
  resumes the execution from its checkpoint once the database is back, to success.

Every time: exactly one push of the final commit and one pull request, each ledger token once in
the pushed result, no tool call journalled twice, the journal's sequence numbers gap-free.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import psycopg
import pytest

from services.db import connection_loss
from tests.integration.api.server import ApiServer, api_process
from tests.integration.celery_fixtures import STUDIO, Broker, start_worker
from tests.integration.databases import create_migrated_pg_database, drop_pg_database
from tests.integration.db_faults import database_name, refusing_connections, terminate_backends
from tests.integration.repo_env import DONE, TEST_ARGV, RepoWorld, repo_world
from tests.support import warm_cli

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

LEDGER = "ledger.txt"
SLEEPS = 5
FINAL = {"succeeded", "failed", "cancelled", "stalled"}


def _script(nonce: str) -> tuple[dict[str, Any], list[str]]:
    tokens = [f"tok-{nonce}-{index}" for index in range(SLEEPS)]
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"tool": "command.run", "args": {
            "argv": ["sh", "-c", f"echo {token} >> {LEDGER}; sleep 3"], "timeout_s": 60}}]}
        for token in tokens]
    turns += [
        {"tool_calls": [{"tool": "workspace.edit_file", "args": {
            "path": "calc.py", "old_text": "a - b", "new_text": "a + b"}}]},
        {"tool_calls": [{"tool": "command.run", "args": {"argv": TEST_ARGV, "timeout_s": 60}}]},
        {"final": DONE}]
    return {"retry_interrupted": True, "turns": turns}, tokens


@dataclass
class Run:
    world: RepoWorld
    api: ApiServer
    admin: str
    url: str
    logs: list[Path] = field(default_factory=list)

    @property
    def database(self) -> str:
        return database_name(self.url)

    def create(self, nonce: str) -> tuple[str, list[str]]:
        script, tokens = _script(nonce)
        body = {"repo_url": self.world.url, "provider": "replay", "prompt": "Fix add()",
                "pull_request": True, "replay_script": script}
        with self.api.client(self.api.admin) as client:
            answer = client.post("/api/executions", json=body)
        assert answer.status_code == 202, answer.text
        return str(answer.json()["id"]), tokens

    def row(self, execution_id: str) -> dict[str, Any] | None:
        """The execution as the API shows it (``None`` while the API cannot answer)."""
        try:
            with self.api.client(self.api.admin) as client:
                answer = client.get(f"/api/executions/{execution_id}")
        except (OSError, httpx2.TransportError):  # the API busy waiting for its database
            return None
        return dict(answer.json()) if answer.status_code == 200 else None

    def tool_calls_started(self, execution_id: str) -> int:
        with psycopg.connect(self._conninfo(), autocommit=True) as conn:
            found = conn.execute("SELECT count(*) FROM execution_events WHERE execution_id = %s"
                                 " AND kind = 'tool_call'", (execution_id,)).fetchone()
        return int(found[0]) if found else 0

    def wait_final(self, execution_id: str, bound_s: float = 300) -> dict[str, Any]:
        deadline = time.monotonic() + bound_s
        while time.monotonic() < deadline:
            row = self.row(execution_id)
            if row is not None and row["status"] in FINAL:
                return row
            time.sleep(0.5)
        pytest.fail(f"execution {execution_id} did not end in {bound_s:.0f}s\n{self.diagnostics()}")

    def journal(self, execution_id: str) -> list[tuple[int, str, dict[str, Any]]]:
        with psycopg.connect(self._conninfo(), autocommit=True) as conn:
            return [(int(seq), str(kind), data) for seq, kind, data in conn.execute(
                "SELECT seq, kind, data FROM execution_events WHERE execution_id = %s "
                "ORDER BY seq", (execution_id,))]

    def lease_epoch(self, execution_id: str) -> int:
        with psycopg.connect(self._conninfo(), autocommit=True) as conn:
            found = conn.execute("SELECT lease_epoch FROM node_executions WHERE id = %s",
                                 (execution_id,)).fetchone()
        return int(found[0]) if found else 0

    def _conninfo(self) -> str:
        return self.url.replace("postgresql+psycopg://", "postgresql://")

    def diagnostics(self) -> str:
        parts = ["--- studio api\n" + "".join(self.api.log[-80:])]
        parts += [f"--- {p.name}\n{p.read_text(errors='replace')[-6000:]}" for p in self.logs
                  if p.exists()]
        return "\n".join(parts)


@contextmanager
def world(root: Path, admin: str, broker: Broker | None = None,
          runtime: dict[str, str] | None = None) -> Iterator[Run]:
    """A fresh PostgreSQL database, the git host and GitHub API, ``studio api`` (and, with
    ``broker``, one ``studio worker`` on it)."""
    url = create_migrated_pg_database(admin)
    try:
        with repo_world(root) as found, ExitStack() as stack:
            found = dataclasses.replace(found, db_url=url)
            extra = {"STUDIO_BROKER_URL": broker.url,
                     "STUDIO_WORKER_QUEUE": broker.queue} if broker is not None else {}
            env = found.env(root / "workspaces", **extra)
            for key, value in (runtime or {}).items():
                done = warm_cli.run([*STUDIO, "settings", "set", key, value], env=env,
                                    capture_output=True, text=True, timeout=120, check=False)
                assert done.returncode == 0, done.stderr
            logs = []
            if broker is not None:
                worker = start_worker(env, root / "worker.log", "--concurrency", "2")
                stack.callback(worker.stop)
                logs.append(worker.log_path)
            api = stack.enter_context(api_process(env, found.url))
            yield Run(found, api, admin, url, logs)
    finally:
        drop_pg_database(admin, url)


def _after_first_call(run: Run, execution_id: str) -> None:
    """Wait until the execution's loop has journalled its first tool call (it is mid-run)."""
    deadline = time.monotonic() + 180
    while run.tool_calls_started(execution_id) < 1:
        assert time.monotonic() < deadline, "the execution never started\n" + run.diagnostics()
        time.sleep(0.2)


def _terminate_three_times(run: Run, execution_id: str) -> list[int]:
    _after_first_call(run, execution_id)
    ended = []
    for _ in range(3):
        ended.append(terminate_backends(run.admin, run.database))
        time.sleep(3)
    return ended


def _restart(run: Run, execution_id: str, down_s: float = 5.0) -> int:
    _after_first_call(run, execution_id)
    time.sleep(1)  # into the first sleep
    with refusing_connections(run.admin, run.database) as ended:
        time.sleep(down_s)
    return ended


def check(run: Run, execution_id: str, tokens: list[str], row: dict[str, Any]) -> None:
    """Success, one push of the final commit, one PR, each call once, a gap-free journal."""
    assert row["status"] == "succeeded", (row.get("error_code"), row.get("error_message"),
                                          run.diagnostics())
    branch = row["branch"]
    pushes = [u for u in run.world.host.pushes_of(branch) if u.new == row["head_sha"]]
    assert len(pushes) == 1, pushes
    assert len(run.world.pulls_of(branch)) == 1
    ledger = (run.world.remote_file(branch, LEDGER) or "").split()
    assert ledger == tokens, ledger  # every command's effect once, in order
    journal = run.journal(execution_id)
    assert [seq for seq, _, _ in journal] == list(range(1, len(journal) + 1))
    calls = [d["call"]["call_id"] for _, kind, d in journal if kind == "tool_call"]
    assert not [c for c, n in Counter(calls).items() if n > 1], calls
    assert (run.world.remote_file(branch, "calc.py") or "").count("a + b") == 1


def _run_with(run: Run, fault: Any) -> tuple[str, list[str], Any]:
    execution_id, tokens = run.create(f"{time.monotonic_ns() % 10**8:08d}")
    done: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: done.setdefault("fault", fault(run, execution_id)),
                              daemon=True)
    thread.start()
    row = run.wait_final(execution_id)
    thread.join(60)
    assert "fault" in done, "the fault was not made\n" + run.diagnostics()
    check(run, execution_id, tokens, row)
    return execution_id, tokens, done["fault"]


def test_backends_terminated_three_times_with_the_api_alone(tmp_path: Path,
                                                            pg_admin: str) -> None:
    with world(tmp_path, pg_admin) as run:
        _, _, ended = _run_with(run, _terminate_three_times)
    assert all(count >= 1 for count in ended), ended  # each round ended live sessions


def test_backends_terminated_three_times_under_a_worker(tmp_path: Path, pg_admin: str,
                                                       redis_broker: Broker) -> None:
    with world(tmp_path, pg_admin, redis_broker) as run:
        execution_id, _, ended = _run_with(run, _terminate_three_times)
        assert run.lease_epoch(execution_id) == 1  # one attempt: the child rode it out
    assert all(count >= 1 for count in ended), ended


def test_a_database_restart_is_ridden_out_with_the_api_alone(tmp_path: Path,
                                                             pg_admin: str) -> None:
    with world(tmp_path, pg_admin) as run:
        execution_id, _, ended = _run_with(run, _restart)
        assert run.lease_epoch(execution_id) == 1  # the same attempt, after the database returned
    assert ended >= 1


def test_a_restart_past_the_lease_margin_fences_and_the_reaper_resumes(
        tmp_path: Path, pg_admin: str, redis_broker: Broker) -> None:
    short = {"lease_ttl_s": "4", "heartbeat_s": "1", "reaper_interval_s": "1"}
    with world(tmp_path, pg_admin, redis_broker, short) as run:
        execution_id, _, ended = _run_with(run, _restart)
        assert run.lease_epoch(execution_id) >= 2, run.diagnostics()  # fenced, then resumed
    assert ended >= 1


def test_a_database_gone_for_longer_than_the_wait_ends_the_run_with_its_own_line(
        tmp_path: Path, pg_admin: str) -> None:
    """The database refuses connections for longer than a process waits for it
    (``RECONNECT_WINDOW_S``): the ``studio execute`` child stops with ``database connection
    lost during the run; retried N times`` (exit 4), not with a configuration line, and once the
    database is back the API's launcher ends the execution (``failed``, a stable code)."""
    down_s = connection_loss.RECONNECT_WINDOW_S + 10
    with world(tmp_path, pg_admin) as run:
        script = {"turns": [
            {"tool_calls": [{"tool": "command.run",
                             "args": {"argv": ["sleep", "4"], "timeout_s": 60}}]},
            {"final": DONE}]}
        body = {"repo_url": run.world.url, "provider": "replay", "prompt": "p",
                "replay_script": script}
        with run.api.client(run.api.admin) as client:
            answer = client.post("/api/executions", json=body)
        assert answer.status_code == 202, answer.text
        execution_id = str(answer.json()["id"])
        _after_first_call(run, execution_id)
        with refusing_connections(run.admin, run.database):
            time.sleep(down_s)
        row = run.wait_final(execution_id)
        log = "".join(run.api.log)
    assert row["status"] == "failed", row
    assert row["error_code"] == "substrate_error", row
    lines = [line for line in log.splitlines() if line.startswith("studio: ")]
    assert any(line.startswith("studio: database connection lost during the run; retried ")
               for line in lines), lines
    assert not any("STUDIO_DATABASE_URL" in line for line in lines), lines
