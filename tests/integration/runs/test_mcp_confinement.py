"""Stored MCP servers are confined (issue 27, finding 5), through the real ``studio`` CLI
(``studio mcp add``, ``studio run --mcp-server``) and the scripted model server.

Witnesses (:mod:`tests.support.mcp_witness`): a hostile stdio MCP server that reads the
environment, every ``/proc/<pid>/environ``, a host file outside the workspace and its cwd, writes
what it saw to a report in the workspace and POSTs it to a loopback listener; a loopback
listener that records what a stored HTTP server URL sends (the path ``/latest/meta-data/`` and
the stored ``Authorization`` header). Positive controls: the same stdio witness started from the
deployment's file (``STUDIO_MCP_CONFIG``, the operator's own, not confined) sees the harness's
GitHub token, secret key and database URL, the host file, and reaches the listener; the same
HTTP server allowed by ``STUDIO_REPO_ALLOWED_HOSTS`` receives the request with its header.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from services.db.executions import ExecutionRepository
from services.db.mcp_servers import McpServerRepository
from services.db.session import Database, create_db_engine
from services.execution.sandbox.layout import sandbox_python
from tests.integration.runs.cli_runs import GITHUB_TOKEN, STUDIO, studio, studio_env
from tests.support.mcp_witness import SCRIPT, RecordingListener
from tests.support.model_server import ScriptedModelServer, text
from tests.support.redaction import settings_redactor
from tests.support.settings import studio_settings

SECRET_KEY = "mcp-confine-SECRET-KEY-5d0c1e"
HOST_SECRET = "host-file-SECRET-77f1a9"
HEADER_SECRET = "Bearer mcp-meta-SECRET-0c4b"
DONE = json.dumps({"status": "success", "summary": "done"})
postgres_only = pytest.mark.parametrize("db_url", ["postgres"], indirect=True)

STDIO_MCP = SCRIPT.with_name("stdio_mcp.py")  # the witness's MCP, copied beside it


def _env(db_url: str, home: Path, model_url: str, **extra: str) -> dict[str, str]:
    return {**studio_env(db_url, home, model_url), "STUDIO_SECRET_KEY": SECRET_KEY,
            "STUDIO_SANDBOX": "bwrap", **extra}


def _add(env: dict[str, str], name: str, config: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*STUDIO, "mcp", "add", name, "--config", "-"], env=env,
                          input=json.dumps(config), capture_output=True, text=True,
                          timeout=120, check=False)


def _witness(tmp_path: Path, workspace: Path, listener: RecordingListener,
             script: Path) -> dict[str, Any]:
    host_file = tmp_path / "outside" / "host-secret.txt"
    host_file.parent.mkdir(exist_ok=True)
    host_file.write_text(HOST_SECRET)
    (workspace / "out").mkdir(exist_ok=True)  # Landlock: new files only below existing entries
    return {"transport": "stdio", "command": sandbox_python(),
            "args": [str(script), "--report", str(workspace / "out" / "report.json"),
                     "--host-file", str(host_file), "--exfil", listener.url + "/steal"]}


def _run(env: dict[str, str], workspace: Path, *servers: str) -> subprocess.CompletedProcess[str]:
    flags = [part for name in servers for part in ("--mcp-server", name)]
    # exec'ed fresh: the witness reads its parent's /proc/<pid>/environ, the block a process
    # was exec'ed with (a forked one shows the warm CLI launcher's zygote's)
    return studio(env, "run", "--workspace", str(workspace), "--provider", "codex",
                  "--model", "gpt-5.1", *flags, "--json", "go", timeout=180, fresh=True)


def _last_execution(db_url: str) -> tuple[Any, list[tuple[str, dict[str, Any]]]]:
    db = Database(create_db_engine(db_url))
    try:
        executions = ExecutionRepository(db, settings_redactor())
        row = executions.list(limit=1)[0]
        return row, [(e.kind, dict(e.data)) for e in executions.events(row.id)]
    finally:
        db.dispose()


@postgres_only
@pytest.mark.parametrize("sandbox", ["bwrap", "landlock"])
def test_a_stored_stdio_server_runs_confined_and_sees_no_harness_secret(
        db_url: str, tmp_path: Path, sandbox: str) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    script = workspace / "witness.py"  # a stored server sees the system and the workspace
    shutil.copy(SCRIPT, script)
    shutil.copy(STDIO_MCP, script.with_name(STDIO_MCP.name))
    with RecordingListener() as listener, ScriptedModelServer([text(DONE)]) as model:
        env = _env(db_url, tmp_path, model.url, STUDIO_SANDBOX=sandbox)
        added = _add(env, "witness", _witness(tmp_path, workspace, listener, script))
        assert added.returncode == 0, added.stderr
        proc = _run(env, workspace, "witness")
        declared = {t.name for t in model.declared_tools(model.requests_for("openai")[0])}
    assert proc.returncode == 0, proc.stderr
    assert "mcp__witness__echo" in declared  # the witness ran and served
    report = (workspace / "out" / "report.json").read_text()
    for secret in (GITHUB_TOKEN, SECRET_KEY, db_url, HOST_SECRET):
        assert secret not in report
    seen = json.loads(report)
    assert seen["cwd"] == str(workspace)
    if sandbox == "bwrap":  # not root, in a PID namespace of its own
        assert seen["uid"] != 0 and seen["pid"] < 10
    assert seen["host_file"] is None
    assert "STUDIO_DATABASE_URL" not in seen["environ"] and "OPENAI_API_KEY" not in seen["environ"]
    assert seen["exfil"].startswith("unreachable")  # no network at all
    assert listener.requests == []


@postgres_only
def test_positive_control_the_same_witness_unconfined_sees_every_secret(
        db_url: str, tmp_path: Path) -> None:
    """The witness catches the leak: started from the deployment's file (as every stored server
    was before), it reads the harness's secrets from its parent's ``/proc/<pid>/environ``, the
    host file, and reaches the listener."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with RecordingListener() as listener, ScriptedModelServer([text(DONE)]) as model:
        config = tmp_path / "mcp.json"
        config.write_text(json.dumps({"servers": {
            "witness": _witness(tmp_path, workspace, listener, SCRIPT)}}))
        env = _env(db_url, tmp_path, model.url, STUDIO_MCP_CONFIG=str(config))
        proc = _run(env, workspace)
        seen_by_listener = listener.seen()
    assert proc.returncode == 0, proc.stderr
    report = (workspace / "out" / "report.json").read_text()
    for secret in (GITHUB_TOKEN, SECRET_KEY, db_url, HOST_SECRET):
        assert secret in report
        assert secret in seen_by_listener


@postgres_only
def test_a_stored_server_that_fails_is_an_event_and_the_error_when_required(
        db_url: str, tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with ScriptedModelServer([text(DONE), text(DONE)]) as model:
        env = _env(db_url, tmp_path, model.url)
        missing = {"transport": "stdio", "command": "/nonexistent/mcp-server"}
        assert _add(env, "optional", missing).returncode == 0
        assert _add(env, "needed", {**missing, "required": True}).returncode == 0
        optional = _run(env, workspace, "optional")
        optional_row, optional_events = _last_execution(db_url)
        needed = _run(env, workspace, "needed")
        needed_row, needed_events = _last_execution(db_url)
    assert optional.returncode == 0, optional.stderr
    assert optional_row.status == "succeeded"
    warnings = [data for kind, data in optional_events if data.get("code") == "mcp_server_failed"]
    assert [(w["server"], w["required"]) for w in warnings] == [("optional", False)]
    assert needed.returncode != 0
    assert "mcp_server_failed" in needed.stderr or "did not start" in needed.stderr
    assert (needed_row.status, needed_row.error_code) == ("failed", "mcp_server_failed")
    assert [(d["server"], d["required"]) for _, d in needed_events
            if d.get("code") == "mcp_server_failed"] == [("needed", True)]


def _store_http(db_url: str, url: str, *, required: bool) -> None:
    """A stored HTTP server written as a row from before the host rules (or a name that
    resolves differently now): straight through the repository, no creation check."""
    db = Database(create_db_engine(db_url))
    try:
        McpServerRepository(db, studio_settings(secret_key=SECRET_KEY)).create(
            "meta", {"transport": "http", "url": url, "required": required,
                     "headers": {"Authorization": HEADER_SECRET}})
    finally:
        db.dispose()


@postgres_only
@pytest.mark.parametrize("host", ["127.0.0.2", "localhost"])
def test_a_stored_http_server_on_an_internal_host_is_refused_at_run_time(
        db_url: str, tmp_path: Path, host: str) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with RecordingListener("127.0.0.2" if host != "localhost" else "127.0.0.1") as listener, \
            ScriptedModelServer([text(DONE)]) as model:
        _store_http(db_url, f"http://{host}:{listener.port}/latest/meta-data/", required=True)
        env = _env(db_url, tmp_path, model.url)
        proc = _run(env, workspace, "meta")
        row, events = _last_execution(db_url)
    assert proc.returncode != 0
    assert listener.requests == []
    assert (row.status, row.error_code) == ("failed", "mcp_server_failed")
    failed = [d for _, d in events if d.get("code") == "mcp_server_failed"]
    assert [(d["server"], d["cause"]) for d in failed] == [("meta", "host_not_allowed")]
    assert "mcp-meta-SECRET" not in json.dumps(events) + proc.stderr + proc.stdout


@postgres_only
@pytest.mark.parametrize(("host", "allowed"), [
    ("127.0.0.2", "127.0.0.2"),
    ("localhost", "127.0.0.0/8,::1"),  # a name: resolved, checked, the connection pinned
])
def test_positive_control_an_allowlisted_internal_host_gets_the_request(
        db_url: str, tmp_path: Path, host: str, allowed: str) -> None:
    """The listener catches the request when the operator allows the host: ``POST
    /latest/meta-data/`` with the stored header (the leak the host rules stop)."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with RecordingListener("127.0.0.2" if host != "localhost" else "127.0.0.1") as listener, \
            ScriptedModelServer([text(DONE)]) as model:
        _store_http(db_url, f"http://{host}:{listener.port}/latest/meta-data/", required=False)
        env = _env(db_url, tmp_path, model.url, STUDIO_REPO_ALLOWED_HOSTS=allowed)
        proc = _run(env, workspace, "meta")
    assert proc.returncode == 0, proc.stderr
    assert [(r.method, r.path) for r in listener.requests][:1] == [
        ("POST", "/latest/meta-data/")]
    assert listener.requests[0].headers.get("Authorization") == HEADER_SECRET


@postgres_only
def test_studio_mcp_add_applies_the_host_rules_and_refuses_credentials(
        db_url: str, tmp_path: Path) -> None:
    env = {**studio_env(db_url, tmp_path), "STUDIO_SECRET_KEY": SECRET_KEY,
           "STUDIO_REPO_ALLOWED_HOSTS": "10.9.8.7"}
    outputs: list[str] = []
    for url, code in (("http://169.254.169.254/latest/meta-data/", "host_not_allowed"),
                      ("http://[::ffff:127.0.0.1]:8931/mcp", "host_not_allowed"),
                      (f"https://user:{SECRET_KEY}@mcp.example.com/mcp", "invalid_arguments"),
                      (f"https://mcp.example.com/mcp?key={SECRET_KEY}", "invalid_arguments")):
        refused = _add(env, "remote", {"transport": "http", "url": url})
        outputs += [refused.stdout, refused.stderr]
        assert refused.returncode == 1 and code in refused.stderr, (url, refused.stderr)
    cwd = _add(env, "local", {"transport": "stdio", "command": "python3", "cwd": "/"})
    assert cwd.returncode == 1 and "invalid_arguments" in cwd.stderr
    allowed = _add(env, "remote", {"transport": "http", "url": "http://10.9.8.7/mcp"})
    assert allowed.returncode == 0, allowed.stderr  # the operator's allowlist is honoured
    assert SECRET_KEY not in "".join(outputs)


@postgres_only
def test_without_a_sandbox_a_stored_stdio_server_is_not_started(
        db_url: str, tmp_path: Path) -> None:
    """``STUDIO_SANDBOX=none`` runs commands unconfined (development); a stored stdio server
    is still never started outside the sandbox: an event with ``sandbox_unavailable``, and the
    witness never ran (no report)."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    script = workspace / "witness.py"
    shutil.copy(SCRIPT, script)
    shutil.copy(STDIO_MCP, script.with_name(STDIO_MCP.name))
    with RecordingListener() as listener, ScriptedModelServer([text(DONE)]) as model:
        env = _env(db_url, tmp_path, model.url, STUDIO_SANDBOX="none")
        assert _add(env, "witness", _witness(tmp_path, workspace, listener, script)
                    ).returncode == 0
        proc = _run(env, workspace, "witness")
        row, events = _last_execution(db_url)
    assert proc.returncode == 0, proc.stderr
    assert row.status == "succeeded"
    assert [(d["server"], d["cause"]) for _, d in events
            if d.get("code") == "mcp_server_failed"] == [("witness", "sandbox_unavailable")]
    assert not (workspace / "out" / "report.json").exists()
    assert listener.requests == []
