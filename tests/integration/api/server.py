"""The real ``studio api`` in a subprocess on 127.0.0.1 (port chosen by the OS), its tokens, and a
git host with a seeded repository to clone: what the API tests talk to over real HTTP."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2

from services.db.api_tokens import ApiTokenRepository
from services.db.session import Database, create_db_engine
from tests.integration.celery_fixtures import Broker, start_worker
from tests.support import warm_cli
from tests.support.git_http_server import git_http_server, seed_bare_repo
from tests.support.github_api import github_api

GIT_TOKEN = "ghs_ApiTestToken0123456789abcdefABCDEF"
REPO = "acme/widgets"
CORS_ORIGIN = "http://studio-ui.example"
_LISTENING = re.compile(r"Uvicorn running on http://127\.0\.0\.1:(\d+)")


@dataclass
class ApiServer:
    url: str
    db_url: str
    repo_url: str
    env: dict[str, str]
    process: subprocess.Popen[str]
    log: list[str] = field(default_factory=list)
    tokens: dict[str, str] = field(default_factory=dict)
    bare_repo: Path | None = None  # the served repository (set by running_api)

    def remote_file(self, branch: str, path: str) -> str | None:
        """``path`` on ``branch`` of the served repository as pushed; None when either is not
        there."""
        assert self.bare_repo is not None, "no git host of this API's own"
        found = subprocess.run(["git", f"--git-dir={self.bare_repo}", "show",
                                f"refs/heads/{branch}:{path}"], capture_output=True, text=True)
        return found.stdout if found.returncode == 0 else None

    def client(self, token: str | None = None, **kwargs: Any) -> httpx2.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx2.Client(base_url=self.url, headers=headers, timeout=30, **kwargs)

    def token(self, name: str, scopes: list[str]) -> str:
        """A token with exactly ``scopes`` (made directly in the server's database)."""
        if name not in self.tokens:
            db = Database(create_db_engine(self.db_url))
            try:
                self.tokens[name] = ApiTokenRepository(db).create(name, scopes)[1]
            finally:
                db.dispose()
        return self.tokens[name]

    @property
    def admin(self) -> str:
        return self.token("all", ["read", "run", "approve", "admin"])


def studio_env(root: Path, git_origin: str = "") -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("STUDIO_", "OPENAI_", "ANTHROPIC_", "GEMINI_", "GOOGLE_"))}
    env.update(STUDIO_DATABASE_URL=f"sqlite:///{root / 'studio.db'}",
               STUDIO_DATA_DIR=str(root / "data"), STUDIO_WORKSPACE_DIR=str(root / "workspaces"),
               STUDIO_GITHUB_TOKEN=GIT_TOKEN, STUDIO_CORS_ORIGINS=CORS_ORIGIN,
               # the test git host is the integration's (its origin named explicitly), and
               # reachable although it is loopback (the API needs the allowlist for that)
               STUDIO_GITHUB_GIT_ORIGINS=git_origin, STUDIO_REPO_ALLOWED_HOSTS="127.0.0.1",
               HOME=str(root / "home"))
    (root / "home").mkdir(parents=True, exist_ok=True)
    return env


def _drain(process: subprocess.Popen[str], log: list[str], found: threading.Event,
           port: list[int]) -> None:
    assert process.stderr is not None
    for line in process.stderr:
        log.append(line)
        match = _LISTENING.search(line)
        if match and not found.is_set():
            port.append(int(match.group(1)))
            found.set()
    found.set()


@contextmanager
def running_api(root: Path, *, github: bool = False, database_url: str | None = None,
                broker: Broker | None = None,
                extra_env: dict[str, str] | None = None) -> Iterator[ApiServer]:
    """``studio api --port 0`` with its own database, and a git host serving ``acme/widgets``
    (with ``github``, also the GitHub API stand-in over that host, so pull requests open).

    ``database_url`` replaces the SQLite file (a migrated database); with ``broker`` the API
    sends every execution to a real ``studio worker`` (Celery, started here on that broker);
    ``extra_env`` is added to the API's environment last (a control run's ``STUDIO_SANDBOX``)."""
    with git_http_server(root / "git-host", GIT_TOKEN) as host, contextlib.ExitStack() as stack:
        seed_bare_repo(host.root, REPO, {"README.md": "# widgets\n"})
        env = studio_env(root, host.base_url)
        if github:
            fake = stack.enter_context(github_api(host.root, GIT_TOKEN))
            env["STUDIO_GITHUB_API_URL"] = fake.api_url
        if database_url is not None:
            env["STUDIO_DATABASE_URL"] = database_url
        env.update(extra_env or {})
        if broker is not None:
            env.update(STUDIO_BROKER_URL=broker.url, STUDIO_WORKER_QUEUE=broker.queue)
            worker = start_worker(env, root / "worker.log", "--concurrency", "2")
            stack.callback(worker.stop)
        with api_process(env, host.url(REPO)) as server:
            server.bare_repo = host.bare(REPO)
            yield server


API_COMMAND = (sys.executable, "-m", "services.cli", "api", "--host", "127.0.0.1", "--port", "0",
               "--log-level", "info")


@contextmanager
def api_process(env: dict[str, str], repo_url: str,
                command: tuple[str, ...] = API_COMMAND) -> Iterator[ApiServer]:
    """``studio api --port 0`` in ``env`` (its database: ``STUDIO_DATABASE_URL``); ``command``
    starts it another way (a wrapper around the CLI that serves the same)."""
    process = warm_cli.Popen(
        list(command), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    log: list[str] = []
    found, port = threading.Event(), []
    threading.Thread(target=_drain, args=(process, log, found, port), daemon=True).start()
    try:
        found.wait(60)
        assert port, "studio api did not start:\n" + "".join(log)
        yield ApiServer(url=f"http://127.0.0.1:{port[0]}", db_url=env["STUDIO_DATABASE_URL"],
                        repo_url=repo_url, env=env, process=process, log=log)
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
