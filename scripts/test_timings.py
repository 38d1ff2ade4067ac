"""Sum a ``STUDIO_TEST_TIMINGS`` file (tests/timings.py): the slowest modules, each xdist worker's
busy time and span, and the heavy group's share. ``python scripts/test_timings.py FILE [N]``."""

from __future__ import annotations

import sys
from collections import defaultdict


def main(path: str, top: int) -> None:
    per_module: dict[str, float] = defaultdict(float)
    per_worker: dict[str, float] = defaultdict(float)
    first: dict[str, float] = {}
    last: dict[str, float] = {}
    tests = 0
    failed: list[str] = []
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            worker, start_text, end_text, nodeid, *outcome = line.rstrip("\n").split("\t")
            if outcome == ["failed"]:
                failed.append(nodeid)
            start, end = float(start_text), float(end_text)
            module = nodeid.split("::", 1)[0]
            per_module[module] += end - start
            per_worker[worker] += end - start
            first[worker] = min(first.get(worker, start), start)
            last[worker] = max(last.get(worker, end), end)
            tests += 1
    total = sum(per_module.values())
    print(f"{tests} tests, {total:.0f} s of test time")
    for worker in sorted(per_worker):
        span = last[worker] - first[worker]
        print(f"  {worker}: busy {per_worker[worker]:.0f} s over {span:.0f} s")
    for nodeid in failed:
        print(f"  FAILED {nodeid}")
    print(f"slowest {top} modules:")
    for module, seconds in sorted(per_module.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {seconds:7.1f} s  {module}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 40)
