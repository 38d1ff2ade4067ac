"""``get_settings()`` is called at the composition roots only: the CLI's commands, the API's app
factory and the worker's child entry; everything below is given its settings.

One place below the roots still reads them itself, named here with its reason so that the list
can only shrink: ``db/migrate.py`` (where the Alembic scripts are, ``STUDIO_MIGRATIONS_DIR``,
read by module functions every caller of the migrations uses without settings).
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "app" / "backend" / "src" / "services"
ROOTS = ("cli/", "api/app.py", "worker/child.py")
NOT_YET = {"db/migrate.py"}


def _calls(tree: ast.AST) -> list[int]:
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "get_settings"]


def test_get_settings_is_called_at_the_roots_only() -> None:
    found = {}
    for path in sorted(SRC.rglob("*.py")):
        relative = path.relative_to(SRC).as_posix()
        lines = _calls(ast.parse(path.read_text()))
        if lines and not relative.startswith(ROOTS) and relative not in NOT_YET:
            found[relative] = lines
    assert found == {}
    for relative in NOT_YET:  # still there (else: drop it from the list)
        assert _calls(ast.parse((SRC / relative).read_text()))
    assert _calls(ast.parse("s = get_settings()")) == [1]  # the scan sees a call
