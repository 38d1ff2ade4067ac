"""The setup phase end to end (replay provider, in process, the real bubblewrap sandbox, the
real egress proxy and pip): a dependency installed by a setup command from a package index on
127.0.0.1 (allowed by the deployment's ``127.0.0.1:PORT``) makes the agent's test run pass; the
same install from the offline agent phase fails; requests the allowlist refuses (a host not on
it, the local Redis port, an allowed name that resolves to 127.0.0.1) are in the evidence and in
the pull request's body; the second execution installs from the repository's dependency cache;
a failing setup ends the execution with ``setup_failed`` and nothing pushed."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.db.executions import ExecutionRepository
from services.db.flowcharts import FlowchartRepository
from services.db.redaction import Redactor
from services.flowcharts.graph import parse_graph
from services.flowcharts.service import FlowchartRunService
from services.runs.durable import execute_execution
from services.runs.request import ExecutionRequest, create_execution
from services.settings import SandboxMode
from tests.integration.databases import create_migrated_pg_database, drop_pg_database
from tests.integration.repo_env import DONE, TOKEN, RepoWorld, last_json, repo_world, studio
from tests.support.git_http_server import seed_bare_repo
from tests.support.package_index import PackageIndex, build_wheel, package_index
from tests.support.redaction import settings_redactor

PACKAGE = "studio-dep"
DEP_TEST = ("import unittest\n\nimport studio_dep\n\n\nclass DepTest(unittest.TestCase):\n"
            "    def test_value(self):\n        self.assertEqual(studio_dep.VALUE, 42)\n")
# The probe a setup command runs: raw proxy requests through the sandbox's relay.
PROBE = """import socket, sys
for target in sys.argv[1:]:
    if target.startswith("direct:"):  # no route out but the relay: a direct connection fails
        host, port = target[len("direct:"):].rsplit(":", 1)
        try:
            socket.create_connection((host, int(port)), timeout=10)
            print(target, "CONNECTED")
        except OSError as exc:
            print(target, "failed", type(exc).__name__)
        continue
    s = socket.create_connection(("127.0.0.1", 3128), timeout=60)
    s.sendall(f"CONNECT {target} HTTP/1.1\\r\\nHost: {target}\\r\\n\\r\\n".encode())
    print(target, s.recv(200).split(b"\\r\\n")[0].decode())
    s.close()
"""
PROJECT = {".gitignore": ".deps/\n", "test_dep.py": DEP_TEST, "tools/probe.py": PROBE}
TEST_RUN = {"tool": "command.run",
            "args": {"argv": ["python3", "-m", "unittest", "-q", "test_dep"],
                     "env": {"PYTHONPATH": ".deps"}}}
REDIS = "127.0.0.1:6379"
WRITE = {"tool": "workspace.write_file", "args": {"path": "NOTES.md", "content": "ok\n"}}


def _install(index: PackageIndex) -> str:
    return (f"python3 -m pip install --no-input --disable-pip-version-check --quiet "
            f"--index-url {index.url} --trusted-host 127.0.0.1 --target .deps {PACKAGE}")


@pytest.fixture
def index(tmp_path: Path) -> Iterator[PackageIndex]:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    # incompressible bytes, so that a download is plainly visible in the proxy's counters
    build_wheel(wheels, PACKAGE, "1.0", {"studio_dep/__init__.py": b"VALUE = 42\n",
                                         "studio_dep/blob.bin": os.urandom(256 * 1024)})
    with package_index(wheels) as served:
        yield served


def _run(world: RepoWorld, tmp_path: Path, index: PackageIndex, turns: list[dict[str, Any]],
         *, repo_url: str | None = None, settings_update: dict[str, Any] | None = None,
         **request: Any) -> tuple[Any, Any, list[Any]]:
    settings = world.settings().model_copy(update={
        "workspace_dir": tmp_path / "ws", "sandbox": SandboxMode.BWRAP,
        "setup_allowlist": [f"127.0.0.1:{index.port}", "localhost:6379"],
        **(settings_update or {})})
    db = world.database()
    try:
        execution_id = create_execution(db, ExecutionRequest(
            provider="replay", prompt="Make the dependency test pass",
            repo_url=repo_url or world.url,
            script={"turns": [{"tool_calls": [c]} for c in [*turns, WRITE]]
                    + [{"final": DONE}]},
            **request), Redactor([TOKEN]), settings=settings)
        outcome = execute_execution(execution_id, settings=settings, db=db)
        return outcome, ExecutionRepository(db).get(execution_id), [
            (e.kind, e.data) for e in ExecutionRepository(db,
                                                          settings_redactor()).events(execution_id)]
    finally:
        db.dispose()


def _results(events: list[Any]) -> list[dict[str, Any]]:
    return [d["envelope"]["result"] for kind, d in events
            if kind == "tool_result" and d["envelope"].get("ok")]


def _network(events: list[Any], phase: str) -> dict[str, Any]:
    found = [d for kind, d in events if kind == "network" and d["phase"] == phase]
    assert len(found) == 1, found
    return found[0]


@pytest.fixture(params=["sqlite", "postgres"])
def database(request: pytest.FixtureRequest) -> Iterator[str | None]:
    """The journal's database: the world's SQLite file, or a fresh migrated PostgreSQL one."""
    if request.param == "sqlite":
        yield None
        return
    admin: str = request.getfixturevalue("pg_admin")
    url = create_migrated_pg_database(admin)
    yield url
    drop_pg_database(admin, url)


def test_setup_installs_what_the_tests_need_and_the_proxy_refuses_the_rest(
        tmp_path: Path, index: PackageIndex, database: str | None) -> None:
    # the probe runs in a background job of the shell: every process goes through the relay
    probe = (f"sh -c 'python3 tools/probe.py {REDIS} localhost:6379 example.com:443 "
             f"direct:127.0.0.1:{index.port} direct:1.1.1.1:443 & wait'")
    with repo_world(tmp_path, PROJECT) as world:
        if database is not None:
            world = dataclasses.replace(world, db_url=database)
        outcome, row, events = _run(world, tmp_path, index, [TEST_RUN],
                                    setup=(_install(index), probe), pull_request=True)
        assert outcome.status == "succeeded", row.error_message
        # the agent's test run passed with the installed package
        assert _results(events)[0]["exit_code"] == 0, _results(events)[0]
        setup = [d for kind, d in events if kind == "setup" and d["status"] != "output"]
        assert [(d["index"], d["status"]) for d in setup] == [
            (0, "started"), (0, "succeeded"), (1, "started"), (1, "succeeded")]
        # each refusal: the proxy answered 403 and recorded it with the command
        assert setup[3]["stdout"].count("403 Forbidden") == 3, setup[3]["stdout"]
        assert setup[3]["stdout"].count(" failed ") == 2 and "CONNECTED" not in setup[3]["stdout"]
        network = _network(events, "setup")
        blocked = {(b["host"], b["port"]): b for b in network["blocked"]}
        assert set(blocked) == {("127.0.0.1", 6379), ("localhost", 6379), ("example.com", 443)}
        assert all(b["command"] == probe for b in blocked.values())
        assert "not on the allowlist" in blocked[("127.0.0.1", 6379)]["reason"]
        assert "loopback" in blocked[("localhost", 6379)]["reason"]
        assert network["bytes_to_sandbox"] > 256 * 1024  # the wheel came through the proxy
        # setup events come before the loop's; the pull request lists the refusals
        kinds = [kind for kind, _ in events]
        assert kinds.index("network") < kinds.index("started")
        body = world.pulls_of(row.branch)[0].body
        assert "Blocked network requests" in body
        assert "`example.com:443`" in body and "`127.0.0.1:6379`" in body and probe in body
        # the installed files stay out of the commit (the repository ignores them)
        assert world.remote_file(row.branch, "NOTES.md") == "ok\n"
        assert world.remote_file(row.branch, ".deps/studio_dep/__init__.py") is None


def test_the_same_install_fails_from_the_offline_agent_phase_and_works_in_allowlist_mode(
        tmp_path: Path, index: PackageIndex) -> None:
    install = {"tool": "command.run", "args": {"command": _install(index), "timeout_s": 120}}
    with repo_world(tmp_path, PROJECT) as world:
        outcome, row, events = _run(world, tmp_path, index, [install, TEST_RUN],
                                    pull_request=False)
        assert row.status == "succeeded", row.error_message
        offline = _results(events)
        assert offline[0]["exit_code"] != 0 and offline[1]["exit_code"] != 0
        assert "network" not in [kind for kind, _ in events]
        assert index.requests == []  # nothing reached the index
        probe = {"tool": "command.run",
                 "args": {"argv": ["python3", "tools/probe.py", "example.com:443"]}}
        outcome, row, events = _run(world, tmp_path, index, [install, TEST_RUN, probe],
                                    pull_request=False, network="allowlist")
        assert row.status == "succeeded", row.error_message
        online = _results(events)
        assert online[0]["exit_code"] == 0, online[0]
        assert online[1]["exit_code"] == 0, online[1]
        assert "403 Forbidden" in online[2]["stdout"]
        agent = _network(events, "agent")
        assert agent["bytes_to_sandbox"] > 0
        assert [(b["host"], b["command"]) for b in agent["blocked"]] == [
            ("example.com", "python3 tools/probe.py example.com:443")]


def test_the_second_execution_installs_from_the_repository_cache(
        tmp_path: Path, index: PackageIndex) -> None:
    with repo_world(tmp_path, PROJECT) as world:
        _, first_row, first = _run(world, tmp_path, index, [TEST_RUN],
                                   setup=(_install(index),), pull_request=False)
        _, second_row, second = _run(world, tmp_path, index, [TEST_RUN],
                                     setup=(_install(index),), pull_request=False)
        assert first_row.status == second_row.status == "succeeded"
        assert _results(second)[0]["exit_code"] == 0
        before = _network(first, "setup")["bytes_to_sandbox"]
        after = _network(second, "setup")["bytes_to_sandbox"]
        assert before > 256 * 1024 and after < before / 4, (before, after)
        # another repository's execution starts with an empty cache of its own
        seed_bare_repo(tmp_path / "git", "acme/gadgets", PROJECT)
        look = "test -z \"$(ls -A /run/studio-cache)\" && touch /run/studio-cache/mine"
        _, other, _ = _run(world, tmp_path, index, [TEST_RUN], setup=(look,),
                           repo_url=world.host.url("acme/gadgets"), pull_request=False)
        assert other.status == "succeeded", other.error_message


def test_a_failing_setup_ends_the_execution_with_its_output_and_nothing_pushed(
        tmp_path: Path, index: PackageIndex) -> None:
    with repo_world(tmp_path, PROJECT) as world:
        outcome, row, events = _run(world, tmp_path, index, [TEST_RUN],
                                    setup=("echo preparing; echo broken >&2; exit 3",))
        assert outcome.status == "failed" and row.error_code == "setup_failed"
        assert "exited with 3" in row.error_message and "broken" in row.error_message
        assert [(kind, d.get("status")) for kind, d in events] == [
            ("setup", "started"), ("setup", "output"), ("setup", "output"), ("setup", "failed"),
            ("network", None), ("finished", "failed")]
        # the output as it came (streamed), then in the end event
        assert {(d["stream"], d["text"]) for _, d in events[1:3]} == {
            ("stdout", "preparing\n"), ("stderr", "broken\n")}
        assert events[3][1]["stderr"].strip() == "broken"
        assert world.host.pushes == [] and world.api.pulls == []
        # a command past STUDIO_SETUP_TIMEOUT_S is killed and the setup fails
        outcome, row, events = _run(world, tmp_path, index, [TEST_RUN],
                                    setup=("echo waiting; sleep 600 & sleep 600",),
                                    settings_update={"setup_timeout_s": 2.0})
        assert row.error_code == "setup_failed" and "timed out" in row.error_message
        ended = [d for k, d in events if k == "setup" and d["status"] == "failed"]
        assert ended[0]["timed_out"] is True and ended[0]["stdout"] == "waiting\n"
        assert world.host.pushes == []


def test_the_repository_setup_file_runs_first_and_a_hostile_one_is_refused(
        tmp_path: Path, index: PackageIndex) -> None:
    files = {**PROJECT, ".studio/setup.json": '{"commands": ["echo from-repo > .deps-marker"]}',
             ".gitignore": ".deps/\n.deps-marker\n"}
    with repo_world(tmp_path, files) as world:
        _, row, events = _run(world, tmp_path, index, [TEST_RUN],
                              setup=("test -f .deps-marker",), pull_request=False)
        assert row.status == "succeeded", row.error_message
        assert [(d["source"], d["status"]) for k, d in events
                if k == "setup" and d["status"] != "output"] == [
            ("repository", "started"), ("repository", "succeeded"),
            ("request", "started"), ("request", "succeeded")]
    hostile = {**PROJECT, ".studio/setup.json": '{"commands": ["true"], "hosts": ["evil.org"]}'}
    with repo_world(tmp_path / "hostile", hostile) as world:
        _, row, events = _run(world, tmp_path, index, [TEST_RUN], pull_request=False)
        assert row.status == "failed" and row.error_code == "setup_failed"
        assert ".studio/setup.json" in row.error_message
        assert world.host.pushes == []


def test_setup_commands_see_no_secret_and_only_the_proxy(
        tmp_path: Path, index: PackageIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    key = "sk-setupPhaseSECRET0123456789"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    monkeypatch.setenv("STUDIO_GITHUB_TOKEN", TOKEN)
    secret_key = "setup-phase-secret-key-0123456789abcdef"
    monkeypatch.setenv("STUDIO_SECRET_KEY", secret_key)
    look = ("env; tr '\\0' '\\n' < /proc/1/environ; ls -a /run/studio-egress; "
            "ls / ; git config --list --show-origin || true")
    with repo_world(tmp_path, PROJECT) as world:
        _, row, events = _run(world, tmp_path, index, [TEST_RUN], setup=(look,),
                              pull_request=False)
        assert row.status == "succeeded", row.error_message
        output = next(d["stdout"] + d["stderr"] for k, d in events
                      if k == "setup" and d["status"] == "succeeded")
        streamed = "".join(d["text"] for k, d in events if k == "setup" and d["status"] == "output")
        assert "HTTPS_PROXY=" in streamed and key not in streamed and TOKEN not in streamed
        assert key not in output and TOKEN not in output and world.db_url not in output
        assert secret_key not in output and secret_key not in streamed
        assert "HTTPS_PROXY=http://127.0.0.1:3128" in output
        assert "PIP_CACHE_DIR=/run/studio-cache/pip" in output
        assert "proxy.sock" in output and "relay.py" in output


def test_setup_is_refused_where_the_sandbox_cannot_enforce_the_allowlist(
        tmp_path: Path, index: PackageIndex) -> None:
    settings_update = {"sandbox": SandboxMode.NONE}
    with repo_world(tmp_path, PROJECT) as world:
        settings = world.settings().model_copy(update={
            "workspace_dir": tmp_path / "ws", **settings_update})
        db = world.database()
        try:
            execution_id = create_execution(db, ExecutionRequest(
                provider="replay", prompt="p", repo_url=world.url, setup=("touch ran",),
                script={"turns": [{"final": DONE}]}), Redactor([TOKEN]), settings=settings)
            outcome = execute_execution(execution_id, settings=settings, db=db)
            row = ExecutionRepository(db).get(execution_id)
            kinds = [e.kind for e in ExecutionRepository(db,
                                                         settings_redactor()).events(execution_id)]
        finally:
            db.dispose()
        assert outcome.status == "failed" and row.error_code == "sandbox_unavailable"
        assert "bubblewrap" in row.error_message and kinds == ["finished"]
        assert world.host.pushes == []


def test_studio_run_takes_setup_commands_and_shows_them(
        tmp_path: Path, index: PackageIndex) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": [{"tool_calls": [c]} for c in (TEST_RUN, WRITE)]
                                  + [{"final": DONE}]}))
    with repo_world(tmp_path, PROJECT) as world:
        env = world.env(tmp_path / "ws", STUDIO_SANDBOX="bwrap",
                        STUDIO_SETUP_ALLOWLIST=f"127.0.0.1:{index.port}")
        done = studio(env, "run", "--repo", world.url, "--no-pr", "--script", str(script),
                      "--json", "--setup", _install(index), "--setup", "echo second",
                      "--allow-host", "example.org", "Make the dependency test pass")
        assert done.returncode == 0, done.stderr
        assert last_json(done.stdout)["execution_status"] == "succeeded"
        assert "setup 1 (request): $ python3 -m pip install" in done.stderr
        assert "setup 2 (request): succeeded, exit 0" in done.stderr
        assert "network (setup):" in done.stderr
        hostile = studio(env, "run", "--repo", world.url, "--script", str(script),
                         "--allow-host", "127.0.0.1:5432", "p")
        assert hostile.returncode == 2 and "deployment" in hostile.stderr
        in_place = studio(env, "run", "--workspace", str(tmp_path), "--script", str(script),
                          "--setup", "true", "p")
        assert in_place.returncode == 2 and "--repo" in in_place.stderr


def test_a_flowchart_agent_node_runs_its_setup_commands(
        tmp_path: Path, index: PackageIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STUDIO_WORKSPACE_DIR", str(tmp_path / "workspaces"))
    script = {"turns": [{"tool_calls": [c]} for c in (TEST_RUN, WRITE)] + [{"final": DONE}]}
    with repo_world(tmp_path / "world", PROJECT) as world:
        graph = {
            "nodes": [
                {"id": "start", "type": "start", "config": {}},
                {"id": "fix", "type": "agent", "config": {
                    "provider": "replay", "prompt": "Make the dependency test pass.",
                    "replay_script": script, "repo_url": world.url, "pull_request": False,
                    "setup": [_install(index)], "network": "offline",
                    "network_allowlist": ["example.org"]}},
                {"id": "end", "type": "end", "config": {}},
            ],
            "edges": [{"id": "a", "source": "start", "target": "fix"},
                      {"id": "b", "source": "fix", "target": "end"}],
        }
        settings = world.settings().model_copy(update={
            "sandbox": SandboxMode.BWRAP, "setup_allowlist": [f"127.0.0.1:{index.port}"]})
        db = world.database()
        try:
            flowchart_id = FlowchartRepository(db).create(
                name="setup", graph=parse_graph(graph).model_dump(mode="json"))
            service = FlowchartRunService(db, settings)
            run = service.get(service.start(flowchart_id))
            execution_id = run["nodes"]["fix"]["execution_id"]
            events = [(e.kind, e.data) for e in ExecutionRepository(db).events(execution_id)]
        finally:
            db.dispose()
        assert run["status"] == "succeeded", run
        assert _results(events)[0]["exit_code"] == 0
        assert _network(events, "setup")["allowlist"] == ["example.org",
                                                          f"127.0.0.1:{index.port}"]
