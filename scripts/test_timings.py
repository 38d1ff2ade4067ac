"""Sum a ``STUDIO_TEST_TIMINGS`` file (tests/timings.py): the slowest modules (wall-clock, and
the CPU the test's xdist worker and the children it reaped spent, where the file records it),
each xdist worker's busy time and span. ``python scripts/test_timings.py FILE [N]``."""

from __future__ import annotations

import sys
from collections import defaultdict


def main(path: str, top: int) -> None:
    per_module: dict[str, float] = defaultdict(float)
    cpu_module: dict[str, float] = defaultdict(float)
    child_module: dict[str, float] = defaultdict(float)
    per_worker: dict[str, float] = defaultdict(float)
    first: dict[str, float] = {}
    last: dict[str, float] = {}
    tests = 0
    failed: list[str] = []
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            worker, start_text, end_text, nodeid, *rest = line.rstrip("\n").split("\t")
            if rest[:1] == ["failed"]:
                failed.append(nodeid)
            start, end = float(start_text), float(end_text)
            module = nodeid.split("::", 1)[0]
            per_module[module] += end - start
            if len(rest) >= 3:
                cpu_module[module] += float(rest[1])
                child_module[module] += float(rest[2])
            per_worker[worker] += end - start
            first[worker] = min(first.get(worker, start), start)
            last[worker] = max(last.get(worker, end), end)
            tests += 1
    total = sum(per_module.values())
    cpu = sum(cpu_module.values()) + sum(child_module.values())
    print(f"{tests} tests, {total:.0f} s of test time, {cpu:.0f} s of CPU recorded")
    for worker in sorted(per_worker):
        span = last[worker] - first[worker]
        print(f"  {worker}: busy {per_worker[worker]:.0f} s over {span:.0f} s")
    for nodeid in failed:
        print(f"  FAILED {nodeid}")
    print(f"slowest {top} modules (wall s, own CPU s, children's CPU s):")
    for module, seconds in sorted(per_module.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {seconds:7.1f} {cpu_module[module]:7.1f} {child_module[module]:7.1f}  {module}")
    if cpu:
        print(f"most CPU, {top} modules (own + children's CPU s, wall s):")
        by_cpu = sorted(per_module, key=lambda m: -(cpu_module[m] + child_module[m]))[:top]
        for module in by_cpu:
            print(f"  {cpu_module[module] + child_module[module]:7.1f} "
                  f"{per_module[module]:7.1f}  {module}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 40)
