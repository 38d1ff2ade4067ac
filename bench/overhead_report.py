"""Rows, the printed table and the target verdicts of the step-overhead benchmark.

Targets (from the issue):

- codex and gemini: harness ms/step within ``FLOOR_FACTOR`` (2x) of the floor, every N and
  sandbox mode; and *flat*: in the longest run, the late window's step (last 10 steps) costs at
  most ``FLAT_FACTOR`` (1.5x) the early window's (first 10 steps), once the growth the floor
  itself shows on the same server (parsing a longer request) is taken off;
- claude: harness ms/step within ``CLAUDE_FACTOR`` (1.2x) of the bare SDK loop, every N.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from bench.overhead_common import WINDOW

FLOOR_FACTOR = 2.0
FLAT_FACTOR = 1.5
CLAUDE_FACTOR = 1.2


@dataclass(frozen=True)
class Row:
    """Medians over the repetitions of one (provider, sandbox, N) measure."""

    provider: str
    sandbox: str
    steps: int
    reference: str
    harness_ms: float
    reference_ms: float
    harness_early_ms: float
    harness_late_ms: float
    reference_early_ms: float
    reference_late_ms: float
    harness_cpu_ms: float = float("nan")
    reference_cpu_ms: float = float("nan")
    harness_runs_ms: list[float] = field(default_factory=list)
    reference_runs_ms: list[float] = field(default_factory=list)

    @property
    def ratio(self) -> float:
        return self.harness_ms / self.reference_ms if self.reference_ms else float("inf")

    @property
    def cpu_ratio(self) -> float:
        if not self.reference_cpu_ms:
            return float("inf")
        return self.harness_cpu_ms / self.reference_cpu_ms

    @property
    def excess_growth_ms(self) -> float:
        """Late minus early of the harness, less the floor's own growth (when it grew)."""
        floor_growth = max(0.0, self.reference_late_ms - self.reference_early_ms)
        return self.harness_late_ms - self.harness_early_ms - floor_growth


HEADER = ("provider", "sandbox", "N", "harness", "reference", "ratio", "vs", "harness e/l",
          "reference e/l", "cpu h/r")


def print_table(rows: list[Row]) -> None:
    """The table: ms/step medians, ratio, early/late window medians."""
    lines = [HEADER]
    for r in rows:
        lines.append((
            r.provider, r.sandbox, str(r.steps), f"{r.harness_ms:.2f}", f"{r.reference_ms:.2f}",
            f"{r.ratio:.2f}x", r.reference,
            f"{r.harness_early_ms:.2f}/{r.harness_late_ms:.2f}",
            f"{r.reference_early_ms:.2f}/{r.reference_late_ms:.2f}",
            f"{r.harness_cpu_ms:.2f}/{r.reference_cpu_ms:.2f}",
        ))
    widths = [max(len(line[i]) for line in lines) for i in range(len(HEADER))]
    print("per-step wall time in ms (median of the repetitions); e/l: median step of the first")
    print("and of the last 10 steps; cpu h/r: CPU ms per step (process, server thread and")
    print("subprocesses included) of the harness and of the reference")
    for index, line in enumerate(lines):
        print("  ".join(cell.rjust(w) if 2 <= i <= 5 else cell.ljust(w)
                        for i, (cell, w) in enumerate(zip(line, widths, strict=True))))
        if index == 0:
            print("  ".join("-" * w for w in widths))


def _ratio_check(target: str, rows: list[Row], factor: float) -> dict[str, Any]:
    worst = max(rows, key=lambda r: r.ratio)
    detail = ", ".join(f"{r.sandbox} N={r.steps}: {r.ratio:.2f}x (cpu {r.cpu_ratio:.2f}x)"
                       for r in rows)
    return {"target": target, "met": worst.ratio <= factor, "worst_ratio": round(worst.ratio, 3),
            "worst_cpu_ratio": round(max(r.cpu_ratio for r in rows), 3), "detail": detail}


def _flat_check(provider: str, rows: list[Row]) -> dict[str, Any]:
    longest = max(r.steps for r in rows)
    target = (f"{provider}: flat as the conversation grows (late <= {FLAT_FACTOR}x early beyond "
              "the floor's growth)")
    if longest < 2 * WINDOW:
        return {"target": target, "met": None,
                "detail": f"not measured: needs N >= {2 * WINDOW} (longest run: {longest})"}
    runs = [r for r in rows if r.steps == longest]
    parts = []
    met = True
    for r in runs:
        ok = r.excess_growth_ms <= (FLAT_FACTOR - 1.0) * r.harness_early_ms
        met = met and ok
        parts.append(f"{r.sandbox} N={r.steps}: early {r.harness_early_ms:.2f} -> late "
                     f"{r.harness_late_ms:.2f} ms (floor {r.reference_early_ms:.2f} -> "
                     f"{r.reference_late_ms:.2f})")
    return {"target": target, "met": met, "detail": "; ".join(parts)}


def verdicts(rows: list[Row]) -> list[dict[str, Any]]:
    """One verdict per target and provider."""
    by_provider: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        by_provider[row.provider].append(row)
    checks: list[dict[str, Any]] = []
    for provider, group in by_provider.items():
        if provider == "claude":
            checks.append(_ratio_check(f"claude: within {CLAUDE_FACTOR}x the bare SDK loop",
                                       group, CLAUDE_FACTOR))
            continue
        checks.append(_ratio_check(f"{provider}: within {FLOOR_FACTOR}x the floor", group,
                                   FLOOR_FACTOR))
        checks.append(_flat_check(provider, group))
    return checks
