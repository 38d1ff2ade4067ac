"""Error codes and the error tree of the engine.

Every error carries one code from :class:`ErrorCode`, a stable enum that is part of the public
contract (envelopes, the API, the CLI, the docs). The tree, by audience::

    StudioError                      base: code, message, details, retryable
    ├── ToolFailure                  shown to the model as a tool result; never fails a run
    │   └── ConfinementViolation     a path or argument that would leave the workspace
    └── ExecutionError               fails (or retries) an execution
        ├── RunEndingError           raised by a tool handler: ends the run, not the call
        ├── ConfigError              a developer or operator mistake
        ├── ProviderError            the model provider misbehaved
        │   ├── ProviderUnavailable  retryable (429, 5xx, 424, connection errors)
        │   └── ProviderRejected     not retryable (400, 401, ...)
        └── SubstrateError           the executor substrate failed

Each code has a kind (:class:`ErrorKind`, the table :data:`ERROR_KINDS`): an execution that
ends with an ``infrastructure`` code is queued again after a backoff (services.runs.endings),
a ``permanent`` or ``provider_limit`` one ends it.

Budget exhaustion, loop detection, the kill switch and cancellation are *outcomes* of the loop,
not exceptions.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any


class ErrorCode(StrEnum):
    """The stable error codes (documented in docs/sphinx/tool_domains.rst)."""

    INVALID_ARGUMENTS = "invalid_arguments"
    UNKNOWN_TOOL = "unknown_tool"
    UNSUPPORTED_OPERATION = "unsupported_operation"
    UNSUPPORTED_CAPABILITY = "unsupported_capability"
    PATH_OUTSIDE_WORKSPACE = "path_outside_workspace"
    PATH_NOT_FOUND = "path_not_found"
    PATH_EXISTS = "path_exists"
    NOT_A_FILE = "not_a_file"
    NOT_A_DIRECTORY = "not_a_directory"
    UNSUPPORTED_FILE_TYPE = "unsupported_file_type"
    FILE_TOO_LARGE = "file_too_large"
    EDIT_NO_MATCH = "edit_no_match"
    EDIT_AMBIGUOUS = "edit_ambiguous"
    PATCH_FAILED = "patch_failed"
    PROTECTED_PATH = "protected_path"
    COMMAND_DENIED = "command_denied"
    COMMAND_TIMEOUT = "command_timeout"
    SANDBOX_UNAVAILABLE = "sandbox_unavailable"
    GIT_ERROR = "git_error"
    NOTHING_TO_COMMIT = "nothing_to_commit"
    PROTECTED_BRANCH = "protected_branch"
    PUSH_REJECTED = "push_rejected"
    AUTH_FAILED = "auth_failed"
    INTEGRATION_UNAVAILABLE = "integration_unavailable"
    HOST_NOT_ALLOWED = "host_not_allowed"
    PROVIDER_UNAVAILABLE = "provider_unavailable"
    PROVIDER_REJECTED = "provider_rejected"
    BUDGET_EXCEEDED = "budget_exceeded"
    MAX_ITERATIONS_EXCEEDED = "max_iterations_exceeded"
    LOOP_DETECTED = "loop_detected"
    KILLSWITCH_ENGAGED = "killswitch_engaged"
    CANCELLED = "cancelled"
    STALLED = "stalled"
    INTERRUPTED = "interrupted"
    CONFIG_ERROR = "config_error"
    SUBSTRATE_ERROR = "substrate_error"
    WORKSPACE_LOST = "workspace_lost"
    INTERNAL_ERROR = "internal_error"
    MCP_TOOL_ERROR = "mcp_tool_error"
    LEGACY_CLI_FAILED = "legacy_cli_failed"
    LEGACY_TOOL_ERROR = "legacy_tool_error"
    NOT_FOUND = "not_found"
    UNAUTHORIZED = "unauthorized"
    FORBIDDEN = "forbidden"
    TEMPLATE_ERROR = "template_error"
    SEARCH_TIMEOUT = "search_timeout"
    HOST_PATH_REFUSED = "host_path_refused"
    WORKSPACE_REFUSED = "workspace_refused"
    REQUEST_TOO_LARGE = "request_too_large"
    LIMIT_ABOVE_CEILING = "limit_above_ceiling"
    OPERATOR_OVERRIDE_REFUSED = "operator_override_refused"
    UNKNOWN_ROLE = "unknown_role"
    UNKNOWN_MCP_SERVER = "unknown_mcp_server"
    MCP_SERVER_EXISTS = "mcp_server_exists"
    MCP_SERVER_FAILED = "mcp_server_failed"
    # approval gates (services.execution.approvals)
    PERMISSION_DENIED = "permission_denied"
    INVALID_APPROVAL_POLICY = "invalid_approval_policy"
    APPROVAL_NOT_FOUND = "approval_not_found"
    APPROVAL_ALREADY_DECIDED = "approval_already_decided"
    APPROVAL_EXPIRED = "approval_expired"
    SETUP_FAILED = "setup_failed"
    # review executions (services.execution.review)
    TOOL_NOT_ALLOWED = "tool_not_allowed"
    REVIEW_INVALID = "review_invalid"
    # long runs (services.execution.compaction)
    CONTEXT_EXHAUSTED = "context_exhausted"
    # follow-ups on a pull request's branch (services.runs.finalize)
    BRANCH_MOVED = "branch_moved"
    # teams (services.db.teams, services.api.teams)
    REPOSITORY_NOT_IN_TEAM = "repository_not_in_team"
    SELF_APPROVAL_REFUSED = "self_approval_refused"
    DEPLOYMENT_WIDE_ONLY = "deployment_wide_only"
    # failures that heal or wait for an operator (:data:`ERROR_KINDS`)
    SPEND_CAP_REACHED = "spend_cap_reached"
    MCP_SERVER_CRASHED = "mcp_server_crashed"
    DEAD_LETTERED = "dead_lettered"
    NOT_DEAD_LETTERED = "not_dead_lettered"


class ErrorKind(StrEnum):
    """What an execution that ended with a code does next (:data:`ERROR_KINDS`)."""

    INFRASTRUCTURE = "infrastructure"  # queued again after a backoff, then dead-lettered
    PERMANENT = "permanent"  # fails at once: trying again gives the same answer
    PROVIDER_LIMIT = "provider_limit"  # the provider's spend cap: final, an operator acts


_I, _P, _L = ErrorKind.INFRASTRUCTURE, ErrorKind.PERMANENT, ErrorKind.PROVIDER_LIMIT
ERROR_KINDS: dict[ErrorCode, ErrorKind] = {
    # infrastructure: the provider, an MCP server, the git host or GitHub, the executor
    # substrate failed; the same request may well succeed later
    ErrorCode.PROVIDER_UNAVAILABLE: _I,  # 5xx, overloaded, timeout, 429 after the SDK's retries
    ErrorCode.MCP_SERVER_FAILED: _I,
    ErrorCode.MCP_SERVER_CRASHED: _I,
    ErrorCode.INTEGRATION_UNAVAILABLE: _I,  # GitHub or an MCP server unreachable
    ErrorCode.SUBSTRATE_ERROR: _I,  # executor pod evicted, image not pullable, process lost
    ErrorCode.COMMAND_TIMEOUT: _I,
    ErrorCode.SEARCH_TIMEOUT: _I,
    ErrorCode.INTERRUPTED: _I,
    # provider limits: the spend cap answers 429 or 403 (F9): final, never retried
    ErrorCode.SPEND_CAP_REACHED: _L,
    # permanent: bad input, confinement, budget, authentication, limits, decisions
    **{code: _P for code in (
        ErrorCode.INVALID_ARGUMENTS, ErrorCode.UNKNOWN_TOOL, ErrorCode.UNSUPPORTED_OPERATION,
        ErrorCode.UNSUPPORTED_CAPABILITY, ErrorCode.PATH_OUTSIDE_WORKSPACE,
        ErrorCode.PATH_NOT_FOUND, ErrorCode.PATH_EXISTS, ErrorCode.NOT_A_FILE,
        ErrorCode.NOT_A_DIRECTORY, ErrorCode.UNSUPPORTED_FILE_TYPE, ErrorCode.FILE_TOO_LARGE,
        ErrorCode.EDIT_NO_MATCH, ErrorCode.EDIT_AMBIGUOUS, ErrorCode.PATCH_FAILED,
        ErrorCode.PROTECTED_PATH, ErrorCode.COMMAND_DENIED, ErrorCode.GIT_ERROR,
        ErrorCode.NOTHING_TO_COMMIT, ErrorCode.PROTECTED_BRANCH, ErrorCode.PUSH_REJECTED,
        ErrorCode.AUTH_FAILED, ErrorCode.HOST_NOT_ALLOWED, ErrorCode.PROVIDER_REJECTED,
        ErrorCode.BUDGET_EXCEEDED, ErrorCode.MAX_ITERATIONS_EXCEEDED, ErrorCode.LOOP_DETECTED,
        ErrorCode.KILLSWITCH_ENGAGED, ErrorCode.CANCELLED, ErrorCode.STALLED,
        ErrorCode.CONFIG_ERROR, ErrorCode.WORKSPACE_LOST, ErrorCode.INTERNAL_ERROR,
        ErrorCode.MCP_TOOL_ERROR,
        ErrorCode.LEGACY_CLI_FAILED, ErrorCode.LEGACY_TOOL_ERROR, ErrorCode.NOT_FOUND,
        ErrorCode.UNAUTHORIZED, ErrorCode.FORBIDDEN, ErrorCode.TEMPLATE_ERROR,
        ErrorCode.HOST_PATH_REFUSED, ErrorCode.WORKSPACE_REFUSED, ErrorCode.REQUEST_TOO_LARGE,
        ErrorCode.LIMIT_ABOVE_CEILING, ErrorCode.OPERATOR_OVERRIDE_REFUSED,
        ErrorCode.UNKNOWN_ROLE, ErrorCode.UNKNOWN_MCP_SERVER, ErrorCode.MCP_SERVER_EXISTS,
        ErrorCode.PERMISSION_DENIED, ErrorCode.INVALID_APPROVAL_POLICY,
        ErrorCode.APPROVAL_NOT_FOUND, ErrorCode.APPROVAL_ALREADY_DECIDED,
        ErrorCode.APPROVAL_EXPIRED, ErrorCode.SETUP_FAILED, ErrorCode.DEAD_LETTERED,
        ErrorCode.NOT_DEAD_LETTERED,
        ErrorCode.TOOL_NOT_ALLOWED, ErrorCode.REVIEW_INVALID, ErrorCode.CONTEXT_EXHAUSTED,
        ErrorCode.BRANCH_MOVED, ErrorCode.REPOSITORY_NOT_IN_TEAM,
        ErrorCode.SELF_APPROVAL_REFUSED, ErrorCode.DEPLOYMENT_WIDE_ONLY,
        # this host's sandbox cannot do what the run needs: the same on the next attempt
        ErrorCode.SANDBOX_UNAVAILABLE)},
}
"""Every code's kind (a unit test fails on a code without one; docs/sphinx/fault_tolerance.rst
shows the same table). A code added later, in a release that does not know it, is read as
``permanent`` by :func:`error_kind`: never retried by surprise."""


def error_kind(code: str | None) -> ErrorKind:
    """The kind of ``code`` (a stored string): ``permanent`` for an unknown or missing one."""
    try:
        return ERROR_KINDS[ErrorCode(code)] if code else ErrorKind.PERMANENT
    except (ValueError, KeyError):
        return ErrorKind.PERMANENT


class StudioError(Exception):
    """Base of every error the project raises on purpose."""

    default_code: ErrorCode = ErrorCode.INTERNAL_ERROR
    default_retryable: bool = False

    def __init__(
        self,
        message: str,
        *,
        code: ErrorCode | None = None,
        details: dict[str, Any] | None = None,
        retryable: bool | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code if code is not None else self.default_code
        self.details: dict[str, Any] = dict(details or {})
        self.retryable = self.default_retryable if retryable is None else retryable

    def __str__(self) -> str:
        return f"{self.code.value}: {self.message}"


class ToolFailure(StudioError):
    """A tool call that could not be carried out; the model sees it as the call's result."""

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        *,
        details: dict[str, Any] | None = None,
        retryable: bool = False,
    ) -> None:
        super().__init__(message, code=code, details=details, retryable=retryable)


class ConfinementViolation(ToolFailure):
    """A path or argument that would reach outside the workspace or into a protected place."""

    def __init__(
        self,
        message: str,
        *,
        code: ErrorCode = ErrorCode.PATH_OUTSIDE_WORKSPACE,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(code, message, details=details)


class ExecutionError(StudioError):
    """Fails (or retries) an execution."""

    default_code = ErrorCode.INTERNAL_ERROR


class RunEndingError(ExecutionError):
    """Raised from a tool handler, it ends the run with its code instead of being the call's
    result (an MCP server that crashed a second time: the run's error, retried as
    ``infrastructure``)."""


class ConfigError(ExecutionError):
    default_code = ErrorCode.CONFIG_ERROR


class ProviderError(ExecutionError):
    default_code = ErrorCode.PROVIDER_UNAVAILABLE


class ProviderUnavailable(ProviderError):
    default_code = ErrorCode.PROVIDER_UNAVAILABLE
    default_retryable = True


class ProviderRejected(ProviderError):
    default_code = ErrorCode.PROVIDER_REJECTED
    default_retryable = False


class SubstrateError(ExecutionError):
    default_code = ErrorCode.SUBSTRATE_ERROR
