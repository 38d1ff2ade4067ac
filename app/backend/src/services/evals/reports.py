"""Reports of an eval run: a text table (``studio eval show``), Markdown and an HTML page.

Every value from the data (task ids, cell names, test ids, error details) is text: escaped for
HTML (the page has no script and a Content-Security-Policy that allows none), a code span on
one line for Markdown, so a hostile test id or model name cannot add markup.
"""

from __future__ import annotations

import html

from services.evals.summary import CellSummary, RunSummary

MAX_TESTS_SHOWN = 20


def percent(value: float) -> str:
    return f"{value * 100:.1f}%"


def interval(cell: CellSummary) -> str:
    return f"[{percent(cell.ci_low)}, {percent(cell.ci_high)}]"


def money(value: float | None) -> str:
    return "-" if value is None else f"${value:.4f}"


def _cell_row(cell: CellSummary) -> list[str]:
    return [cell.cell, f"{cell.resolved}/{cell.graded}", percent(cell.pass_rate),
            interval(cell), money(cell.cost_per_resolved), money(cell.cost_per_task),
            str(cell.tokens), str(cell.turns)]


CELL_HEADER = ["cell", "resolved", "pass rate", "95% CI (Wilson)", "cost/resolved",
               "cost/task", "tokens", "turns"]
ITEM_HEADER = ["task", "cell", "#", "resolved", "failing tests", "cost", "turns", "error"]


def _item_rows(summary: RunSummary) -> list[list[str]]:
    rows = []
    for item in summary.items:
        grade = item.grade
        if grade is None:
            rows.append([item.key.task_id, item.key.cell, str(item.key.repeat), item.status,
                         "", "", "", ""])
            continue
        failing = ", ".join(grade.tests_failed[:MAX_TESTS_SHOWN])
        rows.append([item.key.task_id, item.key.cell, str(item.key.repeat),
                     "yes" if grade.resolved else "no", failing, money(grade.cost_usd),
                     str(grade.turns), grade.error_code or (grade.detail or "")[:120]])
    return rows


def _printable(text: str) -> str:
    """One line, no control characters (a terminal shows text, not escapes)."""
    return "".join(c if c.isprintable() else " " for c in text)


def _table(header: list[str], rows: list[list[str]]) -> str:
    rows = [[_printable(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    return "\n".join(line.rstrip() for line in lines)


def text_report(summary: RunSummary) -> str:
    run = summary.run
    head = f"eval {run.id}  suite {_printable(run.suite)}  status {run.status}"
    return "\n\n".join([head, _table(CELL_HEADER, [_cell_row(c) for c in summary.cells]),
                        _table(ITEM_HEADER, _item_rows(summary))]) + "\n"


def md(text: str) -> str:
    """``text`` as a Markdown code span on one line (no backtick, pipe or newline escapes)."""
    flat = " ".join(_printable(text).split()).replace("`", "'").replace("|", "/")
    return f"`{flat}`" if flat else ""


def _md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(md(c) for c in row) + " |" for row in rows)]


def markdown_report(summary: RunSummary) -> str:
    run = summary.run
    lines = [f"# Eval {md(run.id)}", "", f"Suite {md(run.suite)}, status {md(run.status)}.",
             "", "## Matrix", "", *_md_table(CELL_HEADER, [_cell_row(c) for c in summary.cells]),
             "", "## Tasks", "", *_md_table(ITEM_HEADER, _item_rows(summary))]
    return "\n".join(lines) + "\n"


CSP = "default-src 'none'; style-src 'unsafe-inline'"
_STYLE = ("body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin:1em 0}"
          "td,th{border:1px solid #999;padding:.3em .6em;text-align:left}")


def _html_table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>"
                   for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def html_report(summary: RunSummary) -> str:
    """A page on its own: the matrix (pass rate, interval, cost per resolved task), the tasks."""
    run = summary.run
    title = html.escape(f"Eval {run.id}: {run.suite}")
    return (f'<!doctype html><html><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            f"<title>{title}</title><style>{_STYLE}</style></head><body>"
            f"<h1>{title}</h1><p>{html.escape(f'status {run.status}')}</p><h2>Matrix</h2>"
            f"{_html_table(CELL_HEADER, [_cell_row(c) for c in summary.cells])}"
            f"<h2>Tasks</h2>{_html_table(ITEM_HEADER, _item_rows(summary))}</body></html>\n")
