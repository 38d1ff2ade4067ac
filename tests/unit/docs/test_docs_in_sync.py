"""The reference pages name every operation and every error code the code has."""

from __future__ import annotations

from pathlib import Path

from services.execution.errors import ErrorCode
from services.execution.tool_domains.registry import default_registry

DOCS = Path(__file__).resolve().parents[3] / "docs" / "sphinx"


def test_tool_domains_page_lists_every_operation_and_error_code() -> None:
    page = (DOCS / "tool_domains.rst").read_text()
    missing_ops = [s.dotted_name for s in default_registry().specs()
                   if f"``{s.dotted_name}``" not in page]
    missing_codes = [c.value for c in ErrorCode if f"``{c.value}``" not in page]
    assert missing_ops == [] and missing_codes == []


def test_every_page_is_reachable_from_the_index() -> None:
    index = (DOCS / "index.rst").read_text()
    assert ":glob:" in index  # every page joins the toctree
    assert (DOCS / "getting_started.rst").exists() and (DOCS / "tool_domains.rst").exists()
