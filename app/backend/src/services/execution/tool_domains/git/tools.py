"""The ``git`` tool domain: structured answers from the harness's hardened git.

Every operation runs git through :mod:`git_runner` (hooks, fsmonitor, filters, pagers and the
user's own config never apply), checks its arguments first with :mod:`git_args` (no value can be
read as an option, paths are confined), and answers with parsed, structured data. Push, fetch and
pull requests live in :mod:`git_remote`. Commits are authored by the execution's identity; they
never include changes under ``.github/workflows/`` unless the execution allows them.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from services.execution.confinement import Access
from services.execution.errors import ErrorCode, ToolFailure
from services.execution.tool_domains.context import ToolDomainContext
from services.execution.tool_domains.git import remote as git_remote
from services.execution.tool_domains.git.args import (
    branch_name,
    commit_id,
    confined_paths,
    current_branch,
    git,
    head_id,
    invalid,
    plain_value,
    revision,
)
from services.execution.tool_domains.git.parse import (
    LOG_FORMAT,
    cap_text,
    merge_files,
    parse_log,
    parse_status,
)
from services.execution.tool_domains.git.runner import DIFF_SAFE
from services.execution.tool_domains.spec import ToolArgs, ToolSpec

WORKFLOWS_DIR = ".github/workflows/"
MAX_MESSAGE_CHARS = 20_000


class NoArgs(ToolArgs):
    pass


class DiffArgs(ToolArgs):
    ref: str | None = None
    staged: bool = False
    paths: list[str] = Field(default_factory=list, max_length=200)


class LogArgs(ToolArgs):
    ref: str = "HEAD"
    max_count: int = Field(default=20, ge=1, le=500)


class ShowArgs(ToolArgs):
    ref: str


class CreateBranchArgs(ToolArgs):
    name: str
    start_point: str | None = None
    checkout: bool = True


class CheckoutArgs(ToolArgs):
    ref: str


class AddArgs(ToolArgs):
    paths: list[str] = Field(default_factory=lambda: ["."], min_length=1, max_length=200)


class CommitArgs(ToolArgs):
    message: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)
    all: bool = False
    allow_empty: bool = False


class RestoreArgs(ToolArgs):
    paths: list[str] = Field(min_length=1, max_length=200)


def status(_: NoArgs, ctx: ToolDomainContext) -> dict[str, Any]:
    raw = git(ctx, ["status", "--porcelain=v2", "-z", "--branch", "--untracked-files=normal"])
    result = parse_status(raw.stdout)
    result["clean"] = not result["entries"]
    return result


def _changes(ctx: ToolDomainContext, base: list[str], tail: list[str]) -> dict[str, Any]:
    """Files (status and line counts) and the capped patch of one diff."""
    numstat = git(ctx, [*base, "--numstat", "-z", *tail]).stdout
    names = git(ctx, [*base, "--name-status", "-z", *tail]).stdout
    patch, truncated = cap_text(git(ctx, [*base, "--patch", *tail]).stdout, ctx.output_cap_bytes)
    return {"files": merge_files(numstat, names), "patch": patch, "truncated": truncated}


def diff(args: DiffArgs, ctx: ToolDomainContext) -> dict[str, Any]:
    paths = confined_paths(ctx, args.paths, Access.READ)
    base = ["diff", *DIFF_SAFE, *(["--cached"] if args.staged else [])]
    tail = ["--end-of-options", revision(ctx, args.ref)] if args.ref is not None else []
    tail += ["--", *paths]
    return {"ref": args.ref, "staged": args.staged, "paths": paths, **_changes(ctx, base, tail)}


def log(args: LogArgs, ctx: ToolDomainContext) -> dict[str, Any]:
    if args.ref == "HEAD" and head_id(ctx) is None:
        return {"ref": args.ref, "commits": []}
    rev = revision(ctx, args.ref)
    raw = git(ctx, ["log", *DIFF_SAFE, "--no-show-signature", "-z", f"--max-count={args.max_count}",
                    f"--format={LOG_FORMAT}", "--end-of-options", rev, "--"])
    return {"ref": args.ref, "commits": parse_log(raw.stdout)}


def show(args: ShowArgs, ctx: ToolDomainContext) -> dict[str, Any]:
    sha = commit_id(ctx, args.ref)
    meta = parse_log(git(ctx, ["log", "-1", "--no-show-signature", "-z", f"--format={LOG_FORMAT}",
                               "--end-of-options", sha, "--"]).stdout)[0]
    message = git(ctx, ["log", "-1", "--no-show-signature", "--format=%B", "--end-of-options",
                        sha, "--"]).text.rstrip("\n")
    base = ["show", *DIFF_SAFE, "--no-show-signature", "--format=", "--diff-merges=first-parent"]
    return {**meta, "message": message, **_changes(ctx, base, ["--end-of-options", sha, "--"])}


def current_branch_op(_: NoArgs, ctx: ToolDomainContext) -> dict[str, Any]:
    branch = current_branch(ctx)
    return {"branch": branch, "detached": branch is None and head_id(ctx) is not None,
            "head": head_id(ctx)}


def list_branches(_: NoArgs, ctx: ToolDomainContext) -> dict[str, Any]:
    fmt = "%(refname)%00%(objectname)%00%(upstream:short)%00%(HEAD)%00%(symref)"
    raw = git(ctx, ["for-each-ref", f"--format={fmt}", "refs/heads", "refs/remotes"]).text
    branches = []
    for line in raw.splitlines():
        refname, sha, upstream, head, symref = (line.split("\0") + [""] * 5)[:5]
        if symref:  # origin/HEAD and the like: an alias, not a branch
            continue
        remote = refname.startswith("refs/remotes/")
        name = refname.removeprefix("refs/remotes/" if remote else "refs/heads/")
        branches.append({"name": name, "remote": remote, "sha": sha,
                         "upstream": upstream or None, "current": head == "*"})
    return {"current": current_branch(ctx), "branches": branches}


def create_branch(args: CreateBranchArgs, ctx: ToolDomainContext) -> dict[str, Any]:
    name = branch_name(ctx, args.name)
    start = commit_id(ctx, args.start_point, "start_point") if args.start_point else None
    if args.checkout:
        git(ctx, ["switch", "--no-guess", "--no-track", "-c", name,
                  *(["--end-of-options", start] if start else [])])
    else:
        git(ctx, ["branch", "--no-track", "--end-of-options", name, start or "HEAD"])
    return {"branch": name, "head": commit_id(ctx, f"refs/heads/{name}"),
            "checked_out": args.checkout}


def checkout(args: CheckoutArgs, ctx: ToolDomainContext) -> dict[str, Any]:
    ref = plain_value(args.ref, "ref")
    local = git(ctx, ["show-ref", "--verify", "--quiet", f"refs/heads/{ref}"], check=False)
    tracked = git(ctx, ["show-ref", "--verify", "--quiet", f"refs/remotes/origin/{ref}"],
                  check=False)
    if local.returncode == 0:
        git(ctx, ["switch", "--no-guess", "--end-of-options", ref])
    elif tracked.returncode == 0:
        branch_name(ctx, ref, "ref")
        git(ctx, ["switch", "--no-guess", "-c", ref, "--track", f"refs/remotes/origin/{ref}"])
    else:
        git(ctx, ["switch", "--detach", "--end-of-options", commit_id(ctx, ref)])
    branch = current_branch(ctx)
    return {"branch": branch, "detached": branch is None, "head": head_id(ctx)}


def _staged_paths(ctx: ToolDomainContext) -> list[str]:
    raw = git(ctx, ["diff", *DIFF_SAFE, "--cached", "--name-only", "--no-renames", "-z"]).text
    return [p for p in raw.split("\0") if p]


def add(args: AddArgs, ctx: ToolDomainContext) -> dict[str, Any]:
    paths = confined_paths(ctx, args.paths, Access.WRITE)
    git(ctx, ["add", "--", *paths])
    return {"added": paths, "staged": _staged_paths(ctx)}


def commit(args: CommitArgs, ctx: ToolDomainContext) -> dict[str, Any]:
    if not args.message.strip():
        raise invalid("message must not be blank", field="message")
    if args.all:
        git(ctx, ["add", "--update"])
    staged = _staged_paths(ctx)
    if not staged and not args.allow_empty:
        raise ToolFailure(ErrorCode.NOTHING_TO_COMMIT, "nothing is staged for commit")
    workflows = [p for p in staged if p.casefold().startswith(WORKFLOWS_DIR)]
    if workflows and not ctx.allow_workflow_changes:
        raise ToolFailure(ErrorCode.PROTECTED_PATH,
                          "changes under .github/workflows/ are not allowed for this execution",
                          details={"paths": workflows})
    git(ctx, ["commit", "--no-verify", "--no-gpg-sign", "--cleanup=whitespace", "--file=-",
              *(["--allow-empty"] if args.allow_empty else [])],
        stdin=args.message.encode("utf-8"))
    sha = head_id(ctx)
    return {"sha": sha, "branch": current_branch(ctx), "files": staged,
            "subject": args.message.strip().splitlines()[0]}


def restore(args: RestoreArgs, ctx: ToolDomainContext) -> dict[str, Any]:
    paths = confined_paths(ctx, args.paths, Access.WRITE)
    git(ctx, ["restore", "--source=HEAD", "--staged", "--worktree", "--", *paths])
    return {"restored": paths}


def _spec(operation: str, description: str, args_model: type[ToolArgs], handler: Any,
          mutates: bool = False) -> ToolSpec:
    return ToolSpec(domain="git", operation=operation, description=description,
                    args_model=args_model, handler=handler, mutates=mutates)


SPECS: tuple[ToolSpec, ...] = (
    _spec("status", "Branch, upstream, ahead/behind and changed paths of the workspace.",
          NoArgs, status),
    _spec("diff", "Changed files with line counts and the patch (capped). ref=null compares "
          "the worktree (or, with staged=true, the index) with the index (or HEAD).",
          DiffArgs, diff),
    _spec("log", "Commits reachable from ref (a revision or a range A..B), newest first.",
          LogArgs, log),
    _spec("show", "One commit: metadata, message, changed files and patch (capped).",
          ShowArgs, show),
    _spec("current_branch", "The checked-out branch (null when HEAD is detached).",
          NoArgs, current_branch_op),
    _spec("list_branches", "Local and remote branches; the current one is marked.",
          NoArgs, list_branches),
    _spec("create_branch", "Create a branch at start_point (default HEAD) and check it out.",
          CreateBranchArgs, create_branch, mutates=True),
    _spec("checkout", "Switch to a branch (a remote branch of origin gets a local tracking "
          "branch) or detach at a commit.", CheckoutArgs, checkout, mutates=True),
    _spec("add", "Stage paths (default: everything).", AddArgs, add, mutates=True),
    _spec("commit", "Commit the staged changes (all=true stages tracked changes first).",
          CommitArgs, commit, mutates=True),
    _spec("push", "Push the execution's branch to origin (never the default branch, never "
          "forced).", git_remote.PushArgs, git_remote.push, mutates=True),
    _spec("fetch", "Fetch from origin (one ref, or everything).", git_remote.FetchArgs,
          git_remote.fetch, mutates=True),
    _spec("restore", "Discard changes to paths (index and worktree back to HEAD).",
          RestoreArgs, restore, mutates=True),
    _spec("create_pull_request", "Open (or reuse) the pull request of the execution's branch.",
          git_remote.CreatePullRequestArgs, git_remote.create_pull_request, mutates=True),
)
