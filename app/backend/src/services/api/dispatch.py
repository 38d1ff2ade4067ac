"""The API's dispatch port: how it hands recorded work to whoever runs it.

The API does not import the worker: the composition root (``studio api``,
:mod:`services.cli.api`) builds a :class:`WorkDispatch` from the worker's functions and passes it
to :func:`services.api.app.create_app`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from services.flowcharts.service import NodeDispatch


@dataclass(frozen=True)
class WorkDispatch:
    """Where executions and flowchart nodes go once recorded (and committed)."""

    execution: Callable[[str], object]
    """Hand a recorded execution (by id) to whoever runs it."""
    brokered: bool
    """``True``: ``execution`` sends a message and returns at once; ``False``: it runs the
    execution in this process and returns when it ends (the API then calls it from a thread)."""
    flowchart_nodes: NodeDispatch | None = None
    """Send one ready flowchart node to the broker; ``None``: each node runs in a child process
    of the API."""
    delivery: Callable[[str], object] | None = None
    """Send a recorded GitHub webhook delivery to a worker; ``None``: the API acts on it
    itself, in the background (no broker)."""
