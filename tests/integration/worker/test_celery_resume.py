"""Through a real Celery worker on the Redis broker: the worker is SIGKILLed mid-run, a second
worker resumes the execution in a fresh directory, and the remote receives exactly one push of the
branch and exactly one PR; the journal shows the resume; the killed worker's child cannot push
afterwards.

Each worker stands for a machine of its own (its own data and workspace directories); they share
the database (an SQLite file), the broker (a Redis database of this test's own, a unique queue),
the git host (smart HTTP) and the GitHub API. The replay script writes a file, then runs a slow
command (the kill lands while it runs), then finishes; finalization commits, pushes and opens the
pull request.
"""

from __future__ import annotations

import os
import random
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.db.executions import ExecutionRepository
from services.db.redaction import Redactor
from services.db.session import Database, open_database
from services.runs.request import ExecutionRequest, create_execution
from services.settings import StudioSettings
from services.worker.dispatch import dispatch_execution
from tests.integration.celery_fixtures import (
    STUDIO,
    Broker,
    WorkerProcess,
    alive,
    ancestors,
    processes_running,
    start_worker,
    wait_for,
)
from tests.support import warm_cli
from tests.support.git_http_server import GIT_ENV, git_http_server, seed_bare_repo
from tests.support.github_api import github_api
from tests.support.otlp_receiver import OtlpReceiver, otlp_receiver
from tests.support.settings import studio_settings

pytestmark = pytest.mark.slow

TOKEN = "ghs_CeleryResumeToken0123456789abcdef"
REPO = "acme/widgets"
SLOW_S = 120  # never waited for: the kill lands while it runs, the resume does not re-run it
# sleep sums its arguments: the second one makes the command line unique to this test run.
SLOW_ARGV = ["sleep", str(SLOW_S), f"0.{random.randrange(10**8):08d}"]
SCRIPT: dict[str, Any] = {"turns": [
    {"tool_calls": [{"tool": "workspace.write_file",
                     "args": {"path": "GREETING.md", "content": "hello from the agent\n"}}]},
    {"tool_calls": [{"tool": "command.run",
                     "args": {"argv": SLOW_ARGV, "timeout_s": SLOW_S + 60}}]},
    {"final": {"status": "success", "summary": "Add a greeting", "changes": ["GREETING.md"],
               "issues": [], "questions": []}},
]}
# A holder fences itself off 1 s before its TTL (fence_s): 6 s leave room for a loaded machine.
RUNTIME_SETTINGS = {"lease_ttl_s": "6", "heartbeat_s": "1", "reaper_interval_s": "1"}


def _env(tmp_path: Path, name: str, db_url: str, broker: Broker, api_url: str,
         git_origin: str, otlp_url: str) -> dict[str, str]:
    """The environment of one 'machine': shared services, its own directories."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("STUDIO_", "OPENAI_", "ANTHROPIC_", "GEMINI_", "GOOGLE_"))}
    env.update(STUDIO_DATABASE_URL=db_url, STUDIO_BROKER_URL=broker.url,
               STUDIO_WORKER_QUEUE=broker.queue, STUDIO_GITHUB_TOKEN=TOKEN,
               STUDIO_GITHUB_API_URL=api_url, STUDIO_GITHUB_GIT_ORIGINS=git_origin,
               STUDIO_REPO_ALLOWED_HOSTS="127.0.0.1",
               STUDIO_DATA_DIR=str(tmp_path / name / "data"),
               STUDIO_WORKSPACE_DIR=str(tmp_path / name / "workspaces"),
               HOME=str(tmp_path / name), STUDIO_GIT_AUTHOR_NAME="Celery Agent",
               STUDIO_GIT_AUTHOR_EMAIL="agent@studio.invalid",
               OTEL_EXPORTER_OTLP_ENDPOINT=otlp_url, OTEL_BSP_SCHEDULE_DELAY="100")
    return env


def _settings(env: dict[str, str]) -> StudioSettings:
    return studio_settings(Path(env["STUDIO_DATA_DIR"]),
                           database_url=env["STUDIO_DATABASE_URL"],
                           broker_url=env["STUDIO_BROKER_URL"],
                           worker_queue=env["STUDIO_WORKER_QUEUE"], github_token=TOKEN,
                           github_api_url=env["STUDIO_GITHUB_API_URL"],
                           github_git_origins=[env["STUDIO_GITHUB_GIT_ORIGINS"]],
                           repo_allowed_hosts=["127.0.0.1"])


@pytest.fixture
def workers() -> Iterator[list[WorkerProcess]]:
    started: list[WorkerProcess] = []
    yield started
    for worker in started:
        worker.stop()


def _events(db: Database, execution_id: str) -> list[tuple[str, dict[str, Any]]]:
    return [(e.kind, dict(e.data)) for e in ExecutionRepository(db).events(execution_id)]


def _slow_command_running(db: Database, execution_id: str) -> bool:
    events = _events(db, execution_id)
    calls = [d for k, d in events if k == "tool_call" and "sleep" in str(d)]
    return bool(calls) and not any(k == "tool_result" and "sleep" in str(d) for k, d in events)


def test_a_killed_workers_execution_resumes_on_another_worker_with_one_push_and_one_pr(
        tmp_path: Path, redis_broker: Broker, workers: list[WorkerProcess]) -> None:  # noqa: F811
    db_url = f"sqlite:///{tmp_path / 'studio.db'}"
    with git_http_server(tmp_path / "git-host", TOKEN) as host, \
            github_api(host.root, TOKEN) as api, otlp_receiver() as receiver:
        seed_bare_repo(host.root, REPO, {"README.md": "# widgets\n"})
        env_a = _env(tmp_path, "machine-a", db_url, redis_broker, api.api_url,
                     host.base_url, receiver.url)
        env_b = _env(tmp_path, "machine-b", db_url, redis_broker, api.api_url,
                     host.base_url, receiver.url)
        for key, value in RUNTIME_SETTINGS.items():
            done = warm_cli.run([*STUDIO, "settings", "set", key, value], env=env_a,
                                capture_output=True, text=True, timeout=120, check=False)
            assert done.returncode == 0, done.stderr
        settings = _settings(env_a)
        db = open_database(settings)
        try:
            execution_id = _run_kill_and_resume(db, settings, env_a, env_b, tmp_path, host, api,
                                                workers)
            _check_the_resume_links_to_the_killed_attempt(db, execution_id, receiver)
        finally:
            db.dispose()


def _run_kill_and_resume(db: Database, settings: StudioSettings, env_a: dict[str, str],
                         env_b: dict[str, str], tmp_path: Path, host: Any, api: Any,
                         workers: list[WorkerProcess]) -> str:
    execution_id = create_execution(db, ExecutionRequest(
        provider="replay", prompt="Add a greeting", repo_url=host.url(REPO), script=SCRIPT,
        github_repo=REPO, slug="greeting"), Redactor(), settings=settings)
    first = start_worker(env_a, tmp_path / "worker-a.log", "--concurrency", "1")
    workers.append(first)
    assert dispatch_execution(execution_id, settings) is None  # sent, not run here

    # Worker A runs it: wait until the slow middle step is under way.
    def diagnostics() -> str:
        return "\n".join(f"--- {w.log_path.name}\n{w.log()}" for w in workers)

    wait_for("the slow command to run under worker A",
             lambda: _slow_command_running(db, execution_id), 180, diagnostics)
    # The journal records the call before the sandbox has started it: wait for the process.
    wait_for("the slow command's process", lambda: processes_running(*SLOW_ARGV), 60,
             diagnostics)
    children = processes_running("execute", execution_id)
    assert len(children) == 1, children
    child = children[0]
    assert first.pid in ancestors(child)  # studio execute runs under worker A's pool
    before = ExecutionRepository(db).get(execution_id)
    assert before is not None and before.status == "running" and before.lease_epoch == 1
    workspace_a = Path(before.workspace or "")
    assert workspace_a.is_relative_to(tmp_path / "machine-a")

    first.kill()  # SIGKILL, mid-run
    # The child dies with the worker (pool process and child both have PR_SET_PDEATHSIG).
    wait_for("worker A's studio execute to die with it", lambda: not alive(child), 60,
             diagnostics)
    wait_for("the slow command to die with it", lambda: not processes_running(*SLOW_ARGV), 60,
             diagnostics)
    assert host.pushes_of(before.branch or "") == [] and api.posts == 0

    second = start_worker(env_b, tmp_path / "worker-b.log", "--concurrency", "1")
    workers.append(second)
    final = wait_for("the execution to finish on worker B",
                     lambda: _final(db, execution_id), 240, diagnostics)

    assert final.status == "succeeded", (final.error_code, final.error_message, diagnostics())
    assert final.lease_epoch == 2  # taken over once, by worker B
    assert Path(final.workspace or "").is_relative_to(tmp_path / "machine-b")  # a fresh directory
    branch = final.branch or ""
    pushes = host.pushes_of(branch)
    assert len(pushes) == 1, pushes
    assert pushes[0].new == final.head_sha
    assert api.posts == 1 and len(api.pulls) == 1
    assert (api.pulls[0].head, final.pr_url) == (branch, _pr_url(api))
    shown = subprocess.run(["git", f"--git-dir={host.bare(REPO)}", "show",
                            f"{branch}:GREETING.md"], env={**GIT_ENV, "HOME": str(tmp_path)},
                           capture_output=True, text=True, check=True)
    assert shown.stdout == "hello from the agent\n"

    events = _events(db, execution_id)
    starts = [d for k, d in events if k == "started"]
    assert [d["resumed"] for d in starts] == [False, True], starts
    assert [k for k, _ in events].count("finished") == 1
    calls = [str(d) for k, d in events if k == "tool_call"]
    # Recorded calls are not repeated: the write happened once, the interrupted command is not
    # run again (the resumed conversation answers it as interrupted).
    assert [c.count("write_file") > 0 for c in calls] == [True, False], calls
    assert sum("sleep" in c for c in calls) == 1, calls
    # Worker A's child is gone for good: it never pushed, and nothing of it runs any more.
    assert not alive(child)
    assert all(second.pid in ancestors(pid) for pid in processes_running("execute", execution_id))
    return execution_id


def _check_the_resume_links_to_the_killed_attempt(db: Database, execution_id: str,
                                                  receiver: OtlpReceiver) -> None:
    """The killed attempt never exported its agent span, but its trace context is in the
    journal: the resumed attempt's agent span links to it."""
    starts = [d for k, d in _events(db, execution_id) if k == "started"]
    _, first_trace, first_span, _ = starts[0]["traceparent"].split("-")
    spans = receiver.wait_for(lambda found: any(
        s.name == "invoke_agent studio" and s.attributes.get("studio.execution_id")
        == execution_id for s in found), timeout=60)
    agents = [s for s in spans if s.name == "invoke_agent studio"
              and s.attributes.get("studio.execution_id") == execution_id]
    assert len(agents) == 1  # the resumed attempt's
    assert agents[0].links == [(first_trace, first_span)]
    assert starts[1]["traceparent"].split("-")[2] == agents[0].span_id


def _final(db: Database, execution_id: str) -> Any:
    row = ExecutionRepository(db).get(execution_id)
    return row if row is not None and row.finished_at is not None else None


def _pr_url(api: Any) -> str:
    pull = api.pulls[0]
    return f"{api.base_url}/{pull.owner}/{pull.repo}/pull/{pull.number}"
