"""Flowcharts: the graph (flowcharts, nodes, edges) and its runs."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from services.db.base import Base, UTCDateTime, utcnow


def new_id() -> str:
    """A fresh primary key: a uuid4 as text (full ids everywhere, no prefixes)."""
    return str(uuid.uuid4())


class Flowchart(Base):
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
    """A directed edge; ``condition_key`` selects it after a decision node."""

    __tablename__ = "edges"

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    flowchart_id: Mapped[str] = mapped_column(
        ForeignKey("flowcharts.id", ondelete="CASCADE"), index=True
    )
    source_node_id: Mapped[str] = mapped_column(ForeignKey("nodes.id", ondelete="CASCADE"))
    target_node_id: Mapped[str] = mapped_column(ForeignKey("nodes.id", ondelete="CASCADE"))
    condition_key: Mapped[str | None] = mapped_column(String(100))


class FlowchartRun(Base):
    __tablename__ = "flowchart_runs"

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    flowchart_id: Mapped[str] = mapped_column(
        ForeignKey("flowcharts.id", ondelete="CASCADE"), index=True
    )
    status: Mapped[str] = mapped_column(String(32), default="queued")
    inputs: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    error_code: Mapped[str | None] = mapped_column(String(64))
    error_message: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
