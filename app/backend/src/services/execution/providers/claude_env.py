"""The environment the Claude Code CLI runs in: an explicit allowlist, and a launcher enforcing it.

The Claude Agent SDK starts the CLI with the *whole* parent environment merged under
``ClaudeAgentOptions.env`` (``subprocess_cli.py``: ``{**os.environ, ..., **options.env}``); entries
can be overridden but never removed. A worker's environment holds other secrets (a GitHub token,
other providers' keys, the database URL), so the engine hands the SDK a small launcher as
``cli_path``: a Python script (run ``-I -S``) that keeps only the names it was written with and
``execve``\\ s the real CLI, so the CLI process never sees anything else. Values only ever travel in
the environment, never in argv or in a file.

:func:`claude_env_from` is what the composition root calls on ``os.environ``; the engine itself
never reads the process environment.
"""

from __future__ import annotations

import importlib.util
import os
import stat
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from services.execution.providers import cloud_auth

#: Names taken from the composition root's environment whatever the auth mode: proxies, TLS
#: trust, process basics. The auth mode's own variables (:mod:`.cloud_auth`) are added to these.
BASE_ENV: frozenset[str] = frozenset(
    {
        # network plumbing
        "HTTPS_PROXY",
        "HTTP_PROXY",
        "NO_PROXY",
        "https_proxy",
        "http_proxy",
        "no_proxy",
        "NODE_EXTRA_CA_CERTS",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        # harmless process basics
        "PATH",
        "LANG",
        "LC_ALL",
        "TZ",
    }
)

#: Every name the CLI may be given, over all auth modes.
ALLOWED_ENV: frozenset[str] = BASE_ENV | frozenset(
    name for mode in cloud_auth.MODES["claude"].values() for name in mode.names)

#: Set on every run, whatever the composition root passed.
FIXED_ENV: Mapping[str, str] = {
    # the only switch that stops the connectivity probe, title generation and vendor DNS lookups
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    # every tool schema goes to the model up front: deferred tools need the built-in ToolSearch
    "ENABLE_TOOL_SEARCH": "false",
}

#: Read by CLI 2.1.x (``CLAUDE_CODE_MAX_RETRIES``, default 10, clamped by the CLI).
MAX_RETRIES_ENV = "CLAUDE_CODE_MAX_RETRIES"

#: What the SDK itself sets for its wire protocol with the CLI; the launcher keeps these too.
SDK_PROTOCOL_ENV: frozenset[str] = frozenset(
    {
        "CLAUDE_CODE_ENTRYPOINT",
        "CLAUDE_AGENT_SDK_VERSION",
        "CLAUDE_CODE_SDK_READS_SESSION_STATE",
        "CLAUDE_AGENT_SDK_CLIENT_APP",
        "CLAUDE_AGENT_SDK_DERIVED_CLIENT_APP",
        "CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING",
        "PWD",
        "TRACEPARENT",
        "TRACESTATE",
    }
)

DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"

_LAUNCHER = """#!{python} -IS
# Written by services.execution.providers.claude_env: start the Claude Code CLI with only the
# environment variables named below (the SDK passes the parent's whole environment).
import os
import sys

KEEP = frozenset({keep!r})
REAL = {real!r}
os.execve(REAL, [REAL, *sys.argv[1:]], {{k: v for k, v in os.environ.items() if k in KEEP}})
"""


def claude_env_from(
    environ: Mapping[str, str], mode: cloud_auth.AuthMode | None = None
) -> dict[str, str]:
    """The base allowlist and the variables of the auth ``mode`` (default: the API key) found in
    ``environ``, plus the fixed switches (no config dir yet)."""
    env = {k: v for k, v in environ.items() if k in BASE_ENV}
    env.update(cloud_auth.mode_environment(mode or cloud_auth.auth_mode("claude", None), environ))
    env.update(FIXED_ENV)
    return env


def bundled_cli_path() -> Path:
    """The Claude Code CLI shipped inside the claude-agent-sdk wheel (found without importing
    the SDK: it brings the MCP client, about 1 s of imports, to every run that imports this
    module)."""
    spec = importlib.util.find_spec("claude_agent_sdk")
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError("claude_agent_sdk is not installed", name="claude_agent_sdk")
    return Path(spec.origin).parent / "_bundled" / "claude"


def session_env(
    base: Mapping[str, str],
    *,
    config_dir: Path,
    home: Path,
    api_key: str | None,
    base_url: str | None,
    max_retries: int,
) -> dict[str, str]:
    """The full environment of one CLI run: allowlist, fixed switches, per-run directories.

    ``base`` was chosen for the run's auth mode by :func:`claude_env_from`; here it is only
    held to the names some mode may use."""
    env = {k: v for k, v in base.items() if k in ALLOWED_ENV}
    env.update(FIXED_ENV)
    if api_key is not None:
        env["ANTHROPIC_API_KEY"] = api_key
    if base_url is not None:
        env["ANTHROPIC_BASE_URL"] = base_url
    env.setdefault("PATH", DEFAULT_PATH)
    env["CLAUDE_CONFIG_DIR"] = str(config_dir)
    # the real home may hold ~/.claude settings or credentials: the CLI gets an empty one
    env["HOME"] = str(home)
    env[MAX_RETRIES_ENV] = str(max_retries)
    return env


def write_launcher(path: Path, *, real_cli: Path, keep: Iterable[str], python: str) -> Path:
    """Write the launcher script at ``path`` (mode 0700) and return it."""
    if any(ch.isspace() for ch in python):
        raise ValueError(f"interpreter path {python!r} cannot go on a shebang line")
    names = sorted(set(keep) | SDK_PROTOCOL_ENV)
    path.write_text(_LAUNCHER.format(python=python, keep=names, real=str(real_cli)))
    path.chmod(stat.S_IRWXU)
    return path


def default_python() -> str:
    """The interpreter that runs the launcher (this one)."""
    return sys.executable or os.path.realpath("/proc/self/exe")
