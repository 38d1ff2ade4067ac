"""Live progress on stderr: each tool call and its outcome as it happens (rich); verbose, each
command's stdout and stderr tails too."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.markup import escape

from services.cli.journal_text import finalize_line, output_lines, setup_lines
from services.execution.ports import AgentEvent, AgentEventKind

ARGS_PREVIEW = 100


def _preview(args: dict[str, Any]) -> str:
    text = json.dumps(args, ensure_ascii=False)
    return text if len(text) <= ARGS_PREVIEW else text[: ARGS_PREVIEW - 3] + "..."


def _outcome(envelope: dict[str, Any]) -> str:
    if not envelope.get("ok"):
        error = envelope.get("error") or {}
        return f"[red]✗ {escape(str(error.get('code')))}[/]: {escape(str(error.get('message')))}"
    result = envelope.get("result") or {}
    if "exit_code" in result:
        if result.get("exit_code") == 0:
            return "[green]exit 0[/]"
        return f"[red]exit {result.get('exit_code')} FAILED[/]"
    return "[green]✓[/]"


class LiveConsoleSink:
    """An EventSink that narrates the run on stderr."""

    def __init__(self, console: Console | None = None, *, verbose: bool = False) -> None:
        self.console = console or Console(stderr=True, highlight=False, soft_wrap=True)
        self.verbose = verbose

    def emit(self, event: AgentEvent) -> None:
        data = event.data
        if event.kind is AgentEventKind.STARTED:
            self.console.print(f"[bold]▶ {escape(str(data.get('provider')))}[/] "
                               f"({escape(str(data.get('model')))}) "
                               f"execution {event.execution_id}")
        elif event.kind is AgentEventKind.TOOL_CALL:
            call = data.get("call") or {}
            args = escape(_preview(call.get("args") or {}))
            self.console.print(f"  [cyan]{event.cycle:>3}[/] {call.get('domain')}."
                               f"{call.get('operation')} {args}")
        elif event.kind is AgentEventKind.TOOL_RESULT:
            envelope = data.get("envelope") or {}
            self.console.print(f"      {_outcome(envelope)}")
            result = envelope.get("result")
            if self.verbose and isinstance(result, dict) and "exit_code" in result:
                for line in output_lines(result, indent="        "):
                    self.console.print(escape(line))
        elif event.kind is AgentEventKind.FINALIZE:
            self.console.print(f"  {escape(finalize_line(data))}")
        elif event.kind is AgentEventKind.WARNING:
            self.console.print(f"  [yellow]! {escape(str(data.get('message')))}[/]")
        elif event.kind is AgentEventKind.FINISHED:
            self._finished(data)
        elif event.kind in (AgentEventKind.SETUP, AgentEventKind.NETWORK):
            if data.get("status") == "output" and not self.verbose:
                return
            for line in setup_lines(event.kind.value, data):
                self.console.print(f"  {escape(line)}")

    def _finished(self, data: dict[str, Any]) -> None:
        usage = data.get("usage") or {}
        result = data.get("result") or {}
        self.console.print(
            f"[bold]■ {escape(str(data.get('outcome')))}[/] status={data.get('status')} "
            f"iterations={data.get('iterations')} tokens={usage.get('input_tokens')}/"
            f"{usage.get('output_tokens')} cost=${usage.get('cost_usd', 0):.4f}")
        if result.get("summary"):
            self.console.print(f"  {escape(str(result['summary']))}")
        if data.get("error"):
            self.console.print(f"  [red]{escape(str(data['error']))}[/]")
