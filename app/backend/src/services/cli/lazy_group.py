"""A typer command group whose commands are imported only when one of them runs.

The ``studio`` group lists every command with its one-paragraph help (``studio --help``) from a
table (:class:`CommandEntry`), without importing a single command module; the module of the
command named on the command line is imported when click resolves it, and typer builds that
command exactly as it would have built it eagerly (same markup mode, same suggestions). So
``studio tools list`` imports the tools command and nothing of ``run``, ``eval`` or ``api``.

The table repeats each command's first help paragraph; ``tests/unit/cli/test_command_table.py``
loads every command and checks that the two agree (name, help, hidden), so they cannot drift.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import typer
from typer._click import Command, Context, HelpFormatter
from typer.core import HAS_RICH, TyperCommand, TyperGroup


@dataclass(frozen=True)
class CommandEntry:
    """One command of a lazy group: where it lives and what its help listing shows."""

    name: str
    # "module:attribute": a typer.Typer (a command group) or a command function.
    target: str
    # The first paragraph of the command's help, as typer takes it (docstring or Typer(help=)).
    help: str
    hidden: bool = False

    def load(self, *, rich_markup_mode: Any, suggest_commands: bool,
             pretty_exceptions_short: bool) -> Command:
        """Import the target and build its click command as typer does for a registered one."""
        module_name, _, attribute = self.target.partition(":")
        target = getattr(importlib.import_module(module_name), attribute)
        holder = typer.Typer(rich_markup_mode=rich_markup_mode, suggest_commands=suggest_commands,
                             pretty_exceptions_short=pretty_exceptions_short)
        if isinstance(target, typer.Typer):
            holder.add_typer(target, name=self.name)
        else:
            holder.command(self.name, hidden=self.hidden)(target)
        return typer.main.get_group(holder).commands[self.name]


class CommandSummary(TyperCommand):
    """What the help listing of a lazy group shows for a command not imported yet: its name,
    the first paragraph of its help, whether it is hidden. Never run: the group replaces it with
    the real command when click resolves the name."""

    def __init__(self, entry: CommandEntry, rich_markup_mode: Any) -> None:
        super().__init__(entry.name, help=entry.help, hidden=entry.hidden,
                         rich_markup_mode=rich_markup_mode)

    def invoke(self, ctx: Context) -> Any:
        raise RuntimeError(f"the command {self.name!r} was not loaded before it ran")


class LazyGroup(TyperGroup):
    """A typer group listing :attr:`entries` (in their order) and importing one when it runs.

    Subclass it with ``entries`` set, and give it to ``typer.Typer(cls=...)``."""

    entries: ClassVar[Sequence[CommandEntry]] = ()
    # The typer.Typer default; the commands' callbacks are built with it.
    pretty_exceptions_short: ClassVar[bool] = True

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        for entry in self.entries:
            self.commands.setdefault(entry.name, CommandSummary(entry, self.rich_markup_mode))

    def load(self, name: str) -> Command | None:
        """The real command ``name`` (imported now if it was not yet), or ``None``."""
        command = self.commands.get(name)
        if isinstance(command, CommandSummary):
            entry = next(e for e in self.entries if e.name == name)
            command = entry.load(rich_markup_mode=self.rich_markup_mode,
                                 suggest_commands=self.suggest_commands,
                                 pretty_exceptions_short=self.pretty_exceptions_short)
            self.commands[name] = command
        return command

    def format_help(self, ctx: Context, formatter: HelpFormatter) -> None:
        """typer's rich help page, drawn without typer's renderer when the page allows it
        (:mod:`services.cli.help_page`: the same bytes, fewer imports)."""
        from services.cli import help_page

        if HAS_RICH and help_page.can_draw(self, ctx):
            help_page.draw(self, ctx)
            return
        super().format_help(ctx, formatter)

    def resolve_command(self, ctx: Context,
                        args: list[str]) -> tuple[str | None, Command | None, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        if name is not None and isinstance(command, CommandSummary):
            command = self.load(name)
        return name, command, rest
