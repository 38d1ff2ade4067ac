"""The ``studio`` command table (services.cli.main.COMMANDS) agrees with the commands themselves.

``studio --help`` lists the commands from the table without importing them; each command, once
imported, must have the name, first help paragraph and visibility the table shows for it.
"""

from __future__ import annotations

import typer
from typer._click import Context

from services.cli.lazy_group import CommandEntry, CommandSummary, LazyGroup
from services.cli.main import COMMANDS, app


def first_paragraph(text: str | None) -> str:
    return (text or "").split("\n\n")[0]


def test_every_entry_matches_its_command() -> None:
    group = typer.main.get_command(app)
    assert isinstance(group, LazyGroup)
    assert list(group.commands) == [entry.name for entry in COMMANDS]
    for entry in COMMANDS:
        assert isinstance(group.commands[entry.name], CommandSummary)  # nothing imported yet
        command = group.load(entry.name)
        assert command is not None and not isinstance(command, CommandSummary)
        assert command.name == entry.name
        assert first_paragraph(command.help) == entry.help, entry.name
        assert command.hidden == entry.hidden, entry.name
        assert group.commands[entry.name] is command  # loaded once


def test_a_wrong_entry_is_caught() -> None:
    """Positive control: an entry whose help differs from its command's does not match."""
    wrong = CommandEntry("db", "services.cli.db:app", "Something else.")
    command = wrong.load(rich_markup_mode="rich", suggest_commands=True,
                         pretty_exceptions_short=True)
    assert first_paragraph(command.help) != wrong.help


def test_resolving_a_command_loads_only_that_one() -> None:
    group = typer.main.get_command(app)
    assert isinstance(group, LazyGroup)
    with Context(group, info_name="studio") as ctx:
        name, command, rest = group.resolve_command(ctx, ["tools", "list"])
    assert (name, rest) == ("tools", ["list"])
    assert command is not None and not isinstance(command, CommandSummary)
    assert [n for n, c in group.commands.items() if not isinstance(c, CommandSummary)] == ["tools"]
