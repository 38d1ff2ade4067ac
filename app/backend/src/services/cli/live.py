"""Live progress on stderr: each tool call and its outcome as it happens (rich); verbose, each
command's stdout and stderr tails too.

A step prints two lines (the call, its outcome). Where the console shows no styles (stderr is
not a terminal: a file, a pipe) and a line's text holds nothing rich would change (nothing like
a markup tag, no backslash, control character or ``:name:`` emoji code), the line is written
as it is instead of through rich's rendering, which would print exactly that text; any other
line goes through rich (``tests/unit/cli/test_live.py`` compares both on such text).
"""

from __future__ import annotations

import json
import re
from typing import IO, Any

from rich.console import Console
from rich.markup import escape

from services.cli.journal_text import finalize_line, output_lines, setup_lines
from services.execution.ports import AgentEvent, AgentEventKind

ARGS_PREVIEW = 100
# what rich's markup, emoji codes and control-code handling would change in a printed text
_RICH_CHANGES = re.compile(r"\[[a-z#/@]|[\\\x00-\x1f\x7f]|:\S*?:")


def _preview(args: dict[str, Any]) -> str:
    text = json.dumps(args, ensure_ascii=False)
    return text if len(text) <= ARGS_PREVIEW else text[: ARGS_PREVIEW - 3] + "..."


def _outcome(envelope: dict[str, Any]) -> tuple[str, str]:
    """The outcome's markup, and the text it prints."""
    if not envelope.get("ok"):
        error = envelope.get("error") or {}
        code, message = str(error.get("code")), str(error.get("message"))
        return f"[red]✗ {escape(code)}[/]: {escape(message)}", f"✗ {code}: {message}"
    result = envelope.get("result") or {}
    if "exit_code" in result:
        if result.get("exit_code") == 0:
            return "[green]exit 0[/]", "exit 0"
        text = f"exit {result.get('exit_code')} FAILED"
        return f"[red]{text}[/]", text
    return "[green]✓[/]", "✓"


class LiveConsoleSink:
    """An EventSink that narrates the run on stderr."""

    def __init__(self, console: Console | None = None, *, verbose: bool = False) -> None:
        self.console = console or Console(stderr=True, highlight=False, soft_wrap=True)
        self.verbose = verbose
        self._plain_file: IO[str] | None = None  # the file known to take plain text
        self._styled_file: IO[str] | None = None  # the file known to need rich

    def _print(self, markup: str, plain: str) -> None:
        """Print ``markup``; ``plain`` is the text rich would print for it on a console without
        styles (module docstring)."""
        if _RICH_CHANGES.search(plain) is None and self._plain():
            file = self.console.file
            file.write(plain + "\n")
            file.flush()
            return
        self.console.print(markup)

    def _plain(self) -> bool:
        """Whether the console prints text as it is: no styles, nothing recorded, not quiet
        (asked once per file: stderr can be swapped)."""
        console = self.console
        if console.record or console.quiet:
            return False
        file = console.file
        if file is not self._plain_file and file is not self._styled_file:
            if (console.color_system is None and not console.is_terminal
                    and not console.is_jupyter):
                self._plain_file = file
            else:
                self._styled_file = file
        return file is self._plain_file

    def emit(self, event: AgentEvent) -> None:
        data = event.data
        if event.kind is AgentEventKind.STARTED:
            self.console.print(f"[bold]▶ {escape(str(data.get('provider')))}[/] "
                               f"({escape(str(data.get('model')))}) "
                               f"execution {event.execution_id}")
        elif event.kind is AgentEventKind.TOOL_CALL:
            call = data.get("call") or {}
            args = _preview(call.get("args") or {})
            name = f"{call.get('domain')}.{call.get('operation')}"
            self._print(f"  [cyan]{event.cycle:>3}[/] {name} {escape(args)}",
                        f"  {event.cycle:>3} {name} {args}")
        elif event.kind is AgentEventKind.TOOL_RESULT:
            envelope = data.get("envelope") or {}
            markup, plain = _outcome(envelope)
            self._print(f"      {markup}", f"      {plain}")
            result = envelope.get("result")
            if self.verbose and isinstance(result, dict) and "exit_code" in result:
                for line in output_lines(result, indent="        "):
                    self._print(escape(line), line)
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
