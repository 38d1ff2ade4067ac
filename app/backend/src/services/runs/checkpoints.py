"""Workspace checkpoints: what a resumed execution restores in a fresh directory.

A checkpoint is ``git diff --binary <base_commit>`` of the whole worktree: the agent's commits,
staged, unstaged and untracked (not ignored) changes, taken by ``git add -A`` into a temporary
index (``GIT_INDEX_FILE``, a copy of the agent's index that keeps its modification time, so
git's racy-entry check still sees an edit made in the index's own second), so the agent's own
index is untouched. Over :data:`MAX_PATCH_BYTES`
the checkpoint is recorded as *unavailable* (no patch).

Restoring (:func:`apply_checkpoint`) re-applies the patch, uncommitted, on the execution's branch
checked out at the base commit: the agent's commits are flattened into worktree changes, which
the finalizer commits (one commit, message from the agent's summary). That is the deliberate
trade: one self-contained patch per checkpoint instead of a bundle of commits plus a diff.

:class:`CheckpointingToolStore` is the execution's ``IdempotencyStore``: when a tool call that
may change the workspace is recorded, the checkpoint is taken and stored in the *same*
transaction as the call's envelope, after checking the lease epoch, with the epoch and the
process (lease owner) that took it. So a recorded call and the
workspace state it produced are never out of step: a call that is not re-run on resume finds its
effect in the restored workspace. Given the loop's buffered journal, the store takes the
checkpoint at once but hands the write to the journal (:meth:`DbEventSink.defer`): it commits
with the call's ``tool_result`` event, one transaction for the call's record, checkpoint and
result (the journal's fence is the same lease epoch).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from services.db.checkpoints import CallWrite, Checkpoint, CheckpointRepository
from services.db.evidence import RecordedCalls
from services.db.journal import DbEventSink
from services.db.redaction import Redactor
from services.db.session import Database
from services.execution.tool_domains.git.runner import GitAuthor, run_git
from services.runs.workspace_fingerprint import fingerprint
from services.telemetry import tracing

MAX_PATCH_BYTES = 5 * 1024 * 1024
# Operations that never change the workspace: no checkpoint after them.
READ_ONLY = frozenset({
    ("workspace", "read_file"), ("workspace", "list_dir"), ("workspace", "glob"),
    ("workspace", "search"), ("workspace", "stat"), ("git", "status"), ("git", "diff"),
    ("git", "log"), ("git", "show"), ("git", "current_branch"), ("git", "list_branches"),
    ("git", "push"), ("git", "fetch"), ("git", "create_pull_request"),
})


def take_checkpoint(workspace: Path, base_commit: str, author: GitAuthor,
                    max_bytes: int = MAX_PATCH_BYTES) -> Checkpoint:
    """The worktree's changes against ``base_commit`` (the agent's index is not touched)."""
    handle, index = tempfile.mkstemp(prefix="studio-checkpoint-index-")
    os.close(handle)
    try:
        real_index = workspace / ".git" / "index"
        if real_index.is_file():  # a warm start: only changed files are hashed again
            # copy2 keeps the index's modification time: git trusts an entry's stat data unless
            # the entry is no older than the index file ("racy git"). A copy stamped "now" made
            # an in-place, same-size edit from the index's own second invisible: an empty
            # checkpoint, a lost edit on resume (issue 17).
            shutil.copy2(real_index, index)
        else:
            os.unlink(index)
        env = {"GIT_INDEX_FILE": index}
        run_git(workspace, ["add", "-A", "--", "."], env_extra=env, author=author)
        diff = run_git(workspace, ["diff", "--cached", "--binary", "--full-index",
                                   "--no-color", "--no-ext-diff", "--no-renames",
                                   base_commit, "--"], env_extra=env, author=author).stdout
    finally:
        if os.path.exists(index):
            os.unlink(index)
    digest = hashlib.sha256(diff).hexdigest()
    if len(diff) > max_bytes:
        return Checkpoint(base_commit, None, len(diff), digest)
    return Checkpoint(base_commit, diff, len(diff), digest)


def apply_checkpoint(workspace: Path, patch: bytes, author: GitAuthor) -> None:
    """Re-apply a checkpoint's patch to the worktree (uncommitted)."""
    if patch:
        run_git(workspace, ["apply", "--binary", "--whitespace=nowarn", "-"], stdin=patch,
                author=author)


class CheckpointingToolStore:
    """The ``IdempotencyStore`` of a durable execution: envelopes fenced by the lease epoch,
    with a workspace checkpoint after every call that may have changed the workspace."""

    def __init__(self, db: Database, *, workspace: Path, base_commit: str, epoch: int,
                 author: GitAuthor, redactor: Redactor, owner: str | None = None,
                 max_bytes: int = MAX_PATCH_BYTES, last_sha256: str | None = None,
                 journal: DbEventSink | None = None) -> None:
        self.records = CheckpointRepository(db)
        self.recorded = RecordedCalls(db)
        self.journal = journal
        self.workspace = workspace
        self.base_commit = base_commit
        self.epoch = epoch
        self.owner = owner
        self.author = author
        self.redactor = redactor
        self.max_bytes = max_bytes
        self.last_sha256 = last_sha256
        self.taken = 0
        # The workspace's fingerprint when the last checkpoint was taken (None: unknown).
        self.seen: str | None = None
        self.skipped = 0

    def _checkpoint(self, execution_id: str) -> Checkpoint | None:
        """The workspace's checkpoint if it changed since the last one, else None.

        An unchanged fingerprint (:mod:`~services.runs.workspace_fingerprint`) since the last
        checkpoint taken by this store means unchanged files: no ``git`` is run."""
        state = fingerprint(self.workspace)
        if state is not None and state == self.seen:
            self.skipped += 1
            return None
        with tracing.span("studio.checkpoint", {"studio.execution_id": execution_id}):
            candidate = take_checkpoint(self.workspace, self.base_commit, self.author,
                                        self.max_bytes)
        self.seen = state
        return candidate if candidate.sha256 != self.last_sha256 else None

    def get(self, execution_id: str, call_id: str) -> dict[str, Any] | None:
        if not self.recorded.may_exist(execution_id, call_id):
            return None  # a new call: no read (see RecordedCalls)
        return self.records.envelope(execution_id, call_id)

    def put(self, execution_id: str, call_id: str, envelope: dict[str, Any]) -> None:
        checkpoint = None
        if (str(envelope.get("domain")), str(envelope.get("operation"))) not in READ_ONLY:
            checkpoint = self._checkpoint(execution_id)
        redacted = self.redactor.data(envelope)
        self.recorded.add(execution_id, call_id)
        if self.journal is not None:
            self.journal.defer(execution_id, CallWrite(
                execution_id, call_id, redacted, checkpoint, self.epoch, self.owner))
        else:
            self.records.record_call(execution_id, call_id, redacted, epoch=self.epoch,
                                     checkpoint=checkpoint, owner=self.owner)
        if checkpoint is not None:
            self.last_sha256 = checkpoint.sha256
            self.taken += 1
