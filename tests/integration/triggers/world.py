"""A world for the trigger tests: a git host and the GitHub double (with issues, comments,
reactions and permissions) over the same bare repositories, a real ``studio api`` and a real
``studio worker`` on a Redis broker of the test's own, on SQLite or PostgreSQL; deliveries
signed the way GitHub signs them."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx2
import pytest

from services.db.executions import ExecutionRepository
from services.db.models import NodeExecution
from services.db.runtime_settings import SettingsRepository
from services.db.session import Database, create_db_engine
from services.db.status import FINAL_STATUSES
from services.db.triggers import DeliveryStore, SlotStore
from tests.integration.api.server import ApiServer, api_process
from tests.integration.celery_fixtures import STUDIO, Broker, WorkerProcess, start_worker
from tests.support import warm_cli
from tests.support.git_http_server import GitHttpHost, git_http_server, seed_bare_repo
from tests.support.github_api import GitHubApi, github_api
from tests.support.github_issues import GitHubIssues, plug_issues
from tests.support.otlp_receiver import OtlpReceiver, otlp_receiver
from tests.support.webhooks import deliver

TOKEN = "ghs_TriggerTestToken0123456789abcdefAB"
SECRET = "whsec-trigger-test-0123456789"
REPO = "acme/widgets"
SLOW_REPO = "acme/slowpoke"
T = TypeVar("T")
# each run appends a line of its own (so every follow-up has something to commit)
APPEND = ["python3", "-c", "import uuid; open('runs.txt', 'a').write(uuid.uuid4().hex + '\\n')"]
SCRIPT: dict[str, Any] = {"turns": [
    {"tool_calls": [{"tool": "command.run", "args": {"argv": APPEND}}]},
    {"final": {"status": "success", "summary": "Rename the helper", "changes": ["runs.txt"],
               "issues": [], "questions": []}}]}
SLOW_S = 300


def slow_script(nonce: str) -> dict[str, Any]:
    return {"turns": [
        {"tool_calls": [{"tool": "command.run", "args": {"argv": APPEND}}]},
        {"tool_calls": [{"tool": "command.run",
                         "args": {"argv": ["sleep", str(SLOW_S), nonce],
                                  "timeout_s": SLOW_S + 60}}]},
        {"final": {"status": "success", "summary": "Slow work", "changes": ["runs.txt"],
                   "issues": [], "questions": []}}]}


def wait_for(what: str, probe: Callable[[], T | None], timeout: float = 120,
             diagnostics: Callable[[], str] = lambda: "") -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}\n{diagnostics()}")
        time.sleep(0.1)


@dataclass
class World:
    root: Path
    host: GitHttpHost
    github: GitHubApi
    issues: GitHubIssues
    api: ApiServer
    env: dict[str, str]
    db: Database
    traces: OtlpReceiver
    workers: list[WorkerProcess] = field(default_factory=list)

    @property
    def hook_url(self) -> str:
        return f"{self.api.url}/api/webhooks/github"

    def deliver(self, event: str, payload: Any, **kwargs: Any) -> httpx2.Response:
        return deliver(self.hook_url, SECRET, event, payload, **kwargs)

    def studio(self, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return warm_cli.run([*STUDIO, *args], env=self.env, input=stdin, capture_output=True,
                            text=True, timeout=120, check=False)

    def start_worker(self, name: str) -> WorkerProcess:
        env = {**self.env, "STUDIO_WORKSPACE_DIR": str(self.root / name / "ws"),
               "STUDIO_DATA_DIR": str(self.root / name / "data"), "HOME": str(self.root)}
        worker = start_worker(env, self.root / f"{name}.log", "--concurrency", "2")
        self.workers.append(worker)
        return worker

    def live_worker(self) -> None:
        """A worker runs (a test that killed one leaves the next a fresh one)."""
        if not any(w.process.poll() is None for w in self.workers):
            self.start_worker(f"worker-{len(self.workers)}")

    def studio_pull(self, repo: str = REPO) -> int:
        """A pull request the studio opened (its marker in the body) on a branch of its own."""
        branch = f"studio/pr-{uuid.uuid4().hex[:8]}"
        subprocess.run(["git", f"--git-dir={self.host.bare(repo)}", "branch", branch, "HEAD"],
                       check=True, capture_output=True)
        owner, name = repo.split("/")
        pull = self.github.add_pull(owner, name, branch, "main", title="Earlier work",
                                    body="Earlier work\n\n<!-- studio-execution: x -->")
        return pull.number

    def push_commit(self, repo: str, branch: str, message: str) -> str:
        """Someone else pushes a commit on ``branch``; answers its id."""
        bare = str(self.host.bare(repo))
        env = {**os.environ, "GIT_AUTHOR_NAME": "Someone", "GIT_AUTHOR_EMAIL": "s@x.invalid",
               "GIT_COMMITTER_NAME": "Someone", "GIT_COMMITTER_EMAIL": "s@x.invalid"}

        def git(*args: str) -> str:
            return subprocess.run(["git", f"--git-dir={bare}", *args], env=env, check=True,
                                  capture_output=True, text=True).stdout.strip()

        tree = git("rev-parse", f"refs/heads/{branch}^{{tree}}")
        commit = git("commit-tree", tree, "-p", f"refs/heads/{branch}", "-m", message)
        git("update-ref", f"refs/heads/{branch}", commit)
        return commit

    def commit_files(self, repo: str, branch: str, files: dict[str, str],
                     start: str = "main") -> str:
        """Someone commits ``files`` on ``branch`` (made from ``start`` when it does not exist
        yet) in the bare repository; answers the new head."""
        bare = str(self.host.bare(repo))
        index = self.root / f"index-{uuid.uuid4().hex[:8]}"
        env = {**os.environ, "GIT_AUTHOR_NAME": "Dev", "GIT_AUTHOR_EMAIL": "d@x.invalid",
               "GIT_COMMITTER_NAME": "Dev", "GIT_COMMITTER_EMAIL": "d@x.invalid",
               "GIT_INDEX_FILE": str(index)}

        def git(*args: str, stdin: str | None = None) -> str:
            return subprocess.run(["git", f"--git-dir={bare}", *args], env=env, check=True,
                                  input=stdin, capture_output=True, text=True).stdout.strip()

        parent = subprocess.run(["git", f"--git-dir={bare}", "rev-parse", "--verify", "-q",
                                 f"refs/heads/{branch}"], capture_output=True, text=True,
                                check=False).stdout.strip() or git("rev-parse",
                                                                   f"refs/heads/{start}")
        git("read-tree", parent)
        for name, content in files.items():
            blob = git("hash-object", "-w", "--stdin", stdin=content)
            git("update-index", "--add", "--cacheinfo", f"100644,{blob},{name}")
        commit = git("commit-tree", git("write-tree"), "-p", parent, "-m", f"change {branch}")
        git("update-ref", f"refs/heads/{branch}", commit)
        index.unlink(missing_ok=True)
        return commit

    def logs(self) -> str:
        return "\n".join(f"--- {w.log_path.name}\n{w.log()}" for w in self.workers) + \
            "\n--- api\n" + "".join(self.api.log[-80:])

    def executions(self, repo: str = REPO) -> list[NodeExecution]:
        found = ExecutionRepository(self.db).list(limit=500)
        return [row for row in found if (row.request or {}).get("github_repo") == repo]

    def execution(self, execution_id: str) -> NodeExecution:
        row = ExecutionRepository(self.db).get(execution_id)
        assert row is not None
        return row

    def final(self, execution_id: str, timeout: float = 180) -> NodeExecution:
        return wait_for(f"execution {execution_id} to end",
                        lambda: (row := self.execution(execution_id)).status in FINAL_STATUSES
                        and row, timeout, self.logs)

    def delivery(self, delivery_id: str) -> Any:
        return DeliveryStore(self.db).get(delivery_id)

    def slot_state(self, repo: str, number: int) -> str:
        return SlotStore(self.db).read(repo, number).state

    def pull(self, number: int) -> Any:
        return next(p for p in self.github.pulls if p.number == number)

    def branch_log(self, branch: str, repo: str = REPO) -> list[str]:
        found = subprocess.run(["git", f"--git-dir={self.host.bare(repo)}", "log",
                                "--format=%H %s", f"refs/heads/{branch}"],
                               capture_output=True, text=True, check=True)
        return found.stdout.strip().splitlines()

    def put_trigger(self, repo: str, **fields: Any) -> None:
        body = {"repo_url": self.host.url(repo), "provider": "replay", "replay_script": SCRIPT,
                "limits": {"max_iterations": 6}, **fields}
        with self.api.client(self.api.admin) as client:
            answer = client.put(f"/api/triggers/{repo}", json=body)
        assert answer.status_code == 200, answer.text


@contextlib.contextmanager
def trigger_world(root: Path, database_url: str, broker: Broker) -> Iterator[World]:
    git_root = root / "git"
    seed_bare_repo(git_root, REPO, {"README.md": "# widgets\n",
                                    "helper.py": "def h():\n    return 1\n"})
    seed_bare_repo(git_root, SLOW_REPO, {"README.md": "# slow\n"})
    with git_http_server(git_root, TOKEN) as host, github_api(git_root, TOKEN) as github, \
            contextlib.ExitStack() as stack:
        issues = plug_issues(github)
        traces = stack.enter_context(otlp_receiver())
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("STUDIO_", "OPENAI_", "ANTHROPIC_", "GEMINI_", "GOOGLE_"))}
        (root / "home").mkdir(exist_ok=True)
        env.update(STUDIO_DATABASE_URL=database_url, STUDIO_DATA_DIR=str(root / "data"),
                   STUDIO_WORKSPACE_DIR=str(root / "workspaces"), HOME=str(root / "home"),
                   STUDIO_GITHUB_TOKEN=TOKEN, STUDIO_GITHUB_API_URL=github.api_url,
                   STUDIO_GITHUB_GIT_ORIGINS=host.base_url, STUDIO_REPO_ALLOWED_HOSTS="127.0.0.1",
                   STUDIO_SECRET_KEY="trigger-tests-secret-key-0123456789",
                   STUDIO_PUBLIC_URL="https://studio.example",
                   STUDIO_BROKER_URL=broker.url, STUDIO_WORKER_QUEUE=broker.queue,
                   STUDIO_GIT_AUTHOR_NAME="Studio Agent",
                   STUDIO_GIT_AUTHOR_EMAIL="agent@studio.invalid",
                   OTEL_EXPORTER_OTLP_ENDPOINT=traces.url, OTEL_BSP_SCHEDULE_DELAY="100")
        db = Database(create_db_engine(database_url))
        stack.callback(db.dispose)
        api = stack.enter_context(api_process(env, host.url(REPO)))
        world = World(root, host, github, issues, api, env, db, traces)
        settings = SettingsRepository(db)  # short windows: the tests wait for them
        for key, value in {"trigger_debounce_s": 1, "reaper_interval_s": 0.5,
                           "lease_ttl_s": 6, "heartbeat_s": 1}.items():
            settings.set(key, value)
        done = world.studio("integrations", "set", "github", "--webhook-secret-stdin",
                            stdin=SECRET + "\n")
        assert done.returncode == 0, done.stderr
        assert SECRET not in done.stdout + done.stderr
        world.start_worker("worker-a")
        try:
            yield world
        finally:
            for worker in world.workers:
                worker.stop()
