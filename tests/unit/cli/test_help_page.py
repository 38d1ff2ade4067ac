"""``studio --help`` drawn by services.cli.help_page is byte for byte typer's own page.

Each case runs in a subprocess, since typer reads its colour and width variables when its
renderer is imported: the page is drawn by both (``help_page.draw`` and
``typer.rich_utils.rich_format_help``) on the same group, and both outputs are compared.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

DRAW_BOTH = """
import contextlib, io, json, sys
import typer
from typer import rich_utils
from typer._click import Context
from services.cli import help_page
from services.cli.main import app

group = typer.main.get_command(app)
if sys.argv[1] == "changed":  # the positive control: a page that is not typer's
    group.help = "Something else entirely."
ctx = Context(group, info_name="studio")
ours, typers = io.StringIO(), io.StringIO()
assert help_page.can_draw(group, ctx)
with contextlib.redirect_stdout(ours):
    help_page.draw(group, ctx)
if sys.argv[1] == "changed":
    group.help = "Studio backend: run coding agents on repositories, confined and recorded."
with contextlib.redirect_stdout(typers):
    rich_utils.rich_format_help(obj=group, ctx=ctx, markup_mode="rich")
print(json.dumps({"ours": ours.getvalue(), "typer": typers.getvalue()}))
"""


def draw_both(case: str, **env: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items()
             if k not in {"FORCE_COLOR", "PY_COLORS", "GITHUB_ACTIONS", "TERMINAL_WIDTH",
                          "NO_COLOR", "COLUMNS"}}
    done = subprocess.run([sys.executable, "-c", DRAW_BOTH, case], capture_output=True,
                          text=True, timeout=120, check=True, env={**clean, **env})
    pages: dict[str, str] = json.loads(done.stdout)
    return pages


@pytest.mark.parametrize("env", [
    {"TERMINAL_WIDTH": "80"},
    {"TERMINAL_WIDTH": "52"},
    {"TERMINAL_WIDTH": "140"},
    {"COLUMNS": "120"},
    {"TERMINAL_WIDTH": "100", "FORCE_COLOR": "1"},
], ids=["80", "52", "140", "columns-120", "100-colour"])
def test_the_page_is_typers(env: dict[str, str]) -> None:
    pages = draw_both("studio", **env)
    assert "Run the agent loop" in pages["typer"] and "Commands" in pages["typer"]
    assert pages["ours"] == pages["typer"]
    if "FORCE_COLOR" in env:
        assert "\x1b[" in pages["ours"]


def test_the_comparison_can_fail() -> None:
    """Positive control: a different help text gives a different page."""
    pages = draw_both("changed", TERMINAL_WIDTH="80")
    assert "Something else entirely." in pages["ours"]
    assert pages["ours"] != pages["typer"]


def test_a_page_it_does_not_know_is_left_to_typer() -> None:
    import typer
    from typer._click import Context

    from services.cli import help_page
    from services.cli.main import app

    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    ctx = Context(group, info_name="studio")
    assert help_page.can_draw(group, ctx)
    group.epilog = "An epilog."
    assert not help_page.can_draw(group, ctx)
