"""The live console (``services.cli.live``): a step's lines written as plain text where the
console shows no styles, the same text rich prints."""

from __future__ import annotations

import io
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from services.cli.live import LiveConsoleSink
from services.execution.ports import AgentEvent, AgentEventKind


class CountingConsole(Console):
    """A console that counts the lines it renders (rich's own ``print``)."""

    rendered = 0

    def print(self, *objects: Any, **kwargs: Any) -> None:
        self.rendered += 1
        super().print(*objects, **kwargs)


def _console(**kwargs: Any) -> CountingConsole:
    return CountingConsole(file=io.StringIO(), highlight=False, soft_wrap=True, **kwargs)


def _events(args: dict[str, Any], envelope: dict[str, Any]) -> list[AgentEvent]:
    call = {"domain": "command", "operation": "run", "tool_name": "command_run", "args": args}
    return [
        AgentEvent(kind=AgentEventKind.TOOL_CALL, execution_id="e1", cycle=7,
                   data={"call": call}),
        AgentEvent(kind=AgentEventKind.TOOL_RESULT, execution_id="e1", cycle=7,
                   data={"call": call, "envelope": envelope}),
    ]


def _printed(console: CountingConsole, events: list[AgentEvent], verbose: bool = True) -> str:
    sink = LiveConsoleSink(console, verbose=verbose)
    for event in events:
        sink.emit(event)
    file = console.file
    assert isinstance(file, io.StringIO)
    return file.getvalue()


ENVELOPES = [
    {"ok": True, "result": {"exit_code": 0, "stdout": "done\n", "stderr": ""}},
    {"ok": True, "result": {"exit_code": 2, "stdout": "", "stderr": "boom\n"}},
    {"ok": True, "result": {"content": "x"}},
    {"ok": False, "error": {"code": "path_not_found", "message": "no such file: a.txt"}},
]


def test_a_step_is_written_without_rich_rendering_on_a_plain_console() -> None:
    console = _console()
    text = _printed(console, _events({"argv": ["true", "0"]}, ENVELOPES[0]), verbose=False)
    assert text == '    7 command.run {"argv": ["true", "0"]}\n      exit 0\n'
    assert console.rendered == 0


def test_a_line_rich_would_change_goes_through_rich() -> None:
    for args in ({"argv": ["echo", "[bold]x[/]"]}, {"argv": ["echo", ":smile:"]},
                 {"argv": ["printf", "a\tb\rc"]}, {"argv": ["echo", "a\\b"]}):
        console, reference = _console(), _console(record=True)
        events = _events(args, ENVELOPES[0])
        assert _printed(console, events) == _printed(reference, events)
        assert console.rendered == 1  # the call's line; its outcome is plain


def test_a_terminal_gets_rich() -> None:
    console = _console(force_terminal=True, color_system="standard")
    text = _printed(console, _events({"argv": ["true"]}, ENVELOPES[0]), verbose=False)
    assert "\x1b[" in text  # styled
    assert console.rendered == 2


_TEXT = st.lists(st.sampled_from(list("ab :[]/\\\t\r\n\x07\x1b-_é✓😀") + [
    ":smile:", ":thumbs_up:", "[bold]", "[/]", "[red]", ":-emoji:", "\\[", "http://h:80/x"]),
    max_size=12).map("".join)


@settings(max_examples=300, deadline=None)
@given(args=st.dictionaries(st.sampled_from(["argv", "path", "text"]), _TEXT, max_size=3),
       code=_TEXT, message=_TEXT, stdout=_TEXT, exit_code=st.sampled_from([0, 1, 127]))
def test_the_text_is_what_rich_prints(args: dict[str, str], code: str, message: str,
                                      stdout: str, exit_code: int) -> None:
    """Whatever the call's arguments, the error and the output hold, the plain console prints
    what rich prints (``record=True`` always renders through rich, as the sink did before)."""
    envelopes = [{"ok": False, "error": {"code": code, "message": message}},
                 {"ok": True, "result": {"exit_code": exit_code, "stdout": stdout,
                                         "stderr": message}}]
    for envelope in [*envelopes, *ENVELOPES]:
        events = _events(args, envelope)
        assert _printed(_console(), events) == _printed(_console(record=True), events)
