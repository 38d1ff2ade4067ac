"""``studio`` counting what its steps cost: ``python bench/step_calls.py [--cpu] OUT ARGS...``.

Runs the ``studio`` program with ``ARGS`` (``run ...``) and, from the loop's first model call
to its last, counts every call the interpreter makes (Python functions and built-ins, through
:func:`sys.setprofile`); writes the calls per step to ``OUT``. The count does not depend on the
machine's load, where CPU time does (``bench/product_path.py --calls``): it shows what a change
removed even when the CPU figures of one run move by a third from the next. The counting slows
the process down several times; its time figures mean nothing.

``--cpu``: no counting; writes instead the CPU time per step of the ``studio`` process itself
(:func:`time.process_time`, every thread) and of the commands it reaped (:func:`os.times`), in
milliseconds, over the same steps (``bench/product_path.py --cpu``): read inside the process at
the model calls, not sampled from outside.
"""

from __future__ import annotations

import atexit
import functools
import os
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

_calls = [0]
_marks: list[int] = []
_cpu: list[tuple[float, float]] = []


def _count(frame: FrameType, event: str, arg: Any) -> None:
    if event in ("call", "c_call"):
        _calls[0] += 1


def _instrument(cpu: bool) -> None:
    from services.execution import agent_runtime

    complete = agent_runtime.FrontierAgent._complete

    @functools.wraps(complete)
    async def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        if cpu:
            times = os.times()
            _cpu.append((time.process_time(), times.children_user + times.children_system))
        else:
            if not _marks:
                sys.setprofile(_count)
            _marks.append(_calls[0])
        return await complete(self, *args, **kwargs)

    agent_runtime.FrontierAgent._complete = counted  # type: ignore[method-assign]


def _write(out: Path) -> None:
    sys.setprofile(None)
    if _cpu:
        steps = len(_cpu) - 1
        own, children = (_cpu[-1][i] - _cpu[0][i] for i in (0, 1))
        out.write_text(f"{own * 1000 / steps:.3f} {children * 1000 / steps:.3f}\n" if steps > 0
                       else "nan nan\n")
        return
    steps = len(_marks) - 1
    out.write_text(f"{(_marks[-1] - _marks[0]) / steps:.0f}\n" if steps > 0 else "nan\n")


def main() -> None:
    args = sys.argv[1:]
    cpu = bool(args) and args[0] == "--cpu"
    if cpu:
        args = args[1:]
    out = Path(args[0])
    sys.argv = ["studio", *args[1:]]
    _instrument(cpu)
    atexit.register(_write, out)
    from services.cli.main import main as studio

    studio()


if __name__ == "__main__":
    main()
