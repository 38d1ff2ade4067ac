"""Print (or check) the values table of docs/sphinx/deploying_with_helm.rst from the chart's schema.

    python scripts/helm_values_table.py          # rewrite the table between its markers
    python scripts/helm_values_table.py --check  # exit 1 when the page is out of date

The table lists every leaf of helm/studio/values.schema.json: its dotted key, type, default (from
values.yaml) and description. tests/unit/helm checks that the page holds the current table.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "helm" / "studio"
PAGE = ROOT / "docs" / "sphinx" / "deploying_with_helm.rst"
BEGIN = ".. values-table-begin"
END = ".. values-table-end"


def _leaves(schema: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    properties = schema.get("properties")
    if schema.get("type") == "object" and properties:
        for key, sub in properties.items():
            yield from _leaves(sub, f"{prefix}.{key}" if prefix else key)
    else:
        yield prefix, schema


def _default(values: dict[str, Any], dotted: str) -> str:
    node: Any = values
    for part in dotted.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    text = json.dumps(node)
    return text if len(text) <= 60 else text[:57] + "..."


def _kind(schema: dict[str, Any]) -> str:
    if "enum" in schema:
        return " | ".join(str(v) for v in schema["enum"])
    kind = str(schema.get("type", "any"))
    bounds = [f">= {schema['minimum']}" if "minimum" in schema else "",
              f"<= {schema['maximum']}" if "maximum" in schema else ""]
    return " ".join([kind, *filter(None, bounds)])


def table() -> str:
    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    rows = [(f"``{key}``", _kind(sub), f"``{_default(values, key)}``",
             str(sub.get("description", "")).replace("\n", " "))
            for key, sub in _leaves(schema)]
    lines = [".. list-table::", "   :header-rows: 1", "   :widths: 25 15 20 40", "",
             "   * - Key", "     - Type", "     - Default", "     - Description"]
    for row in rows:
        lines.append(f"   * - {row[0]}")
        lines.extend(f"     - {cell}" for cell in row[1:])
    return "\n".join(lines) + "\n"


def page_with_table(page: str) -> str:
    head, _, rest = page.partition(BEGIN + "\n")
    _, _, tail = rest.partition(END + "\n")
    return f"{head}{BEGIN}\n\n{table()}\n{END}\n{tail}"


def main(argv: list[str]) -> int:
    page = PAGE.read_text()
    fresh = page_with_table(page)
    if "--check" in argv:
        if fresh != page:
            print(f"{PAGE}: the values table is out of date; run {Path(__file__).name}",
                  file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(fresh)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
