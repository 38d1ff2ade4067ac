"""Flowcharts: the graph (flowcharts, nodes, edges) and its runs."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from services.db.base import Base, UTCDateTime, utcnow
from services.db.models.team_owned import TeamOwned


def new_id() -> str:
    """A fresh primary key: a uuid4 as text (full ids everywhere, no prefixes)."""
    return str(uuid.uuid4())


class Flowchart(TeamOwned, Base):
    __tablename__ = "flowcharts"

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    name: Mapped[str] = mapped_column(String(200))
    description: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, onupdate=utcnow)


class Node(Base):
    """A node of a flowchart: ``start``, ``agent``, ``command``, ``decision`` or ``end``."""

    __tablename__ = "nodes"
    __table_args__ = (UniqueConstraint("flowchart_id", "key"),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    flowchart_id: Mapped[str] = mapped_column(
        ForeignKey("flowcharts.id", ondelete="CASCADE"), index=True
    )
    key: Mapped[str] = mapped_column(String(100))
    type: Mapped[str] = mapped_column(String(32))
    name: Mapped[str] = mapped_column(String(200), default="")
    config: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class Edge(Base):
    """A directed edge; ``condition_key`` selects it after a decision node.

    ``key`` is the edge's id in the flowchart's graph (what validation errors name).
    """

    __tablename__ = "edges"
    __table_args__ = (UniqueConstraint("flowchart_id", "key"),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    flowchart_id: Mapped[str] = mapped_column(
        ForeignKey("flowcharts.id", ondelete="CASCADE"), index=True
    )
    key: Mapped[str] = mapped_column(String(100), server_default="")
    source_node_id: Mapped[str] = mapped_column(ForeignKey("nodes.id", ondelete="CASCADE"))
    target_node_id: Mapped[str] = mapped_column(ForeignKey("nodes.id", ondelete="CASCADE"))
    condition_key: Mapped[str | None] = mapped_column(String(100))


class FlowchartRun(TeamOwned, Base):
    """A run of a flowchart; ``graph`` is the graph as it was when the run started."""

    __tablename__ = "flowchart_runs"

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    flowchart_id: Mapped[str] = mapped_column(
        ForeignKey("flowcharts.id", ondelete="CASCADE"), index=True
    )
    status: Mapped[str] = mapped_column(String(32), default="queued")
    inputs: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    error_code: Mapped[str | None] = mapped_column(String(64))
    error_message: Mapped[str | None] = mapped_column(Text)
    graph: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    workspace: Mapped[str | None] = mapped_column(Text)
    max_node_executions: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    # who started it (an API token's id and name): its node executions' creator
    created_by_token: Mapped[str | None] = mapped_column(String(36))
    created_by: Mapped[str | None] = mapped_column(String(255))


class FlowchartRunNode(Base):
    """The state of one node in one run: pending, running, succeeded, failed, skipped, cancelled.

    ``node_key`` is the node's id in the run's graph; ``execution_id`` is the node execution of an
    agent or command node; ``result`` what downstream templates and decisions read.
    """

    __tablename__ = "flowchart_run_nodes"

    run_id: Mapped[str] = mapped_column(
        ForeignKey("flowchart_runs.id", ondelete="CASCADE"), primary_key=True
    )
    node_key: Mapped[str] = mapped_column(String(100), primary_key=True)
    type: Mapped[str] = mapped_column(String(32))
    state: Mapped[str] = mapped_column(String(16), default="pending")
    execution_id: Mapped[str | None] = mapped_column(
        ForeignKey("node_executions.id", ondelete="SET NULL")
    )
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    error_code: Mapped[str | None] = mapped_column(String(64))
    error_message: Mapped[str | None] = mapped_column(Text)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
