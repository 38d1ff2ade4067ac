"""The stdio transport of a confined MCP server: a :class:`PreparedCommand` spoken to over its
stdin and stdout.

The ``mcp`` library's own stdio client starts the command it is given with the harness's file
descriptors closed and no way to run code in the child, so it cannot start a command wrapped by
a sandbox (bubblewrap reads its system-call filter from an inherited descriptor; Landlock
confines in the child before ``exec``). This transport starts the prepared command as the
sandbox built it (its argv, its complete environment, its cwd, its inherited descriptors and
its child-side setup), in a new session, and frames JSON-RPC messages one per line as the MCP
stdio transport specifies. Closing: stdin closed, a grace period, then the process group is
sent SIGTERM and SIGKILL; the sandbox's own ``finish`` runs last.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator
from typing import Any, TextIO

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage

from services.execution.ports import PreparedCommand

LINE_LIMIT_BYTES = 16 * 1024 * 1024  # one JSON-RPC message
EXIT_GRACE_S = 2.0
KILL_GRACE_S = 2.0


async def _exited(proc: asyncio.subprocess.Process, timeout: float) -> bool:
    with anyio.move_on_after(timeout):
        await proc.wait()
        return True
    return proc.returncode is not None


def _signal_group(proc: asyncio.subprocess.Process, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


async def _stop(proc: asyncio.subprocess.Process) -> None:
    if proc.stdin is not None:
        with contextlib.suppress(OSError, RuntimeError):
            proc.stdin.close()
    if await _exited(proc, EXIT_GRACE_S):
        return
    _signal_group(proc, signal.SIGTERM)
    if not await _exited(proc, KILL_GRACE_S):
        _signal_group(proc, signal.SIGKILL)
        await _exited(proc, KILL_GRACE_S)


async def _start(prepared: PreparedCommand, errlog: TextIO) -> asyncio.subprocess.Process:
    if prepared.stdin is not None or prepared.launch is not None:
        raise RuntimeError("an MCP server needs a command that owns its stdin (no gate)")
    try:
        proc = await asyncio.create_subprocess_exec(
            *prepared.argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=errlog, env=prepared.env, cwd=prepared.cwd, pass_fds=prepared.pass_fds,
            preexec_fn=prepared.preexec, start_new_session=True, limit=LINE_LIMIT_BYTES)
    finally:
        prepared.close_fds()
    if prepared.on_start is not None:
        prepared.on_start(proc.pid)
    return proc


@contextlib.asynccontextmanager
async def prepared_stdio_client(prepared: PreparedCommand,
                                errlog: TextIO) -> AsyncIterator[tuple[Any, Any]]:
    """``(read, write)`` streams of a ``ClientSession`` over the started ``prepared``."""
    try:
        proc = await _start(prepared, errlog)
    except BaseException:
        if prepared.finish is not None:
            prepared.finish()
        raise
    assert proc.stdin is not None and proc.stdout is not None
    stdin, stdout = proc.stdin, proc.stdout
    incoming_send, incoming = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    outgoing, outgoing_receive = anyio.create_memory_object_stream[SessionMessage](0)

    async def read() -> None:
        async with incoming_send:
            while line := await stdout.readline():
                try:
                    message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                except ValueError as exc:
                    await incoming_send.send(exc)
                    continue
                await incoming_send.send(SessionMessage(message))

    async def write() -> None:
        async with outgoing_receive:
            async for item in outgoing_receive:
                data = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                try:
                    stdin.write(data.encode("utf-8") + b"\n")
                    await stdin.drain()
                except (OSError, RuntimeError):  # the server is gone: the reader sees its end
                    return

    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(read)
            tasks.start_soon(write)
            try:
                yield incoming, outgoing
            finally:
                with anyio.CancelScope(shield=True):
                    await outgoing.aclose()
                    await _stop(proc)
                tasks.cancel_scope.cancel()
    finally:
        if proc.returncode is None:
            _signal_group(proc, signal.SIGKILL)
        if prepared.finish is not None:
            prepared.finish()
