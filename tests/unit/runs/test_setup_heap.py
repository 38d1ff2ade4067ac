"""A loop freezes what its setup built (:func:`services.runs.loop.keep_setup_heap`): once, and
only in a process that froze its start-up heap (the ``studio`` program does)."""

from __future__ import annotations

import subprocess
import sys

FREEZE_COUNTS = """
import gc
from services.runs.loop import keep_setup_heap
keep_setup_heap()
alone = gc.get_freeze_count()  # nothing frozen before: the process is left as it is
gc.freeze()  # what services.cli.main.main does for the studio program
started = gc.get_freeze_count()
setup = [[i] for i in range(5000)]  # what a run's setup builds
keep_setup_heap()
first = gc.get_freeze_count()
later = [[i] for i in range(5000)]  # what the loop allocates, then a second loop
keep_setup_heap()
print(alone, started, first, gc.get_freeze_count())
"""


def test_the_setup_heap_is_frozen_once_where_the_start_up_heap_was() -> None:
    done = subprocess.run([sys.executable, "-c", FREEZE_COUNTS], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    alone, started, first, second = map(int, done.stdout.split())
    assert alone == 0  # a process that froze nothing (a test's) is not frozen by a loop
    assert first >= started + 5000  # the setup's objects joined the frozen heap
    assert second == first  # once per process: a later loop freezes nothing more


COUNTED_WALKS = """
import gc, sys
from services.cli import fork_server
from services.runs.loop import keep_setup_heap
{freeze}
started = gc.get_freeze_count()
setup = [[i] for i in range(5000)]
walks = []
sys.setprofile(lambda frame, event, arg: walks.append(1)
               if event == "c_call" and arg is gc.get_freeze_count else None)
keep_setup_heap()
sys.setprofile(None)
print(len(walks), gc.get_freeze_count() - started)
"""


def _walks(freeze: str) -> tuple[int, int]:
    done = subprocess.run([sys.executable, "-c", COUNTED_WALKS.format(freeze=freeze)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    walks, added = map(int, done.stdout.split())
    return walks, added


def test_a_fork_server_child_freezes_its_setup_without_counting_the_frozen_heap() -> None:
    # the fork server freezes its heap and says so: its children's first loop freezes the
    # setup without gc.get_freeze_count, which walks every frozen object (13 to 20 ms)
    walks, added = _walks("fork_server.freeze_heap()")
    assert walks == 0
    assert added >= 5000  # the setup's objects still joined the frozen heap


def test_a_process_that_only_froze_its_heap_is_still_recognised_by_the_count() -> None:
    # the control: the studio program (gc.freeze in services.cli.main.main) says nothing, and
    # the loop counts as before
    walks, added = _walks("gc.freeze()")
    assert walks == 1
    assert added >= 5000
