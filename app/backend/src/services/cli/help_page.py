"""The help page of a command group (``studio --help``), drawn with rich as typer draws it.

typer's help renderer (``typer.rich_utils``) imports rich's Markdown and Traceback support at
module level, and with them markdown-it, pygments and attrs: about a fifth of ``studio --help``,
for a page that uses neither (its markup mode is ``rich``, pretty exceptions are off). This module
draws the same page from the same rich parts (console, theme, highlighters, padding, panels and
tables, with typer 0.29's styles), for the pages made only of what it knows: a usage line, the
help text, options that are plain flags and a list of commands in the default panel.
:func:`can_draw` says whether a group is such a page; any other page is left to typer.

``tests/unit/cli/test_help_page.py`` draws the ``studio`` page both ways, at several widths, in
colour and without, and requires the same bytes.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

from rich.align import Align
from rich.columns import Columns
from rich.console import Console, Group
from rich.highlighter import RegexHighlighter
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table
from rich.text import Text
from rich.theme import Theme
from typer.core import TyperGroup, TyperOption

if TYPE_CHECKING:
    from typer._click import Context

# typer.rich_utils' styles (typer 0.29)
THEME = {
    "option": "bold cyan", "switch": "bold green", "negative_option": "bold magenta",
    "negative_switch": "bold red", "types": "bold yellow", "types_sep": "dim",
    "usage": "yellow",
}
STYLE_USAGE_COMMAND = "bold"
STYLE_HELPTEXT = "dim"
STYLE_TYPES = "bold yellow"
STYLE_PANEL_BORDER = "dim"
STYLE_COMMANDS_FIRST_COLUMN = "bold cyan"
ANSI_PREFIX = "\033["


class OptionHighlighter(RegexHighlighter):
    highlights = [  # noqa: RUF012 - rich's class attribute
        r"(^|\W)(?P<switch>\-\w+)(?![a-zA-Z0-9])",
        r"(^|\W)(?P<option>\-\-[\w\-]+)(?![a-zA-Z0-9])",
        r"(?P<types>\<[^\>]+\>)",
        r"(?P<usage>Usage: )",
    ]


class NegativeOptionHighlighter(RegexHighlighter):
    highlights = [  # noqa: RUF012 - rich's class attribute
        r"(^|\W)(?P<negative_switch>\-\w+)(?![a-zA-Z0-9])",
        r"(^|\W)(?P<negative_option>\-\-[\w\-]+)(?![a-zA-Z0-9])",
    ]


class TypesHighlighter(RegexHighlighter):
    highlights = [  # noqa: RUF012 - rich's class attribute
        r"^(?P<types_sep>(\[|<))",
        r"(?P<types_sep>\|)",
        r"(?P<types_sep>(\]|>))(\.\.\.)?$",
    ]


highlighter = OptionHighlighter()
negative_highlighter = NegativeOptionHighlighter()
types_highlighter = TypesHighlighter()


def _console() -> Console:
    """typer's console: its theme and highlighter; colour forced or refused by the same
    variables; the width from ``TERMINAL_WIDTH``."""
    force: bool | None = True if (os.getenv("GITHUB_ACTIONS") or os.getenv("FORCE_COLOR")
                                  or os.getenv("PY_COLORS")) else None
    if os.getenv("_TYPER_FORCE_DISABLE_TERMINAL"):
        force = False
    width = os.getenv("TERMINAL_WIDTH")
    return Console(theme=Theme(THEME), highlighter=highlighter, color_system="auto",
                   force_terminal=force, width=int(width) if width else None)


def _flags(group: TyperGroup, ctx: Context) -> list[TyperOption] | None:
    """The group's visible options if every one is a plain flag this page draws, else None."""
    shown = [param for param in group.get_params(ctx) if not getattr(param, "hidden", False)]
    if not all(isinstance(param, TyperOption) for param in shown):
        return None
    options = [param for param in shown if isinstance(param, TyperOption)]
    for option in options:
        default = option._extract_default_help_str(ctx=ctx)
        if (option.required or option.secondary_opts or option.show_envvar
                or getattr(option, "rich_help_panel", None)
                or isinstance(option.show_default, str)
                or (default is not None and (option.show_default or ctx.show_default))
                or option._get_number_range_help_str()
                or any("--" not in opt for opt in option.opts)):
            return None
    return options


def can_draw(group: TyperGroup, ctx: Context) -> bool:
    """Whether this module draws ``group``'s page exactly as typer would."""
    if group.rich_markup_mode != "rich" or group.deprecated or group.epilog:
        return False
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command is not None and not command.hidden and (
                command.deprecated or getattr(command, "rich_help_panel", None)):
            return False
    return _flags(group, ctx) is not None


def _markup(text: str, style: str = "") -> Text:
    """typer's rich text: indentation removed, ANSI or rich markup read, options highlighted."""
    text = inspect.cleandoc(text)
    if ANSI_PREFIX in text:
        return highlighter(Text.from_ansi(text, style=style))
    return highlighter(Text.from_markup(text, style=style))


def _help_text(help_text: str) -> Iterator[Text]:
    first, *rest = inspect.cleandoc(help_text).partition("\f")[0].split("\n\n")
    if not first.startswith("\b"):
        first = first.replace("\n", " ")
    yield _markup(first.strip())
    if rest:
        yield Text("")
        yield _markup("\n\n".join(rest), STYLE_HELPTEXT)


def _options_panel(options: list[TyperOption], ctx: Context) -> Panel:
    table = Table(highlight=True, show_header=False, expand=True, box=None, show_lines=False,
                  leading=0, border_style=None, row_styles=None, pad_edge=False, padding=(0, 1))
    for option in options:
        types = Text(style=STYLE_TYPES, overflow="fold")
        shown_type = option.display_type_rich(ctx=ctx)
        if shown_type is not None:
            types.append(shown_type)
        paragraphs = [p.replace("\n", " ").strip() if not p.startswith("\b")
                      else "{}\n".format(p.strip("\b\n"))
                      for p in (option.help or "").split("\n\n")]
        described = [_markup("\n".join(paragraphs).strip())] if option.help else []
        table.add_row(highlighter(",".join(option.opts)), highlighter(""),
                      negative_highlighter(""), negative_highlighter(""),
                      types_highlighter(types), Columns(described))
    return Panel(table, border_style=STYLE_PANEL_BORDER, title="Options", title_align="left")


def _commands_panel(group: TyperGroup, ctx: Context) -> Panel | None:
    commands = [command for name in group.list_commands(ctx)
                if (command := group.get_command(ctx, name)) is not None and not command.hidden]
    table = Table(highlight=False, show_header=False, expand=True, box=None, show_lines=False,
                  leading=0, border_style=None, row_styles=None, pad_edge=False, padding=(0, 1))
    table.add_column(style=STYLE_COMMANDS_FIRST_COLUMN, no_wrap=True,
                     width=max((len(command.name or "") for command in commands), default=0))
    table.add_column("Description", justify="left", no_wrap=False, ratio=10)
    for command in commands:
        first = inspect.cleandoc(command.short_help or command.help or "").split("\n\n")[0]
        if first.startswith("\b"):
            first = first.replace("\b\n", "")
        table.add_row(Text(command.name or ""), _markup(first.strip()))
    if not table.row_count:
        return None
    return Panel(table, border_style=STYLE_PANEL_BORDER, title="Commands", title_align="left")


def draw(group: TyperGroup, ctx: Context) -> None:
    """Print ``group``'s help page on stdout (:func:`can_draw` must be true)."""
    options = _flags(group, ctx)
    assert options is not None
    console = _console()
    console.print(Padding(highlighter(group.get_usage(ctx)), 1), style=STYLE_USAGE_COMMAND)
    if group.help:
        console.print(Padding(Align(Group(*_help_text(group.help)), pad=False), (0, 1, 1, 1)))
    if options:
        console.print(_options_panel(options, ctx))
    commands = _commands_panel(group, ctx)
    if commands is not None:
        console.print(commands)
