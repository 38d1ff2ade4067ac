"""What a flowchart node id looks like: a module of its own, so that the worker's task payload
(:mod:`services.worker.flowchart_tasks`) checks it without importing the graph model and, through
it, the engine."""

from __future__ import annotations

NODE_ID_PATTERN = r"^[A-Za-z_][A-Za-z0-9_-]{0,99}$"
