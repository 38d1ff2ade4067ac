"""What an execution asks of its setup phase and network, checked as untrusted input.

Three fields of an :class:`~services.runs.request.ExecutionRequest` (the API body, ``studio run
--setup/--network/--allow-host``, a flowchart agent node's config):

* ``setup``: shell command lines run after provisioning and before the model gets control
  (:mod:`services.runs.setup_phase`); at most :data:`MAX_SETUP_COMMANDS`, each at most
  :data:`MAX_COMMAND_CHARS` characters, no NUL;
* ``network``: ``"offline"`` (the default: agent commands have no network) or ``"allowlist"``
  (agent commands reach the allowlisted hosts through the egress proxy, like setup commands);
* ``network_allowlist``: host names or ``.suffix`` entries added to the deployment's
  ``STUDIO_SETUP_ALLOWLIST`` for this execution (never addresses: only the deployment may open
  a loopback or private address, :mod:`services.execution.network.allowlist`).
"""

from __future__ import annotations

from collections.abc import Sequence

from services.execution.errors import ConfigError
from services.execution.network.allowlist import AllowlistError, parse_allowlist

NETWORK_MODES = ("offline", "allowlist")
MAX_SETUP_COMMANDS = 32
MAX_COMMAND_CHARS = 8192


def check_setup_commands(commands: Sequence[object], where: str = "setup") -> list[str]:
    """The commands, or ConfigError naming the first problem."""
    if isinstance(commands, str) or not isinstance(commands, Sequence):
        raise ConfigError(f"{where}: a list of command lines is expected")
    if len(commands) > MAX_SETUP_COMMANDS:
        raise ConfigError(f"{where}: at most {MAX_SETUP_COMMANDS} setup commands")
    checked: list[str] = []
    for index, command in enumerate(commands):
        if not isinstance(command, str) or not command.strip():
            raise ConfigError(f"{where}[{index}]: a non-empty command line is expected")
        if len(command) > MAX_COMMAND_CHARS or "\x00" in command:
            raise ConfigError(f"{where}[{index}]: longer than {MAX_COMMAND_CHARS} characters "
                              "or holds a NUL byte")
        checked.append(command)
    return checked


def check_network(network: str, allowlist: Sequence[str]) -> None:
    """ConfigError for an unknown network mode or a bad allowlist entry."""
    if network not in NETWORK_MODES:
        raise ConfigError(f"network must be one of {', '.join(NETWORK_MODES)}, not "
                          f"{str(network)[:40]!r}")
    try:
        parse_allowlist(allowlist, addresses=False)
    except AllowlistError as exc:
        raise ConfigError(f"network_allowlist: {exc}") from None
