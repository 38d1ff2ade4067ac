"""``studio`` counting the Python calls of its steps: ``python bench/step_calls.py OUT ARGS...``.

Runs the ``studio`` program with ``ARGS`` (``run ...``) and, from the loop's first model call
to its last, counts every call the interpreter makes (Python functions and built-ins, through
:func:`sys.setprofile`); writes the calls per step to ``OUT``. The count does not depend on the
machine's load, where CPU time does (``bench/product_path.py --calls``): it shows what a change
removed even when the CPU figures of one run move by a third from the next. The counting slows
the process down several times; its time figures mean nothing.
"""

from __future__ import annotations

import atexit
import functools
import sys
from pathlib import Path
from types import FrameType
from typing import Any

_calls = [0]
_marks: list[int] = []


def _count(frame: FrameType, event: str, arg: Any) -> None:
    if event in ("call", "c_call"):
        _calls[0] += 1


def _instrument() -> None:
    from services.execution import agent_runtime

    complete = agent_runtime.FrontierAgent._complete

    @functools.wraps(complete)
    async def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not _marks:
            sys.setprofile(_count)
        _marks.append(_calls[0])
        return await complete(self, *args, **kwargs)

    agent_runtime.FrontierAgent._complete = counted  # type: ignore[method-assign]


def _write(out: Path) -> None:
    sys.setprofile(None)
    steps = len(_marks) - 1
    out.write_text(f"{(_marks[-1] - _marks[0]) / steps:.0f}\n" if steps > 0 else "nan\n")


def main() -> None:
    out = Path(sys.argv[1])
    sys.argv = ["studio", *sys.argv[2:]]
    _instrument()
    atexit.register(_write, out)
    from services.cli.main import main as studio

    studio()


if __name__ == "__main__":
    main()
