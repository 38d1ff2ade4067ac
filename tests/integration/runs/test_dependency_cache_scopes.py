"""Issue 27, finding 7: a dependency cache is written only by its own writer, never by the agent.

Executions through the worker's path (``execute_execution``, replay provider, the real
bubblewrap sandbox and egress proxy) on one repository. Three hostile writers try to plant a
file in the cache a later execution of ``main`` installs from:

* a branch's ``.studio/setup.json`` (an execution whose base branch is ``evil``),
* a request's ``setup`` commands on ``main`` (another caller),
* the agent phase of an execution with ``network: "allowlist"`` on ``main``.

The witness is the victim's view: ``main``'s ``.studio/setup.json`` and the victim's own request
command list ``/run/studio-cache``. Before the fix, one cache per repository was bound into every
setup and into the allowlist agent phase, and all three planted files were listed. The positive
control: each listing does show what the same writer left there in an earlier execution, so the
listing is a witness that sees a cache's contents. A second test drives the size bound.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from services.db.executions import ExecutionRepository
from services.db.redaction import Redactor
from services.runs.durable import execute_execution
from services.runs.request import ExecutionRequest, create_execution
from services.settings import SandboxMode
from tests.integration.repo_env import DONE, REPO, TOKEN, RepoWorld, repo_world
from tests.support.git_http_server import GIT_ENV
from tests.unit.execution.command_helpers import require_sandbox

pytestmark = pytest.mark.sandbox

CACHE = "/run/studio-cache"
MAIN_SETUP = f'{{"commands": ["echo main-sees: $(ls -A {CACHE}); touch {CACHE}/left-by-main"]}}'
EVIL_SETUP = f'{{"commands": ["touch {CACHE}/planted-by-branch"]}}'
VICTIM = f"echo request-sees: $(ls -A {CACHE}); touch {CACHE}/left-by-victim"
WRITE = {"tool": "workspace.write_file", "args": {"path": "NOTES.md", "content": "ok\n"}}
AGENT_PLANT = {"tool": "command.run", "args": {
    "command": f"echo cache-var=$PIP_CACHE_DIR; touch {CACHE}/planted-by-agent && echo planted"}}


def _push_branch(world: RepoWorld, branch: str, files: dict[str, str]) -> None:
    """Add ``branch`` (from ``main``, with ``files`` changed) to the hosted repository."""
    work = world.root / "branch-work"
    env = {**GIT_ENV, "HOME": str(world.root), "GIT_AUTHOR_NAME": "Evil",
           "GIT_AUTHOR_EMAIL": "evil@example.invalid", "GIT_COMMITTER_NAME": "Evil",
           "GIT_COMMITTER_EMAIL": "evil@example.invalid"}

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=work, env=env, check=True, capture_output=True)

    subprocess.run(["git", "clone", "-q", str(world.host.bare(REPO)), str(work)], env=env,
                   check=True, capture_output=True)
    git("checkout", "-q", "-b", branch)
    for name, content in files.items():
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text(content)
    git("add", ".")
    git("commit", "-q", "-m", "setup")
    git("push", "-q", "origin", branch)


def _execute(world: RepoWorld, tmp_path: Path, *, calls: tuple[dict[str, Any], ...] = (),
             settings_update: dict[str, Any] | None = None,
             **request: Any) -> list[tuple[str, dict[str, Any]]]:
    settings = world.settings().model_copy(update={
        "workspace_dir": tmp_path / "ws", "sandbox": SandboxMode.BWRAP, "setup_allowlist": [],
        **(settings_update or {})})
    db = world.database()
    try:
        execution_id = create_execution(db, ExecutionRequest(
            provider="replay", prompt="p", repo_url=world.url, pull_request=False,
            script={"turns": [{"tool_calls": [*calls, WRITE]}, {"final": DONE}]}, **request),
            Redactor([TOKEN]), settings=settings)
        outcome = execute_execution(execution_id, settings=settings, db=db)
        events = [(e.kind, dict(e.data)) for e in ExecutionRepository(db).events(execution_id)]
    finally:
        db.dispose()
    assert outcome.status == "succeeded", (outcome, events)
    return events


def _setup_output(events: list[tuple[str, dict[str, Any]]]) -> str:
    return "".join(d["stdout"] for kind, d in events
                   if kind == "setup" and d["status"] == "succeeded")


def _seen(events: list[tuple[str, dict[str, Any]]], who: str) -> set[str]:
    """What the ``who-sees:`` line of a setup command listed."""
    for line in _setup_output(events).splitlines():
        if line.startswith(f"{who}-sees:"):
            return set(line.split()[1:])
    raise AssertionError(f"no {who}-sees line in {_setup_output(events)!r}")


def test_no_branch_request_or_agent_plants_a_file_in_another_writers_cache(
        tmp_path: Path) -> None:
    require_sandbox("bwrap")
    with repo_world(tmp_path, {".studio/setup.json": MAIN_SETUP}) as world:
        _push_branch(world, "evil", {".studio/setup.json": EVIL_SETUP})
        first = _execute(world, tmp_path, setup=(VICTIM,))
        # the hostile writers
        _execute(world, tmp_path, base_branch="evil")
        _execute(world, tmp_path, setup=(f"touch {CACHE}/planted-by-request",))
        agent = _execute(world, tmp_path, network="allowlist", calls=(AGENT_PLANT,))
        # the victim: main's setup file and the same request as the first execution's
        victim = _execute(world, tmp_path, setup=(VICTIM,))
    # the witness: nothing any other writer planted
    assert "planted" not in _setup_output(victim), _setup_output(victim)
    [planting] = [d["envelope"]["result"] for kind, d in agent if kind == "tool_result"
                  and "exit_code" in d["envelope"].get("result", {})]
    assert planting["exit_code"] != 0 and "planted" not in planting["stdout"], planting
    assert "cache-var=\n" in planting["stdout"], planting  # no cache variable either
    # positive control: each writer's listing shows what that same writer left before
    assert _seen(first, "main") == _seen(first, "request") == set()
    assert _seen(victim, "main") == {"left-by-main"}
    assert _seen(victim, "request") == {"left-by-victim"}


def test_a_cache_past_the_size_bound_is_dropped_when_its_setup_ends(tmp_path: Path) -> None:
    require_sandbox("bwrap")
    fill = f"echo request-sees: $(ls -A {CACHE}); head -c 3145728 /dev/urandom > {CACHE}/big"
    small = {"dependency_cache_max_mb": 2}
    with repo_world(tmp_path, {}) as world:
        _execute(world, tmp_path, setup=(fill,), settings_update=small)
        again = _execute(world, tmp_path, setup=(fill,), settings_update=small)
        assert _seen(again, "request") == set()  # 3 MiB > 2 MiB: removed after the first
        # positive control: under a larger bound the same file is there the next time
        _execute(world, tmp_path, setup=(fill,))
        kept = _execute(world, tmp_path, setup=(fill,))
        assert _seen(kept, "request") == {"big"}
