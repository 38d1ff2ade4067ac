"""``configure_logging`` sets the root level only when it changes.

``Logger.setLevel`` empties the level cache of every logger of the process; in a child of the
worker's fork server that writes into the page of each logger the server created, about 0.4 MB
copied per execution for the default level, which is Python's own (issue 39,
:doc:`benchmarks`). Each case runs in a subprocess: the logging configuration is the process's.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# a logger whose level cache is filled, then configure_logging(LEVEL): the root level after,
# and whether that logger's cache survived
PROBE = """
import json, logging, sys
from services.logs import configure_logging
some = logging.getLogger("studio.test.some")
some.isEnabledFor(logging.ERROR)
configure_logging(sys.argv[1])
print(json.dumps({"level": logging.getLogger().level, "cache": len(some._cache)}))
"""


def probe(level: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", PROBE, level], capture_output=True, text=True,
                          timeout=60, check=False)


def test_an_unchanged_level_leaves_the_loggers_alone() -> None:
    """Fails on main: the cache was emptied although the level stayed ``WARNING``."""
    done = probe("warning")
    assert json.loads(done.stdout) == {"level": 30, "cache": 1}


@pytest.mark.parametrize(("name", "number"), [("info", 20), ("DEBUG", 10), ("error", 40)])
def test_a_new_level_is_set_and_the_caches_emptied(name: str, number: int) -> None:
    """The control: another level is applied as before, and the caches emptied with it."""
    done = probe(name)
    assert json.loads(done.stdout) == {"level": number, "cache": 0}


def test_an_unknown_level_is_refused_as_before() -> None:
    done = probe("loud")
    assert done.returncode != 0
    assert "Unknown level: 'LOUD'" in done.stderr
