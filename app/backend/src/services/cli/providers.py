"""``studio providers``: the provider capability matrix, as a table or (``--json``) one JSON line.

The data is :mod:`services.execution.providers.capabilities`, the same matrix the docs page
``node_executor_runtime`` publishes and the conformance table asserts.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from services.composition import sandbox_report
from services.execution.legacy.capabilities import LEGACY_CLIS, legacy_matrix
from services.execution.providers.capabilities import (
    CAPABILITIES,
    FLAGS,
    GUARD_TITLES,
    GUARDS,
    matrix,
)
from services.settings import get_settings

if TYPE_CHECKING:
    from rich.table import Table


def _yes_no(value: bool) -> str:
    return "yes" if value else "no"


def capability_table() -> Table:
    """Providers as columns, one row per capability, then one per guard (where it acts)."""
    from rich.table import Table

    table = Table(title="Provider capabilities", show_lines=True)
    table.add_column("capability", style="bold", no_wrap=True)
    for name in CAPABILITIES:
        table.add_column(name, overflow="fold")
    rows: list[tuple[str, list[str]]] = [
        ("sdk", [c.sdk for c in CAPABILITIES.values()]),
        ("wire", [c.wire or "none" for c in CAPABILITIES.values()]),
    ]
    rows += [(flag, [_yes_no(bool(getattr(c, flag))) for c in CAPABILITIES.values()])
             for flag in FLAGS]
    rows += [
        ("base_url_env", [c.base_url_env or "-" for c in CAPABILITIES.values()]),
        ("cost_semantic", [c.cost_semantic for c in CAPABILITIES.values()]),
    ]
    rows += [(f"guard: {GUARD_TITLES[g]}", [c.guards[g] for c in CAPABILITIES.values()])
             for g in GUARDS]
    for label, cells in rows:
        table.add_row(label, *cells)
    return table


def legacy_table() -> Table:
    """The legacy runtime (cutover off): each provider's agent CLI and where each guard acts."""
    from rich.table import Table

    table = Table(title="Legacy runtime (agent_runtime_cutover_enabled=false)", show_lines=True)
    table.add_column("legacy", style="bold", no_wrap=True)
    for name in CAPABILITIES:
        table.add_column(name, overflow="fold")
    infos = [LEGACY_CLIS.get(name) for name in CAPABILITIES]
    refused = "none: refused (unsupported_capability)"
    rows: list[tuple[str, list[str]]] = [
        ("cli", [i.cli if i else refused for i in infos]),
        ("invocation", [i.invocation if i else "-" for i in infos]),
        ("project config off", [i.project_config_off if i else "-" for i in infos]),
    ]
    rows += [(f"guard: {GUARD_TITLES[g]}", [i.guards[g] if i else "-" for i in infos])
             for g in GUARDS]
    for label, cells in rows:
        table.add_row(label, *cells)
    return table


def providers_command(
    as_json: Annotated[bool, typer.Option("--json", help="One JSON line on stdout.")] = False,
) -> None:
    """Print the capability matrix of every provider (and where each guard acts for it) for both
    runtimes, the SDK loop and the legacy agent CLIs, and the command sandbox (a loud warning on
    stderr when commands run unconfined)."""
    sandbox = sandbox_report(get_settings())
    if sandbox["warning"]:
        typer.secho(f"WARNING: {sandbox['warning']}", err=True, fg=typer.colors.RED, bold=True)
    if as_json:
        typer.echo(json.dumps({"providers": matrix(), "guards": list(GUARDS),
                               "legacy_runtime": legacy_matrix(), "sandbox": sandbox},
                              separators=(",", ":")))
        return
    from rich.console import Console

    console = Console(width=160)
    console.print(capability_table())
    console.print(legacy_table())
    typer.echo(f"command sandbox: {sandbox['mode']} (STUDIO_SANDBOX={sandbox['configured']})")
