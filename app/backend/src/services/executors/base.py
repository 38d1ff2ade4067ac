"""The substrate contract: where a node execution's process runs.

A substrate launches ``studio execute <execution_id>`` somewhere (a local subprocess, a Kubernetes
Job) and answers four questions about it. It knows nothing of leases, journals or the loop: the
application service records the :class:`Handle`, supervises it and decides what a status means
for the execution.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol, runtime_checkable


class SubstrateStatus(StrEnum):
    """Where the launched process stands, as far as the substrate can tell."""

    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    UNKNOWN = "unknown"

    @property
    def finished(self) -> bool:
        return self in (SubstrateStatus.SUCCEEDED, SubstrateStatus.FAILED)


@dataclass(frozen=True)
class Handle:
    """What identifies a launched execution on its substrate; plain strings, so it can be stored.

    ``ref`` is the process id for ``local`` and the Job name for ``kubernetes`` (with its
    ``namespace``).
    """

    substrate: str
    execution_id: str
    ref: str
    namespace: str | None = None


@runtime_checkable
class Substrate(Protocol):
    """Launches and supervises ``studio execute <execution_id>``."""

    @property
    def name(self) -> str:
        """``local`` or ``kubernetes``."""
        ...

    def launch(self, execution_id: str) -> Handle:
        """Start the execution's process; launching an execution already running returns it."""
        ...

    def status(self, handle: Handle) -> SubstrateStatus:
        """The current status, without waiting."""
        ...

    def cancel(self, handle: Handle) -> None:
        """Stop the process and everything it started; cancelling a finished one is a no-op."""
        ...

    def wait(self, handle: Handle, timeout: float) -> SubstrateStatus:
        """Block until the process finishes or ``timeout`` seconds pass; the status then."""
        ...
