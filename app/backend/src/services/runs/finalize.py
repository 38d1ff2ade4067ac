"""Finalization: commit what the agent left, push the execution's branch, open or reuse its PR.

Exactly once, across crashes and retries:

1. **Adopt what was pushed.** When the remote already has the execution's branch at a commit
   that is not in our history (a crashed attempt pushed it; a resumed workspace holds the same
   changes as uncommitted ones), that commit is fetched and the branch moved onto it
   (``reset --soft``: the worktree is untouched), so what follows is a fast-forward or nothing.
   A remote branch that does not descend from the base commit is refused (``push_rejected``).
2. **Commit** what is uncommitted (``git add -A``), through the git domain's ``commit`` (so
   ``.github/workflows/`` changes are refused unless the execution allows them), with the
   configured identity and the agent's summary as the message. **Cross-check**: a branch that
   then holds nothing beyond the base commit, for a run that claims changes
   (``claimed_changes``: a result listing changes, successful edits in the journal), fails
   with ``workspace_lost``.
3. **Check the base branch** exists on the remote (a renamed base branch is reported as such).
4. **Push** through the git domain's ``push`` (only the execution's branch, never forced)
   unless the remote already has exactly this head; the lease epoch is checked right before.
5. **Pull request** through the one keyed port shared with ``git.create_pull_request``: the
   ledger (the execution row) is consulted first, so a retry reuses the recorded one and a
   branch stranded without a PR by a crash gets its PR on the retry.

A **follow-up** (``follow_up``: the execution works on a pull request's own head branch) opens
no pull request, and its commit carries a ``Studio-Execution: ID`` trailer: a remote branch that
moved past the base commit is adopted in step 1 only when its tip is this execution's own commit
(a crashed attempt pushed it); anyone else's commit there fails the run with ``branch_moved``
(nothing is pushed, never forced), and so does a push the remote refuses as not a fast-forward.

Each of ``commit``, ``push`` and ``pull_request`` is reported to ``on_step`` with its result
(``ok`` true, or false with the error's ``code`` and ``message``): the durable path journals them
as ``finalize`` events, so a live stream shows finalization as it happens.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from services.execution.errors import ErrorCode, ExecutionError, StudioError, ToolFailure
from services.execution.messages import AgentResult
from services.execution.tool_domains.context import ToolDomainContext
from services.execution.tool_domains.git.args import git, head_id
from services.execution.tool_domains.git.remote import FetchArgs, PushArgs, fetch, push
from services.execution.tool_domains.git.tools import AddArgs, CommitArgs, add, commit
from services.telemetry import tracing

log = logging.getLogger(__name__)

MAX_SUBJECT = 72
RemoteSha = Callable[[str], str | None]  # branch -> the commit the remote has, or None
StepSink = Callable[[str, dict[str, Any]], None]  # (step, its result) -> journaled


def _no_steps(_step: str, _data: dict[str, Any]) -> None:
    return None


@contextmanager
def _step(on_step: StepSink, name: str) -> Iterator[None]:
    """Report ``name`` as failed (with the error's code and message) when its body raises."""
    try:
        yield
    except StudioError as error:
        on_step(name, {"ok": False, "error": {"code": error.code.value, "message": error.message}})
        raise


@dataclass(frozen=True)
class FinalizeRequest:
    execution_id: str
    prompt: str
    base_branch: str
    base_commit: str
    pull_request: bool = True
    claimed_changes: tuple[str, ...] = ()
    # more sections of the pull request's body (the network requests the proxy refused)
    notes: tuple[str, ...] = ()
    follow_up: bool = False  # on a pull request's own branch: see the module docstring


TRAILER = "Studio-Execution:"


@dataclass(frozen=True)
class Finalized:
    """What finalization did: the pushed head, whether this call pushed, the PR."""

    branch: str
    head_sha: str | None
    pushed: bool
    committed: bool
    pr_url: str | None = None
    pr_number: int | None = None
    note: str = ""


def commit_message(result: AgentResult, prompt: str, execution_id: str | None = None) -> str:
    """Subject from the agent's summary (else the task), body with the listed changes (and,
    for a follow-up, the ``Studio-Execution`` trailer)."""
    summary = (result.summary or "").strip() or prompt.strip() or "Studio agent changes"
    lines = summary.splitlines()
    subject = lines[0][:MAX_SUBJECT].rstrip()
    body = "\n".join(lines[1:]).strip()
    changes = "\n".join(f"- {c}" for c in result.changes)
    trailer = f"{TRAILER} {execution_id}" if execution_id else ""
    return "\n\n".join(part for part in (subject, body, changes, trailer) if part) + "\n"


def pull_request_body(result: AgentResult, execution_id: str,
                      notes: tuple[str, ...] = ()) -> str:
    parts = [result.summary.strip() or "Changes made by the Studio agent."]
    if result.changes:
        parts.append("Changes:\n" + "\n".join(f"- {c}" for c in result.changes))
    if result.issues:
        parts.append("Issues:\n" + "\n".join(f"- {i}" for i in result.issues))
    parts += [note for note in notes if note]
    parts.append(f"Studio execution: `{execution_id}`")
    return "\n\n".join(parts)


def _is_ancestor(ctx: ToolDomainContext, older: str, newer: str) -> bool:
    found = git(ctx, ["merge-base", "--is-ancestor", older, newer], check=False)
    return found.returncode == 0


def _adopt_remote(ctx: ToolDomainContext, branch: str, remote: str,
                  request: FinalizeRequest) -> None:
    """Move the local branch onto the remote's commit, keeping the worktree (step 1)."""
    if _is_ancestor(ctx, remote, "HEAD"):
        return
    fetch(FetchArgs(ref=f"refs/heads/{branch}"), ctx)
    fetched = git(ctx, ["rev-parse", "--verify", "FETCH_HEAD^{commit}"]).text.strip()
    if request.follow_up and not _ours(ctx, fetched, request):
        raise ToolFailure(ErrorCode.BRANCH_MOVED,
                          f"the pull request's branch {branch!r} moved while the follow-up "
                          "ran; nothing was pushed (never forced)",
                          details={"branch": branch, "remote_sha": remote})
    if fetched != remote or not _is_ancestor(ctx, request.base_commit, fetched):
        raise ToolFailure(ErrorCode.PUSH_REJECTED,
                          f"the remote branch {branch!r} holds commits that are not this "
                          "execution's; it is never force-pushed",
                          details={"branch": branch, "remote_sha": remote})
    git(ctx, ["reset", "--soft", "--quiet", fetched])


def _ours(ctx: ToolDomainContext, commit: str, request: FinalizeRequest) -> bool:
    """Whether ``commit`` is this execution's follow-up commit, on the base commit."""
    message = git(ctx, ["log", "-1", "--format=%B", commit]).text
    parent = git(ctx, ["rev-parse", "--verify", f"{commit}^"], check=False).text.strip()
    return f"{TRAILER} {request.execution_id}" in message and parent == request.base_commit


def _commit_leftovers(ctx: ToolDomainContext, result: AgentResult,
                      request: FinalizeRequest) -> bool:
    if not git(ctx, ["status", "--porcelain", "--untracked-files=all"]).text.strip():
        return False
    with tracing.span("studio.commit", {"studio.execution_id": request.execution_id}):
        add(AddArgs(paths=["."]), ctx)
        try:
            commit(CommitArgs(message=commit_message(
                result, request.prompt, request.execution_id if request.follow_up else None)),
                ctx)
        except ToolFailure as failure:
            if failure.code is ErrorCode.NOTHING_TO_COMMIT:
                return False
            raise
    return True


def _no_lost_work(request: FinalizeRequest) -> None:
    """Nothing to commit is fine for a run that changed nothing, not for one claiming changes."""
    if request.claimed_changes:
        evidence = "; ".join(request.claimed_changes)
        raise ExecutionError(
            f"the workspace holds no changes against the base commit, but {evidence}: the "
            "work was lost, nothing was pushed", code=ErrorCode.WORKSPACE_LOST,
            details={"evidence": list(request.claimed_changes),
                     "base_commit": request.base_commit})


def _push(ctx: ToolDomainContext, branch: str, request: FinalizeRequest) -> None:
    try:
        push(PushArgs(branch=branch, set_upstream=False), ctx)
    except ToolFailure as failure:
        if request.follow_up and failure.code is ErrorCode.PUSH_REJECTED:
            raise ToolFailure(ErrorCode.BRANCH_MOVED,
                              f"the pull request's branch {branch!r} moved while the follow-up "
                              "ran; the push was refused (never forced)",
                              details={"branch": branch}) from None
        raise


def finalize(ctx: ToolDomainContext, result: AgentResult, request: FinalizeRequest, *,
             remote_sha: RemoteSha, check_lease: Callable[[], None],
             on_step: StepSink = _no_steps) -> Finalized:
    """Run the five steps of the module docstring; raises ``ToolFailure`` (the execution fails
    with its code) or ``StaleLease`` (this process must stop)."""
    branch = ctx.branch
    if branch is None:
        raise ToolFailure(ErrorCode.PROTECTED_BRANCH, "the execution has no branch to finalize")
    with _step(on_step, "commit"):
        if git(ctx, ["symbolic-ref", "--quiet", "--short", "HEAD"], check=False).text.strip() \
                != branch:
            git(ctx, ["checkout", "--quiet", branch])
        remote = remote_sha(branch)
        if remote is not None:
            _adopt_remote(ctx, branch, remote, request)
        committed = _commit_leftovers(ctx, result, request)
        head = head_id(ctx) or ""
        if head == request.base_commit:
            _no_lost_work(request)
    on_step("commit", {"ok": True, "committed": committed, "branch": branch,
                       "head_sha": head if head != request.base_commit else None})
    if head == request.base_commit:
        note = "no changes: nothing to push"
        on_step("push", {"ok": True, "pushed": False, "branch": branch, "note": note})
        return Finalized(branch, None, pushed=False, committed=False, note=note)
    pushed = False
    with _step(on_step, "push"):
        if remote_sha(request.base_branch) is None:
            raise ToolFailure(ErrorCode.GIT_ERROR,
                              f"the base branch {request.base_branch!r} does not exist on the "
                              "remote", details={"reason": "base_branch_missing",
                                                 "base_branch": request.base_branch})
        if remote != head:
            check_lease()
            with tracing.span("studio.push", {"studio.execution_id": request.execution_id}):
                _push(ctx, branch, request)
            pushed = True
    on_step("push", {"ok": True, "pushed": pushed, "branch": branch, "head_sha": head})
    if request.follow_up or not request.pull_request or ctx.pull_requests is None:
        note = "" if not request.pull_request else "no pull-request integration: PR skipped"
        on_step("pull_request", {"ok": True, "skipped": True,
                                 "note": note or "pull request not asked for"})
        return Finalized(branch, head, pushed, committed, note=note)
    with _step(on_step, "pull_request"), \
            tracing.span("studio.pull_request", {"studio.execution_id": request.execution_id},
                         kind="client") as span:
        ref = ctx.pull_requests.create_or_reuse(
            execution_id=request.execution_id, workspace=ctx.resolved_workspace_root(),
            head_branch=branch, base_branch=request.base_branch,
            title=commit_message(result, request.prompt).splitlines()[0],
            body=pull_request_body(result, request.execution_id, request.notes), draft=False)
        span.set_attribute("studio.pr_number", ref.number)
    on_step("pull_request", {"ok": True, "url": ref.url, "number": ref.number,
                             "created": ref.created})
    log.info("execution %s: branch %s at %s, pull request %s", request.execution_id, branch,
             head[:12], ref.url)
    return Finalized(branch, head, pushed, committed, pr_url=ref.url, pr_number=ref.number)
