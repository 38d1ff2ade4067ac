"""Operators' configuration is input too: hostile ``STUDIO_*`` values get one line, exit 2.

Each case runs a real ``studio`` command with a value that cannot work (a URL that is garbage,
names a driver or transport that does not exist, or a server on a closed 127.0.0.1 port; a
setting of the wrong type or outside its enum) and asserts: exit code 2, exactly one line on
stderr, the variable named in it, no traceback, and the password of the URL nowhere in the
output.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import warm_cli

STUDIO = [sys.executable, "-m", "services.cli"]
SECRET = "Hunter2Secret-9f8e7d"


def _closed_port() -> int:
    """A 127.0.0.1 port nothing listens on (bound once, then closed)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _env(tmp_path: Path, **values: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("STUDIO_", "OPENAI_", "ANTHROPIC_", "GEMINI_", "GOOGLE_"))}
    env.update(STUDIO_DATA_DIR=str(tmp_path / "data"), HOME=str(tmp_path),
               STUDIO_WORKSPACE_DIR=str(tmp_path / "workspaces"), **values)
    return env


def _studio(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return warm_cli.run([*STUDIO, *args], env=env, capture_output=True, text=True,
                        timeout=180, check=False, stdin=subprocess.DEVNULL)


def _assert_one_line(done: subprocess.CompletedProcess[str], variable: str,
                     *expected: str) -> str:
    output = done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, output
    assert len(lines) == 1, output
    assert "Traceback" not in output, output
    assert SECRET not in output, output
    line = lines[0]
    assert variable in line, line
    for part in expected:
        assert part in line, line
    return line


PORT = _closed_port()
BAD_DATABASE_URLS = {
    "garbage": ("not a URL at all", "not a database URL"),
    "unknown-driver": (f"nosuchdriver://studio:{SECRET}@127.0.0.1/studio",
                       "unknown database driver 'nosuchdriver'"),
    "unreachable": (f"postgresql://studio:{SECRET}@127.0.0.1:{PORT}/studio",
                    f"cannot connect to postgresql://studio:***@127.0.0.1:{PORT}/studio"),
    "port-not-a-number": (f"postgresql://studio:{SECRET}@127.0.0.1:fivefour/studio",
                          "not a database URL (its port is not a number"),
}
# Commands that touch the database; ``worker``/``reaper`` get a broker (never reached: the
# database is checked first).
DATABASE_COMMANDS = {
    "settings-get": ["settings", "get", "max_iterations"],
    "killswitch": ["killswitch", "off"],
    "executions-list": ["executions", "list"],
    "db-upgrade": ["db", "upgrade"],
    "execute": ["execute", "00000000-0000-4000-8000-000000000000"],
    "worker": ["worker"],
    "reaper": ["reaper"],
    "api": ["api", "--port", "0"],
}


# Every command goes through the same classifier: every URL for two commands, an unreachable
# server for all of them.
DATABASE_CASES = sorted(
    {(case, command) for case in BAD_DATABASE_URLS for command in ("settings-get", "worker")}
    | {("unreachable", command) for command in DATABASE_COMMANDS}
    | {("garbage", command) for command in ("db-upgrade", "api")})


@pytest.mark.parametrize(("case", "command"), DATABASE_CASES)
def test_a_database_url_that_does_not_work_is_one_line_exit_2(
        tmp_path: Path, case: str, command: str) -> None:
    url, expected = BAD_DATABASE_URLS[case]
    env = _env(tmp_path, STUDIO_DATABASE_URL=url,
               STUDIO_BROKER_URL=f"redis://127.0.0.1:{PORT}/0")
    _assert_one_line(_studio(env, *DATABASE_COMMANDS[command]), "STUDIO_DATABASE_URL", expected)


@pytest.mark.parametrize(("command", "url", "expected"), [
    (["worker"], f"redis://:{SECRET}@127.0.0.1:{PORT}/0",
     f"cannot connect to redis://:***@127.0.0.1:{PORT}/0"),
    (["reaper"], f"redis://:{SECRET}@127.0.0.1:{PORT}/0",
     f"cannot connect to redis://:***@127.0.0.1:{PORT}/0"),
    (["api", "--port", "0"], f"amqp://studio:{SECRET}@127.0.0.1:{PORT}//",
     f"cannot connect to amqp://studio:***@127.0.0.1:{PORT}//"),
    (["worker"], f"bogus://studio:{SECRET}@127.0.0.1:{PORT}/0",
     "unknown broker transport 'bogus'"),
], ids=["worker-redis", "reaper-redis", "api-amqp", "worker-bogus"])  # PORT varies per process
def test_a_broker_url_that_does_not_work_is_one_line_exit_2(
        tmp_path: Path, command: list[str], url: str, expected: str) -> None:
    env = _env(tmp_path, STUDIO_BROKER_URL=url)  # the embedded database works
    _assert_one_line(_studio(env, *command), "STUDIO_BROKER_URL", expected)


@pytest.mark.parametrize(("variable", "value", "expected"), [
    ("STUDIO_SANDBOX", "sometimes", "Input should be 'auto'"),
    ("STUDIO_SANDBOX", "sometimes", "(got 'sometimes')"),  # a plain value is shown
    ("STUDIO_SANDBOX_MEMORY_MB", "lots", "valid integer"),
    ("STUDIO_RETENTION_DAYS", "-3", "greater than or equal to 1"),
    ("STUDIO_EXECUTOR", "mainframe", "Input should be 'local' or 'kubernetes'"),
    ("STUDIO_KUBE_NODE_SELECTOR", "{" + SECRET, "not JSON"),
])
def test_a_setting_that_does_not_validate_is_one_line_exit_2(
        tmp_path: Path, variable: str, value: str, expected: str) -> None:
    for command in (["settings", "list"], ["worker"]):
        env = _env(tmp_path, **{variable: value})
        line = _assert_one_line(_studio(env, *command), variable, expected)
        assert line.startswith("studio: invalid configuration: ")


def test_several_bad_settings_are_named_on_the_same_line(tmp_path: Path) -> None:
    env = _env(tmp_path, STUDIO_SANDBOX="sometimes", STUDIO_API_MAX_BODY_BYTES="huge")
    line = _assert_one_line(_studio(env, "executions", "list"), "STUDIO_SANDBOX")
    assert "STUDIO_API_MAX_BODY_BYTES" in line


@pytest.mark.parametrize(("key", "value", "expected"), [
    ("max_iterations", "lots", "max_iterations expects a int"),
    ("killswitch_engaged", "maybe", "killswitch_engaged expects a bool"),
    ("lease_ttl_s", "[1]", "lease_ttl_s expects a float"),
])
def test_a_runtime_setting_of_the_wrong_type_is_one_line_exit_2(
        tmp_path: Path, key: str, value: str, expected: str) -> None:
    done = _studio(_env(tmp_path), "settings", "set", key, value)
    _assert_one_line(done, key, expected)


@pytest.mark.parametrize(("args", "expected_code"), [(("--help",), 0), ((), 2)],
                         ids=["help", "no-arguments"])
def test_the_top_level_help_page_is_shown_whatever_the_settings(
        tmp_path: Path, args: tuple[str, ...], expected_code: int) -> None:
    """``studio --help`` (and ``studio`` alone) list the commands without reading a setting:
    an invalid ``STUDIO_*`` does not hide them; the first command names the variable."""
    env = _env(tmp_path, STUDIO_SANDBOX="sometimes")
    done = _studio(env, *args)
    assert done.returncode == expected_code, done.stderr
    assert "Commands" in done.stdout and "invalid configuration" not in done.stderr
    line = _assert_one_line(_studio(env, "tools", "list"), "STUDIO_SANDBOX",
                            "(got 'sometimes')")  # control: the same environment, a command
    assert line.startswith("studio: invalid configuration: ")
