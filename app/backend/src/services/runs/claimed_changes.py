"""What an execution claims to have changed, for finalization to cross-check against its worktree.

A run whose final answer lists changes, or whose journal records successful edits (a workspace
operation that writes, a ``git.commit``), must leave something to commit or push. When the
worktree matches the base commit instead, the work was lost (a workspace replaced or emptied
under the run), and reporting ``succeeded`` would hide it: finalization fails the execution with
``workspace_lost`` and these lines as its evidence (:mod:`services.runs.finalize`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from services.execution.messages import AgentResult
from services.runs.checkpoints import READ_ONLY

EDITING_GIT = frozenset({"commit"})


def _is_edit(data: dict[str, Any]) -> bool:
    call, envelope = data.get("call") or {}, data.get("envelope") or {}
    domain, operation = str(call.get("domain")), str(call.get("operation"))
    if not envelope.get("ok") or (domain, operation) in READ_ONLY:
        return False
    return domain == "workspace" or (domain == "git" and operation in EDITING_GIT)


def claimed_changes(result: AgentResult,
                    events: Sequence[tuple[str, dict[str, Any]]]) -> tuple[str, ...]:
    """Human-readable evidence that the run changed something (empty: it claims nothing)."""
    evidence: list[str] = []
    if result.changes:
        evidence.append(f"the result lists {len(result.changes)} change(s)")
    edits = [data for kind, data in events if kind == "tool_result" and _is_edit(data)]
    if edits:
        names = sorted({f"{d['call']['domain']}.{d['call']['operation']}" for d in edits})
        evidence.append(f"the journal records {len(edits)} successful edit(s) "
                        f"({', '.join(names)})")
    return tuple(evidence)
