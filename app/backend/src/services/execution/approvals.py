"""Approval gates: which tool calls run, which are refused, which wait for a person.

An execution (or a flowchart agent node) may carry an ``approval_policy``: a JSON object that
maps ``domain.operation`` (``command.run``), ``domain.*`` (``git.*``) or ``*`` to ``allow``,
``deny`` or ``require``. For each tool call the most specific key wins (``domain.operation``,
then ``domain.*``, then ``*``); a call no key matches is allowed (the default, as without a
policy). :func:`parse_policy` validates a policy against the operations that exist (an unknown
key or value is ``invalid_approval_policy``).

The loop asks an :class:`ApprovalGate` (the durable implementation is
:mod:`services.runs.approvals`) before each call is dispatched; the answer is a
:class:`GateVerdict`: run the call, answer it with a ``permission_denied`` envelope without
running it, or pause the execution (:class:`PauseRun`) until a person decides.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from services.execution.errors import ConfigError, ErrorCode
from services.execution.messages import ToolCall

MAX_RULES = 200
WILDCARD = "*"
# MCP tools are registered at run time (``mcp.<server>__<tool>``): any such name is accepted.
DYNAMIC_DOMAINS = frozenset({"mcp"})
_OPERATION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


class Rule(StrEnum):
    """What a policy says about a call."""

    ALLOW = "allow"
    DENY = "deny"
    REQUIRE = "require"


@dataclass(frozen=True)
class ApprovalPolicy:
    """A validated policy (:func:`parse_policy`); empty: every call is allowed."""

    rules: Mapping[str, Rule] = field(default_factory=dict)

    def rule_for(self, domain: str, operation: str) -> tuple[str | None, Rule]:
        """The key that decides ``domain.operation`` (the most specific) and its rule;
        ``(None, allow)`` when no key matches."""
        for key in (f"{domain}.{operation}", f"{domain}.{WILDCARD}", WILDCARD):
            if key in self.rules:
                return key, self.rules[key]
        return None, Rule.ALLOW

    def as_json(self) -> dict[str, str]:
        return {key: rule.value for key, rule in self.rules.items()}

    def __bool__(self) -> bool:
        return bool(self.rules)


def _invalid(message: str, **details: Any) -> ConfigError:
    return ConfigError(message, code=ErrorCode.INVALID_APPROVAL_POLICY, details=details)


def known_operations() -> frozenset[tuple[str, str]]:
    """Every native ``(domain, operation)`` a policy may name."""
    from services.execution.tool_domains.registry import default_registry

    return frozenset((spec.domain, spec.operation) for spec in default_registry().specs())


def parse_policy(raw: object,
                 operations: Iterable[tuple[str, str]] | None = None) -> ApprovalPolicy:
    """Validate a policy as given (``None``: no policy); raises ``ConfigError`` with the code
    ``invalid_approval_policy`` and the offending key in ``details``."""
    if raw is None:
        return ApprovalPolicy()
    if not isinstance(raw, Mapping):
        raise _invalid("approval_policy must be a JSON object of \"domain.operation\": "
                       "\"allow\" | \"deny\" | \"require\"")
    if len(raw) > MAX_RULES:
        raise _invalid(f"approval_policy has more than {MAX_RULES} keys", keys=len(raw))
    known = frozenset(operations) if operations is not None else known_operations()
    domains = {domain for domain, _ in known} | DYNAMIC_DOMAINS
    rules: dict[str, Rule] = {}
    for key, value in raw.items():
        if not isinstance(key, str) or len(key) > 200:
            raise _invalid("an approval_policy key must be a string of at most 200 characters")
        if not isinstance(value, str) or value not in {r.value for r in Rule}:
            raise _invalid(f"approval_policy[{key!r}] must be \"allow\", \"deny\" or "
                           "\"require\"", key=key)
        if key != WILDCARD:
            domain, dot, operation = key.partition(".")
            if not dot or domain not in domains:
                raise _invalid(f"approval_policy key {key!r} names no known domain "
                               f"(known: {', '.join(sorted(domains))})", key=key)
            if operation != WILDCARD and domain not in DYNAMIC_DOMAINS \
                    and (domain, operation) not in known:
                raise _invalid(f"approval_policy key {key!r} names no known operation",
                               key=key)
            if operation != WILDCARD and not _OPERATION.match(operation):
                raise _invalid(f"approval_policy key {key!r} is not a valid operation name",
                               key=key)
        rules[key] = Rule(value)
    return ApprovalPolicy(rules)


def call_fingerprint(call: ToolCall) -> str:
    """What identifies a call across model sessions: its tool and arguments (a self-driving
    engine that starts a new session gives the same call a new id)."""
    canonical = json.dumps({"tool": f"{call.domain}.{call.operation}", "args": call.args},
                           sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class GateAction(StrEnum):
    RUN = "run"
    DENY = "deny"
    PAUSE = "pause"


@dataclass(frozen=True)
class GateVerdict:
    """What the gate says about one call. ``evidence`` is the decision as recorded (rule,
    decision, by whom, when, reason, approval id) for the call's events and record; ``None``
    when no policy key matched."""

    action: GateAction
    evidence: dict[str, Any] | None = None
    message: str = ""

    @property
    def approval_id(self) -> str | None:
        found = (self.evidence or {}).get("approval_id")
        return str(found) if found else None


class ApprovalGate:
    """Decides each call before it is dispatched; the base class applies the policy alone
    (``require`` cannot wait here: it is refused); :mod:`services.runs.approvals` persists
    approvals and lets a call wait."""

    def __init__(self, policy: ApprovalPolicy) -> None:
        self.policy = policy

    def review(self, call: ToolCall) -> GateVerdict:
        key, rule = self.policy.rule_for(call.domain, call.operation)
        if key is None:
            return GateVerdict(GateAction.RUN)
        if rule is Rule.ALLOW:
            return GateVerdict(GateAction.RUN, {"rule": key, "policy": rule.value,
                                                "decision": "allow", "decided_by": "policy"})
        if rule is Rule.DENY:
            return policy_denial(key)
        return self.require(call, key)

    def require(self, call: ToolCall, key: str) -> GateVerdict:
        """A ``require`` rule: the durable gate records an approval and pauses."""
        return GateVerdict(GateAction.DENY, {
            "rule": key, "policy": Rule.REQUIRE.value, "decision": "deny",
            "decided_by": "policy", "reason": "this run cannot wait for an approval"},
            f"{call.domain}.{call.operation} needs an approval, and this run cannot wait for one")


def policy_denial(key: str) -> GateVerdict:
    return GateVerdict(GateAction.DENY, {"rule": key, "policy": Rule.DENY.value,
                                         "decision": "deny", "decided_by": "policy"},
                       f"the approval policy denies this call (rule {key!r})")


class PauseRun(Exception):  # noqa: N818 (a control-flow signal, like StopRun)
    """The execution waits for a person's decision on ``call`` (approval ``approval_id``):
    the loop ends without an outcome and the execution is resumed once it is decided."""

    def __init__(self, approval_id: str, call: ToolCall) -> None:
        super().__init__(f"waiting for approval {approval_id} of {call.tool_name}")
        self.approval_id = approval_id
        self.call = call
