"""Flowchart nodes started by the API without a broker: one child process per node.

No tool call can hold the API's process: a node (an agent loop with its model-supplied regular
expressions, a command) runs in ``studio flowchart-node RUN_ID NODE_ID``
(:mod:`services.cli.flowchart_node`), started from a small pool of long-lived threads that wait on
it. The child gets the executors' allowlisted environment, leads its own process group and dies
with the thread that started it (``PR_SET_PDEATHSIG``). It hands back the nodes that became ready
as ``{"dispatch": "<node id>"}`` lines, each started the same way. A child that ends without
recording its node's outcome (killed, crashed) leaves the node failed with ``substrate_error``,
so the run always ends.
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from services.db.session import Database
from services.executors.local import DEFAULT_STUDIO_ARGV, executor_environment
from services.flowcharts.service import FlowchartRunService
from services.settings import StudioSettings, process_environment

log = logging.getLogger(__name__)

CONCURRENCY = 2
PR_SET_PDEATHSIG = 1


def _die_with_parent(parent_pid: int) -> Callable[[], None]:
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # resolved before the fork

    def preexec() -> None:
        if prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0 or os.getppid() != parent_pid:
            os._exit(127)

    return preexec


class NodeChildren:
    """Starts a child per dispatched node and waits on it in a pool thread."""

    def __init__(self, db: Database, settings: StudioSettings, *,
                 studio_argv: Sequence[str] = DEFAULT_STUDIO_ARGV,
                 concurrency: int = CONCURRENCY) -> None:
        self.db = db
        self.settings = settings
        self.argv = list(studio_argv)
        self._pool = ThreadPoolExecutor(max_workers=concurrency,
                                        thread_name_prefix="studio-flowchart")

    def dispatch(self, run_id: str, node_id: str) -> None:
        self._pool.submit(self.run_child, run_id, node_id).add_done_callback(_log_failure)

    def run_child(self, run_id: str, node_id: str) -> int:
        """Run the node's child to its end, dispatching what it hands back; its exit code."""
        process = subprocess.Popen(
            [*self.argv, "flowchart-node", run_id, node_id],
            env=executor_environment(process_environment()), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, text=True, process_group=0, close_fds=True,
            preexec_fn=_die_with_parent(os.getpid()))
        assert process.stdout is not None
        try:
            for line in process.stdout:
                if (ready := _dispatched(line)) is not None:
                    self.dispatch(run_id, ready)
        finally:
            code = process.wait()
            FlowchartRunService(self.db, self.settings, dispatch=self.dispatch).fail_unfinished(
                run_id, node_id, f"the node's process ended (exit code {code}) without "
                                 "recording its outcome")
        return code

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def _dispatched(line: str) -> str | None:
    try:
        data = json.loads(line)
    except ValueError:
        return None
    node = data.get("dispatch") if isinstance(data, dict) else None
    return node if isinstance(node, str) else None


def _log_failure(future: Future[int]) -> None:
    if not future.cancelled() and (exc := future.exception()) is not None:
        log.error("flowchart node child failed", exc_info=exc)


_children: dict[int, NodeChildren] = {}
_lock = threading.Lock()


def node_children(db: Database, settings: StudioSettings) -> NodeChildren:
    """One :class:`NodeChildren` per database of this process."""
    with _lock:
        if id(db) not in _children:
            _children[id(db)] = NodeChildren(db, settings)
        return _children[id(db)]
