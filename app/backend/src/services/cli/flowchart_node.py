"""``studio flowchart-node RUN_ID NODE_ID``: run one work node of a flowchart run, then advance it.

What the API starts, one child process per node, when no broker is configured
(:mod:`services.api.node_children`): the node (an agent loop, a command) never runs in the API's
process. The nodes that become ready are not run here: each is handed back to the parent as one
JSON line on stdout, ``{"dispatch": "<node id>"}``, printed as soon as it is claimed.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from services.settings import get_settings


def hand_back(_run_id: str, node_id: str) -> None:
    typer.echo(json.dumps({"dispatch": node_id}))


def flowchart_node_command(
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID")],
    node_id: Annotated[str, typer.Argument(metavar="NODE_ID")],
) -> None:
    """Run one work node of a flowchart run (the API's child process when there is no broker)."""
    from services.cli.database import open_db
    from services.flowcharts.service import FlowchartRunService

    db = open_db()
    try:
        FlowchartRunService(db, get_settings(), dispatch=hand_back).run_node(run_id, node_id)
    finally:
        db.dispose()
