"""The setup phase: the repository's and the execution's setup commands, run after provisioning
and before the model gets control, with network egress only to the allowlist.

:func:`controlled_phases` is what the durable path wraps its loop in. When the execution has
setup commands (the repository's ``.studio/setup.json`` first, :mod:`services.runs.setup_file`,
then the request's ``setup``) or asks for ``network: "allowlist"``, it starts the egress proxy
(:class:`~services.execution.network.proxy.EgressProxy`, policy: ``STUDIO_SETUP_ALLOWLIST`` plus
the request's ``network_allowlist``) and builds the egress sandbox over this process's
bubblewrap sandbox (:mod:`services.execution.sandbox.egress`; another sandbox mode is refused
with ``sandbox_unavailable``). Each setup command gets the dependency cache of its writer
(:mod:`services.repos.dependency_caches`) bound in: the repository's commands the cache of the
repository and base branch, the request's commands one of their own (repository, base branch,
those commands). The agent phase never gets a cache, whatever its network.

Each setup command runs with ``/bin/sh -c`` in the workspace, with the command domain's
scrubbed environment (no secret of the harness) plus the proxy variables, one at a time, each
at most ``STUDIO_SETUP_TIMEOUT_S``. Journal events (``setup``): the command as it starts, its
output while it runs (:class:`OutputStream`), then its exit, duration, output (head and tail)
and the requests the proxy refused while it ran. One
``network`` event per phase sums up the refusals and the bytes the proxy carried. A command that
exits non-zero or times out ends the execution with ``setup_failed`` and its output (nothing is
committed or pushed). The agent phase then runs offline (the session sandbox), or through the
same proxy when the execution chose ``network: "allowlist"``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from services.execution.errors import ConfigError, ErrorCode, ExecutionError
from services.execution.network.allowlist import AllowlistError, EgressPolicy, parse_allowlist
from services.execution.network.proxy import Blocked, EgressProxy, Resolver, system_resolver
from services.execution.ports import AgentEventKind
from services.execution.sandbox.egress import EgressSandbox, egress_sandbox
from services.execution.tool_domains.command.process import CommandOutcome, run_prepared
from services.execution.tool_domains.command.tools import command_environment
from services.execution.tool_domains.context import ToolDomainContext
from services.repos.dependency_caches import (
    CacheScope,
    dependency_caches,
    repository_scope,
    request_scope,
)
from services.repos.urls import validate_repo_url
from services.runs.request import ExecutionRequest
from services.runs.setup_file import repository_setup_commands
from services.settings import StudioSettings

Emit = Callable[[AgentEventKind, dict[str, Any]], None]
MESSAGE_OUTPUT_CHARS = 2000
STREAM_INTERVAL_S = 0.5
STREAM_CHUNK = 8 * 1024
STREAM_CAP = 256 * 1024
MAX_BLOCKED_IN_BODY = 50


@dataclass(frozen=True)
class SetupCommand:
    source: str  # "repository" (.studio/setup.json) or "request"
    command: str


def execution_policy(settings: StudioSettings, request: ExecutionRequest) -> EgressPolicy:
    """The deployment's allowlist (addresses allowed) with the request's names added."""
    try:
        deployment = parse_allowlist(settings.setup_allowlist, addresses=True)
    except AllowlistError as exc:
        raise ConfigError(f"STUDIO_SETUP_ALLOWLIST: {exc}") from None
    try:
        extra = parse_allowlist(request.network_allowlist, addresses=False)
    except AllowlistError as exc:
        raise ConfigError(f"network_allowlist: {exc}") from None
    return deployment.merged(extra)


class ControlledNetwork:
    """The proxy and egress sandbox of one execution's controlled phases (a context manager)."""

    def __init__(self, policy: EgressPolicy, base: Any, *,
                 resolver: Resolver = system_resolver) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="studio-egress-"))
        self.proxy = EgressProxy(policy, self.directory / "proxy.sock", resolver=resolver)
        self._reported = (0, 0, 0)
        try:
            self.sandbox: EgressSandbox = egress_sandbox(base, self.proxy, None)
            self.proxy.start()
        except BaseException:
            shutil.rmtree(self.directory, ignore_errors=True)
            raise

    def close(self) -> None:
        self.proxy.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    def report(self, phase: str) -> dict[str, Any]:
        """What the proxy refused and carried since the last report (one ``network`` event)."""
        blocked, traffic = self.proxy.snapshot()
        seen, to_client, to_upstream = self._reported
        self._reported = (len(blocked), traffic.to_client, traffic.to_upstream)
        return {"phase": phase, "blocked": [b.as_dict() for b in blocked[seen:]],
                "bytes_to_sandbox": traffic.to_client - to_client,
                "bytes_from_sandbox": traffic.to_upstream - to_upstream,
                "allowlist": self.proxy.policy.entries()}


def setup_commands(request: ExecutionRequest, workspace: Path) -> list[SetupCommand]:
    return ([SetupCommand("repository", c) for c in repository_setup_commands(workspace)]
            + [SetupCommand("request", c) for c in request.setup])


class OutputStream:
    """A setup command's output as ``setup`` events (``"status": "output"``) while it runs:
    complete lines, at most every :data:`STREAM_INTERVAL_S` or :data:`STREAM_CHUNK` bytes, and
    at most :data:`STREAM_CAP` bytes per command (the head and tail are in the end event)."""

    def __init__(self, emit: Emit, base: dict[str, Any]) -> None:
        self.emit = emit
        self.base = base
        self.pending: dict[str, bytearray] = {"stdout": bytearray(), "stderr": bytearray()}
        self.sent = 0
        self.last = time.monotonic()
        self.capped = False

    def feed(self, stream: str, data: bytes) -> None:
        if self.capped:
            return
        self.pending[stream] += data
        waiting = sum(len(b) for b in self.pending.values())
        if waiting >= STREAM_CHUNK or time.monotonic() - self.last >= STREAM_INTERVAL_S:
            self.flush(final=False)

    def flush(self, *, final: bool) -> None:
        for stream, buffer in self.pending.items():
            cut = len(buffer) if final else buffer.rfind(b"\n") + 1
            if cut <= 0 or self.capped:
                continue
            chunk = bytes(buffer[:cut])
            del buffer[:cut]
            if self.sent + len(chunk) > STREAM_CAP:
                chunk = chunk[:max(0, STREAM_CAP - self.sent)]
                self.capped = True
            self.sent += len(chunk)
            self.emit(AgentEventKind.SETUP, {
                **self.base, "status": "output", "stream": stream,
                "text": chunk.decode("utf-8", "replace"),
                **({"stream_capped": True} if self.capped else {})})
        self.last = time.monotonic()


def _tail(outcome: CommandOutcome) -> str:
    text = "\n".join(part.strip() for part in (outcome.stdout.text(), outcome.stderr.text())
                     if part.strip())
    return text if len(text) <= MESSAGE_OUTPUT_CHARS else "..." + text[-MESSAGE_OUTPUT_CHARS:]


def run_setup(commands: Sequence[SetupCommand], network: ControlledNetwork, workspace: Path,
              emit: Emit, *, timeout_s: float, cap: int,
              caches: Mapping[str, Path] | None = None) -> None:
    """Run each command to its end, with the cache of its source (``caches``) bound in; raises
    ``setup_failed`` at the first that fails."""
    for index, step in enumerate(commands):
        sandbox = network.sandbox.using_cache((caches or {}).get(step.source))
        base = {"index": index, "source": step.source, "command": step.command}
        emit(AgentEventKind.SETUP, {**base, "status": "started"})
        before = len(network.proxy.snapshot()[0])
        with tempfile.TemporaryDirectory(prefix="studio-setup-", ignore_cleanup_errors=True) as t:
            prepared = sandbox.prepare(["/bin/sh", "-c", step.command],
                                               workspace=workspace, cwd=workspace,
                                               env=command_environment({}, Path(t)))
            network.proxy.label = step.command[:500]
            stream = OutputStream(emit, base)
            outcome = run_prepared(prepared, timeout_s=timeout_s, cap=cap,
                                   on_output=stream.feed)
            stream.flush(final=True)
        blocked = network.proxy.snapshot()[0][before:]
        ok = outcome.exit_code == 0 and not outcome.timed_out
        emit(AgentEventKind.SETUP, {
            **base, "status": "succeeded" if ok else "failed", "exit_code": outcome.exit_code,
            "signal": outcome.signal, "timed_out": outcome.timed_out,
            "duration_ms": outcome.duration_ms, "stdout": outcome.stdout.text(),
            "stderr": outcome.stderr.text(), "blocked": [b.as_dict() for b in blocked]})
        if not ok:
            emit(AgentEventKind.NETWORK, network.report("setup"))
            how = ("timed out" if outcome.timed_out
                   else f"exited with {outcome.exit_code}" if outcome.exit_code is not None
                   else f"was killed by signal {outcome.signal}")
            raise ExecutionError(
                f"setup command {index + 1} ({step.source}: {step.command[:200]}) {how}:\n"
                f"{_tail(outcome)}", code=ErrorCode.SETUP_FAILED,
                details={"index": index, "exit_code": outcome.exit_code,
                         "timed_out": outcome.timed_out})
    emit(AgentEventKind.NETWORK, network.report("setup"))


def cache_scopes(request: ExecutionRequest, commands: Sequence[SetupCommand],
                 base_branch: str) -> dict[str, CacheScope]:
    """The cache of each source that has commands: the repository's is the repository's and
    base branch's, the request's its own (see :mod:`services.repos.dependency_caches`)."""
    repo = validate_repo_url(request.repo_url or "", from_api=not request.allow_local)
    sources = {step.source for step in commands}
    scopes: dict[str, CacheScope] = {}
    if "repository" in sources:
        scopes["repository"] = repository_scope(repo, base_branch, request.network_allowlist)
    if "request" in sources:
        scopes["request"] = request_scope(repo, base_branch, request.setup,
                                          request.network_allowlist)
    return scopes


@contextlib.contextmanager
def _setup_caches(settings: StudioSettings, scopes: Mapping[str, CacheScope]
                  ) -> Iterator[dict[str, Path]]:
    """Each scope's cache directory, held until the setup phase ends."""
    caches = dependency_caches(settings)
    with contextlib.ExitStack() as stack:
        try:
            held = {source: stack.enter_context(caches.use(scope))
                    for source, scope in scopes.items()}
        except OSError as exc:
            raise ExecutionError(f"the dependency cache cannot be used: {exc}",
                                 code=ErrorCode.SUBSTRATE_ERROR) from None
        yield held


@contextlib.contextmanager
def controlled_phases(settings: StudioSettings, request: ExecutionRequest, workspace: Path,
                      ctx: ToolDomainContext, emit: Emit, *, base_branch: str,
                      resolver: Resolver = system_resolver) -> Iterator[ToolDomainContext]:
    """Run the setup phase (if any), then yield the context the agent phase runs with."""
    commands = setup_commands(request, workspace)
    if not commands and request.network != "allowlist":
        yield ctx
        return
    scopes = cache_scopes(request, commands, base_branch)
    network = ControlledNetwork(execution_policy(settings, request), ctx.sandbox,
                                resolver=resolver)
    try:
        if commands:
            with _setup_caches(settings, scopes) as caches:
                run_setup(commands, network, workspace, emit,
                          timeout_s=settings.setup_timeout_s, cap=ctx.output_cap_bytes,
                          caches=caches)
        if request.network != "allowlist":
            yield ctx
            return
        yield dataclasses.replace(ctx, sandbox=network.sandbox)  # no cache bound in
        # after the loop's own end (an exception, such as a lost lease, skips it: nothing more
        # may be journaled then)
        emit(AgentEventKind.NETWORK, network.report("agent"))
    finally:
        network.close()


def blocked_requests(events: Sequence[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Every refusal the journal's ``network`` events recorded, in order."""
    found: list[dict[str, Any]] = []
    for kind, data in events:
        if kind == AgentEventKind.NETWORK.value:
            found += [dict(b) for b in data.get("blocked") or [] if isinstance(b, dict)]
    return found


def _code(text: object) -> str:
    """``text`` as a Markdown code span on one line (no backtick can close it)."""
    flat = " ".join(str(text).split()).replace("`", "'")
    return f"`{flat[:300]}`"


def blocked_note(events: Sequence[tuple[str, dict[str, Any]]]) -> str:
    """The pull request body's section on refused network requests ("" when none)."""
    blocked = blocked_requests(events)
    if not blocked:
        return ""
    lines = ["Blocked network requests (egress proxy):"]
    for item in blocked[:MAX_BLOCKED_IN_BODY]:
        record = Blocked(str(item.get("command", "")), str(item.get("method", "")),
                         str(item.get("host", "")), item.get("port"), str(item.get("reason", "")))
        target = f"{record.host}:{record.port}" if record.port is not None else record.host
        lines.append(f"- {_code(record.method or '-')} {_code(target or '-')} by "
                     f"{_code(record.command or '-')}: {_code(record.reason)}")
    if len(blocked) > MAX_BLOCKED_IN_BODY:
        lines.append(f"- ... and {len(blocked) - MAX_BLOCKED_IN_BODY} more (see the run's "
                     "evidence)")
    return "\n".join(lines)
