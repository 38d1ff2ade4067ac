"""The commands that need neither the database nor a provider start without importing them.

Each case runs the real ``studio`` entry point in a subprocess through a small wrapper that, once
the command has finished, writes the names in ``sys.modules`` to a file. ``studio --help``,
``studio tools list`` and ``studio tools call`` must not load SQLAlchemy, MCP, Celery, FastAPI, the
kubernetes client or any provider SDK: those are imported by the commands that use them, when they
run. The database commands the suite starts most load what they use and no more: no broker side
without a broker, no PostgreSQL dialect on SQLite, no legacy agent CLI runtime for a loop run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.databases import write_migrated_sqlite

WRAPPER = """
import json, sys
out, sys.argv = sys.argv[1], ["studio", *sys.argv[2:]]
from services.cli.main import main
try:
    main()
finally:
    with open(out, "w") as f:
        json.dump(sorted(sys.modules), f)
"""

# Top-level packages (or, for a namespace package, the exact module) a light command must not load.
FORBIDDEN = (
    "sqlalchemy", "alembic",                      # the database
    "mcp", "mcp_types",                           # the MCP bridge
    "celery", "kombu",                            # the worker
    "fastapi", "starlette", "uvicorn",            # the HTTP API
    "kubernetes",                                 # the Kubernetes substrate
    "openai", "google.genai", "claude_agent_sdk",  # the provider SDKs
    "github",                                     # pull requests
    "opentelemetry", "prometheus_client",         # traces and metrics (when on)
)


def loaded_modules(tmp_path: Path, *args: str,
                   **variables: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run ``studio ARGS`` with its own data directory (an embedded SQLite database), no broker,
    and the environment ``variables`` on top."""
    out = tmp_path / "modules.json"
    env = {**os.environ, "STUDIO_DATA_DIR": str(tmp_path / "data")}
    env.pop("STUDIO_DATABASE_URL", None)
    env.pop("STUDIO_BROKER_URL", None)
    env.update(variables)
    proc = subprocess.run([sys.executable, "-c", WRAPPER, str(out), *args], capture_output=True,
                          text=True, timeout=120, check=False, env=env)
    return proc, set(json.loads(out.read_text()))


def forbidden_in(modules: set[str]) -> list[str]:
    return sorted(m for m in modules
                  if any(m == f or m.startswith(f + ".") for f in FORBIDDEN))


@pytest.mark.parametrize("args", [
    ("--help",),
    ("tools", "list"),
    ("tools", "call", "workspace.list_dir", "--workspace", "{ws}"),
    ("tools", "call", "command.run", "--workspace", "{ws}", "--args", '{"argv": ["true"]}'),
    ("tools", "call", "no.such_operation", "--workspace", "{ws}"),
], ids=["help", "tools-list", "tools-call", "tools-call-command", "tools-call-usage-error"])
def test_light_commands_import_no_heavy_package(tmp_path: Path, workspace: Path,
                                                args: tuple[str, ...]) -> None:
    proc, modules = loaded_modules(tmp_path, *(a.replace("{ws}", str(workspace)) for a in args))
    expected_code = 2 if "no.such_operation" in args else 0
    assert proc.returncode == expected_code, proc.stderr
    assert "services.cli.main" in modules and "typer" in modules  # the CLI really ran
    if args[0] == "tools" and args[1] == "call":
        assert "services.execution.tool_domains.dispatch" in modules
        assert json.loads(proc.stdout)["ok"] is (expected_code == 0)
    assert forbidden_in(modules) == []


# What validating the settings imports: the settings model and the library it is made with.
SETTINGS_MODULES = ("services.settings", "pydantic", "pydantic_core")


def settings_modules_in(modules: set[str]) -> list[str]:
    return sorted(m for m in modules
                  if any(m == s or m.startswith(s + ".") for s in SETTINGS_MODULES))


@pytest.mark.parametrize(("args", "expected_code"), [
    (("--help",), 0),
    ((), 2),  # ``studio`` alone prints the same page, and exits 2 (click's no_args_is_help)
], ids=["help", "no-arguments"])
def test_the_top_level_help_page_reads_no_settings(tmp_path: Path, args: tuple[str, ...],
                                                   expected_code: int) -> None:
    """The page lists the commands from a table: neither the settings nor pydantic are
    imported to draw it."""
    proc, modules = loaded_modules(tmp_path, *args)
    assert proc.returncode == expected_code, proc.stderr
    assert "Commands" in proc.stdout  # the page was drawn
    assert settings_modules_in(modules) == []


@pytest.mark.parametrize("args", [
    ("tools", "list"),
    ("worker", "--help"),  # a command's own page still validates the settings first
], ids=["tools-list", "worker-help"])
def test_every_other_command_line_validates_the_settings(tmp_path: Path,
                                                         args: tuple[str, ...]) -> None:
    """Positive control of the check above: these do import the settings and pydantic."""
    proc, modules = loaded_modules(tmp_path, *args)
    assert proc.returncode == 0, proc.stderr
    assert "services.settings" in settings_modules_in(modules)
    assert "pydantic" in settings_modules_in(modules)


# The modules of services.cli that only declare commands (and run them); the entry point and its
# helpers (main, lazy_group, config_errors) are not in the list.
COMMAND_MODULES = (
    "run", "demo", "execute", "review", "flowchart_node", "runtime_settings", "providers", "api",
    "worker", "tools", "db", "integrations", "executions", "mcp", "tokens", "triggers", "teams",
    "evals",
)


def command_modules_in(modules: set[str]) -> list[str]:
    return sorted(name for name in COMMAND_MODULES if f"services.cli.{name}" in modules)


@pytest.mark.parametrize(("args", "expected"), [
    (("--help",), []),
    (("tools", "list"), ["tools"]),
    (("tools", "call", "workspace.list_dir", "--workspace", "{ws}"), ["tools"]),
    (("settings", "list"), ["runtime_settings"]),  # the check can fail: a command is imported
], ids=["help", "tools-list", "tools-call", "settings-list"])
def test_a_command_imports_only_its_own_module(tmp_path: Path, workspace: Path,
                                               args: tuple[str, ...], expected: list[str]) -> None:
    proc, modules = loaded_modules(tmp_path, *(a.replace("{ws}", str(workspace)) for a in args))
    assert proc.returncode == 0, proc.stderr
    assert command_modules_in(modules) == expected


def test_help_still_lists_every_command(tmp_path: Path) -> None:
    proc, _ = loaded_modules(tmp_path, "--help")
    for command, help_start in [
        ("run", "Run the agent loop"), ("demo", "Run the whole pipeline"),
        ("execute", "Run (or resume)"), ("killswitch", "Engage (on)"),
        ("providers", "Print the capability"), ("api", "Serve the HTTP API"),
        ("worker", "Consume node executions"), ("tools", "List and call"),
        ("db", "Database schema"), ("settings", "Runtime settings"),
        ("integrations", "External services"), ("executions", "Node executions"),
        ("tokens", "API tokens"),
    ]:
        assert any(line.split("│")[1:2] and line.split("│")[1].split()[:1] == [command]
                   and help_start in line for line in proc.stdout.splitlines()), command


def test_a_database_command_still_loads_the_database(tmp_path: Path) -> None:
    """The check above can fail: a command that uses the database does import SQLAlchemy."""
    proc, modules = loaded_modules(tmp_path, "settings", "list")
    assert proc.returncode == 0, proc.stderr
    assert "sqlalchemy" in forbidden_in(modules)


RUN_PATH = """
import json, sys
from services.cli.run import run_command  # noqa: F401
from services.runs.request import ExecutionRequest  # noqa: F401
from services.runs.service import ExecutionService  # noqa: F401
from services.execution.providers.profiles import PROFILES  # noqa: F401
print(json.dumps(sorted(sys.modules)))
"""


def test_the_run_path_loads_no_sdk_it_does_not_call_before_the_model() -> None:
    """What ``studio run`` / ``studio execute`` import before their first model call: not the
    Claude Agent SDK (and its MCP client) for a codex run, not PyGithub (finalize), not Alembic
    (a database at head), not cryptography (a stored token)."""
    proc = subprocess.run([sys.executable, "-c", RUN_PATH], capture_output=True, text=True,
                          timeout=120, check=True)
    modules = set(json.loads(proc.stdout))
    late = ("claude_agent_sdk", "mcp", "mcp_types", "github", "alembic", "cryptography")
    assert sorted(m for m in modules if any(m == f or m.startswith(f + ".") for f in late)) == []


def matching(modules: set[str], names: tuple[str, ...]) -> list[str]:
    """The modules of ``modules`` that are one of ``names`` or inside one of them."""
    return sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in names))


# What dispatching to a broker loads: Celery, and the worker's task bodies behind the dispatcher
# (admission, executors, the reaper). A command that resumes an execution needs them only when
# STUDIO_BROKER_URL is set; without one it says how to resume the execution instead.
BROKER_SIDE = ("celery", "kombu", "services.worker.dispatch", "services.worker.handlers",
               "services.worker.flowchart_tasks", "services.runs.reaper", "services.executors")
UNKNOWN_ID = "00000000-0000-4000-8000-000000000000"


@pytest.mark.parametrize(("args", "expected_code"), [
    (("executions", "approve", UNKNOWN_ID, UNKNOWN_ID), 1),
    (("executions", "deny", UNKNOWN_ID, UNKNOWN_ID), 1),
    (("executions", "retry", UNKNOWN_ID), 1),
    (("executions", "discard", UNKNOWN_ID), 1),
    (("killswitch", "off"), 0),
], ids=["approve", "deny", "retry", "discard", "killswitch-off"])
def test_without_a_broker_nothing_of_the_broker_side_is_imported(
        tmp_path: Path, args: tuple[str, ...], expected_code: int) -> None:
    proc, modules = loaded_modules(tmp_path, *args)
    assert proc.returncode == expected_code, proc.stderr
    assert "services.db.session" in modules  # the command got as far as the database
    assert matching(modules, BROKER_SIDE) == []


def test_with_a_broker_the_dispatcher_is_imported(tmp_path: Path) -> None:
    """Positive control of the check above: with a broker (nothing paused, so nothing is sent
    and the broker is never reached), ``killswitch off`` does load the dispatcher."""
    proc, modules = loaded_modules(tmp_path, "killswitch", "off",
                                   STUDIO_BROKER_URL="redis://127.0.0.1:1/0")
    assert proc.returncode == 0, proc.stderr
    assert {"celery", "services.worker.dispatch"} <= set(matching(modules, BROKER_SIDE))


POSTGRESQL_DIALECT = ("sqlalchemy.dialects.postgresql", "psycopg")


@pytest.mark.parametrize("args", [
    ("executions", "list", "--json"),
    ("executions", "show", UNKNOWN_ID, "--json"),
    ("settings", "get", "max_iterations"),
    ("teams", "list", "--json"),
], ids=["executions-list", "executions-show", "settings-get", "teams-list"])
def test_a_sqlite_database_loads_no_postgresql_dialect(tmp_path: Path,
                                                       args: tuple[str, ...]) -> None:
    """On an embedded database at head (migrating one runs migration scripts that do use
    PostgreSQL's types)."""
    write_migrated_sqlite(tmp_path / "data" / "studio.db")
    proc, modules = loaded_modules(tmp_path, *args)
    assert proc.returncode == (1 if args[1] == "show" else 0), proc.stderr
    assert "sqlalchemy.dialects.sqlite" in modules  # the control: SQLite's dialect is there
    assert matching(modules, POSTGRESQL_DIALECT) == []


def test_a_postgresql_database_loads_its_dialect(tmp_path: Path, postgres_url: str) -> None:
    """Positive control of the check above: the same command on PostgreSQL loads the dialect
    (the engine loads it itself)."""
    proc, modules = loaded_modules(tmp_path, "executions", "list", "--json",
                                   STUDIO_DATABASE_URL=postgres_url)
    assert proc.returncode == 0, proc.stderr
    assert "sqlalchemy.dialects.postgresql.psycopg" in modules


# What only the legacy runtime (a provider's own agent CLI) loads.
LEGACY_RUNTIME = ("services.runs.legacy_runtime", "services.execution.legacy", "h11")


def test_a_loop_run_loads_no_legacy_runtime(tmp_path: Path, workspace: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": [
        {"tool_calls": [{"tool": "workspace.list_dir", "args": {"path": "."}}]},
        {"final": "done"}]}))
    proc, modules = loaded_modules(tmp_path, "run", "list it", "--workspace", str(workspace),
                                   "--provider", "replay", "--script", str(script), "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.splitlines()[-1])["outcome"] == "finished"
    assert "services.runs.loop" in modules  # the control: the loop ran
    assert matching(modules, LEGACY_RUNTIME) == []
