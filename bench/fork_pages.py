"""Which pages a forked child holds of its own: copied from its parent, or new.

``/proc/<pid>/pagemap`` gives, for each virtual page of a process, whether it is present and
its physical frame (readable as root). A child forked from the fork server shares every page
of its parent until one of them writes to it; comparing the child's frame with its parent's at
the same address tells the three kinds apart:

* **shared**: same frame as the parent (what the fork shared and nobody wrote);
* **copied**: the parent has the page, the child a different frame (the child, or the parent,
  wrote to it: with CPython 3.11 a reference count, a specialized instruction, an allocation in
  a free block of the parent's heap or arenas);
* **new**: the parent has no page there (what the child mapped or grew after the fork).

Each kind is counted per mapping (``[heap]``, ``[anon]``: pymalloc's arenas and large
allocations, a library's data). ``bench/scale.py --pages`` prints it for each ``studio execute``
of the last round, against its fork server, at the child's last sample::

    python bench/scale.py --ns 8 --pages
"""

from __future__ import annotations

import os
import struct
from collections import Counter
from pathlib import Path

PAGE = os.sysconf("SC_PAGE_SIZE")
PRESENT = 1 << 63
FRAME = (1 << 55) - 1


def _mappings(pid: int) -> list[tuple[int, int, str]]:
    found = []
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        parts = line.split(maxsplit=5)
        low, high = (int(x, 16) for x in parts[0].split("-"))
        name = parts[5].strip() if len(parts) > 5 else "[anon]"
        found.append((low, high, name if name.startswith("[") else os.path.basename(name)))
    return found


def _entries(fd: int, low: int, high: int) -> tuple[int, ...]:
    data = os.pread(fd, (high - low) // PAGE * 8, low // PAGE * 8)
    return struct.unpack(f"{len(data) // 8}Q", data)


def classify(child: int, parent: int) -> Counter[tuple[str, str]]:
    """Pages of ``child`` by (mapping, kind): kind is shared, copied or new (above)."""
    counts: Counter[tuple[str, str]] = Counter()
    child_fd = os.open(f"/proc/{child}/pagemap", os.O_RDONLY)
    parent_fd = os.open(f"/proc/{parent}/pagemap", os.O_RDONLY)
    try:
        for low, high, name in _mappings(child):
            mine = _entries(child_fd, low, high)
            try:
                theirs = _entries(parent_fd, low, high)
            except OSError:
                theirs = ()
            for index, entry in enumerate(mine):
                if not entry & PRESENT:
                    continue
                other = theirs[index] if index < len(theirs) else 0
                if not other & PRESENT:
                    counts[(name, "new")] += 1
                elif other & FRAME == entry & FRAME:
                    counts[(name, "shared")] += 1
                else:
                    counts[(name, "copied")] += 1
    finally:
        os.close(child_fd)
        os.close(parent_fd)
    return counts


def report(children: list[Counter[tuple[str, str]]]) -> None:
    """The mean over ``children`` of each kind, and of copied and new pages per mapping."""
    if not children:
        print("    (no forked child was sampled)")
        return
    total: Counter[tuple[str, str]] = Counter()
    for counts in children:
        total.update(counts)

    def mb(pages: float) -> str:
        return f"{pages * PAGE / 2**20 / len(children):6.2f} MB"

    kinds: Counter[str] = Counter()
    for (_, kind), pages in total.items():
        kinds[kind] += pages
    print(f"    pages of each forked child ({len(children)} sampled, mean): "
          + ", ".join(f"{kind} {mb(kinds[kind]).strip()}" for kind in ("shared", "copied", "new")))
    for (name, kind), pages in total.most_common():
        if kind != "shared" and pages * PAGE / 2**20 / len(children) >= 0.1:
            print(f"      {mb(pages)}  {kind:6s} {name}")
