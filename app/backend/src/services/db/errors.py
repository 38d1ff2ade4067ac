"""``NotFound``: the one base of every "no such id" error.

Raised by the repositories (and the services above them) for an id nobody stored:
:class:`~services.db.executions.UnknownExecution`,
:class:`~services.db.flowcharts.UnknownFlowchart`,
:class:`~services.db.flowcharts.UnknownFlowchartRun`,
:class:`~services.db.runtime_settings.UnknownSetting`. The API answers every one of them with
``404 not_found`` in one place (:mod:`services.api.errors`); the CLI prints the message.
"""

from __future__ import annotations

from typing import Any


class NotFound(LookupError):
    """No ``what`` has the id ``ident``; ``details`` go into the API's error envelope."""

    what = "object"

    def __init__(self, ident: str, **details: Any) -> None:
        super().__init__(ident)
        self.ident = ident
        self.details: dict[str, Any] = {"id": ident, **details}

    def __str__(self) -> str:
        return f"no {self.what} {self.ident}"
