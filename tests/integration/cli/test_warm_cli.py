"""The warm CLI launcher (:mod:`tests.support.warm_cli`): a child forked by the zygote is what a
fresh interpreter is, for the ``studio`` commands and for the launcher's probe
(:mod:`tests.support.warm_cli_probe`), which shows what the commands do not: argv, ``sys.path``,
environment, working directory, stdin, process group, signal handlers, ``/proc/<pid>/cmdline``,
threads, ``atexit``, signal deaths and exit codes.

Each comparison runs the same command twice, once forked (``Popen.forked`` is true: the witness
that the zygote ran it, not a fallback) and once as :class:`subprocess.Popen` does it (a fresh
interpreter: the control), and asserts the same output and exit code. These tests fail on main,
where the launcher does not exist.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests import timings
from tests.integration.celery_fixtures import processes_running, writable_memory
from tests.integration.databases import write_migrated_sqlite
from tests.support import warm_cli

STUDIO = [sys.executable, "-m", "services.cli"]
PROBE = [sys.executable, "-m", "tests.support.warm_cli_probe"]
ROOT = warm_cli.PROJECT_ROOT


@pytest.fixture(autouse=True)
def _launcher_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are of the launcher: on even when the suite runs with it off."""
    monkeypatch.delenv(warm_cli.SWITCH, raising=False)


def _both(argv: list[str], env: dict[str, str], *, cwd: Path = ROOT,
          **kwargs: Any) -> tuple[tuple[int, Any, Any], tuple[int, Any, Any]]:
    """``(code, stdout, stderr)`` of ``argv`` forked by the zygote, then exec'ed fresh."""
    results = []
    for launcher in (warm_cli.Popen, subprocess.Popen):
        with launcher(argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                      text=True, **kwargs) as process:
            out, err = process.communicate(timeout=120)
            assert getattr(process, "forked", False) is (launcher is warm_cli.Popen)
        results.append((process.returncode, out, err))
    return results[0], results[1]


def _env(tmp_path: Path, **values: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(warm_cli.NOT_INHERITED)}
    env.update(HOME=str(tmp_path / "home"), STUDIO_DATA_DIR=str(tmp_path / "data"), **values)
    return env


@pytest.mark.parametrize("form", ["module", "console-script"])
@pytest.mark.parametrize(("args", "code"), [
    (["--help"], 0), (["settings", "--help"], 0), (["executions", "list", "--json"], 0),
    (["settings", "set", "max_iterations", "lots"], 2), (["no-such-command"], 2)],
    ids=["help", "group-help", "db-list", "bad-value", "usage-error"])
def test_a_studio_command_forked_is_the_command_exec_ed(tmp_path: Path, args: list[str],
                                                        code: int, form: str) -> None:
    database = tmp_path / "studio.db"
    write_migrated_sqlite(database)
    env = _env(tmp_path, STUDIO_DATABASE_URL=f"sqlite:///{database}")
    program = STUDIO if form == "module" else [warm_cli.CONSOLE_SCRIPT]
    warm, fresh = _both([*program, *args], env)
    assert warm == fresh
    assert fresh[0] == code, fresh


def test_a_configuration_error_and_a_crash_print_the_same_lines(tmp_path: Path) -> None:
    """A ``STUDIO_*`` value that does not validate (one line, exit 2) and an uncaught exception
    (a traceback from where a fresh interpreter's starts, exit 1)."""
    one_line, _ = warm_fresh = _both([*STUDIO, "executions", "list"],
                                     _env(tmp_path, STUDIO_SANDBOX="sometimes"))
    assert warm_fresh[0] == warm_fresh[1] and one_line[0] == 2 and "STUDIO_SANDBOX" in one_line[2]
    crash, fresh = _both([*PROBE, "raise"], _env(tmp_path))
    assert crash == fresh and crash[0] == 1
    assert crash[2].splitlines()[1].startswith('  File "<frozen runpy>"')  # not the zygote's
    assert "the probe raised" in crash[2] and "warm_cli_server" not in crash[2]


def test_the_probe_finds_the_same_process_forked_and_exec_ed(tmp_path: Path) -> None:
    env = _env(tmp_path, WARM_CLI_ONLY_HERE="1")
    (code, out, err), fresh = _both([*PROBE, "report", "--stdin"], env,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
    assert (code, err) == (fresh[0], fresh[2]) == (0, "")
    warm, control = json.loads(out), json.loads(fresh[1])
    assert warm == control
    assert warm["environ"] == env  # exactly the request's: nothing of the zygote's
    assert warm["cmdline"] == [*PROBE, "report", "--stdin"]
    assert warm["path0"] == str(ROOT) and warm["main"] == "__main__"
    assert warm["leader"] and warm["session"] and warm["fds"][:3] == [0, 1, 2]
    assert "default_int_handler" in warm["handlers"]["SIGINT"]
    assert warm["handlers"]["SIGCHLD"] == "<Handlers.SIG_DFL: 0>"


def test_a_variable_of_one_request_is_in_no_later_one_nor_in_the_zygote(tmp_path: Path) -> None:
    secret = f"warm-cli-secret-{uuid.uuid4().hex}"
    first = warm_cli.run([*PROBE, "report"], env=_env(tmp_path, WARM_CLI_SECRET=secret),
                         capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(first.stdout)["environ"]["WARM_CLI_SECRET"] == secret  # positive control
    second = warm_cli.run([*PROBE, "report"], env=_env(tmp_path), capture_output=True,
                          text=True, timeout=120, check=True)
    assert "WARM_CLI_SECRET" not in json.loads(second.stdout)["environ"]
    zygote = warm_cli.zygote()
    assert zygote is not None
    assert secret.encode() not in Path(f"/proc/{zygote.process.pid}/environ").read_bytes()
    assert secret.encode() not in writable_memory(zygote.process.pid)
    # the settings of one command are not the next one's: an invalid level, then none
    bad = warm_cli.run([*STUDIO, "executions", "list"],
                       env=_env(tmp_path, STUDIO_SANDBOX="sometimes"), capture_output=True,
                       text=True, timeout=120)
    good = warm_cli.run([*STUDIO, "executions", "list"], env=_env(tmp_path),
                        capture_output=True, text=True, timeout=120)
    assert (bad.returncode, good.returncode) == (2, 0), good.stderr


def test_cwd_and_stdin_are_the_request_s(tmp_path: Path) -> None:
    (tmp_path / "here").mkdir()
    with warm_cli.Popen([*PROBE, "report", "--stdin"], env=_env(tmp_path), cwd=tmp_path / "here",
                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as process:
        out, _ = process.communicate("what the test wrote\n", timeout=120)
    assert process.forked and process.returncode == 0
    seen = json.loads(out)
    assert seen["cwd"] == str(tmp_path / "here") and seen["stdin"] == "what the test wrote\n"
    # a relative data directory is the request's directory's (the embedded SQLite database)
    done = warm_cli.run([*STUDIO, "settings", "set", "max_iterations", "7"], cwd=tmp_path / "here",
                        env={**_env(tmp_path), "STUDIO_DATA_DIR": "data"}, capture_output=True,
                        text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "here" / "data").is_dir()


@pytest.mark.parametrize("stop", ["terminate", "kill", "SIGTERM", "SIGINT"])
def test_a_signal_death_is_a_negative_returncode(tmp_path: Path, stop: str) -> None:
    codes = []
    for launcher in (warm_cli.Popen, subprocess.Popen):
        if stop.startswith("SIG"):  # the child signals itself
            process = launcher([*PROBE, "kill", stop], env=_env(tmp_path), cwd=ROOT)
        else:
            process = launcher([*PROBE, "sleep", uuid.uuid4().hex], env=_env(tmp_path), cwd=ROOT)
            assert process.poll() is None
            getattr(process, stop)()
        codes.append(process.wait(60))
    expected = {"terminate": -signal.SIGTERM, "kill": -signal.SIGKILL, "SIGTERM": -signal.SIGTERM,
                "SIGINT": -signal.SIGINT}[stop]  # SIGINT: KeyboardInterrupt, then the signal
    assert codes == [expected, expected]


def test_a_timeout_kills_the_child_and_raises_timeout_expired(tmp_path: Path) -> None:
    nonce = uuid.uuid4().hex
    with pytest.raises(subprocess.TimeoutExpired):
        warm_cli.run([*PROBE, "sleep", nonce], env=_env(tmp_path), cwd=ROOT, timeout=1)
    assert processes_running("sleep", nonce) == []


def test_threads_are_joined_and_atexit_handlers_run(tmp_path: Path) -> None:
    warm, fresh = _both([*PROBE, "thread"], _env(tmp_path))
    assert warm == fresh == (0, "main returns\nthread finished\n", "")
    warm, fresh = _both([*PROBE, "atexit", "3"], _env(tmp_path))
    assert warm == fresh == (3, "atexit ran\n", "")


def test_the_zygote_holds_no_settings_no_thread_and_reads_what_it_reports() -> None:
    zygote = warm_cli.zygote()
    assert zygote is not None
    ready = zygote.ready
    assert ready["settings_calls"] == 0 and ready["threads"] == 1 and ready["warnings"] == []
    assert "*" not in zygote.read and "HOME" not in zygote.read  # (a virtual environment)
    assert ready["modules"] > 1000  # the imports it is there for
    # studio reads its settings when a command runs, never as it is imported (a library's
    # import-time reads, OPENAI_LOG say, are compared by the client: a request that differs
    # on one is exec'ed fresh)
    assert not [name for name in zygote.read if name.startswith("STUDIO_")]
    environment = Path(f"/proc/{zygote.process.pid}/environ").read_bytes()
    assert b"STUDIO_" not in environment.replace(b"STUDIO_TEST_", b"")


def test_the_warm_child_s_cpu_is_counted(tmp_path: Path) -> None:
    """The zygote reports the CPU of the child it reaped, and ``STUDIO_TEST_TIMINGS`` (its
    children's column) adds it: this process never reaps a forked child itself."""
    zygote = warm_cli.zygote()
    before, (_, timed_before) = warm_cli.children_cpu(), timings._cpu()
    with warm_cli.Popen([*STUDIO, "--help"], env=_env(tmp_path),
                        stdout=subprocess.DEVNULL) as process:
        process.wait(120)
    reported, (_, timed) = warm_cli.children_cpu() - before, timings._cpu()
    assert zygote is not None and process.forked and reported > 0
    assert timed - timed_before >= reported


def test_switched_off_or_unlike_the_zygote_the_command_is_exec_ed_fresh(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = _env(tmp_path)
    different = {**env, "PYTHONHASHSEED": "123"}  # the interpreter reads it as it starts
    for argv, environment in (([*STUDIO, "--help"], different), ([sys.executable, "-c", "0"], env)):
        with warm_cli.Popen(argv, env=environment, stdout=subprocess.PIPE, text=True) as process:
            process.communicate(timeout=120)
        assert not process.forked and process.returncode == 0
    monkeypatch.setenv(warm_cli.SWITCH, "0")
    done = warm_cli.run([*STUDIO, "--help"], env=env, capture_output=True, text=True, timeout=120)
    with warm_cli.Popen([*STUDIO, "--help"], env=env, stdout=subprocess.DEVNULL) as process:
        process.wait(120)
    assert not process.forked and done.returncode == 0 and "Commands" in done.stdout
