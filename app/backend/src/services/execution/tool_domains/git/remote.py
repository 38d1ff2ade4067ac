"""The git operations that leave the workspace: push, fetch and create_pull_request.

Push rules (SPEC section 2): only the execution's own branch (``ctx.branch``, else the current
branch) is pushed, as an explicit ``refs/heads/<b>:refs/heads/<b>`` refspec built here, never with
``--force``; the default branch (``ctx.default_branch``, else the branch ``origin/HEAD`` names,
else ``main`` and ``master``), any other branch, refspecs (``:``), forced refspecs (a leading
``+``) and a detached HEAD with no execution branch are refused with ``protected_branch``.
The token comes from ``ctx.git_auth`` as ``GIT_CONFIG_*`` environment of that one git process.
Network operations are refused when the repository's own config redirects or weakens the
transport (``url.*.insteadOf``, ``http.*``, a proxy for ``origin``).
"""

from __future__ import annotations

import re
from typing import Any

from services.execution.errors import ErrorCode, ToolFailure
from services.execution.tool_domains.context import ToolDomainContext
from services.execution.tool_domains.git.args import (
    author_of,
    branch_name,
    current_branch,
    git,
    head_id,
    invalid,
    plain_value,
)
from services.execution.tool_domains.git.redact import redact
from services.execution.tool_domains.git.runner import repository_config_names, run_git
from services.execution.tool_domains.spec import ToolArgs

REMOTE = "origin"
FALLBACK_DEFAULT_BRANCHES = frozenset({"main", "master"})
_NETWORK_OVERRIDES = re.compile(
    r"^(url\..*\.(insteadof|pushinsteadof)|http\..*|remote\.origin\.(proxy|vcs)|core\.gitproxy)$",
    re.IGNORECASE,
)


class PushArgs(ToolArgs):
    branch: str | None = None
    set_upstream: bool = True


class FetchArgs(ToolArgs):
    ref: str | None = None


class CreatePullRequestArgs(ToolArgs):
    title: str
    body: str = ""
    base: str | None = None
    draft: bool = False


def _protected(message: str, **details: object) -> ToolFailure:
    return ToolFailure(ErrorCode.PROTECTED_BRANCH, message, details=dict(details))


def protected_branches(ctx: ToolDomainContext) -> frozenset[str]:
    """The branches no tool call may push to."""
    if ctx.default_branch:
        return frozenset({ctx.default_branch})
    found = git(ctx, ["symbolic-ref", "--quiet", "--short", f"refs/remotes/{REMOTE}/HEAD"],
                check=False)
    name = found.text.strip()
    if found.returncode == 0 and name.startswith(f"{REMOTE}/"):
        return frozenset({name[len(REMOTE) + 1:]})
    return FALLBACK_DEFAULT_BRANCHES


def push_target(ctx: ToolDomainContext, requested: str | None) -> str:
    """The branch this push may update, or a refusal."""
    if requested is not None:
        plain_value(requested, "branch")
        if ":" in requested or requested.startswith("+"):
            raise _protected("refspecs and forced pushes are refused", branch=requested)
        branch_name(ctx, requested, "branch")
    allowed = ctx.branch or current_branch(ctx)
    if allowed is None:
        raise _protected("HEAD is detached: there is no branch to push")
    target = requested or allowed
    if target != allowed:
        raise _protected(f"only the execution's branch {allowed!r} may be pushed",
                         branch=target, allowed=allowed)
    if target in protected_branches(ctx):
        raise _protected(f"{target!r} is the default branch and is never pushed to",
                         branch=target)
    return target


def _refuse_network_overrides(ctx: ToolDomainContext) -> None:
    names = [n for n in repository_config_names(ctx.resolved_workspace_root())
             if _NETWORK_OVERRIDES.match(n.strip())]
    if names:
        raise ToolFailure(ErrorCode.GIT_ERROR,
                          "the repository's config redirects or changes the transport; "
                          "the harness does not push or fetch with it",
                          details={"config_keys": sorted(set(names))})


def remote_url(ctx: ToolDomainContext, *, push: bool) -> str:
    args = ["remote", "get-url", *(["--push"] if push else []), REMOTE]
    found = git(ctx, args, check=False)
    if found.returncode != 0 or not found.text.strip():
        raise ToolFailure(ErrorCode.GIT_ERROR, f"the repository has no remote named {REMOTE!r}")
    return found.text.strip()


def _network_git(ctx: ToolDomainContext, args: list[str], url: str) -> str:
    """Run a network operation with the execution's credentials; its stderr, redacted."""
    _refuse_network_overrides(ctx)
    env = dict(ctx.git_auth.environment(url)) if ctx.git_auth is not None else {}
    result = run_git(ctx.resolved_workspace_root(), args, env_extra=env, author=author_of(ctx))
    return redact(result.stderr.strip())


def push(args: PushArgs, ctx: ToolDomainContext) -> dict[str, Any]:
    target = push_target(ctx, args.branch)
    url = remote_url(ctx, push=True)
    argv = ["push", "--receive-pack=git-receive-pack", "--no-verify", "--no-signed",
            "--no-follow-tags", "--recurse-submodules=no"]
    if args.set_upstream:
        argv.append("--set-upstream")
    argv += ["--end-of-options", REMOTE, f"refs/heads/{target}:refs/heads/{target}"]
    output = _network_git(ctx, argv, url)
    sha = git(ctx, ["rev-parse", "--verify", f"refs/heads/{target}"]).text.strip()
    return {"branch": target, "remote": REMOTE, "remote_url": redact(url), "sha": sha,
            "set_upstream": args.set_upstream, "output": output}


def fetch(args: FetchArgs, ctx: ToolDomainContext) -> dict[str, Any]:
    argv = ["fetch", "--upload-pack=git-upload-pack", "--no-recurse-submodules",
            "--end-of-options", REMOTE]
    if args.ref is not None:
        plain_value(args.ref, "ref")
        if ":" in args.ref or args.ref.startswith("+"):
            raise invalid("ref must name one remote ref, not a refspec", field="ref")
        argv.append(args.ref)
    output = _network_git(ctx, argv, remote_url(ctx, push=False))
    fetched = git(ctx, ["rev-parse", "--verify", "--quiet", "FETCH_HEAD"], check=False)
    return {"remote": REMOTE, "ref": args.ref, "output": output,
            "fetch_head": fetched.text.strip() or None}


def create_pull_request(args: CreatePullRequestArgs, ctx: ToolDomainContext) -> dict[str, Any]:
    if ctx.pull_requests is None:
        raise ToolFailure(ErrorCode.INTEGRATION_UNAVAILABLE,
                          "no pull-request integration is configured for this execution")
    if not args.title.strip():
        raise invalid("title must not be empty", field="title")
    base = branch_name(ctx, args.base, "base") if args.base is not None else None
    head = current_branch(ctx)
    if head is None:
        raise _protected("HEAD is detached: check out the execution's branch first")
    if ctx.branch is not None and head != ctx.branch:
        raise _protected(f"pull requests are opened from the execution's branch {ctx.branch!r}",
                         branch=head, allowed=ctx.branch)
    ref = ctx.pull_requests.create_or_reuse(
        execution_id=ctx.execution_id, workspace=ctx.resolved_workspace_root(),
        head_branch=head, base_branch=base, title=args.title, body=args.body, draft=args.draft,
    )
    return {"number": ref.number, "url": ref.url, "head_branch": ref.head_branch,
            "base_branch": ref.base_branch, "created": ref.created, "head": head_id(ctx)}
