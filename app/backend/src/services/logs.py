"""Structured logs: one JSON object per line on stderr, level from ``STUDIO_LOG_LEVEL``.

Records may carry a ``studio`` mapping of fields (the tool-call log does); they are merged into
the line. Secrets are redacted before a record is built (events pass a redacting sink first).
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

_CONFIGURED = "_studio_json_logs"


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname.lower(), "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, "studio", None)
        if isinstance(fields, dict):
            line.update(fields)
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str, ensure_ascii=False)


def configure_logging(level: str) -> None:
    """JSON lines on stderr at ``level`` (once per process)."""
    root = logging.getLogger()
    if any(getattr(h, _CONFIGURED, False) for h in root.handlers):
        _set_level(root, level)
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    setattr(handler, _CONFIGURED, True)
    root.addHandler(handler)
    _set_level(root, level)


def _set_level(root: logging.Logger, level: str) -> None:
    """``root.setLevel(level)``, unless the root logger is at that level already:
    ``setLevel`` empties the level cache of every logger of the process, which in a child of
    the worker's fork server writes into (and so copies) the page of each of its loggers, about
    0.4 MB per execution for a level that did not change (the default, ``WARNING``, is Python's
    own; :doc:`benchmarks`). A name ``logging`` does not know is refused as before."""
    if logging.getLevelName(level.upper()) != root.level:
        root.setLevel(level.upper())
