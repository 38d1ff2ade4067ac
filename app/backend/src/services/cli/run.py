"""``studio run``: the loop on an existing directory (``--workspace``) or on a fresh clone of a
repository (``--repo``: clone, loop, commit, push, pull request), live on stderr, one JSON line
with ``--json``.

Both record the execution and run it in this process through
:class:`services.runs.service.ExecutionService`; ``--repo`` takes the same code path as ``studio
execute`` (:func:`services.runs.durable.execute_execution`) and its JSON line adds ``branch``,
``head_sha`` and ``pr_url``. The token comes from ``STUDIO_GITHUB_TOKEN`` or the stored
integration; a local path is accepted as the repository (from the CLI only).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, cast

import typer

from services.cli.database import open_db
from services.cli.execute import report
from services.execution.errors import ConfigError, ExecutionError
from services.settings import get_settings

if TYPE_CHECKING:
    from services.execution.agent_profile import AgentProfile
    from services.runs.request import ExecutionRequest


def _usage_error(message: str) -> NoReturn:
    typer.echo(f"studio run: {message}", err=True)
    raise typer.Exit(2)


def run_command(
    prompt: Annotated[str, typer.Argument(help="What the agent should do.")],
    workspace: Annotated[Path | None, typer.Option(
        "--workspace", help="An existing directory (or use --repo).")] = None,
    repo: Annotated[str | None, typer.Option(
        "--repo", help="Repository URL (or local path) to clone, change, push and PR.")] = None,
    base: Annotated[str | None, typer.Option(
        "--base", help="Base branch (default: the remote's HEAD).")] = None,
    pull_request: Annotated[bool, typer.Option(
        "--pr/--no-pr", help="Open (or reuse) a pull request at the end (--repo).")] = True,
    pr_number: Annotated[int | None, typer.Option(
        "--pr-number", min=1, help="A follow-up on this pull request of --repo: its branch, "
        "one more commit, through its slot, with the repository's trigger settings.")] = None,
    github_repo: Annotated[str | None, typer.Option(
        "--github-repo", help="OWNER/NAME on GitHub when the URL does not say.")] = None,
    keep_workspace: Annotated[bool, typer.Option(help="Keep the clone (--repo).")] = False,
    provider: Annotated[str, typer.Option(help="codex | gemini | claude | replay")] = "replay",
    model: Annotated[str | None, typer.Option(help="Model name (provider default).")] = None,
    script: Annotated[Path | None, typer.Option(help="Replay script (JSON).")] = None,
    max_iterations: Annotated[int | None, typer.Option(min=1)] = None,
    max_budget_usd: Annotated[float | None, typer.Option(min=0.0)] = None,
    setup: Annotated[list[str] | None, typer.Option(
        "--setup", help="A setup command run before the model, network only to the allowlist "
                        "(--repo; repeatable).")] = None,
    network: Annotated[str, typer.Option(
        help="The agent's commands: offline, or allowlist (through the egress proxy).")
    ] = "offline",
    allow_host: Annotated[list[str] | None, typer.Option(
        "--allow-host", help="A host name or .suffix added to STUDIO_SETUP_ALLOWLIST for this "
                             "run (repeatable).")] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print one JSON line last.")] = False,
    verbose: Annotated[bool, typer.Option(
        "--verbose", "-v", help="Print each command's output tails as it ends.")] = False,
    role: Annotated[str | None, typer.Option(
        help="implementer | reviewer | tester: a prompt and a tool subset.")] = None,
    system_prompt: Annotated[str | None, typer.Option(
        "--system-prompt", help="Text added to the agent's system prompt.")] = None,
    mcp_servers: Annotated[list[str] | None, typer.Option(
        "--mcp-server", help="A stored MCP server this agent gets (repeatable).")] = None,
    models: Annotated[list[str] | None, typer.Option(
        "--models", help="provider[:model], in the order tried when a provider stays "
        "unavailable; the first is --provider/--model (repeatable).")] = None,
    approval_policy: Annotated[str | None, typer.Option(
        "--approval-policy", help='JSON: {"domain.operation" | "domain.*" | "*": '
        '"allow" | "deny" | "require"} (require needs --repo).')] = None,
    team: Annotated[str | None, typer.Option(
        "--team", help="The team the execution belongs to (default: the repository's team, "
                       "else 'default').")] = None,
) -> None:
    """Run the agent loop on a directory or a repository; every run is recorded as an execution."""
    # The loop, the providers and the durable path are imported when the command runs.
    from services.cli.live import LiveConsoleSink
    from services.cli.telemetry import start_tracing
    from services.execution.agent_profile import primary_model
    from services.execution.providers.profiles import PROFILES, PROVIDERS
    from services.runs.request import ExecutionRequest
    from services.runs.service import ExecutionService

    start_tracing("studio-run")
    if pr_number is not None:
        if repo is None:
            _usage_error("--pr-number needs --repo")
        from services.cli.follow_up import follow_up

        follow_up(repo, pr_number, prompt)
        return
    if provider not in PROVIDERS:
        _usage_error(f"unknown provider {provider!r}; choose one of {', '.join(PROVIDERS)}")
    if (workspace is None) == (repo is None):
        _usage_error("give exactly one of --workspace DIR and --repo URL")
    if PROFILES[provider].needs_script and script is None:
        _usage_error(f"the {provider} provider needs --script FILE")
    profile = _profile(provider, model, role, system_prompt, mcp_servers, models)
    model = model or primary_model(profile)
    overrides = {k: v for k, v in {"max_iterations": max_iterations,
                                   "max_budget_usd": max_budget_usd}.items() if v is not None}
    policy = _approval_policy(approval_policy, in_place=repo is None)
    if repo is not None:
        try:
            repo_request = ExecutionRequest(
                provider=provider, prompt=prompt, repo_url=repo, model=model, base_branch=base,
                pull_request=pull_request, script=_script(script), github_repo=github_repo,
                allow_local=True, limit_overrides=overrides, profile=profile,
                approval_policy=policy, setup=tuple(setup or ()),
                network=network, network_allowlist=tuple(allow_host or ()))
        except ConfigError as exc:
            _usage_error(exc.message)
        _run_repo(repo_request, keep_workspace, json_output, verbose, _team_id(team))
    assert workspace is not None
    if setup or allow_host or network != "offline":
        _usage_error("--setup, --network and --allow-host need --repo")
    if not workspace.is_dir():
        _usage_error(f"--workspace {workspace} is not a directory")
    service = ExecutionService(open_db(), get_settings(), team_id=_team_id(team))
    request = ExecutionRequest(provider=provider, prompt=prompt, workspace=workspace.resolve(),
                               model=model, script=script, limit_overrides=overrides,
                               profile=profile, approval_policy=policy)
    try:
        result = service.run(request, sinks=[LiveConsoleSink(verbose=verbose)]).run
    except ConfigError as exc:
        _usage_error(exc.message)
    assert result is not None  # a run in place always ends with the loop's result
    if json_output:
        typer.echo(json.dumps(result.summary(), separators=(",", ":")))
    else:
        typer.echo(result.result.model_dump_json(indent=2))
    raise typer.Exit(0 if result.succeeded else 1)


def _profile(provider: str, model: str | None, role: str | None, system_prompt: str | None,
             mcp_servers: list[str] | None, models: list[str] | None) -> AgentProfile:
    from services.execution.agent_profile import ProfileError
    from services.execution.profile_checks import agent_profile

    try:
        return agent_profile(provider, model, role=role, system_prompt=system_prompt,
                             mcp_servers=mcp_servers or None, models=models or None)
    except ProfileError as exc:
        _usage_error(f"{exc.code}: {exc.message}")


def _approval_policy(raw: str | None, *, in_place: bool) -> dict[str, str]:
    """The ``--approval-policy`` JSON, validated (services.execution.approvals)."""
    from services.execution.approvals import Rule, parse_policy

    if raw is None:
        return {}
    try:
        data = json.loads(raw)
    except ValueError as exc:
        _usage_error(f"invalid_approval_policy: --approval-policy is not JSON: {exc}")
    try:
        policy = parse_policy(data)
    except ConfigError as exc:
        _usage_error(str(exc))
    if in_place and Rule.REQUIRE in policy.rules.values():
        _usage_error("invalid_approval_policy: a \"require\" rule needs a repository run "
                     "(--repo): a run in place cannot wait for an approval")
    return policy.as_json()


def _script(path: Path | None) -> dict[str, Any] | None:
    """The replay script, stored inline on the execution (any process can replay it)."""
    if path is None:
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        _usage_error(f"cannot read the replay script {path}: {exc}")
    if not isinstance(data, dict):
        _usage_error("the replay script must be a JSON object")
    return cast(dict[str, Any], data)


def _team_id(team: str | None) -> str | None:
    """The id of the team ``--team`` names (a usage error for an unknown one)."""
    if team is None:
        return None
    from services.db.teams import TeamStore, UnknownTeam

    db = open_db()
    try:
        return TeamStore(db).id_of(team)
    except UnknownTeam as exc:
        _usage_error(str(exc))
        raise AssertionError("unreachable") from exc
    finally:
        db.dispose()


def _run_repo(request: ExecutionRequest, keep_workspace: bool, json_output: bool,
              verbose: bool, team_id: str | None = None) -> None:
    from services.cli.live import LiveConsoleSink
    from services.runs.service import ExecutionService

    db = open_db()
    try:
        outcome = ExecutionService(db, get_settings(), team_id=team_id).run(
            request, sinks=[LiveConsoleSink(verbose=verbose)], keep_workspace=keep_workspace)
    except ExecutionError as exc:
        _usage_error(str(exc))  # "code: message"
        raise AssertionError("unreachable") from exc
    finally:
        db.dispose()
    report(outcome, json_output)
