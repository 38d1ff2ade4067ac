"""Two executions forked from one fork server share nothing of each other's secrets.

A worker's fork server (:mod:`services.executors.forked`) forks both: each a real ``studio
execute`` of its own recorded execution (codex against the scripted model server, each on its own
repository), each given its own environment with its own provider key and GitHub token. While both
wait on their first model answer, the test reads each child's ``/proc/<pid>/environ`` and its
whole writable memory (``/proc/<pid>/mem``), and the fork server's.

Witness: neither child's environment block nor memory holds the other's key or token, and the fork
server (what every later child is forked from) holds neither. Positive control: each child's
memory holds its own key and token (so the scan sees a secret that is there), and its environment
block is the server's (``PATH``), where an inherited secret would show.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.db.executions import ExecutionRepository
from services.db.redaction import Redactor
from services.db.session import Database
from services.executors.base import SubstrateStatus
from services.executors.forked import ForkedSubstrate, ForkServer
from services.executors.local import executor_environment
from services.runs.request import ExecutionRequest, create_execution
from tests.integration.celery_fixtures import processes_running, writable_memory
from tests.support.git_http_server import git_http_server, seed_bare_repo
from tests.support.model_requests import RequestRecord
from tests.support.model_script import Reply, text
from tests.support.model_server import ScriptedModelServer
from tests.support.settings import studio_settings

FINAL = ('{"status": "success", "summary": "nothing to do", "changes": [], "issues": [], '
         '"questions": [], "pr_url": null}')
SECRETS = {
    "a": ("sk-isolationKEYofA-0123456789abcdefABCDEF", "ghs_IsolationTokenOfA0123456789abcdefAB"),
    "b": ("sk-isolationKEYofB-0123456789abcdefABCDEF", "ghs_IsolationTokenOfB0123456789abcdefAB"),
}
PATIENCE_S = 120.0


class HeldModel:
    """Every request waits until the test releases it, then gets the final answer; records
    which execution (by the marker in its prompt) has asked."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.seen: set[str] = set()

    def __call__(self, record: RequestRecord) -> Reply:
        for name in SECRETS:
            if f"[isolation-{name}]".encode() in record.raw_body:
                self.seen.add(name)
        self.release.wait(PATIENCE_S)
        return text(FINAL)


@pytest.fixture
def server() -> Iterator[ForkServer]:
    started = ForkServer.start({"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/"),
                                "LANG": "C.UTF-8"})
    yield started
    started.stop()


def test_two_executions_share_no_secret(server: ForkServer, postgres_url: str,
                                        postgres_db: Database, tmp_path: Path) -> None:
    model = HeldModel()
    with contextlib.ExitStack() as stack:
        scripted = stack.enter_context(ScriptedModelServer([model] * 8))
        children = {}
        for name, (key, token) in SECRETS.items():
            # each repository on a git host of its own, which takes only its execution's token
            host = stack.enter_context(git_http_server(tmp_path / f"git-{name}", token))
            repo = f"isolation/repo-{name}"
            seed_bare_repo(host.root, repo, {"README.md": f"repository {name}\n"})
            settings = studio_settings(tmp_path / f"data-{name}", database_url=postgres_url,
                                       repo_allowed_hosts=["127.0.0.1"])
            execution_id = create_execution(postgres_db, ExecutionRequest(
                provider="codex", prompt=f"[isolation-{name}] Nothing to do.",
                repo_url=host.url(repo), pull_request=False), Redactor(), settings=settings)
            environment = executor_environment({
                "PATH": os.environ["PATH"], "HOME": str(tmp_path), "LANG": "C.UTF-8",
                "STUDIO_DATABASE_URL": postgres_url, "STUDIO_DATA_DIR": str(tmp_path / name),
                "STUDIO_WORKSPACE_DIR": str(tmp_path / f"ws-{name}"),
                "STUDIO_REPO_ALLOWED_HOSTS": "127.0.0.1", "STUDIO_GITHUB_TOKEN": token,
                "STUDIO_GITHUB_GIT_ORIGINS": host.base_url, "STUDIO_SANDBOX": "none",
                "OPENAI_BASE_URL": scripted.url + "/v1", "OPENAI_API_KEY": key,
            })
            # the request names the provider, as a worker's slot does: the server loads the
            # SDK itself for the first one (what it imports after ready holds no secret either)
            substrate = ForkedSubstrate(server, environment, provider="codex")
            children[name] = (execution_id, substrate, substrate.launch(execution_id))
        try:
            deadline = time.monotonic() + PATIENCE_S
            while model.seen != set(SECRETS):
                assert time.monotonic() < deadline, f"only {model.seen} asked the model"
                time.sleep(0.05)
            memories = {name: writable_memory(int(handle.ref))
                        for name, (_, _, handle) in children.items()}
            environs = {name: Path(f"/proc/{handle.ref}/environ").read_bytes()
                        for name, (_, _, handle) in children.items()}
            warm = writable_memory(server.pid)
            # found the way ``ps``, operators and the chaos harness find a child: by its
            # command line (``... -m services.cli execute <id>``), like an exec'ed one
            found = {name: processes_running("execute", execution_id)
                     for name, (execution_id, _, _) in children.items()}
        finally:
            model.release.set()
        statuses = {name: substrate.wait(handle, PATIENCE_S)
                    for name, (_, substrate, handle) in children.items()}

    for name, (own_key, own_token) in SECRETS.items():
        other = "b" if name == "a" else "a"
        other_key, other_token = SECRETS[other]
        # positive controls: the scan finds what is there
        assert own_key.encode() in memories[name] and own_token.encode() in memories[name]
        assert b"PATH=" in environs[name]
        # witnesses
        assert other_key.encode() not in memories[name], f"{name} holds {other}'s key"
        assert other_token.encode() not in memories[name], f"{name} holds {other}'s token"
        for secret in (own_key, own_token, other_key, other_token):
            assert secret.encode() not in environs[name]
            assert secret.encode() not in warm, "the fork server holds an execution's secret"
    assert found == {name: [int(handle.ref)] for name, (_, _, handle) in children.items()}
    assert processes_running("services.cli.fork_server")  # the server keeps its own (control)
    assert statuses == {"a": SubstrateStatus.SUCCEEDED, "b": SubstrateStatus.SUCCEEDED}
    for execution_id, _, _ in children.values():
        row = ExecutionRepository(postgres_db).get(execution_id)
        assert row is not None and row.status == "succeeded", row
