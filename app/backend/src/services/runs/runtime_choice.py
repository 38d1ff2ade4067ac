"""Which runtime an execution runs on: the agent runtime cutover read from a settings snapshot.

``agent_runtime_cutover_enabled`` (a flowchart node's ``__agent_runtime_cutover_enabled`` wins,
then the runtime setting, then the default) is read once, when the execution is recorded: on,
the SDK tool loop (runtime ``agent``); off, the provider's own agent CLI (runtime ``legacy``,
:mod:`services.runs.legacy_runtime`). Kept apart from the legacy runtime so that recording an
execution (the API) does not import the CLIs' adapters nor the engine.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

SETTING = "agent_runtime_cutover_enabled"
SDK_RUNTIME = "agent"
LEGACY_RUNTIME = "legacy"


@dataclass(frozen=True)
class RuntimeChoice:
    """The runtime of an execution and why: ``SETTING`` had ``value`` at level ``source``."""

    runtime: str
    value: bool
    source: str

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.runtime, "setting": SETTING, "value": self.value,
                "source": self.source}

    @property
    def reason(self) -> str:
        return f"{SETTING}={'true' if self.value else 'false'} ({self.source})"


def runtime_choice(snapshot: Mapping[str, Any]) -> RuntimeChoice:
    """The runtime a settings snapshot selects."""
    cutover = snapshot[SETTING]
    value = bool(cutover["value"])
    return RuntimeChoice(SDK_RUNTIME if value else LEGACY_RUNTIME, value, str(cutover["source"]))
