"""Checks on the arguments of git operations, made before any git process sees them.

Anything that looks like an option (a leading ``-``) is refused, so no value can become
``--upload-pack=...`` or ``--output=...``; branch names go through ``git check-ref-format --branch``
and must come back unchanged (no ``@{-1}`` expansion); revisions are resolved to commit ids with
``rev-parse --verify --end-of-options``; paths go through confinement and pathspec magic (a
leading ``:``) is refused (git also runs with ``GIT_LITERAL_PATHSPECS=1``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from services.execution.confinement import Access, resolve_path
from services.execution.errors import ErrorCode, ToolFailure
from services.execution.tool_domains.context import ToolDomainContext
from services.execution.tool_domains.git.runner import GitAuthor, GitResult, run_git

MAX_REF_LENGTH = 255
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_RANGE = re.compile(r"^(.*?)(\.\.\.?)(.*)$")


def invalid(message: str, **details: object) -> ToolFailure:
    return ToolFailure(ErrorCode.INVALID_ARGUMENTS, message, details=dict(details))


def author_of(ctx: ToolDomainContext) -> GitAuthor:
    return GitAuthor(ctx.git_author_name, ctx.git_author_email)


def git(ctx: ToolDomainContext, args: Sequence[str], *, check: bool = True,
        stdin: bytes | None = None) -> GitResult:
    """``run_git`` in the context's workspace with the context's identity."""
    return run_git(ctx.resolved_workspace_root(), args, check=check, stdin=stdin,
                   author=author_of(ctx))


def plain_value(value: str, field: str) -> str:
    """Refuse values that git could read as an option, or that carry control characters."""
    if not value:
        raise invalid(f"{field} must not be empty", field=field)
    if value.startswith("-"):
        raise invalid(f"{field} must not start with '-'", field=field, value=value[:100])
    if _CONTROL.search(value) or len(value) > MAX_REF_LENGTH:
        raise invalid(f"{field} contains control characters or is too long", field=field)
    return value


def branch_name(ctx: ToolDomainContext, name: str, field: str = "name") -> str:
    """A valid, literal branch name (``check-ref-format --branch`` must echo it unchanged)."""
    plain_value(name, field)
    if name == "HEAD" or name.startswith("@"):
        raise invalid(f"{field} is not a valid branch name", field=field, value=name)
    checked = git(ctx, ["check-ref-format", "--branch", name], check=False)
    if checked.returncode != 0 or checked.text.strip() != name:
        raise invalid(f"{field} is not a valid branch name", field=field, value=name)
    return name


def commit_id(ctx: ToolDomainContext, ref: str, field: str = "ref") -> str:
    """The commit id ``ref`` names (a branch, tag, sha, ``HEAD~2``...)."""
    plain_value(ref, field)
    found = git(ctx, ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"],
                check=False)
    if found.returncode != 0:
        raise ToolFailure(ErrorCode.GIT_ERROR, f"unknown revision {ref!r}",
                          details={"field": field, "ref": ref})
    return found.text.strip()


def revision(ctx: ToolDomainContext, ref: str, field: str = "ref") -> str:
    """A commit id, or a range ``A..B`` / ``A...B`` whose sides are resolved to commit ids."""
    plain_value(ref, field)
    match = _RANGE.match(ref)
    if match is None:
        return commit_id(ctx, ref, field)
    left, dots, right = match.groups()
    left_id = commit_id(ctx, left or "HEAD", field)
    right_id = commit_id(ctx, right or "HEAD", field)
    return f"{left_id}{dots}{right_id}"


def confined_paths(ctx: ToolDomainContext, paths: Sequence[str], access: Access,
                   field: str = "paths") -> list[str]:
    """Workspace-relative spellings of ``paths``, each proven inside the workspace."""
    root = ctx.resolved_workspace_root()
    out: list[str] = []
    for raw in paths:
        plain_path = raw if raw else "."
        if plain_path.startswith("-"):
            raise invalid(f"{field} entries must not start with '-'", field=field, value=raw[:100])
        if plain_path.startswith(":"):
            raise invalid("pathspec magic (a leading ':') is not accepted", field=field,
                          value=raw[:100])
        resolved = resolve_path(root, plain_path, access=access, follow_final=False,
                                allow_workflows=ctx.allow_workflow_changes)
        out.append(resolved.display)
    return out


def current_branch(ctx: ToolDomainContext) -> str | None:
    """The checked-out branch, or ``None`` on a detached HEAD."""
    found = git(ctx, ["symbolic-ref", "--quiet", "--short", "HEAD"], check=False)
    name = found.text.strip()
    return name if found.returncode == 0 and name else None


def head_id(ctx: ToolDomainContext) -> str | None:
    """The commit HEAD points at, or ``None`` before the first commit."""
    found = git(ctx, ["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], check=False)
    return found.text.strip() if found.returncode == 0 else None
