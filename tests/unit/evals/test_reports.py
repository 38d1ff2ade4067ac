"""Reports show data as text: a hostile test id or cell name adds no markup anywhere."""

from __future__ import annotations

import json

from services.evals.reports import html_report, markdown_report, text_report
from services.evals.summary import RunSummary
from tests.unit.evals.builders import item, summary

HOSTILE = '<script>alert(1)</script>|`x`\n# h'


def _hostile_summary() -> RunSummary:
    return summary("run-1", [item("t1", True, cost=0.5),
                             item("t2", False, cell=HOSTILE, failed=(HOSTILE, "test_b"))],
                   suite=HOSTILE)


def test_html_escapes_everything_and_allows_no_script() -> None:
    page = html_report(_hostile_summary())
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "default-src 'none'" in page
    assert page.count("<table>") == 2 and "95% CI (Wilson)" in page


def test_markdown_keeps_each_value_in_one_code_span() -> None:
    text = markdown_report(_hostile_summary())
    rows = [line for line in text.splitlines() if line.startswith("| `t2`")]
    assert len(rows) == 1 and rows[0].count("|") == 9  # no pipe from the data splits a cell
    assert "\n# h" not in text


def test_text_table_names_failing_tests_and_the_interval() -> None:
    text = text_report(summary("r", [item("ok", True), item("bad", False,
                                                           failed=("test_x.T.test_neg",))]))
    assert "test_x.T.test_neg" in text and "50.0%" in text and "[9.5%, 90.5%]" in text
    assert json.loads(json.dumps(summary("r", [item("ok", True)]).as_json()))["cells"]
