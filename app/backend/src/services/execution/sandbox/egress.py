"""A bubblewrap sandbox whose only way out is the egress proxy (the setup phase, and the agent
phase of an execution that chose ``network: "allowlist"``).

Each command runs in a per-command ``bwrap`` with the usual namespaces (its network namespace
has only a loopback interface) plus:

* the proxy's directory (its unix socket and a copy of :mod:`~services.execution.network.relay`)
  bound read-only at :data:`EGRESS_DIR`; the command runs under the relay, which listens on
  ``127.0.0.1:RELAY_PORT`` of the sandbox and carries each connection to the proxy;
* ``HTTP_PROXY``/``HTTPS_PROXY`` (both spellings) and ``npm_config_proxy``/``https-proxy``
  naming the relay, so ordinary tools use it; a tool that does not simply has no network;
* in the setup phase only, the dependency cache of the command's writer (when there is one,
  :mod:`services.repos.dependency_caches`; :meth:`EgressSandbox.using_cache`) bound read-write
  at :data:`CACHE_DIR`, with ``PIP_CACHE_DIR``, ``npm_config_cache`` and ``XDG_CACHE_HOME``
  pointing into it. The agent phase's sandbox has none.

Only bubblewrap can give a command a network namespace of its own: under Landlock or without a
sandbox a command shares the harness's network, so an allowlist could not be enforced and
:func:`egress_sandbox` refuses (``sandbox_unavailable``).
"""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from services.execution.errors import ErrorCode, ToolFailure
from services.execution.network import relay as relay_module
from services.execution.network.proxy import EgressProxy
from services.execution.ports import CommandSandbox, PreparedCommand
from services.execution.sandbox.layout import sandbox_python
from services.execution.sandbox.selection import BwrapSandbox

EGRESS_DIR = "/run/studio-egress"
CACHE_DIR = "/run/studio-cache"
RELAY_PORT = 3128
SOCKET_NAME = "proxy.sock"
RELAY_NAME = "relay.py"
MAX_LABEL = 500


def proxy_environment(*, cache: bool) -> dict[str, str]:
    """The variables that send ordinary tools through the relay (and into the cache)."""
    url = f"http://127.0.0.1:{RELAY_PORT}"
    env = {name: url for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy",
                                  "npm_config_proxy", "npm_config_https_proxy")}
    env["NO_PROXY"] = env["no_proxy"] = ""
    if cache:
        env.update(PIP_CACHE_DIR=f"{CACHE_DIR}/pip", npm_config_cache=f"{CACHE_DIR}/npm",
                   XDG_CACHE_HOME=f"{CACHE_DIR}/xdg")
    return env


class EgressSandbox:
    """:class:`~services.execution.ports.CommandSandbox` of commands that reach the network
    only through ``proxy`` (see the module docstring)."""

    def __init__(self, base: BwrapSandbox, proxy: EgressProxy, cache_dir: Path | None) -> None:
        self.base = base
        self.proxy = proxy
        self.cache_dir = cache_dir
        directory = proxy.socket_path.parent
        relay = directory / RELAY_NAME
        if not relay.exists():
            relay.write_bytes(Path(relay_module.__file__).read_bytes())
        self.directory = directory

    def using_cache(self, cache_dir: Path | None) -> EgressSandbox:
        """The same sandbox (same proxy) with ``cache_dir`` bound in instead."""
        return EgressSandbox(self.base, self.proxy, cache_dir)

    @property
    def mode(self) -> str:
        return self.base.mode

    def session(self, workspace: Path, notify: Callable[[str, str], None]
                ) -> contextlib.AbstractContextManager[CommandSandbox]:
        """Itself: each command gets its own ``bwrap`` (and relay)."""
        return contextlib.nullcontext(self)

    def prepare(
        self, argv: Sequence[str], *, workspace: Path, cwd: Path, env: Mapping[str, str]
    ) -> PreparedCommand:
        self.proxy.label = shlex.join(argv)[:MAX_LABEL]
        inner = {**env, **proxy_environment(cache=self.cache_dir is not None)}
        extra = ["--ro-bind", str(self.directory), EGRESS_DIR]
        if self.cache_dir is not None:
            extra += ["--bind", str(self.cache_dir), CACHE_DIR]
        wrapped = [sandbox_python(), "-I", "-S", f"{EGRESS_DIR}/{RELAY_NAME}",
                   f"{EGRESS_DIR}/{SOCKET_NAME}", str(RELAY_PORT), "--", *argv]
        return self.base.prepare(wrapped, workspace=workspace, cwd=cwd, env=inner,
                                 extra_args=extra)


def egress_sandbox(base: CommandSandbox | None, proxy: EgressProxy,
                   cache_dir: Path | None) -> EgressSandbox:
    """The egress sandbox over this process's sandbox; refuses one that cannot enforce it."""
    if not isinstance(base, BwrapSandbox):
        mode = base.mode if base is not None else "none"
        raise ToolFailure(
            ErrorCode.SANDBOX_UNAVAILABLE,
            f"controlled network (the setup phase, network \"allowlist\") needs the bubblewrap "
            f"sandbox; this process's sandbox is {mode!r}, which cannot keep a command's "
            "network to the allowlist", details={"sandbox": mode})
    return EgressSandbox(base, proxy, cache_dir)
